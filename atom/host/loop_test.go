package host

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// TestLoopsRun: ring AllReduces whose chunks run as a loop's body (snac's
// Repeat, run through Unroll) sum as numeric.Reduce does, three calls in a
// row on three ranks, every worker's tail past its whole chunks included.
func TestLoopsRun(t *testing.T) {
	const n = 3
	ranks := newRanks(t, n, 20*time.Second)
	rng := rand.New(rand.NewPCG(3, 5))
	for _, count := range []uint64{100003, 3 << 15} {
		plans := make([]*snac.Plan, n)
		sends, recvs := make([][]byte, n), make([][]byte, n)
		for r, rk := range ranks {
			c := &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: count, Rank: r, NRanks: n}
			p, err := snac.Build(c, rk.topo)
			require.NoError(t, err)
			plans[r] = p
			sends[r], recvs[r] = make([]byte, 4*count), make([]byte, 4*count)
		}
		require.True(t, slices.ContainsFunc(plans[0].Workers, func(w snac.Worker) bool { return w.Loops != 0 }), "count %d: a worker with a loop", count)
		for call := range 3 {
			for r := range n {
				spectest.Fill(rng, spec.Float32, spec.Sum, sends[r])
			}
			for r, rk := range ranks {
				require.NoError(t, rk.Launch(plans[r], []atom.Buffers{{Send: addr(sends[r]), Recv: addr(recvs[r])}}, 0))
			}
			for _, err := range syncAll(ranks) {
				require.NoError(t, err)
			}
			want := make([]byte, 4*count)
			numeric.Reduce(want, sends, spec.Float32, spec.Op{Kind: spec.Sum}, n, 0)
			for r := range n {
				require.Equal(t, want, recvs[r], "count %d call %d rank %d", count, call, r)
			}
		}
	}
}
