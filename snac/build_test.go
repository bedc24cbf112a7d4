package snac_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

func TestBuildEveryRegimeSmoke(t *testing.T) {
	for _, coll := range []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.AllToAll, spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		for _, count := range []uint64{0, 1, 100, 3000, 10000, 40000} {
			for _, inPlace := range []bool{false, true} {
				w := newWorld(t, 4, count+uint64(coll))
				calls := callsFor(4, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, 1)
				require.NoError(t, w.run(calls, inPlace), describe(calls, inPlace))
			}
		}
	}
}

// TestEveryRegimeIsReached: the test topology's small sizes reach every
// regime, so the property tests exercise them all.
func TestEveryRegimeIsReached(t *testing.T) {
	seen := map[snac.Regime]bool{}
	for _, coll := range []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.Broadcast} {
		for _, count := range []uint64{0, 100, 3000, 10000, 40000, 120000} {
			c := &spec.Call{Coll: coll, Type: spec.Float32, Count: count, NRanks: 4}
			p, err := snac.Build(c, testTopo(4))
			require.NoError(t, err)
			seen[p.Regime] = true
		}
	}
	for r := snac.RegimeEmpty; r <= snac.RegimeRing; r++ {
		require.True(t, seen[r], "regime %s never reached", r)
	}
}

// TestBuildsShareNoSteps: a Plan owns its steps; the lists a Build used,
// which later Builds reuse (builder.recycle), are not in it.
func TestBuildsShareNoSteps(t *testing.T) {
	topo := snac.Topology{NRanks: 8, Workers: 64, StageHalf: 1 << 20, P2PHalf: 1 << 18, PacketMax: 16 << 10, ChunkMax: 64 << 10}
	build := func(count uint64, coll spec.Collective) *snac.Plan {
		call := &spec.Call{Coll: coll, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: count, NRanks: 8, Send: 1 << 40, Recv: 2 << 40}
		p, err := snac.Build(call, topo)
		require.NoError(t, err)
		return p
	}
	var plans []*snac.Plan
	var kept [][]snac.Step
	for i, count := range []uint64{1 << 20, 3 << 18, 5000, 1 << 21, 77, 1 << 20} {
		p := build(count, []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter}[i%3])
		plans, kept = append(plans, p), append(kept, slices.Clone(p.Steps))
	}
	for i := range 20 {
		build(uint64(1<<19+4096*i), spec.AllReduce)
	}
	for i, p := range plans {
		require.Equal(t, kept[i], p.Steps, "Plan %d after later Builds", i)
	}
}

// BenchmarkBuildLarge is the first call of a large shape on 8 ranks: a
// bfloat16 AllReduce of 128 MiB with the CUDA Atom's default sizes, 11,904
// steps with its ring's loops (docs/architecture.md, Caching).
func BenchmarkBuildLarge(b *testing.B) {
	topo := snac.Topology{NRanks: 8, Workers: 64, StageHalf: 64 << 20, P2PHalf: 8 << 20, PacketMax: 256 << 10, ChunkMax: 512 << 10}
	call := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Op: spec.Op{Kind: spec.Sum}, Count: 64 << 20,
		NRanks: 8, Send: 1 << 40, Recv: 2 << 40}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := snac.Build(call, topo); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOneRankInPlaceIsDone: a one-rank call in place whose output is its
// input as it stands launches nothing; one that scales (PreMulSum, an Avg
// over a divisor other than 1), carries an epilogue or runs out of place
// still works, and every form gives the reference's result. A large copy
// out of place, the only work of one rank, is spread over every worker.
func TestOneRankInPlaceIsDone(t *testing.T) {
	topo := snac.Topology{NRanks: 1, Workers: 8, StageHalf: 1 << 20, P2PHalf: 1 << 18, PacketMax: 16 << 10, ChunkMax: 64 << 10}
	ops := []spec.Op{{Kind: spec.Sum}, {Kind: spec.Prod}, {Kind: spec.Max}, {Kind: spec.Min}, {Kind: spec.Avg},
		{Kind: spec.PreMulSum, Scalar: 3}, {Kind: spec.Avg, Divisor: 2}}
	for _, coll := range []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.AllToAll, spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		for _, op := range ops {
			if !coll.Reduces() && op.Kind != spec.Sum {
				continue
			}
			for _, inPlace := range []bool{false, true} {
				for _, count := range []uint64{1, 3000, 100000} {
					calls := callsFor(1, coll, spec.Float32, op, count, 0)
					require.NoError(t, newWorld(t, 1, count).run(calls, inPlace), describe(calls, inPlace))
					c := *calls[0]
					c.Recv = 1 << 30
					c.Send = c.Recv + 1
					if inPlace {
						c.Send = c.Recv
					}
					p, err := snac.Build(&c, topo)
					require.NoError(t, err)
					identity := op.Kind < spec.Avg || op.Kind == spec.Avg && op.Divisor == 0
					done := inPlace && (!coll.Reduces() || identity)
					require.Equal(t, done, len(p.Workers) == 0, "%s inPlace=%v: %d workers", &c, inPlace, len(p.Workers))
					if !inPlace && !coll.Reduces() && count*4 > topo.PacketMax {
						for w := range p.Workers { // no transfers: the copy takes every worker, none kept aside
							require.NotEmpty(t, p.WorkerSteps(w), "%s: worker %d of %d idle", &c, w, len(p.Workers))
						}
					}
				}
			}
		}
	}
}
