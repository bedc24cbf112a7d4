package cuda

import (
	"runtime"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
)

// localExchange is an in-process atom.Exchange: n ranks, one goroutine each.
type localExchange struct {
	rank int
	hub  *exchangeHub
}

type exchangeHub struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	round int
	vals  [][]byte
	fds   []int
	count int
	out   [][]byte
	outFD []int
}

func newExchanges(n int) []atom.Exchange {
	h := &exchangeHub{n: n, vals: make([][]byte, n), fds: make([]int, n)}
	h.cond = sync.NewCond(&h.mu)
	ex := make([]atom.Exchange, n)
	for r := range ex {
		ex[r] = &localExchange{rank: r, hub: h}
	}
	return ex
}

func (e *localExchange) Rank() int   { return e.rank }
func (e *localExchange) NRanks() int { return e.hub.n }

func (e *localExchange) gather(mine []byte, fd int) ([][]byte, []int) {
	h := e.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	round := h.round
	h.vals[e.rank], h.fds[e.rank] = append([]byte(nil), mine...), fd
	h.count++
	if h.count == h.n {
		h.out, h.outFD = h.vals, h.fds
		h.vals, h.fds = make([][]byte, h.n), make([]int, h.n)
		h.count = 0
		h.round++
		h.cond.Broadcast()
	}
	for h.round == round {
		h.cond.Wait()
	}
	return h.out, h.outFD
}

func (e *localExchange) AllGather(mine []byte) ([][]byte, error) {
	v, _ := e.gather(mine, -1)
	return v, nil
}

func (e *localExchange) AllGatherFD(fd int) ([]int, error) {
	_, fds := e.gather(nil, fd)
	out := make([]int, len(fds))
	for i, f := range fds {
		d, err := syscall.Dup(f)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// gpuRank is a Rank with a stream for tests.
type gpuRank struct {
	*Rank
	stream cuStream
}

// gpuTopology is the CUDA Atom's topology for tests: small staging, so the
// chunked and ring regimes are reached at test sizes.
func gpuTopology(n, rank int) snac.Topology {
	return snac.Topology{NRanks: n, Rank: rank, Workers: 8, StageHalf: 1 << 20, P2PHalf: 1 << 18,
		PacketMax: 16 << 10, ChunkMax: 256 << 10}
}

// needGPUs skips the test unless n CUDA devices and the kernels are present.
func needGPUs(t *testing.T, n int) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	var count int32
	driver.DeviceGetCount(&count)
	if int(count) < n {
		t.Skipf("%d CUDA devices, need %d", count, n)
	}
}

// newGPURanks makes n ranks on devices 0..n-1 in this process.
func newGPURanks(t *testing.T, n int, timeoutNs int64) []*gpuRank {
	return newGPURanksOn(t, n, timeoutNs, gpuTopology)
}

func newGPURanksOn(t *testing.T, n int, timeoutNs int64, topology func(n, rank int) snac.Topology) []*gpuRank {
	needGPUs(t, n)
	return newGPURanksOnDevices(t, n, timeoutNs, topology, func(r int) int { return r })
}

// inTurn places rank r on GPU r mod the GPUs present: ranks share them where
// there are fewer GPUs than ranks.
func inTurn() func(r int) int {
	var count int32
	driver.DeviceGetCount(&count)
	return func(r int) int { return r % int(max(count, 1)) }
}

// newGPURanksOnDevices makes n ranks, rank r on device device(r): two
// ranks may share a GPU (eager calls only: two ranks' kernels that wait for
// each other need room on its SMs at once, which a graph's launches are
// not given).
func newGPURanksOnDevices(t *testing.T, n int, timeoutNs int64, topology func(n, rank int) snac.Topology, device func(r int) int) []*gpuRank {
	ex := newExchanges(n)
	ranks := make([]*gpuRank, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rk, err := NewRank(topology(n, r), ex[r], atom.Options{Device: device(r), TimeoutNanos: timeoutNs})
			if err != nil {
				errs[r] = err
				return
			}
			g := &gpuRank{Rank: rk}
			errs[r] = inContext(rk.ctx, func() error {
				return cuErr(driver.StreamCreate(&g.stream, streamNonBlocking), "cuStreamCreate")
			})
			ranks[r] = g
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, g := range ranks {
			inContext(g.ctx, func() error { driver.StreamDestroy(g.stream); return nil })
			require.NoError(t, g.Close())
		}
	})
	return ranks
}

// alloc returns size bytes of device memory holding 0xA5 bytes. The memset
// runs on the legacy stream, which neither the tests' non-blocking streams
// nor copyToDevice wait for: it has ended when alloc returns.
func (g *gpuRank) alloc(t *testing.T, size int) devicePtr {
	var p devicePtr
	require.NoError(t, inContext(g.ctx, func() error {
		if err := cuErr(driver.MemAlloc(&p, uintptr(max(size, 16))), "cuMemAlloc"); err != nil {
			return err
		}
		if err := cuErr(driver.MemsetD8(p, 0xA5, uintptr(max(size, 16))), "cuMemsetD8"); err != nil {
			return err
		}
		return cuErr(driver.StreamSynchronize(0), "cuStreamSynchronize", "legacy stream")
	}))
	t.Cleanup(func() { inContext(g.ctx, func() error { driver.MemFree(p); return nil }) })
	return p
}

// upload copies b to dst; it has landed when upload returns, so a kernel
// launched next on any stream reads it (copyToDevice).
func (g *gpuRank) upload(t *testing.T, dst devicePtr, b []byte) {
	require.NoError(t, inContext(g.ctx, func() error { return copyToDevice(dst, b, g.copies) }))
}

func (g *gpuRank) download(t *testing.T, src devicePtr, n int) []byte {
	b := make([]byte, n)
	if n == 0 {
		return b
	}
	require.NoError(t, inContext(g.ctx, func() error {
		return cuErr(driver.MemcpyDtoH(unsafe.Pointer(&b[0]), src, uintptr(n)), "cuMemcpyDtoH")
	}))
	return b
}

// captureLaunch captures g.Launch(plan, bufs) on g's stream (thread-local
// capture mode) and returns the graph, instantiated.
func (g *gpuRank) captureLaunch(t *testing.T, plan *snac.Plan, bufs []atom.Buffers) (exec uintptr) {
	require.NoError(t, inContext(g.ctx, func() error {
		if err := cuErr(driver.StreamBeginCapture(g.stream, streamCaptureModeThreadLocal), "cuStreamBeginCapture"); err != nil {
			return err
		}
		launchErr := g.Launch(plan, bufs, uintptr(g.stream))
		var graph uintptr
		if err := cuErr(driver.StreamEndCapture(g.stream, &graph), "cuStreamEndCapture"); err != nil {
			return err
		}
		if launchErr != nil {
			return launchErr
		}
		defer driver.GraphDestroy(graph)
		return cuErr(driver.GraphInstantiate(&exec, graph, 0), "cuGraphInstantiate")
	}))
	return exec
}

func (g *gpuRank) sync(t *testing.T) {
	require.NoError(t, inContext(g.ctx, func() error {
		return cuErr(driver.StreamSynchronize(g.stream), "cuStreamSynchronize")
	}))
}

// workersPlan is a Plan for nranks ranks with one worker on the collective
// channel per step list (synthetic Plans of the GPU tests).
func workersPlan(nranks int, workers ...[]snac.Step) *snac.Plan {
	p := &snac.Plan{Type: spec.Uint8, Op: spec.Op{Kind: spec.Sum}, NRanks: nranks, Regime: snac.RegimeStaged}
	for w, steps := range workers {
		p.Workers = append(p.Workers, snac.Worker{Channel: snac.Collective, Index: uint16(w), First: uint32(len(p.Steps)), Count: uint32(len(steps))})
		p.Steps = append(p.Steps, steps...)
	}
	return p
}
