package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

func TestBuildEveryRegimeSmoke(t *testing.T) {
	for _, coll := range []spec.Collective{spec.AllReduce, spec.AllGather, spec.ReduceScatter, spec.AllToAll, spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		for _, count := range []uint64{0, 1, 100, 3000, 40000} {
			for _, inPlace := range []bool{false, true} {
				w := newWorld(t, 4, count+uint64(coll))
				calls := callsFor(4, coll, spec.Float32, spec.Op{Kind: spec.Sum}, count, 1)
				require.NoError(t, w.run(calls, inPlace), describe(calls, inPlace))
			}
		}
	}
}
