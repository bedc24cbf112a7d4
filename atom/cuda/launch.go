package cuda

import (
	"purlin/atom"
	"purlin/snac"
)

// Launch limits; csrc/plan.cuh holds the same numbers.
const (
	// MaxBuffers is atom.MaxBuffers, which csrc's kMaxBuffers holds too.
	MaxBuffers = atom.MaxBuffers
	// threadsPerBlock is kThreads: every worker is a block of this size.
	threadsPerBlock = 512
)

// peers mirrors struct Peers: every rank's symmetric memory as this rank's
// device addresses it.
type peers struct {
	Stage, Packet, Flags, Checks [snac.MaxRanks]uint64
}

// launchArgs mirrors struct Launch (csrc/plan.cuh), the kernel's by-value
// argument; layout_test.go checks the two agree.
type launchArgs struct {
	Steps     uint64
	Workers   uint64
	Fill      uint64
	Epochs    uint64
	AbortFlag uint64
	Status    uint64
	TimeoutNs uint64
	ScalarPtr uint64
	Scalar    float64
	DType     int32
	Op        int32
	NRanks    int32
	Rank      int32
	Peers     peers
	Send      [MaxBuffers]uint64
	Recv      [MaxBuffers]uint64
}
