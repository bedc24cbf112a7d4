package snac_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/numeric"
	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

var le = binary.LittleEndian

// epilogueCase is one AllReduce with an epilogue across n ranks, or with
// gather an AllGatherV of rows whose parts are rows[r] rows (Uneven).
type epilogueCase struct {
	n       int
	typ     spec.DataType
	kind    spec.EpilogueKind
	hidden  uint64
	rows    uint64
	inPlace bool
	gather  bool
}

func (c epilogueCase) String() string {
	coll := spec.AllReduce
	if c.gather {
		coll = spec.AllGatherV
	}
	return fmt.Sprintf("%s %d ranks %s %s hidden=%d rows=%d inplace=%v", coll, c.n, c.typ, c.kind, c.hidden, c.rows, c.inPlace)
}

// parts are an AllGatherV case's counts and displacements in elements: c.rows
// split unevenly (spectest.Uneven's shares of it, in rows), some ranks none.
func (c *epilogueCase) parts() (counts, displs []uint64) {
	counts, displs = spectest.Uneven(c.rows, c.n)
	var rows uint64
	for r := range counts {
		rows += counts[r]
		counts[r] *= c.hidden
		displs[r] *= c.hidden
	}
	c.rows = rows
	return counts, displs
}

// epilogueMem is one rank's memory: send, recv, residual, weight, quant,
// scales, each at an offset of Mem 64-byte aligned.
type epilogueMem struct {
	send, recv, residual, weight, quant, scales, size uint64
}

func layoutEpilogue(c epilogueCase) epilogueMem {
	bytes := c.hidden * c.rows * uint64(c.typ.Size())
	up := func(x uint64) uint64 { return (x + 63) / 64 * 64 }
	var m epilogueMem
	m.recv = up(bytes)
	if c.inPlace {
		m.recv = 0
	}
	m.residual = m.recv + up(bytes)
	m.weight = m.residual + up(bytes)
	m.quant = m.weight + up(c.hidden*uint64(c.typ.Size()))
	m.scales = m.quant + up(c.hidden*c.rows)
	m.size = m.scales + up(4*c.rows)
	return m
}

// runEpilogue runs c in the simulator and checks every rank's output,
// residual, quantized output and scales against the reduction of every
// rank's input (numeric.Reduce, rank order, as every Plan reduces) followed
// by the epilogue's arithmetic (numeric.EpilogueRows), byte for byte.
func runEpilogue(t *testing.T, topo snac.Topology, c epilogueCase, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	var counts, displs []uint64
	if c.gather {
		counts, displs = c.parts()
	}
	size := uint64(c.typ.Size())
	count := c.hidden * c.rows
	bytes := count * size
	m := layoutEpilogue(c)
	value := func() float64 { return float64(rng.IntN(33)-16) / 8 }
	fillValues := func(b []byte) {
		for i := range len(b) / int(size) {
			numeric.SetFloat64(c.typ, b, i, value())
		}
	}
	weight := make([]byte, c.hidden*size)
	fillValues(weight)
	residual := make([]byte, bytes) // every rank's residual alike, as in tensor parallelism
	fillValues(residual)
	tensorScale := math.Float32bits(0.25)
	inputs := make([][]byte, c.n)
	for r := range inputs {
		inputs[r] = make([]byte, bytes)
		fillValues(inputs[r])
	}
	// The expectation: reduced (or gathered), then the epilogue.
	want := make([]byte, bytes)
	numeric.Reduce(want, inputs, c.typ, spec.Op{Kind: spec.Sum}, c.n, 0)
	if c.gather { // rank r gives its part of the reduced tensor
		for r := range c.n {
			part := want[displs[r]*size : (displs[r]+counts[r])*size]
			inputs[r] = append([]byte(nil), part...)
		}
	}
	wantResidual := append([]byte(nil), residual...)
	wantQuant := make([]byte, count)
	wantScales := make([]byte, 4*c.rows)
	if c.kind&spec.EpilogueRowScale == 0 {
		le.PutUint32(wantScales, tensorScale)
	}
	var wr, ww, wq, ws []byte
	if c.kind&spec.EpilogueResidualAdd != 0 {
		wr = wantResidual
	}
	if c.kind&spec.EpilogueRMSNorm != 0 {
		ww = weight
	}
	if c.kind&spec.EpilogueQuantFP8 != 0 {
		wq, ws = wantQuant, wantScales
	}
	numeric.EpilogueRows{Type: c.typ, Kind: c.kind, Hidden: int(c.hidden), Eps: 1e-5}.Run(want, wr, ww, wq, ws)

	sim := snactest.New(topo, seed)
	launches := make([][]*snactest.Launch, c.n)
	for r := range c.n {
		e := spec.Epilogue{Kind: c.kind, Hidden: c.hidden, Eps: 1e-5}
		addr := func(off uint64) uintptr { return uintptr(base + off) }
		if wr != nil {
			e.Residual = addr(m.residual)
		}
		if ww != nil {
			e.Weight = addr(m.weight)
		}
		if wq != nil {
			e.Quant, e.Scales = addr(m.quant), addr(m.scales)
		}
		call := &spec.Call{Coll: spec.AllReduce, Type: c.typ, Op: spec.Op{Kind: spec.Sum}, Count: count,
			Send: addr(m.send), Recv: addr(m.recv), Rank: r, NRanks: c.n, Epilogue: e}
		in := bytes
		if c.gather {
			call.Coll, call.Count, call.Counts, call.Displs = spec.AllGatherV, 0, counts, displs
			in = counts[r] * size
		}
		require.NoError(t, call.Validate(), "%s", call)
		rt := topo
		rt.Rank = r
		plan, err := snac.Build(call, rt)
		require.NoError(t, err, "%s", c)
		mem := make([]byte, m.size)
		garbage(rng, mem)
		copy(mem[m.send:], inputs[r])
		copy(mem[m.residual:], residual)
		copy(mem[m.weight:], weight)
		le.PutUint32(mem[m.scales:], tensorScale)
		launches[r] = []*snactest.Launch{{Plan: plan, Mem: mem, Bufs: []snactest.Buffer{{Send: m.send, Recv: m.recv, In: in, Out: bytes,
			Residual: m.residual, Weight: m.weight, Quant: m.quant, Scales: m.scales}}}}
	}
	require.NoError(t, sim.Run(launches), "%s", c)
	for r := range c.n {
		mem := launches[r][0].Mem
		require.Equal(t, want, mem[m.recv:m.recv+bytes], "rank %d output, %s", r, c)
		if wr != nil {
			require.Equal(t, wantResidual, mem[m.residual:m.residual+bytes], "rank %d residual, %s", r, c)
		}
		if wq != nil {
			require.Equal(t, wantQuant, mem[m.quant:m.quant+count], "rank %d quant, %s", r, c)
			scales := 4 * c.rows
			if c.kind&spec.EpilogueRowScale == 0 {
				scales = 4
			}
			require.Equal(t, wantScales[:scales], mem[m.scales:m.scales+scales], "rank %d scales, %s", r, c)
		}
	}
}

// TestEpilogueRegimes runs AllReduce epilogues, and AllGatherV epilogues
// (rows gathered whole, each rank's part a different number of them, some
// none), at 1, 2, 3, 4 and 8 ranks over sizes that reach every regime
// (packets, staged, chunked, ring) of the small test topology, rows of
// lengths that are and are not whole 16-byte units, in place and apart
// (an AllGatherV apart only): every row of every rank gets its epilogue
// once, after its last write, and none is sent on.
func TestEpilogueRegimes(t *testing.T) {
	kinds := []spec.EpilogueKind{
		spec.EpilogueResidualAdd,
		spec.EpilogueRMSNorm,
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm,
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8,
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale,
		spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale,
	}
	types := []spec.DataType{spec.Bfloat16, spec.Float16, spec.Float32}
	shapes := []struct{ hidden, rows uint64 }{{1, 1}, {3, 7}, {8, 1}, {64, 5}, {200, 3}, {1024, 2}, {96, 170}, {512, 97}, {2048, 12}}
	seed := uint64(1)
	for _, n := range []int{1, 2, 3, 4, 8} {
		topo := testTopo(n)
		for _, sh := range shapes {
			for i, kind := range kinds {
				typ := types[(i+int(sh.rows))%len(types)]
				if uint64(max(1, 2*(n-1)))*sh.hidden*uint64(typ.Size()) > topo.StageHalf {
					continue // a row per segment does not fit the small staging (TestEpilogueRowsTooLong)
				}
				for _, c := range []epilogueCase{
					{n: n, typ: typ, kind: kind, hidden: sh.hidden, rows: sh.rows},
					{n: n, typ: typ, kind: kind, hidden: sh.hidden, rows: sh.rows, inPlace: true},
					{n: n, typ: typ, kind: kind, hidden: sh.hidden, rows: sh.rows, gather: true},
				} {
					seed++
					runEpilogue(t, topo, c, seed)
				}
			}
		}
	}
}

// TestEpilogueRowsWhole checks the Plans themselves: every Epilogue step
// covers whole rows, and each rank's steps cover every row exactly once.
func TestEpilogueRowsWhole(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		for _, sh := range []struct{ hidden, rows uint64 }{{5, 9}, {1000, 40}, {2048, 3}, {24, 4000}} {
			for r := range n {
				topo := testTopo(n)
				topo.Rank = r
				e := spec.Epilogue{Kind: spec.EpilogueRMSNorm, Hidden: sh.hidden, Weight: 1 << 30}
				call := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Count: sh.hidden * sh.rows, Send: 1 << 20, Recv: 1 << 32,
					Rank: r, NRanks: n, Epilogue: e}
				require.NoError(t, call.Validate())
				plan, err := snac.Build(call, topo)
				require.NoError(t, err)
				row := 2 * sh.hidden
				seen := make([]int, sh.rows)
				for _, s := range plan.Steps {
					if s.Verb != snac.Epilogue {
						continue
					}
					require.Zero(t, s.Dst.Off%row, "n=%d %+v", n, sh)
					require.Zero(t, s.Bytes%row, "n=%d %+v", n, sh)
					require.Equal(t, uint32(sh.hidden), s.Slot)
					for k := s.Dst.Off / row; k < (s.Dst.Off+s.Bytes)/row; k++ {
						seen[k]++
					}
				}
				for k, v := range seen {
					require.Equal(t, 1, v, "n=%d rank %d %+v: row %d has %d epilogues", n, r, sh, k, v)
				}
			}
		}
	}
}

// TestEpilogueRowsTooLong: rows longer than a staging chunk can hold are refused
// with an error, not split.
func TestEpilogueRowsTooLong(t *testing.T) {
	topo := testTopo(2)
	e := spec.Epilogue{Kind: spec.EpilogueRMSNorm, Hidden: 64 << 10, Weight: 1 << 30}
	call := &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Count: 4 * e.Hidden, Send: 1 << 20, Recv: 1 << 32, NRanks: 2, Epilogue: e}
	require.NoError(t, call.Validate())
	_, err := snac.Build(call, topo)
	require.ErrorContains(t, err, "cannot hold")
}

// TestEpilogueNoIdleWorkers: a call split in rows takes no worker that its
// rows leave without work (one row, one worker), so neither kernel launches
// blocks that only start and stop.
func TestEpilogueNoIdleWorkers(t *testing.T) {
	for _, n := range []int{1, 2, 8} {
		for _, rows := range []uint64{1, 3, 16, 300} {
			topo := snac.Topology{NRanks: n, Workers: 64, StageHalf: 64 << 20, P2PHalf: 1 << 20, PacketMax: 64 << 10, ChunkMax: 1 << 20}
			e := spec.Epilogue{Kind: spec.EpilogueRMSNorm, Hidden: 4096, Weight: 1 << 30}
			call := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Count: 4096 * rows, Send: 1 << 20, Recv: 1 << 34, NRanks: n, Epilogue: e}
			plan, err := snac.Build(call, topo)
			require.NoError(t, err)
			if rows <= 3 {
				require.Len(t, plan.Workers, int(rows), "%d ranks, %d rows", n, rows)
			}
			for w := range plan.Workers {
				has := false
				for _, s := range plan.WorkerSteps(w) {
					has = has || s.Verb == snac.Epilogue
				}
				require.True(t, has, "%d ranks, %d rows: worker %d has no rows", n, rows, w)
			}
		}
	}
}
