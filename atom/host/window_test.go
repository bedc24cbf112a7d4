package host

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/atom/atomtest"
	"purlin/errs"
)

func TestSharedAllocRegions(t *testing.T) {
	for _, size := range []uint64{1, 4095, 4096, 3*4096 + 17} {
		p, err := AllocShared(size)
		require.NoError(t, err)
		assert.Zero(t, p%4096, "page aligned")
		mem := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), size)
		for i := range mem {
			assert.Zero(t, mem[i])
			mem[i] = byte(i)
		}
		cases := []struct {
			ptr    uintptr
			n      uint64
			ok     bool
			offset uint64
		}{
			{p, size, true, 0},
			{p + uintptr(size) - 1, 1, true, size - 1},
			{p, size + 4096, false, 0}, // runs past the mapping
			{p - 4096, 1, false, 0},
		}
		for _, c := range cases {
			fd, offset, allocSize, ok, err := sharedRegion(c.ptr, c.n)
			require.NoError(t, err)
			assert.Equal(t, c.ok, ok, "ptr %#x n %d", c.ptr, c.n)
			if ok {
				assert.Equal(t, c.offset, offset)
				assert.Equal(t, size, allocSize)
				assert.GreaterOrEqual(t, fd, 0)
				unix.Close(fd)
			}
		}
		ok, err := FreeShared(p)
		assert.True(t, ok)
		assert.NoError(t, err)
		ok, _ = FreeShared(p)
		assert.False(t, ok, "freed twice")
	}
	_, err := AllocShared(0)
	assert.ErrorIs(t, err, errs.ErrInvalidArgument)
}

func mapAll(n int, bufs []uintptr, size uint64) ([]*UserWindow, []error) {
	exs := atomtest.Local(n)
	wins := make([]*UserWindow, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { wins[r], errList[r] = mapUserWindow(exs[r], bufs[r], size) })
	}
	wg.Wait()
	return wins, errList
}

// In one process the window's peers are the ranks' own pointers, whatever
// memory they are.
func TestMapWindowOneProcess(t *testing.T) {
	const n, size = 3, 256
	bufs := make([]uintptr, n)
	keep := make([][]byte, n)
	for r := range n {
		keep[r] = make([]byte, size)
		bufs[r] = addr(keep[r])
	}
	wins, errList := mapAll(n, bufs, size)
	for r := range n {
		require.NoError(t, errList[r])
		assert.Equal(t, bufs, wins[r].Peers())
		require.NoError(t, wins[r].Close())
	}
}

func TestAgreeNamesTheFailingRank(t *testing.T) {
	const n = 3
	exs := atomtest.Local(n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			var mine error
			if r == 1 {
				mine = errs.New(errs.ErrSystem, "rank 1 broke")
			}
			errList[r] = atom.Agree(exs[r], "host window", mine)
		})
	}
	wg.Wait()
	assert.ErrorIs(t, errList[1], errs.ErrSystem)
	for _, r := range []int{0, 2} {
		assert.ErrorIs(t, errList[r], errs.ErrInvalidUsage)
		assert.ErrorContains(t, errList[r], "rank 1 failed: rank 1 broke")
	}
}
