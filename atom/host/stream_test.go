package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// Streams run concurrently: a Plan on one stream waits for a flag that a
// Plan launched later on another stream raises (on one stream it would
// deadlock until the timeout). Each stream stays in order.
func TestStreamsRunConcurrently(t *testing.T) {
	ranks := newRanks(t, 1, 10*time.Second)
	rk := ranks[0]
	a, b := NewStream(), NewStream()
	require.NotZero(t, a)
	require.NotEqual(t, a, b)
	slot := snac.FlagSlot(snac.RecvChannel(0), snac.FlagReady, 0, 0)
	var waiter, notifier planBuilder
	waiter.worker(snac.RecvChannel(0), 0, waitStep(slot, 1, 9))
	waiter.p.NRanks = 1
	notifier.worker(snac.SendChannel(0), 0, notifyStep(0, slot, 1, 9))
	notifier.p.NRanks = 1
	require.NoError(t, rk.Launch(&waiter.p, nil, a))
	require.NoError(t, rk.Launch(&notifier.p, nil, b))
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
		p.p.NRanks = 1
		require.NoError(t, rk.Launch(&p.p, []atom.Buffers{{Send: addr(bufs[i-1]), Recv: addr(bufs[i])}}, a))
	}
	require.NoError(t, SynchronizeStream(a))
	require.Equal(t, bufs[0], bufs[len(bufs)-1])
	require.NoError(t, DestroyStream(a))
	require.NoError(t, DestroyStream(b))
	require.ErrorIs(t, SynchronizeStream(a), errs.ErrInvalidArgument)
	require.ErrorIs(t, rk.Launch(&waiter.p, nil, a), errs.ErrInvalidArgument)
}
