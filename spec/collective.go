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
// and displacements rather than one count.
func (c Collective) Vectored() bool {
	return c == AllGatherV || c == ReduceScatterV || c == AllToAllV
}

// Reduces reports whether the collective consumes by reduction.
func (c Collective) Reduces() bool { return definitions[c].Consume == ConsumeReduce }
