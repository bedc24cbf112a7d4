package comm

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/errs"
	"purlin/spec"
)

// Windows across processes: this test binary re-runs itself as workers
// (PURLIN_COMM_WINDOW_WORKER=rank) that join the parent's rendezvous, so
// the host Atom maps the other processes' purlinMemAlloc (memfd) buffers.

const mpWindowSize = 2 * 4096

// windowRounds is what every rank process does: register a MemAlloc
// buffer, read every peer's data through the window, write into the next
// rank's buffer, wait until every rank has written, deregister, check
// what the previous rank wrote; then try a buffer that is not shareable
// across processes, which every rank must refuse.
func windowRounds(c *Comm) error {
	n, r := c.Count(), c.Rank()
	p, err := MemAlloc(mpWindowSize)
	if err != nil {
		return err
	}
	defer MemFree(p)
	mine := bytesAtAddr(uintptr(p), mpWindowSize)
	fillRank(mine, r)
	win, err := c.WindowRegister(uintptr(p), mpWindowSize, WindowCollSymmetric)
	if err != nil {
		return err
	}
	peers, err := c.WindowPeers(win)
	if err != nil {
		return err
	}
	for q, addr := range peers {
		if !bytes.Equal(bytesAtAddr(addr, mpWindowSize), rankPattern(mpWindowSize, q)) {
			return fmt.Errorf("rank %d: rank %d's buffer through the window differs", r, q)
		}
	}
	if _, err := c.boot.AllGather(nil); err != nil { // everyone has read before anyone writes
		return err
	}
	copy(bytesAtAddr(peers[(r+1)%n], mpWindowSize), rankPattern(mpWindowSize, 100+r))
	if _, err := c.boot.AllGather(nil); err != nil { // everyone has written
		return err
	}
	if err := c.WindowDeregister(win); err != nil {
		return err
	}
	if prev := (r + n - 1) % n; !bytes.Equal(mine, rankPattern(mpWindowSize, 100+prev)) {
		return fmt.Errorf("rank %d: rank %d's write through its window is missing", r, prev)
	}
	if err := ownerFreesFirst(c); err != nil {
		return err
	}
	if err := directAcrossProcesses(c); err != nil {
		return err
	}
	// Anonymous memory has no descriptor to pass: every rank refuses.
	anon, err := unix.Mmap(-1, 0, mpWindowSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(anon)
	buf := uintptr(p)
	if r == n-1 {
		buf = addrOf(anon)
	}
	_, err = c.WindowRegister(buf, mpWindowSize, 0)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprintf("rank %d's buffer", n-1))) ||
		!bytes.Contains([]byte(err.Error()), []byte("purlinMemAlloc")) {
		return fmt.Errorf("rank %d: a buffer from mmap was not refused by name: %v", r, err)
	}
	if !isCode(err, errs.ErrInvalidArgument) {
		return fmt.Errorf("rank %d: refusal is not an invalid argument: %v", r, err)
	}
	return nil
}

// ownerFreesFirst: deregistration waits for no peer, and is safe so. Rank 0
// deregisters and frees its buffer before anyone else deregisters; the
// others still read its data through their views, which hold the memory.
func ownerFreesFirst(c *Comm) error {
	n, r := c.Count(), c.Rank()
	p, err := MemAlloc(mpWindowSize)
	if err != nil {
		return err
	}
	fillRank(bytesAtAddr(uintptr(p), mpWindowSize), 200+r)
	win, err := c.WindowRegister(uintptr(p), mpWindowSize, WindowCollSymmetric)
	if err != nil {
		MemFree(p)
		return err
	}
	peers, err := c.WindowPeers(win)
	if err != nil {
		return err
	}
	if r == 0 {
		if err := c.WindowDeregister(win); err != nil {
			return err
		}
		if err := MemFree(p); err != nil {
			return err
		}
	}
	if _, err := c.boot.AllGather(nil); err != nil { // rank 0 has freed
		return err
	}
	if r == 0 {
		return nil
	}
	defer MemFree(p)
	for q := range n {
		if !bytes.Equal(bytesAtAddr(peers[q], mpWindowSize), rankPattern(mpWindowSize, 200+q)) {
			return fmt.Errorf("rank %d: rank %d's buffer through the window differs after rank 0 freed its own", r, q)
		}
	}
	return c.WindowDeregister(win)
}

// directAcrossProcesses: an AllGather, an in-place AllReduce and an
// in-place AllToAll whose outputs lie in a symmetric window push straight
// into the other processes' outputs through their mappings (comm
// direct.go); every rank checks its output.
func directAcrossProcesses(c *Comm) error {
	const count, size = 8192, 1 << 20 // float32s a rank: staged under testConfig
	n, r := c.Count(), c.Rank()
	p, err := MemAlloc(size)
	if err != nil {
		return err
	}
	defer MemFree(p)
	win, err := c.WindowRegister(uintptr(p), size, WindowCollSymmetric)
	if err != nil {
		return err
	}
	out := unsafe.Slice((*float32)(p), size/4)
	value := func(from, to, i int) float32 { return float32((from*31 + to*7 + i) % 1021) }
	// The input in memory Go never moves: the calls name it by address
	// only, and a Go slice of this size may live on the goroutine's stack,
	// which moves when it grows (the Atom's workers then read freed stack).
	sp, err := MemAlloc(4 * count)
	if err != nil {
		return err
	}
	defer MemFree(sp)
	send := unsafe.Slice((*float32)(sp), count)
	for i := range send {
		send[i] = value(r, 0, i)
	}
	calls := []struct {
		call  spec.Call
		check func(i int) float32
		n     int
	}{
		{spec.Call{Coll: spec.AllGather, Send: uintptr(sp), Recv: uintptr(p)},
			func(i int) float32 { return value(i/count, 0, i%count) }, n * count},
		{spec.Call{Coll: spec.AllReduce, Send: uintptr(p), Recv: uintptr(p), Op: spec.Op{Kind: spec.Sum}}, func(i int) float32 {
			var sum float32
			for q := range n {
				sum += value(q, 1, i)
			}
			return sum
		}, count},
		{spec.Call{Coll: spec.AllToAll, Send: uintptr(p), Recv: uintptr(p)},
			func(i int) float32 { return value(i/(count/n), r, i%(count/n)) }, n * (count / n)},
	}
	for k := range calls {
		k := &calls[k]
		k.call.Type, k.call.Count, k.call.Rank, k.call.NRanks = spec.Float32, count, r, n
		switch k.call.Coll {
		case spec.AllReduce:
			for i := range count {
				out[i] = value(r, 1, i)
			}
		case spec.AllToAll:
			k.call.Count = count / uint64(n)
			for q := range n {
				for i := range count / n {
					out[q*(count/n)+i] = value(r, q, i)
				}
			}
		}
		var b atom.Buffers
		if !c.directOf(&k.call, &b) {
			return fmt.Errorf("rank %d: %s in a symmetric window does not push into outputs", r, k.call.Coll)
		}
		if err := c.Collective(&k.call, 0); err != nil {
			return err
		}
		if err := c.Synchronize(); err != nil {
			return err
		}
		for i := range k.n {
			if want := k.check(i); out[i] != want {
				return fmt.Errorf("rank %d: %s element %d is %g, want %g", r, k.call.Coll, i, out[i], want)
			}
		}
		if _, err := c.boot.AllGather(nil); err != nil { // every rank checked before the next call writes
			return err
		}
	}
	return c.WindowDeregister(win)
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func isCode(err error, want *errs.Error) bool { return errs.CodeOf(err) == want.Code }

func TestWindowMultiProcessWorker(t *testing.T) {
	runWorker(t, windowRounds)
}

func TestWindowMultiProcess(t *testing.T) {
	if isWorker() {
		t.Skip("worker")
	}
	const n = 3
	id, err := GetUniqueID()
	require.NoError(t, err)
	cmds := spawnRanks(t, "TestWindowMultiProcessWorker", id, 1, n)
	c, err := InitRank(n, id, 0, testConfig(), 0)
	require.NoError(t, err)
	assert.NoError(t, windowRounds(c))
	require.NoError(t, c.Destroy())
	for _, cmd := range cmds {
		assert.NoError(t, cmd.Wait())
	}
}
