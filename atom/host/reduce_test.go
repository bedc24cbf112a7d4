package host

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// reducePlan: every rank stages (or sends as packets) its input, then
// reduces all ranks' copies, in rank order, into its output. A PreMulSum
// rank stages its input multiplied by its scalar (a one-source Reduce with
// Scale set); the staged variant reduces its own input from Send, scaled
// there, and the peers' staged copies as they are.
func reducePlan(t snac.Topology, typ spec.DataType, op spec.Op, size uint64, packets bool) *snac.Plan {
	me := t.Rank
	const check = 0xabc
	readySlot := func(src int) uint32 { return snac.FlagSlot(snac.Collective, snac.FlagReady, src, 0) }
	stage := func(dst snac.Ref) snac.Step {
		s := copyStep(dst, sendRef(0), size, check)
		if op.Kind == spec.PreMulSum {
			s.Verb, s.NSrc, s.Scale = snac.Reduce, 1, 1
		}
		return s
	}
	var steps []snac.Step
	red := snac.Step{Verb: snac.Reduce, NSrc: uint8(t.NRanks), Dst: recvRef(0), Bytes: size, Delta: 1, Check: check}
	if packets {
		for q := range t.NRanks {
			steps = append(steps, stage(packetRef(t, q, me)))
			red.Src[q] = packetRef(t, me, q)
		}
	} else {
		steps = append(steps, stage(stageRef(t, me, 0)))
		for q := range t.NRanks {
			if q != me {
				steps = append(steps, notifyStep(q, readySlot(me), 1, check))
			}
		}
		for q := range t.NRanks {
			if q != me {
				steps = append(steps, waitStep(readySlot(q), 1, check))
			}
			red.Src[q] = stageRef(t, q, 0)
		}
	}
	if !packets && op.Kind == spec.PreMulSum {
		red.Src[me], red.Scale = sendRef(0), 1<<me
	}
	steps = append(steps, red)
	var b planBuilder
	b.worker(snac.Collective, 0, steps...)
	b.p.NRanks, b.p.Type, b.p.Op = t.NRanks, typ, op
	return &b.p
}

// Every type and op, reduced from three ranks' staging and from packets,
// equals numeric.Reduce of the inputs in rank order. PreMulSum gets a
// different scalar on every rank: the sum of each input times its own rank's
// scalar.
func TestReduceEveryTypeAndOp(t *testing.T) {
	const n = 3
	ranks := newRanks(t, n, 20*time.Second)
	rng := rand.New(rand.NewPCG(7, 8))
	call := 0
	for typ := spec.DataType(0); typ < spec.NumTypes; typ++ {
		for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
			for _, packets := range []bool{false, true} {
				name := fmt.Sprintf("%v/%v/packets=%v", typ, spec.Op{Kind: kind}, packets)
				size := uint64(typ.Size() * (5 + rng.IntN(700)))
				op := spec.Op{Kind: kind, Scalar: 3}
				sends := make([][]byte, n)
				recvs := make([][]byte, n)
				for r := range n {
					sends[r] = make([]byte, size)
					for i := range sends[r] {
						sends[r][i] = byte(rng.Uint32())
					}
					if typ.IsFloat() { // moderate finite values
						for i := range int(size) / typ.Size() {
							numeric.SetFloat64(typ, sends[r], i, float64(rng.IntN(200)-100)/8)
						}
					}
					recvs[r] = make([]byte, size)
				}
				for r, rk := range ranks {
					require.NoError(t, rk.Launch(reducePlan(rk.topo, typ, spectest.RankOp(op, r), size, packets),
						[]atom.Buffers{{Send: addr(sends[r]), Recv: addr(recvs[r])}}, 0))
				}
				for _, err := range syncAll(ranks) {
					require.NoError(t, err, name)
				}
				terms := sends
				if kind == spec.PreMulSum {
					terms = make([][]byte, n)
					for r := range n {
						terms[r] = make([]byte, size)
						numeric.Reduce(terms[r], sends[r:r+1], typ, spectest.RankOp(op, r), 1, 1)
					}
				}
				want := make([]byte, size)
				numeric.Reduce(want, terms, typ, op, n, 0)
				for r := range n {
					require.Equal(t, want, recvs[r], "%s rank %d", name, r)
				}
				call++
			}
		}
	}
}

// PreMulSum may read its factor from memory (ncclScalarDevice), each rank
// from its own: 2*0.5 + 4*1.5.
func TestReduceScalarFromMemory(t *testing.T) {
	ranks := newRanks(t, 2, 20*time.Second)
	const size = 16
	sends, recvs := make([][]byte, 2), make([][]byte, 2)
	scalars := [][]byte{make([]byte, 4), make([]byte, 4)}
	for r, rk := range ranks {
		numeric.SetFloat64(spec.Float32, scalars[r], 0, []float64{0.5, 1.5}[r])
		sends[r], recvs[r] = make([]byte, size), make([]byte, size)
		for i := range size / 4 {
			numeric.SetFloat64(spec.Float32, sends[r], i, float64(2*(r+1)))
		}
		op := spec.Op{Kind: spec.PreMulSum, ScalarPtr: addr(scalars[r])}
		require.NoError(t, rk.Launch(reducePlan(rk.topo, spec.Float32, op, size, false), []atom.Buffers{{Send: addr(sends[r]), Recv: addr(recvs[r])}}, 0))
	}
	for _, err := range syncAll(ranks) {
		require.NoError(t, err)
	}
	for r := range 2 {
		require.Equal(t, 7.0, numeric.GetFloat64(spec.Float32, recvs[r], 3))
	}
}
