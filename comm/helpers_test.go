package comm

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// testConfig is small enough that every SNAC regime is reached by small
// sizes and 8 ranks' shared memory stays small.
func testConfig() Config {
	return Config{Blocking: true, Timeout: 20 * time.Second, Workers: 2,
		StageHalf: 64 << 10, P2PHalf: 16 << 10, PacketMax: 1 << 10, ChunkMax: 8 << 10}
}

// startComms makes n communicators of one clique, the ranks as goroutines
// meeting at a TCP rendezvous, and destroys them when the test ends.
func startComms(t testing.TB, n int, cfg Config) []*Comm {
	t.Helper()
	id, err := GetUniqueID()
	require.NoError(t, err)
	comms := make([]*Comm, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { comms[r], errList[r] = InitRank(n, id, r, cfg, r) })
	}
	wg.Wait()
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
	t.Cleanup(func() { destroyAll(comms) })
	return comms
}

func destroyAll(comms []*Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		if c != nil && c.state.Load() != stateDestroyed {
			wg.Go(func() { c.Destroy() })
		}
	}
	wg.Wait()
}

// onThread runs f on a goroutine locked to one OS thread, as a C caller's
// thread is: groups are per thread.
func onThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		f()
	}()
	<-done
}

// cBuffer is C memory (from MemAlloc) that the datapath may read and write
// from any goroutine; it is freed when the test ends.
type cBuffer struct {
	ptr  unsafe.Pointer
	size int
}

func newBuffer(t testing.TB, size int) cBuffer {
	t.Helper()
	if size == 0 {
		size = 1
	}
	p, err := MemAlloc(uint64(size))
	require.NoError(t, err)
	t.Cleanup(func() { MemFree(p) })
	return cBuffer{p, size}
}

func (b cBuffer) bytes() []byte { return unsafe.Slice((*byte)(b.ptr), b.size) }
func (b cBuffer) addr() uintptr { return uintptr(b.ptr) }
