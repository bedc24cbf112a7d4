package numeric

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// conversion is one narrow format's public functions, widened to uint32 codes.
type conversion struct {
	ref     *refFormat
	codes   int
	toF32   func(uint32) float32
	fromF32 func(float32) uint32
	fromF64 func(float64) uint32
}

var conversions = []conversion{
	{refFloat16, 1 << 16,
		func(c uint32) float32 { return Float16ToFloat32(uint16(c)) },
		func(f float32) uint32 { return uint32(Float16FromFloat32(f)) },
		func(f float64) uint32 { return uint32(Float16FromFloat64(f)) }},
	{refBfloat16, 1 << 16,
		func(c uint32) float32 { return Bfloat16ToFloat32(uint16(c)) },
		func(f float32) uint32 { return uint32(Bfloat16FromFloat32(f)) },
		func(f float64) uint32 { return uint32(Bfloat16FromFloat64(f)) }},
	{refE4M3, 1 << 8,
		func(c uint32) float32 { return Float8e4m3ToFloat32(uint8(c)) },
		func(f float32) uint32 { return uint32(Float8e4m3FromFloat32(f)) },
		func(f float64) uint32 { return uint32(Float8e4m3FromFloat64(f)) }},
	{refE5M2, 1 << 8,
		func(c uint32) float32 { return Float8e5m2ToFloat32(uint8(c)) },
		func(f float32) uint32 { return uint32(Float8e5m2FromFloat32(f)) },
		func(f float64) uint32 { return uint32(Float8e5m2FromFloat64(f)) }},
}

// Every code decodes to its defined value and converts back to itself,
// NaNs included (sign and payload kept).
func TestDecodeAndRoundTripAllCodes(t *testing.T) {
	for _, cv := range conversions {
		t.Run(cv.ref.name, func(t *testing.T) {
			for c := uint32(0); c < uint32(cv.codes); c++ {
				f := cv.toF32(c)
				want := cv.ref.decode(c)
				back := c // saturating formats turn infinity into the largest finite value
				if cv.ref.saturate && math.IsInf(want, 0) {
					back = c&cv.ref.signBit | cv.ref.maxCode
				}
				if cv.ref.isNaN(c) {
					require.True(t, f != f, "code %#x must decode to NaN", c)
				} else {
					require.Equal(t, want, float64(f), "code %#x", c)
					require.Equal(t, math.Signbit(want), math.Signbit(float64(f)), "sign of code %#x", c)
					require.Equal(t, back, cv.fromF64(float64(f)), "float64 round trip of %#x", c)
				}
				require.Equal(t, back, cv.fromF32(f), "float32 round trip of %#x", c)
			}
		})
	}
}

// checkRounding compares one conversion with the reference for x.
func checkRounding(t *testing.T, cv conversion, x float32) {
	want, wantNaN := cv.ref.round(float64(x))
	got := cv.fromF32(x)
	got64 := cv.fromF64(float64(x))
	if wantNaN {
		require.True(t, cv.ref.isNaN(got), "%s(%g) = %#x, want NaN", cv.ref.name, x, got)
		require.Equal(t, math.Signbit(float64(x)), got&cv.ref.signBit != 0, "NaN sign")
		return
	}
	require.Equal(t, want, got, "%s(float32 %g = %#x)", cv.ref.name, x, math.Float32bits(x))
	require.Equal(t, want, got64, "%s(float64 %g)", cv.ref.name, x)
}

// Rounding of float32 values: every code's value, every midpoint between
// neighbours (the ties) and the float32 values just around them, the
// overflow thresholds, specials, and random bit patterns and magnitudes.
func TestRoundingAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), -float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-30, 65504, 65519.99, 65520,
		448, 464, 465, 480, 500, 57344, 61440, 61439, 1e6}
	for _, cv := range conversions {
		t.Run(cv.ref.name, func(t *testing.T) {
			for _, x := range specials {
				checkRounding(t, cv, x)
				checkRounding(t, cv, -x)
			}
			v := cv.ref.values
			for c := 0; c < len(v); c++ {
				points := []float64{v[c]}
				if c+1 < len(v) {
					points = append(points, (v[c]+v[c+1])/2)
				} else {
					ulp := v[c] - v[c-1]
					points = append(points, v[c]+ulp/2, v[c]+ulp, v[c]+2*ulp)
				}
				for _, p := range points {
					x := float32(p)
					if float64(x) != p {
						continue // beyond float32's range (bfloat16's overflow points)
					}
					for _, y := range []float32{x, math.Nextafter32(x, 0), math.Nextafter32(x, math.MaxFloat32)} {
						checkRounding(t, cv, y)
						checkRounding(t, cv, -y)
					}
				}
			}
			maxV := v[len(v)-1]
			for range 30000 {
				checkRounding(t, cv, math.Float32frombits(rng.Uint32()))
				checkRounding(t, cv, float32((rng.Float64()*2-1)*2*maxV))
				checkRounding(t, cv, float32(math.Ldexp(rng.Float64(), rng.IntN(2*cv.ref.bias+8)-2*cv.ref.bias)))
			}
		})
	}
}

// The formats' landmarks, stated once by hand.
func TestLandmarks(t *testing.T) {
	require.Equal(t, float32(65504), Float16ToFloat32(0x7bff))
	require.Equal(t, uint16(0x7c00), Float16FromFloat32(65520)) // max + ulp/2 overflows
	require.Equal(t, uint16(0x7bff), Float16FromFloat32(65519.99))
	require.Equal(t, uint16(0x0001), Float16FromFloat32(float32(math.Ldexp(1, -24))))
	require.Equal(t, uint16(0x0000), Float16FromFloat32(float32(math.Ldexp(1, -25)))) // tie to even 0
	require.Equal(t, uint16(0x3f80), Bfloat16FromFloat32(1))
	require.Equal(t, uint16(0x7f80), Bfloat16FromFloat32(math.MaxFloat32))
	require.Equal(t, float32(448), Float8e4m3ToFloat32(0x7e))
	require.Equal(t, uint8(0x7e), Float8e4m3FromFloat32(1e9))
	require.Equal(t, uint8(0xfe), Float8e4m3FromFloat32(float32(math.Inf(-1))))
	require.Equal(t, uint8(0x7f), Float8e4m3FromFloat32(float32(math.NaN())))
	require.Equal(t, float32(math.Ldexp(1, -9)), Float8e4m3ToFloat32(0x01))
	require.Equal(t, float32(57344), Float8e5m2ToFloat32(0x7b))
	require.True(t, math.IsInf(float64(Float8e5m2ToFloat32(0x7c)), 1))
	require.Equal(t, uint8(0x7b), Float8e5m2FromFloat32(float32(math.Inf(1))))
	require.Equal(t, uint8(0x7b), Float8e5m2FromFloat32(61440))
	require.Equal(t, float32(math.Ldexp(1, -16)), Float8e5m2ToFloat32(0x01))
}
