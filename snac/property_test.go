package snac_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/spec"
	"purlin/spec/spectest"
)

var everyType = []spec.DataType{spec.Int8, spec.Uint8, spec.Int32, spec.Uint32, spec.Int64, spec.Uint64,
	spec.Float16, spec.Float32, spec.Float64, spec.Bfloat16, spec.Float8e4m3, spec.Float8e5m2}

// randomBytes picks a payload size reaching every regime of testTopo, with
// an occasional large one (several MiB in total over the ranks).
func randomBytes(rng *rand.Rand) uint64 {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3:
		return rng.Uint64N(1 << 10) // packets
	case 4, 5, 6:
		return rng.Uint64N(64 << 10) // staged, chunked
	case 7, 8:
		return rng.Uint64N(256 << 10) // ring
	}
	if raceEnabled {
		return 64<<10 + rng.Uint64N(64<<10)
	}
	return 1<<20 + rng.Uint64N(3<<20) // several MiB over the ranks
}

// randomCalls draws one call per rank of a random collective.
func randomCalls(rng *rand.Rand, n int) []*spec.Call {
	coll := spec.Collective(rng.IntN(int(spec.SendRecv)))
	t := everyType[rng.IntN(len(everyType))]
	op := spectest.OpFor(spec.Op{Kind: spec.OpKind(rng.IntN(int(spec.PreMulSum) + 1)), Scalar: float64(rng.IntN(5)) - 2}, t, n)
	count := randomBytes(rng) / uint64(t.Size())
	if coll == spec.AllToAll || coll == spec.AllGather || coll == spec.ReduceScatter || coll == spec.Gather || coll == spec.Scatter {
		count /= uint64(n) // per-rank slices: keep the total in range
	}
	calls := callsFor(n, coll, t, op, count, rng.IntN(n))
	switch coll {
	case spec.AllGatherV, spec.ReduceScatterV:
		counts, displs := vector(rng, n, count/uint64(n)+1)
		for _, c := range calls {
			c.Counts, c.Displs = counts, displs
		}
	case spec.AllToAllV:
		m := make([][]uint64, n)
		for p := range m {
			m[p] = make([]uint64, n)
			for q := range m[p] {
				if rng.IntN(4) > 0 {
					m[p][q] = rng.Uint64N(count/uint64(n) + 1)
				}
			}
		}
		for p, c := range calls {
			c.SendCounts, c.RecvCounts = make([]uint64, n), make([]uint64, n)
			for q := range n {
				c.SendCounts[q], c.RecvCounts[q] = m[p][q], m[q][p]
			}
			_, c.SendDispls = displsFor(rng, c.SendCounts)
			_, c.RecvDispls = displsFor(rng, c.RecvCounts)
		}
	}
	return calls
}

// vector draws V counts (some zero) and displacements with gaps.
func vector(rng *rand.Rand, n int, most uint64) (counts, displs []uint64) {
	counts = make([]uint64, n)
	for i := range counts {
		if rng.IntN(5) > 0 {
			counts[i] = rng.Uint64N(most + 1)
		}
	}
	_, displs = displsFor(rng, counts)
	return counts, displs
}

func displsFor(rng *rand.Rand, counts []uint64) (uint64, []uint64) {
	displs := make([]uint64, len(counts))
	var at uint64
	for _, i := range rng.Perm(len(counts)) {
		at += rng.Uint64N(3)
		displs[i] = at
		at += counts[i]
	}
	return at, displs
}

// TestPropertySequences runs many consecutive random calls on one simulated
// communicator per seed, each checked against the reference.
func TestPropertySequences(t *testing.T) {
	seeds := 12
	if testing.Short() || raceEnabled {
		seeds = 4
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 99))
		n := 1 + rng.IntN(8)
		w := newWorld(t, n, seed)
		for range 12 {
			calls := randomCalls(rng, n)
			inPlace := inPlaceExists(calls[0].Coll) && rng.IntN(2) == 0
			require.NoError(t, w.run(calls, inPlace), "seed %d: %s", seed, describe(calls, inPlace))
		}
	}
}
