package host

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

func waitOnlyPlan(slot uint32, check uint64) *snac.Plan {
	var b planBuilder
	b.worker(snac.Collective, 0, waitStep(slot, 1, check))
	b.p.NRanks = 2
	return &b.p
}

// A flag nobody raises: the wait times out, the rank is broken, and later
// Launches fail at once with the same error.
func TestWaitTimesOut(t *testing.T) {
	ranks := newRanks(t, 2, 50*time.Millisecond)
	start := time.Now()
	require.NoError(t, ranks[0].Launch(waitOnlyPlan(snac.FlagSlot(0, snac.FlagReady, 1, 0), 1), nil, 0))
	err := ranks[0].Synchronize()
	require.ErrorIs(t, err, errs.ErrTimeout)
	require.Contains(t, err.Error(), "from rank 1")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, err, ranks[0].AsyncError())
	require.Equal(t, err, ranks[0].Launch(waitOnlyPlan(0, 1), nil, 0))
	require.NoError(t, ranks[1].AsyncError())
}

// Abort from another goroutine ends a wait that would last a minute.
func TestAbortUnblocksWait(t *testing.T) {
	ranks := newRanks(t, 2, time.Minute)
	for w := range 3 { // several waiting workers, on two streams
		s := NewStream()
		defer DestroyStream(s)
		var b planBuilder
		b.worker(snac.RecvChannel(1), uint16(0), waitStep(snac.FlagSlot(snac.RecvChannel(1), snac.FlagReady, 1, w), 1, 1))
		b.p.NRanks = 2
		require.NoError(t, ranks[0].Launch(&b.p, nil, s))
	}
	time.AfterFunc(50*time.Millisecond, ranks[0].Abort)
	start := time.Now()
	err := ranks[0].Synchronize()
	require.ErrorIs(t, err, errs.ErrAborted)
	require.Less(t, time.Since(start), 5*time.Second)
}

// Ranks that notify with another check word than the waiter expects
// disagree on the call.
func TestCheckWordMismatch(t *testing.T) {
	ranks := newRanks(t, 2, 10*time.Second)
	slot := snac.FlagSlot(snac.Collective, snac.FlagReady, 1, 0)
	var b planBuilder
	b.worker(snac.Collective, 0, notifyStep(0, slot, 1, 0x1111))
	b.p.NRanks = 2
	require.NoError(t, ranks[1].Launch(&b.p, nil, 0))
	require.NoError(t, ranks[0].Launch(waitOnlyPlan(slot, 0x2222), nil, 0))
	err := ranks[0].Synchronize()
	require.ErrorIs(t, err, errs.ErrMismatch)
	require.Equal(t, errs.InvalidUsage, errs.CodeOf(err))
	require.NoError(t, ranks[1].Synchronize())
}

// A packet of this call whose check differs is a mismatch too.
func TestPacketCheckMismatch(t *testing.T) {
	ranks := newRanks(t, 2, 10*time.Second)
	const size = 20
	send, recv := pattern(1, 0, size), make([]byte, size)
	topo := ranks[0].topo
	var w planBuilder
	w.worker(snac.Collective, 0, copyStep(packetRef(topo, 0, 1), sendRef(0), size, 0xaaaa))
	w.p.NRanks = 2
	var r planBuilder
	r.worker(snac.Collective, 0, copyStep(recvRef(0), packetRef(topo, 0, 1), size, 0xbbbb))
	r.p.NRanks = 2
	require.NoError(t, ranks[1].Launch(&w.p, []atom.Buffers{{Send: addr(send)}}, 0))
	require.NoError(t, ranks[0].Launch(&r.p, []atom.Buffers{{Recv: addr(recv)}}, 0))
	require.ErrorIs(t, ranks[0].Synchronize(), errs.ErrMismatch)
	require.NoError(t, ranks[1].Synchronize())
}

// A gone rank fails only the waits that what it wrote does not satisfy,
// promptly, with its cause; waits on live ranks and on the rank's own
// workers go on.
func TestPeerGone(t *testing.T) {
	const n, size = 3, 20
	cause := errs.New(errs.ErrRemote, "rank 1's process exited (test)")
	from := func(src, worker int) uint32 { return snac.FlagSlot(snac.Collective, snac.FlagReady, src, worker) }
	plan := func(worker uint16, steps ...snac.Step) *snac.Plan {
		var b planBuilder
		b.worker(snac.Collective, worker, steps...)
		b.p.NRanks = n
		return &b.p
	}
	launch := func(t *testing.T, r *Rank, p *snac.Plan, bufs ...atom.Buffers) {
		s := NewStream()
		t.Cleanup(func() { DestroyStream(s) })
		require.NoError(t, r.Launch(p, bufs, s))
	}
	// finishes runs f and checks it ends well before the minute-long timeout.
	finishes := func(t *testing.T, f func() error) error {
		start := time.Now()
		err := f()
		require.Less(t, time.Since(start), 10*time.Second)
		return err
	}
	send, recv := pattern(1, 0, size), make([]byte, size)

	for _, tc := range []struct {
		name string
		gone int
		run  func(t *testing.T, ranks []*Rank, topo snac.Topology) error // rank 0's outcome
	}{
		{"its flag arrived", 1, func(t *testing.T, ranks []*Rank, _ snac.Topology) error {
			launch(t, ranks[1], plan(0, notifyStep(0, from(1, 0), 1, 7)))
			require.NoError(t, ranks[1].Synchronize())
			ranks[0].PeerGone(1, cause)
			launch(t, ranks[0], plan(0, waitStep(from(1, 0), 1, 7)))
			return ranks[0].Synchronize()
		}},
		{"its packets arrived", 1, func(t *testing.T, ranks []*Rank, topo snac.Topology) error {
			launch(t, ranks[1], plan(0, copyStep(packetRef(topo, 0, 1), sendRef(0), size, 7)), atom.Buffers{Send: addr(send)})
			require.NoError(t, ranks[1].Synchronize())
			ranks[0].PeerGone(1, cause)
			launch(t, ranks[0], plan(0, copyStep(recvRef(0), packetRef(topo, 0, 1), size, 7)), atom.Buffers{Recv: addr(recv)})
			err := ranks[0].Synchronize()
			require.Equal(t, send, recv)
			return err
		}},
		{"a live rank's flag comes later", 1, func(t *testing.T, ranks []*Rank, _ snac.Topology) error {
			launch(t, ranks[0], plan(0, waitStep(from(2, 0), 1, 7)))
			ranks[0].PeerGone(1, cause)
			time.Sleep(20 * time.Millisecond) // the wait polls with rank 1 gone
			launch(t, ranks[2], plan(0, notifyStep(0, from(2, 0), 1, 7)))
			return ranks[0].Synchronize()
		}},
		{"a live rank's packets come later", 1, func(t *testing.T, ranks []*Rank, topo snac.Topology) error {
			launch(t, ranks[0], plan(0, copyStep(recvRef(0), packetRef(topo, 0, 2), size, 7)), atom.Buffers{Recv: addr(recv)})
			ranks[0].PeerGone(1, cause)
			time.Sleep(20 * time.Millisecond)
			launch(t, ranks[2], plan(0, copyStep(packetRef(topo, 0, 2), sendRef(0), size, 7)), atom.Buffers{Send: addr(send)})
			return ranks[0].Synchronize()
		}},
		{"any rank gone spares the rank's own workers", -1, func(t *testing.T, ranks []*Rank, _ snac.Topology) error {
			// The rank's Plans run one at a time (atom.Rank), so its own
			// worker's notify is written here, as that worker would.
			launch(t, ranks[0], plan(0, waitStep(from(0, 1), 1, 7)))
			ranks[0].PeerGone(-1, cause)
			time.Sleep(20 * time.Millisecond)
			me, at := ranks[0].syms[0], snac.SignalIndex(from(0, 1), 1)
			atomic.StoreUint64(&me.checks[at], 7)
			atomic.StoreUint64(&me.flags[at], 1)
			return ranks[0].Synchronize()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ranks := newRanks(t, n, time.Minute)
			clear(recv)
			require.NoError(t, finishes(t, func() error { return tc.run(t, ranks, ranks[0].topo) }))
			require.NoError(t, ranks[0].AsyncError())
		})
	}

	for _, tc := range []struct {
		name string
		gone int
		wait func(topo snac.Topology) (*snac.Plan, []atom.Buffers)
	}{
		{"its flag never came", 1, func(snac.Topology) (*snac.Plan, []atom.Buffers) {
			return plan(0, waitStep(from(1, 0), 1, 7)), nil
		}},
		{"its packets never came", 1, func(topo snac.Topology) (*snac.Plan, []atom.Buffers) {
			return plan(0, copyStep(recvRef(0), packetRef(topo, 0, 1), size, 7)), []atom.Buffers{{Recv: addr(recv)}}
		}},
		{"any rank gone", -1, func(snac.Topology) (*snac.Plan, []atom.Buffers) {
			return plan(0, waitStep(from(2, 0), 1, 7)), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ranks := newRanks(t, n, time.Minute)
			p, bufs := tc.wait(ranks[0].topo)
			launch(t, ranks[0], p, bufs...)
			time.AfterFunc(20*time.Millisecond, func() { ranks[0].PeerGone(tc.gone, cause) })
			err := finishes(t, ranks[0].Synchronize)
			require.ErrorIs(t, err, cause)
			require.Equal(t, errs.RemoteError, errs.CodeOf(err))
			require.Contains(t, err.Error(), "gave up waiting")
			require.ErrorIs(t, ranks[0].Launch(p, bufs, 0), cause, "the rank is broken from then on")
		})
	}
}
