package snac_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

// directLadder is bytes per transfer for testTopo: packets (2 KiB and
// below) and staged sizes, which a direct Plan pushes in one step a worker
// whatever its length (a staged Plan here would chunk from 8 KiB and ring
// from 64 KiB).
var directLadder = []uint64{24 << 10, 3 << 10, 1 << 10, 24 << 10, 96 << 10, 5 << 10, 700, 40 << 10, 8, 200 << 10}

// TestDirectPlans: where outputs are symmetric (Topology.Direct), a copy
// collective of staged sizes pushes straight into its consumers' outputs
// (RegimeDirect: no staging, no packets), an AllReduce pushes its reduced
// shards into them, and packets keep small sizes.
// Every rank's calls are queued in one simulator Run, as a stream queues
// them, and Direct alternates with staged calls of the same and other
// collectives, so a rank that finishes a call
// starts the next while its peers are still in the one before: the
// simulator fails a push into an output whose rank is not in the call.
// Every other collective has a copy engine (engineTopo), whose workers
// push the same way.
// A Gather never is (snac.Directs); an AllToAll in place saves what it
// sends in its own staging first (emitDirectTranspose).
func TestDirectPlans(t *testing.T) {
	colls := []spec.Collective{spec.AllGather, spec.AllGatherV, spec.Broadcast, spec.Gather, spec.Scatter, spec.AllGatherColumns, spec.AllToAll}
	ranks, ladder := []int{2, 3, 4, 8}, directLadder
	if raceEnabled {
		ranks, ladder = []int{2, 4}, directLadder[:len(directLadder)-1]
	}
	for _, n := range ranks {
		for k, coll := range colls {
			seed := 2 * uint64(10*n+int(coll))
			topo := testTopo(n)
			if k%2 == 1 {
				topo = engineTopo(n) // the copy engine's bulk copies push into the outputs
			}
			q := newQueue(t, n, seed, topo)
			direct, reduced := 0, 0
			for i, bytes := range ladder {
				typ := everyType[(i+int(coll)+n)%len(everyType)]
				// Every third call is not direct, and every fourth is an
				// AllReduce, whose reduced shards are pushed straight into
				// the outputs.
				q.w.topo.Direct = i%3 != 2
				c := coll
				if i%4 == 3 {
					c = spec.AllReduce
				}
				calls := ladderCalls(n, c, typ, spectest.OpFor(spec.Op{Kind: spec.Sum}, typ, n), bytes, (i+int(coll))%n)
				if c.Columns() {
					for _, call := range calls {
						call.Rows = 2
						call.Count = max(2, call.Count/2*2)
					}
				}
				inPlace := inPlaceExists(c) && c != spec.AllGatherColumns && i%2 == 1
				q.add(calls, inPlace) // places the buffers and builds each rank's Plan
				last := len(q.launches[0]) - 1
				p := q.launches[0][last].Plan
				spaces := map[snac.Space]bool{} // of every rank's Plan: a Broadcast's root alone pushes
				for r := range calls {
					maps.Copy(spaces, spacesOf(q.launches[r][last].Plan))
				}
				want := q.w.topo.Direct && c != spec.Gather && c != spec.Scatter && p.Regime != snac.RegimePacket && p.Regime != snac.RegimeEmpty
				if c == spec.AllReduce && p.Workers[0].Engine == snac.EngineCopy {
					want = false // its reduce-scatter on the copy engine pushes into staging alone
				}
				require.Equal(t, want, snac.DirectOn(calls[0], q.w.rankTopo(0)), "%s: DirectOn", calls[0])
				require.Equal(t, want, spaces[snac.SpacePeerRecv], "%s (direct %v): pushes into peers' outputs", calls[0], q.w.topo.Direct)
				if !want {
					continue
				}
				if c == coll {
					direct++
				} else {
					reduced++
				}
				if c != spec.AllReduce {
					require.Equal(t, snac.RegimeDirect, p.Regime, "%s", calls[0])
					// An AllToAll in place saves what it sends in its own staging.
					require.False(t, spaces[snac.SpaceStage] && !(c == spec.AllToAll && inPlace) || spaces[snac.SpacePacket], "%s: a direct Plan through staging", calls[0])
				}
			}
			q.run("n=%d %s, seed %d", n, coll, seed)
			require.Equal(t, coll != spec.Gather && coll != spec.Scatter, direct > 0, "n=%d %s: %d direct Plans (a Gather or Scatter never is: Directs)", n, coll, direct)
			if topo.EngineMin == 0 {
				require.Positive(t, reduced, "n=%d: no AllReduce pushed into the outputs", n)
			}
		}
	}
}

// TestDirectDisagreementFails: a rank that takes its output for symmetric
// while its peers do not disagrees with them on the call, which fails on
// some rank (its fingerprint differs) instead of writing anything wrong.
func TestDirectDisagreementFails(t *testing.T) {
	for _, n := range []int{2, 4} {
		w := newWorld(t, n, uint64(n)*2)
		w.alter = func(r int, t *snac.Topology) { t.Direct = r == 1 }
		calls := ladderCalls(n, spec.AllGather, spec.Float32, spec.Op{Kind: spec.Sum}, 24<<10, 0)
		require.Error(t, runMismatched(w, calls), "n=%d", n)
	}
}

// TestDirectPlansMerge: a call that pushes into its peers' outputs does
// so whether or not its rank merges it with others (ranks may group their
// calls differently, as under NCCL): rank 0 merges two AllGathers and an
// AllReduce into one Launch, the other ranks launch each alone, and every
// output is right. Past MaxPeerSlots peers' outputs a merge is refused.
func TestDirectPlansMerge(t *testing.T) {
	for _, n := range []int{2, 3} {
		for seed := range uint64(20) {
			w := newWorld(t, n, 2*seed)
			w.topo.Direct = true
			colls := []spec.Collective{spec.AllGather, spec.AllReduce, spec.AllGather}
			var calls [][]*spec.Call
			var want [][]spectest.Output
			alone := make([][]*snactest.Launch, n) // [rank][call]
			for i, coll := range colls {
				cs := ladderCalls(n, coll, spec.Float32, spectest.OpFor(spec.Op{Kind: spec.Sum}, spec.Float32, n), 24<<10+uint64(i)*4096, 0)
				inputs := spectest.Inputs(w.rng, cs)
				want = append(want, spectest.Expected(cs, inputs))
				calls = append(calls, cs)
				for r, c := range cs {
					l, err := w.launch(c, false, inputs[r])
					require.NoError(t, err)
					require.True(t, l.Plan.PushesIntoPeers(), "%s", c)
					alone[r] = append(alone[r], l)
				}
			}
			launches := make([][]*snactest.Launch, n)
			launches[0] = []*snactest.Launch{mergedLaunch(t, alone[0])}
			for r := 1; r < n; r++ {
				launches[r] = alone[r]
			}
			require.NoError(t, w.sim.Run(launches), "n=%d seed %d", n, seed)
			unmerge(launches[0][0], alone[0])
			for i, cs := range calls {
				for r, c := range cs {
					w.checkOutput(c, alone[r][i], want[i][r], false)
				}
			}
		}
	}
	topo := testTopo(8)
	topo.Direct = true
	calls := ladderCalls(8, spec.AllGather, spec.Float32, spec.Op{Kind: spec.Sum}, 24<<10, 0)
	p, err := snac.Build(calls[0], topo)
	require.NoError(t, err)
	_, err = snac.Merge(p, p)
	require.NoError(t, err, "two calls' peers on 8 ranks: 16 peer slots")
	_, err = snac.Merge(p, p, p)
	require.ErrorContains(t, err, "peer slots")
}

// mergedLaunch is one rank's Launches of single calls as one Launch of
// their merged Plan: their memory side by side, buffer i call i's.
func mergedLaunch(t *testing.T, ls []*snactest.Launch) *snactest.Launch {
	m := &snactest.Launch{}
	plans := make([]*snac.Plan, len(ls))
	for i, l := range ls {
		at := uint64(len(m.Mem))
		b := l.Bufs[0]
		b.Send, b.Recv = b.Send+at, b.Recv+at
		m.Bufs = append(m.Bufs, b)
		m.Mem = append(m.Mem, l.Mem...)
		m.Collectives = append(m.Collectives, i)
		plans[i] = l.Plan
	}
	p, err := snac.Merge(plans...)
	require.NoError(t, err)
	m.Plan = p
	return m
}

// unmerge copies a run merged Launch's memory back into the single
// Launches it was made of (mergedLaunch), for their outputs' checks.
func unmerge(m *snactest.Launch, ls []*snactest.Launch) {
	at := 0
	for _, l := range ls {
		copy(l.Mem, m.Mem[at:at+len(l.Mem)])
		l.Written = slices.Clone(m.Written[at : at+len(l.Mem)])
		at += len(l.Mem)
	}
}

// spacesOf is the spaces p's Refs name.
func spacesOf(p *snac.Plan) map[snac.Space]bool {
	m := map[snac.Space]bool{}
	for _, st := range p.Steps {
		if st.Verb != snac.Copy && st.Verb != snac.Reduce {
			continue
		}
		m[st.Dst.Space] = true
		for _, r := range st.Src[:max(1, int(st.NSrc))] {
			m[r.Space] = true
		}
	}
	return m
}

// TestDirectPropertyQueued queues random calls of every collective (V
// counts with zeros, every type and op, in place or not) on random rank
// counts, each call's outputs in symmetric windows or not at random, all in
// one simulator Run per seed, as a stream queues them.
func TestDirectPropertyQueued(t *testing.T) {
	seeds := 8
	if testing.Short() || raceEnabled {
		seeds = 3
	}
	pushed := 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 1234))
		n := 2 + rng.IntN(7)
		topo := testTopo(n)
		if seed%2 == 1 {
			topo = engineTopo(n)
		}
		q := newQueue(t, n, 2*seed, topo)
		for range 12 {
			q.w.topo.Direct = rng.IntN(3) > 0
			calls := randomCalls(rng, n)
			q.add(calls, inPlaceExists(calls[0].Coll) && rng.IntN(2) == 0)
			for r := range n {
				if spacesOf(q.launches[r][len(q.launches[r])-1].Plan)[snac.SpacePeerRecv] {
					pushed++
				}
			}
		}
		q.run("seed %d, %d ranks", seed, n)
	}
	require.Positive(t, pushed, "no Plan pushed into a peer's output")
}

// TestDirectFirstCall: a communicator's first call pushes into no output
// before its rank has begun the call (the simulator begins each rank's
// calls at moments of its own, as streams do: until then earlier work on
// the stream may still use the output). Its epoch is 0, so an enter that
// waits for "begun" at delta 0 would wait for nothing.
func TestDirectFirstCall(t *testing.T) {
	seeds := 50
	if raceEnabled {
		seeds = 12
	}
	for _, coll := range []spec.Collective{spec.AllGather, spec.Broadcast, spec.Scatter, spec.AllToAll, spec.AllReduce} {
		for _, topo := range []snac.Topology{testTopo(2), engineTopo(2)} {
			topo.Direct = true
			for seed := range uint64(seeds) {
				q := newQueue(t, 2, seed, topo)
				calls := ladderCalls(2, coll, spec.Float32, spectest.OpFor(spec.Op{Kind: spec.Sum}, spec.Float32, 2), 24<<10, 1)
				q.add(calls, false)
				q.run("%s engine %v seed %d", coll, topo.EngineMin != 0, seed)
			}
		}
	}
}
