package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// The other GPU tests use 2 GPUs; these use every rank count a machine
// allows beyond that: 3 (odd), 4 and all its GPUs (up to snac.MaxRanks).
// On a 2-GPU machine they skip.

// gpuRankCounts is the rank counts past 2 this machine can run.
func gpuRankCounts(t *testing.T) []int {
	needGPUs(t, 3)
	var count int32
	driver.DeviceGetCount(&count)
	most := min(int(count), snac.MaxRanks)
	var ns []int
	for _, n := range []int{3, 4, most} {
		if n <= most && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	return ns
}

var everyGPUType = []spec.DataType{spec.Int8, spec.Uint8, spec.Int32, spec.Uint32, spec.Int64, spec.Uint64,
	spec.Float16, spec.Float32, spec.Float64, spec.Bfloat16, spec.Float8e4m3, spec.Float8e5m2}

// runChecked runs one call of coll on every rank (rank r with
// spectest.RankOp(op, r): PreMulSum scalars differ per rank) and checks
// every rank's output against spectest's reference.
func runChecked(t *testing.T, ranks []*gpuRank, coll spec.Collective, typ spec.DataType, op spec.Op, perRank uint64, rng *rand.Rand) {
	calls := make([]*spec.Call, len(ranks))
	for r := range ranks {
		calls[r] = typedCall(coll, typ, spectest.RankOp(op, r), len(ranks), r, perRank)
	}
	runCheckedCalls(t, ranks, calls, rng)
}

// runCheckedCalls runs calls[r] on rank r and checks every rank's output
// against spectest's reference.
func runCheckedCalls(t *testing.T, ranks []*gpuRank, calls []*spec.Call, rng *rand.Rand) {
	typ := calls[0].Type
	inputs := spectest.Inputs(rng, calls)
	want := spectest.Expected(calls, inputs)
	recv := make([]devicePtr, len(ranks))
	for r, g := range ranks {
		c := calls[r]
		in, out := c.Extents()
		send := g.alloc(t, int(in))
		recv[r] = g.alloc(t, int(out))
		g.upload(t, send, inputs[r])
		c.Send, c.Recv = uintptr(send), uintptr(recv[r])
		plan, err := snac.Build(c, g.topo)
		require.NoError(t, err, "%s", c)
		require.NoError(t, g.Launch(plan, []atom.Buffers{{Send: c.Send, Recv: c.Recv}}, uintptr(g.stream)), "%s", c)
	}
	for r, g := range ranks {
		g.sync(t)
		require.NoError(t, g.AsyncError(), "%s", calls[r])
		_, out := calls[r].Extents()
		require.NoError(t, spectest.Compare(typ, g.download(t, recv[r], int(out)), want[r]), "%s", calls[r])
	}
}

// TestGPUEveryCollectiveAtEveryRankCount: every collective, at packet,
// staged and ring sizes (gpuTopology's small staging), types and ops in
// rotation, twice in a row (the second call uses the other staging half).
func TestGPUEveryCollectiveAtEveryRankCount(t *testing.T) {
	for _, n := range gpuRankCounts(t) {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			ranks := newGPURanks(t, n, int64(20*time.Second))
			rng := rand.New(rand.NewPCG(uint64(n), 13))
			i := 0
			for coll := spec.Collective(0); coll < spec.SendRecv; coll++ {
				for _, perRank := range []uint64{40, 3000, 100 << 10, 1536 << 10} {
					for range 2 {
						typ := everyGPUType[i%len(everyGPUType)]
						op := spectest.OpFor(spec.Op{Kind: spec.OpKind(i % (int(spec.PreMulSum) + 1)), Scalar: 3}, typ, n)
						runChecked(t, ranks, coll, typ, op, perRank, rng)
						i++
					}
				}
			}
		})
	}
}

// TestGPUOneRankNeverComesAtEveryRankCount: the last rank never joins; every
// other rank's kernel must stop at the timeout with ErrTimeout, never hang.
func TestGPUOneRankNeverComesAtEveryRankCount(t *testing.T) {
	for _, n := range gpuRankCounts(t) {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			ranks := newGPURanks(t, n, int64(300*time.Millisecond))
			start := time.Now()
			for r, g := range ranks[:n-1] {
				c := typedCall(spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, n, r, 64<<10)
				in, out := c.Extents()
				c.Send, c.Recv = uintptr(g.alloc(t, int(in))), uintptr(g.alloc(t, int(out)))
				plan, err := snac.Build(c, g.topo)
				require.NoError(t, err)
				require.NoError(t, g.Launch(plan, []atom.Buffers{{Send: c.Send, Recv: c.Recv}}, uintptr(g.stream)))
			}
			for r, g := range ranks[:n-1] {
				g.sync(t)
				err := g.AsyncError()
				require.True(t, errors.Is(err, errs.ErrTimeout), "rank %d: got %v", r, err)
			}
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

// TestGPUColumnCollectives: the column-block rows of the layout table
// (AllGatherColumns, ReduceScatterColumns) on 1, 2 and up to 4 GPUs, at
// packet, staged and ring sizes, with rows of whole packets and rows that
// are not (12 bytes), types and ops in rotation, checked against
// spectest's reference.
func TestGPUColumnCollectives(t *testing.T) {
	needGPUs(t, 1)
	var count int32
	driver.DeviceGetCount(&count)
	shapes := [][2]uint64{{1, 2}, {3, 3}, {16, 64}, {64, 250}, {7, 3000}, {512, 1024}, {1000, 600}}
	for n := 1; n <= min(int(count), 4); n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			ranks := newGPURanks(t, n, int64(20*time.Second))
			rng := rand.New(rand.NewPCG(uint64(n), 17))
			i := 0
			for _, coll := range []spec.Collective{spec.AllGatherColumns, spec.ReduceScatterColumns} {
				for _, s := range shapes {
					typ := []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int8, spec.Float64}[i%4]
					op := spectest.OpFor(spec.Op{Kind: spec.OpKind(i % (int(spec.PreMulSum) + 1)), Scalar: 3}, typ, n)
					calls := make([]*spec.Call, n)
					for r := range ranks {
						calls[r] = &spec.Call{Coll: coll, Type: typ, Op: spectest.RankOp(op, r), Count: s[0] * s[1], Rows: s[0], Rank: r, NRanks: n}
					}
					runCheckedCalls(t, ranks, calls, rng)
					i++
				}
			}
		})
	}
}
