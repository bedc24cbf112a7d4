package spec

import "fmt"

// Shape says how a buffer is spread over the ranks.
type Shape uint8

const (
	// Packed is one contiguous payload per rank.
	Packed Shape = iota
	// Scattered is split by rank: slice r belongs to rank r.
	Scattered
	// Transposed: my slice r is rank r's slice addressed to me.
	Transposed
)

var shapeNames = [...]string{"packed", "scattered", "transposed"}

// Layout is a Shape plus its variants: V (slice sizes differ per rank),
// Rooted (only the root holds the buffer) and Columns (the slices are column
// blocks of a row-major matrix).
type Layout struct {
	Shape  Shape
	V      bool
	Rooted bool
	// Columns: a scattered or transposed buffer is a row-major matrix of
	// Call.Rows rows, and its slice r is column block r: in every row, slice
	// r's share of it, after the shares of the slices before r. A
	// tensor-parallel gather along the last dimension lands in place this way.
	Columns bool
	// Matrix: the sizes of a V layout are one NRanks x NRanks matrix every
	// rank passes alike (Call.Counts[p*NRanks+q]: what p sends q), with the
	// offsets of each slice in the transposed buffer (Call.Displs, the same
	// shape: where p's slice lands in q's), and a scattered buffer's slices
	// packed in rank order. Every rank knows every length, unlike the
	// per-rank lists of AllToAllV.
	Matrix bool
}

func (l Layout) String() string {
	s := "?"
	if int(l.Shape) < len(shapeNames) {
		s = shapeNames[l.Shape]
	}
	if l.V {
		s += "V"
	}
	if l.Columns {
		s += " columns"
	}
	if l.Matrix {
		s += " matrix"
	}
	if l.Rooted {
		s = "rooted " + s
	}
	return s
}

// Consume is what a consumer does with staged data.
type Consume uint8

const (
	ConsumeCopy Consume = iota
	ConsumeReduce
)

func (c Consume) String() string {
	if c == ConsumeReduce {
		return "reduce"
	}
	return "copy"
}

var (
	packed          = Layout{Shape: Packed}
	packedV         = Layout{Shape: Packed, V: true}
	scattered       = Layout{Shape: Scattered}
	scatteredV      = Layout{Shape: Scattered, V: true}
	transposed      = Layout{Shape: Transposed}
	transposedV     = Layout{Shape: Transposed, V: true}
	rootedPacked    = Layout{Shape: Packed, Rooted: true}
	rootedScattered = Layout{Shape: Scattered, Rooted: true}
	columns         = Layout{Shape: Scattered, Columns: true}
	scatteredM      = Layout{Shape: Scattered, V: true, Matrix: true}
	transposedM     = Layout{Shape: Transposed, V: true, Matrix: true}
)

// Definition is a collective's consume op and layouts.
type Definition struct {
	Consume Consume
	In, Out Layout
}

// definitions is the table of the architecture: a new collective is a new row.
var definitions = [NumCollectives]Definition{
	AllReduce:      {ConsumeReduce, packed, packed},
	AllGather:      {ConsumeCopy, packed, scattered},
	ReduceScatter:  {ConsumeReduce, scattered, packed},
	AllToAll:       {ConsumeCopy, scattered, transposed},
	AllGatherV:     {ConsumeCopy, packedV, scatteredV},
	ReduceScatterV: {ConsumeReduce, scatteredV, packedV},
	AllToAllV:      {ConsumeCopy, scatteredV, transposedV},
	Broadcast:      {ConsumeCopy, rootedPacked, packed},
	Reduce:         {ConsumeReduce, packed, rootedPacked},
	Gather:         {ConsumeCopy, packed, rootedScattered},
	Scatter:        {ConsumeCopy, rootedScattered, packed},
	SendRecv:       {ConsumeCopy, packed, packed},
	// Rows with no NCCL counterpart: reachable through FromLayouts.
	AllGatherColumns:     {ConsumeCopy, packed, columns},
	ReduceScatterColumns: {ConsumeReduce, columns, packed},
	AllToAllMatrix:       {ConsumeCopy, scatteredM, transposedM},
}

// Definition returns c's consume op and layouts.
func (c Collective) Definition() Definition { return definitions[c] }

// FromLayouts names the collective that consume takes from in to out. Send and
// Recv are not reachable this way: packed -> packed by copy is ambiguous
// between ranks, so they have their own entry points. A pair no row of the
// table holds is refused with what makes it unsupported.
func FromLayouts(consume Consume, in, out Layout) (Collective, error) {
	for c := Collective(0); c < NumCollectives; c++ {
		if c == SendRecv {
			continue
		}
		if d := definitions[c]; d.Consume == consume && d.In == in && d.Out == out {
			return c, nil
		}
	}
	why := ""
	for _, l := range [...]Layout{in, out} {
		switch {
		case l.Shape > Transposed:
			why = fmt.Sprintf(": unknown shape %d", l.Shape)
		case l.Columns && l.Shape == Packed:
			why = ": a packed buffer is one slice, it has no column blocks"
		case l.Columns && (l.V || l.Rooted):
			why = ": column blocks are neither V nor rooted"
		case l.Columns:
			why = ": column blocks serve all-gather (copy, packed -> scattered columns) and reduce-scatter (reduce, scattered columns -> packed)"
		case l.Matrix && !l.V:
			why = ": a size matrix is a V layout's"
		case l.Matrix:
			why = ": a size matrix serves all-to-all (copy, scatteredV matrix -> transposedV matrix)"
		}
	}
	return 0, fmt.Errorf("%w: no collective %s takes %s to %s%s", ErrNoCollective, consume, in, out, why)
}

// Where a call's data lies, read from its layouts: every rank produces
// (its input holds data for others) unless the input is rooted, and
// consumes unless the output is; a packed buffer holds one part, a
// scattered or transposed one a slice per rank.

// Produces reports whether rank r's input holds data of the call.
func (c *Call) Produces(r int) bool { return !c.Coll.Definition().In.Rooted || r == c.Root }

// Consumes reports whether rank r's output receives data of the call.
func (c *Call) Consumes(r int) bool { return !c.Coll.Definition().Out.Rooted || r == c.Root }

// InPart is the byte range of producer p's input meant for consumer q: all
// of a packed input, slice q of a scattered one.
func (c *Call) InPart(p, q int) (off, length uint64) {
	return c.part(true, p, q, c.Count)
}

// OutPart is the byte range of consumer q's output that producer p's part
// lands in: all of a packed output, slice p of a scattered or transposed one.
func (c *Call) OutPart(q, p int) (off, length uint64) {
	return c.part(false, q, p, c.Count)
}

// Stride says how a part lies in its buffer: contiguous where Row is 0,
// else as rows of Row bytes, Pitch bytes apart (a column block; a part's
// offset is its first row's).
type Stride struct{ Row, Pitch uint64 }

// InStride is how the parts of this call's inputs lie (see Layout.Columns).
func (c *Call) InStride() Stride { return c.stride(c.Coll.Definition().In, c.Count) }

// OutStride is how the parts of this call's outputs lie.
func (c *Call) OutStride() Stride { return c.stride(c.Coll.Definition().Out, c.Count) }

// stride is a Columns layout's rows: every slice holds count elements, a
// row's share of them is count/Rows, and a row holds NRanks shares, or
// Width elements where the call names it (the ranks' blocks its first).
func (c *Call) stride(l Layout, count uint64) Stride {
	if !l.Columns || c.Rows == 0 {
		return Stride{}
	}
	row := count / c.Rows * uint64(c.Type.Size())
	if c.Width != 0 {
		return Stride{Row: row, Pitch: min(c.Width, MaxBytes) * uint64(c.Type.Size())}
	}
	return Stride{Row: row, Pitch: uint64(c.NRanks) * row}
}

// part is, in the input (or output) of rank holder, the part for (or from)
// rank other, with count for the call's Count. V layouts read Counts and
// Displs (one list, equal on every rank), or this side's list where the
// counts are per pair (Collective.PairCounts). A column block's offset is
// where its first row starts.
func (c *Call) part(input bool, holder, other int, count uint64) (off, length uint64) {
	d := c.Coll.Definition()
	l, counts, displs := d.Out, c.RecvCounts, c.RecvDispls
	if input {
		l, counts, displs = d.In, c.SendCounts, c.SendDispls
	}
	if !c.Coll.PairCounts() {
		counts, displs = c.Counts, c.Displs
	}
	size := uint64(c.Type.Size())
	switch {
	case l.Matrix && input: // holder's slices, packed in rank order
		n := c.NRanks
		for q := range other {
			off += c.Counts[holder*n+q]
		}
		return off * size, c.Counts[holder*n+other] * size
	case l.Matrix:
		n := c.NRanks
		return c.Displs[other*n+holder] * size, c.Counts[other*n+holder] * size
	case l.Shape == Packed && l.V:
		return 0, counts[holder] * size
	case l.Shape == Packed:
		return 0, count * size
	case l.V:
		return displs[other] * size, counts[other] * size
	case l.Columns:
		return uint64(other) * c.stride(l, count).Row, count * size
	}
	return uint64(other) * count * size, count * size
}
