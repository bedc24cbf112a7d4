package snac_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/numeric"
	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

// hierRank is one rank of a hierarchical run: its buffers and Program.
type hierRank struct {
	bufs [4][]byte // by snac.Buffer; BufNone stays nil
	prog *snac.Program
}

// span is the n bytes at s (none where n is 0: a Phase may name a Span its
// call does not use on this rank, a chunk's past an empty buffer).
func (r *hierRank) span(s snac.Span, n uint64) []byte {
	if s.Buf == snac.BufNone || n == 0 {
		return nil
	}
	return r.bufs[s.Buf][s.Off : s.Off+n]
}

// runProgram runs rank r's Program on f, a group of Phases at a time.
func runProgram(f *snactest.Fabric, nodes snac.Nodes, r int, rk *hierRank) error {
	return runParty(f, &snactest.Party{Rank: r, Nodes: nodes, Memory: func(sp snac.Span, _ uintptr, n uint64) []byte {
		return rk.span(sp, n)
	}}, rk)
}

// runParty runs rk's Program as party on f.
func runParty(f *snactest.Fabric, party *snactest.Party, rk *hierRank) error {
	r := party.Rank
	ph := rk.prog.Phases
	for i := 0; i < len(ph); {
		j := i + 1
		for j < len(ph) && ph[j].Grouped {
			j++
		}
		if err := snactest.RunPhases(f, party, ph[i:j], 5*time.Second); err != nil {
			return fmt.Errorf("rank %d phase %d (%s %s): %w", r, i, ph[i].Level, ph[i].Call.Coll, err)
		}
		i = j
	}
	return nil
}

// hierCase is one collective call on every rank of a multi-node communicator.
type hierCase struct {
	coll    spec.Collective
	count   uint64
	typ     spec.DataType
	op      spec.OpKind
	root    int
	inPlace bool
}

// calls are every rank's call of c on nranks ranks, with Send and Recv as
// offsets into one arena per rank (in place: NCCL's in-place position).
func (c hierCase) calls(nranks int) []*spec.Call {
	calls := make([]*spec.Call, nranks)
	for r := range calls {
		op := spectest.OpFor(spectest.RankOp(spec.Op{Kind: c.op, Scalar: 0.75}, r), c.typ, nranks)
		call := &spec.Call{Coll: c.coll, Count: c.count, Type: c.typ, Op: op, Root: c.root, Rank: r, NRanks: nranks}
		if c.coll == spec.AllGatherV || c.coll == spec.ReduceScatterV {
			call.Counts, call.Displs = spectest.Uneven(c.count, nranks)
		}
		if c.coll.Columns() { // blocks 16 elements wide, or 1 in a matrix 3 wider than the blocks
			call.Rows = max(1, c.count/16)
			if c.count%16 != 0 {
				call.Rows, call.Width = c.count, uint64(nranks)+3
			}
		}
		if c.coll == spec.SendRecv { // pairs (0,1), (2,3), ... and the last odd rank to itself
			call.Peer = r ^ 1
			if call.Peer >= nranks {
				call.Peer = r
			}
			call.IsSend = r < call.Peer || call.Peer == r
		}
		calls[r] = call
	}
	if c.coll.PairCounts() || c.coll.Matrix() {
		spectest.Pairs(calls, c.count)
	}
	return calls
}

func TestHierarchyMatchesFlatCollective(t *testing.T) {
	shapes := []snac.Nodes{{2, 1}, {1, 3}, {2, 2}, {3, 2}, {2, 3}, {2, 4}}
	colls := []spec.Collective{spec.AllReduce, spec.ReduceScatter, spec.AllGather, spec.AllToAll,
		spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter, spec.SendRecv, spec.AllGatherV, spec.ReduceScatterV, spec.AllToAllV, spec.AllToAllMatrix,
		spec.AllGatherColumns, spec.ReduceScatterColumns}
	types := []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int32, spec.Float16, spec.Uint8, spec.Float8e4m3}
	rng := rand.New(rand.NewPCG(11, 15))
	for _, nodes := range shapes {
		n := nodes.Count * nodes.Local
		for _, coll := range colls {
			for i := range 6 {
				c := hierCase{coll: coll, count: []uint64{0, 1, 5, 17, 64, 301}[i], typ: types[rng.IntN(len(types))],
					op: spec.OpKind(rng.IntN(int(spec.PreMulSum) + 1)), root: rng.IntN(n), inPlace: rng.IntN(2) == 0}
				if coll == spec.SendRecv || coll.PairCounts() || coll.Matrix() || coll.Columns() { // no in-place form
					c.inPlace = false
				}
				name := fmt.Sprintf("%dx%d/%s/%d/%s/%s/root%d/inplace=%v", nodes.Count, nodes.Local, coll, c.count, c.typ, spec.Op{Kind: c.op}, c.root, c.inPlace)
				t.Run(name, func(t *testing.T) { runHier(t, nodes, c, rng) })
			}
		}
	}
}

// TestHierarchyIntegerMean runs Avg of the integer types across nodes (the
// rails' sums first, then the node's mean over every rank) on every
// reducing collective, against the flat collective's truncated mean: inputs
// of both signs, sums that wrap, in place and apart.
func TestHierarchyIntegerMean(t *testing.T) {
	colls := []spec.Collective{spec.AllReduce, spec.ReduceScatter, spec.Reduce, spec.ReduceScatterV, spec.ReduceScatterColumns}
	types := []spec.DataType{spec.Int8, spec.Uint8, spec.Int32, spec.Uint32, spec.Int64, spec.Uint64}
	rng := rand.New(rand.NewPCG(19, 4))
	for _, nodes := range []snac.Nodes{{2, 2}, {3, 2}, {2, 3}, {4, 2}} {
		n := nodes.Count * nodes.Local
		for _, coll := range colls {
			for _, typ := range types {
				c := hierCase{coll: coll, count: []uint64{1, 17, 301}[rng.IntN(3)], typ: typ, op: spec.Avg, root: rng.IntN(n),
					inPlace: !coll.Columns() && rng.IntN(2) == 0}
				name := fmt.Sprintf("%dx%d/%s/%d/%s/root%d/inplace=%v", nodes.Count, nodes.Local, coll, c.count, typ, c.root, c.inPlace)
				t.Run(name, func(t *testing.T) { runHier(t, nodes, c, rng) })
			}
		}
		require.False(t, snac.Chunkable(&spec.Call{Coll: spec.AllReduce, Type: spec.Int32, Op: spec.Op{Kind: spec.Avg}}), "an integer mean runs whole")
	}
}

func runHier(t *testing.T, nodes snac.Nodes, c hierCase, rng *rand.Rand) {
	runHierChunks(t, nodes, c, rng, 0)
}

// runHierChunks runs c's Programs on the reference fabric: with k > 0 as
// k chunks of each part (snac.HierarchyChunk) in turn, each with scratch
// of its own; else whole (snac.Hierarchy).
func runHierChunks(t *testing.T, nodes snac.Nodes, c hierCase, rng *rand.Rand, k int) {
	n := nodes.Count * nodes.Local
	calls := c.calls(n)
	inputs := spectest.Inputs(rng, calls)
	want := spectest.Expected(calls, inputs)
	ranks := make([][]*hierRank, n)
	for r, call := range calls {
		in, out := call.Extents()
		var progs []*snac.Program
		if k == 0 {
			prog, err := snac.Hierarchy(call, nodes)
			require.NoError(t, err)
			progs = append(progs, prog)
		}
		for i := range k {
			prog, err := snac.HierarchyChunk(call, nodes, i, k)
			require.NoError(t, err)
			progs = append(progs, prog)
		}
		rk := &hierRank{}
		rk.bufs[snac.BufRecv] = make([]byte, out)
		rk.bufs[snac.BufSend] = inputs[r]
		if c.inPlace && in > 0 && out > 0 { // the input at NCCL's in-place position of the output
			if call.Coll.Definition().In.Shape == spec.Packed && call.Coll.Definition().Out.Shape != spec.Packed {
				off, _ := call.OutPart(r, r)
				copy(rk.bufs[snac.BufRecv][off:], inputs[r])
				rk.bufs[snac.BufSend] = rk.bufs[snac.BufRecv][off:]
			} else if in >= out {
				buf := append([]byte(nil), inputs[r]...)
				rk.bufs[snac.BufSend], rk.bufs[snac.BufRecv] = buf, buf[:max(out, 0)]
				if call.Coll.Definition().In.Shape != spec.Packed && call.Coll.Definition().Out.Shape == spec.Packed {
					off, _ := call.InPart(r, r)
					rk.bufs[snac.BufRecv] = buf[off : off+out]
				}
			}
		}
		for _, prog := range progs { // each a copy of rk with its Program and scratch
			chunk := *rk
			chunk.prog, chunk.bufs[snac.BufScratch] = prog, make([]byte, prog.Scratch)
			ranks[r] = append(ranks[r], &chunk)
		}
	}
	f := snactest.NewFabric()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			for _, rk := range ranks[r] {
				if errs[r] = runProgram(f, nodes, r, rk); errs[r] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		_, out := calls[r].Extents()
		got := ranks[r][0].bufs[snac.BufRecv][:out]
		require.NoError(t, spectest.CompareLevels(calls, inputs, r, got, want[r]), "rank %d of %d nodes x %d", r, nodes.Count, nodes.Local)
	}
}

func TestHierarchyRefusesWhatItCannotServe(t *testing.T) {
	nodes := snac.Nodes{Count: 2, Local: 2}
	for _, c := range []spec.Call{
		{Coll: spec.AllGatherV, Counts: []uint64{4, 4, 4, 4}, Displs: []uint64{0, 4, 8, 12}, Type: spec.Float32,
			Epilogue: spec.Epilogue{Kind: spec.EpilogueResidualAdd, Hidden: 4}},
	} {
		c.NRanks = 4
		_, err := snac.Hierarchy(&c, nodes)
		require.ErrorContains(t, err, "across nodes", "%s", c.Coll)
	}
	// A mean of 8-bit integers divides by the rank count in the type.
	for _, c := range []spec.Call{
		{Coll: spec.AllReduce, Count: 8, Type: spec.Int8, Op: spec.Op{Kind: spec.Avg}, NRanks: 128},
		{Coll: spec.ReduceScatter, Count: 8, Type: spec.Uint8, Op: spec.Op{Kind: spec.Avg}, NRanks: 256},
	} {
		_, err := snac.Hierarchy(&c, snac.Nodes{Count: c.NRanks / 8, Local: 8})
		require.ErrorContains(t, err, fmt.Sprintf("Avg of %s over %d ranks", c.Type, c.NRanks))
	}
	c := spec.Call{Coll: spec.AllReduce, Count: 8, Type: spec.Uint8, Op: spec.Op{Kind: spec.Avg}, NRanks: 248}
	_, err := snac.Hierarchy(&c, snac.Nodes{Count: 31, Local: 8})
	require.NoError(t, err)
}

// TestHierarchyEpilogue runs AllReduce epilogues across nodes on the
// reference fabric: pieces of whole rows (fewer rows than a node has ranks
// too), each rank's own residual, in place and apart, against the reduced
// tensor followed by numeric.EpilogueRows. The inputs are multiples of 1/8
// small enough that every order of reduction is exact, so every rank's
// output, residual, quantized output and scales must match byte for byte.
func TestHierarchyEpilogue(t *testing.T) {
	const (
		residual = 1 + iota // the epilogue's buffers, by fake address
		weight
		quant
		scales
	)
	kinds := []spec.EpilogueKind{
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm,
		spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale,
		spec.EpilogueRMSNorm | spec.EpilogueQuantFP8,
		spec.EpilogueResidualAdd,
	}
	types := []spec.DataType{spec.Bfloat16, spec.Float16, spec.Float32}
	rng := rand.New(rand.NewPCG(16, 15))
	for _, nodes := range []snac.Nodes{{2, 1}, {1, 3}, {2, 2}, {3, 2}, {2, 4}} {
		n := nodes.Count * nodes.Local
		for i, sh := range []struct{ hidden, rows uint64 }{{1, 1}, {5, 3}, {64, 7}, {200, 2}, {3, 33}, {0, 0}} {
			kind, typ := kinds[i%len(kinds)], types[(i+n)%len(types)]
			inPlace := i%2 == 1
			hidden, rows := sh.hidden, sh.rows
			if hidden == 0 { // no rows
				hidden = 8
			}
			size := uint64(typ.Size())
			bytes := hidden * rows * size
			grid := func(b []byte) {
				for k := range uint64(len(b)) / size {
					numeric.SetFloat64(typ, b, int(k), float64(rng.IntN(33)-16)/8)
				}
			}
			w := make([]byte, hidden*size)
			grid(w)
			inputs, residuals := make([][]byte, n), make([][]byte, n)
			for r := range n {
				inputs[r], residuals[r] = make([]byte, bytes), make([]byte, bytes)
				grid(inputs[r])
				grid(residuals[r])
			}
			reduced := make([]byte, bytes)
			numeric.Reduce(reduced, inputs, typ, spec.Op{Kind: spec.Sum}, n, 0)
			type memory struct{ recv, residual, quant, scales []byte }
			want, got := make([]memory, n), make([]memory, n)
			for r := range n {
				want[r] = memory{slices.Clone(reduced), slices.Clone(residuals[r]), make([]byte, bytes/size), make([]byte, 4*max(rows, 1))}
				got[r] = memory{make([]byte, bytes), slices.Clone(residuals[r]), make([]byte, bytes/size), make([]byte, 4*max(rows, 1))}
				for _, m := range []memory{want[r], got[r]} {
					le.PutUint32(m.scales, math.Float32bits(0.5)) // the tensor's scale, read
				}
				m := want[r]
				numeric.EpilogueRows{Type: typ, Kind: kind, Hidden: int(hidden), Eps: 1e-5}.Run(m.recv, m.residual, w, m.quant, m.scales)
			}
			f := snactest.NewFabric()
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r := range n {
				e := spec.Epilogue{Kind: kind, Hidden: hidden, Eps: 1e-5, Weight: weight}
				if kind&spec.EpilogueResidualAdd != 0 {
					e.Residual = residual
				}
				if kind&spec.EpilogueQuantFP8 != 0 {
					e.Quant, e.Scales = quant, scales
				}
				call := &spec.Call{Coll: spec.AllReduce, Count: hidden * rows, Type: typ, Op: spec.Op{Kind: spec.Sum}, Rank: r, NRanks: n, Epilogue: e}
				prog, err := snac.Hierarchy(call, nodes)
				require.NoError(t, err)
				rk := &hierRank{prog: prog}
				rk.bufs[snac.BufSend], rk.bufs[snac.BufRecv] = inputs[r], got[r].recv
				if inPlace {
					copy(got[r].recv, inputs[r])
					rk.bufs[snac.BufSend] = got[r].recv
				}
				rk.bufs[snac.BufScratch] = make([]byte, prog.Scratch)
				party := &snactest.Party{Rank: r, Nodes: nodes,
					Memory: func(sp snac.Span, _ uintptr, k uint64) []byte { return rk.span(sp, k) },
					Epilogue: func(e *spec.Epilogue) (res, wt, q, sc []byte) {
						m := got[r]
						pick := func(p uintptr, b []byte) []byte {
							if p == 0 {
								return nil
							}
							return b
						}
						return pick(e.Residual, m.residual), pick(e.Weight, w), pick(e.Quant, m.quant), pick(e.Scales, m.scales)
					}}
				wg.Go(func() { errs[r] = runParty(f, party, rk) })
			}
			wg.Wait()
			name := fmt.Sprintf("%dx%d %s %s hidden=%d rows=%d inplace=%v", nodes.Count, nodes.Local, typ, kind, hidden, rows, inPlace)
			for r := range n {
				require.NoError(t, errs[r], "rank %d, %s", r, name)
				require.Equal(t, want[r], got[r], "rank %d, %s", r, name)
			}
		}
	}
}

// TestHierarchyChunksMatchFlatCollective runs every collective that runs in
// chunks across nodes (snac.Chunkable) as 3 chunks of its parts, one
// Program after another, against the flat collective, on 4 node shapes,
// in place and apart; the others are not Chunkable.
func TestHierarchyChunksMatchFlatCollective(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 3))
	types := []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int32, spec.Float16}
	for coll := range spec.NumCollectives {
		chunked := coll == spec.AllReduce || coll == spec.Broadcast || coll == spec.Reduce || coll == spec.AllGather || coll == spec.ReduceScatter ||
			coll == spec.AllToAll || coll == spec.AllGatherV || coll == spec.ReduceScatterV
		require.Equal(t, chunked, snac.Chunkable(&spec.Call{Coll: coll}), "%s", coll)
		if !chunked {
			continue
		}
		for _, nodes := range []snac.Nodes{{2, 1}, {2, 2}, {3, 2}, {2, 3}} {
			for _, count := range []uint64{3, 17, 301} {
				n := nodes.Count * nodes.Local
				c := hierCase{coll: coll, count: count, typ: types[rng.IntN(len(types))], op: spec.OpKind(rng.IntN(int(spec.PreMulSum) + 1)),
					root: rng.IntN(n), inPlace: rng.IntN(2) == 0}
				if c.op == spec.Avg && !c.typ.IsFloat() {
					c.op = spec.Sum
				}
				name := fmt.Sprintf("%dx%d/%s/%d/%s/%s/root%d/inplace=%v", nodes.Count, nodes.Local, coll, count, c.typ, spec.Op{Kind: c.op}, c.root, c.inPlace)
				t.Run(name, func(t *testing.T) { runHierChunks(t, nodes, c, rng, 3) })
			}
		}
	}
}
