package host

import (
	"fmt"

	"golang.org/x/sys/unix"

	"purlin/errs"
	"purlin/snac"
)

// layout places a rank's symmetric memory (flags, check words, epochs,
// staging, packets) in its memfd. Every rank computes the same layout from
// the same Topology.
type layout struct {
	flags, checks, epochs, stage, packets, size uint64
	stageBytes, packetBytes                     uint64
}

func newLayout(t snac.Topology) layout {
	var l layout
	l.flags = 64
	l.checks = l.flags + 16*snac.NumSlots
	l.epochs = l.checks + 16*snac.NumSlots
	l.stage = alignUp(l.epochs+8*snac.NumEpochs, 4096)
	l.packets = alignUp(l.stage+t.StageBytes(), 4096)
	l.size = alignUp(l.packets+t.PacketBytes(), 4096)
	l.stageBytes, l.packetBytes = t.StageBytes(), t.PacketBytes()
	return l
}

func alignUp(x, to uint64) uint64 { return (x + to - 1) / to * to }

// symmetric is one rank's symmetric memory as this rank maps it (its own or
// a peer's).
type symmetric struct {
	mem     []byte
	flags   []uint64 // 2*snac.NumSlots, peer-writable, index snac.SignalIndex
	checks  []uint64 // 2*snac.NumSlots, beside flags
	epochs  []uint64 // snac.NumEpochs, used by the owner only
	stage   []byte
	packets []uint64 // two words per packet: payload, flag word
}

// createSymmetric makes this rank's zeroed memfd.
func createSymmetric(rank int, l layout) (int, error) {
	fd, err := unix.MemfdCreate(fmt.Sprintf("purlin-host-rank%d", rank), unix.MFD_CLOEXEC)
	if err != nil {
		return -1, errs.New(errs.ErrSystem, "memfd_create for rank %d: %v", rank, err)
	}
	if err := unix.Ftruncate(fd, int64(l.size)); err != nil {
		unix.Close(fd)
		return -1, errs.New(errs.ErrSystem, "ftruncate memfd of rank %d to %d bytes: %v", rank, l.size, err)
	}
	return fd, nil
}

// mapSymmetric maps a rank's memfd (its own or a peer's) shared.
func mapSymmetric(fd int, l layout, owner int) (*symmetric, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, errs.New(errs.ErrSystem, "fstat memfd of rank %d: %v", owner, err)
	}
	if uint64(st.Size) != l.size {
		return nil, errs.New(errs.ErrInvalidUsage, "memfd of rank %d holds %d bytes, want %d: ranks disagree on the topology", owner, st.Size, l.size)
	}
	mem, err := unix.Mmap(fd, 0, int(l.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, errs.New(errs.ErrSystem, "mmap memfd of rank %d (%d bytes): %v", owner, l.size, err)
	}
	return &symmetric{
		mem:     mem,
		flags:   wordsOf(mem[l.flags:l.checks]),
		checks:  wordsOf(mem[l.checks:l.epochs]),
		epochs:  wordsOf(mem[l.epochs : l.epochs+8*snac.NumEpochs]),
		stage:   mem[l.stage : l.stage+l.stageBytes],
		packets: wordsOf(mem[l.packets : l.packets+l.packetBytes]),
	}, nil
}

func (s *symmetric) unmap() error {
	if s == nil || s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	*s = symmetric{}
	return err
}
