package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// TestPreMulSumScalesOwnInputOnly: in a PreMulSum Plan every step that reads
// this rank's input (SpaceSend) is a Reduce that marks exactly that source
// as scaled, and nothing else is marked: a peer's data or a partial sum
// never meets this rank's scalar. A Sum Plan marks nothing. (That each
// input is scaled exactly once on its way to every output is what the
// simulated runs, with a different scalar on every rank, check.)
func TestPreMulSumScalesOwnInputOnly(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		for _, coll := range []spec.Collective{spec.AllReduce, spec.Reduce, spec.ReduceScatter, spec.ReduceScatterV} {
			for i, bytes := range regimeLadder {
				for _, kind := range []spec.OpKind{spec.PreMulSum, spec.Sum} {
					op := spec.Op{Kind: kind, Scalar: 3}
					calls := ladderCalls(n, coll, spec.Float32, op, bytes, i%n)
					for r, c := range calls {
						topo := testTopo(n)
						topo.Rank = r
						plan, err := snac.Build(c, topo)
						require.NoError(t, err)
						for k, s := range plan.Steps {
							where := []any{"n=%d %s %s rank %d step %d %s", n, c, plan.Regime, r, k, s.Verb}
							if kind != spec.PreMulSum || s.Verb != snac.Reduce {
								require.Zero(t, s.Scale, where...)
							}
							if s.Verb == snac.Copy && kind == spec.PreMulSum {
								require.NotEqual(t, snac.SpaceSend, s.Src[0].Space, where...)
							}
							if s.Verb == snac.Reduce && kind == spec.PreMulSum {
								for j := range snac.MaxSrc {
									own := j < int(s.NSrc) && s.Src[j].Space == snac.SpaceSend
									require.Equal(t, own, s.Scale&(1<<j) != 0, where...)
								}
							}
						}
					}
				}
			}
		}
	}
}
