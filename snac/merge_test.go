package snac_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

// TestMergedGroups runs random groups of sends and receives (several to one
// peer among them, so chains are exercised) mixed with collectives.
func TestMergedGroups(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 3))
		n := 2 + rng.IntN(7)
		w := newWorld(t, n, seed)
		for round := range 8 {
			prog := spectest.Program{NRanks: n}
			for range 1 + rng.IntN(2*n) {
				from := rng.IntN(n)
				to := (from + 1 + rng.IntN(n-1)) % n
				if rng.IntN(4) == 0 && len(prog.Events) > 0 { // same pair again: a chain
					from, to = prog.Events[0].From, prog.Events[0].To
				}
				t := everyType[rng.IntN(len(everyType))]
				prog.Events = append(prog.Events, spectest.Event{From: from, To: to, Count: randomBytes(rng) / 4 / uint64(t.Size()), Type: t})
			}
			prog.OneGroup()
			w.runProgram(&prog, whole)
			if round%2 == 1 {
				calls := randomCalls(rng, n)
				require.NoError(t, w.run(calls, false), "seed %d: %s", seed, describe(calls, false))
			}
		}
	}
}

func TestMergeRejectsMixedTypes(t *testing.T) {
	topo := testTopo(2)
	a, err := snac.Build(&spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Count: 10, NRanks: 2}, topo)
	require.NoError(t, err)
	b, err := snac.Build(&spec.Call{Coll: spec.AllReduce, Type: spec.Int32, Count: 10, NRanks: 2}, topo)
	require.NoError(t, err)
	_, err = snac.Merge(a, b)
	require.Error(t, err)
	_, err = snac.Merge()
	require.Error(t, err)
}

// TestMergeChainsCollectives: two AllReduces of one type in a group, run as one Plan.
func TestMergeChainsCollectives(t *testing.T) {
	for _, count := range []uint64{100, 5000, 70000} {
		w := newWorld(t, 3, count)
		launches := make([][]*snactest.Launch, 3)
		var wants []spectest.Output
		for r := range 3 {
			l := &snactest.Launch{Plan: nil}
			var plans []*snac.Plan
			for k := range 2 {
				c := &spec.Call{Coll: spec.AllReduce, Type: spec.Int32, Op: spec.Op{Kind: spec.Sum}, Count: count + uint64(k), Rank: r, NRanks: 3}
				p, err := snac.Build(c, w.rankTopo(r))
				require.NoError(t, err)
				plans = append(plans, p)
				n := (count + uint64(k)) * 4
				at := uint64(len(l.Mem))
				l.Mem = append(l.Mem, make([]byte, 2*n)...)
				l.Bufs = append(l.Bufs, snactest.Buffer{Send: at, In: n, Recv: at + n, Out: n})
			}
			var err error
			l.Plan, err = snac.Merge(plans...)
			require.NoError(t, err)
			launches[r] = []*snactest.Launch{l}
		}
		for k := range 2 {
			calls := callsFor(3, spec.AllReduce, spec.Int32, spec.Op{Kind: spec.Sum}, count+uint64(k), 0)
			in := spectest.Inputs(w.rng, calls)
			for r := range 3 {
				b := launches[r][0].Bufs[k]
				copy(launches[r][0].Mem[b.Send:], in[r])
			}
			wants = append(wants, spectest.Expected(calls, in)...)
		}
		require.NoError(t, w.sim.Run(launches))
		for k := range 2 {
			for r := range 3 {
				b := launches[r][0].Bufs[k]
				require.NoError(t, spectest.Compare(spec.Int32, launches[r][0].Mem[b.Recv:b.Recv+b.Out], wants[k*3+r]))
			}
		}
	}
}

// TestMergeChainsRootedCollectives: a group of rooted collectives with
// different roots, run as one Plan, round after round. A rank that is no
// root writes nothing but its agreement (agree.go), so without the done
// rule it could overwrite a check word a slower rank has yet to read.
func TestMergeChainsRootedCollectives(t *testing.T) {
	colls := []spec.Collective{spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter}
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 11))
		n := 2 + rng.IntN(7)
		w := newWorld(t, n, seed)
		for round := range 6 {
			var group [][]*spec.Call
			for range 2 + rng.IntN(4) {
				coll := colls[rng.IntN(len(colls))]
				bytes := regimeLadder[1+rng.IntN(len(regimeLadder)-1)]
				group = append(group, ladderCalls(n, coll, spec.Float32, spec.Op{Kind: spec.Sum}, bytes, rng.IntN(n)))
			}
			launches := make([][]*snactest.Launch, n)
			for r := range n {
				l := &snactest.Launch{}
				var plans []*snac.Plan
				for _, calls := range group {
					c := calls[r]
					place(c, false) // out of place: Build reads InPlace from the addresses
					p, err := snac.Build(c, w.rankTopo(r))
					require.NoError(t, err)
					plans = append(plans, p)
					in, out := c.Extents()
					at := uint64(len(l.Mem))
					l.Mem = append(l.Mem, make([]byte, in+out)...)
					l.Bufs = append(l.Bufs, snactest.Buffer{Send: at, In: in, Recv: at + in, Out: out})
				}
				var err error
				l.Plan, err = snac.Merge(plans...)
				require.NoError(t, err)
				launches[r] = []*snactest.Launch{l}
			}
			var wants [][]spectest.Output
			for k, calls := range group {
				in := spectest.Inputs(w.rng, calls)
				for r := range n {
					b := launches[r][0].Bufs[k]
					copy(launches[r][0].Mem[b.Send:], in[r])
				}
				wants = append(wants, spectest.Expected(calls, in))
			}
			require.NoError(t, w.sim.Run(launches), "seed %d round %d", seed, round)
			for k, calls := range group {
				for r := range n {
					b := launches[r][0].Bufs[k]
					require.NoError(t, spectest.Compare(spec.Float32, launches[r][0].Mem[b.Recv:b.Recv+b.Out], wants[k][r]), "seed %d round %d: rank %d of %s", seed, round, r, calls[r])
				}
			}
		}
	}
}

// SplitP2P keeps a group that fits one launch whole; else round k holds
// the k-th send to and the k-th receive from each peer, whatever their
// order in the group, consecutive rounds packed while they fit; a peer past
// MaxRanks is refused.
func TestSplitP2P(t *testing.T) {
	type op struct {
		peer int
		send bool
	}
	pairs := func(n, times int) []op { // to and from every rank, times times
		var ops []op
		for range times {
			for p := range n {
				ops = append(ops, op{p, true}, op{p, false})
			}
		}
		return ops
	}
	repeat := func(k int, v ...int) []int {
		var out []int
		for _, x := range v {
			for range k {
				out = append(out, x)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ops  []op
		most int
		want []int // each operation's launch
	}{
		{"fits one launch", []op{{1, true}, {1, true}, {1, false}}, 16, []int{0, 0, 0}},
		{"each round alone", []op{{1, true}, {1, true}, {1, false}, {1, true}, {1, false}}, 0, []int{0, 1, 0, 2, 1}},
		{"peers counted apart", []op{{0, true}, {3, true}, {0, true}, {7, false}, {3, true}}, 0, []int{0, 0, 1, 0, 1}},
		{"rounds of 2 packed by 4", []op{{1, true}, {1, false}, {1, true}, {1, false}, {1, true}, {1, false}}, 4, []int{0, 0, 0, 0, 1, 1}},
		{"every pair twice at 8 ranks", pairs(8, 2), 16, repeat(16, 0, 1)},
		{"every pair four times at 4 ranks", pairs(4, 4), 16, repeat(16, 0, 1)},
		{"every pair three times at 4 ranks", pairs(4, 3), 16, repeat(8, 0, 0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]spec.Call, len(tc.ops))
			for i, o := range tc.ops {
				calls[i] = spec.Call{Coll: spec.SendRecv, Type: spec.Float32, Count: 1, NRanks: snac.MaxRanks, Peer: o.peer, IsSend: o.send}
			}
			launch := make([]int, len(calls))
			n, err := snac.SplitP2P(launch, tc.most, func(i int) *spec.Call { return &calls[i] })
			require.NoError(t, err)
			require.Equal(t, tc.want, launch)
			require.Equal(t, slices.Max(tc.want)+1, n)
		})
	}
	for _, peer := range []int{-1, snac.MaxRanks} {
		c := spec.Call{Coll: spec.SendRecv, Peer: peer, NRanks: snac.MaxRanks + 1}
		_, err := snac.SplitP2P(make([]int, 2), 1, func(int) *spec.Call { return &c })
		require.Error(t, err, "peer %d", peer)
	}
}
