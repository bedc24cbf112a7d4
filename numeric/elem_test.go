package numeric

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/spec"
)

// TestGetScalarSurvivesReducesConversion checks that a PreMulSum factor read
// with GetScalar comes back bit for bit through the conversion Reduce
// applies to integer scalars (T(int64(scalar))), and is the value for floats.
func TestGetScalarSurvivesReducesConversion(t *testing.T) {
	cases := []struct {
		typ  spec.DataType
		bits uint64
	}{
		{spec.Int8, 0xfd}, {spec.Uint8, 0xfd}, {spec.Int32, 0xfffffff0}, {spec.Uint32, 0xfffffff0},
		{spec.Int64, 1 << 40}, {spec.Uint64, 1<<63 | 1<<12}, {spec.Uint64, 7},
	}
	for _, c := range cases {
		buf := make([]byte, 8)
		SetUint64(c.typ, buf, 0, c.bits)
		got := GetScalar(c.typ, buf)
		back := make([]byte, 8)
		SetInt64(c.typ, back, 0, int64(got))
		require.Equal(t, buf, back, "%s scalar %#x read as %v", c.typ, c.bits, got)
	}
	for _, typ := range []spec.DataType{spec.Float16, spec.Bfloat16, spec.Float32, spec.Float64, spec.Float8e4m3, spec.Float8e5m2} {
		buf := make([]byte, 8)
		SetFloat64(typ, buf, 0, -1.5)
		require.Equal(t, -1.5, GetScalar(typ, buf), "%s", typ)
	}
	buf := make([]byte, 8)
	SetFloat64(spec.Float32, buf, 0, math.Inf(-1))
	require.True(t, math.IsInf(GetScalar(spec.Float32, buf), -1))
}
