package cuda

import (
	"encoding/binary"
	"os"
	"slices"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// layout places a rank's symmetric memory, one VMM allocation laid out alike
// on every rank (the Topology is equal everywhere):
//
//	[staging | packets | flags]
//
// flags holds two {flag, check} pairs of uint64 per slot (snac.SignalIndex).
// Flags and packets start zeroed; nothing clears them afterwards.
type layout struct {
	stage, packet, flags uint64 // offsets
	size                 uintptr
}

func newLayout(t snac.Topology) layout {
	const align = 4096
	up := func(x uint64) uint64 { return (x + align - 1) / align * align }
	var w layout
	w.stage = 0
	w.packet = up(t.StageBytes())
	w.flags = w.packet + up(t.PacketBytes())
	w.size = uintptr(w.flags + up(snac.NumSlots*2*16))
	return w
}

// symmetric is every rank's symmetric memory as this rank addresses it.
type symmetric struct {
	mine    vmm
	imports []vmm // other processes' symmetric memory mapped here
	base    [snac.MaxRanks]uint64
	// crowd is the most ranks of the communicator on one device of this
	// process, the same on every rank (1 across processes: their device
	// numbers need not name the same GPU).
	crowd int
}

// shareSymmetric allocates this rank's symmetric memory on device, zeroes it
// and makes every rank's addressable. Every rank maps every other rank's
// under a reference of its own, so the memory outlives its owner's free (an
// aborted or destroyed rank) until every mapping of it is gone: a peer's
// kernel still running never touches freed memory. Ranks in one process
// retain each other's allocations by address; ranks in several processes
// pass POSIX fds (Exchange.AllGatherFD) and import them. Every rank takes the
// same branch: it is decided from all ranks' pids.
func shareSymmetric(ex atom.Exchange, device int, w layout) (*symmetric, error) {
	mine, err := allocVMM(device, w.size)
	if err != nil {
		return nil, err
	}
	s := &symmetric{mine: mine, crowd: 1}
	fail := func(err error) (*symmetric, error) { s.free(); return nil, err }
	if r := driver.MemsetD8(mine.ptr, 0, mine.size); r != cuSuccess {
		return fail(cuErr(r, "cuMemsetD8", "symmetric memory"))
	}
	if r := driver.CtxSynchronize(); r != cuSuccess { // zeroed before any peer can notify
		return fail(cuErr(r, "cuCtxSynchronize", "symmetric memory"))
	}
	msg := make([]byte, 32)
	binary.LittleEndian.PutUint64(msg[0:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(msg[8:], uint64(mine.ptr))
	binary.LittleEndian.PutUint64(msg[16:], uint64(mine.size))
	binary.LittleEndian.PutUint64(msg[24:], uint64(device))
	all, err := ex.AllGather(msg)
	if err != nil {
		return fail(errs.New(errs.ErrRemote, "cuda symmetric memory exchange rank %d: %v", ex.Rank(), err))
	}
	if len(all) > snac.MaxRanks {
		return fail(errs.New(errs.ErrInvalidArgument, "cuda: %d ranks, at most %d", len(all), snac.MaxRanks))
	}
	onePID := true
	devices := make([]int, len(all))
	for r, m := range all {
		if len(m) != 32 {
			return fail(errs.New(errs.ErrRemote, "cuda symmetric memory exchange: rank %d sent %d bytes", r, len(m)))
		}
		onePID = onePID && binary.LittleEndian.Uint64(m) == uint64(os.Getpid())
		devices[r] = int(binary.LittleEndian.Uint64(m[24:]))
		if binary.LittleEndian.Uint64(m[16:]) != uint64(mine.size) {
			return fail(errs.New(errs.ErrInvalidUsage, "cuda symmetric memory exchange: rank %d's symmetric memory differs in size", r))
		}
	}
	if onePID {
		// The owners granted access to every device that can reach theirs;
		// a pair that cannot would fault in the kernel: refuse here, on
		// every rank alike (each checks every pair).
		if a, b := unreachablePair(devices, canAccessPeer); a >= 0 {
			return fail(errs.New(errs.ErrUnsupported, "cuda symmetric memory rank %d: rank %d's device %d cannot access rank %d's device %d (no peer access)", ex.Rank(), a, devices[a], b, devices[b]))
		}
		s.crowd = crowd(devices)
		markShared(devices)
		for r, m := range all {
			if r == ex.Rank() {
				s.base[r] = uint64(mine.ptr)
				continue
			}
			peer, err := retainVMM(devicePtr(binary.LittleEndian.Uint64(m[8:])), mine.size, device)
			if err != nil {
				return fail(err)
			}
			s.imports = append(s.imports, peer)
			s.base[r] = uint64(peer.ptr)
		}
		return s, s.barrier(ex, fail)
	}
	fd, err := mine.export()
	if err != nil {
		return fail(err)
	}
	fds, err := ex.AllGatherFD(fd)
	closeFDs([]int{fd})
	if err != nil {
		return fail(errs.New(errs.ErrRemote, "cuda symmetric memory fd exchange rank %d: %v", ex.Rank(), err))
	}
	defer closeFDs(fds)
	for r := range all {
		if r == ex.Rank() {
			s.base[r] = uint64(mine.ptr)
			continue
		}
		m, err := importVMM(fds[r], mine.size, device)
		if err != nil {
			return fail(err)
		}
		s.imports = append(s.imports, m)
		s.base[r] = uint64(m.ptr)
	}
	return s, s.barrier(ex, fail)
}

// crowd is the most ranks that share one device, given each rank's device.
func crowd(devices []int) int {
	most, on := 0, map[int]int{}
	for _, d := range devices {
		on[d]++
		most = max(most, on[d])
	}
	return most
}

// sharedDevices marks the devices of this process that a communicator put
// two or more of its ranks on (markShared). A rank on one launches without
// programmatic dependent launch whatever its own communicator's crowd
// (Rank.launchesPDL): a split that leaves it alone on the device still
// runs its kernels among those ranks' kernels, which wait for each other.
// The marks lie in C memory (launch.h purlinSharedDevices), where a launch
// recorded before its device was marked reads them too (Replay).
var sharedDevices = cSharedDevices()

// markShared marks the devices that hold more than one of devices' ranks.
func markShared(devices []int) {
	for i, d := range devices {
		if d >= 0 && d < len(sharedDevices) && slices.Contains(devices[i+1:], d) {
			sharedDevices[d].Store(1)
		}
	}
}

// deviceShared reports whether ranks of this process share device d.
func deviceShared(d int) bool {
	return d >= 0 && d < len(sharedDevices) && sharedDevices[d].Load() != 0
}

// barrier returns once every rank has mapped every rank's memory, before anyone
// launches (and before a rank whose init fails frees what others map).
func (s *symmetric) barrier(ex atom.Exchange, fail func(error) (*symmetric, error)) error {
	if _, err := ex.AllGather(nil); err != nil {
		_, err = fail(errs.New(errs.ErrRemote, "cuda symmetric memory barrier rank %d: %v", ex.Rank(), err))
		return err
	}
	return nil
}

func (s *symmetric) free() {
	for _, m := range s.imports {
		m.free()
	}
	s.mine.free()
}

// peersOf fills the kernel's view of every rank's spaces.
func (s *symmetric) peersOf(w layout, nranks int) peers {
	var p peers
	for r := 0; r < nranks; r++ {
		p.Stage[r] = s.base[r] + w.stage
		p.Packet[r] = s.base[r] + w.packet
		p.Flags[r] = s.base[r] + w.flags
	}
	return p
}

// unreachablePair is the first pair of ranks (a, b) whose devices[a]
// cannot access devices[b], or (-1, -1) when every rank reaches every
// rank's memory (ranks sharing a device always do).
func unreachablePair(devices []int, canAccess func(from, to int) bool) (int, int) {
	for a, from := range devices {
		for b, to := range devices {
			if from != to && !canAccess(from, to) {
				return a, b
			}
		}
	}
	return -1, -1
}

// canAccessPeer reports whether device from can access device to's memory.
func canAccessPeer(from, to int) bool {
	var can int32
	return driver.DeviceCanAccessPeer(&can, cuDevice(from), cuDevice(to)) == cuSuccess && can != 0
}
