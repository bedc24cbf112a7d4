package spectest

import (
	"bytes"
	"fmt"
	"math"

	"purlin/numeric"
	"purlin/spec"
)

// Compare checks got (a rank's Recv contents) against want for the covered
// elements: bit-exact where Tol is 0, within Tol otherwise. It returns an
// error naming the first element that differs.
func Compare(t spec.DataType, got []byte, want Output) error {
	if len(got) != len(want.Data) {
		return fmt.Errorf("spectest: got %d bytes, want %d", len(got), len(want.Data))
	}
	if bytes.Equal(got, want.Data) {
		return nil
	}
	size := t.Size()
	for i := range len(want.Data) / size {
		if !want.Covered[i*size] {
			continue
		}
		g, w := got[i*size:(i+1)*size], want.Data[i*size:(i+1)*size]
		if string(g) == string(w) {
			continue
		}
		if want.Tol[i] > 0 {
			gv, wv := numeric.GetFloat64(t, got, i), numeric.GetFloat64(t, want.Data, i)
			if math.Abs(gv-wv) <= want.Tol[i] || (math.IsInf(gv, 0) && gv == wv) {
				continue
			}
			return fmt.Errorf("spectest: %s element %d: got %g, want %g (tolerance %g)", t, i, gv, wv, want.Tol[i])
		}
		return fmt.Errorf("spectest: %s element %d: got %x, want %x", t, i, g, w)
	}
	return nil
}

// CompareLevels is Compare for a result reduced in levels (a multi-node
// Program: within nodes, then across): for floating reductions it also
// allows each level's rounding of partial results, at most an ulp of the
// sum of the inputs' magnitudes (scaled as PreMulSum scales them; for Prod,
// of partial products) per level. calls and inputs are every rank's, r the
// rank whose output got is.
func CompareLevels(calls []*spec.Call, inputs [][]byte, r int, got []byte, want Output) error {
	const levels = 3 // node, network, and the final copy's rounding of a mean
	c := calls[r]
	t := c.Type
	if !t.IsFloat() || !c.Coll.Reduces() {
		return Compare(t, got, want)
	}
	w := want
	w.Tol = append([]float64(nil), want.Tol...)
	size := uint64(t.Size())
	var shift uint64 // where output element 0 lies in every input
	if c.Coll.Definition().In.Shape == spec.Scattered {
		off, _ := c.InPart(r, r)
		shift = off / size
	}
	for i := range w.Tol {
		if !w.Covered[uint64(i)*size] {
			continue
		}
		src := uint64(i) + shift
		var mag float64
		for q, cq := range calls {
			if (src+1)*size <= uint64(len(inputs[q])) {
				mag += math.Abs(numeric.GetFloat64(t, inputs[q], int(src))) * max(1, math.Abs(cq.Op.Scalar))
			}
		}
		if c.Op.Kind == spec.Prod {
			mag = max(mag, 1) * math.Ldexp(1, len(calls))
		}
		w.Tol[i] += levels * ulp(t, mag)
	}
	return Compare(t, got, w)
}
