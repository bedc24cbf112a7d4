package cuda

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/spec"
	"purlin/spec/spectest"
)

// newStream is one more non-blocking stream in g's context, destroyed when
// the test ends (before the rank closes).
func (g *gpuRank) newStream(t *testing.T) cuStream {
	var s cuStream
	require.NoError(t, inContext(g.ctx, func() error {
		return cuErr(driver.StreamCreate(&s, streamNonBlocking), "cuStreamCreate")
	}))
	t.Cleanup(func() { inContext(g.ctx, func() error { driver.StreamDestroy(s); return nil }) })
	return s
}

func (g *gpuRank) syncStream(t *testing.T, s cuStream) {
	require.NoError(t, inContext(g.ctx, func() error {
		return cuErr(driver.StreamSynchronize(s), "cuStreamSynchronize")
	}))
}

// One rank's kernels run in launch order across streams, as NCCL runs one
// communicator's calls: a copy launched on a free stream must wait for the
// rank's copy launched before it on a stream that another communicator's
// kernel holds up (an AllReduce whose peer comes later).
func TestGPURankRunsInLaunchOrderAcrossStreams(t *testing.T) {
	blockers := newGPURanks(t, 2, int64(20*time.Second))
	rk := newGPURanks(t, 1, int64(20*time.Second))[0] // device 0, the context of blockers[0]
	rng := rand.New(rand.NewPCG(21, 22))
	block := newCall(t, blockers, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, 1000, rng)
	const n = 4 << 20
	cp := newCall(t, []*gpuRank{rk}, spec.AllGather, spec.Uint8, spec.Op{Kind: spec.Sum}, n, rng)
	mid, out := rk.alloc(t, n), rk.alloc(t, n)
	rk.upload(t, mid, make([]byte, n))
	poison := rk.download(t, out, n)
	held := uintptr(blockers[0].stream)

	require.NoError(t, blockers[0].Launch(block.plans[0], []atom.Buffers{{Send: uintptr(block.send[0]), Recv: uintptr(block.recv[0])}}, held))
	require.NoError(t, rk.Launch(cp.plans[0], []atom.Buffers{{Send: uintptr(cp.send[0]), Recv: uintptr(mid)}}, held))
	require.NoError(t, rk.Launch(cp.plans[0], []atom.Buffers{{Send: uintptr(mid), Recv: uintptr(out)}}, uintptr(rk.stream)))
	time.Sleep(200 * time.Millisecond)
	require.True(t, bytes.Equal(poison, rk.download(t, out, n)), "the second copy ran before the first")

	require.NoError(t, blockers[1].Launch(block.plans[1], []atom.Buffers{{Send: uintptr(block.send[1]), Recv: uintptr(block.recv[1])}}, uintptr(blockers[1].stream)))
	block.check(t, blockers, "the blocking AllReduce")
	rk.sync(t)
	require.NoError(t, rk.AsyncError())
	require.True(t, bytes.Equal(cp.inputs[0], rk.download(t, out, n)), "the copies ran out of order")
}

// orderProgram is a sequence of collectives on every rank, rank r's call i
// on stream streams[r][(i+r)%2]: the ranks spread the same calls over two
// streams the opposite way round.
type orderProgram struct {
	calls   []*call
	streams [][2]cuStream
}

func newOrderProgram(t *testing.T, ranks []*gpuRank, ncalls int, rng *rand.Rand) *orderProgram {
	p := &orderProgram{streams: make([][2]cuStream, len(ranks))}
	for r, g := range ranks {
		p.streams[r] = [2]cuStream{g.stream, g.newStream(t)}
	}
	colls := []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter}
	for i := range ncalls {
		typ := everyGPUType[rng.IntN(len(everyGPUType))]
		count := []uint64{1, 7, 1000, 4099, 65537, 300001}[rng.IntN(6)]
		p.calls = append(p.calls, newCall(t, ranks, colls[i%len(colls)], typ, spec.Op{Kind: spec.Sum}, count, rng))
	}
	return p
}

func (p *orderProgram) stream(r, i int) cuStream { return p.streams[r][(i+r)%2] }

func (p *orderProgram) launch(t *testing.T, ranks []*gpuRank) {
	for i, c := range p.calls {
		for r, g := range ranks {
			require.NoError(t, g.Launch(c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}}, uintptr(p.stream(r, i))))
		}
	}
}

func (p *orderProgram) check(t *testing.T, ranks []*gpuRank, what string) {
	for r, g := range ranks {
		g.syncStream(t, p.streams[r][1])
	}
	for i, c := range p.calls {
		c.check(t, ranks, fmt.Sprintf("%s: call %d (%s %s count %d)", what, i, c.calls[0].Coll, c.calls[0].Type, c.calls[0].Count))
	}
}

// One communicator used on two streams, eagerly: every rank runs the calls
// in the order it issued them, so all agree and every result is right.
func TestGPUCommOnTwoStreams(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(5*time.Second)) // before the fix: mismatches or timeouts
	rng := rand.New(rand.NewPCG(23, 24))
	p := newOrderProgram(t, ranks, 30, rng)
	for round := range 3 {
		p.launch(t, ranks)
		p.check(t, ranks, fmt.Sprint("round ", round))
	}
}

// The same under CUDA graph capture: each rank captures on its first stream
// with the second forked into the capture and joined back; the ordering
// must be legal in the capture (EndCapture succeeds) and hold in every
// replay.
func TestGPUCommOnTwoStreamsInGraph(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(5*time.Second))
	rng := rand.New(rand.NewPCG(25, 26))
	p := newOrderProgram(t, ranks, 12, rng)
	p.launch(t, ranks) // eagerly first: the Plans go to device memory before capture
	p.check(t, ranks, "eager")
	execs := make([]uintptr, len(ranks))
	for r, g := range ranks {
		s0, s1 := p.streams[r][0], p.streams[r][1]
		require.NoError(t, inContext(g.ctx, func() error {
			var fork, join cuEvent
			for _, e := range []*cuEvent{&fork, &join} {
				if err := cuErr(driver.EventCreate(e, eventDisableTiming), "cuEventCreate"); err != nil {
					return err
				}
				defer driver.EventDestroy(*e)
			}
			if err := cuErr(driver.StreamBeginCapture(s0, streamCaptureModeThreadLocal), "cuStreamBeginCapture"); err != nil {
				return err
			}
			var launchErr error
			if launchErr = cuErr(driver.EventRecord(fork, s0), "cuEventRecord"); launchErr == nil {
				launchErr = cuErr(driver.StreamWaitEvent(s1, fork, 0), "cuStreamWaitEvent")
			}
			for i, c := range p.calls {
				if launchErr == nil {
					launchErr = g.Launch(c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}}, uintptr(p.stream(r, i)))
				}
			}
			if launchErr == nil {
				launchErr = cuErr(driver.EventRecord(join, s1), "cuEventRecord")
			}
			if launchErr == nil {
				launchErr = cuErr(driver.StreamWaitEvent(s0, join, 0), "cuStreamWaitEvent")
			}
			var graph uintptr
			if err := cuErr(driver.StreamEndCapture(s0, &graph), "cuStreamEndCapture"); err != nil {
				return err
			}
			defer driver.GraphDestroy(graph)
			if launchErr != nil {
				return launchErr
			}
			return cuErr(driver.GraphInstantiate(&execs[r], graph, 0), "cuGraphInstantiate")
		}), "rank %d", r)
	}
	t.Cleanup(func() {
		for r, g := range ranks {
			inContext(g.ctx, func() error { driver.GraphExecDestroy(execs[r]); return nil })
		}
	})
	for replay := range 5 {
		for _, c := range p.calls {
			for r, g := range ranks {
				spectest.Fill(rng, c.calls[r].Type, c.calls[r].Op.Kind, c.inputs[r])
				g.upload(t, c.send[r], c.inputs[r])
			}
		}
		for r, g := range ranks {
			require.NoError(t, inContext(g.ctx, func() error {
				return cuErr(driver.GraphLaunch(execs[r], p.streams[r][0]), "cuGraphLaunch")
			}))
		}
		p.check(t, ranks, fmt.Sprint("replay ", replay))
	}
}
