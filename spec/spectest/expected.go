package spectest

import (
	"math"

	"purlin/numeric"
	"purlin/spec"
)

// Output is one rank's expected Recv contents. Covered marks the bytes the
// collective defines (V layouts may leave gaps a Plan must not touch); Tol is
// the allowed absolute difference per element (0: exact).
type Output struct {
	Data    []byte
	Covered []bool
	Tol     []float64
}

// piece is a run of output bytes: a copy from rank src's input at srcOff, or
// (src < 0) a reduction over every rank's input at srcOff.
type piece struct {
	dst, src, srcOff, length uint64
	reduce                   bool
}

// Expected returns every rank's expected output for calls (one per rank, in
// rank order, all of one collective) given every rank's input.
func Expected(calls []*spec.Call, inputs [][]byte) []Output {
	out := make([]Output, len(calls))
	for q, c := range calls {
		_, n := c.Extents()
		o := Output{Data: make([]byte, n), Covered: make([]bool, n), Tol: make([]float64, n/uint64(c.Type.Size()))}
		for _, p := range pieces(calls, q) {
			if p.length == 0 {
				continue
			}
			if p.reduce {
				reduceRef(calls, inputs, p, &o)
			} else {
				copy(o.Data[p.dst:p.dst+p.length], inputs[p.src][p.srcOff:p.srcOff+p.length])
			}
			for k := p.dst; k < p.dst+p.length; k++ {
				o.Covered[k] = true
			}
		}
		out[q] = o
	}
	return out
}

// pieces lists what rank q's output is made of.
func pieces(calls []*spec.Call, q int) []piece {
	c := calls[q]
	s := uint64(c.Type.Size())
	l := c.Count * s
	n := c.NRanks
	var ps []piece
	each := func(f func(p int) piece) {
		for p := range n {
			ps = append(ps, f(p))
		}
	}
	switch c.Coll {
	case spec.AllReduce:
		ps = append(ps, piece{0, 0, 0, l, true})
	case spec.ReduceScatter:
		ps = append(ps, piece{0, 0, uint64(q) * l, l, true})
	case spec.ReduceScatterV:
		ps = append(ps, piece{0, 0, c.Displs[q] * s, c.Counts[q] * s, true})
	case spec.Reduce:
		if q == c.Root {
			ps = append(ps, piece{0, 0, 0, l, true})
		}
	case spec.AllGather:
		each(func(p int) piece { return piece{uint64(p) * l, uint64(p), 0, l, false} })
	case spec.AllGatherV:
		each(func(p int) piece { return piece{c.Displs[p] * s, uint64(p), 0, c.Counts[p] * s, false} })
	case spec.AllToAll:
		each(func(p int) piece { return piece{uint64(p) * l, uint64(p), uint64(q) * l, l, false} })
	case spec.AllToAllV:
		each(func(p int) piece {
			return piece{c.RecvDispls[p] * s, uint64(p), calls[p].SendDispls[q] * s, c.RecvCounts[p] * s, false}
		})
	case spec.Broadcast:
		ps = append(ps, piece{0, uint64(c.Root), 0, l, false})
	case spec.Gather:
		if q == c.Root {
			each(func(p int) piece { return piece{uint64(p) * l, uint64(p), 0, l, false} })
		}
	case spec.Scatter:
		ps = append(ps, piece{0, uint64(c.Root), uint64(q) * l, l, false})
	case spec.SendRecv:
		if !c.IsSend {
			ps = append(ps, piece{0, uint64(c.Peer), 0, l, false})
		}
	case spec.AllToAllMatrix:
		// p's slices lie packed in its input, in destination order.
		each(func(p int) piece {
			var at uint64
			for k := range q {
				at += c.Counts[p*n+k]
			}
			return piece{c.Displs[p*n+q] * s, uint64(p), at * s, c.Counts[p*n+q] * s, false}
		})
	case spec.AllGatherColumns, spec.ReduceScatterColumns:
		// Row i of a Rows x width matrix (n*w elements unless the call
		// names its Width) holds rank p's w elements at column p*w; each
		// rank's packed side is its Rows x w block.
		if c.Rows == 0 || l == 0 {
			break
		}
		w, width := l/c.Rows, uint64(n)*(l/c.Rows)
		if c.Width != 0 {
			width = c.Width * s
		}
		for i := range c.Rows {
			if c.Coll == spec.ReduceScatterColumns {
				ps = append(ps, piece{i * w, 0, i*width + uint64(q)*w, w, true})
				continue
			}
			each(func(p int) piece { return piece{i*width + uint64(p)*w, uint64(p), i * w, w, false} })
		}
	}
	return ps
}

// reduceRef computes one reduced piece exactly (integers) or in float64.
// Every rank's call carries its own op: PreMulSum multiplies rank r's input
// by rank r's scalar (ranks may pass different scalars).
func reduceRef(calls []*spec.Call, inputs [][]byte, p piece, o *Output) {
	c := calls[0]
	t, n := c.Type, c.NRanks
	ops := make([]spec.Op, n)
	for r := range n {
		ops[r] = calls[r].Op
	}
	size := uint64(t.Size())
	for i := range p.length / size {
		src := int((p.srcOff / size) + i)
		dst := int(p.dst/size + i)
		if t.IsFloat() {
			v, tol := reduceFloat(t, ops, inputs, src)
			numeric.SetFloat64(t, o.Data, dst, v)
			o.Tol[dst] = tol
			continue
		}
		numeric.SetUint64(t, o.Data, dst, reduceInt(t, ops, inputs, src))
	}
}

// premulFloat is x times a PreMulSum scalar as a rank's pre-multiplied input
// holds it: a value of t (as NCCL's), the product taken in the accumulation
// type (fp32 for the narrow floats) and rounded to t.
func premulFloat(t spec.DataType, x, scalar float64) float64 {
	if t == spec.Float64 {
		return x * scalar
	}
	v := float64(float32(x * float64(float32(scalar))))
	var b [8]byte
	numeric.SetFloat64(t, b[:], 0, v)
	return numeric.GetFloat64(t, b[:], 0)
}

func reduceFloat(t spec.DataType, ops []spec.Op, inputs [][]byte, i int) (v, tol float64) {
	n := len(ops)
	op := ops[0]
	accEps := math.Ldexp(1, -24)
	if t == spec.Float64 {
		accEps = math.Ldexp(1, -53)
	}
	var mag float64 // sum of magnitudes the accumulation rounds
	for r := range n {
		x := numeric.GetFloat64(t, inputs[r], i)
		if op.Kind == spec.PreMulSum {
			x = premulFloat(t, x, ops[r].Scalar)
		}
		switch {
		case r == 0:
			v = x
		case op.Kind == spec.Prod:
			v *= x
		case op.Kind == spec.Max:
			if x > v {
				v = x
			}
		case op.Kind == spec.Min:
			if x < v {
				v = x
			}
		default:
			v += x
		}
		mag += math.Abs(x)
	}
	switch op.Kind {
	case spec.Max, spec.Min:
		return v, 0
	case spec.Prod:
		mag = math.Abs(v)
	case spec.Avg:
		d := float64(op.AvgDivisor(n))
		v /= d
		mag /= d
	}
	return v, ulp(t, v) + 2*float64(n+1)*accEps*mag
}

// formats holds each float type's mantissa bits and least normal exponent.
var formats = map[spec.DataType]struct{ man, emin int }{
	spec.Float16: {10, -14}, spec.Bfloat16: {7, -126}, spec.Float8e4m3: {3, -6},
	spec.Float8e5m2: {2, -14}, spec.Float32: {23, -126}, spec.Float64: {52, -1022},
}

// ulp is the distance between adjacent values of t near x.
func ulp(t spec.DataType, x float64) float64 {
	f := formats[t]
	e := f.emin
	if x != 0 && !math.IsInf(x, 0) {
		_, exp := math.Frexp(math.Abs(x))
		e = max(exp-1, f.emin)
	}
	return math.Ldexp(1, e-f.man)
}

// reduceInt reduces in the type's width, wrapping, as the Atoms do.
func reduceInt(t spec.DataType, ops []spec.Op, inputs [][]byte, i int) uint64 {
	n := len(ops)
	op := ops[0]
	bits := uint(8 * t.Size())
	wrap := func(v uint64) int64 { // to the type's width, sign- or zero-extended
		v <<= 64 - bits
		if t.IsSigned() {
			return int64(v) >> (64 - bits)
		}
		return int64(v >> (64 - bits))
	}
	less := func(a, b int64) bool {
		if t.IsSigned() {
			return a < b
		}
		return uint64(a) < uint64(b)
	}
	var acc int64
	for r := range n {
		x := numeric.GetInt64(t, inputs[r], i)
		if op.Kind == spec.PreMulSum {
			x = wrap(uint64(x * wrap(uint64(int64(ops[r].Scalar)))))
		}
		switch {
		case r == 0:
			acc = x
		case op.Kind == spec.Prod:
			acc = wrap(uint64(acc * x))
		case op.Kind == spec.Max:
			if less(acc, x) {
				acc = x
			}
		case op.Kind == spec.Min:
			if less(x, acc) {
				acc = x
			}
		default:
			acc = wrap(uint64(acc + x))
		}
	}
	if op.Kind == spec.Avg {
		d := op.AvgDivisor(n)
		if t.IsSigned() {
			acc /= int64(d)
		} else {
			acc = int64(uint64(acc) / uint64(d))
		}
	}
	return uint64(acc)
}
