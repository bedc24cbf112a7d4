package cuda

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// TestGPUFollow: after Follow(b, a), waiting for stream b waits for the
// work launched on a before it (comm joins a group's streams so). Rank 0's
// Plan on a waits for rank 1's flag, raised 200 ms later, then copies;
// waiting for b must find the copy done. A stream in a capture cannot follow
// one outside it: an invalid usage, and the capture goes on.
func TestGPUFollow(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(5*time.Second))
	g := ranks[0]
	a, b := g.stream, g.newStream(t)
	const check = 0x70110
	slot := snac.FlagSlot(snac.Collective, snac.FlagReady, 1, 0)
	waiter := workersPlan(2, []snac.Step{{Verb: snac.Wait, Slot: slot, Delta: 1, Check: check},
		{Verb: snac.Copy, Bytes: 16, Dst: snac.Ref{Space: snac.SpaceRecv}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend}}}})
	raiser := workersPlan(2, []snac.Step{{Verb: snac.Notify, Peer: 0, Slot: slot, Delta: 1, Check: check}})
	send, recv := g.alloc(t, 16), g.alloc(t, 16)
	input := []byte("follow the joins")
	g.upload(t, send, input)

	require.NoError(t, g.Launch(waiter, []atom.Buffers{{Send: uintptr(send), Recv: uintptr(recv)}}, uintptr(a)))
	require.NoError(t, g.Follow(uintptr(b), uintptr(a)))
	start := time.Now()
	go func() {
		time.Sleep(200 * time.Millisecond)
		ranks[1].Launch(raiser, nil, uintptr(ranks[1].stream))
	}()
	g.syncStream(t, b)
	require.Greater(t, time.Since(start), 150*time.Millisecond, "b waited for a's Plan")
	require.Equal(t, input, g.download(t, recv, 16))
	ranks[1].sync(t)
	require.NoError(t, g.AsyncError())
	require.NoError(t, ranks[1].AsyncError())

	require.NoError(t, inContext(g.ctx, func() error {
		if err := cuErr(driver.StreamBeginCapture(a, streamCaptureModeThreadLocal), "cuStreamBeginCapture"); err != nil {
			return err
		}
		err := g.Follow(uintptr(a), uintptr(b))
		var graph uintptr
		endErr := cuErr(driver.StreamEndCapture(a, &graph), "cuStreamEndCapture")
		if graph != 0 {
			driver.GraphDestroy(graph)
		}
		require.True(t, errors.Is(err, errs.ErrInvalidUsage), "a captured stream following an eager one: %v", err)
		return endErr
	}))
}
