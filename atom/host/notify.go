package host

import (
	"fmt"
	"sync/atomic"

	"purlin/errs"
	"purlin/snac"
)

// notify writes the step's check word into the peer's flag slot, then
// raises the peer's flag to epoch+Delta, both at the value's SignalIndex.
// Go's atomics are sequentially consistent, so the store is a release: a
// waiter that sees the flag sees the check word and everything written
// before.
func (x *worker) notify(s *snac.Step) error {
	if int(s.Peer) >= len(x.r.segs) || s.Slot >= snac.NumSlots {
		return errs.New(errs.ErrInternal, "notify of rank %d slot %d: out of range", s.Peer, s.Slot)
	}
	peer := x.r.segs[s.Peer]
	v := uint64(x.target(s))
	at := snac.SignalIndex(s.Slot, v)
	atomic.StoreUint64(&peer.checks[at], s.Check)
	atomic.StoreUint64(&peer.flags[at], v)
	return nil
}

// wait blocks, bounded, until this rank's flag Slot reaches epoch+Delta (a
// target <= 0 is met at once), then compares the check word.
func (x *worker) wait(s *snac.Step) error {
	if s.Slot >= snac.NumSlots {
		return errs.New(errs.ErrInternal, "wait on slot %d: out of range", s.Slot)
	}
	want := x.target(s)
	if want <= 0 {
		return nil
	}
	me := x.r.segs[x.r.topo.Rank]
	at := snac.SignalIndex(s.Slot, uint64(want))
	flag := &me.flags[at]
	var b backoff
	for atomic.LoadUint64(flag) < uint64(want) {
		if err := b.pause(x.r, snac.SlotSource(s.Slot), func() string {
			return fmt.Sprintf("flag slot %d (from rank %d) to reach %d, at %d",
				s.Slot, snac.SlotSource(s.Slot), want, atomic.LoadUint64(flag))
		}); err != nil {
			return err
		}
	}
	if got := atomic.LoadUint64(&me.checks[at]); got != s.Check {
		return errs.New(errs.ErrMismatch, "%s: flag slot %d (from rank %d) carries check %#x, this rank's call has %#x",
			errs.Disagree, s.Slot, snac.SlotSource(s.Slot), got, s.Check)
	}
	return nil
}
