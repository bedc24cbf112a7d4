package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/config"
	"purlin/snac"
)

// TestDefaultShares: the packet and point-to-point sizes shrink as ranks
// grow, so one rank's buffers stay bounded, within their clamps.
func TestDefaultShares(t *testing.T) {
	for _, c := range []struct {
		n           int
		packet, p2p uint64
	}{
		{1, 1 << 20, 32 << 20}, {2, 1 << 20, 32 << 20}, {3, 680 << 10, 21844 << 10},
		{4, 512 << 10, 16 << 20}, {8, 256 << 10, 8 << 20}, {64, 32 << 10, 1 << 20},
	} {
		require.Equal(t, c.packet, DefaultPacketMax(c.n), "packet, %d ranks", c.n)
		require.Equal(t, c.p2p, DefaultP2PHalf(c.n), "p2p, %d ranks", c.n)
		require.Zero(t, DefaultP2PHalf(c.n)%16, "a whole number of vectors")
	}
}

// TestTopologyDefaultsAndOverrides: the defaults, equal on every rank;
// PURLIN_STAGE_BYTES, PURLIN_P2P_BYTES, PURLIN_PACKET_BYTES and
// PURLIN_CHUNK_BYTES replace the sizes, PURLIN_MAX_CTAS (else NCCL_MAX_CTAS, as NCCL users set it) the
// thread blocks, up to snac.MaxWorkers.
func TestTopologyDefaultsAndOverrides(t *testing.T) {
	t.Cleanup(func() { config.Reload() }) // after Setenv's restores
	for _, v := range []string{"PURLIN_STAGE_BYTES", "PURLIN_P2P_BYTES", "PURLIN_PACKET_BYTES", "PURLIN_CHUNK_BYTES", "PURLIN_MAX_CTAS", "NCCL_MAX_CTAS"} {
		t.Setenv(v, "")
	}
	config.Reload()
	for _, n := range []int{1, 2, 8} {
		for r := 0; r < n; r++ {
			top := Topology(n, r)
			require.Equal(t, n, top.NRanks)
			require.Equal(t, r, top.Rank)
			require.Equal(t, uint64(DefaultStageHalf), top.StageHalf)
			require.Equal(t, DefaultP2PHalf(n), top.P2PHalf)
			require.Equal(t, DefaultWorkers, top.Workers)
			require.Equal(t, DefaultPacketMax(n), top.PacketMax)
			require.Equal(t, uint64(DefaultChunkMax), top.ChunkMax)
			require.Equal(t, Topology(n, 0).Workers, top.Workers, "equal on every rank")
			require.LessOrEqual(t, top.PacketMax, top.StageHalf)
			require.LessOrEqual(t, top.ChunkMax, top.StageHalf)
		}
	}
	t.Setenv("PURLIN_STAGE_BYTES", "2097152")
	t.Setenv("PURLIN_P2P_BYTES", "8388608")
	t.Setenv("PURLIN_PACKET_BYTES", "65536")
	t.Setenv("PURLIN_CHUNK_BYTES", "262144")
	t.Setenv("NCCL_MAX_CTAS", "16")
	config.Reload()
	top := Topology(2, 1)
	require.Equal(t, uint64(2<<20), top.StageHalf)
	require.Equal(t, uint64(8<<20), top.P2PHalf)
	require.Equal(t, uint64(64<<10), top.PacketMax)
	require.Equal(t, uint64(256<<10), top.ChunkMax)
	require.Equal(t, 16, top.Workers, "NCCL_MAX_CTAS")
	t.Setenv("PURLIN_MAX_CTAS", "1000")
	config.Reload()
	require.Equal(t, snac.MaxWorkers, Topology(2, 1).Workers, "PURLIN_MAX_CTAS first, at most snac.MaxWorkers")
}
