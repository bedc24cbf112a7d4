package numeric

import "math"

// fp8 decode tables: Reduce decodes an fp8 byte with one load.
var (
	e4m3ToFloat32 = fp8Table(fmtE4M3)
	e5m2ToFloat32 = fp8Table(fmtE5M2)
)

func fp8Table(f smallFloat) *[256]float32 {
	var t [256]float32
	for c := range t {
		t[c] = narrow(f.decode(uint32(c)))
	}
	return &t
}

// fp8 encode tables, indexed by the top 16 bits of a float32 with the OR of
// the low 16 bits folded into bit 0: that bit lies below every rounding
// position of a 3- or 2-bit mantissa, so it acts as the sticky bit and the
// table gives exactly the rounding of the full float32.
var (
	float32ToE4M3 = fp8EncodeTable(fmtE4M3)
	float32ToE5M2 = fp8EncodeTable(fmtE5M2)
)

func fp8EncodeTable(f smallFloat) *[1 << 16]uint8 {
	var t [1 << 16]uint8
	for hi := range t {
		x := math.Float32frombits(uint32(hi) << 16)
		if x != x {
			t[hi] = uint8(nanFromFloat32(f, x))
		} else {
			t[hi] = uint8(f.encode(float64(x)))
		}
	}
	return &t
}

func fp8Index(f float32) uint32 {
	b := math.Float32bits(f)
	sticky := uint32(0)
	if b&0xffff != 0 {
		sticky = 1
	}
	return b>>16 | sticky
}

// Float8e4m3ToFloat32 returns the value of an e4m3fn code.
func Float8e4m3ToFloat32(c uint8) float32 { return e4m3ToFloat32[c] }

// Float8e4m3FromFloat32 rounds f to e4m3fn, ties to even, saturating at ±448
// (infinities included); NaN gives NaN.
func Float8e4m3FromFloat32(f float32) uint8 { return float32ToE4M3[fp8Index(f)] }

// Float8e4m3FromFloat64 rounds f to e4m3fn with one rounding, saturating.
func Float8e4m3FromFloat64(f float64) uint8 { return uint8(fmtE4M3.encode(f)) }

// Float8e5m2ToFloat32 returns the value of an e5m2 code (infinities included).
func Float8e5m2ToFloat32(c uint8) float32 { return e5m2ToFloat32[c] }

// Float8e5m2FromFloat32 rounds f to e5m2, ties to even, saturating at ±57344
// (infinities included); NaN gives NaN.
func Float8e5m2FromFloat32(f float32) uint8 { return float32ToE5M2[fp8Index(f)] }

// Float8e5m2FromFloat64 rounds f to e5m2 with one rounding, saturating.
func Float8e5m2FromFloat64(f float64) uint8 { return uint8(fmtE5M2.encode(f)) }
