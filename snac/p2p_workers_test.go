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

// The done rule costs a receiver nothing at the end of a transfer: worker 0
// raises FlagDone on the sender first thing (its epoch: the transfers
// before this one are done), and no worker waits for another. The sender's
// workers each wait for the done of the transfer two before theirs.
func TestDoneAtTheHeadOfTheNextTransfer(t *testing.T) {
	topo := snac.Topology{NRanks: 2, Rank: 1, Workers: 32, StageHalf: 64 << 20,
		P2PHalf: 1 << 20, PacketMax: 512 << 10, ChunkMax: 1 << 20}
	for _, count := range []uint64{2, 4 << 10, 1 << 20} { // packets on 1 and 16 workers, staged
		recv, err := snac.Build(&spec.Call{Coll: spec.SendRecv, Count: count, Type: spec.Float32, Peer: 0,
			Rank: 1, NRanks: 2, Send: uintptr(4 * count), Recv: uintptr(4 * count)}, topo)
		require.NoError(t, err)
		done := snac.FlagSlot(snac.SendChannel(1), snac.FlagDone, 1, 0)
		require.Equal(t, snac.Step{Verb: snac.Notify, Peer: 0, Slot: done, Delta: 0, Check: snac.DoneCheck},
			recv.WorkerSteps(0)[0], "count %d", count)
		for w := range recv.Workers {
			for _, s := range recv.WorkerSteps(w) {
				require.False(t, s.Verb == snac.Wait && snac.SlotKind(s.Slot) == snac.FlagDone,
					"count %d: receiver worker %d waits for a done flag", count, w)
			}
		}
		topo.Rank = 0
		send, err := snac.Build(&spec.Call{Coll: spec.SendRecv, Count: count, Type: spec.Float32, Peer: 1, IsSend: true,
			Rank: 0, NRanks: 2, Send: uintptr(4 * count), Recv: uintptr(4 * count)}, topo)
		require.NoError(t, err)
		for w := range send.Workers {
			require.Equal(t, snac.Step{Verb: snac.Wait, Slot: done, Delta: snac.DoneDelta, Check: snac.DoneCheck},
				send.WorkerSteps(w)[0], "count %d sender worker %d", count, w)
		}
		topo.Rank = 1
	}
}
