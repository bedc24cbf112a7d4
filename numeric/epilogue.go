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
// quant and scales are the buffers the kind uses (nil otherwise), scales
// one float32 for the tensor or one per row of out.
type EpilogueRows struct {
	Type   spec.DataType
	Kind   spec.EpilogueKind
	Hidden int
	Eps    float32
}

// Run applies the epilogue to out (whole rows) and the matching rows of
// residual and quant; scales is this tensor's scale or these rows' scales.
func (e EpilogueRows) Run(out, residual, weight, quant, scales []byte) {
	size := e.Type.Size()
	rowBytes := e.Hidden * size
	z := make([]float32, e.Hidden)
	for row := 0; row*rowBytes < len(out); row++ {
		o := out[row*rowBytes : (row+1)*rowBytes]
		var ss float32
		for i := range z {
			v := e.get(o, i)
			if e.Kind&spec.EpilogueResidualAdd != 0 {
				res := residual[row*rowBytes : (row+1)*rowBytes]
				v = e.round(v + e.get(res, i))
				e.set(res, i, v)
			}
			z[i] = v
			ss += v * v
		}
		if e.Kind&spec.EpilogueRMSNorm != 0 {
			inv := 1 / float32(math.Sqrt(float64(ss/float32(e.Hidden)+e.Eps))) // 1.0f / sqrtf(...)
			for i := range z {
				z[i] = e.round(z[i] * inv * e.get(weight, i))
			}
		}
		for i := range z {
			e.set(o, i, z[i])
		}
		if e.Kind&spec.EpilogueQuantFP8 == 0 {
			continue
		}
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

func (e EpilogueRows) get(b []byte, i int) float32 {
	switch e.Type {
	case spec.Float16:
		return Float16ToFloat32(le.Uint16(b[2*i:]))
	case spec.Bfloat16:
		return Bfloat16ToFloat32(le.Uint16(b[2*i:]))
	}
	return math.Float32frombits(le.Uint32(b[4*i:]))
}

func (e EpilogueRows) set(b []byte, i int, v float32) {
	switch e.Type {
	case spec.Float16:
		le.PutUint16(b[2*i:], Float16FromFloat32(v))
	case spec.Bfloat16:
		le.PutUint16(b[2*i:], Bfloat16FromFloat32(v))
	default:
		le.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// round is v as the type holds it.
func (e EpilogueRows) round(v float32) float32 {
	switch e.Type {
	case spec.Float16:
		return Float16ToFloat32(Float16FromFloat32(v))
	case spec.Bfloat16:
		return Bfloat16ToFloat32(Bfloat16FromFloat32(v))
	}
	return v
}
