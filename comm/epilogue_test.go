package comm

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/numeric"
	"purlin/spec"
)

// epilogueRank is one rank's buffers of an AllReduce with an epilogue.
type epilogueRank struct {
	send, recv, residual, weight, quant, scales cBuffer
}

// TestEpilogueThroughComm runs AllReduce epilogues on the host Atom through
// the communicator, alone and in a group beside a plain AllReduce (merged
// into one Plan), in place and apart, and checks every rank's output,
// residual, quantized output and row scales against the reduction of all
// inputs followed by numeric.EpilogueRows. A rejected epilogue leaves the
// communicator usable.
func TestEpilogueThroughComm(t *testing.T) {
	for _, n := range []int{2, 3} {
		comms := startComms(t, n, testConfig())
		rng := rand.New(rand.NewPCG(uint64(n), 16))
		kind := spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale
		for _, tc := range []struct {
			typ          spec.DataType
			hidden, rows uint64
			inPlace      bool
			grouped      bool
		}{
			{spec.Bfloat16, 64, 3, false, false},
			{spec.Float16, 1000, 9, true, false},
			{spec.Float32, 7, 500, false, true},
			{spec.Bfloat16, 2048, 5, true, true},
		} {
			size := uint64(tc.typ.Size())
			count := tc.hidden * tc.rows
			bytes := count * size
			ranks := make([]epilogueRank, n)
			inputs := make([][]byte, n)
			weight, residual := make([]byte, tc.hidden*size), make([]byte, bytes)
			grid := func(b []byte) {
				for i := range uint64(len(b)) / size {
					numeric.SetFloat64(tc.typ, b, int(i), float64(rng.IntN(33)-16)/8)
				}
			}
			grid(weight)
			grid(residual)
			for r := range n {
				k := &ranks[r]
				k.send, k.recv, k.residual = newBuffer(t, int(bytes)), newBuffer(t, int(bytes)), newBuffer(t, int(bytes))
				k.weight, k.quant, k.scales = newBuffer(t, len(weight)), newBuffer(t, int(count)), newBuffer(t, int(4*tc.rows))
				if tc.inPlace {
					k.recv = k.send
				}
				inputs[r] = make([]byte, bytes)
				grid(inputs[r])
				copy(k.send.bytes(), inputs[r])
				copy(k.residual.bytes(), residual)
				copy(k.weight.bytes(), weight)
			}
			want, wantRes := make([]byte, bytes), append([]byte(nil), residual...)
			wantQuant, wantScales := make([]byte, count), make([]byte, 4*tc.rows)
			numeric.Reduce(want, inputs, tc.typ, spec.Op{Kind: spec.Sum}, n, 0)
			numeric.EpilogueRows{Type: tc.typ, Kind: kind, Hidden: int(tc.hidden), Eps: 1e-6}.Run(want, wantRes, weight, wantQuant, wantScales)
			plain := make([]cBuffer, n) // the grouped plain AllReduce's buffer, in place
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() {
					k := &ranks[r]
					call := spec.Call{Coll: spec.AllReduce, Type: tc.typ, Op: spec.Op{Kind: spec.Sum}, Count: count, Send: k.send.addr(), Recv: k.recv.addr(),
						Epilogue: spec.Epilogue{Kind: kind, Hidden: tc.hidden, Residual: k.residual.addr(), Weight: k.weight.addr(), Quant: k.quant.addr(), Scales: k.scales.addr(), Eps: 1e-6}}
					bad := call
					bad.Epilogue.Hidden = tc.hidden + 1
					if count%(tc.hidden+1) != 0 {
						require.ErrorIs(t, comms[r].Collective(&bad, 0), errs.ErrInvalidArgument)
					}
					onThread(func() {
						if tc.grouped {
							require.NoError(t, GroupStart())
							plain[r] = newBuffer(t, 4*100)
							p := spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 100, Send: plain[r].addr(), Recv: plain[r].addr()}
							for i := range 100 {
								binary.LittleEndian.PutUint32(plain[r].bytes()[4*i:], math.Float32bits(float32(r+i)))
							}
							require.NoError(t, comms[r].Collective(&p, 0))
						}
						require.NoError(t, comms[r].Collective(&call, 0))
						if tc.grouped {
							require.NoError(t, GroupEnd())
						}
					})
					require.NoError(t, comms[r].Synchronize())
				})
			}
			wg.Wait()
			for r := range n {
				k := &ranks[r]
				require.Equal(t, want, k.recv.bytes(), "rank %d output, %+v", r, tc)
				require.Equal(t, wantRes, k.residual.bytes(), "rank %d residual, %+v", r, tc)
				require.Equal(t, wantQuant, k.quant.bytes(), "rank %d quant, %+v", r, tc)
				require.Equal(t, wantScales, k.scales.bytes(), "rank %d scales, %+v", r, tc)
				if tc.grouped {
					for i := range 100 {
						got := math.Float32frombits(binary.LittleEndian.Uint32(plain[r].bytes()[4*i:]))
						require.Equal(t, float32(n*i+n*(n-1)/2), got, "rank %d grouped AllReduce element %d", r, i)
					}
				}
			}
		}
	}
}
