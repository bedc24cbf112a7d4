package snac_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// TestColumnCollectives runs the column-block rows of the layout table
// (AllGatherColumns, ReduceScatterColumns) through every regime, with rows
// whose bytes are and are not whole packets, against spectest's reference.
func TestColumnCollectives(t *testing.T) {
	type shape struct {
		rows, width uint64 // a slice is rows x width elements
	}
	shapes := []shape{{1, 1}, {3, 1}, {2, 5}, {7, 3}, {4, 64}, {16, 100}, {5, 800}, {64, 240}, {8, 1500}, {3, 7000}}
	ops := []spec.Op{{Kind: spec.Sum}, {Kind: spec.Max}, {Kind: spec.PreMulSum, Scalar: 0.5}}
	for _, n := range []int{1, 2, 3, 4} {
		for _, coll := range []spec.Collective{spec.AllGatherColumns, spec.ReduceScatterColumns} {
			for i, s := range shapes {
				for _, typ := range []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int8, spec.Float64} {
					op := ops[(i+int(typ))%len(ops)]
					if !op.DefinedFor(typ, n) {
						op = spec.Op{Kind: spec.Sum}
					}
					t.Run(fmt.Sprintf("%s/n%d/%dx%d/%s/%s", coll, n, s.rows, s.width, typ, op), func(t *testing.T) {
						w := newWorld(t, n, uint64(n)*1000+uint64(i)*10+uint64(typ))
						calls := callsFor(n, coll, typ, op, s.rows*s.width, 0)
						for _, c := range calls {
							c.Rows = s.rows
						}
						require.NoError(t, w.run(calls, false), describe(calls, false))
					})
				}
			}
		}
	}
}

// TestColumnRegimes: the shapes above reach packets and every staged regime,
// and rows of a width that is no whole number of packets never use packets.
func TestColumnRegimes(t *testing.T) {
	seen := map[snac.Regime]bool{}
	for _, s := range [][2]uint64{{1, 1}, {4, 64}, {16, 100}, {5, 800}, {64, 240}, {8, 1500}, {3, 7000}} {
		for _, coll := range []spec.Collective{spec.AllGatherColumns, spec.ReduceScatterColumns} {
			for _, n := range []int{2, 4} {
				c := &spec.Call{Coll: coll, Type: spec.Float32, Count: s[0] * s[1], Rows: s[0], NRanks: n}
				p, err := snac.Build(c, testTopo(n))
				require.NoError(t, err)
				seen[p.Regime] = true
			}
		}
	}
	for r := snac.RegimePacket; r <= snac.RegimeRing; r++ {
		require.True(t, seen[r], "regime %s never reached", r)
	}
	odd := &spec.Call{Coll: spec.AllGatherColumns, Type: spec.Float32, Count: 6, Rows: 2, NRanks: 4} // rows of 12 bytes
	p, err := snac.Build(odd, testTopo(4))
	require.NoError(t, err)
	require.NotEqual(t, snac.RegimePacket, p.Regime)
	for _, st := range p.Steps {
		require.NotEqual(t, snac.SpacePacket, st.Dst.Space, "rows of 12 bytes as packets")
	}
}

// TestMatrixAllToAll runs AllToAllMatrix (pair sizes and destination
// offsets in one matrix every rank passes) with random sizes, empty pairs
// and gaps between the slices of an output, through every regime, against
// spectest's reference: bytes outside the slices must stay untouched.
func TestMatrixAllToAll(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for i, most := range []uint64{0, 1, 9, 300, 3000, 20000} {
			for _, typ := range []spec.DataType{spec.Float32, spec.Int8, spec.Float64} {
				rng := rand.New(rand.NewPCG(uint64(n), uint64(i)*10+uint64(typ)))
				counts, displs := make([]uint64, n*n), make([]uint64, n*n)
				for q := range n {
					var at uint64
					for p := range n {
						counts[p*n+q] = rng.Uint64N(most + 1)
						displs[p*n+q] = at + rng.Uint64N(3) // a gap before each slice
						at = displs[p*n+q] + counts[p*n+q]
					}
				}
				w := newWorld(t, n, uint64(n)*100+uint64(i))
				calls := callsFor(n, spec.AllToAllMatrix, typ, spec.Op{}, 0, 0)
				for _, c := range calls {
					c.Counts, c.Displs = counts, displs
				}
				require.NoError(t, w.run(calls, false), describe(calls, false))
			}
		}
	}
}

// TestStepRows: the addressing of strided Refs (At, Runs) and the shapes
// RowsValid refuses, which every Atom trusts.
func TestStepRows(t *testing.T) {
	s := snac.Step{Verb: snac.Copy, Bytes: 20, Row: 8, Col: 6,
		Dst: snac.Ref{Space: snac.SpaceRecv, Off: 106, Pitch: 24}, Src: [snac.MaxSrc]snac.Ref{{Space: snac.SpaceSend, Off: 40}}}
	require.True(t, s.RowsValid())
	require.Equal(t, []uint64{106, 107, 124, 131, 172}, []uint64{s.At(s.Dst, 0), s.At(s.Dst, 1), s.At(s.Dst, 2), s.At(s.Dst, 9), s.At(s.Dst, 18)})
	require.Equal(t, uint64(59), s.At(s.Src[0], 19), "a plain Ref is contiguous")
	var runs [][2]uint64
	s.Runs(func(k, n uint64) { runs = append(runs, [2]uint64{k, n}) })
	require.Equal(t, [][2]uint64{{0, 2}, {2, 8}, {10, 8}, {18, 2}}, runs)
	for _, tc := range []struct {
		name string
		edit func(s *snac.Step)
	}{
		{"strided staging", func(s *snac.Step) { s.Dst.Space = snac.SpaceStage }},
		{"no row", func(s *snac.Step) { s.Row = 0 }},
		{"col past the row", func(s *snac.Step) { s.Col = 8 }},
		{"pitch under the row", func(s *snac.Step) { s.Dst.Pitch = 7 }},
		{"first row before the buffer", func(s *snac.Step) { s.Dst.Off = 5 }},
		{"packets cut mid-packet", func(s *snac.Step) { s.Src[0] = snac.Ref{Space: snac.SpacePacket} }},
	} {
		bad := s
		tc.edit(&bad)
		require.False(t, bad.RowsValid(), tc.name)
	}
	ok := s
	ok.Row, ok.Col, ok.Src[0] = 16, 8, snac.Ref{Space: snac.SpacePacket}
	require.True(t, ok.RowsValid(), "packets with rows of whole packets")
}
