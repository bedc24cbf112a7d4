package spec

import "fmt"

// Collective names one row of the layout table (see Definition).
type Collective uint8

const (
	AllReduce Collective = iota
	AllGather
	ReduceScatter
	AllToAll
	AllGatherV
	ReduceScatterV
	AllToAllV
	Broadcast
	Reduce
	Gather
	Scatter
	// SendRecv is one direction of a point-to-point transfer: Call.Peer is
	// the other rank, Call.Send is set on the sender, Call.Recv on the receiver.
	SendRecv
	// AllGatherColumns gathers every rank's Rows x Count/Rows block of a
	// row-major matrix into column block r of every rank's output (Rows x
	// NRanks*Count/Rows): Count elements from each rank, as AllGather.
	AllGatherColumns
	// ReduceScatterColumns reduces a Rows-row matrix of NRanks*Count
	// elements and leaves rank r column block r, packed: Count elements to
	// each rank, as ReduceScatter.
	ReduceScatterColumns
	// AllToAllMatrix is an all-to-all whose pair sizes and destination
	// offsets every rank passes as one NRanks x NRanks matrix (Counts,
	// Displs; see Layout.Matrix): the token dispatch of a mixture of experts,
	// its counts known on the host.
	AllToAllMatrix
	NumCollectives
)

var collNames = [NumCollectives]string{
	"AllReduce", "AllGather", "ReduceScatter", "AllToAll", "AllGatherV", "ReduceScatterV",
	"AllToAllV", "Broadcast", "Reduce", "Gather", "Scatter", "SendRecv", "AllGatherColumns",
	"ReduceScatterColumns", "AllToAllMatrix",
}

func (c Collective) String() string {
	if c >= NumCollectives {
		return fmt.Sprintf("collective(%d)", uint8(c))
	}
	return collNames[c]
}

// Rooted reports whether the collective has a root rank.
func (c Collective) Rooted() bool {
	d := definitions[c]
	return d.In.Rooted || d.Out.Rooted
}

// Vectored reports whether the collective's sizes come from per-rank counts
// and displacements rather than one count: a V layout on either side.
func (c Collective) Vectored() bool {
	d := definitions[c]
	return d.In.V || d.Out.V
}

// PairCounts reports whether a vectored collective's sizes are per pair of
// ranks, each rank passing its own send and receive lists (AllToAllV, as
// MPI_Alltoallv), rather than one list equal on every rank: both of its
// layouts are V and hold a slice per rank.
func (c Collective) PairCounts() bool {
	d := definitions[c]
	return d.In.V && d.Out.V && d.In.Shape != Packed && d.Out.Shape != Packed && !c.Matrix()
}

// Matrix reports whether the collective's sizes are one matrix of every
// pair's, equal on every rank (Layout.Matrix).
func (c Collective) Matrix() bool {
	d := definitions[c]
	return d.In.Matrix || d.Out.Matrix
}

// Columns reports whether a side of the collective is a column-block
// layout: its calls name the matrix's rows (Call.Rows).
func (c Collective) Columns() bool {
	d := definitions[c]
	return d.In.Columns || d.Out.Columns
}

// Reduces reports whether the collective consumes by reduction.
func (c Collective) Reduces() bool { return definitions[c].Consume == ConsumeReduce }
