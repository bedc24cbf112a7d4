package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// Streams run concurrently: rank 0's Plan on one stream waits for a flag
// that rank 1's Plan, launched later on another stream, raises (on one
// stream it would deadlock until the timeout). Each stream stays in order.
func TestStreamsRunConcurrently(t *testing.T) {
	ranks := newRanks(t, 2, 10*time.Second)
	rk := ranks[0]
	a, b := NewStream(), NewStream()
	require.NotZero(t, a)
	require.NotEqual(t, a, b)
	waiter, notifier := flagPlans(2)
	require.NoError(t, ranks[0].Launch(waiter, nil, a))
	require.NoError(t, ranks[1].Launch(notifier, nil, b))
	require.NoError(t, SynchronizeStream(a))
	require.NoError(t, SynchronizeStream(b))

	// In order on one stream: copies chained through recv.
	bufs := make([][]byte, 5)
	for i := range bufs {
		bufs[i] = make([]byte, 100)
	}
	copy(bufs[0], pattern(0, 0, 100))
	for i := 1; i < len(bufs); i++ {
		var p planBuilder
		p.worker(snac.SendChannel(0), 0, copyStep(recvRef(0), sendRef(0), 100, 0))
		p.p.NRanks = 2
		require.NoError(t, rk.Launch(&p.p, []atom.Buffers{{Send: addr(bufs[i-1]), Recv: addr(bufs[i])}}, a))
	}
	require.NoError(t, SynchronizeStream(a))
	require.Equal(t, bufs[0], bufs[len(bufs)-1])
	require.NoError(t, DestroyStream(a))
	require.NoError(t, DestroyStream(b))
	require.ErrorIs(t, SynchronizeStream(a), errs.ErrInvalidArgument)
	require.ErrorIs(t, rk.Launch(waiter, nil, a), errs.ErrInvalidArgument)
}

// flagPlans: rank 0's waiter waits for the flag rank 1's notifier raises.
func flagPlans(nranks int) (waiter, notifier *snac.Plan) {
	slot := snac.FlagSlot(snac.RecvChannel(1), snac.FlagReady, 1, 0)
	var w, n planBuilder
	w.worker(snac.RecvChannel(1), 0, waitStep(slot, 1, 9))
	n.worker(snac.SendChannel(0), 0, notifyStep(0, slot, 1, 9))
	w.p.NRanks, n.p.NRanks = nranks, nranks
	return &w.p, &n.p
}

// One rank's Plans run in launch order across streams, as NCCL runs one
// communicator's calls: a copy launched on stream b reads what the rank's
// copy launched before it on stream a writes, though stream a is held up
// (by another communicator's Plan waiting for a flag) and b is free.
func TestRankRunsInLaunchOrderAcrossStreams(t *testing.T) {
	blockers := newRanks(t, 2, 10*time.Second)
	rk := newRanks(t, 1, 10*time.Second)[0]
	a, b, c := NewStream(), NewStream(), NewStream()
	for _, s := range []uintptr{a, b, c} {
		t.Cleanup(func() { DestroyStream(s) })
	}
	const n = 1000
	in, mid := pattern(1, 2, n), make([]byte, n)
	// out lies outside Go's heap, as shared memory does: the flag that orders
	// the copies lives in a memfd, whose atomics the race detector does
	// not see, so it would take the early look at a heap out for a race.
	out, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(out) })
	copyPlan := func() *snac.Plan {
		var p planBuilder
		p.worker(snac.SendChannel(0), 0, copyStep(recvRef(0), sendRef(0), n, 0))
		p.p.NRanks = 1
		return &p.p
	}
	waiter, notifier := flagPlans(2)
	require.NoError(t, blockers[0].Launch(waiter, nil, a))
	require.NoError(t, rk.Launch(copyPlan(), []atom.Buffers{{Send: addr(in), Recv: addr(mid)}}, a))
	require.NoError(t, rk.Launch(copyPlan(), []atom.Buffers{{Send: addr(mid), Recv: addr(out)}}, b))
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, make([]byte, n), out, "the second copy ran before the first")
	require.NoError(t, blockers[1].Launch(notifier, nil, c))
	for _, s := range []uintptr{a, b, c} {
		require.NoError(t, SynchronizeStream(s))
	}
	require.Equal(t, in, out)
}
