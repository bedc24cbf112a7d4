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

// Layout is a Shape plus its variants: V (slice sizes differ per rank) and
// Rooted (only the root holds the buffer).
type Layout struct {
	Shape  Shape
	V      bool
	Rooted bool
}

func (l Layout) String() string {
	s := "?"
	if int(l.Shape) < len(shapeNames) {
		s = shapeNames[l.Shape]
	}
	if l.V {
		s += "V"
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
}

// Definition returns c's consume op and layouts.
func (c Collective) Definition() Definition { return definitions[c] }

// FromLayouts names the collective that consume takes from in to out. Send and
// Recv are not reachable this way: packed -> packed by copy is ambiguous
// between ranks, so they have their own entry points.
func FromLayouts(consume Consume, in, out Layout) (Collective, error) {
	for c := Collective(0); c < NumCollectives; c++ {
		if c == SendRecv {
			continue
		}
		if d := definitions[c]; d.Consume == consume && d.In == in && d.Out == out {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: no collective %s takes %s to %s", ErrNoCollective, consume, in, out)
}
