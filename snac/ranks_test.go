package snac_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// The property tests draw the rank count at random, and under -race only a
// few seeds run, so they may never see a full server. These tests run every
// collective at 4 and 8 ranks (MaxRanks) deterministically, at transfer
// sizes that reach every regime of testTopo, checked like the property tests.

// regimeLadder is bytes per transfer: empty, packets, staged, staged or ring
// (the sliced collectives reach the ring early), chunked or ring, ring.
var regimeLadder = []uint64{0, 700, 4 << 10, 20 << 10, 48 << 10, 80 << 10}

// ladderCalls is one call per rank of coll moving about perTransfer bytes in
// its longest transfer: equal V counts, packed displacements with a gap.
func ladderCalls(n int, coll spec.Collective, t spec.DataType, op spec.Op, perTransfer uint64, root int) []*spec.Call {
	count := perTransfer / uint64(t.Size())
	if coll == spec.AllReduce && perTransfer > testTopo(n).PacketMax {
		count *= uint64(n) // staged sizes count per shard; packets are decided on the whole payload
	}
	calls := callsFor(n, coll, t, op, count, root)
	ramp := func(q int) uint64 { return count - count*uint64(q)/uint64(2*n) } // unequal, non-zero when count is
	packed := func(counts []uint64) []uint64 {
		displs := make([]uint64, n)
		var at uint64
		for q := range n {
			displs[q] = at
			at += counts[q] + 1
		}
		return displs
	}
	switch coll {
	case spec.AllGatherV, spec.ReduceScatterV:
		counts := make([]uint64, n)
		for q := range n {
			counts[q] = ramp(q)
		}
		displs := packed(counts)
		for _, c := range calls {
			c.Counts, c.Displs = counts, displs
		}
	case spec.AllToAllV:
		for p, c := range calls {
			c.SendCounts, c.RecvCounts = make([]uint64, n), make([]uint64, n)
			for q := range n {
				c.SendCounts[q], c.RecvCounts[q] = ramp((p+q)%n), ramp((q+p)%n)
			}
			c.SendDispls, c.RecvDispls = packed(c.SendCounts), packed(c.RecvCounts)
		}
	}
	return calls
}

func TestEveryCollectiveEveryRegimeAtFourAndEightRanks(t *testing.T) {
	for _, n := range []int{4, 8} {
		union := map[snac.Regime]bool{}
		for coll := spec.Collective(0); coll < spec.SendRecv; coll++ {
			w := newWorld(t, n, uint64(200*n)+2*uint64(coll)) // even: without a copy engine
			seen := map[snac.Regime]bool{}
			for i, bytes := range regimeLadder {
				typ := everyType[(i+3*int(coll)+n)%len(everyType)]
				op := spectest.OpFor(spec.Op{Kind: spec.OpKind((i + int(coll)) % (int(spec.PreMulSum) + 1)), Scalar: -2}, typ, n)
				calls := ladderCalls(n, coll, typ, op, bytes, (i*3+int(coll))%n)
				plan, err := snac.Build(calls[0], w.rankTopo(0))
				require.NoError(t, err, "n=%d %s", n, describe(calls, false))
				seen[plan.Regime], union[plan.Regime] = true, true
				inPlace := inPlaceExists(coll) && i%2 == 1
				require.NoError(t, w.run(calls, inPlace), "n=%d %s", n, describe(calls, inPlace))
				if plan.Regime == snac.RegimeRing {
					break // the largest regime: larger sizes only cost time (under -race)
				}
			}
			for _, r := range []snac.Regime{snac.RegimeEmpty, snac.RegimePacket, snac.RegimeStaged, snac.RegimeRing} {
				require.True(t, seen[r], "n=%d %s: regime %s never reached", n, coll, r)
			}
		}
		require.True(t, union[snac.RegimeChunked], "n=%d: the chunked regime never reached", n)
	}
}

// TestPointToPointAtFourAndEightRanks: every rank sends to two others at
// once (a shifted ring and its opposite), at packet, staged and ring sizes,
// so every pair of send/receive channels is in use together.
func TestPointToPointAtFourAndEightRanks(t *testing.T) {
	for _, n := range []int{4, 8} {
		w := newWorld(t, n, uint64(n))
		for i, bytes := range []uint64{24, 700, 6 << 10, 40 << 10} {
			typ := everyType[(i*5+n)%len(everyType)]
			prog := spectest.Program{NRanks: n}
			for r := range n {
				prog.Events = append(prog.Events, spectest.Event{From: r, To: (r + 1) % n, Count: bytes / uint64(typ.Size()), Type: typ},
					spectest.Event{From: r, To: (r + n/2) % n, Count: bytes/uint64(typ.Size()) + 1, Type: typ})
			}
			prog.OneGroup()
			w.runProgram(&prog, whole)
		}
	}
}
