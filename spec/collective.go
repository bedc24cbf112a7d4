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
	NumCollectives
)

var collNames = [NumCollectives]string{
	"AllReduce", "AllGather", "ReduceScatter", "AllToAll", "AllGatherV", "ReduceScatterV",
	"AllToAllV", "Broadcast", "Reduce", "Gather", "Scatter", "SendRecv",
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
	return d.In.V && d.Out.V && d.In.Shape != Packed && d.Out.Shape != Packed
}

// Reduces reports whether the collective consumes by reduction.
func (c Collective) Reduces() bool { return definitions[c].Consume == ConsumeReduce }
