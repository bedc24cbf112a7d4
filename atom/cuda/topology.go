package cuda

import (
	"purlin/config"
	"purlin/snac"
)

// The CUDA Atom's default topology. Every value must be equal on every rank
// (SNAC derives its regimes from them), so none depends on the device:
// identical GPUs are the norm in one NVLink server, but a constant is safe
// even where they are not.
const (
	// DefaultWorkers is the most thread blocks one Plan uses per rank
	// (PURLIN_MAX_CTAS or NCCL_MAX_CTAS overrides it, up to snac.MaxWorkers).
	// Large calls need many: on 2x H200, AllReduce of 1 GiB moved 347 GB/s
	// with 64 blocks and 301 with 32. Half of snac.MaxWorkers, so a
	// collective merges with a group's sends and receives between two ranks.
	DefaultWorkers = snac.MaxWorkers / 2
	// DefaultStageHalf is one half of the collective staging area (the
	// large regimes move through it; PURLIN_STAGE_BYTES overrides it).
	DefaultStageHalf = 64 << 20
	// p2pBudget is one half of the point-to-point areas of all peers
	// together: DefaultP2PHalf gives each peer its share.
	p2pBudget = 64 << 20
	// packetBudget is the packet payload of all ranks together:
	// DefaultPacketMax gives each rank its share.
	packetBudget = 2 << 20
	// DefaultChunkMax bounds one worker's chunk in the chunked and ring
	// regimes (PURLIN_CHUNK_BYTES overrides it). With 64 workers, 512 KiB
	// leaves each two slots of a staging half, so a producer fills one
	// while its consumer drains the other: on 2x H200, Reduce of 1 GiB
	// moved 366 GB/s, against 327 with 1 MiB chunks in one slot.
	DefaultChunkMax = 512 << 10
)

// Topology is the CUDA Atom's topology for rank of nranks: its workers
// (thread blocks) and staging sizes. PURLIN_MAX_CTAS (or NCCL_MAX_CTAS)
// replaces the workers, PURLIN_STAGE_BYTES, PURLIN_P2P_BYTES,
// PURLIN_PACKET_BYTES and PURLIN_CHUNK_BYTES the sizes, and
// PURLIN_COPY_ENGINE turns on the copy engine, when set; a communicator's
// Config may override the rest.
func Topology(nranks, rank int) snac.Topology {
	t := snac.Topology{NRanks: nranks, Rank: rank, Workers: DefaultWorkers, StageHalf: DefaultStageHalf,
		P2PHalf: DefaultP2PHalf(nranks), PacketMax: DefaultPacketMax(nranks), ChunkMax: DefaultChunkMax}
	s := config.Get()
	if s.MaxCTAs > 0 {
		t.Workers = min(s.MaxCTAs, snac.MaxWorkers)
	}
	s.Sizes(&t.StageHalf, &t.P2PHalf, &t.PacketMax, &t.ChunkMax)
	return t.WithEngine(s.CopyEngine, s.CopyEngineWorkers, s.CopyEngineChunk) // engine.go
}

// DefaultP2PHalf is one half of one peer's point-to-point area
// (PURLIN_P2P_BYTES overrides it): 64 MiB shared among the ranks, from
// 1 MiB to 32 MiB a peer. A send moves through the peer's area in one chunk
// per thread block and two halves; at 1 MiB (32 KiB a block) it ran at a
// third of NVLink's bandwidth on 2x H200, at 32 MiB near NCCL's.
func DefaultP2PHalf(nranks int) uint64 { return share(p2pBudget, nranks, 1<<20, 32<<20) }

// DefaultPacketMax is the largest payload per rank sent as 16-byte packets
// (latency-bound sizes: one store carries data and flag, no flag round
// trip; PURLIN_PACKET_BYTES overrides it): 2 MiB shared among the ranks,
// from 16 KiB to 1 MiB a rank, so one rank's packet buffer (8 windows a
// rank) is 16 MiB at any size of communicator. AllReduce and SendRecv use
// it whole, the other collectives half (snac's packetLimit): on 2x H200
// packets beat staging up to 1 MiB for the first two (AllReduce of 1 MiB:
// 11.6 us as packets, 13.6 staged) and up to 512 KiB for the rest.
func DefaultPacketMax(nranks int) uint64 { return share(packetBudget, nranks, 16<<10, 1<<20) }

// share is budget/nranks, rounded down to 4 KiB and clamped to [lo, hi].
func share(budget uint64, nranks int, lo, hi uint64) uint64 {
	s := budget / uint64(max(nranks, 1)) &^ (4<<10 - 1)
	return min(max(s, lo), hi)
}
