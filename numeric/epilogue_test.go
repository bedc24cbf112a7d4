package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

// ulpOf is the spacing of type t's values at |v| (its normal range).
func ulpOf(t spec.DataType, v float64) float64 {
	bits := map[spec.DataType]int{spec.Float32: 23, spec.Float16: 10, spec.Bfloat16: 7}[t]
	_, e := math.Frexp(math.Max(math.Abs(v), 1e-30))
	return math.Ldexp(1, e-1-bits)
}

// TestEpilogueAgainstFloat64 checks EpilogueRows against the unfused
// sequence written in float64 here: reduced + residual rounded to the type,
// then x / sqrt(mean(x*x) + eps) * weight rounded once. The epilogue runs
// in float32, so its output may differ by one unit in the last place of the
// type, and float32's by 1e-5 relative (its ulp is as fine as the
// accumulation error of a row's squares); the residual is exact (one addition rounded once
// either way), and the quantized values and row scales are those of the
// output it produced.
func TestEpilogueAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := []spec.EpilogueKind{
		spec.EpilogueResidualAdd,
		spec.EpilogueRMSNorm,
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm,
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8,
		spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale,
	}
	for _, typ := range []spec.DataType{spec.Float32, spec.Float16, spec.Bfloat16} {
		for _, kind := range kinds {
			for _, hidden := range []int{1, 2, 7, 64, 1000, 4096} {
				const rows = 3
				size := typ.Size()
				n := hidden * rows
				out, res, w := make([]byte, n*size), make([]byte, n*size), make([]byte, hidden*size)
				for i := range n {
					SetFloat64(typ, out, i, rng.NormFloat64()*4)
					SetFloat64(typ, res, i, rng.NormFloat64())
				}
				for i := range hidden {
					SetFloat64(typ, w, i, 0.5+rng.Float64())
				}
				if kind&spec.EpilogueRMSNorm != 0 && hidden > 1 {
					for i := range hidden { // a row of zeros: rmsnorm gives zeros, a row scale 1
						SetFloat64(typ, out, i, 0)
						SetFloat64(typ, res, i, 0)
					}
				}
				in, inRes := append([]byte(nil), out...), append([]byte(nil), res...)
				quant, scales := make([]byte, n), make([]byte, 4*rows)
				const tensorScale = 0.03125
				le.PutUint32(scales, math.Float32bits(tensorScale))
				eps := float32(1e-6)
				var r, wt, q, s []byte
				if kind&spec.EpilogueResidualAdd != 0 {
					r = res
				}
				if kind&spec.EpilogueRMSNorm != 0 {
					wt = w
				}
				if kind&spec.EpilogueQuantFP8 != 0 {
					q, s = quant, scales
				}
				EpilogueRows{Type: typ, Kind: kind, Hidden: hidden, Eps: eps}.Run(out, r, wt, q, s)

				round := func(v float64) float64 {
					b := make([]byte, size)
					SetFloat64(typ, b, 0, v)
					return GetFloat64(typ, b, 0)
				}
				for row := range rows {
					x := make([]float64, hidden)
					var ss float64
					for i := range hidden {
						k := row*hidden + i
						x[i] = GetFloat64(typ, in, k)
						if kind&spec.EpilogueResidualAdd != 0 {
							x[i] = round(x[i] + GetFloat64(typ, inRes, k))
							require.Equal(t, x[i], GetFloat64(typ, res, k), "%s %s hidden %d: residual %d", typ, kind, hidden, k)
						}
						ss += x[i] * x[i]
					}
					amax := 0.0
					for i := range hidden {
						k := row*hidden + i
						want := x[i]
						if kind&spec.EpilogueRMSNorm != 0 {
							want = round(x[i] / math.Sqrt(ss/float64(hidden)+float64(eps)) * GetFloat64(typ, w, i))
						}
						got := GetFloat64(typ, out, k)
						tol := ulpOf(typ, want)
						if typ == spec.Float32 {
							tol = 1e-5 * math.Abs(want) // float32's own sum of squares and scaling
						}
						require.InDelta(t, want, got, tol, "%s %s hidden %d: output %d", typ, kind, hidden, k)
						amax = math.Max(amax, math.Abs(got))
					}
					if kind&spec.EpilogueQuantFP8 == 0 {
						continue
					}
					scale := float32(tensorScale)
					if kind&spec.EpilogueRowScale != 0 {
						scale = 1
						if amax > 0 {
							scale = float32(amax) / spec.FP8Max
						}
						require.Equal(t, scale, math.Float32frombits(le.Uint32(scales[4*row:])), "%s %s hidden %d: scale of row %d", typ, kind, hidden, row)
					}
					for i := range hidden {
						k := row*hidden + i
						y := float32(GetFloat64(typ, out, k))
						wantQ := Float8e4m3FromFloat64(math.Max(-spec.FP8Max, math.Min(spec.FP8Max, float64(y/scale))))
						require.Equal(t, wantQ, quant[k], "%s %s hidden %d: quant %d (%v / %v)", typ, kind, hidden, k, y, scale)
					}
				}
			}
		}
	}
}

// TestEpilogueRowsAlone: an epilogue over some rows touches those rows of
// its buffers and no others (the host Atom hands it slices of a row range).
func TestEpilogueRowsAlone(t *testing.T) {
	e := EpilogueRows{Type: spec.Bfloat16, Kind: spec.EpilogueResidualAdd | spec.EpilogueRMSNorm, Hidden: 4, Eps: 1e-5}
	out, res, w := make([]byte, 3*8), make([]byte, 3*8), make([]byte, 8)
	for i := range 12 {
		SetFloat64(spec.Bfloat16, out, i, float64(i+1))
		SetFloat64(spec.Bfloat16, res, i, 1)
	}
	for i := range 4 {
		SetFloat64(spec.Bfloat16, w, i, 1)
	}
	before, resBefore := append([]byte(nil), out...), append([]byte(nil), res...)
	e.Run(out[8:16], res[8:16], w, nil, nil)
	require.Equal(t, before[:8], out[:8])
	require.Equal(t, before[16:], out[16:])
	require.Equal(t, resBefore[:8], res[:8])
	require.Equal(t, resBefore[16:], res[16:])
	require.NotEqual(t, before[8:16], out[8:16])
	// Row 1 is 5..8 plus 1 = 6..9: mean square 230/4, so 6/sqrt(57.5) first.
	require.InDelta(t, 6/math.Sqrt(57.5+1e-5), GetFloat64(spec.Bfloat16, out, 4), 1.0/128)
}
