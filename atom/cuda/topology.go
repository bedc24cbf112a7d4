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
	DefaultWorkers = 32
	// DefaultStageHalf is one half of the collective staging area (the
	// large regimes move through it; PURLIN_STAGE_BYTES overrides it).
	DefaultStageHalf = 64 << 20
	// DefaultP2PHalf is one half of one peer's point-to-point area
	// (PURLIN_P2P_BYTES overrides it).
	DefaultP2PHalf = 1 << 20
	// DefaultPacketMax is the largest payload per rank sent as 16-byte
	// packets (latency-bound sizes: one store carries data and flag;
	// PURLIN_PACKET_BYTES overrides it).
	DefaultPacketMax = 16 << 10
	// DefaultChunkMax bounds one worker's chunk in the chunked and ring
	// regimes (PURLIN_CHUNK_BYTES overrides it).
	DefaultChunkMax = 1 << 20
)

// Topology is the CUDA Atom's topology for rank of nranks: its workers
// (thread blocks) and staging sizes. PURLIN_MAX_CTAS (or NCCL_MAX_CTAS)
// replaces the workers, PURLIN_STAGE_BYTES, PURLIN_P2P_BYTES,
// PURLIN_PACKET_BYTES and PURLIN_CHUNK_BYTES the sizes, when set; a communicator's Config may
// override the rest.
func Topology(nranks, rank int) snac.Topology {
	t := snac.Topology{NRanks: nranks, Rank: rank, Workers: DefaultWorkers, StageHalf: DefaultStageHalf,
		P2PHalf: DefaultP2PHalf, PacketMax: DefaultPacketMax, ChunkMax: DefaultChunkMax}
	s := config.Get()
	if s.MaxCTAs > 0 {
		t.Workers = min(s.MaxCTAs, snac.MaxWorkers)
	}
	s.Sizes(&t.StageHalf, &t.P2PHalf, &t.PacketMax, &t.ChunkMax)
	return t
}
