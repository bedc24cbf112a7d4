package cuda

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/snac"
)

func TestStatusError(t *testing.T) {
	word := func(code, worker, step, slot uint64) uint64 { return code<<56 | worker<<48 | step<<32 | slot }
	for _, tc := range []struct {
		word uint64
		want *errs.Error
		text string
	}{
		{word(statusTimeout, 3, 7, 1234), errs.ErrTimeout, "worker 3 step 7 slot 1234"},
		{word(statusAborted, 0, 0, 0), errs.ErrAborted, "rank 1"},
		{word(statusMismatch, 63, 65535, 9), errs.ErrMismatch, "disagree"},
		{word(statusBadRef, 1, 2, 0), errs.ErrInternal, "Ref"},
		{word(99, 1, 2, 0), errs.ErrInternal, "unknown status"},
	} {
		err := statusError(tc.word, 1)
		require.True(t, errors.Is(err, tc.want), "%v", err)
		require.Contains(t, err.Error(), tc.text)
	}
	require.NoError(t, statusError(0, 0))
}

// A kernel wait ended by PeerGone's bit names why the rank it waited for
// is gone (any gone rank for a packet wait, whose word says slot 0); one
// ended by Abort stays an abort. The abort word holds the bits the kernel
// reads: abortAll for Abort, bit q for rank q.
func TestAsyncErrorOfGoneRanks(t *testing.T) {
	words := make([]uint64, 2) // [0:4] abort word, [8:16] status word
	r := &Rank{topo: snac.Topology{NRanks: 3, Rank: 0}, host: hostMapped{host: unsafe.Pointer(&words[0])}}
	abortWord := func() uint32 { return atomic.LoadUint32((*uint32)(r.host.host)) }
	cause := errs.New(errs.ErrRemote, "rank 2's process exited (test)")
	r.PeerGone(2, cause)
	require.Equal(t, uint32(1<<2), abortWord())
	require.NoError(t, r.AsyncError())

	aborted := func(slot uint32) uint64 { return statusAborted<<56 | 1<<48 | 4<<32 | uint64(slot) }
	for _, slot := range []uint32{snac.FlagSlot(snac.Collective, snac.FlagReady, 2, 3), 0} {
		atomic.StoreUint64(&words[1], aborted(slot))
		err := r.AsyncError()
		require.ErrorIs(t, err, cause, "slot %d", slot)
		require.Equal(t, errs.RemoteError, errs.CodeOf(err))
		require.Contains(t, err.Error(), "worker 1 step 4")
	}

	r.PeerGone(-1, errs.New(errs.ErrRemote, "the rendezvous is gone (test)"))
	require.Equal(t, uint32(1<<1|1<<2), abortWord(), "every other rank, never this one")
	r.Abort()
	require.Equal(t, uint32(abortAll|1<<1|1<<2), abortWord())
	err := r.AsyncError()
	require.ErrorIs(t, err, errs.ErrAborted)
	require.NotErrorIs(t, err, cause)
}
