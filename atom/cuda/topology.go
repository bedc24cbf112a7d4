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
	// DefaultWorkers is the most thread blocks one Plan uses per rank.
	DefaultWorkers = 32
	// DefaultStageHalf is one half of the collective staging area (the
	// large regimes move through it; PURLIN_STAGE_BYTES overrides it).
	DefaultStageHalf = 64 << 20
	// DefaultP2PHalf is one half of one peer's point-to-point area.
	DefaultP2PHalf = 1 << 20
	// DefaultPacketMax is the largest payload per rank sent as 16-byte
	// packets (latency-bound sizes: one store carries data and flag).
	DefaultPacketMax = 16 << 10
	// DefaultChunkMax bounds one worker's chunk in the chunked and ring regimes.
	DefaultChunkMax = 1 << 20
)

// Topology is the CUDA Atom's topology for rank of nranks: its workers
// (thread blocks) and staging sizes. PURLIN_STAGE_BYTES, when set, replaces
// the staging half; a communicator's Config may override the rest.
func Topology(nranks, rank int) snac.Topology {
	t := snac.Topology{NRanks: nranks, Rank: rank, Workers: DefaultWorkers, StageHalf: DefaultStageHalf,
		P2PHalf: DefaultP2PHalf, PacketMax: DefaultPacketMax, ChunkMax: DefaultChunkMax}
	if s := config.Get().StageBytes; s > 0 {
		t.StageHalf = s
	}
	return t
}
