package numeric

import "math"

// float16ToFloat32 holds the exact float32 value of every binary16 code:
// Reduce decodes a half with one load.
var float16ToFloat32 = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for c := range t {
		t[c] = narrow(fmtFloat16.decode(uint32(c)))
	}
	return &t
}()

// narrow converts a value that float32 holds exactly, keeping NaN payloads
// bit for bit (a float64->float32 conversion is free to quiet them).
func narrow(v float64) float32 {
	if v != v {
		b := math.Float64bits(v)
		return math.Float32frombits(uint32(b>>63)<<31 | 0x7f800000 | uint32(b>>29)&0x7fffff)
	}
	return float32(v)
}

// Float16ToFloat32 returns the value of an IEEE binary16 code.
func Float16ToFloat32(h uint16) float32 { return float16ToFloat32[h] }

// Float16FromFloat32 rounds f to binary16, ties to even; overflow gives infinity.
func Float16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return uint16(nanFromFloat32(fmtFloat16, f))
	case a >= 0x47800000: // >= 2^16: beyond any rounding to 65504
		return sign | 0x7c00
	case a >= 0x38800000: // >= 2^-14: normal; a carry may reach infinity, as it should
		return sign | uint16(roundShift(uint64(a), 13)-(127-15)<<10)
	case a <= 0x33000000: // <= 2^-25: rounds to zero (2^-25 is a tie, to even 0)
		return sign
	}
	// Subnormal: units of 2^-24 from the 24-bit significand.
	return sign | uint16(roundShift(uint64(a&0x7fffff|0x800000), int(126-a>>23)))
}

// Float16FromFloat64 rounds f to binary16 with one rounding.
func Float16FromFloat64(f float64) uint16 { return uint16(fmtFloat16.encode(f)) }

// Bfloat16ToFloat32 returns the value of a bfloat16 code.
func Bfloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Bfloat16FromFloat32 rounds f to bfloat16, ties to even; overflow gives infinity.
func Bfloat16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(nanFromFloat32(fmtBfloat16, f))
	}
	// Ties to even on the dropped 16 bits; a carry moves into the exponent,
	// and the largest finite values round up to infinity as they should.
	return uint16((b + 0x7fff + b>>16&1) >> 16)
}

// Bfloat16FromFloat64 rounds f to bfloat16 with one rounding.
func Bfloat16FromFloat64(f float64) uint16 { return uint16(fmtBfloat16.encode(f)) }

// nanFromFloat32 is f's NaN code for format t, with f's sign and the top of
// its payload read from the float32 bits (a float64 conversion could quiet it).
func nanFromFloat32(t smallFloat, f float32) uint32 {
	b := math.Float32bits(f)
	sign := b >> 31 << (t.expBits + t.manBits)
	return sign | t.nanCode(b&0x7fffff>>(23-t.manBits))
}
