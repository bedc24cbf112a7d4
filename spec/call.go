package spec

import (
	"fmt"

	"purlin/errs"
)

// Call is one collective as a rank issues it. Counts are in elements and
// follow NCCL's meaning per collective:
//
//	AllReduce, Broadcast, Reduce, SendRecv: Count elements in and out
//	AllGather, Gather:   Count elements from each rank (output NRanks*Count)
//	ReduceScatter, Scatter: Count elements to each rank (input NRanks*Count)
//	AllToAll:            Count elements per pair (input and output NRanks*Count)
//	AllGatherV, ReduceScatterV: Counts[r], Displs[r] for every rank r (all ranks pass the same)
//	AllToAllV:           SendCounts/SendDispls and RecvCounts/RecvDispls, this rank's view
//	AllGatherColumns, ReduceScatterColumns: as AllGather and ReduceScatter, with
//	                     Rows, the rows of the matrix whose column blocks are the slices
//	AllToAllMatrix:      Counts[p*NRanks+q] elements from p to q, landing at Displs[p*NRanks+q]
//	                     in q's output; p's slices packed in its input in rank order
//
// A Call must not be modified while a collective built from it is being planned.
type Call struct {
	Coll       Collective
	Send, Recv uintptr
	Count      uint64
	Counts     []uint64 // AllGatherV, ReduceScatterV; AllToAllMatrix: NRanks x NRanks
	Displs     []uint64 // AllGatherV: offsets in Recv; ReduceScatterV: offsets in Send; AllToAllMatrix: in Recv
	SendCounts []uint64 // AllToAllV
	SendDispls []uint64
	RecvCounts []uint64
	RecvDispls []uint64
	Type       DataType
	Op         Op
	Rows       uint64   // column-block layouts (Layout.Columns): the matrix's rows
	Width      uint64   // column-block layouts: a matrix row's elements, where it holds more than the ranks' blocks (0: NRanks blocks)
	Epilogue   Epilogue // AllReduce, AllGatherV: what it does to each row of its result (none by default)
	Root       int      // rooted collectives
	Peer       int      // SendRecv
	IsSend     bool
	Rank       int
	NRanks     int
}

// MaxBytes bounds every buffer a call names; larger counts are rejected as
// overflow rather than trusted (1 TiB, far beyond any device's memory).
const MaxBytes = 1 << 40

func invalid(format string, args ...any) error {
	return errs.New(errs.ErrInvalidArgument, format, args...)
}

// Validate checks every argument and returns a clear error naming the first
// bad one. A valid Call is safe to plan and execute.
func (c *Call) Validate() error {
	if c.Coll >= NumCollectives {
		return invalid("unknown collective %d", uint8(c.Coll))
	}
	if c.NRanks < 1 || c.Rank < 0 || c.Rank >= c.NRanks {
		return invalid("%s: rank %d of %d ranks", c.Coll, c.Rank, c.NRanks)
	}
	if !c.Type.Valid() {
		return invalid("%s: invalid data type %d (valid: 0..%d)", c.Coll, int32(c.Type), NumTypes-1)
	}
	if c.Coll.Reduces() && !c.Op.Valid() {
		return invalid("%s: invalid reduction op %d", c.Coll, int32(c.Op.Kind))
	}
	if c.Coll.Rooted() && (c.Root < 0 || c.Root >= c.NRanks) {
		return invalid("%s: root %d is not a rank of %d", c.Coll, c.Root, c.NRanks)
	}
	if c.Coll == SendRecv && (c.Peer < 0 || c.Peer >= c.NRanks) {
		return invalid("%s: peer %d is not a rank of %d", c.sendRecvName(), c.Peer, c.NRanks)
	}
	if err := c.validateVectors(); err != nil {
		return err
	}
	if err := c.validateRows(); err != nil {
		return err
	}
	in, out := c.Extents()
	if in > MaxBytes || out > MaxBytes {
		if c.Coll.Vectored() { // its sizes come from the counts and displacements, not Count
			return invalid("%s: its counts and displacements span %d bytes to send and %d to receive of %s, too large (over %d bytes)", c.Coll, in, out, c.Type, uint64(MaxBytes))
		}
		return invalid("%s: count %d of %s is too large (over %d bytes)", c.Coll, c.Count, c.Type, uint64(MaxBytes))
	}
	if err := c.validatePointer("sendbuff", c.Send, in); err != nil {
		return err
	}
	if err := c.validatePointer("recvbuff", c.Recv, out); err != nil {
		return err
	}
	if err := c.validateOpType(in); err != nil {
		return err
	}
	if err := c.validateOverlap(in, out); err != nil {
		return err
	}
	return c.validateEpilogue(in, out)
}

// validateOpType rejects an op NCCL does not run on the type across the
// communicator's ranks (Op.DefinedFor: avg and premulsum on the float8
// types on one rank). NCCL discards an empty collective before it looks at
// the op, so a reduction of no elements (in == 0) is accepted with any op.
func (c *Call) validateOpType(in uint64) error {
	if c.Coll.Reduces() && !c.Op.DefinedFor(c.Type, c.NRanks) && in > 0 {
		return invalid("%s: %s on %s is not supported on a one-rank communicator (as in NCCL)", c.Coll, c.Op, c.Type)
	}
	return nil
}

func (c *Call) sendRecvName() string {
	if c.IsSend {
		return "Send"
	}
	return "Recv"
}

func (c *Call) validatePointer(name string, p uintptr, bytes uint64) error {
	if bytes == 0 {
		return nil
	}
	if p == 0 {
		return invalid("%s: %s is NULL for %d bytes", c.Coll, name, bytes)
	}
	if p%uintptr(c.Type.Size()) != 0 {
		return invalid("%s: %s %#x is not aligned to its %s elements", c.Coll, name, p, c.Type)
	}
	return nil
}

// validateOverlap accepts disjoint buffers and NCCL's in-place positions;
// any other overlap would let a consumer overwrite input still to be read.
func (c *Call) validateOverlap(in, out uint64) error {
	if in == 0 || out == 0 || c.Send+uintptr(in) <= c.Recv || c.Recv+uintptr(out) <= c.Send {
		return nil
	}
	if c.InPlace() {
		return nil
	}
	return invalid("%s: sendbuff [%#x,+%d) and recvbuff [%#x,+%d) overlap, and not in place", c.Coll, c.Send, in, c.Recv, out)
}

func (c *Call) validateVectors() error {
	n := c.NRanks
	switch {
	case c.Coll.Matrix():
		return c.validateMatrix()
	case c.Coll.PairCounts():
		if len(c.SendCounts) != n || len(c.SendDispls) != n || len(c.RecvCounts) != n || len(c.RecvDispls) != n {
			return invalid("%s: need %d send and receive counts and displacements", c.Coll, n)
		}
		if err := checkVector(c.Coll, "sendcounts", c.SendCounts, c.SendDispls); err != nil {
			return err
		}
		return checkVector(c.Coll, "recvcounts", c.RecvCounts, c.RecvDispls)
	case c.Coll.Vectored():
		if len(c.Counts) != n || len(c.Displs) != n {
			return invalid("%s: need %d counts and displacements, got %d and %d", c.Coll, n, len(c.Counts), len(c.Displs))
		}
		return checkVector(c.Coll, "counts", c.Counts, c.Displs)
	}
	return nil
}

// validateRows accepts Rows and Width only for a column-block layout, where
// Rows must split every slice into whole rows, and a row of Width hold
// every rank's block.
func (c *Call) validateRows() error {
	switch {
	case !c.Coll.Columns() && (c.Rows != 0 || c.Width != 0):
		return invalid("%s: rows %d and width %d given, but no side is a column-block layout", c.Coll, c.Rows, c.Width)
	case !c.Coll.Columns():
		return nil
	case c.Rows == 0:
		return invalid("%s: rows is 0: a column-block layout needs the matrix's rows", c.Coll)
	case c.Count%c.Rows != 0:
		return invalid("%s: count %d is not a whole number of rows (%d rows)", c.Coll, c.Count, c.Rows)
	case c.Width != 0 && (c.Width > MaxBytes || c.Width < uint64(c.NRanks)*(c.Count/c.Rows)):
		return invalid("%s: width %d cannot hold a row of %d ranks' blocks of %d elements", c.Coll, c.Width, c.NRanks, c.Count/c.Rows)
	}
	return nil
}

// validateMatrix checks a size matrix (Layout.Matrix): NRanks x NRanks
// counts and destination offsets, no entry too large, and no two slices
// landing in one rank's output overlapping.
func (c *Call) validateMatrix() error {
	n := c.NRanks
	if len(c.Counts) != n*n || len(c.Displs) != n*n {
		return invalid("%s: need %d x %d counts and displacements (one per pair), got %d and %d", c.Coll, n, n, len(c.Counts), len(c.Displs))
	}
	for q := range n {
		for p := range n {
			k, d := c.Counts[p*n+q], c.Displs[p*n+q]
			if k > MaxBytes || d > MaxBytes {
				return invalid("%s: counts[%d][%d]=%d at displacement %d is too large", c.Coll, p, q, k, d)
			}
			for o := range p {
				ko, do := c.Counts[o*n+q], c.Displs[o*n+q]
				if k > 0 && ko > 0 && d < do+ko && do < d+k {
					return invalid("%s: the slices of ranks %d and %d overlap in rank %d's output", c.Coll, o, p, q)
				}
			}
		}
	}
	return nil
}

// checkVector rejects counts whose slices overlap or overflow.
func checkVector(coll Collective, name string, counts, displs []uint64) error {
	for i := range counts {
		if counts[i] > MaxBytes || displs[i] > MaxBytes {
			return invalid("%s: %s[%d]=%d at displacement %d is too large", coll, name, i, counts[i], displs[i])
		}
		for j := range i {
			if counts[i] > 0 && counts[j] > 0 && displs[i] < displs[j]+counts[j] && displs[j] < displs[i]+counts[i] {
				return invalid("%s: %s slices %d and %d overlap", coll, name, j, i)
			}
		}
	}
	return nil
}

// InPlace reports whether the call is in place in NCCL's sense: one buffer
// where input and output have the same shape, or this rank's slice of the
// scattered one the packed one (InPlaceOffset says where).
func (c *Call) InPlace() bool {
	off, ok := c.InPlaceOffset()
	return ok && c.Send-c.Recv == uintptr(off)
}

// InPlaceOffset is where an in-place call's input lies in its output:
// Send - Recv, modulo the address space, of a call in place (the packed
// side at this rank's slice of the scattered one, else the same address).
// A collective with counts per pair (AllToAllV) has no in-place form: its
// slices need not line up with the input's; nor has one of column blocks,
// nor Send or Recv (ok false).
func (c *Call) InPlaceOffset() (off uint64, ok bool) {
	d := c.Coll.Definition()
	switch {
	case c.Coll == SendRecv || d.In.Columns || d.Out.Columns:
		return 0, false // a column block is no contiguous slice a packed buffer could be
	case c.Coll.Matrix():
		return 0, false // as AllToAllV
	case d.In.Shape == Packed && d.Out.Shape != Packed:
		off, _ := c.OutPart(c.Rank, c.Rank)
		return off, true
	case d.In.Shape != Packed && d.Out.Shape == Packed:
		off, _ := c.InPart(c.Rank, c.Rank)
		return -off, true
	case c.Coll.PairCounts():
		return 0, false
	}
	return 0, true
}

// Extents returns the bytes this rank reads from Send and writes to Recv:
// the end of the last non-empty part its input holds and its output
// receives (none where a rooted layout leaves the rank out).
func (c *Call) Extents() (in, out uint64) {
	size := uint64(c.Type.Size())
	count := min(c.Count, MaxBytes+1) // keep the products below from wrapping
	if c.Coll == SendRecv {
		if c.IsSend {
			return count * size, 0
		}
		return 0, count * size
	}
	if c.Produces(c.Rank) {
		in = c.extent(true, count)
	}
	if c.Consumes(c.Rank) {
		out = c.extent(false, count)
	}
	return in, out
}

// extent is the end of the last non-empty part of this rank's input (or
// output; see part).
func (c *Call) extent(input bool, count uint64) uint64 {
	l := c.Coll.Definition().Out
	if input {
		l = c.Coll.Definition().In
	}
	if st := c.stride(l, count); st.Row > 0 {
		off, length := c.part(input, c.Rank, c.NRanks-1, count)
		if length == 0 {
			return 0
		}
		return off + (length/st.Row-1)*st.Pitch + st.Row
	}
	if l.Shape == Packed || !l.V {
		off, length := c.part(input, c.Rank, c.NRanks-1, count)
		return off + length
	}
	var end uint64
	for q := range c.NRanks {
		if off, length := c.part(input, c.Rank, q, count); length > 0 {
			end = max(end, off+length)
		}
	}
	return end
}

// String describes the call for logs and error texts.
func (c *Call) String() string {
	rows := ""
	if c.Rows > 0 {
		rows = fmt.Sprintf(" rows=%d", c.Rows)
	}
	if c.Width > 0 {
		rows += fmt.Sprintf(" width=%d", c.Width)
	}
	if c.Epilogue.Kind != 0 {
		rows += fmt.Sprintf(" epilogue=%s hidden=%d", c.Epilogue.Kind, c.Epilogue.Hidden)
	}
	return fmt.Sprintf("%s(count=%d%s %s %s root=%d peer=%d rank=%d/%d)", c.Coll, c.Count, rows, c.Type, c.Op, c.Root, c.Peer, c.Rank, c.NRanks)
}
