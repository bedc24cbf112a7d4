package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/config"
)

func TestTopologyDefaultsAndStageOverride(t *testing.T) {
	t.Setenv("PURLIN_STAGE_BYTES", "")
	config.Reload()
	t.Cleanup(func() { config.Reload() })
	for _, n := range []int{1, 2, 8} {
		for r := 0; r < n; r++ {
			top := Topology(n, r)
			require.Equal(t, n, top.NRanks)
			require.Equal(t, r, top.Rank)
			require.Equal(t, uint64(DefaultStageHalf), top.StageHalf)
			require.Equal(t, Topology(n, 0).Workers, top.Workers, "equal on every rank")
			require.LessOrEqual(t, top.PacketMax, top.StageHalf)
			require.LessOrEqual(t, top.ChunkMax, top.StageHalf)
		}
	}
	t.Setenv("PURLIN_STAGE_BYTES", "2097152")
	config.Reload()
	require.Equal(t, uint64(2<<20), Topology(2, 1).StageHalf)
}
