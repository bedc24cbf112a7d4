package snac

// The shared state every rank allocates, identically sized on all ranks, and
// how Plans address it. An Atom allocates, per rank:
//
//	staging  Topology.StageBytes()   bytes, peer-writable (SpaceStage)
//	packets  Topology.PacketBytes()  bytes, peer-writable (SpacePacket)
//	flags    2*NumSlots uint64, peer-writable, zeroed once at init
//	checks   2*NumSlots uint64, peer-writable
//	epochs   NumEpochs uint64, local, zeroed once at init
//
// A flag slot is a pair of flags, each with its check word (both at
// SignalIndex): a Notify of value v (epoch+Delta) writes the pair of v's
// call parity, and a Wait for target t reads the pair of t's. Each flag is a
// monotonic counter (nothing is cleared between calls, every wait is ">="),
// and a check word always belongs to the call of its flag's value, because a
// peer one call ahead writes the other pair. So a Wait is met only by a
// Notify of its own call parity, and an Atom may store a flag and its check
// word together (one store, no ordering between two).

// Channels: one epoch space each. The collective channel serves every
// collective; each ordered pair of ranks has a send and a receive channel for
// point-to-point transfers, so a Send to one peer never waits for another.
const (
	Collective  = 0
	NumChannels = 1 + 2*MaxRanks
)

// SendChannel is this rank's channel for transfers to peer.
func SendChannel(peer int) uint16 { return uint16(1 + peer) }

// RecvChannel is this rank's channel for transfers from peer.
func RecvChannel(peer int) uint16 { return uint16(1 + MaxRanks + peer) }

// receiving reports whether ch is a receive channel (RecvChannel).
func receiving(ch uint16) bool { return ch > MaxRanks && ch < NumChannels }

// Flag kinds. A flag slot is owned by the rank it lives on and written by
// one remote (src, worker) pair only.
const (
	FlagReady    = iota // a chunk is staged (Stage -> Notify)
	FlagReduced         // a reduced shard is staged for gathering (AllReduce's second phase)
	FlagConsumed        // a ring slot was consumed (drain signal to the producer)
	FlagDone            // the source finished the call (lets a producer reuse a staging half)
	FlagAgree           // the source's check word of a rooted call, before anything depends on the root
	FlagGathered        // a gathered chunk was copied out (drain signal of an AllReduce's second phase on the copy engine)
	FlagJoined          // the source (this rank) finished a call of a merged chain on every worker (Merge's join)
	numFlagKinds
)

// NumSlots is the number of flag slots per rank.
const NumSlots = NumChannels * numFlagKinds * MaxRanks * MaxWorkers

// FlagSlot is the slot on the owning rank that src's worker raises.
func FlagSlot(channel uint16, kind int, src, worker int) uint32 {
	return uint32(((int(channel)*numFlagKinds+kind)*MaxRanks+src)*MaxWorkers + worker)
}

// SlotKind is a flag slot's kind: FlagSlot's kind.
func SlotKind(slot uint32) int { return int(slot/(MaxRanks*MaxWorkers)) % numFlagKinds }

// SlotSource is the rank that raises a flag slot: FlagSlot's src.
func SlotSource(slot uint32) int { return int(slot/MaxWorkers) % MaxRanks }

// SignalIndex is the index of the flag and check word that a Notify of value
// v, or a Wait for target v, uses in slot: one per parity of v's call
// (v / EpochAdvance), so that the check word beside a flag is always of the
// flag's call.
func SignalIndex(slot uint32, v uint64) uint64 { return 2*uint64(slot) + (v/EpochAdvance)&1 }

// NumEpochs is the number of epoch words per rank.
const NumEpochs = NumChannels * MaxWorkers

// EpochSlot is the index of a worker's epoch.
func EpochSlot(channel uint16, worker uint16) int {
	return int(channel)*MaxWorkers + int(worker)
}

// Topology is what SNAC knows of the communicator and the Atom: everything a
// Plan depends on besides the call. Every field must be equal on all ranks
// except Rank.
type Topology struct {
	NRanks int
	Rank   int
	// Workers is the most workers a Plan may use (GPU: thread blocks).
	Workers int
	// LaunchWorkers is the most workers one launch may use, a group's
	// merged Plan of sends and receives among them (0: MaxWorkers): fewer
	// where ranks share a GPU, whose kernels must all fit on its SMs at once.
	LaunchWorkers int
	// StageHalf is the bytes of one half of the collective staging area.
	StageHalf uint64
	// P2PHalf is the bytes of one half of one point-to-point area (one per peer).
	P2PHalf uint64
	// PacketMax is the largest payload per rank sent as packets; a packet
	// window per source rank holds it, in each half.
	PacketMax uint64
	// ChunkMax bounds a chunk per worker in the chunked and ring regimes.
	ChunkMax uint64
	// EngineMin is the shortest transfer that a collective moves with the
	// Atom's copy engine: its Plan's data workers are EngineCopy
	// (engine.go). 0: the Atom has none, or it is off. EngineWorkers and
	// EngineChunk are such a Plan's data workers (copy-engine queues) and
	// its chunk bound. WithEngine sets all three.
	EngineMin     uint64
	EngineWorkers int
	EngineChunk   uint64
	// Direct says that the call's output lies, on every rank, at the same
	// offset of a window every rank registered (ncclCommWindowRegister),
	// which this rank's Atom reaches on each (SpacePeerRecv): a collective
	// of copies then pushes its staged transfers straight into their
	// consumers' outputs (direct.go). It is a property of one call's
	// buffers, so ranks must agree on it as on the call itself.
	Direct bool
}

// launchWorkers is t.LaunchWorkers, MaxWorkers where unset or above it.
func (t Topology) launchWorkers() int {
	if t.LaunchWorkers <= 0 {
		return MaxWorkers
	}
	return min(t.LaunchWorkers, MaxWorkers)
}

// MaxEngineWorkers bounds Topology.EngineWorkers.
const MaxEngineWorkers = 7

// WithEngine is t with its copy engine serving transfers from `from` bytes
// on (0: off), never below the packets' sizes, with workers copy-engine
// workers a call (1 to MaxEngineWorkers) in chunks of at most chunk bytes.
// Set PacketMax first.
func (t Topology) WithEngine(from uint64, workers int, chunk uint64) Topology {
	if from == 0 {
		t.EngineMin, t.EngineWorkers, t.EngineChunk = 0, 0, 0
		return t
	}
	t.EngineMin = max(from, t.PacketMax+1)
	t.EngineWorkers = min(max(workers, 1), MaxEngineWorkers)
	t.EngineChunk = max(chunk, unit)
	return t
}

// StageBytes is the size of one rank's staging buffer:
// [collective half 0 | half 1][p2p area for peer 0: half 0 | half 1]...
func (t Topology) StageBytes() uint64 { return 2*t.StageHalf + uint64(t.NRanks)*2*t.P2PHalf }

// P2PStageOff is where this rank's p2p staging area for transfers from peer
// starts (the peer pushes into it).
func (t Topology) P2PStageOff(peer int) uint64 { return 2*t.StageHalf + uint64(peer)*2*t.P2PHalf }

// PacketWindow is the packet-buffer bytes of one source's window in one half.
func (t Topology) PacketWindow() uint64 { return 2 * roundUp(t.PacketMax, 8) }

// PacketBytes is the size of one rank's packet buffer:
// [collective: half 0: window per source | half 1: ...][p2p: per source: half 0 | half 1].
func (t Topology) PacketBytes() uint64 {
	return 2*uint64(t.NRanks)*t.PacketWindow() + uint64(t.NRanks)*2*t.PacketWindow()
}

// PacketOff is where src's collective window starts in a rank's packet buffer (half 0).
func (t Topology) PacketOff(src int) uint64 { return uint64(src) * t.PacketWindow() }

// PacketHalf is the distance between the two halves of the collective packet windows.
func (t Topology) PacketHalf() uint64 { return uint64(t.NRanks) * t.PacketWindow() }

// P2PPacketOff is where src's point-to-point window starts in a rank's packet buffer (half 0);
// the other half follows it at PacketWindow().
func (t Topology) P2PPacketOff(src int) uint64 {
	return 2*uint64(t.NRanks)*t.PacketWindow() + uint64(src)*2*t.PacketWindow()
}

// PacketSource is the rank that writes the packet window a packet Ref's Off
// (in half 0, as PacketOff and P2PPacketOff give it) points into.
func (t Topology) PacketSource(off uint64) int {
	w := t.PacketWindow()
	switch {
	case w == 0:
		return -1
	case off < uint64(t.NRanks)*w:
		return int(off / w)
	}
	return int((off - 2*uint64(t.NRanks)*w) / (2 * w))
}

func roundUp(x, to uint64) uint64 { return (x + to - 1) / to * to }
