package comm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// premulScalar is rank r's PreMulSum factor: different on every rank
// (spectest.RankOp), and exactly representable in every type (unsigned
// types hold the negative ones wrapped).
func premulScalar(r int) float64 {
	return spectest.RankOp(spec.Op{Kind: spec.PreMulSum, Scalar: -2}, r).Scalar
}

// premulConfig's staging is small, so small sizes reach every regime at
// three ranks: premulBytes (bytes per transfer; for AllReduce the staged
// sizes count per shard) are packet, packet, staged, chunked and ring sizes
// (a Reduce stages one segment per slot, so its ring starts later).
func premulConfig() Config {
	cfg := testConfig()
	cfg.StageHalf, cfg.ChunkMax = 24<<10, 2<<10
	return cfg
}

func premulBytes(coll spec.Collective) []uint64 {
	if coll == spec.Reduce {
		return []uint64{8, 1000, 1500, 5000, 40000}
	}
	return []uint64{8, 1000, 1500, 5000, 20000}
}

// premulCall is rank r's call of coll moving about bytes per transfer, with
// custom op handle op and buffers placed in place or apart.
func premulCall(coll spec.Collective, t spec.DataType, bytes uint64, root, r, n int) *spec.Call {
	count := max(1, bytes/uint64(t.Size()))
	if coll == spec.AllReduce && bytes > premulConfig().PacketMax {
		count *= uint64(n)
	}
	c := &spec.Call{Coll: coll, Type: t, Count: count, Root: root, Rank: r, NRanks: n}
	if coll == spec.ReduceScatterV {
		c.Counts, c.Displs = make([]uint64, n), make([]uint64, n)
		var at uint64
		for q := range n {
			c.Counts[q] = count - count*uint64(q)/uint64(2*n) // unequal, never zero
			c.Displs[q] = at
			at += c.Counts[q] + 1 // a gap the call must not touch
		}
	}
	return c
}

// TestPreMulSumScalarPerRank: every rank multiplies its own input by its own
// scalar (NCCL's ncclRedOpCreatePreMulSum), for every reducing collective,
// type, regime and both residences, in place and apart. A host-immediate
// scalar is read when the op is made (later writes to it do not count); a
// device-resident one when each collective runs (on the host Atom it lies in
// host memory).
func TestPreMulSumScalarPerRank(t *testing.T) {
	const n = 3
	comms := startComms(t, n, premulConfig())
	rng := rand.New(rand.NewPCG(11, 12))
	residences := map[int]string{ScalarHostImmediate: "host-immediate", ScalarDevice: "device"}
	for residence, name := range residences {
		for _, coll := range []spec.Collective{spec.AllReduce, spec.Reduce, spec.ReduceScatter, spec.ReduceScatterV} {
			regimes := map[snac.Regime]bool{}
			for typ := spec.DataType(0); typ < spec.NumTypes; typ++ {
				t.Run(fmt.Sprintf("%s/%s/%s", name, coll, typ), func(t *testing.T) {
					ops := premulOps(t, comms, typ, residence)
					var runs []premulRun
					for i, bytes := range premulBytes(coll) {
						for _, inPlace := range []bool{false, true} {
							cs := make([]*spec.Call, n)
							for r := range n {
								cs[r] = premulCall(coll, typ, bytes, (i+1)%n, r, n)
								cs[r].Op = spec.Op{Kind: spec.PreMulSum, Scalar: premulScalar(r)}
							}
							plan, err := snac.Build(cs[0], comms[0].plans.topo)
							require.NoError(t, err)
							regimes[plan.Regime] = true
							runs = append(runs, premulRun{cs, inPlace})
						}
					}
					runPreMul(t, comms, ops, runs, rng)
					for r, c := range comms {
						require.NoError(t, c.RedOpDestroy(ops[r]))
					}
				})
			}
			for _, want := range []snac.Regime{snac.RegimePacket, snac.RegimeStaged, snac.RegimeChunked, snac.RegimeRing} {
				require.True(t, regimes[want], "%s %s: regime %s not reached", name, coll, want)
			}
		}
	}
}

// premulOps makes every rank's PreMulSum op of type t with its own scalar.
// The scalar's memory holds another value when a host-immediate op is made
// after (must be ignored), or before a device-resident one is made.
func premulOps(t *testing.T, comms []*Comm, typ spec.DataType, residence int) []int32 {
	ops := make([]int32, len(comms))
	for r, c := range comms {
		mem := newBuffer(t, typ.Size())
		decoy := premulScalar(r + 1)
		put := func(v float64) {
			if typ.IsFloat() {
				numeric.SetFloat64(typ, mem.bytes(), 0, v)
			} else {
				numeric.SetInt64(typ, mem.bytes(), 0, int64(v))
			}
		}
		if residence == ScalarDevice {
			put(decoy)
		} else {
			put(premulScalar(r))
		}
		op, err := c.RedOpCreatePreMulSum(mem.ptr, typ, residence)
		require.NoError(t, err)
		if residence == ScalarDevice {
			put(premulScalar(r))
		} else {
			put(decoy)
		}
		ops[r] = op
	}
	return ops
}

// premulRun is one call per rank (calls[r] carries rank r's op as the
// reference sees it), placed in place or apart.
type premulRun struct {
	calls   []*spec.Call
	inPlace bool
}

// runPreMul issues every run on every rank (rank r passes its op handle
// ops[r]), then checks every rank's outputs against spectest.
func runPreMul(t *testing.T, comms []*Comm, ops []int32, runs []premulRun, rng *rand.Rand) {
	t.Helper()
	n := len(comms)
	issued := make([][]spec.Call, n) // per rank, per run
	got := make([][][]byte, len(runs))
	want := make([][]spectest.Output, len(runs))
	for i, run := range runs {
		inputs := spectest.Inputs(rng, run.calls)
		want[i] = spectest.Expected(run.calls, inputs)
		got[i] = make([][]byte, n)
		for r := range n {
			call := *run.calls[r]
			in, out := call.Extents()
			send := newBuffer(t, int(in))
			copy(send.bytes(), inputs[r])
			call.Send = send.addr()
			if run.inPlace {
				// NCCL's in-place position: this rank's slice of the input.
				var at uint64
				switch call.Coll {
				case spec.ReduceScatter:
					at = uint64(r) * call.Count * uint64(call.Type.Size())
				case spec.ReduceScatterV:
					at = call.Displs[r] * uint64(call.Type.Size())
				}
				call.Recv = send.addr() + uintptr(at)
				got[i][r] = send.bytes()[at : at+out]
			} else {
				recv := newBuffer(t, int(out))
				call.Recv = recv.addr()
				got[i][r] = recv.bytes()[:out]
			}
			require.Equal(t, run.inPlace, call.InPlace(), "%s", &call)
			call.Op = spec.Op{Kind: spec.OpKind(ops[r])}
			issued[r] = append(issued[r], call)
		}
	}
	errList := onEveryRank(n, func(r int) error {
		for i := range issued[r] {
			if err := comms[r].Collective(&issued[r][i], 0); err != nil {
				return err
			}
		}
		return comms[r].Synchronize()
	})
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
	}
	for i, run := range runs {
		for r, c := range run.calls {
			require.NoError(t, spectest.Compare(c.Type, got[i][r], want[i][r]), "rank %d of %s inPlace=%v", r, c, run.inPlace)
		}
	}
}

// A PreMulSum op reduces only the type it was made for, as in NCCL: a call
// of another type is refused (its scalar, read as that type, would be
// garbage) and the communicator stays usable.
func TestPreMulSumOnlyItsType(t *testing.T) {
	c := startComms(t, 1, testConfig())[0]
	buf := newBuffer(t, 1024)
	for _, residence := range []int{ScalarHostImmediate, ScalarDevice} {
		op := premulOps(t, []*Comm{c}, spec.Float32, residence)[0]
		call := func(typ spec.DataType) *spec.Call {
			return &spec.Call{Coll: spec.AllReduce, Send: buf.addr(), Recv: buf.addr() + 512, Count: 16, Type: typ, Op: spec.Op{Kind: spec.OpKind(op)}}
		}
		for _, other := range []spec.DataType{spec.Float64, spec.Bfloat16, spec.Int32} {
			err := c.Collective(call(other), 0)
			require.ErrorIs(t, err, errs.ErrInvalidArgument, "%s", other)
			require.ErrorContains(t, err, "made for float32")
		}
		require.NoError(t, c.Collective(call(spec.Float32), 0))
		require.NoError(t, c.Synchronize())
		require.NoError(t, c.RedOpDestroy(op))
	}
}
