package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

// TestBackToBackCallsOfChangingShape queues every rank's calls in one Run,
// as a stream queues kernels: a rank that finishes a call starts the next
// while its peers are still in the one before, and the shape changes every
// other call (collective, size from packets to a ring of one slot a worker,
// in place or not), as nccl-tests' size sweeps change it. The topology is
// the CUDA Atom's default scaled down 1024 times. Each call must meet the
// same call on every peer (check words, flags, staging halves) and compute
// its output. (With check words not double-buffered by the epoch's parity,
// a rank one call ahead overwrites the one its peer is about to read.)
func TestBackToBackCallsOfChangingShape(t *testing.T) {
	largest, seeds := uint64(1<<20), uint64(3)
	if raceEnabled {
		largest, seeds = 256<<10, 1
	}
	// Each collective twice at each size, out of place then in place; rooted
	// ones at several roots.
	var colls []spec.Collective
	for _, c := range []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.Broadcast, spec.Reduce, spec.AllToAll} {
		colls = append(colls, c, c)
	}
	for _, n := range []int{2, 3} {
		for seed := range seeds {
			// Seed 2: outputs in symmetric windows (Topology.Direct).
			q := newQueue(t, n, seed, snac.Topology{NRanks: n, Workers: 32, StageHalf: 64 << 10, P2PHalf: 1 << 10, PacketMax: 16, ChunkMax: 1 << 10,
				Direct: seed == 2})
			for bytes := uint64(8); bytes <= largest; bytes *= 4 {
				for i, coll := range colls {
					count := bytes / 4
					if coll == spec.AllGather || coll == spec.ReduceScatter || coll == spec.AllToAll {
						count /= uint64(n)
					}
					q.add(callsFor(n, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, i%n), i%2 == 1)
				}
			}
			regimes := map[snac.Regime]bool{}
			for _, l := range q.launches[0] {
				regimes[l.Plan.Regime] = true
			}
			for _, g := range []snac.Regime{snac.RegimePacket, snac.RegimeStaged, snac.RegimeChunked, snac.RegimeRing} {
				require.True(t, regimes[g], "%d ranks: no %s Plan", n, g)
			}
			q.run("%d ranks, seed %d", n, seed)
		}
	}
}

// TestBackToBackCallsWithSilentPairs queues calls in which some pairs of
// ranks send each other nothing (V collectives with zero counts; an
// AllReduce whose shards are mostly empty, where they hear from each other
// through the others) between calls that write every peer's halves. The
// collective channel has no done rule: a rank may rewrite a half two calls
// later only because it heard from every reader in the call between, and
// silent pairs hear from each other through greetings (hello.go); without
// them a fast rank overwrites what a slow one reads.
//
// With outputs in symmetric windows (Topology.Direct, the odd seeds), the
// AllGathers and the AllGatherV push straight into the outputs, and the
// silent pairs greet each other the same way.
func TestBackToBackCallsWithSilentPairs(t *testing.T) {
	for _, n := range []int{3, 4} {
		for seed := range uint64(6) {
			q := newQueue(t, n, seed, snac.Topology{NRanks: n, Workers: 4, StageHalf: 64 << 10, P2PHalf: 1 << 10, PacketMax: 16, ChunkMax: 1 << 10,
				Direct: seed%2 == 1})
			// Counts: rank 0 and the last rank hold data; the ranks between are
			// silent to each other.
			sparse := func(count uint64) []uint64 {
				c := make([]uint64, n)
				c[0], c[n-1] = count, count/2+1
				return c
			}
			packed := func(counts []uint64) []uint64 {
				d := make([]uint64, n)
				var at uint64
				for q := range n {
					d[q], at = at, at+counts[q]
				}
				return d
			}
			for _, count := range []uint64{4, 24, 300} { // packets, staged, chunked
				var group [][]*spec.Call
				for _, coll := range []spec.Collective{spec.AllGatherV, spec.ReduceScatterV, spec.AllToAllV} {
					group = append(group, callsFor(n, spec.AllGather, spec.Float32, spec.Op{Kind: spec.Sum}, count, 0))
					calls := callsFor(n, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, 0)
					for p, c := range calls {
						switch coll {
						case spec.AllToAllV: // only ranks 0 and n-1 exchange
							c.SendCounts, c.RecvCounts = make([]uint64, n), make([]uint64, n)
							if p == 0 || p == n-1 {
								c.SendCounts[n-1-p], c.RecvCounts[n-1-p] = count, count
							}
							c.SendDispls, c.RecvDispls = packed(c.SendCounts), packed(c.RecvCounts)
						default:
							c.Counts = sparse(count)
							c.Displs = packed(c.Counts)
						}
					}
					group = append(group, calls)
				}
				// 32 bytes, staged, over n ranks: two shards hold them, the others are empty.
				group = append(group, callsFor(n, spec.AllGather, spec.Float32, spec.Op{Kind: spec.Sum}, count, 0),
					callsFor(n, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, 8, 0))
				for _, calls := range group {
					q.add(calls, false)
				}
			}
			q.run("%d ranks, seed %d", n, seed)
		}
	}
}

// queue holds every rank's calls, queued for one simulator Run as a stream
// queues kernels, and the outputs they must produce.
type queue struct {
	t        *testing.T
	w        *world
	launches [][]*snactest.Launch // per rank, in call order
	order    []queuedCall
}

type queuedCall struct {
	calls   []*spec.Call
	want    []spectest.Output
	inPlace bool
}

func newQueue(t *testing.T, n int, seed uint64, topo snac.Topology) *queue {
	w := newWorld(t, n, seed)
	w.topo, w.sim = topo, snactest.New(topo, seed)
	return &queue{t: t, w: w, launches: make([][]*snactest.Launch, n)}
}

// add queues one call (one per rank) on random inputs.
func (q *queue) add(calls []*spec.Call, inPlace bool) {
	inputs := spectest.Inputs(q.w.rng, calls)
	q.order = append(q.order, queuedCall{calls, spectest.Expected(calls, inputs), inPlace})
	for r, c := range calls {
		l, err := q.w.launch(c, inPlace, inputs[r])
		require.NoError(q.t, err)
		q.launches[r] = append(q.launches[r], l)
	}
}

// run runs every queued call and checks every output.
func (q *queue) run(msgAndArgs ...any) {
	require.NoError(q.t, q.w.sim.Run(q.launches), msgAndArgs...)
	for k, c := range q.order {
		for r, call := range c.calls {
			q.w.checkOutput(call, q.launches[r][k], c.want[r], c.inPlace)
		}
	}
}
