package comm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"purlin/atom/cuda"
)

// CUDA windows across processes, as torch runs them (one process per GPU):
// two worker processes (PURLIN_COMM_CUDA_WINDOW_WORKER=rank) under
// PURLIN_ATOM=cuda, each registering an ncclMemAlloc buffer of its GPU, so
// the CUDA Atom exports, passes and imports the cuMem allocations. It
// skips without CUDA kernels or 2 GPUs.

const cudaWindowSize = 1 << 20

func cudaWindowRounds(c *Comm) error {
	n, r := c.Count(), c.Rank()
	if c.AtomName() != "cuda" {
		return fmt.Errorf("rank %d runs on the %s Atom", r, c.AtomName())
	}
	dp, _ := c.dp.(*cuda.Rank)
	if dp == nil {
		return fmt.Errorf("rank %d: no CUDA rank", r)
	}
	p, err := dp.MemAlloc(cudaWindowSize)
	if err != nil {
		return err
	}
	defer cuda.MemFree(p)
	h, err := c.WindowRegister(p, cudaWindowSize, WindowCollSymmetric)
	if err != nil {
		return err
	}
	view, err := cudaView(c, h)
	if err != nil {
		return err
	}
	barrier := func() error { _, err := c.boot.AllGather(nil); return err }
	steps := []func() error{
		func() error { return view.Write(r, 0, rankPattern(cudaWindowSize, r)) },
		barrier,
		func() error {
			for q := range n {
				got := make([]byte, cudaWindowSize)
				if err := view.Read(q, 0, got); err != nil {
					return err
				}
				if !bytes.Equal(got, rankPattern(cudaWindowSize, q)) {
					return fmt.Errorf("rank %d: rank %d's buffer through the window differs", r, q)
				}
			}
			return nil
		},
		barrier,
		func() error { return view.Write((r+1)%n, 0, rankPattern(cudaWindowSize, 100+r)) },
		barrier,
		func() error {
			got := make([]byte, cudaWindowSize)
			if err := view.Read(r, 0, got); err != nil {
				return err
			}
			if prev := (r + n - 1) % n; !bytes.Equal(got, rankPattern(cudaWindowSize, 100+prev)) {
				return fmt.Errorf("rank %d: rank %d's write through its window is missing", r, prev)
			}
			return nil
		},
		func() error { return c.WindowDeregister(h) },
		func() error { return cudaOwnerFreesFirst(c, dp) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// cudaView is the CUDA Atom's view of c's window h.
func cudaView(c *Comm, h uintptr) (*cuda.UserWindow, error) {
	windows.Lock()
	view, _ := windows.m[h].view.(*cuda.UserWindow)
	windows.Unlock()
	if view == nil {
		return nil, fmt.Errorf("rank %d: window %#x has no CUDA view", c.Rank(), h)
	}
	return view, nil
}

// cudaOwnerFreesFirst: deregistration waits for no peer, and is safe so.
// Rank 0 deregisters and frees its buffer (ncclMemFree) before anyone else
// deregisters; the others still read its data through their imports, which
// hold the allocation.
func cudaOwnerFreesFirst(c *Comm, dp *cuda.Rank) error {
	n, r := c.Count(), c.Rank()
	p, err := dp.MemAlloc(cudaWindowSize)
	if err != nil {
		return err
	}
	h, err := c.WindowRegister(p, cudaWindowSize, WindowCollSymmetric)
	if err != nil {
		cuda.MemFree(p)
		return err
	}
	view, err := cudaView(c, h)
	if err != nil {
		return err
	}
	if err := view.Write(r, 0, rankPattern(cudaWindowSize, 200+r)); err != nil {
		return err
	}
	if _, err := c.boot.AllGather(nil); err != nil { // everyone has written
		return err
	}
	if r == 0 {
		if err := c.WindowDeregister(h); err != nil {
			return err
		}
		if err := cuda.MemFree(p); err != nil {
			return err
		}
	}
	if _, err := c.boot.AllGather(nil); err != nil { // rank 0 has freed
		return err
	}
	if r == 0 {
		return nil
	}
	defer cuda.MemFree(p)
	got := make([]byte, cudaWindowSize)
	for q := range n {
		if err := view.Read(q, 0, got); err != nil {
			return err
		}
		if !bytes.Equal(got, rankPattern(cudaWindowSize, 200+q)) {
			return fmt.Errorf("rank %d: rank %d's buffer through the window differs after rank 0 freed its own", r, q)
		}
	}
	return c.WindowDeregister(h)
}

func TestCUDAWindowMultiProcessWorker(t *testing.T) {
	runWorker(t, cudaWindowRounds)
}

func TestCUDAWindowMultiProcess(t *testing.T) {
	if isWorker() {
		t.Skip("worker")
	}
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	if n := cuda.DeviceCount(); n < 2 {
		t.Skipf("%d CUDA devices, need 2", n)
	}
	id, err := GetUniqueID()
	require.NoError(t, err)
	cmds := spawnRanks(t, "TestCUDAWindowMultiProcessWorker", id, 0, 2, "PURLIN_ATOM=cuda")
	for _, cmd := range cmds {
		assert.NoError(t, cmd.Wait())
	}
}
