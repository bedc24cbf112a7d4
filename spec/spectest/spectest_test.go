package spectest_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/numeric"
	"purlin/spec"
	"purlin/spec/spectest"
)

var everyType = []spec.DataType{spec.Int8, spec.Uint8, spec.Int32, spec.Uint32, spec.Int64, spec.Uint64,
	spec.Float16, spec.Float32, spec.Float64, spec.Bfloat16, spec.Float8e4m3, spec.Float8e5m2}

// TestReferenceAgreesWithNumericReduce: the host reduction (rank order, fp32
// accumulation) lands within the reference's tolerance for every type, op
// and rank count, and bit-exact for integers, Max and Min. PreMulSum gets a
// different scalar on every rank, and every rank reduces as a Plan does:
// its own input multiplied in the reduce, the peers' arriving pre-multiplied.
func TestReferenceAgreesWithNumericReduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range everyType {
		for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
			for n := 1; n <= 8; n++ {
				if !(spec.Op{Kind: kind}).DefinedFor(typ, n) {
					continue // no collective reduces with it
				}
				calls := make([]*spec.Call, n)
				for r := range n {
					op := spec.Op{Kind: kind, Scalar: []float64{1.5, -2, 0.3, 3}[r%4]}
					calls[r] = &spec.Call{Coll: spec.AllReduce, Type: typ, Op: op, Count: 777, Rank: r, NRanks: n}
				}
				in := spectest.Inputs(rng, calls)
				want := spectest.Expected(calls, in)
				premul := make([][]byte, n) // what each rank sends its peers
				for r := range n {
					premul[r] = in[r]
					if kind == spec.PreMulSum {
						premul[r] = make([]byte, len(in[r]))
						numeric.Reduce(premul[r], in[r:r+1], typ, calls[r].Op, 1, 1)
					}
				}
				for r := range n {
					srcs := append([][]byte(nil), premul...)
					srcs[r] = in[r]
					got := make([]byte, len(in[0]))
					numeric.Reduce(got, srcs, typ, calls[r].Op, n, 1<<r)
					require.NoError(t, spectest.Compare(typ, got, want[r]), "%s %s n=%d rank %d", typ, kind, n, r)
				}
			}
		}
	}
}

func TestCompareIsTight(t *testing.T) {
	calls := []*spec.Call{{Coll: spec.AllReduce, Type: spec.Float16, Op: spec.Op{Kind: spec.Sum}, Count: 1, NRanks: 2},
		{Coll: spec.AllReduce, Type: spec.Float16, Op: spec.Op{Kind: spec.Sum}, Count: 1, Rank: 1, NRanks: 2}}
	in := [][]byte{make([]byte, 2), make([]byte, 2)}
	numeric.SetFloat64(spec.Float16, in[0], 0, 1.0)
	numeric.SetFloat64(spec.Float16, in[1], 0, 0.5)
	want := spectest.Expected(calls, in)[0]
	require.Equal(t, 1.5, numeric.GetFloat64(spec.Float16, want.Data, 0))
	got := make([]byte, 2)
	numeric.SetFloat64(spec.Float16, got, 0, 1.5+2*0.0009765625) // two ulps away
	require.Error(t, spectest.Compare(spec.Float16, got, want))
	numeric.SetFloat64(spec.Float16, got, 0, 1.5)
	require.NoError(t, spectest.Compare(spec.Float16, got, want))
}

func TestCopiesAreExactAndGapsIgnored(t *testing.T) {
	calls := make([]*spec.Call, 2)
	for r := range 2 {
		calls[r] = &spec.Call{Coll: spec.AllGatherV, Type: spec.Int32, NRanks: 2, Rank: r, Counts: []uint64{2, 1}, Displs: []uint64{0, 3}}
	}
	in := spectest.Inputs(rand.New(rand.NewPCG(3, 4)), calls)
	want := spectest.Expected(calls, in)[1]
	require.Equal(t, []bool{true, true, true, true, true, true, true, true, false, false, false, false, true, true, true, true}, want.Covered)
	got := append([]byte(nil), want.Data...)
	got[8] ^= 0xff // in the gap: ignored
	require.NoError(t, spectest.Compare(spec.Int32, got, want))
	got[12] ^= 1
	require.Error(t, spectest.Compare(spec.Int32, got, want))
}

func TestFillIsNeverAllZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range everyType {
		for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
			buf := make([]byte, 10000*typ.Size())
			spectest.Fill(rng, typ, kind, buf)
			zero := 0
			for i := range 10000 {
				if numeric.GetFloat64(typ, buf, i) == 0 {
					zero++
				}
			}
			require.Less(t, zero, 200, "%s %s", typ, kind)
		}
	}
}

func TestOpForKeepsDefinedOpsAndReplacesTheRest(t *testing.T) {
	for _, typ := range everyType {
		for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
			for _, n := range []int{1, 2, 5} {
				op := spec.Op{Kind: kind, Scalar: -2}
				got := spectest.OpFor(op, typ, n)
				require.True(t, got.DefinedFor(typ, n), "%s on %s, %d ranks", op, typ, n)
				require.Equal(t, op.Scalar, got.Scalar)
				if op.DefinedFor(typ, n) {
					require.Equal(t, op, got)
				}
			}
		}
	}
	for _, kind := range []spec.OpKind{spec.Avg, spec.PreMulSum} {
		require.Equal(t, spec.Min, spectest.OpFor(spec.Op{Kind: kind}, spec.Float8e5m2, 1).Kind)
		require.Equal(t, kind, spectest.OpFor(spec.Op{Kind: kind}, spec.Float8e5m2, 2).Kind)
	}
}
