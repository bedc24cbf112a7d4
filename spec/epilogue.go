package spec

import (
	"fmt"
	"math"
	"strings"
)

// EpilogueKind says what an AllReduce does to its result, row by row, before
// it returns: the steps a transformer layer runs after its tensor-parallel
// all-reduce, fused into the collective's last pass. Its bits combine; the
// values equal purlinEpilogueKind_t's in purlin.h.
type EpilogueKind uint8

const (
	// EpilogueResidualAdd: out = reduced + residual, and residual = out (the
	// residual is updated in place, as the frameworks do).
	EpilogueResidualAdd EpilogueKind = 1 << iota
	// EpilogueRMSNorm: out = x / sqrt(mean(x*x over the row) + Eps) * weight,
	// where x is the reduced row (after the residual add when both are set).
	EpilogueRMSNorm
	// EpilogueQuantFP8: also write out as float8 e4m3 into Quant, each
	// element divided by a scale and saturated to +-448: the float32 at
	// Scales (one per tensor, read), or with EpilogueRowScale one per row.
	EpilogueQuantFP8
	// EpilogueRowScale (with EpilogueQuantFP8): each row's scale is its
	// largest magnitude / 448 (1 for a row of zeros), written to Scales[row].
	EpilogueRowScale
	numEpilogueBits = 4
)

// FP8Max is the largest finite float8 e4m3 value, the bound of a quantized
// output.
const FP8Max = 448

// Epilogue is an AllReduce's epilogue (Call.Epilogue), or an AllGatherV's
// that gathers the rows of a reduced tensor (as the last phase of an
// AllReduce across nodes). The zero value is none. Its arithmetic is the
// unfused sequence's: the reduced value, the residual sum and the output
// are each rounded to the call's type where the unfused kernels store
// them, and each row's mean square is accumulated in float32.
type Epilogue struct {
	Kind EpilogueKind
	// Hidden is the row length in elements; the output (Count elements of
	// an AllReduce) is rows of Hidden.
	Hidden uint64
	// Residual: as many elements of the call's type as the output, read
	// and written (EpilogueResidualAdd). Weight: Hidden elements of the
	// call's type (EpilogueRMSNorm). Quant: a float8 e4m3 byte per output
	// element, written; Scales: float32, one read or one per row written
	// (EpilogueQuantFP8).
	Residual, Weight, Quant, Scales uintptr
	// Eps is RMSNorm's epsilon (finite, >= 0).
	Eps float32
}

// Rows is the number of rows of a call of count elements.
func (e *Epilogue) Rows(count uint64) uint64 {
	if e.Hidden == 0 {
		return 0
	}
	return count / e.Hidden
}

// From is the epilogue of an output of t from element first on (where a
// row starts): its buffers advanced to that row.
func (e Epilogue) From(first uint64, t DataType) Epilogue {
	advance := func(p *uintptr, bytes uint64) {
		if *p != 0 {
			*p += uintptr(bytes)
		}
	}
	advance(&e.Residual, first*uint64(t.Size()))
	advance(&e.Quant, first)
	if e.Kind&EpilogueRowScale != 0 {
		advance(&e.Scales, 4*e.Rows(first))
	}
	return e
}

func (k EpilogueKind) String() string {
	if k == 0 {
		return "none"
	}
	var parts []string
	for i, name := range [...]string{"residual_add", "rmsnorm", "quant_fp8", "row_scale"} {
		if k&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if k>>numEpilogueBits != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint8(k>>numEpilogueBits<<numEpilogueBits)))
	}
	return strings.Join(parts, "+")
}

// EpilogueType reports whether an epilogue computes on t.
func (t DataType) EpilogueType() bool { return t == Float32 || t == Float16 || t == Bfloat16 }

// Valid reports whether k is a kind an epilogue can be: known bits,
// residual_add or rmsnorm, and row_scale only with quant_fp8
// (validateEpilogue says which rule a call breaks).
func (k EpilogueKind) Valid() bool {
	return k>>numEpilogueBits == 0 && k&(EpilogueResidualAdd|EpilogueRMSNorm) != 0 &&
		(k&EpilogueRowScale == 0 || k&EpilogueQuantFP8 != 0)
}

// validateEpilogue checks an epilogue against its call, which reads in
// bytes and writes out: only AllReduce and AllGatherV have one (an
// AllGatherV's parts whole rows that tile its output, its input apart from
// it, since its own part gets the epilogue and the others still read it);
// its rows, types and buffers must be whole, and the buffers it writes
// must overlap no other.
func (c *Call) validateEpilogue(in, out uint64) error {
	e := &c.Epilogue
	if e.Kind == 0 {
		if *e != (Epilogue{}) {
			return invalid("%s: epilogue fields set but no epilogue kind", c.Coll)
		}
		return nil
	}
	k := e.Kind
	size := uint64(c.Type.Size())
	count := out / size // the output's elements
	switch {
	case c.Coll != AllReduce && c.Coll != AllGatherV:
		return invalid("%s: an epilogue follows only AllReduce and AllGatherV", c.Coll)
	case k>>numEpilogueBits != 0:
		return invalid("%s: unknown epilogue kind bits %s", c.Coll, k)
	case k&(EpilogueResidualAdd|EpilogueRMSNorm) == 0:
		return invalid("%s: epilogue %s needs residual_add or rmsnorm", c.Coll, k)
	case k&EpilogueRowScale != 0 && k&EpilogueQuantFP8 == 0:
		return invalid("%s: epilogue row_scale needs quant_fp8", c.Coll)
	case !c.Type.EpilogueType():
		return invalid("%s: epilogue %s on %s (float32, float16 and bfloat16 only)", c.Coll, k, c.Type)
	case e.Hidden == 0:
		return invalid("%s: epilogue hidden size is 0", c.Coll)
	case e.Hidden > math.MaxUint32:
		return invalid("%s: epilogue hidden size %d is too large (at most %d)", c.Coll, e.Hidden, uint64(math.MaxUint32))
	case count%e.Hidden != 0:
		return invalid("%s: count %d is not a whole number of rows of %d", c.Coll, count, e.Hidden)
	case math.IsNaN(float64(e.Eps)) || math.IsInf(float64(e.Eps), 0) || e.Eps < 0:
		return invalid("%s: epilogue eps %v is not a finite value >= 0", c.Coll, e.Eps)
	}
	if c.Coll == AllGatherV {
		if err := c.gathersRows(count); err != nil {
			return err
		}
	}
	scales := uint64(4)
	if k&EpilogueRowScale != 0 {
		scales = 4 * e.Rows(count)
	}
	// The buffers the call touches: the epilogue's must be given exactly
	// when its kind uses them, whole and aligned; what it writes (recv,
	// residual, quant, row scales) overlaps nothing else, what it only reads
	// (send, weight, a tensor's scale) may overlap other read-only buffers.
	type buffer struct {
		name          string
		p             uintptr
		bytes, align  uint64
		used, written bool
	}
	bufs := [...]buffer{
		{"sendbuff", c.Send, in, size, true, false},
		{"recvbuff", c.Recv, out, size, true, true},
		{"residual", e.Residual, out, size, k&EpilogueResidualAdd != 0, true},
		{"weight", e.Weight, e.Hidden * size, size, k&EpilogueRMSNorm != 0, false},
		{"quant", e.Quant, count, 1, k&EpilogueQuantFP8 != 0, true},
		{"scales", e.Scales, scales, 4, k&EpilogueQuantFP8 != 0, k&EpilogueRowScale != 0},
	}
	for _, b := range bufs[2:] {
		switch {
		case !b.used && b.p != 0:
			return invalid("%s: epilogue %s given a %s buffer it does not use", c.Coll, k, b.name)
		case !b.used || out == 0:
		case b.p == 0:
			return invalid("%s: epilogue %s buffer is NULL for %d bytes", c.Coll, b.name, b.bytes)
		case uint64(b.p)%b.align != 0:
			return invalid("%s: epilogue %s buffer %#x is not aligned to %d bytes", c.Coll, b.name, b.p, b.align)
		}
	}
	for i := 2; i < len(bufs); i++ { // send against recv: validateOverlap
		for j := range i {
			a, b := bufs[i], bufs[j]
			if !a.used || !b.used || a.bytes == 0 || b.bytes == 0 || !a.written && !b.written {
				continue
			}
			if a.p < b.p+uintptr(b.bytes) && b.p < a.p+uintptr(a.bytes) {
				return invalid("%s: epilogue %s [%#x,+%d) overlaps %s [%#x,+%d)", c.Coll, a.name, a.p, a.bytes, b.name, b.p, b.bytes)
			}
		}
	}
	return nil
}

// gathersRows checks an AllGatherV with an epilogue over count elements of
// output: every part whole rows, the parts covering the output, and the
// input apart from it.
func (c *Call) gathersRows(count uint64) error {
	h := c.Epilogue.Hidden
	var sum uint64
	for r, n := range c.Counts {
		if n%h != 0 || c.Displs[r]%h != 0 {
			return invalid("%s: part %d (%d elements at %d) is not whole rows of %d for its epilogue", c.Coll, r, n, c.Displs[r], h)
		}
		sum += n
	}
	switch {
	case sum != count:
		return invalid("%s: its parts leave gaps in its output; an epilogue needs them to cover it", c.Coll)
	case c.InPlace() && count > 0:
		return invalid("%s: an epilogue needs the input apart from the output (not in place)", c.Coll)
	}
	return nil
}
