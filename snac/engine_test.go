package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// copyCollectives are the collectives of copies alone, which a copy engine
// may move (snac/engine.go).
var copyCollectives = []spec.Collective{spec.AllGather, spec.AllGatherV, spec.AllToAll, spec.Broadcast, spec.Gather, spec.Scatter}

// engineLadder is bytes per transfer for engineTopo. On the copy engine
// (6 KiB on) and on the processors in turn, at both parities of the call
// count, so that one form writes where the other staged last (the engine's
// region spans both halves); on the engine twice in a row, in one chunk a
// worker (8 KiB) and as a ring (more chunks than slots: 40 and 96 KiB).
var engineLadder = []uint64{8 << 10, 5 << 10, 5 << 10, 8 << 10, 5 << 10, 8 << 10, 8 << 10, 5 << 10, 40 << 10, 40 << 10,
	5 << 10, 24 << 10, 96 << 10, 96 << 10, 700, 5 << 10, 8 << 10, 24}

// TestCopyEnginePlans: from Topology.EngineMin on, a copy collective's Plan
// is the copy engine's (every worker EngineCopy, its staging at fixed
// addresses), and a reduction's splits the roles (copy-engine producers,
// then reducers on the processors); below it the processors'. Every rank's
// calls are queued in one simulator Run, as a stream queues them: a rank
// that finishes a call starts the next while its peers still read what it
// staged in the one before, in either form.
func TestCopyEnginePlans(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		for _, coll := range append(copyCollectives, spec.AllReduce, spec.ReduceScatter, spec.Reduce, spec.ReduceScatterV) {
			seed := 2*uint64(10*n+int(coll)) + 1
			q := newQueue(t, n, seed, engineTopo(n))
			engines := 0
			for i, bytes := range engineLadder {
				typ := everyType[(i+int(coll)+n)%len(everyType)]
				calls := ladderCalls(n, coll, typ, spectest.OpFor(spec.Op{Kind: spec.Sum}, typ, n), bytes, (i+int(coll))%n)
				for r, c := range calls {
					p, err := snac.Build(c, q.w.rankTopo(r))
					require.NoError(t, err)
					if len(p.Workers) == 0 || p.Workers[0].Engine != snac.EngineCopy {
						for _, wk := range p.Workers {
							require.Equal(t, snac.EngineSM, wk.Engine, "one engine a Plan off the copy engine")
						}
						continue
					}
					engines++
					reducers := 0
					for w, wk := range p.Workers {
						if wk.Engine == snac.EngineSM {
							reducers++
						} else {
							require.Zero(t, reducers, "worker %d: the reducers follow the producers", w)
						}
					}
					require.Equal(t, c.Coll.Reduces(), reducers > 0, "%s: %d reducers", c.Coll, reducers)
				}
				q.add(calls, inPlaceExists(coll) && i%2 == 1)
			}
			q.run("n=%d %s, seed %d", n, coll, seed)
			require.Positive(t, engines, "n=%d %s: never on the copy engine", n, coll)
		}
	}
}

// TestCopyEngineSendRecv: transfers on and off the copy engine follow each
// other on every pair of channels in one simulator Run (a sender runs
// ahead into the next transfer while its receiver still reads), each call
// alone, then all of a rank's calls merged into one group.
func TestCopyEngineSendRecv(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		for _, grouped := range []bool{false, true} {
			w := newWorld(t, n, uint64(2*n+1))
			prog := spectest.Program{NRanks: n}
			for i, bytes := range engineLadder {
				typ := everyType[(i*5+n)%len(everyType)]
				for r := range n {
					prog.Events = append(prog.Events, spectest.Event{From: r, To: (r + 1) % n, Count: bytes / uint64(typ.Size()), Type: typ},
						spectest.Event{From: r, To: (r + n/2) % n, Count: bytes/uint64(typ.Size()) + 1, Type: typ})
				}
			}
			if grouped {
				prog.OneGroup()
			}
			w.runProgram(&prog, whole)
		}
	}
}

// TestCopyEngineTopologyChecked: a copy engine that cannot serve is refused.
func TestCopyEngineTopologyChecked(t *testing.T) {
	c := callsFor(2, spec.AllGather, spec.Float32, spec.Op{Kind: spec.Sum}, 1<<20, 0)[0]
	for _, bad := range []func(*snac.Topology){
		func(t *snac.Topology) { t.EngineMin = t.PacketMax }, // packets, not copies, up to there
		func(t *snac.Topology) { t.EngineWorkers = 0 },
		func(t *snac.Topology) { t.EngineWorkers = snac.MaxWorkers },
		func(t *snac.Topology) { t.EngineChunk = 8 },
	} {
		topo := engineTopo(2)
		bad(&topo)
		_, err := snac.Build(c, topo)
		require.ErrorContains(t, err, "copy engine")
	}
}

// TestCopyEngineChunksBounded: however small PURLIN_COPY_ENGINE_CHUNK, a
// copy-engine worker moves at most MaxEngineChunks chunks of a call (its
// stream holds a few operations a chunk), at the CUDA Atom's sizes, 1 GiB
// a rank, on one worker: a push a chunk (an AllReduce's two).
func TestCopyEngineChunksBounded(t *testing.T) {
	topo := snac.Topology{NRanks: 2, Workers: 64, StageHalf: 64 << 20, P2PHalf: 32 << 20, PacketMax: 1 << 20, ChunkMax: 512 << 10}
	topo = topo.WithEngine(16<<20, 1, 4<<20)
	for _, coll := range []spec.Collective{spec.AllGather, spec.AllToAll, spec.Broadcast, spec.ReduceScatter, spec.AllReduce} {
		calls := ladderCalls(2, coll, spec.Float32, spec.Op{Kind: spec.Sum}, 1<<30, 0)
		topo.Rank = 0
		p, err := snac.Build(calls[0], topo)
		require.NoError(t, err, "%s", calls[0])
		p, err = p.Unrolled()
		require.NoError(t, err)
		engine := 0
		for w, wk := range p.Workers {
			if wk.Engine != snac.EngineCopy {
				continue
			}
			engine++
			pushes := 0
			for _, st := range p.WorkerSteps(w) {
				if st.Verb == snac.Copy && st.Dst.Space == snac.SpaceStage && st.Dst.Rank != 0 {
					pushes++
				}
			}
			perChunk := 1
			if coll == spec.AllReduce {
				perChunk = 2 // its reduced chunk too (emitAllReduceEngine)
			}
			require.LessOrEqual(t, pushes, perChunk*snac.MaxEngineChunks, "%s worker %d", calls[0], w)
		}
		require.Positive(t, engine, "%s: on the copy engine", calls[0])
	}
}
