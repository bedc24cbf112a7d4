package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
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
// another verb (a Repeat among them); the kernel cuts it at a loop's body's
// end, where its batch ends.
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
		{"a Repeat ends runs", []snac.Step{wait(1), {Verb: snac.Repeat, Slot: 2, Bytes: 3}, wait(2), wait(3), wait(4), wait(5)},
			[]uint8{1, 0, 4, 3, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, signalRuns(tc.steps))
		})
	}
}

// TestPlanBytesEpilogue: an AllReduce with an epilogue at every regime of
// the CUDA Atom's topology, on every rank of 1, 2 and 4. In the image each
// worker's Epilogue steps follow its other steps, in order and outside its
// Count, their number after fill (4-byte aligned), each with its first row
// and its number of rows and group; the other steps keep their order; and
// place notes which buffers they use.
func TestPlanBytesEpilogue(t *testing.T) {
	const stepSize, workerSize = int(unsafe.Sizeof(snac.Step{})), int(unsafe.Sizeof(snac.Worker{}))
	le := binary.LittleEndian
	kind := spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale
	for _, n := range []int{1, 2, 4} {
		for _, rows := range []uint64{1, 7, 300, 3000, 30000} {
			for r := range n {
				const hidden = 1000
				e := spec.Epilogue{Kind: kind, Hidden: hidden, Residual: 3 << 40, Weight: 4 << 40, Quant: 5 << 40, Scales: 6 << 40}
				c := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Op: spec.Op{Kind: spec.Sum}, Count: hidden * rows,
					Rank: r, NRanks: n, Send: 1 << 40, Recv: 2 << 40, Epilogue: e}
				require.NoError(t, c.Validate())
				p, err := snac.Build(c, Topology(n, r))
				require.NoError(t, err, "%s", c)
				b, err := planBytes(p)
				require.NoError(t, err, "%s", c)
				nw, ns := len(p.Workers), len(p.Steps)
				fill := ns*stepSize + nw*workerSize
				counts := (fill + 2*nw + 3) &^ 3
				require.Len(t, b, counts+4*nw, "%s", c)
				covered := uint64(0)
				for w, wk := range p.Workers {
					var rest, tail []snac.Step
					for _, s := range p.WorkerSteps(w) {
						if s.Verb == snac.Epilogue {
							s.Src[0].Off, s.Src[0].Half = s.Dst.Off/(2*hidden), s.Bytes/(2*hidden)
							s.Src[0].Pitch = epilogueGroup(s.Src[0].Half, epilogueSplitOf(p), (2*hidden+15)/16)
							tail = append(tail, s)
							covered += s.Src[0].Half
						} else {
							rest = append(rest, s)
						}
					}
					require.Equal(t, uint32(len(rest)), le.Uint32(b[ns*stepSize+w*workerSize+8:]), "worker %d Count, %s", w, c)
					require.Equal(t, uint32(len(tail)), le.Uint32(b[counts+4*w:]), "worker %d epilogues, %s", w, c)
					for k, s := range append(rest, tail...) {
						got := *(*snac.Step)(unsafe.Pointer(&b[(int(wk.First)+k)*stepSize]))
						if s.Verb == snac.Notify || s.Verb == snac.Wait {
							got.NSrc = s.NSrc // the signal run
						}
						require.Equal(t, s, got, "worker %d step %d, %s", w, k, c)
					}
				}
				require.Equal(t, rows, covered, "every row once, %s", c)
				var d devicePlan
				d.place(1000, p)
				require.Equal(t, kind, d.epilogue[0])
				require.Zero(t, d.epilogue[1])
				require.NoError(t, epilogueBuffers(&d, []atom.Buffers{{Send: 1, Recv: 2, Residual: 3, Weight: 4, Quant: 5, Scales: 6}}, r))
				require.ErrorContains(t, epilogueBuffers(&d, []atom.Buffers{{Send: 1, Recv: 2, Residual: 3, Weight: 4, Quant: 5}}, r), "scales")
				require.ErrorContains(t, epilogueBuffers(&d, nil, r), "output")
			}
		}
	}
}

// TestEpilogueGroup: the group that runs a row gives a thread the fewest
// vectors, the narrower of two alike.
func TestEpilogueGroup(t *testing.T) {
	for _, tc := range []struct {
		rows    uint64
		split   uint32
		vectors uint64
		want    uint32
	}{
		{1, 1, 512, 512},    // one long row: the block
		{1, 1, 125, 128},    // one short row: a group as wide as it
		{1, 1, 1, 32},       // one tiny row: a warp
		{8, 1, 512, 64},     // 8 rows: 8 groups of a vector a thread each
		{16, 1, 512, 32},    // 16 rows: a warp a row
		{16, 16, 512, 512},  // a row a block
		{16, 4, 512, 128},   // 4 rows a block
		{1000, 1, 2048, 64}, // 63 passes of 64 vectors against 125 of 32
	} {
		require.Equal(t, tc.want, epilogueGroup(tc.rows, tc.split, tc.vectors), "%+v", tc)
	}
}

func TestPlanBytesRejectsBadEpilogues(t *testing.T) {
	good := snac.Step{Verb: snac.Epilogue, Peer: uint8(spec.EpilogueRMSNorm), Slot: 8, Bytes: 32, Dst: snac.Ref{Space: snac.SpaceRecv, Off: 16}}
	plan := func(typ spec.DataType, edit func(*snac.Step)) *snac.Plan {
		s := good
		edit(&s)
		return &snac.Plan{Type: typ, Workers: []snac.Worker{{Count: 1}}, Steps: []snac.Step{s}, NRanks: 1}
	}
	_, err := planBytes(plan(spec.Float16, func(*snac.Step) {}))
	require.NoError(t, err)
	for name, p := range map[string]*snac.Plan{
		"float64":         plan(spec.Float64, func(*snac.Step) {}),
		"no kind":         plan(spec.Float16, func(s *snac.Step) { s.Peer = 0 }),
		"quant alone":     plan(spec.Float16, func(s *snac.Step) { s.Peer = uint8(spec.EpilogueQuantFP8) }),
		"row scale alone": plan(spec.Float16, func(s *snac.Step) { s.Peer |= uint8(spec.EpilogueRowScale) }),
		"unknown kind":    plan(spec.Float16, func(s *snac.Step) { s.Peer |= 16 }),
		"not an output":   plan(spec.Float16, func(s *snac.Step) { s.Dst.Space = snac.SpaceStage }),
		"buffer":          plan(spec.Float16, func(s *snac.Step) { s.Dst.Rank = MaxBuffers }),
		"strided":         plan(spec.Float16, func(s *snac.Step) { s.Dst.Pitch = 64 }),
		"half row":        plan(spec.Float16, func(s *snac.Step) { s.Bytes = 24 }),
		"off a row":       plan(spec.Float16, func(s *snac.Step) { s.Dst.Off = 8 }),
		"no row":          plan(spec.Float16, func(s *snac.Step) { s.Slot = 0 }),
	} {
		_, err := planBytes(p)
		require.Error(t, err, name)
	}
}
