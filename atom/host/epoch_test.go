package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
)

// pingPlan: each of k workers of the collective channel notifies its twin
// on the peer rank and waits for it, so the call only completes when both
// ranks agree on every worker's epoch.
func pingPlan(me, k int) *snac.Plan {
	var b planBuilder
	peer := 1 - me
	for w := range k {
		b.worker(snac.Collective, uint16(w),
			notifyStep(peer, snac.FlagSlot(snac.Collective, snac.FlagReady, me, w), 1, 5),
			waitStep(snac.FlagSlot(snac.Collective, snac.FlagReady, peer, w), 1, 5))
	}
	b.p.NRanks = 2
	return &b.p
}

// A Plan with fewer workers advances the slots it leaves unused too, so a
// later Plan with more workers finds equal epochs on every rank and in
// every slot; a wrong rule would make the last call time out or pass early.
func TestEpochRuleAcrossWorkerCounts(t *testing.T) {
	ranks := newRanks(t, 2, 5*time.Second)
	for call, k := range []int{3, 1, 4, 2, 4} {
		for r, rk := range ranks {
			require.NoError(t, rk.Launch(pingPlan(r, k), []atom.Buffers{}, 0))
		}
		for _, err := range syncAll(ranks) {
			require.NoError(t, err, "call %d with %d workers", call, k)
		}
		for r, rk := range ranks {
			epochs := rk.syms[r].epochs
			want := uint64(call+1) * snac.EpochAdvance
			for w := range snac.MaxWorkers {
				require.Equal(t, want, epochs[snac.EpochSlot(snac.Collective, uint16(w))], "rank %d slot %d after call %d", r, w, call)
			}
			require.Zero(t, epochs[snac.EpochSlot(snac.SendChannel(0), 0)], "other channels keep their epochs")
		}
	}
}

// Advance steps run the calls a Plan chains at the epochs separate launches
// would have: rank 0 runs three calls merged into one Plan (workers of the
// shorter calls only advance), rank 1 launches them one by one, and every
// call meets its twin. Without Advance the merged calls would all run at
// the first call's epoch and rank 1's later calls would time out.
func TestAdvanceMatchesSeparateLaunches(t *testing.T) {
	ranks := newRanks(t, 2, 5*time.Second)
	counts := []int{3, 1, 4}
	for round := range 2 {
		var parts []*snac.Plan
		for _, k := range counts {
			parts = append(parts, pingPlan(0, k))
		}
		merged, err := snac.Merge(parts...)
		require.NoError(t, err)
		require.NoError(t, ranks[0].Launch(merged, []atom.Buffers{}, 0))
		for _, k := range counts {
			require.NoError(t, ranks[1].Launch(pingPlan(1, k), []atom.Buffers{}, 0))
		}
		for _, err := range syncAll(ranks) {
			require.NoError(t, err, "round %d", round)
		}
		for r, rk := range ranks {
			want := uint64((round+1)*len(counts)) * snac.EpochAdvance
			for w := range snac.MaxWorkers {
				require.Equal(t, want, rk.syms[r].epochs[snac.EpochSlot(snac.Collective, uint16(w))], "rank %d slot %d after round %d", r, w, round)
			}
		}
	}
}
