package spec_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/spec"
)

func good() spec.Call {
	return spec.Call{Coll: spec.AllReduce, Send: 0x1000, Recv: 0x2000, Count: 16, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Rank: 1, NRanks: 4}
}

func TestValidateRejectsEachBadArgument(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *spec.Call)
		says   string
	}{
		{"unknown collective", func(c *spec.Call) { c.Coll = spec.NumCollectives }, "unknown collective"},
		{"rank too large", func(c *spec.Call) { c.Rank = 4 }, "rank 4 of 4"},
		{"negative rank", func(c *spec.Call) { c.Rank = -1 }, "rank -1"},
		{"no ranks", func(c *spec.Call) { c.NRanks = 0; c.Rank = 0 }, "of 0 ranks"},
		{"bad dtype", func(c *spec.Call) { c.Type = spec.NumTypes }, "invalid data type"},
		{"negative dtype", func(c *spec.Call) { c.Type = -1 }, "invalid data type"},
		{"bad op", func(c *spec.Call) { c.Op.Kind = 6 }, "invalid reduction op"},
		{"negative op", func(c *spec.Call) { c.Op.Kind = -1 }, "invalid reduction op"},
		{"bad root", func(c *spec.Call) { c.Coll = spec.Broadcast; c.Root = 4 }, "root 4"},
		{"negative root", func(c *spec.Call) { c.Coll = spec.Reduce; c.Root = -1 }, "root -1"},
		{"bad peer", func(c *spec.Call) { c.Coll = spec.SendRecv; c.IsSend = true; c.Peer = 9 }, "Send: peer 9"},
		{"bad recv peer", func(c *spec.Call) { c.Coll = spec.SendRecv; c.Peer = -2 }, "Recv: peer -2"},
		{"huge count", func(c *spec.Call) { c.Count = 1 << 62 }, "too large"},
		{"huge allgather", func(c *spec.Call) { c.Coll = spec.AllGather; c.Count = spec.MaxBytes / 8 }, "too large"},
		{"null send", func(c *spec.Call) { c.Send = 0 }, "sendbuff is NULL"},
		{"null recv", func(c *spec.Call) { c.Recv = 0 }, "recvbuff is NULL"},
		{"misaligned", func(c *spec.Call) { c.Send = 0x1002 }, "not aligned"},
		{"overlap", func(c *spec.Call) { c.Recv = c.Send + 8 }, "overlap"},
		{"short V", func(c *spec.Call) { c.Coll = spec.AllGatherV; c.Counts = []uint64{1, 2} }, "need 4 counts"},
		{"V overlap", func(c *spec.Call) {
			c.Coll = spec.AllGatherV
			c.Counts, c.Displs = []uint64{4, 4, 4, 4}, []uint64{0, 2, 8, 12}
		}, "slices 0 and 1 overlap"},
		{"V huge", func(c *spec.Call) {
			c.Coll = spec.ReduceScatterV
			c.Counts, c.Displs = []uint64{1, 1, 1, spec.MaxBytes + 1}, []uint64{0, 1, 2, 3}
		}, "too large"},
		{"V extent huge", func(c *spec.Call) { // each slice is bounded, their span is not
			c.Coll = spec.AllGatherV
			c.Counts, c.Displs = []uint64{1, 1, 1, spec.MaxBytes}, []uint64{0, 1, 2, spec.MaxBytes}
		}, "counts and displacements span 4 bytes to send and 8796093022208 to receive of float32, too large"},
		{"alltoallv short", func(c *spec.Call) { c.Coll = spec.AllToAllV; c.SendCounts = []uint64{1} }, "need 4 send and receive"},
		{"alltoallv overlap", func(c *spec.Call) {
			c.Coll = spec.AllToAllV
			c.SendCounts, c.SendDispls = []uint64{2, 2, 2, 2}, []uint64{0, 1, 4, 6}
			c.RecvCounts, c.RecvDispls = []uint64{1, 1, 1, 1}, []uint64{0, 1, 2, 3}
		}, "sendcounts slices 0 and 1 overlap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.change(&c)
			err := c.Validate()
			require.Error(t, err)
			require.True(t, errors.Is(err, errs.ErrInvalidArgument), "%v", err)
			require.Equal(t, errs.InvalidArgument, errs.CodeOf(err))
			require.Contains(t, err.Error(), tc.says)
		})
	}
}

func TestValidateAcceptsGoodCalls(t *testing.T) {
	cases := []func(c *spec.Call){
		func(c *spec.Call) {},
		func(c *spec.Call) { c.Recv = c.Send },                               // in place
		func(c *spec.Call) { c.Count = 0; c.Send, c.Recv = 0, 0 },            // empty: NULL is fine
		func(c *spec.Call) { c.Coll = spec.AllGather; c.Send = c.Recv + 64 }, // rank 1 in place
		func(c *spec.Call) { c.Coll = spec.Broadcast; c.Root = 3 },
		func(c *spec.Call) { c.Coll = spec.Reduce; c.Root = 0; c.Recv = 0 }, // non-root: no output
		func(c *spec.Call) { c.Coll = spec.SendRecv; c.IsSend = true; c.Peer = 2; c.Recv = 0 },
		func(c *spec.Call) {
			c.Coll = spec.AllGatherV
			c.Counts, c.Displs = []uint64{4, 0, 4, 4}, []uint64{0, 2, 4, 9}
		},
		func(c *spec.Call) { c.Coll = spec.AllGather; c.Op.Kind = 77 }, // copies ignore the op
	}
	for i, change := range cases {
		c := good()
		change(&c)
		require.NoError(t, c.Validate(), "case %d: %s", i, &c)
	}
}

func TestInPlace(t *testing.T) {
	const r, n, count = 2, 4, 8
	cases := []struct {
		coll       spec.Collective
		send, recv uintptr
		want       bool
	}{
		{spec.AllReduce, 0x1000, 0x1000, true},
		{spec.AllReduce, 0x1000, 0x2000, false},
		{spec.AllGather, 0x1000 + r*count*4, 0x1000, true},
		{spec.AllGather, 0x1000, 0x1000, false},
		{spec.ReduceScatter, 0x1000, 0x1000 + r*count*4, true},
		{spec.Gather, 0x1000 + r*count*4, 0x1000, true},
		{spec.Scatter, 0x1000, 0x1000 + r*count*4, true},
		{spec.AllToAll, 0x1000, 0x1000, true},
		{spec.Broadcast, 0x1000, 0x1000, true},
		{spec.SendRecv, 0x1000, 0x1000, false},
	}
	for _, tc := range cases {
		c := spec.Call{Coll: tc.coll, Send: tc.send, Recv: tc.recv, Count: count, Type: spec.Float32, Rank: r, NRanks: n}
		require.Equal(t, tc.want, c.InPlace(), "%s", tc.coll)
	}
	v := spec.Call{Coll: spec.AllGatherV, Count: 0, Type: spec.Int64, Rank: 1, NRanks: 2, Counts: []uint64{3, 5}, Displs: []uint64{0, 3}, Recv: 0x1000, Send: 0x1000 + 3*8}
	require.True(t, v.InPlace())
	v.Coll, v.Send, v.Recv = spec.ReduceScatterV, 0x1000, 0x1000+3*8
	require.True(t, v.InPlace())
}

func TestExtents(t *testing.T) {
	const count = 10
	cases := []struct {
		coll    spec.Collective
		rank    int
		in, out uint64
	}{
		{spec.AllReduce, 0, 40, 40},
		{spec.AllGather, 0, 40, 160},
		{spec.ReduceScatter, 0, 160, 40},
		{spec.AllToAll, 0, 160, 160},
		{spec.Broadcast, 1, 40, 40}, // root
		{spec.Broadcast, 0, 0, 40},
		{spec.Reduce, 1, 40, 40},
		{spec.Reduce, 0, 40, 0},
		{spec.Gather, 1, 40, 160},
		{spec.Gather, 2, 40, 0},
		{spec.Scatter, 1, 160, 40},
		{spec.Scatter, 3, 0, 40},
	}
	for _, tc := range cases {
		c := spec.Call{Coll: tc.coll, Count: count, Type: spec.Float32, Root: 1, Rank: tc.rank, NRanks: 4}
		in, out := c.Extents()
		require.Equal(t, [2]uint64{tc.in, tc.out}, [2]uint64{in, out}, "%s rank %d", tc.coll, tc.rank)
	}
	send := spec.Call{Coll: spec.SendRecv, Count: 3, Type: spec.Int64, IsSend: true, NRanks: 2}
	in, out := send.Extents()
	require.Equal(t, [2]uint64{24, 0}, [2]uint64{in, out})
	v := spec.Call{Coll: spec.AllToAllV, Type: spec.Int8, Rank: 0, NRanks: 2,
		SendCounts: []uint64{2, 0}, SendDispls: []uint64{5, 100}, RecvCounts: []uint64{1, 3}, RecvDispls: []uint64{3, 0}}
	in, out = v.Extents()
	require.Equal(t, [2]uint64{7, 4}, [2]uint64{in, out}, "empty slices do not extend a V buffer")
}

func TestFromLayoutsEveryRow(t *testing.T) {
	for c := spec.Collective(0); c < spec.NumCollectives; c++ {
		d := c.Definition()
		got, err := spec.FromLayouts(d.Consume, d.In, d.Out)
		if c == spec.SendRecv {
			require.NotEqual(t, spec.SendRecv, got, "Send/Recv have their own entry points")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c, got)
		require.Equal(t, d.Consume == spec.ConsumeReduce, c.Reduces())
		require.Equal(t, d.In.Rooted || d.Out.Rooted, c.Rooted())
	}
	_, err := spec.FromLayouts(spec.ConsumeReduce, spec.Layout{Shape: spec.Transposed}, spec.Layout{Shape: spec.Packed})
	require.ErrorIs(t, err, spec.ErrNoCollective)
	require.Equal(t, errs.InvalidArgument, errs.CodeOf(err))
}

// reducing returns a valid call of every reducing collective with op and
// typ by rank 0 of nranks (1 or 4).
func reducing(t *testing.T, typ spec.DataType, kind spec.OpKind, nranks int) []spec.Call {
	var calls []spec.Call
	for coll := spec.Collective(0); coll < spec.NumCollectives; coll++ {
		if !coll.Reduces() {
			continue
		}
		c := good()
		c.Coll, c.Type, c.Op, c.Rank, c.NRanks = coll, typ, spec.Op{Kind: kind, Scalar: 2}, 0, nranks
		if coll == spec.ReduceScatterV {
			c.Counts, c.Displs = []uint64{4, 0, 4, 8}[:nranks], []uint64{0, 4, 4, 8}[:nranks]
		}
		if coll.Columns() {
			c.Rows = 2
		}
		calls = append(calls, c)
	}
	require.NotEmpty(t, calls)
	return calls
}

func TestValidateRejectsAvgAndPreMulSumOnFloat8OnOneRank(t *testing.T) {
	for _, typ := range []spec.DataType{spec.Float8e4m3, spec.Float8e5m2} {
		for _, kind := range []spec.OpKind{spec.Avg, spec.PreMulSum} {
			for _, c := range reducing(t, typ, kind, 1) {
				err := c.Validate()
				require.Error(t, err, "%s", &c)
				require.ErrorIs(t, err, errs.ErrInvalidArgument)
				require.Equal(t, errs.InvalidArgument, errs.CodeOf(err))
				require.Contains(t, err.Error(), c.Coll.String()+": "+c.Op.String()+" on "+typ.String()+
					" is not supported on a one-rank communicator")
			}
		}
	}
}

func TestValidateAcceptsEveryOpOnEveryTypeElsewhere(t *testing.T) {
	for _, nranks := range []int{1, 4} {
		for typ := spec.DataType(0); typ < spec.NumTypes; typ++ {
			for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
				if nranks == 1 && typ.IsFloat8() && (kind == spec.Avg || kind == spec.PreMulSum) {
					continue
				}
				for _, c := range reducing(t, typ, kind, nranks) {
					require.NoError(t, c.Validate(), "%s", &c)
				}
			}
		}
	}
	for _, typ := range []spec.DataType{spec.Float8e4m3, spec.Float8e5m2} {
		for _, kind := range []spec.OpKind{spec.Avg, spec.PreMulSum} {
			// NCCL discards an empty collective before it looks at the op.
			for _, c := range reducing(t, typ, kind, 1) {
				c.Count, c.Counts = 0, []uint64{0}
				if c.Coll != spec.ReduceScatterV {
					c.Counts, c.Displs = nil, nil
				}
				require.NoError(t, c.Validate(), "empty %s", &c)
			}
			// Copies ignore the op.
			c := good()
			c.Coll, c.Type, c.Op.Kind, c.Send, c.Rank, c.NRanks = spec.AllGather, typ, kind, c.Recv, 0, 1
			require.NoError(t, c.Validate(), "%s", &c)
		}
	}
}

func TestIsFloat8AndDefinedFor(t *testing.T) {
	for typ := spec.DataType(-1); typ <= spec.NumTypes; typ++ {
		fp8 := typ == spec.Float8e4m3 || typ == spec.Float8e5m2
		require.Equal(t, fp8, typ.IsFloat8(), "%s", typ)
		for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
			op := spec.Op{Kind: kind}
			scaled := kind == spec.Avg || kind == spec.PreMulSum
			require.Equal(t, !fp8 || !scaled, op.DefinedFor(typ, 1), "%s on %s, one rank", op, typ)
			for _, n := range []int{2, 3, 8} {
				require.True(t, op.DefinedFor(typ, n), "%s on %s, %d ranks", op, typ, n)
			}
		}
	}
}

// The parts a layout names: producer p's part for consumer q and where it
// lands, in bytes.
func TestParts(t *testing.T) {
	type part = [2]uint64
	at := func(c spec.Call, p, q int) (in, out part) {
		a, b := c.InPart(p, q)
		x, y := c.OutPart(q, p)
		return part{a, b}, part{x, y}
	}
	c := spec.Call{Coll: spec.AllGather, Count: 10, Type: spec.Float32, NRanks: 4}
	in, out := at(c, 2, 1)
	require.Equal(t, part{0, 40}, in, "a packed input is one part")
	require.Equal(t, part{80, 40}, out, "lands in slice p of a scattered output")

	c.Coll = spec.ReduceScatter
	in, out = at(c, 2, 1)
	require.Equal(t, part{40, 40}, in, "slice q of a scattered input")
	require.Equal(t, part{0, 40}, out)

	c.Coll = spec.AllToAll
	in, out = at(c, 3, 0)
	require.Equal(t, part{0, 40}, in)
	require.Equal(t, part{120, 40}, out, "slice p of a transposed output")

	c = spec.Call{Coll: spec.AllGatherV, Type: spec.Float16, NRanks: 3, Counts: []uint64{1, 2, 3}, Displs: []uint64{5, 0, 2}}
	in, out = at(c, 2, 0)
	require.Equal(t, part{0, 6}, in, "a packed V input holds the producer's count")
	require.Equal(t, part{4, 6}, out, "at the producer's displacement")

	c = spec.Call{Coll: spec.AllToAllV, Type: spec.Int8, NRanks: 2,
		SendCounts: []uint64{1, 2}, SendDispls: []uint64{7, 3}, RecvCounts: []uint64{4, 5}, RecvDispls: []uint64{9, 0}}
	in, out = at(c, 0, 1)
	require.Equal(t, part{3, 2}, in, "AllToAllV reads each side's own lists")
	require.Equal(t, part{9, 4}, out)

	b := spec.Call{Coll: spec.Broadcast, Root: 1, NRanks: 3}
	require.Equal(t, []bool{false, true, false}, []bool{b.Produces(0), b.Produces(1), b.Produces(2)}, "a rooted input: the root produces")
	require.Equal(t, []bool{true, true, true}, []bool{b.Consumes(0), b.Consumes(1), b.Consumes(2)})
	g := spec.Call{Coll: spec.Gather, Root: 2, NRanks: 3}
	require.Equal(t, []bool{false, false, true}, []bool{g.Consumes(0), g.Consumes(1), g.Consumes(2)}, "a rooted output: the root consumes")

	for coll := spec.Collective(0); coll < spec.NumCollectives; coll++ {
		require.Equal(t, coll == spec.AllGatherV || coll == spec.ReduceScatterV || coll == spec.AllToAllV || coll == spec.AllToAllMatrix,
			coll.Vectored(), "%s", coll)
		require.Equal(t, coll == spec.AllToAllV, coll.PairCounts(), "%s: counts per pair", coll)
		require.Equal(t, coll == spec.AllToAllMatrix, coll.Matrix(), "%s: one matrix of counts", coll)
	}
}

// TestColumnLayouts: a column block's parts, strides and extents, and the
// calls and layout pairs that are refused, each with what is wrong.
func TestColumnLayouts(t *testing.T) {
	// 3 ranks, rows of 2 float32 per rank: the matrix is 4 rows x 6 columns.
	ag := spec.Call{Coll: spec.AllGatherColumns, Type: spec.Float32, Count: 8, Rows: 4, Rank: 1, NRanks: 3, Send: 4096, Recv: 8192}
	require.NoError(t, ag.Validate())
	require.Equal(t, spec.Stride{}, ag.InStride())
	require.Equal(t, spec.Stride{Row: 8, Pitch: 24}, ag.OutStride())
	off, length := ag.OutPart(0, 2)
	require.Equal(t, [2]uint64{16, 32}, [2]uint64{off, length}, "rank 2's block starts 2 columns of 8 bytes in, 4 rows of 8 bytes")
	in, out := ag.Extents()
	require.Equal(t, [2]uint64{32, 96}, [2]uint64{in, out})
	require.False(t, ag.InPlace())

	rs := spec.Call{Coll: spec.ReduceScatterColumns, Type: spec.Bfloat16, Count: 6, Rows: 3, Rank: 1, NRanks: 2, Send: 4096, Recv: 8192}
	require.NoError(t, rs.Validate())
	require.Equal(t, spec.Stride{Row: 4, Pitch: 8}, rs.InStride())
	off, length = rs.InPart(0, 1)
	require.Equal(t, [2]uint64{4, 12}, [2]uint64{off, length})
	in, out = rs.Extents()
	require.Equal(t, [2]uint64{24, 12}, [2]uint64{in, out})

	// A matrix wider than the ranks' blocks (Width): 10 float32 a row, the
	// 3 ranks' blocks its first 6 columns.
	wide := ag
	wide.Width = 10
	require.NoError(t, wide.Validate())
	require.Equal(t, spec.Stride{Row: 8, Pitch: 40}, wide.OutStride())
	in, out = wide.Extents()
	require.Equal(t, [2]uint64{32, 3*40 + 24}, [2]uint64{in, out}, "the last row ends after the blocks")
	require.Contains(t, wide.String(), "width=10")

	for _, tc := range []struct {
		name string
		edit func(c *spec.Call)
		says string
	}{
		{"no rows", func(c *spec.Call) { c.Rows = 0 }, "rows is 0"},
		{"rows not dividing", func(c *spec.Call) { c.Rows = 3 }, "not a whole number of rows"},
		{"rows on a plain collective", func(c *spec.Call) { c.Coll = spec.AllGather }, "no side is a column-block layout"},
		{"width on a plain collective", func(c *spec.Call) { c.Coll, c.Rows, c.Width = spec.AllGather, 0, 6 }, "width 6 given"},
		{"width narrower than the blocks", func(c *spec.Call) { c.Width = 5 }, "width 5 cannot hold a row of 3 ranks' blocks of 2 elements"},
		{"overlap", func(c *spec.Call) { c.Recv = c.Send + 8 }, "overlap"},
	} {
		c := ag
		tc.edit(&c)
		err := c.Validate()
		require.ErrorIs(t, err, errs.ErrInvalidArgument, tc.name)
		require.Contains(t, err.Error(), tc.says, tc.name)
	}

	columns := spec.Layout{Shape: spec.Scattered, Columns: true}
	packed := spec.Layout{Shape: spec.Packed}
	got, err := spec.FromLayouts(spec.ConsumeCopy, packed, columns)
	require.NoError(t, err)
	require.Equal(t, spec.AllGatherColumns, got)
	for _, tc := range []struct {
		consume spec.Consume
		in, out spec.Layout
		says    string
	}{
		{spec.ConsumeCopy, packed, spec.Layout{Shape: spec.Packed, Columns: true}, "no column blocks"},
		{spec.ConsumeCopy, packed, spec.Layout{Shape: spec.Scattered, Columns: true, V: true}, "neither V nor rooted"},
		{spec.ConsumeReduce, packed, columns, "column blocks serve all-gather"},
		{spec.ConsumeCopy, spec.Layout{Shape: 9}, packed, "unknown shape 9"},
	} {
		_, err := spec.FromLayouts(tc.consume, tc.in, tc.out)
		require.ErrorIs(t, err, spec.ErrNoCollective)
		require.Contains(t, err.Error(), tc.says)
	}
	require.Equal(t, "scattered columns", columns.String())
}

// TestMatrixLayout: an all-to-all whose pair sizes and destination offsets
// are one matrix on every rank: parts, extents, validation.
func TestMatrixLayout(t *testing.T) {
	// 2 ranks: 0 sends 3 to itself and 1 to rank 1; 1 sends 2 to rank 0 and 0 to itself.
	c := spec.Call{Coll: spec.AllToAllMatrix, Type: spec.Int32, Rank: 0, NRanks: 2, Send: 4096, Recv: 8192,
		Counts: []uint64{3, 1, 2, 0}, Displs: []uint64{4, 0, 0, 7}}
	require.NoError(t, c.Validate())
	off, length := c.InPart(0, 1)
	require.Equal(t, [2]uint64{12, 4}, [2]uint64{off, length}, "rank 0's slice for rank 1 follows its 3 for itself")
	off, length = c.OutPart(0, 1)
	require.Equal(t, [2]uint64{0, 8}, [2]uint64{off, length}, "rank 1's 2 elements land at rank 0's offset 0")
	in, out := c.Extents()
	require.Equal(t, [2]uint64{16, 28}, [2]uint64{in, out})
	require.False(t, c.InPlace())
	bad := c
	bad.Displs = []uint64{1, 0, 0, 7}
	require.ErrorContains(t, bad.Validate(), "ranks 0 and 1 overlap in rank 0's output")
	bad = c
	bad.Counts = []uint64{3, 1}
	require.ErrorContains(t, bad.Validate(), "need 2 x 2 counts")
	got, err := spec.FromLayouts(spec.ConsumeCopy, spec.Layout{Shape: spec.Scattered, V: true, Matrix: true},
		spec.Layout{Shape: spec.Transposed, V: true, Matrix: true})
	require.NoError(t, err)
	require.Equal(t, spec.AllToAllMatrix, got)
	_, err = spec.FromLayouts(spec.ConsumeCopy, spec.Layout{Shape: spec.Scattered, Matrix: true}, spec.Layout{Shape: spec.Transposed})
	require.ErrorContains(t, err, "a size matrix is a V layout's")
}

// An Avg's Divisor (a node's phase finishing a mean across nodes) is valid
// on Avg alone, and replaces the rank count it divides by.
func TestOpDivisor(t *testing.T) {
	for _, tc := range []struct {
		op    spec.Op
		valid bool
		by    int
	}{
		{spec.Op{Kind: spec.Avg}, true, 4},
		{spec.Op{Kind: spec.Avg, Divisor: 12}, true, 12},
		{spec.Op{Kind: spec.Sum, Divisor: 12}, false, 12},
		{spec.Op{Kind: spec.Avg, Divisor: -1}, false, -1},
	} {
		require.Equal(t, tc.valid, tc.op.Valid(), "%+v", tc.op)
		require.Equal(t, tc.by, tc.op.AvgDivisor(4), "%+v", tc.op)
		c := good()
		c.Coll, c.Op, c.Rank, c.NRanks = spec.AllReduce, tc.op, 0, 4
		require.Equal(t, tc.valid, c.Validate() == nil, "%+v", tc.op)
	}
}
