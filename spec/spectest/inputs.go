package spectest

import (
	"math/rand/v2"

	"purlin/numeric"
	"purlin/spec"
)

// Fill writes random elements of type t into buf, exactly representable in
// t and never all zero. For Prod the values lie near 1 (so products neither
// vanish nor overflow); fp8 values stay small so sums do not saturate often.
//
// Beyond the first period elements the values repeat with that period (a
// prime number of elements, so no power-of-two misplacement maps an element
// onto an equal one): large buffers fill fast, even under -race.
func Fill(rng *rand.Rand, t spec.DataType, kind spec.OpKind, buf []byte) {
	n := min(len(buf)/t.Size(), period)
	for i := range n {
		if t.IsFloat() {
			numeric.SetFloat64(t, buf, i, randomFloat(rng, t, kind))
			continue
		}
		numeric.SetInt64(t, buf, i, randomInt(rng, t, kind))
	}
	for k := n * t.Size(); k > 0 && k < len(buf); k *= 2 {
		copy(buf[k:], buf[:k])
	}
}

// period is the number of distinct random elements Fill draws (a prime).
const period = 4093

func randomFloat(rng *rand.Rand, t spec.DataType, kind spec.OpKind) float64 {
	if kind == spec.Prod {
		return 0.75 + rng.Float64()*0.5
	}
	scale := 4.0
	if t == spec.Float8e4m3 || t == spec.Float8e5m2 {
		scale = 2
	}
	v := (rng.Float64()*2 - 1) * scale
	if v == 0 {
		v = 1
	}
	return v
}

func randomInt(rng *rand.Rand, t spec.DataType, kind spec.OpKind) int64 {
	if kind == spec.Prod {
		return 1 + rng.Int64N(3)
	}
	if t.IsSigned() {
		return rng.Int64N(101) - 50
	}
	return 1 + rng.Int64N(100)
}

// Inputs returns the Send contents of every rank's call (its input extent),
// filled with Fill.
func Inputs(rng *rand.Rand, calls []*spec.Call) [][]byte {
	in := make([][]byte, len(calls))
	for r, c := range calls {
		n, _ := c.Extents()
		in[r] = make([]byte, n)
		Fill(rng, c.Type, c.Op.Kind, in[r])
	}
	return in
}

// RankOp is rank r's op in a test that gives every rank one op: PreMulSum's
// scalar becomes op.Scalar times a factor of r's own (1, -1.5, 0.5, 2,
// repeating), so ranks pass different scalars, as NCCL allows, and a
// datapath that applies one rank's scalar to another rank's data, or to a
// partial sum, gives a wrong result. Integer types truncate it toward zero.
func RankOp(op spec.Op, r int) spec.Op {
	op.Scalar *= rankFactors[r%len(rankFactors)]
	return op
}

var rankFactors = [...]float64{1, -1.5, 0.5, 2}

// OpFor is op where NCCL runs it on t across nranks ranks
// (spec.Op.DefinedFor), else the previous kind that is (on a one-rank
// communicator, PreMulSum and Avg on a float8 type become Min, built into
// NCCL as Avg is), keeping op's scalar: for tests that cycle or draw ops,
// types and rank counts independently, so every call they make is valid.
func OpFor(op spec.Op, t spec.DataType, nranks int) spec.Op {
	for !op.DefinedFor(t, nranks) {
		op.Kind = (op.Kind + spec.PreMulSum) % (spec.PreMulSum + 1)
	}
	return op
}

// Uneven is counts and displacements (elements) of a V collective over
// nranks ranks around count: unequal, some 0 when count is small, packed in
// reverse rank order, so that no rank's part lies where an even split puts it.
func Uneven(count uint64, nranks int) (counts, displs []uint64) {
	counts, displs = make([]uint64, nranks), make([]uint64, nranks)
	var at uint64
	for q := nranks - 1; q >= 0; q-- {
		counts[q] = (count + uint64(q)) % (count + 2)
		displs[q], at = at, at+counts[q]
	}
	return counts, displs
}

// Pairs sets every rank's per-pair sizes on calls (one per rank, in rank
// order, all AllToAllV or all AllToAllMatrix) around count: rank p sends
// rank q (p*3 + q*5 + count) % (count + 2) elements, so some pairs move
// nothing. AllToAllV's lists lie packed in reverse peer order with a gap of
// one element after each slice, and so do AllToAllMatrix's slices in each
// output, so no slice lies where AllToAll's would.
func Pairs(calls []*spec.Call, count uint64) {
	n := len(calls)
	m := func(p, q int) uint64 { return (uint64(p*3+q*5) + count) % (count + 2) }
	// reversed is counts(k) for k = n-1 .. 0 packed with gaps: their offsets.
	reversed := func(counts func(k int) uint64) []uint64 {
		at, displs := uint64(0), make([]uint64, n)
		for k := n - 1; k >= 0; k-- {
			displs[k], at = at, at+counts(k)+1
		}
		return displs
	}
	if calls[0].Coll == spec.AllToAllMatrix {
		counts, displs := make([]uint64, n*n), make([]uint64, n*n)
		for q := range n {
			at := reversed(func(p int) uint64 { return m(p, q) })
			for p := range n {
				counts[p*n+q], displs[p*n+q] = m(p, q), at[p]
			}
		}
		for _, c := range calls {
			c.Counts, c.Displs = counts, displs
		}
		return
	}
	for p, c := range calls {
		c.SendCounts, c.RecvCounts = make([]uint64, n), make([]uint64, n)
		for q := range n {
			c.SendCounts[q], c.RecvCounts[q] = m(p, q), m(q, p)
		}
		c.SendDispls = reversed(func(q int) uint64 { return c.SendCounts[q] })
		c.RecvDispls = reversed(func(q int) uint64 { return c.RecvCounts[q] })
	}
}
