package numeric

import (
	"encoding/binary"
	"math"

	"purlin/spec"
)

// Element accessors: element i of a buffer of type t, in the machine's byte
// order (little-endian on every platform Purlin runs on). They serve tests
// and setup code, not the datapath: Reduce works on whole slices.

// GetFloat64 returns element i as a float64 (exact for every type but
// 64-bit integers beyond 2^53).
func GetFloat64(t spec.DataType, buf []byte, i int) float64 {
	switch t {
	case spec.Float16:
		return float64(Float16ToFloat32(le.Uint16(buf[2*i:])))
	case spec.Bfloat16:
		return float64(Bfloat16ToFloat32(le.Uint16(buf[2*i:])))
	case spec.Float8e4m3:
		return float64(Float8e4m3ToFloat32(buf[i]))
	case spec.Float8e5m2:
		return float64(Float8e5m2ToFloat32(buf[i]))
	case spec.Float32:
		return float64(math.Float32frombits(le.Uint32(buf[4*i:])))
	case spec.Float64:
		return math.Float64frombits(le.Uint64(buf[8*i:]))
	case spec.Uint8, spec.Uint32, spec.Uint64:
		return float64(GetUint64(t, buf, i))
	}
	return float64(GetInt64(t, buf, i))
}

// GetScalar returns element 0 of buf as a PreMulSum factor (spec.Op.Scalar):
// the value of a float type; for an integer type its bits as int64 (unsigned
// types zero-extended to their width), which Reduce's conversion back,
// T(int64(scalar)), returns bit for bit even for a uint64 beyond 2^63.
func GetScalar(t spec.DataType, buf []byte) float64 {
	if t.IsFloat() {
		return GetFloat64(t, buf, 0)
	}
	return float64(GetInt64(t, buf, 0))
}

// SetFloat64 stores v into element i, rounding once to nearest even for the
// float types (saturating for fp8) and truncating toward zero for integers.
func SetFloat64(t spec.DataType, buf []byte, i int, v float64) {
	switch t {
	case spec.Float16:
		le.PutUint16(buf[2*i:], Float16FromFloat64(v))
	case spec.Bfloat16:
		le.PutUint16(buf[2*i:], Bfloat16FromFloat64(v))
	case spec.Float8e4m3:
		buf[i] = Float8e4m3FromFloat64(v)
	case spec.Float8e5m2:
		buf[i] = Float8e5m2FromFloat64(v)
	case spec.Float32:
		le.PutUint32(buf[4*i:], math.Float32bits(float32(v)))
	case spec.Float64:
		le.PutUint64(buf[8*i:], math.Float64bits(v))
	case spec.Uint8, spec.Uint32, spec.Uint64:
		SetUint64(t, buf, i, uint64(v))
	default:
		SetInt64(t, buf, i, int64(v))
	}
}

// GetInt64 returns element i of a signed integer type, sign-extended (for
// other types, the bits read as that width's unsigned integer).
func GetInt64(t spec.DataType, buf []byte, i int) int64 {
	switch t {
	case spec.Int8:
		return int64(int8(buf[i]))
	case spec.Int32:
		return int64(int32(le.Uint32(buf[4*i:])))
	case spec.Int64:
		return int64(le.Uint64(buf[8*i:]))
	}
	return int64(GetUint64(t, buf, i))
}

// SetInt64 stores v into element i of an integer type, wrapping to its width.
func SetInt64(t spec.DataType, buf []byte, i int, v int64) { SetUint64(t, buf, i, uint64(v)) }

// GetUint64 returns the bits of element i zero-extended to 64 bits.
func GetUint64(t spec.DataType, buf []byte, i int) uint64 {
	switch t.Size() {
	case 1:
		return uint64(buf[i])
	case 2:
		return uint64(le.Uint16(buf[2*i:]))
	case 4:
		return uint64(le.Uint32(buf[4*i:]))
	}
	return le.Uint64(buf[8*i:])
}

// SetUint64 stores the low bits of v (the type's width) into element i.
func SetUint64(t spec.DataType, buf []byte, i int, v uint64) {
	switch t.Size() {
	case 1:
		buf[i] = uint8(v)
	case 2:
		le.PutUint16(buf[2*i:], uint16(v))
	case 4:
		le.PutUint32(buf[4*i:], uint32(v))
	default:
		le.PutUint64(buf[8*i:], v)
	}
}

var le = binary.LittleEndian
