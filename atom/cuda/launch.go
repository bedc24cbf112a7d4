package cuda

import (
	"purlin/atom"
	"purlin/config"
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
	Stage, Packet, Flags [snac.MaxRanks]uint64
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
	// An AllReduce epilogue's buffers beside each output (atom.Buffers).
	Residual, Weight, Quant, Scales [MaxBuffers]uint64
	// The peers' outputs a Plan pushes into, by peer slot (snac.PeerSlot,
	// atom.PeerOutput): every rank's output of each call that does.
	PeerRecv [snac.MaxPeerSlots]uint64
}

// pdlUsable reports whether the current context's launches may be
// programmatic dependent launches: the device is of compute capability 9.0
// or later (csrc/run.cu waits for the kernel before it there), the driver
// has cuLaunchKernelEx, and PURLIN_PDL does not turn it off.
func pdlUsable() (bool, error) {
	if !config.Get().PDL || hot.launchKernelEx == 0 {
		return false, nil
	}
	var dev cuDevice
	if r := driver.CtxGetDevice(&dev); r != cuSuccess {
		return false, cuErr(r, "cuCtxGetDevice")
	}
	var major int32
	if r := driver.DeviceGetAttribute(&major, deviceAttrComputeMajor, dev); r != cuSuccess {
		return false, cuErr(r, "cuDeviceGetAttribute", "compute capability")
	}
	return major >= 9, nil
}
