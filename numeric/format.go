package numeric

import "math"

// smallFloat describes a binary floating-point format narrower than float64,
// so that one encoder and one decoder, written from the definitions, serve
// float16, bfloat16 and both fp8 formats.
type smallFloat struct {
	expBits, manBits uint
	bias             int
	// maxFinite is the magnitude code of the largest finite value.
	maxFinite uint32
	// hasInf: the all-ones exponent with a zero mantissa is infinity and
	// other all-ones-exponent codes are NaN (IEEE). Without it (e4m3fn), the
	// all-ones exponent holds normal numbers and only the all-ones code is NaN.
	hasInf bool
	// saturate: conversions clamp to maxFinite instead of overflowing to
	// infinity (the fp8 formats, like __NV_SATFINITE).
	saturate bool
}

var (
	fmtFloat16  = smallFloat{expBits: 5, manBits: 10, bias: 15, maxFinite: 0x7bff, hasInf: true}
	fmtBfloat16 = smallFloat{expBits: 8, manBits: 7, bias: 127, maxFinite: 0x7f7f, hasInf: true}
	fmtE4M3     = smallFloat{expBits: 4, manBits: 3, bias: 7, maxFinite: 0x7e, saturate: true}
	fmtE5M2     = smallFloat{expBits: 5, manBits: 2, bias: 15, maxFinite: 0x7b, hasInf: true, saturate: true}
)

func (f smallFloat) signBit() uint32 { return 1 << (f.expBits + f.manBits) }
func (f smallFloat) expMask() uint32 { return (1<<f.expBits - 1) << f.manBits }
func (f smallFloat) manMask() uint32 { return 1<<f.manBits - 1 }

// isNaN reports whether code is a NaN of f.
func (f smallFloat) isNaN(code uint32) bool {
	mag := code &^ f.signBit()
	if !f.hasInf {
		return mag == f.expMask()|f.manMask()
	}
	return mag&f.expMask() == f.expMask() && mag&f.manMask() != 0
}

// decode returns the exact value of code.
func (f smallFloat) decode(code uint32) float64 {
	neg := code&f.signBit() != 0
	mag := code &^ f.signBit()
	exp := int(mag >> f.manBits)
	man := mag & f.manMask()
	var v float64
	switch {
	case f.isNaN(code):
		// Keep the payload where float64 keeps it, quiet bit as it was.
		bits := uint64(0x7ff)<<52 | uint64(man)<<(52-f.manBits)
		v = math.Float64frombits(bits)
	case f.hasInf && mag == f.expMask():
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(float64(man), 1-f.bias-int(f.manBits))
	default:
		v = math.Ldexp(float64(man|1<<f.manBits), exp-f.bias-int(f.manBits))
	}
	if neg {
		v = math.Copysign(v, -1)
	}
	return v
}

// encode rounds x to the nearest code of f, ties to even, with one rounding.
func (f smallFloat) encode(x float64) uint32 {
	b := math.Float64bits(x)
	sign := uint32(b>>63) << (f.expBits + f.manBits)
	a := b &^ (1 << 63)
	const inf64 = 0x7ff0000000000000
	switch {
	case a > inf64:
		return sign | f.nanCode(uint32(a>>(52-f.manBits))&f.manMask())
	case a == inf64:
		if f.saturate || !f.hasInf {
			return sign | f.maxFinite
		}
		return sign | f.expMask()
	}
	e := int(a>>52) - 1023
	minExp := 1 - f.bias
	var q uint64
	if e < minExp {
		// Subnormal (or zero) in f: count units of 2^(minExp-manBits).
		sig := a&(1<<52-1) | 1<<52
		if a>>52 == 0 {
			sig, e = a, -1022 // float64 subnormal: far below any f's range
		}
		q = roundShift(sig, (minExp-int(f.manBits))-(e-52))
	} else {
		// Normal: drop mantissa bits (a carry may bump the exponent), then rebias.
		q = roundShift(a, int(52-f.manBits)) - uint64(1023-f.bias)<<f.manBits
	}
	if q > uint64(f.maxFinite) {
		if f.saturate || !f.hasInf {
			return sign | f.maxFinite
		}
		return sign | f.expMask()
	}
	return sign | uint32(q)
}

// nanCode is f's NaN magnitude carrying what fits of a payload.
func (f smallFloat) nanCode(payload uint32) uint32 {
	if !f.hasInf {
		return f.expMask() | f.manMask()
	}
	if payload == 0 {
		payload = 1 << (f.manBits - 1) // quiet bit
	}
	return f.expMask() | payload
}

// roundShift returns v >> shift rounded to nearest, ties to even.
func roundShift(v uint64, shift int) uint64 {
	if shift <= 0 {
		return v
	}
	if shift > 63 {
		return 0 // v < 2^53 <= half of 2^shift
	}
	q := v >> shift
	rem := v & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}
