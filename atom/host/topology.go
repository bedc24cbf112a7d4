package host

import (
	"purlin/config"
	"purlin/snac"
)

// The host Atom's default topology. Every value must be equal on every rank
// (SNAC derives its regimes from them), which is why PURLIN_HOST_WORKERS
// and the size settings (config.Settings.Sizes) must be set alike on all ranks.
const (
	// DefaultStageHalf is one half of the collective staging area
	// (PURLIN_STAGE_BYTES overrides it).
	DefaultStageHalf = 8 << 20
	// DefaultP2PHalf is one half of one peer's point-to-point area
	// (PURLIN_P2P_BYTES overrides it).
	DefaultP2PHalf = 1 << 20
	// DefaultPacketMax is the largest payload per rank sent as 16-byte packets.
	DefaultPacketMax = 16 << 10
	// DefaultChunkMax bounds one worker's chunk in the chunked and ring regimes.
	DefaultChunkMax = 1 << 20
)

// Topology is the host Atom's topology for rank of nranks: PURLIN_HOST_WORKERS
// goroutines per Plan and the default sizes, PURLIN_STAGE_BYTES,
// PURLIN_P2P_BYTES, PURLIN_PACKET_BYTES and PURLIN_CHUNK_BYTES replacing
// them when set; a
// communicator's Config may override the rest.
func Topology(nranks, rank int) snac.Topology {
	s := config.Get()
	t := snac.Topology{NRanks: nranks, Rank: rank, Workers: s.HostWorkers, StageHalf: DefaultStageHalf,
		P2PHalf: DefaultP2PHalf, PacketMax: DefaultPacketMax, ChunkMax: DefaultChunkMax}
	s.Sizes(&t.StageHalf, &t.P2PHalf, &t.PacketMax, &t.ChunkMax)
	// The host Atom runs a copy-engine Plan's workers as any others: the
	// Plans, their merges and comm's handling of them are checked without
	// a GPU.
	return t.WithEngine(s.CopyEngine, s.CopyEngineWorkers, s.CopyEngineChunk)
}
