package snac_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// buildBoth builds call on topo with loops and with every chunk written
// out, and reports whether the first held a loop.
func buildBoth(t *testing.T, call *spec.Call, topo snac.Topology) (looped, out *snac.Plan) {
	looped, err := snac.Build(call, topo)
	require.NoError(t, err)
	restore := snac.WriteChunksOut()
	defer restore()
	out, err = snac.Build(call, topo)
	require.NoError(t, err)
	return looped, out
}

func hasLoop(p *snac.Plan) bool {
	for _, s := range p.Steps {
		if s.Verb == snac.Repeat {
			return true
		}
	}
	return false
}

// TestLoopsUnrollToTheChunksWrittenOut: a Plan with loops, unrolled, is
// step for step the Plan written out chunk by chunk, for random calls of
// every collective on 1-8 ranks (SendRecv both ways), on topologies that
// reach the ring at small sizes; and loops occur.
func TestLoopsUnrollToTheChunksWrittenOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 11))
	check := func(call *spec.Call, topo snac.Topology) bool {
		looped, out := buildBoth(t, call, topo)
		require.NoError(t, looped.LoopsValid())
		unrolled, err := looped.Unrolled()
		require.NoError(t, err)
		require.Equal(t, out.Workers, unrolled.Workers, "%s rank %d", call, call.Rank)
		require.Equal(t, out.Steps, unrolled.Steps, "%s rank %d", call, call.Rank)
		require.LessOrEqual(t, len(looped.Steps), len(out.Steps))
		return hasLoop(looped)
	}
	loops := 0
	rounds := 300
	if testing.Short() || raceEnabled {
		rounds = 60
	}
	for i := range rounds {
		n := 1 + rng.IntN(8)
		topo := testTopo(n)
		topo.Workers = 1 + rng.IntN(4)
		topo.StageHalf = uint64(16+rng.IntN(64)) << 10
		calls := randomCalls(rng, n)
		if i%5 == 0 { // large enough for many cycles of slots
			for _, c := range calls {
				c.Count = c.Count*8 + uint64(rng.IntN(1000))
			}
		}
		for r, c := range calls {
			topo.Rank = r
			if check(c, topo) {
				loops++
			}
		}
	}
	for _, n := range []int{2, 3, 8} {
		for _, count := range []uint64{1 << 16, 1<<18 + 5, 3 << 18} {
			topo := testTopo(n)
			for r := range n {
				for _, send := range []bool{true, false} {
					topo.Rank = r
					call := &spec.Call{Coll: spec.SendRecv, Type: spec.Float32, Count: count, NRanks: n, Rank: r, Peer: (r + 1) % n, IsSend: send}
					if check(call, topo) {
						loops++
					}
				}
			}
		}
	}
	require.Greater(t, loops, 100, "Plans with a loop")
}

// TestLoopsBoundRingPlans: an 8-rank AllReduce's Plan, on the CUDA Atom's
// default sizes, holds about as many steps at 1 GiB as at 64 MiB (it held
// 118k steps, 30 MB on the GPU, before loops).
func TestLoopsBoundRingPlans(t *testing.T) {
	topo := snac.Topology{NRanks: 8, Workers: 64, StageHalf: 64 << 20, P2PHalf: 8 << 20, PacketMax: 256 << 10, ChunkMax: 512 << 10}
	steps := map[uint64]int{}
	for _, mib := range []uint64{64, 256, 1024} {
		call := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Op: spec.Op{Kind: spec.Sum}, Count: mib << 19, NRanks: 8}
		p, err := snac.Build(call, topo)
		require.NoError(t, err)
		steps[mib] = len(p.Steps)
	}
	require.Less(t, steps[1024], 2*steps[64], fmt.Sprint(steps))
}

// TestUnrollRefusesMalformedLoops: Unroll and LoopsValid refuse a loop
// past its worker's steps, one holding a step a loop cannot, and one whose
// flags would pass EpochAdvance.
func TestUnrollRefusesMalformedLoops(t *testing.T) {
	copyStep := snac.Step{Verb: snac.Copy, Bytes: 16, Dst: snac.Ref{Space: snac.SpaceRecv}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceStage}}}
	wait := snac.Step{Verb: snac.Wait, Delta: 1}
	for name, steps := range map[string][]snac.Step{
		"past the worker": {{Verb: snac.Repeat, Slot: 3, Bytes: 2}, wait, copyStep},
		"to its end":      {{Verb: snac.Repeat, Slot: 2, Bytes: 2}, wait, copyStep},
		"empty body":      {{Verb: snac.Repeat, Slot: 0, Bytes: 2}, wait},
		"no repetition":   {{Verb: snac.Repeat, Slot: 1, Bytes: 0}, wait},
		"advance":         {{Verb: snac.Repeat, Slot: 1, Bytes: 2}, {Verb: snac.Advance}},
		"nested":          {{Verb: snac.Repeat, Slot: 2, Bytes: 2}, {Verb: snac.Repeat, Slot: 1, Bytes: 2}, wait},
		"packets":         {{Verb: snac.Repeat, Slot: 1, Bytes: 2}, {Verb: snac.Copy, Bytes: 16, Dst: snac.Ref{Space: snac.SpaceRecv}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpacePacket}}}},
		"rows":            {{Verb: snac.Repeat, Slot: 1, Bytes: 2}, {Verb: snac.Copy, Bytes: 16, Row: 8, Dst: snac.Ref{Space: snac.SpaceRecv, Pitch: 16}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceStage}}}},
		"flags past":      {{Verb: snac.Repeat, Slot: 1, Bytes: 1 << 12, Delta: 1 << 10}, wait},
	} {
		p := &snac.Plan{Steps: steps, Workers: []snac.Worker{{Count: uint32(len(steps)), Loops: 1}}}
		require.Error(t, p.LoopsValid(), name)
		require.Error(t, p.Unroll(0, func(int, *snac.Step) error { return nil }), name)
	}
	good := &snac.Plan{Steps: []snac.Step{{Verb: snac.Repeat, Slot: 1, Bytes: 2, Delta: 1}, wait, wait}, Workers: []snac.Worker{{Count: 3, Loops: 1}}}
	require.NoError(t, good.LoopsValid())
	good.Workers[0].Loops = 0
	require.Error(t, good.LoopsValid(), "a worker with a loop not marked so")
}

// TestMergeKeepsLoops: a group's merged Plan, unrolled, is the merge of
// its Plans written out, and marks the workers with loops.
func TestMergeKeepsLoops(t *testing.T) {
	topo := testTopo(2)
	calls := []*spec.Call{
		{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 1 << 17, NRanks: 2},
		{Coll: spec.AllGather, Type: spec.Float32, Count: 1 << 16, NRanks: 2},
		{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 100, NRanks: 2},
		{Coll: spec.SendRecv, Type: spec.Float32, Count: 1 << 17, NRanks: 2, Peer: 1, IsSend: true},
	}
	var looped, out []*snac.Plan
	for _, c := range calls {
		l, o := buildBoth(t, c, topo)
		looped, out = append(looped, l), append(out, o)
	}
	require.True(t, hasLoop(looped[0]) && hasLoop(looped[1]) && hasLoop(looped[3]))
	m, err := snac.Merge(looped...)
	require.NoError(t, err)
	require.NoError(t, m.LoopsValid())
	want, err := snac.Merge(out...)
	require.NoError(t, err)
	got, err := m.Unrolled()
	require.NoError(t, err)
	require.Equal(t, want.Workers, got.Workers)
	require.Equal(t, want.Steps, got.Steps)
}

// TestUnrollShiftsBuffersAndFlags: repetition r of a body adds r times the
// loop's Delta to its flags and r times its Check to its Refs in the
// caller's buffers, and leaves staging where it is.
func TestUnrollShiftsBuffersAndFlags(t *testing.T) {
	body := []snac.Step{
		{Verb: snac.Wait, Slot: 3, Delta: 5},
		{Verb: snac.Reduce, NSrc: 2, Bytes: 64, Dst: snac.Ref{Space: snac.SpaceRecv, Off: 100},
			Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend, Off: 100}, {Space: snac.SpaceStage, Off: 7, Half: 9}}},
		{Verb: snac.Notify, Peer: 1, Slot: 4, Delta: 5},
	}
	p := &snac.Plan{Steps: append(append([]snac.Step{{Verb: snac.Repeat, Slot: 3, Bytes: 3, Delta: 2, Check: 1000}}, body...), snac.Step{Verb: snac.Advance}),
		Workers: []snac.Worker{{Count: 5, Loops: 1}}}
	var got []snac.Step
	var at []int
	require.NoError(t, p.Unroll(0, func(i int, s *snac.Step) error {
		got, at = append(got, *s), append(at, i)
		return nil
	}))
	require.Len(t, got, 10)
	require.Equal(t, []int{1, 2, 3, 1, 2, 3, 1, 2, 3, 4}, at)
	for r := range 3 {
		w, red, n := got[3*r], got[3*r+1], got[3*r+2]
		require.Equal(t, int64(5+2*r), w.Delta)
		require.Equal(t, int64(5+2*r), n.Delta)
		require.Equal(t, uint64(100+1000*r), red.Dst.Off)
		require.Equal(t, uint64(100+1000*r), red.Src[0].Off)
		require.Equal(t, snac.Ref{Space: snac.SpaceStage, Off: 7, Half: 9}, red.Src[1])
		require.Equal(t, snac.Ref{}, red.Src[2], "a source past NSrc")
	}
}
