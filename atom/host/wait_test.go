package host

import (
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
