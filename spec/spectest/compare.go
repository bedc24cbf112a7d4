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
