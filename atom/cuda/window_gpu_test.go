package cuda

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"purlin/errs"
)

// mapWindows runs MapWindow on every rank at once (it is collective).
func mapWindows(ranks []*gpuRank, bufs []uintptr, size uint64) ([]*UserWindow, []error) {
	ex := newExchanges(len(ranks))
	wins := make([]*UserWindow, len(ranks))
	errList := make([]error, len(ranks))
	var wg sync.WaitGroup
	for r, g := range ranks {
		wg.Go(func() {
			w, err := g.MapWindow(ex[r], bufs[r], size)
			wins[r], _ = w.(*UserWindow)
			errList[r] = err
		})
	}
	wg.Wait()
	return wins, errList
}

// memAllocOn is ncclMemAlloc on rank g's device, freed when the test ends.
func (g *gpuRank) memAllocOn(t *testing.T, size uintptr) uintptr {
	var p uintptr
	require.NoError(t, inContext(g.ctx, func() (err error) {
		p, err = MemAlloc(g.device, size)
		return err
	}))
	t.Cleanup(func() { MemFree(p) })
	return p
}

func gpuPattern(n, r int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r*41 + i*3 + 5)
	}
	return b
}

// Every rank reads every rank's ncclMemAlloc buffer through its window, a
// write through one rank's window lands in the owner's buffer, and a window
// may start inside an allocation.
func TestGPUWindowPeers(t *testing.T) {
	const n, size, offset = 2, 64 << 10, 8192
	ranks := newGPURanks(t, n, 20e9)
	bufs := make([]uintptr, n)
	for r, g := range ranks {
		bufs[r] = g.memAllocOn(t, offset+size) + offset
		g.upload(t, devicePtr(bufs[r]), gpuPattern(size, r))
	}
	wins, errList := mapWindows(ranks, bufs, size)
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
	}
	for r, g := range ranks {
		peers := wins[r].Peers()
		require.Len(t, peers, n)
		assert.Equal(t, bufs[r], peers[r], "a rank's own buffer is its pointer")
		for q := range n {
			got := g.download(t, devicePtr(peers[q]), size)
			assert.True(t, bytes.Equal(gpuPattern(size, q), got), "rank %d's view of rank %d", r, q)
		}
	}
	require.NoError(t, wins[0].Write(1, 0, gpuPattern(size, 77)))
	assert.True(t, bytes.Equal(gpuPattern(size, 77), ranks[1].download(t, devicePtr(bufs[1]), size)),
		"rank 0's write through its window is in rank 1's buffer")
	got := make([]byte, 100)
	require.NoError(t, wins[1].Read(0, 5, got))
	assert.Equal(t, gpuPattern(size, 0)[5:105], got, "Read through rank 1's window of rank 0")
	for _, w := range wins {
		require.NoError(t, w.Close())
	}
}

// Memory that is not a cuMem allocation is refused on every rank, with the
// text NCCL users need.
func TestGPUWindowRefusesCuMemAlloc(t *testing.T) {
	const n, size = 2, 4096
	ranks := newGPURanks(t, n, 20e9)
	bufs := []uintptr{ranks[0].memAllocOn(t, size), uintptr(ranks[1].alloc(t, size))}
	wins, errList := mapWindows(ranks, bufs, size)
	assert.Nil(t, wins[0])
	assert.Nil(t, wins[1])
	assert.ErrorIs(t, errList[1], errs.ErrInvalidArgument)
	assert.ErrorContains(t, errList[1], "buffer must come from ncclMemAlloc/cuMem")
	assert.ErrorContains(t, errList[0], "rank 1 failed")
	assert.ErrorContains(t, errList[0], "ncclMemAlloc/cuMem")
}
