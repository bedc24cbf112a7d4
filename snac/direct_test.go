package snac_test

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
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
				want := q.w.topo.Direct && c != spec.Gather && p.Regime != snac.RegimePacket && p.Regime != snac.RegimeEmpty
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
			require.Equal(t, coll != spec.Gather, direct > 0, "n=%d %s: %d direct Plans (a Gather never is: Directs)", n, coll, direct)
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

// TestDirectPlansDoNotMerge: a Plan that pushes into its peers' outputs
// addresses the one call's outputs there, so it runs alone: a direct
// AllGather, and an AllReduce that pushes its reduced shards into them,
// whose Regime is not RegimeDirect.
func TestDirectPlansDoNotMerge(t *testing.T) {
	topo := testTopo(2)
	topo.Direct = true
	for _, coll := range []spec.Collective{spec.AllGather, spec.AllReduce} {
		calls := ladderCalls(2, coll, spec.Float32, spec.Op{Kind: spec.Sum}, 96<<10, 0)
		p, err := snac.Build(calls[0], topo)
		require.NoError(t, err)
		require.True(t, p.PushesIntoPeers(), "%s", calls[0])
		require.Equal(t, coll == spec.AllGather, p.Regime == snac.RegimeDirect, "%s: %s", calls[0], p.Regime)
		_, err = snac.Merge(p, p)
		require.ErrorContains(t, err, "direct", "%s", calls[0])
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
