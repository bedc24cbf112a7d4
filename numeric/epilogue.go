package numeric

import (
	"math"

	"purlin/spec"
)

// EpilogueRows is an AllReduce epilogue (spec.Epilogue) over whole rows of
// its output, the arithmetic both the host datapath and the protocol
// simulator run, and the GPU kernel matches:
//
//	z = T(reduced + residual)   residual = z          (ResidualAdd; else z = reduced)
//	y = T(z * rsqrt(mean(z*z) + eps) * weight)         (RMSNorm; else y = z)
//	out = y;  quant = e4m3(y / scale)                  (QuantFP8)
//
// computed in float32 operation by operation, as written (T(...) rounds to
// the type; rsqrt is 1/sqrt, each correctly rounded); each row's sum of
// squares accumulates in float32 in element order. A per-row scale is the
// row's largest |y| / 448 (1 for a row of zeros), stored as float32.
// out holds the reduced rows and receives the result; residual, weight,
// quant and scales are the call's buffers, each touched only where the kind
// uses it (nil may stand for one it does not), scales one float32 for the
// tensor or one per row of out.
type EpilogueRows struct {
	Type   spec.DataType
	Kind   spec.EpilogueKind
	Hidden int
	Eps    float32
}

// Run applies the epilogue to out (whole rows) and the matching rows of
// residual and quant; scales is this tensor's scale or these rows' scales.
// Rows are decoded to float32 and stored back whole (rounding to the type
// is a store and a load).
func (e EpilogueRows) Run(out, residual, weight, quant, scales []byte) {
	size := e.Type.Size()
	rowBytes := e.Hidden * size
	z, r, w := make([]float32, e.Hidden), make([]float32, e.Hidden), make([]float32, e.Hidden)
	if e.Kind&spec.EpilogueRMSNorm != 0 {
		e.decode(weight, w)
	}
	for row := 0; row*rowBytes < len(out); row++ {
		o := out[row*rowBytes : (row+1)*rowBytes]
		e.decode(o, z)
		if e.Kind&spec.EpilogueResidualAdd != 0 {
			res := residual[row*rowBytes : (row+1)*rowBytes]
			e.decode(res, r)
			for i := range z {
				z[i] += r[i]
			}
			e.encode(z, res)
			e.decode(res, z)
		}
		if e.Kind&spec.EpilogueRMSNorm != 0 {
			var ss float32
			for _, v := range z {
				ss += v * v
			}
			inv := 1 / float32(math.Sqrt(float64(ss/float32(e.Hidden)+e.Eps))) // 1.0f / sqrtf(...)
			for i := range z {
				z[i] = z[i] * inv * w[i]
			}
		}
		e.encode(z, o)
		if e.Kind&spec.EpilogueQuantFP8 == 0 {
			continue
		}
		e.decode(o, z)
		scale := math.Float32frombits(le.Uint32(scales))
		if e.Kind&spec.EpilogueRowScale != 0 {
			var amax float32
			for _, v := range z {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			scale = 1
			if amax > 0 {
				scale = amax / spec.FP8Max
			}
			le.PutUint32(scales[4*row:], math.Float32bits(scale))
		}
		q := quant[row*e.Hidden : (row+1)*e.Hidden]
		for i, v := range z {
			q[i] = Float8e4m3FromFloat32(v / scale)
		}
	}
}

// decode reads len(dst) elements of the type from b as float32.
func (e EpilogueRows) decode(b []byte, dst []float32) {
	switch e.Type {
	case spec.Float16:
		for i := range dst {
			dst[i] = Float16ToFloat32(le.Uint16(b[2*i:]))
		}
	case spec.Bfloat16:
		for i := range dst {
			dst[i] = Bfloat16ToFloat32(le.Uint16(b[2*i:]))
		}
	default:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	}
}

// encode stores src into b as the type, each value rounded once.
func (e EpilogueRows) encode(src []float32, b []byte) {
	switch e.Type {
	case spec.Float16:
		for i, v := range src {
			le.PutUint16(b[2*i:], Float16FromFloat32(v))
		}
	case spec.Bfloat16:
		for i, v := range src {
			le.PutUint16(b[2*i:], Bfloat16FromFloat32(v))
		}
	default:
		for i, v := range src {
			le.PutUint32(b[4*i:], math.Float32bits(v))
		}
	}
}
