package host

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"purlin/errs"
	"purlin/snac"
)

// notify writes the step's check word into the peer's flag slot, then
// raises the peer's flag to epoch+Delta, both at the value's SignalIndex.
// Go's atomics are sequentially consistent, so the store is a release: a
// waiter that sees the flag sees the check word and everything written
// before.
func (x *worker) notify(s *snac.Step) error {
	if int(s.Peer) >= len(x.r.syms) || s.Slot >= snac.NumSlots {
		return errs.New(errs.ErrInternal, "notify of rank %d slot %d: out of range", s.Peer, s.Slot)
	}
	peer := x.r.syms[s.Peer]
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
	me := x.r.syms[x.r.topo.Rank]
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

// Backoff schedule of every wait: spin, then yield, then sleep in growing
// steps. Many ranks' workers may share few cores, so a waiter must get off
// the CPU soon, but the first few polls stay hot for small messages.
const (
	spinPolls  = 64
	yieldPolls = 256
	minSleep   = 1 * time.Microsecond
	maxSleep   = 100 * time.Microsecond
)

// backoff is one wait's state; its zero value starts a wait.
type backoff struct {
	polls    int
	sleep    time.Duration
	deadline time.Time
	lastLook bool // src was seen gone: the condition gets one more look
}

// pause is called each time the awaited condition is still false; src is
// the rank whose write would satisfy it. It returns errs.ErrAborted once
// the rank is aborted (or broken by an earlier error), src's cause once src
// is gone and the condition, looked at once more after that was seen, still
// is false (what src wrote before it went is in memory by then), and
// errs.ErrTimeout past the deadline; what describes the wait.
func (b *backoff) pause(r *Rank, src int, what func() string) error {
	if r.stop.Load() {
		if r.aborted.Load() {
			return errs.New(errs.ErrAborted, "host rank %d: aborted while waiting for %s", r.topo.Rank, what())
		}
		return errs.New(errs.ErrAborted, "host rank %d: gave up waiting for %s after an earlier error", r.topo.Rank, what())
	}
	if cause := r.goneCause(src); cause != nil {
		if b.lastLook {
			return fmt.Errorf("host rank %d: gave up waiting for %s: %w", r.topo.Rank, what(), cause)
		}
		b.lastLook = true
		return nil
	}
	b.polls++
	switch {
	case b.polls < spinPolls:
		return nil
	case b.polls == spinPolls:
		b.deadline = time.Now().Add(r.timeout)
		return nil
	case b.polls < yieldPolls:
		runtime.Gosched()
	default:
		if b.sleep < maxSleep {
			b.sleep = max(minSleep, b.sleep*2)
		}
		time.Sleep(min(b.sleep, maxSleep))
	}
	if time.Now().After(b.deadline) {
		return errs.New(errs.ErrTimeout, "host rank %d: timed out after %v waiting for %s", r.topo.Rank, r.timeout, what())
	}
	return nil
}
