package cuda

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// engineTopology is gpuTopology with a copy engine from 64 KiB, in chunks
// of 64 KiB (so that 3 MiB is a ring of them) on 2 workers.
func engineTopology(n, rank int) snac.Topology {
	t := gpuTopology(n, rank)
	t.EngineMin, t.EngineWorkers, t.EngineChunk = 64<<10, 2, 64<<10
	return t
}

// TestGPUCopyEngine queues, on 2 ranks (on 2 GPUs, or both on one), every
// collective of copies, the reductions whose reducers are thread blocks
// beside the copy engine's producers, and transfers both ways, at sizes on
// the copy engine and off it in turn, without waiting between calls: a
// rank runs ahead into its next call, of either form, while its peer
// still reads what it staged in the one before (snac/engine.go). Every
// output is checked.
func TestGPUCopyEngine(t *testing.T) {
	needGPUs(t, 1)
	const n = 2
	ranks := newGPURanksOnDevices(t, n, int64(20*time.Second), engineTopology, inTurn())
	rng := rand.New(rand.NewPCG(7, 23))
	prog := spectest.Program{NRanks: n}
	engines, i := 0, 0
	for _, perRank := range []uint64{256 << 10, 16 << 10, 3 << 20, 100 << 10, 40 << 10, 1 << 20} {
		for _, coll := range []spec.Collective{spec.AllGather, spec.AllToAll, spec.Broadcast, spec.Gather, spec.Scatter, spec.AllGatherV,
			spec.ReduceScatter, spec.Reduce, spec.ReduceScatterV, spec.AllReduce} {
			typ := everyGPUType[i%len(everyGPUType)]
			i++
			calls := make([]*spec.Call, n)
			for r := range calls {
				calls[r] = typedCall(coll, typ, spectest.OpFor(spec.Op{Kind: spec.Sum}, typ, n), n, r, perRank)
				p, err := snac.Build(calls[r], ranks[r].topo)
				require.NoError(t, err)
				if p.Workers[0].Engine == snac.EngineCopy {
					engines++
				}
			}
			prog.Events = append(prog.Events, spectest.Event{Calls: calls})
		}
		typ := everyGPUType[i%len(everyGPUType)]
		prog.Events = append(prog.Events, spectest.Event{From: 0, To: 1, Count: perRank / uint64(typ.Size()), Type: typ},
			spectest.Event{From: 1, To: 0, Count: perRank/uint64(typ.Size()) + 1, Type: typ})
	}
	require.Positive(t, engines)
	runGPUProgram(t, ranks, &prog, rng)
}
