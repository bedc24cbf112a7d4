package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// A group with a send to and a receive from every rank (self included), as
// torch's all-to-all issues it, must merge into one Plan within MaxWorkers,
// however many workers the Atom allows a single Plan.
func TestAllPeersGroupFitsMaxWorkers(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		topo := snac.Topology{NRanks: n, Rank: 0, Workers: snac.MaxWorkers, StageHalf: 64 << 20,
			P2PHalf: 1 << 20, PacketMax: 16 << 10, ChunkMax: 1 << 20}
		var plans []*snac.Plan
		for peer := range n {
			for _, isSend := range []bool{true, false} {
				call := &spec.Call{Coll: spec.SendRecv, Count: 1 << 18, Type: spec.Float32,
					Peer: peer, IsSend: isSend, Rank: 0, NRanks: n, Send: 4096, Recv: 4096}
				p, err := snac.Build(call, topo)
				require.NoError(t, err)
				plans = append(plans, p)
			}
		}
		merged, err := snac.Merge(plans...)
		require.NoError(t, err, "%d ranks", n)
		require.LessOrEqual(t, len(merged.Workers), snac.MaxWorkers, "%d ranks", n)
	}
}
