package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// call is one collective on every rank: inputs, device buffers, Plans.
// ops[r] is rank r's op as the reference sees it: its PreMulSum scalar
// (calls[r].Op may instead point at it in device memory).
type call struct {
	calls  []*spec.Call
	plans  []*snac.Plan
	ops    []spec.Op
	inputs [][]byte
	send   []devicePtr
	recv   []devicePtr
	out    []int // bytes of each rank's output
}

// newCall makes one call of coll per rank, rank r with spectest.RankOp(op, r).
func newCall(t *testing.T, ranks []*gpuRank, coll spec.Collective, typ spec.DataType, op spec.Op, count uint64, rng *rand.Rand) *call {
	ops := make([]spec.Op, len(ranks))
	for r := range ops {
		ops[r] = spectest.RankOp(op, r)
	}
	return newCallOps(t, ranks, coll, typ, ops, ops, count, false, rng)
}

// newCallOps makes one call per rank, rank r's Plan with ops[r] and its
// reference with ref[r]; in place, each rank's output lies where NCCL puts
// it in its input.
func newCallOps(t *testing.T, ranks []*gpuRank, coll spec.Collective, typ spec.DataType, ops, ref []spec.Op, count uint64, inPlace bool, rng *rand.Rand) *call {
	n := len(ranks)
	c := &call{ops: append([]spec.Op(nil), ref...)}
	for r, g := range ranks {
		sc := &spec.Call{Coll: coll, Count: count, Type: typ, Op: ops[r], Root: n - 1, Rank: r, NRanks: n}
		in, out := sc.Extents()
		send, recv := g.alloc(t, int(in)), devicePtr(0)
		switch {
		case !inPlace:
			recv = g.alloc(t, int(out))
		case coll == spec.ReduceScatter:
			recv = send + devicePtr(uint64(r)*count*uint64(typ.Size()))
		default:
			recv = send
		}
		sc.Send, sc.Recv = uintptr(send), uintptr(recv)
		require.Equal(t, inPlace, sc.InPlace(), "%s", sc)
		buf := make([]byte, in)
		spectest.Fill(rng, typ, ops[r].Kind, buf)
		g.upload(t, send, buf)
		plan, err := snac.Build(sc, g.topo)
		require.NoError(t, err)
		c.calls, c.plans, c.inputs = append(c.calls, sc), append(c.plans, plan), append(c.inputs, buf)
		c.send, c.recv, c.out = append(c.send, send), append(c.recv, recv), append(c.out, int(out))
	}
	return c
}

func (c *call) launch(t *testing.T, ranks []*gpuRank) {
	for r, g := range ranks {
		require.NoError(t, g.Launch(c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}}, uintptr(g.stream)))
	}
}

// expected is rank r's output, computed with numeric.Reduce in rank order:
// the same order and rounding the Atoms use, so results must be
// bit-identical. A PreMulSum multiplies each rank's input by that rank's
// scalar first (the product rounded to the type, as the rank sends it),
// then sums.
func (c *call) expected(r int) []byte {
	sc := c.calls[0]
	n := len(c.inputs)
	size := int(sc.Count) * sc.Type.Size()
	want := make([]byte, c.out[r])
	if len(want) == 0 {
		return want // not Reduce's root
	}
	inputs := c.inputs
	if sc.Op.Kind == spec.PreMulSum {
		inputs = make([][]byte, n)
		for q := range n {
			inputs[q] = make([]byte, len(c.inputs[q]))
			numeric.Reduce(inputs[q], c.inputs[q:q+1], sc.Type, c.ops[q], 1, 1)
		}
	}
	switch sc.Coll {
	case spec.AllReduce, spec.Reduce:
		numeric.Reduce(want, inputs, sc.Type, c.ops[r], n, 0)
	case spec.ReduceScatter:
		slices := make([][]byte, n)
		for q := range slices {
			slices[q] = inputs[q][r*size : (r+1)*size]
		}
		numeric.Reduce(want, slices, sc.Type, c.ops[r], n, 0)
	case spec.AllGather:
		for q := 0; q < n; q++ {
			copy(want[q*size:], c.inputs[q])
		}
	}
	return want
}

func (c *call) check(t *testing.T, ranks []*gpuRank, what string) {
	for r, g := range ranks {
		g.sync(t)
		require.NoError(t, g.AsyncError(), what)
		got := g.download(t, c.recv[r], c.out[r])
		if want := c.expected(r); !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s rank %d: first difference at byte %d of %d: got % x want % x", what, r, i, len(got),
				got[i:min(i+16, len(got))], want[i:min(i+16, len(want))])
		}
	}
}

var testCounts = []uint64{1, 7, 1000, 4099, 65537, 300001}

func TestGPUAllReduceEveryTypeAndOp(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(20*time.Second))
	rng := rand.New(rand.NewPCG(1, 2))
	for typ := spec.DataType(0); typ < spec.NumTypes; typ++ {
		for kind := spec.Sum; kind <= spec.PreMulSum; kind++ {
			op := spec.Op{Kind: kind, Scalar: 3}
			for _, count := range testCounts {
				what := fmt.Sprintf("AllReduce %s %s count %d", typ, op, count)
				c := newCall(t, ranks, spec.AllReduce, typ, op, count, rng)
				c.launch(t, ranks)
				c.check(t, ranks, what)
			}
		}
	}
}

// TestGPUPreMulSumScalarPerRank: each rank multiplies its own input by its
// own scalar (ncclRedOpCreatePreMulSum), every type, size regime and
// reducing collective, in place and apart, the scalar host-immediate (in the
// Launch) or device-resident (ncclScalarDevice: read from device memory
// while the kernel runs, so a new value there changes the next run of the
// same Plan).
func TestGPUPreMulSumScalarPerRank(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(20*time.Second))
	rng := rand.New(rand.NewPCG(11, 12))
	scalar := func(r int) spec.Op { return spectest.RankOp(spec.Op{Kind: spec.PreMulSum, Scalar: -2}, r) }
	for typ := spec.DataType(0); typ < spec.NumTypes; typ++ {
		for _, coll := range []spec.Collective{spec.AllReduce, spec.Reduce, spec.ReduceScatter} {
			for i, count := range testCounts {
				inPlace := i%2 == 1
				what := fmt.Sprintf("%s %s count %d inPlace=%v", coll, typ, count, inPlace)
				ops := []spec.Op{scalar(0), scalar(1)}
				c := newCallOps(t, ranks, coll, typ, ops, ops, count, inPlace, rng)
				c.launch(t, ranks)
				c.check(t, ranks, "host-immediate "+what)

				devOps := make([]spec.Op, len(ranks))
				scalars := make([]devicePtr, len(ranks))
				for r, g := range ranks {
					scalars[r] = g.alloc(t, typ.Size())
					g.upload(t, scalars[r], scalarBytes(typ, scalar(r).Scalar))
					devOps[r] = spec.Op{Kind: spec.PreMulSum, Scalar: 7, ScalarPtr: uintptr(scalars[r])} // Scalar is ignored
				}
				c = newCallOps(t, ranks, coll, typ, devOps, ops, count, inPlace, rng)
				c.launch(t, ranks)
				c.check(t, ranks, "device "+what)
				for r, g := range ranks {
					c.ops[r] = scalar(r + 2)
					g.upload(t, scalars[r], scalarBytes(typ, c.ops[r].Scalar))
					g.upload(t, c.send[r], c.inputs[r]) // in place, the first run overwrote it
				}
				c.launch(t, ranks)
				c.check(t, ranks, "device, scalars changed, "+what)
			}
		}
	}
}

// scalarBytes is v as one element of typ.
func scalarBytes(typ spec.DataType, v float64) []byte {
	b := make([]byte, typ.Size())
	if typ.IsFloat() {
		numeric.SetFloat64(typ, b, 0, v)
	} else {
		numeric.SetInt64(typ, b, 0, int64(v))
	}
	return b
}

func TestGPUGatherAndScatter(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(20*time.Second))
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []spec.DataType{spec.Int8, spec.Float16, spec.Float32, spec.Float64, spec.Float8e5m2} {
		for _, count := range testCounts {
			for _, coll := range []spec.Collective{spec.AllGather, spec.ReduceScatter} {
				c := newCall(t, ranks, coll, typ, spec.Op{Kind: spec.Sum}, count, rng)
				c.launch(t, ranks)
				c.check(t, ranks, fmt.Sprintf("%s %s count %d", coll, typ, count))
			}
		}
	}
}

// TestGPURepeatedCalls runs one cached Plan many times with new inputs: the
// epochs, staging halves and monotonic flags must carry from call to call.
func TestGPURepeatedCalls(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(20*time.Second))
	rng := rand.New(rand.NewPCG(5, 6))
	for _, count := range []uint64{5, 2000, 1 << 19} {
		c := newCall(t, ranks, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, count, rng)
		for i := 0; i < 20; i++ {
			for r, g := range ranks {
				spectest.Fill(rng, spec.Float32, spec.Sum, c.inputs[r])
				g.upload(t, c.send[r], c.inputs[r])
			}
			c.launch(t, ranks)
			c.check(t, ranks, fmt.Sprintf("call %d count %d", i, count))
		}
	}
}

// TestGPURanksSharingAGPU: four ranks on one GPU, each with eight calls
// queued on its stream before any has run. Ranks that share a device run
// without programmatic dependent launch, with which such runs of
// purlin-perf timed out, and their Plans get at most SMs / 4 blocks, so that
// the four kernels fit on the SMs together (Rank.shareDevices): asked for
// 64 blocks a call, 4 ranks on an H200 would need 256 SMs of its 132.
func TestGPURanksSharingAGPU(t *testing.T) {
	needGPUs(t, 1)
	const n, queued = 4, 8
	var sms int32
	require.Equal(t, cuSuccess, int(driver.DeviceGetAttribute(&sms, deviceAttrMultiprocessors, 0)))
	topology := func(n, rank int) snac.Topology {
		topo := gpuTopology(n, rank)
		topo.Workers = snac.MaxWorkers
		return topo
	}
	ranks := newGPURanksOnDevices(t, n, int64(10*time.Second), topology, func(int) int { return 0 })
	fit := int(sms) / n
	for r, g := range ranks {
		require.Equal(t, n, g.mem.crowd, "rank %d", r)
		require.False(t, g.pdl, "rank %d", r)
		require.Equal(t, min(fit, snac.MaxWorkers), g.Topology().Workers, "rank %d", r)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, count := range []uint64{300001, 1 << 20} { // staged, ring
		c := newCall(t, ranks, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, count, rng)
		require.LessOrEqual(t, len(c.plans[0].Workers), fit, "count %d", count)
		for range queued {
			c.launch(t, ranks)
		}
		c.check(t, ranks, fmt.Sprintf("%d calls queued, count %d", queued, count))
	}
}

// TestGPUGraphReplay captures a call into a CUDA graph on each rank (the Plan
// seen first outside capture, and one seen first during capture) and
// replays it; every replay must advance the epochs like a launch.
func TestGPUGraphReplay(t *testing.T) {
	ranks := newGPURanks(t, 2, int64(20*time.Second))
	rng := rand.New(rand.NewPCG(7, 8))
	for _, warm := range []bool{true, false} {
		for _, count := range []uint64{100, 1 << 18} {
			c := newCall(t, ranks, spec.AllReduce, spec.Bfloat16, spec.Op{Kind: spec.Sum}, count, rng)
			if warm {
				c.launch(t, ranks)
				c.check(t, ranks, "before capture")
			}
			execs := make([]uintptr, len(ranks))
			for r, g := range ranks {
				execs[r] = g.captureLaunch(t, c.plans[r], []atom.Buffers{{Send: uintptr(c.send[r]), Recv: uintptr(c.recv[r])}})
			}
			for i := 0; i < 10; i++ {
				for r, g := range ranks {
					spectest.Fill(rng, spec.Bfloat16, spec.Sum, c.inputs[r])
					g.upload(t, c.send[r], c.inputs[r])
				}
				for r, g := range ranks {
					require.NoError(t, inContext(g.ctx, func() error { return cuErr(driver.GraphLaunch(execs[r], g.stream), "cuGraphLaunch") }))
				}
				c.check(t, ranks, fmt.Sprintf("replay %d warm %v count %d", i, warm, count))
			}
			for r, g := range ranks {
				inContext(g.ctx, func() error { driver.GraphExecDestroy(execs[r]); return nil })
			}
		}
	}
}

// TestGPUPeerNeverComes: rank 0 runs a call rank 1 never joins. Its kernel
// must stop at the timeout, or at Abort, and report it; never hang.
func TestGPUPeerNeverComes(t *testing.T) {
	for _, abort := range []bool{false, true} {
		timeout := 300 * time.Millisecond
		if abort {
			timeout = 60 * time.Second
		}
		ranks := newGPURanks(t, 2, int64(timeout))
		rng := rand.New(rand.NewPCG(9, 10))
		for _, count := range []uint64{16, 1 << 18} { // packets, staged
			c := newCall(t, ranks, spec.AllReduce, spec.Float32, spec.Op{Kind: spec.Sum}, count, rng)
			g := ranks[0]
			start := time.Now()
			require.NoError(t, g.Launch(c.plans[0], []atom.Buffers{{Send: uintptr(c.send[0]), Recv: uintptr(c.recv[0])}}, uintptr(g.stream)))
			if abort {
				time.Sleep(100 * time.Millisecond)
				g.Abort()
			}
			g.sync(t)
			err := g.AsyncError()
			want := errs.ErrTimeout
			if abort {
				want = errs.ErrAborted
			}
			require.True(t, errors.Is(err, want), "got %v", err)
			require.Less(t, time.Since(start), 10*time.Second)
			t.Logf("abort=%v count=%d: %v after %v", abort, count, err, time.Since(start))
			break // the rank is broken after a failure; one call each
		}
	}
}

// TestGPURootDisagreement: each rank names itself the root of a rooted
// collective; every rank's kernel must stop with ErrMismatch (the Plans'
// agreement, snac/agree.go), well before the timeout, at packet, staged and
// ring sizes.
func TestGPURootDisagreement(t *testing.T) {
	const timeout = 10 * time.Second
	for _, coll := range []spec.Collective{spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter} {
		for _, perRank := range []uint64{40, 3000, 1536 << 10} {
			ranks := newGPURanks(t, 2, int64(timeout))
			start := time.Now()
			for r, g := range ranks {
				c := typedCall(coll, spec.Float32, spec.Op{Kind: spec.Sum}, 2, r, perRank)
				c.Root = r
				in, out := c.Extents()
				c.Send, c.Recv = uintptr(g.alloc(t, int(in))), uintptr(g.alloc(t, int(out)))
				plan, err := snac.Build(c, g.topo)
				require.NoError(t, err)
				require.NoError(t, g.Launch(plan, []atom.Buffers{{Send: c.Send, Recv: c.Recv}}, uintptr(g.stream)))
			}
			for r, g := range ranks {
				g.sync(t)
				err := g.AsyncError()
				require.True(t, errors.Is(err, errs.ErrMismatch), "%s of %d bytes a rank, rank %d: got %v", coll, perRank, r, err)
			}
			require.Less(t, time.Since(start), timeout/2, "%s of %d bytes a rank", coll, perRank)
		}
	}
}

// TestGPULoops: ring Plans whose chunks run as a loop's body (snac's
// Repeat, run.cu's shiftBatch), on two ranks sharing GPU 0 (the machine
// may have one), three calls queued: every repetition's flags and buffer
// addresses, a tail past the whole chunks, and the epochs across calls.
func TestGPULoops(t *testing.T) {
	needGPUs(t, 1)
	ranks := newGPURanksOnDevices(t, 2, int64(20*time.Second), gpuTopology, func(int) int { return 0 })
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct {
		coll spec.Collective
		typ  spec.DataType
		op   spec.OpKind
	}{
		{spec.AllReduce, spec.Float32, spec.Sum},
		{spec.AllReduce, spec.Bfloat16, spec.Sum},
		{spec.AllReduce, spec.Int32, spec.Max},
		{spec.ReduceScatter, spec.Float32, spec.Sum},
		{spec.AllGather, spec.Float16, spec.Sum},
		{spec.AllGather, spec.Int8, spec.Sum},
		{spec.Reduce, spec.Float32, spec.Sum},
	} {
		for _, count := range []uint64{4<<20/uint64(tc.typ.Size()) + 5, 6 << 20 / uint64(tc.typ.Size())} {
			what := fmt.Sprintf("%s %s %v count %d", tc.coll, tc.typ, spec.Op{Kind: tc.op}, count)
			c := newCall(t, ranks, tc.coll, tc.typ, spec.Op{Kind: tc.op}, count, rng)
			loops := false
			for _, p := range c.plans {
				require.NoError(t, p.LoopsValid(), what)
				for _, w := range p.Workers {
					loops = loops || w.Loops != 0
				}
			}
			require.True(t, loops, "%s: a Plan with a loop", what)
			for range 3 {
				c.launch(t, ranks)
			}
			c.check(t, ranks, what)
		}
	}
}
