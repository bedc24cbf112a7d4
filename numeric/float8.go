package numeric

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

// Float8e4m3ToFloat32 returns the value of an e4m3fn code.
func Float8e4m3ToFloat32(c uint8) float32 { return e4m3ToFloat32[c] }

// Float8e4m3FromFloat32 rounds f to e4m3fn, ties to even, saturating at ±448
// (infinities included); NaN gives NaN.
func Float8e4m3FromFloat32(f float32) uint8 {
	if f != f {
		return uint8(nanFromFloat32(fmtE4M3, f))
	}
	return uint8(fmtE4M3.encode(float64(f)))
}

// Float8e4m3FromFloat64 rounds f to e4m3fn with one rounding, saturating.
func Float8e4m3FromFloat64(f float64) uint8 { return uint8(fmtE4M3.encode(f)) }

// Float8e5m2ToFloat32 returns the value of an e5m2 code (infinities included).
func Float8e5m2ToFloat32(c uint8) float32 { return e5m2ToFloat32[c] }

// Float8e5m2FromFloat32 rounds f to e5m2, ties to even, saturating at ±57344
// (infinities included); NaN gives NaN.
func Float8e5m2FromFloat32(f float32) uint8 {
	if f != f {
		return uint8(nanFromFloat32(fmtE5M2, f))
	}
	return uint8(fmtE5M2.encode(float64(f)))
}

// Float8e5m2FromFloat64 rounds f to e5m2 with one rounding, saturating.
func Float8e5m2FromFloat64(f float64) uint8 { return uint8(fmtE5M2.encode(f)) }
