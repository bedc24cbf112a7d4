package snac_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

// How runProgram launches a group's transfers.
type grouping int

const (
	whole  grouping = iota // merged into one Plan
	nested                 // merged in two halves first, then the halves
	rounds                 // one merged Plan per round of snac.SplitP2P
)

// runProgram runs a program on every rank, launching each rank's groups as
// comm does (Program.Launches), a group's transfers as how says. Every
// received byte and every collective's output is checked.
func (w *world) runProgram(prog *spectest.Program, how grouping) {
	type landing struct {
		l  *snactest.Launch
		at uint64 // Recv offset in l.Mem
	}
	payload := make([][]byte, len(prog.Events))
	got := make([]landing, len(prog.Events))            // where each transfer lands
	want := make([][]spectest.Output, len(prog.Events)) // collectives: per rank
	collLaunch := make([][]*snactest.Launch, len(prog.Events))
	for k, e := range prog.Events {
		if e.Calls == nil {
			payload[k] = make([]byte, e.Bytes())
			garbage(w.rng, payload[k])
			continue
		}
		in := spectest.Inputs(w.rng, e.Calls)
		want[k] = spectest.Expected(e.Calls, in)
		for r, c := range e.Calls {
			l, err := w.launch(c, false, in[r])
			require.NoError(w.t, err)
			collLaunch[k] = append(collLaunch[k], l)
		}
	}
	launches := make([][]*snactest.Launch, w.n)
	for r := range w.n {
		units, err := prog.Launches(r)
		require.NoError(w.t, err)
		if how == rounds {
			units, err = snactest.SplitLaunches(prog, units, 0)
			require.NoError(w.t, err)
		}
		for _, unit := range units {
			if e := prog.Events[unit[0].Event]; e.Calls != nil {
				launches[r] = append(launches[r], collLaunch[unit[0].Event][r])
				continue
			}
			var plans []*snac.Plan
			p2p := &snactest.Launch{}
			for _, op := range unit {
				e := prog.Events[op.Event]
				c := e.Call(r, w.n, op.Send)
				p, err := w.plans[r].Plan(&c, w.rankTopo(r))
				require.NoError(w.t, err)
				plans = append(plans, p)
				n := e.Bytes()
				at := uint64(len(p2p.Mem))
				mem := make([]byte, n+32)
				garbage(w.rng, mem)
				if op.Send {
					copy(mem, payload[op.Event])
					p2p.Bufs = append(p2p.Bufs, snactest.Buffer{Send: at, In: n})
				} else {
					p2p.Bufs = append(p2p.Bufs, snactest.Buffer{Recv: at, Out: n})
					got[op.Event] = landing{p2p, at}
				}
				p2p.Mem = append(p2p.Mem, mem...)
			}
			p2p.Plan = w.merge(plans, how == nested)
			if most := w.topo.LaunchWorkers; most > 0 && how == rounds {
				require.LessOrEqual(w.t, len(p2p.Plan.Workers), most, "rank %d's launch of %d sends and receives", r, len(unit))
			}
			launches[r] = append(launches[r], p2p)
		}
	}
	require.NoError(w.t, w.sim.Run(launches), "%s", prog)
	for k, e := range prog.Events {
		if e.Calls != nil {
			for r, c := range e.Calls {
				w.checkOutput(c, collLaunch[k][r], want[k][r], false)
			}
			continue
		}
		g := got[k]
		require.Equal(w.t, payload[k], g.l.Mem[g.at:g.at+e.Bytes()], "transfer %d of %s", k, prog)
	}
}

// merge merges plans, or with nest the merges of its two halves: Merge
// takes Plans that are merges themselves (chains of several calls). Plans
// without workers keep it flat (they hold no buffer a merge could count).
func (w *world) merge(plans []*snac.Plan, nest bool) *snac.Plan {
	for _, p := range plans {
		nest = nest && len(p.Workers) > 0
	}
	if h := len(plans) / 2; nest && h > 0 {
		a, err := snac.Merge(plans[:h]...)
		require.NoError(w.t, err)
		b, err := snac.Merge(plans[h:]...)
		require.NoError(w.t, err)
		plans = []*snac.Plan{a, b}
	}
	m, err := snac.Merge(plans...)
	require.NoError(w.t, err)
	return m
}

// p2pSizes reach every regime of testTopo's point-to-point areas: packets,
// staged, chunked, and a ring of many chunks.
var p2pSizes = []uint64{40, 3000, 14000, 100000}

// NCCL matches the k-th send from one rank to another with the k-th
// receive there, however either side groups its calls: a merged group must
// number its transfers on a pair exactly as separate calls do.
func TestP2PMatchesAcrossGroupings(t *testing.T) {
	for _, tc := range spectest.GroupingCases() {
		sizes := p2pSizes
		switch {
		case tc.Fixed:
			sizes = []uint64{0}
		case tc.Unblocked:
			sizes = p2pSizes[:3] // no ring
		}
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%dB", tc.Name, size), func(t *testing.T) {
				w := newWorld(t, tc.Program.NRanks, size)
				// Later runs start from advanced epochs; the second
				// launches each group in rounds where the case allows.
				hows := []grouping{whole, rounds, whole}
				if tc.WholeGroup {
					hows[1] = nested
				}
				for run, how := range hows {
					p := tc.Program
					if !tc.Fixed {
						p = p.Resized(size + uint64(run))
					}
					w.runProgram(&p, how)
				}
			})
		}
	}
}

// TestP2PWithinLaunchWorkers: where one launch may run only LaunchWorkers
// workers (ranks sharing a GPU, whose kernels must all fit on its SMs at
// once), each launch of a group's sends and receives, as comm splits it
// (rounds), stays within them, down to one worker per peer and direction;
// and every transfer still lands (sizes and groupings as
// TestP2PMatchesAcrossGroupings allows each case).
func TestP2PWithinLaunchWorkers(t *testing.T) {
	for _, tc := range spectest.GroupingCases() {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(t, tc.Program.NRanks, 2)
			w.topo.Workers = 8
			w.topo.LaunchWorkers = 2 * tc.Program.NRanks
			how, sizes := rounds, p2pSizes
			if tc.WholeGroup {
				how = whole
			}
			if tc.Unblocked {
				sizes = p2pSizes[:3] // no ring
			}
			for run, size := range sizes {
				p := tc.Program
				if !tc.Fixed {
					p = p.Resized(size + uint64(run))
				}
				w.runProgram(&p, how)
			}
		})
	}
}

// TestP2PRandomGroupings runs random programs grouped at random on each
// rank, at 2, 4 and 8 ranks, checking every byte received; half of them
// merge each group's Plans in two stages.
func TestP2PRandomGroupings(t *testing.T) {
	seeds := 6
	if testing.Short() || raceEnabled {
		seeds = 2
	}
	for _, n := range []int{2, 4, 8} {
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprintf("%d ranks seed %d", n, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(n)))
				w := newWorld(t, n, seed)
				bytes := func() uint64 {
					if rng.IntN(8) == 0 {
						return 0
					}
					return rng.Uint64N(p2pSizes[rng.IntN(len(p2pSizes))] + 1)
				}
				coll := func() []*spec.Call { return randomCalls(rng, n) }
				for i := range 4 {
					prog := spectest.RandomProgram(rng, n, 2+rng.IntN(4*n), 12, bytes, coll)
					w.runProgram(&prog, []grouping{whole, nested}[i%2])
				}
			})
		}
	}
}

// TestP2PSelfChainsJoinApart: a group of transfers from a rank to itself,
// one below the copy engine's size and one on it, chains them on the send
// channel to itself with a join between them (Merge). Its flags are of
// their own kind: the done rule's FlagDone on that channel is the
// receiver's, the same rank's, and a join that raised it let the second
// transfer overwrite the first's staging before it was read.
func TestP2PSelfChainsJoinApart(t *testing.T) {
	for seed := range uint64(40) {
		w := newWorld(t, 2, 2*seed+1) // odd: engineTopo
		small := spectest.Event{From: 0, To: 0, Count: 548, Type: spec.Uint32}
		large := spectest.Event{From: 0, To: 0, Count: 1820, Type: spec.Uint32} // past EngineMin
		prog := spectest.Program{NRanks: 2, Events: []spectest.Event{small, large, small, large}, Groups: [][]int{{8}, nil}}
		w.runProgram(&prog, whole)
	}
}
