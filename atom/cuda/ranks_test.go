package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// The GPU tests may run on as few as 2 GPUs. These pure-Go
// checks hold the CUDA Atom to what the kernel relies on at every rank count
// up to snac.MaxRanks, with its real topology: memory sizes, the per-rank
// tables, and every Ref, slot and peer of the Plans it would run.

// TestLayoutAtEveryRankCount: the symmetric memory's regions are aligned, disjoint,
// large enough for what SNAC addresses, equal on every rank, and at 8 ranks
// still a modest share of a GPU (2*StageHalf + 8*2*P2PHalf of staging).
func TestLayoutAtEveryRankCount(t *testing.T) {
	for n := 1; n <= snac.MaxRanks; n++ {
		topo := Topology(n, 0)
		w := newLayout(topo)
		for r := 1; r < n; r++ {
			require.Equal(t, w, newLayout(Topology(n, r)), "n=%d: rank %d's layout differs from rank 0's", n, r)
		}
		starts := []uint64{w.stage, w.packet, w.flags, uint64(w.size)}
		needs := []uint64{topo.StageBytes(), topo.PacketBytes(), snac.NumSlots * 2 * 16}
		for i, need := range needs {
			require.Zero(t, starts[i]%4096, "n=%d region %d unaligned", n, i)
			require.GreaterOrEqual(t, starts[i+1]-starts[i], need, "n=%d region %d too small", n, i)
		}
		if n == snac.MaxRanks {
			stage := 2*DefaultStageHalf + snac.MaxRanks*2*DefaultP2PHalf(n)
			require.Equal(t, stage, topo.StageBytes())
			require.Less(t, uint64(w.size), stage+32<<20, "8 ranks: %d MiB a rank", w.size>>20) // packets 16 MiB, flags ~1.4
			t.Logf("symmetric memory at %d ranks: %d MiB (staging %d MiB, packets %d KiB, flags %d KiB)",
				n, w.size>>20, topo.StageBytes()>>20, topo.PacketBytes()>>10, (uint64(w.size)-w.flags)>>10)
		}
	}
}

// TestPeersOfEveryRankCount: the kernel's peer table names every rank of
// the communicator and nothing past it (a Ref beyond it resolves to 0, which
// the kernel reports as a bad Ref instead of writing anywhere).
func TestPeersOfEveryRankCount(t *testing.T) {
	for n := 1; n <= snac.MaxRanks; n++ {
		w := newLayout(Topology(n, 0))
		var s symmetric
		for r := 0; r < n; r++ {
			s.base[r] = uint64(r+1) << 32
		}
		p := s.peersOf(w, n)
		for r := 0; r < snac.MaxRanks; r++ {
			if r >= n {
				require.Zero(t, p.Stage[r]|p.Packet[r]|p.Flags[r], "n=%d: rank %d past the communicator", n, r)
				continue
			}
			b := s.base[r]
			require.Equal(t, []uint64{b + w.stage, b + w.packet, b + w.flags},
				[]uint64{p.Stage[r], p.Packet[r], p.Flags[r]}, "n=%d rank %d", n, r)
		}
	}
}

// oneCall is rank's float32 sum call of coll, about perRank bytes a rank.
func oneCall(coll spec.Collective, n, rank int, perRank uint64) *spec.Call {
	return typedCall(coll, spec.Float32, spec.Op{Kind: spec.Sum}, n, rank, perRank)
}

// typedCall is rank's call of coll moving about perRank bytes a rank (V
// forms: equal counts, packed), rooted at n/2.
func typedCall(coll spec.Collective, typ spec.DataType, op spec.Op, n, rank int, perRank uint64) *spec.Call {
	size := uint64(typ.Size())
	c := &spec.Call{Coll: coll, Type: typ, Op: op, Count: perRank / size,
		Rank: rank, NRanks: n, Root: n / 2, Send: 1 << 40, Recv: 2 << 40}
	if coll == spec.AllReduce || coll == spec.Broadcast || coll == spec.Reduce {
		c.Count = perRank * uint64(n) / size
	}
	counts, displs := make([]uint64, n), make([]uint64, n)
	for q := range n {
		counts[q], displs[q] = c.Count, uint64(q)*c.Count
	}
	switch coll {
	case spec.AllGatherV, spec.ReduceScatterV:
		c.Counts, c.Displs = counts, displs
	case spec.AllToAllV:
		c.SendCounts, c.SendDispls, c.RecvCounts, c.RecvDispls = counts, displs, counts, displs
	}
	return c
}

// refEnd is the last byte after a Ref of a step moving bytes, in the worse
// epoch parity; packet space counts 16 bytes per 8 payload bytes.
func refEnd(r snac.Ref, bytes uint64) uint64 {
	if r.Space == snac.SpacePacket {
		bytes = (bytes + 7) / 8 * 16
	}
	return r.Off + r.Half + bytes
}

// planFits checks every Ref, peer and slot of plan against the window of
// topo and the call's buffers: what the kernel dereferences unchecked. It
// returns the first problem (plain comparisons: plans reach 30000 steps).
func planFits(plan *snac.Plan, topo snac.Topology, c *spec.Call) error {
	in, out := c.Extents()
	limit := [snac.NumSpaces]uint64{snac.SpaceSend: in, snac.SpaceRecv: out,
		snac.SpaceStage: topo.StageBytes(), snac.SpacePacket: topo.PacketBytes()}
	n := topo.NRanks
	plan, err := plan.Unrolled() // every step as it runs: a loop's body in each repetition
	if err != nil {
		return err
	}
	for i := range plan.Steps {
		s := &plan.Steps[i]
		bad := func(what string, args ...any) error {
			return fmt.Errorf("%s step %d (%s): %s", c, i, s.Verb, fmt.Sprintf(what, args...))
		}
		switch s.Verb {
		case snac.Notify, snac.Wait:
			if s.Slot >= snac.NumSlots || int(s.Slot/snac.MaxWorkers)%snac.MaxRanks >= n {
				return bad("slot %d is past the communicator's", s.Slot)
			}
			if s.Verb == snac.Notify && int(s.Peer) >= n {
				return bad("notifies rank %d", s.Peer)
			}
			continue
		}
		for j := -1; j < max(int(s.NSrc), 1); j++ {
			r := s.Dst
			if j >= 0 {
				r = s.Src[j]
			}
			if r.Space >= snac.NumSpaces {
				return bad("space %d", r.Space)
			}
			if (r.Space == snac.SpaceSend || r.Space == snac.SpaceRecv) && r.Rank != 0 {
				return bad("buffer %d of a one-call Plan", r.Rank)
			}
			if (r.Space == snac.SpaceStage || r.Space == snac.SpacePacket) && int(r.Rank) >= n {
				return bad("rank %d's space %d", r.Rank, r.Space)
			}
			if end := refEnd(r, s.Bytes); end > limit[r.Space] {
				return bad("ends at %d in space %d of %d bytes", end, r.Space, limit[r.Space])
			}
		}
	}
	for _, w := range plan.Workers {
		if snac.EpochSlot(w.Channel, w.Index) >= snac.NumEpochs {
			return fmt.Errorf("%s: worker epoch slot (%d,%d) out of range", c, w.Channel, w.Index)
		}
	}
	return nil
}

// TestPlansFitTheKernelAtEveryRankCount builds, with the CUDA Atom's
// topology, every collective from 8 B to 1 GiB a rank at 3, 4 and 8 ranks,
// and checks that the kernel could run it: workers and sources within the
// kernel's limits (planBytes), every address inside its window or buffer.
func TestPlansFitTheKernelAtEveryRankCount(t *testing.T) {
	sizes := []uint64{8, 1000, 16 << 10, 200 << 10, 4 << 20, 64 << 20, 1 << 30}
	ranks := func(n int) []int { return []int{0, n / 2, n - 1} }
	if testing.Short() || raceEnabled { // the largest Plans take seconds to build under -race
		sizes = sizes[:len(sizes)-1]
		ranks = func(n int) []int { return []int{n - 1} }
	}
	for _, n := range []int{3, 4, snac.MaxRanks} {
		for coll := spec.Collective(0); coll < spec.SendRecv; coll++ {
			for _, perRank := range sizes {
				for _, rank := range ranks(n) {
					c := oneCall(coll, n, rank, perRank)
					require.NoError(t, c.Validate(), "%s", c)
					topo := Topology(n, rank)
					plan, err := snac.Build(c, topo)
					require.NoError(t, err, "%s", c)
					_, err = planBytes(plan)
					require.NoError(t, err, "%s", c)
					require.NoError(t, planFits(plan, topo, c))
				}
			}
		}
	}
}

// TestUnreachablePairIsFound: in one process every rank addresses every
// other rank's window directly, so one pair without peer access must be
// refused at setup (by every rank alike), not fault in the kernel.
func TestUnreachablePairIsFound(t *testing.T) {
	island := func(from, to int) bool { return from/4 == to/4 } // devices 0-3 and 4-7
	pair := func(devices []int, can func(int, int) bool) []int {
		a, b := unreachablePair(devices, can)
		return []int{a, b}
	}
	require.Equal(t, []int{-1, -1}, pair([]int{0, 1, 2, 3}, island))
	require.Equal(t, []int{0, 4}, pair([]int{0, 1, 2, 3, 4, 5, 6, 7}, island))
	require.Equal(t, []int{0, 2}, pair([]int{5, 6, 2}, island), "ranks need not sit on devices in order")
	require.Equal(t, []int{-1, -1}, pair([]int{3, 3, 3}, func(int, int) bool { return false }), "ranks sharing a device")
	oneWay := func(from, to int) bool { return from < to }
	require.Equal(t, []int{1, 0}, pair([]int{0, 1}, oneWay), "access is checked in both directions")
}

// TestCrowdCountsSharers: the most ranks on one device, wherever they lie
// in rank order; every rank computes it from the same list.
func TestCrowdCountsSharers(t *testing.T) {
	for _, tc := range []struct {
		devices []int
		want    int
	}{
		{[]int{0, 1}, 1},
		{[]int{0, 0, 0, 0}, 4},
		{[]int{0, 1, 0, 1, 0, 1, 0, 1}, 4},
		{[]int{2, 5, 5}, 2},
		{[]int{3, 0, 3, 1, 3}, 3},
	} {
		require.Equal(t, tc.want, crowd(tc.devices), "%v", tc.devices)
	}
}

// TestSharedDeviceTurnsOffPDL: a communicator that puts two ranks on a
// device marks it, and then no rank on it launches with programmatic
// dependent launch, also one alone on it in its own communicator (a split
// of one rank), made before the marking or after; other devices keep it.
func TestSharedDeviceTurnsOffPDL(t *testing.T) {
	const a, b, c = 61, 62, 63 // devices no GPU test of this binary uses
	t.Cleanup(func() {
		for _, d := range []int{a, b, c} {
			sharedDevices[d].Store(0)
		}
	})
	alone, other := &Rank{pdl: true, device: b}, &Rank{pdl: true, device: a}
	require.True(t, alone.launchesPDL(), "before any communicator shares its device")
	markShared([]int{a, b, c, b})
	require.False(t, deviceShared(a))
	require.True(t, deviceShared(b))
	require.False(t, deviceShared(c))
	require.False(t, alone.launchesPDL(), "a rank made before the marking")
	require.False(t, (&Rank{pdl: true, device: b}).launchesPDL(), "a rank made after it")
	require.True(t, other.launchesPDL(), "a device that one rank holds")
	require.False(t, (&Rank{device: a}).launchesPDL(), "PDL not usable, or PURLIN_PDL=0")
	markShared([]int{-1, -1, 1000, 1000}) // no such devices: nothing to mark, no panic
	require.False(t, deviceShared(-1))
	require.False(t, deviceShared(1000))
}
