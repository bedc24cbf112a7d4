package numeric

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

var allOps = []spec.OpKind{spec.Sum, spec.Prod, spec.Max, spec.Min, spec.Avg, spec.PreMulSum}

// referenceReduce computes one element the slow way, from the rules: float
// types in float64 rounded to the accumulation type after every operation
// (exactly what accumulating in that type gives), integers in 64 bits
// wrapped to the type's width after every operation. PreMulSum first
// multiplies the sources marked in scaled, rounding the product to t.
func referenceReduce(t spec.DataType, op spec.Op, nranks int, scaled uint, srcs [][]byte, i int, dst []byte) {
	premul := func(k int) bool { return op.Kind == spec.PreMulSum && scaled&(1<<k) != 0 }
	if t.IsFloat() {
		round := func(v float64) float64 { return float64(float32(v)) }
		if t == spec.Float64 {
			round = func(v float64) float64 { return v }
		}
		toT := func(v float64) float64 {
			b := make([]byte, 8)
			SetFloat64(t, b, 0, v)
			return GetFloat64(t, b, 0)
		}
		scalar := round(op.Scalar)
		var acc float64
		for k, s := range srcs {
			x := GetFloat64(t, s, i)
			if premul(k) {
				x = toT(round(x * scalar))
			}
			switch {
			case k == 0:
				acc = x
			case op.Kind == spec.Sum || op.Kind == spec.Avg || op.Kind == spec.PreMulSum:
				acc = round(acc + x)
			case op.Kind == spec.Prod:
				acc = round(acc * x)
			case op.Kind == spec.Max:
				if x > acc {
					acc = x
				}
			case op.Kind == spec.Min:
				if x < acc {
					acc = x
				}
			}
		}
		if op.Kind == spec.Avg {
			acc = round(acc / float64(nranks))
		}
		SetFloat64(t, dst, i, acc)
		return
	}
	bits := uint(8 * t.Size())
	wrap := func(v int64) int64 { // to the type's width, sign- or zero-extended
		if bits == 64 {
			return v
		}
		if t.IsSigned() {
			return v << (64 - bits) >> (64 - bits)
		}
		return int64(uint64(v) << (64 - bits) >> (64 - bits))
	}
	less := func(a, b int64) bool {
		if t.IsSigned() {
			return a < b
		}
		return uint64(a) < uint64(b)
	}
	scalar := wrap(int64(op.Scalar))
	var acc int64
	for k, s := range srcs {
		x := wrap(GetInt64(t, s, i))
		if premul(k) {
			x = wrap(x * scalar)
		}
		switch {
		case k == 0:
			acc = x
		case op.Kind == spec.Sum || op.Kind == spec.Avg || op.Kind == spec.PreMulSum:
			acc = wrap(acc + x)
		case op.Kind == spec.Prod:
			acc = wrap(acc * x)
		case op.Kind == spec.Max:
			if less(acc, x) {
				acc = x
			}
		case op.Kind == spec.Min:
			if less(x, acc) {
				acc = x
			}
		}
	}
	if op.Kind == spec.Avg {
		if t.IsSigned() {
			acc = acc / int64(nranks)
		} else {
			acc = int64(uint64(acc) / uint64(nranks))
		}
	}
	SetInt64(t, dst, i, acc)
}

// randomElements fills buf with values of type t: random bits for integers,
// and for floats mostly moderate values with some specials.
func randomElements(rng *rand.Rand, t spec.DataType, buf []byte) {
	if !t.IsFloat() {
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		return
	}
	n := len(buf) / t.Size()
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e-7, -3e-5}
	for i := range n {
		v := (rng.Float64()*2 - 1) * math.Ldexp(1, rng.IntN(12)-4)
		if rng.IntN(50) == 0 {
			v = specials[rng.IntN(len(specials))]
		}
		SetFloat64(t, buf, i, v)
	}
}

func sameElement(t spec.DataType, a, b []byte, i int) bool {
	if t.IsFloat() {
		x, y := GetFloat64(t, a, i), GetFloat64(t, b, i)
		if x != x || y != y {
			return x != x && y != y
		}
	}
	s := t.Size()
	return string(a[i*s:(i+1)*s]) == string(b[i*s:(i+1)*s])
}

// Every type x op x 1..8 sources, at sizes around the block boundary, with
// random sources marked as scaled (only PreMulSum heeds them).
func TestReduceAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for dt := spec.DataType(0); dt < spec.NumTypes; dt++ {
		for _, kind := range allOps {
			for nsrc := 1; nsrc <= 8; nsrc++ {
				name := fmt.Sprintf("%s/%s/%d", dt, spec.Op{Kind: kind}, nsrc)
				n := []int{1, 7, block + 3}[nsrc%3]
				op := spec.Op{Kind: kind, Scalar: []float64{0.37, 3, -2.5}[nsrc%3]}
				srcs := make([][]byte, nsrc)
				for k := range srcs {
					srcs[k] = make([]byte, n*dt.Size())
					randomElements(rng, dt, srcs[k])
				}
				scaled := uint(rng.IntN(1 << nsrc))
				got := make([]byte, n*dt.Size())
				Reduce(got, srcs, dt, op, nsrc, scaled)
				want := make([]byte, n*dt.Size())
				for i := range n {
					referenceReduce(dt, op, nsrc, scaled, srcs, i, want)
				}
				for i := range n {
					if !sameElement(dt, got, want, i) {
						require.Failf(t, "mismatch", "%s scaled %b element %d: got %v want %v (srcs %v)", name, scaled, i,
							GetFloat64(dt, got, i), GetFloat64(dt, want, i), column(dt, srcs, i))
					}
				}
			}
		}
	}
}

func column(t spec.DataType, srcs [][]byte, i int) []float64 {
	var c []float64
	for _, s := range srcs {
		c = append(c, GetFloat64(t, s, i))
	}
	return c
}

// dst may be any one of the sources (in-place reductions).
func TestReduceInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int8, spec.Float8e4m3} {
		for alias := range 3 {
			n := 2*block + 5
			srcs := make([][]byte, 3)
			for k := range srcs {
				srcs[k] = make([]byte, n*dt.Size())
				randomElements(rng, dt, srcs[k])
			}
			want := make([]byte, n*dt.Size())
			op := spec.Op{Kind: spec.PreMulSum, Scalar: -1.5}
			Reduce(want, srcs, dt, op, 3, 1<<alias)
			Reduce(srcs[alias], srcs, dt, op, 3, 1<<alias)
			for i := range n {
				require.True(t, sameElement(dt, want, srcs[alias], i), "%s alias %d element %d", dt, alias, i)
			}
		}
	}
}

// Narrow floats round once: 1 + 2^-11 + 2^-11 in fp16 is not 1 (it would be
// with a rounding after each addition).
func TestReduceRoundsOnce(t *testing.T) {
	one, tiny := make([]byte, 2), make([]byte, 2)
	SetFloat64(spec.Float16, one, 0, 1)
	SetFloat64(spec.Float16, tiny, 0, math.Ldexp(1, -11))
	dst := make([]byte, 2)
	Reduce(dst, [][]byte{one, tiny, tiny}, spec.Float16, spec.Op{Kind: spec.Sum}, 3, 0)
	require.Equal(t, 1+math.Ldexp(1, -10), GetFloat64(spec.Float16, dst, 0))
}

// PreMulSum multiplies only the sources marked scaled, each exactly once,
// and rounds the product to the type before it meets the others: a scaled
// source alone gives what a rank sends its peers, and the sum is the same
// whether a rank's input is multiplied where it is reduced or by its owner
// before it travels.
func TestPreMulSumScalesMarkedSources(t *testing.T) {
	const typ = spec.Float8e4m3
	x, y := make([]byte, 1), make([]byte, 1)
	SetFloat64(typ, x, 0, 1.125)
	SetFloat64(typ, y, 0, -1.75)
	op := spec.Op{Kind: spec.PreMulSum, Scalar: 1.5}
	dst := make([]byte, 1)
	Reduce(dst, [][]byte{x, y}, typ, op, 2, 0)
	require.Equal(t, -0.625, GetFloat64(typ, dst, 0), "no source scaled: a sum")
	Reduce(dst, [][]byte{x, y}, typ, op, 2, 0b11)
	require.Equal(t, -0.75, GetFloat64(typ, dst, 0), "both scaled: 1.6875 rounds to 1.75, -2.625 to -2.5")
	Reduce(dst, [][]byte{x}, typ, op, 1, 1)
	require.Equal(t, 1.75, GetFloat64(typ, dst, 0), "1.125*1.5 = 1.6875 rounds (to even) to 1.75")
	premul := append([]byte(nil), dst...)
	Reduce(dst, [][]byte{x, y}, typ, op, 2, 0b01)
	require.Equal(t, 0.0, GetFloat64(typ, dst, 0), "1.75 - 1.75, not 1.6875 - 1.75")
	Reduce(dst, [][]byte{premul, y}, typ, op, 2, 0)
	require.Equal(t, 0.0, GetFloat64(typ, dst, 0), "pre-multiplied by its owner: the same")
	Reduce(dst, [][]byte{x, y}, typ, spec.Op{Kind: spec.Sum, Scalar: 1.5}, 2, 0b11)
	require.Equal(t, -0.625, GetFloat64(typ, dst, 0), "Sum ignores scaled")
}

func TestReduceDoesNotAllocate(t *testing.T) {
	a, b, d := make([]byte, 4096), make([]byte, 4096), make([]byte, 4096)
	srcs := [][]byte{a, b}
	for _, dt := range []spec.DataType{spec.Float32, spec.Bfloat16, spec.Float8e5m2, spec.Int64} {
		allocs := testing.AllocsPerRun(10, func() { Reduce(d, srcs, dt, spec.Op{Kind: spec.PreMulSum, Scalar: 2}, 2, 1) })
		require.Zero(t, allocs, dt.String())
	}
}

func BenchmarkReduce(b *testing.B) {
	for _, dt := range []spec.DataType{spec.Float32, spec.Bfloat16, spec.Float16, spec.Float8e4m3} {
		b.Run(dt.String(), func(b *testing.B) {
			srcs := make([][]byte, 4)
			for k := range srcs {
				srcs[k] = make([]byte, 1<<20)
			}
			dst := make([]byte, 1<<20)
			b.SetBytes(1 << 20)
			for b.Loop() {
				Reduce(dst, srcs, dt, spec.Op{Kind: spec.Sum}, 4, 0)
			}
		})
	}
}
