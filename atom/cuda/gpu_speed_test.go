package cuda

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
)

// TestGPUSpeed logs first speed readings (it asserts only correctness):
// graph-replayed small AllReduce latency and large AllGather/ReduceScatter
// bus bandwidth on 2 GPUs, with production-sized staging.
func TestGPUSpeed(t *testing.T) {
	topo := func(n, rank int) snac.Topology {
		return snac.Topology{NRanks: n, Rank: rank, Workers: 32, StageHalf: 64 << 20, P2PHalf: 1 << 20,
			PacketMax: 16 << 10, ChunkMax: 1 << 20}
	}
	ranks := newGPURanksOn(t, 2, int64(20*time.Second), topo)
	rng := rand.New(rand.NewPCG(11, 12))
	const perGraph = 100
	for _, tc := range []struct {
		coll  spec.Collective
		count uint64
		reps  int
	}{
		{spec.AllReduce, 2, 20}, {spec.AllReduce, 1024, 20}, {spec.AllReduce, 1 << 20, 5},
		{spec.AllGather, 16 << 20, 3}, {spec.ReduceScatter, 16 << 20, 3},
	} {
		c := newCall(t, ranks, tc.coll, spec.Float32, spec.Op{Kind: spec.Sum}, tc.count, rng)
		c.launch(t, ranks) // uploads the Plans outside capture
		c.check(t, ranks, "warm-up")
		per := perLaunchInGraph(t, ranks, func(r int, g *gpuRank) {
			g.Launch(c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}}, uintptr(g.stream))
		}, perGraph, tc.reps)
		c.check(t, ranks, "after replays")
		bytes := float64(c.out[0])
		if tc.coll == spec.ReduceScatter {
			bytes *= 2 // busbw counts the whole input
		}
		busbw := bytes / 2 / per.Seconds() / 1e9 // (n-1)/n with n = 2
		if tc.coll == spec.AllReduce {
			busbw *= 2 // AllReduce: 2(n-1)/n
		}
		t.Logf("SPEED %s float32 count %d (%d B out): %v per call (graph), busbw %.1f GB/s", tc.coll, tc.count, c.out[0], per, busbw)
	}
}

// perLaunchInGraph captures perGraph rounds of launch on every rank (each
// rank's stream into its own graph), replays the graphs once to warm up,
// then reps times, and returns the time of one round.
func perLaunchInGraph(t *testing.T, ranks []*gpuRank, launch func(r int, g *gpuRank), perGraph, reps int) time.Duration {
	execs := make([]uintptr, len(ranks))
	for r, g := range ranks {
		require.NoError(t, inContext(g.ctx, func() error {
			if err := cuErr(driver.StreamBeginCapture(g.stream, streamCaptureModeThreadLocal), "cuStreamBeginCapture"); err != nil {
				return err
			}
			for range perGraph {
				launch(r, g)
			}
			var graph uintptr
			if err := cuErr(driver.StreamEndCapture(g.stream, &graph), "cuStreamEndCapture"); err != nil {
				return err
			}
			defer driver.GraphDestroy(graph)
			return cuErr(driver.GraphInstantiate(&execs[r], graph, 0), "cuGraphInstantiate")
		}))
	}
	defer func() {
		for r, g := range ranks {
			inContext(g.ctx, func() error { driver.GraphExecDestroy(execs[r]); return nil })
		}
	}()
	replay := func() {
		for r, g := range ranks {
			require.NoError(t, inContext(g.ctx, func() error { return cuErr(driver.GraphLaunch(execs[r], g.stream), "cuGraphLaunch") }))
		}
		for _, g := range ranks {
			g.sync(t)
		}
	}
	replay()
	start := time.Now()
	for range reps {
		replay()
	}
	per := time.Since(start) / time.Duration(reps*perGraph)
	for r, g := range ranks {
		require.NoError(t, g.AsyncError(), "rank %d", r)
	}
	return per
}
