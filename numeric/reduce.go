package numeric

import (
	"unsafe"

	"purlin/spec"
)

// block is how many elements Reduce accumulates at a time: the accumulator
// lives on the stack, and every source of an element is read before its
// destination is written, so dst may be one of the sources.
const block = 512

// Reduce combines srcs element by element into dst, over len(dst)/t.Size()
// elements, in the order of srcs. Every source must hold at least that many
// elements; dst may alias a source exactly, not partially. Avg divides the
// sum by op.AvgDivisor(nranks) (integers: truncating division). Max and Min keep acc unless
// x > acc (x < acc), so a NaN in source 0 stays and a NaN elsewhere is
// skipped. With no sources, dst is left alone. An invalid t or op panics:
// spec validates calls first.
//
// PreMulSum sums its sources, first multiplying by op.Scalar each source j
// whose bit (1<<j) is set in scaled: a rank's own input, which only its own
// scalar multiplies. The product is taken in the accumulation type and
// rounded to t, the value a pre-multiplied input has when a peer receives it
// (integers: the scalar truncated toward zero, products wrap). Sources
// whose bit is clear (peers' pre-multiplied inputs, partial sums) are added
// as they are. Other ops ignore scaled.
func Reduce(dst []byte, srcs [][]byte, t spec.DataType, op spec.Op, nranks int, scaled uint) {
	if len(srcs) == 0 {
		return
	}
	nranks = op.AvgDivisor(nranks)
	if op.Kind == spec.Avg && nranks < 1 {
		panic("numeric: Avg over fewer than one rank")
	}
	if op.Kind != spec.PreMulSum {
		scaled = 0
	}
	switch t {
	case spec.Int8:
		reduceNative(view[int8](dst), views[int8](srcs), op.Kind, int8(int64(op.Scalar)), int8(nranks), scaled)
	case spec.Uint8:
		reduceNative(view[uint8](dst), views[uint8](srcs), op.Kind, uint8(int64(op.Scalar)), uint8(nranks), scaled)
	case spec.Int32:
		reduceNative(view[int32](dst), views[int32](srcs), op.Kind, int32(int64(op.Scalar)), int32(nranks), scaled)
	case spec.Uint32:
		reduceNative(view[uint32](dst), views[uint32](srcs), op.Kind, uint32(int64(op.Scalar)), uint32(nranks), scaled)
	case spec.Int64:
		reduceNative(view[int64](dst), views[int64](srcs), op.Kind, int64(op.Scalar), int64(nranks), scaled)
	case spec.Uint64:
		reduceNative(view[uint64](dst), views[uint64](srcs), op.Kind, uint64(int64(op.Scalar)), uint64(nranks), scaled)
	case spec.Float32:
		reduceNative(view[float32](dst), views[float32](srcs), op.Kind, float32(op.Scalar), float32(nranks), scaled)
	case spec.Float64:
		reduceNative(view[float64](dst), views[float64](srcs), op.Kind, op.Scalar, float64(nranks), scaled)
	case spec.Float16:
		reduceWidened(view[uint16](dst), views[uint16](srcs), op, nranks, scaled, float16ToFloat32[:], narrowFloat16)
	case spec.Bfloat16:
		reduceWidened(view[uint16](dst), views[uint16](srcs), op, nranks, scaled, bfloat16ToFloat32[:], narrowBfloat16)
	case spec.Float8e4m3:
		reduceWidened(view[uint8](dst), views[uint8](srcs), op, nranks, scaled, e4m3ToFloat32[:], narrowE4M3)
	case spec.Float8e5m2:
		reduceWidened(view[uint8](dst), views[uint8](srcs), op, nranks, scaled, e5m2ToFloat32[:], narrowE5M2)
	default:
		panic("numeric: Reduce of invalid type " + t.String())
	}
}

type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// view reinterprets b as a slice of T (whole elements only).
func view[T any](b []byte) []T {
	n := len(b) / int(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// views reinterprets up to MaxSrcs sources without allocating.
func views[T any](bs [][]byte) srcViews[T] {
	var v srcViews[T]
	if len(bs) > len(v.s) {
		panic("numeric: too many sources")
	}
	for k, b := range bs {
		v.s[k] = view[T](b)
	}
	v.n = len(bs)
	return v
}

// MaxSrcs is the most sources one Reduce takes.
const MaxSrcs = 16

type srcViews[T any] struct {
	s [MaxSrcs][]T
	n int
}

// reduceNative accumulates in T itself.
func reduceNative[T number](dst []T, v srcViews[T], kind spec.OpKind, scalar, nranks T, scaled uint) {
	srcs := v.s[:v.n]
	var acc [block]T
	for base := 0; base < len(dst); base += block {
		a := acc[:min(block, len(dst)-base)]
		end := base + len(a)
		for k, s := range srcs {
			if k == 0 {
				start(a, s[base:end], scaled&1 != 0, scalar)
			} else {
				combine(a, s[base:end], kind, scaled&(1<<k) != 0, scalar)
			}
		}
		finish(a, kind, nranks)
		copy(dst[base:end], a)
	}
}

// reduceWidened accumulates a narrow float type in float32 and rounds once.
// Decoding is a table load and encoding a direct call, so the inner loops
// make no indirect calls (and the stack accumulators do not escape). A
// scaled source is multiplied and rounded to S before it is accumulated.
func reduceWidened[S uint8 | uint16](dst []S, v srcViews[S], op spec.Op, nranks int, scaled uint, table []float32, to narrowType) {
	srcs := v.s[:v.n]
	scalar, n := float32(op.Scalar), float32(nranks)
	var acc, x [block]float32
	var premul [block]S
	for base := 0; base < len(dst); base += block {
		a := acc[:min(block, len(dst)-base)]
		xs := x[:len(a)]
		for k, s := range srcs {
			s = s[base : base+len(a)]
			if scaled&(1<<k) != 0 {
				for i := range xs {
					xs[i] = table[s[i]] * scalar
				}
				s = premul[:len(a)]
				encodeBlock(s, xs, to)
			}
			for i := range xs {
				xs[i] = table[s[i]]
			}
			if k == 0 {
				start(a, xs, false, scalar)
			} else {
				combine(a, xs, op.Kind, false, scalar)
			}
		}
		finish(a, op.Kind, n)
		encodeBlock(dst[base:base+len(a)], a, to)
	}
}

// start loads source 0 into the accumulator, multiplied by scalar if scaled.
func start[T number](a, x []T, scaled bool, scalar T) {
	if scaled {
		for i := range a {
			a[i] = x[i] * scalar
		}
		return
	}
	copy(a, x)
}

// combine folds one more source into the accumulator; PreMulSum multiplies
// it by scalar first if scaled.
func combine[T number](a, x []T, kind spec.OpKind, scaled bool, scalar T) {
	x = x[:len(a)]
	switch {
	case kind == spec.PreMulSum && scaled:
		for i := range a {
			a[i] += T(x[i] * scalar) // the conversion rounds the product: no fused multiply-add
		}
		return
	case kind == spec.PreMulSum:
		kind = spec.Sum
	}
	switch kind {
	case spec.Sum, spec.Avg:
		for i := range a {
			a[i] += x[i]
		}
	case spec.Prod:
		for i := range a {
			a[i] *= x[i]
		}
	case spec.Max:
		for i := range a {
			if x[i] > a[i] {
				a[i] = x[i]
			}
		}
	case spec.Min:
		for i := range a {
			if x[i] < a[i] {
				a[i] = x[i]
			}
		}
	default:
		panic("numeric: Reduce with invalid op")
	}
}

// finish applies what comes after the last source: Avg's division.
func finish[T number](a []T, kind spec.OpKind, nranks T) {
	if kind == spec.Avg {
		for i := range a {
			a[i] /= nranks
		}
	}
}

// bfloat16ToFloat32 lets bfloat16 share the table path of float16.
var bfloat16ToFloat32 = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for c := range t {
		t[c] = Bfloat16ToFloat32(uint16(c))
	}
	return &t
}()

// narrowType names the narrow float Reduce encodes to.
type narrowType uint8

const (
	narrowFloat16 narrowType = iota
	narrowBfloat16
	narrowE4M3
	narrowE5M2
)

// encodeBlock rounds a block of float32 accumulators into d.
func encodeBlock[S uint8 | uint16](d []S, a []float32, to narrowType) {
	a = a[:len(d)]
	switch to {
	case narrowFloat16:
		for i := range d {
			d[i] = S(Float16FromFloat32(a[i]))
		}
	case narrowBfloat16:
		for i := range d {
			d[i] = S(Bfloat16FromFloat32(a[i]))
		}
	case narrowE4M3:
		for i := range d {
			d[i] = S(Float8e4m3FromFloat32(a[i]))
		}
	case narrowE5M2:
		for i := range d {
			d[i] = S(Float8e5m2FromFloat32(a[i]))
		}
	}
}
