package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
)

func TestPlanBytes(t *testing.T) {
	p := &snac.Plan{
		Workers: []snac.Worker{
			{Channel: snac.Collective, Index: 0, First: 0, Count: 2},
			{Channel: snac.Collective, Index: 1, First: 2, Count: 1},
			{Channel: snac.SendChannel(1), Index: 0, First: 3, Count: 1},
		},
		Steps:  []snac.Step{{Verb: snac.Copy, Bytes: 5}, {Verb: snac.Notify, Peer: 1, Slot: 9}, {Verb: snac.Wait}, {Verb: snac.Reduce, NSrc: 2}},
		NRanks: 2,
	}
	b, err := planBytes(p)
	require.NoError(t, err)
	stepSize, workerSize := int(unsafe.Sizeof(snac.Step{})), int(unsafe.Sizeof(snac.Worker{}))
	require.Len(t, b, 4*stepSize+3*workerSize+2*3)
	require.Equal(t, byte(snac.Notify), b[stepSize])
	require.Equal(t, byte(1), b[stepSize+1], "the Notify's run")
	require.Equal(t, byte(1), b[2*stepSize+1], "the Wait's run")
	require.Equal(t, byte(2), b[3*stepSize+1], "a Reduce keeps its sources")
	require.Equal(t, uint32(9), binary.LittleEndian.Uint32(b[stepSize+4:]))
	w := b[4*stepSize:]
	require.Equal(t, uint32(2), binary.LittleEndian.Uint32(w[workerSize+4:]), "worker 1 First")
	fill := b[4*stepSize+3*workerSize:]
	require.Equal(t, []uint16{2, 2, 1}, []uint16{
		binary.LittleEndian.Uint16(fill), binary.LittleEndian.Uint16(fill[2:]), binary.LittleEndian.Uint16(fill[4:]),
	}, "workers per channel")

	var d devicePlan
	d.place(1000, p)
	require.Equal(t, uint64(1000+4*stepSize), d.workers)
	require.Equal(t, uint64(1000+4*stepSize+3*workerSize), d.fill)
}

func TestPlanBytesRejectsBadPlans(t *testing.T) {
	for name, p := range map[string]*snac.Plan{
		"steps past end": {Workers: []snac.Worker{{Count: 2}}, Steps: []snac.Step{{}}},
		"reduce no src":  {Workers: []snac.Worker{{Count: 1}}, Steps: []snac.Step{{Verb: snac.Reduce}}},
		"bad channel":    {Workers: []snac.Worker{{Channel: snac.NumChannels}}},
		"too many srcs":  {Workers: []snac.Worker{{Count: 1}}, Steps: []snac.Step{{Verb: snac.Reduce, NSrc: snac.MaxSrc + 1}}},
		"notify no rank": {Workers: []snac.Worker{{Count: 1}}, Steps: []snac.Step{{Verb: snac.Notify, Peer: 2}}, NRanks: 2},
	} {
		_, err := planBytes(p)
		require.Error(t, err, name)
	}
}

func TestWindowLayout(t *testing.T) {
	topo := snac.Topology{NRanks: 2, StageHalf: 1 << 20, P2PHalf: 1 << 16, PacketMax: 4096}
	w := newLayout(topo)
	require.GreaterOrEqual(t, w.packet, topo.StageBytes())
	require.GreaterOrEqual(t, w.flags-w.packet, topo.PacketBytes())
	require.GreaterOrEqual(t, uint64(w.size)-w.flags, uint64(snac.NumSlots*2*16))
	require.Zero(t, w.packet%4096)
}

func TestWithoutKernels(t *testing.T) {
	if len(kernelImage) != 0 {
		t.Skip("built with kernels")
	}
	_, err := NewRank(snac.Topology{NRanks: 1}, nil, atomOptions())
	require.ErrorContains(t, err, "built without CUDA kernels")
	require.ErrorContains(t, Available(), "built without CUDA kernels")
}

func atomOptions() atom.Options { return atom.Options{} }

// TestSignalRuns: a run holds consecutive steps of one verb naming distinct
// flags, at most a warp's lanes of them, and never crosses into a step of
// another verb.
func TestSignalRuns(t *testing.T) {
	wait := func(slot uint32) snac.Step { return snac.Step{Verb: snac.Wait, Slot: slot} }
	notify := func(peer uint8, slot uint32) snac.Step { return snac.Step{Verb: snac.Notify, Peer: peer, Slot: slot} }
	copyStep := snac.Step{Verb: snac.Copy, Bytes: 16}
	many := make([]snac.Step, 40)
	for i := range many {
		many[i] = wait(uint32(i))
	}
	manyRuns := make([]uint8, 40)
	for i := range manyRuns {
		manyRuns[i] = uint8(min(32, 40-i))
	}
	for _, tc := range []struct {
		name  string
		steps []snac.Step
		want  []uint8
	}{
		{"empty", nil, []uint8{}},
		{"one wait", []snac.Step{wait(1)}, []uint8{1}},
		{"a join, then notifies", []snac.Step{wait(1), wait(2), wait(3), notify(1, 7), notify(2, 7)}, []uint8{3, 2, 1, 2, 1}},
		{"a copy between", []snac.Step{notify(1, 3), copyStep, notify(1, 4), notify(1, 5)}, []uint8{1, 0, 2, 1}},
		{"a flag raised twice", []snac.Step{notify(1, 3), notify(1, 4), notify(1, 3), notify(1, 6)}, []uint8{2, 3, 2, 1}},
		{"a flag waited for twice", []snac.Step{wait(5), wait(5)}, []uint8{1, 1}},
		{"waits then notifies of one slot", []snac.Step{wait(3), notify(0, 3)}, []uint8{1, 1}},
		{"a warp at most", many, manyRuns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, signalRuns(tc.steps))
		})
	}
}
