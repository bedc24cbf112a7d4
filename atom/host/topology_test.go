package host

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/config"
	"purlin/snac"
	"purlin/spec"
)

// TestTopologyDefaultsAndOverrides: the defaults serve every rank count,
// equal on every rank; PURLIN_HOST_WORKERS replaces the workers, and
// PURLIN_STAGE_BYTES, PURLIN_P2P_BYTES, PURLIN_PACKET_BYTES and
// PURLIN_CHUNK_BYTES the sizes.
func TestTopologyDefaultsAndOverrides(t *testing.T) {
	t.Cleanup(func() { config.Reload() }) // after Setenv's restores
	for _, v := range []string{"PURLIN_STAGE_BYTES", "PURLIN_P2P_BYTES", "PURLIN_PACKET_BYTES", "PURLIN_CHUNK_BYTES", "PURLIN_HOST_WORKERS"} {
		t.Setenv(v, "")
	}
	config.Reload()
	for _, n := range []int{1, 2, 8} {
		for r := range n {
			top := Topology(n, r)
			require.Equal(t, n, top.NRanks)
			require.Equal(t, r, top.Rank)
			require.Equal(t, uint64(DefaultStageHalf), top.StageHalf)
			require.Equal(t, 4, top.Workers, "PURLIN_HOST_WORKERS' default")
			require.Equal(t, Topology(n, 0), snac.Topology{NRanks: n, Rank: 0, Workers: top.Workers,
				StageHalf: top.StageHalf, P2PHalf: top.P2PHalf, PacketMax: top.PacketMax, ChunkMax: top.ChunkMax}, "equal on every rank but Rank")
			call := spec.Call{Coll: spec.AllReduce, Count: 1 << 20, Type: spec.Float32, Rank: r, NRanks: n}
			_, err := snac.Build(&call, top)
			require.NoError(t, err, "%d ranks", n)
		}
	}
	t.Setenv("PURLIN_STAGE_BYTES", "2097152")
	t.Setenv("PURLIN_HOST_WORKERS", "2")
	t.Setenv("PURLIN_P2P_BYTES", "262144")
	t.Setenv("PURLIN_PACKET_BYTES", "4096")
	t.Setenv("PURLIN_CHUNK_BYTES", "65536")
	config.Reload()
	top := Topology(2, 1)
	require.Equal(t, uint64(2<<20), top.StageHalf)
	require.Equal(t, uint64(256<<10), top.P2PHalf)
	require.Equal(t, 2, top.Workers)
	require.Equal(t, uint64(4<<10), top.PacketMax)
	require.Equal(t, uint64(64<<10), top.ChunkMax)
}
