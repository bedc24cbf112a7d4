package comm_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/comm"
	"purlin/comm/nettest"
	"purlin/comm/network"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// nodesConfig spans nodes virtual nodes over the host Atom, the inter-node
// phases on the test network, with small staging so node phases reach
// every SNAC regime.
func nodesConfig(nodes int) comm.Config {
	return comm.Config{Blocking: true, Timeout: 20 * time.Second, Workers: 2, StageHalf: 64 << 10,
		P2PHalf: 16 << 10, PacketMax: 1 << 10, ChunkMax: 8 << 10, Nodes: nodes, Network: nettest.Loopback}
}

func startNodes(t *testing.T, n int, cfg comm.Config) []*comm.Comm {
	t.Helper()
	id, err := comm.GetUniqueID()
	require.NoError(t, err)
	comms := make([]*comm.Comm, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { comms[r], errList[r] = comm.InitRank(n, id, r, cfg, r) })
	}
	wg.Wait()
	for r, err := range errList {
		require.NoError(t, err, "rank %d", r)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Go(func() { c.Destroy() })
		}
		wg.Wait()
	})
	return comms
}

// hostBytes is C memory (MemAlloc), which the host Atom may use from any goroutine.
func hostBytes(t *testing.T, n uint64) []byte {
	p, err := comm.MemAlloc(max(n, 1))
	require.NoError(t, err)
	t.Cleanup(func() { comm.MemFree(p) })
	return unsafe.Slice((*byte)(p), max(n, 1))[:n]
}

func addr(b []byte) uintptr {
	if cap(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// TestCommAcrossNodes runs every collective the multi-node path serves on
// communicators of 2x2, 2x3, 3x1 and 4x2 virtual nodes (node phases on
// Purlin's host Atom, the others on the test network), on random data,
// in place and apart, against the flat reference.
func TestCommAcrossNodes(t *testing.T) {
	colls := []spec.Collective{spec.AllReduce, spec.ReduceScatter, spec.AllGather, spec.AllToAll,
		spec.Broadcast, spec.Reduce, spec.Gather, spec.Scatter, spec.AllGatherV, spec.ReduceScatterV, spec.AllToAllV, spec.AllToAllMatrix,
		spec.AllGatherColumns, spec.ReduceScatterColumns}
	types := []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int32, spec.Float16, spec.Int8}
	rng := rand.New(rand.NewPCG(15, 2026))
	for _, shape := range [][2]int{{2, 2}, {2, 3}, {3, 1}, {4, 2}} {
		n := shape[0] * shape[1]
		comms := startNodes(t, n, nodesConfig(shape[0]))
		for _, coll := range colls {
			for _, count := range []uint64{1, 7, 300, 5000} {
				calls, inPlace, name := acrossCase(rng, types, shape, coll, count, false)
				t.Run(name, func(t *testing.T) {
					runAcross(t, comms, calls, inPlace, rng)
				})
			}
		}
	}
}

// acrossCase is every rank's call of coll on count elements on nodes of
// shape (nodes x ranks), of a type of types and an op, root and placement
// drawn from rng (pipelined: no mean of integers, which runs whole); name
// is the subtest's.
func acrossCase(rng *rand.Rand, types []spec.DataType, shape [2]int, coll spec.Collective, count uint64, pipelined bool) (calls []*spec.Call, inPlace bool, name string) {
	n := shape[0] * shape[1]
	typ, op := types[rng.IntN(len(types))], spec.OpKind(rng.IntN(int(spec.PreMulSum)+1))
	if op == spec.Avg && !typ.IsFloat() && pipelined {
		op = spec.Max
	}
	inPlace, root := rng.IntN(2) == 0, rng.IntN(n)
	calls = make([]*spec.Call, n)
	for r := range n {
		calls[r] = &spec.Call{Coll: coll, Count: count, Type: typ, Root: root, Rank: r, NRanks: n,
			Op: spectest.RankOp(spec.Op{Kind: op, Scalar: 0.5}, r)}
		if coll.Vectored() && !coll.PairCounts() && !coll.Matrix() {
			calls[r].Counts, calls[r].Displs = spectest.Uneven(count, n)
		}
		if coll.Columns() { // 4 rows in a matrix 5 wider than the blocks, or a row per element
			calls[r].Rows = count
			if count%4 == 0 {
				calls[r].Rows, calls[r].Width = 4, uint64(n)*count/4+5
			}
		}
	}
	if coll.Columns() {
		inPlace = false // no in-place form
	}
	if coll.PairCounts() || coll.Matrix() {
		spectest.Pairs(calls, count)
		inPlace = false // no in-place form
	}
	return calls, inPlace, fmt.Sprintf("%dx%d/%s/%d/%s/%s/inplace=%v", shape[0], shape[1], coll, count, typ, spec.Op{Kind: op}, inPlace)
}

// runAcross issues calls (one per rank) on comms and checks every output.
func runAcross(t *testing.T, comms []*comm.Comm, calls []*spec.Call, inPlace bool, rng *rand.Rand) {
	n := len(comms)
	inputs := spectest.Inputs(rng, calls)
	want := spectest.Expected(calls, inputs)
	outs := make([][]byte, n)
	for r, c := range calls {
		in, out := c.Extents()
		d := c.Coll.Definition()
		recv := hostBytes(t, out)
		send := hostBytes(t, in)
		copy(send, inputs[r])
		switch {
		case inPlace && d.In.Shape == spec.Packed && d.Out.Shape == spec.Scattered && !d.Out.Rooted:
			off, _ := c.OutPart(r, r)
			copy(recv[off:], inputs[r])
			send = recv[off : off+in]
		case inPlace && d.In.Shape == spec.Scattered && d.Out.Shape == spec.Packed && !d.In.Rooted:
			off, _ := c.InPart(r, r)
			send = hostBytes(t, in)
			copy(send, inputs[r])
			recv = send[off : off+out]
		case inPlace && in == out && in > 0:
			copy(recv, inputs[r])
			send = recv
		}
		c.Send, c.Recv, outs[r] = addr(send), addr(recv), recv
	}
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			call := *calls[r]
			if call.Op.Kind == spec.PreMulSum { // through NCCL's op handle, as a caller makes it
				scalar := hostBytes(t, uint64(call.Type.Size()))
				if call.Type.IsFloat() {
					numeric.SetFloat64(call.Type, scalar, 0, call.Op.Scalar)
				} else {
					numeric.SetInt64(call.Type, scalar, 0, int64(call.Op.Scalar))
				}
				op, err := comms[r].RedOpCreatePreMulSum(unsafe.Pointer(&scalar[0]), call.Type, comm.ScalarHostImmediate)
				if errList[r] = err; err != nil {
					return
				}
				call.Op = spec.Op{Kind: spec.OpKind(op)}
			}
			if errList[r] = comms[r].Collective(&call, 0); errList[r] == nil {
				errList[r] = comms[r].Synchronize()
			}
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
		require.NoError(t, spectest.CompareLevels(calls, inputs, r, outs[r], want[r]), "rank %d", r)
	}
}

// TestCommAcrossNodesGroups: sends and receives between every pair of
// ranks in one group (within nodes and across), and a group of collectives.
func TestCommAcrossNodesGroups(t *testing.T) {
	const n, count = 4, 33
	comms := startNodes(t, n, nodesConfig(2))
	send := make([][]byte, n)
	recv := make([][][]byte, n)
	for r := range n {
		send[r] = hostBytes(t, count*4)
		for i := range send[r] {
			send[r][i] = byte(r*7 + i)
		}
		recv[r] = make([][]byte, n)
		for p := range n {
			recv[r][p] = hostBytes(t, count*4)
		}
	}
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			comm.GroupStart()
			for p := range n {
				if p == r {
					continue
				}
				s := spec.Call{Coll: spec.SendRecv, Count: count, Type: spec.Float32, Peer: p, IsSend: true, Send: addr(send[r])}
				v := spec.Call{Coll: spec.SendRecv, Count: count, Type: spec.Float32, Peer: p, Recv: addr(recv[r][p])}
				comms[r].Collective(&s, 0)
				comms[r].Collective(&v, 0)
			}
			if errList[r] = comm.GroupEnd(); errList[r] == nil {
				errList[r] = comms[r].Synchronize()
			}
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
		for p := range n {
			if p != r {
				require.Equal(t, send[p], recv[r][p], "rank %d from %d", r, p)
			}
		}
	}
}

// TestCommAcrossNodesIntegerMean: Avg of the integer types on every
// reducing collective across nodes, in place and apart, equals the flat
// collective's truncated mean of every rank's inputs.
func TestCommAcrossNodesIntegerMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2026))
	types := []spec.DataType{spec.Int8, spec.Uint8, spec.Int32, spec.Int64, spec.Uint64}
	for _, shape := range [][2]int{{2, 2}, {3, 2}} {
		n := shape[0] * shape[1]
		comms := startNodes(t, n, nodesConfig(shape[0]))
		for _, coll := range []spec.Collective{spec.AllReduce, spec.ReduceScatter, spec.Reduce, spec.ReduceScatterV, spec.ReduceScatterColumns} {
			calls, inPlace, _ := acrossCase(rng, types, shape, coll, 300, false)
			for _, c := range calls {
				c.Op = spec.Op{Kind: spec.Avg}
			}
			t.Run(fmt.Sprintf("%dx%d/%s/%s/inplace=%v", shape[0], shape[1], coll, calls[0].Type, inPlace), func(t *testing.T) {
				runAcross(t, comms, calls, inPlace, rng)
			})
		}
	}
}

// TestCommAcrossNodesWindows: a window registers on a communicator across
// nodes, as NCCL's do on any communicator: WindowPeers gives the buffers of
// the rank's own node (the node's communicator maps them) and 0 for those
// of other nodes; a collective runs on the windows' buffers; a registration
// every rank refuses (sizes that differ) leaves the communicator usable;
// deregistration releases each rank's window.
func TestCommAcrossNodesWindows(t *testing.T) {
	const n, size = 4, 256
	comms := startNodes(t, n, nodesConfig(2))
	register := func(sizeOf func(r int) uint64) (bufs [][]byte, wins []uintptr, werr []error) {
		bufs, wins, werr = make([][]byte, n), make([]uintptr, n), make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			bufs[r] = hostBytes(t, size)
			wg.Go(func() { wins[r], werr[r] = comms[r].WindowRegister(addr(bufs[r]), sizeOf(r), comm.WindowCollSymmetric) })
		}
		wg.Wait()
		return bufs, wins, werr
	}
	_, _, werr := register(func(r int) uint64 { return size - uint64(r%2)*16 })
	for r := range n {
		require.ErrorContains(t, werr[r], "every rank must register the same size", "rank %d", r)
	}
	bufs, wins, werr := register(func(int) uint64 { return size })
	for r := range n {
		require.NoError(t, werr[r], "rank %d", r)
		peers, err := comms[r].WindowPeers(wins[r])
		require.NoError(t, err)
		require.Len(t, peers, n)
		for q := range n {
			if q/2 == r/2 {
				require.Equal(t, addr(bufs[q]), peers[q], "rank %d's view of rank %d, its node's", r, q)
			} else {
				require.Zero(t, peers[q], "rank %d's view of rank %d, on another node", r, q)
			}
		}
	}
	// An AllReduce in place on the windows' buffers: element i of rank r
	// is r*1000 + i, exact in float32, so the sum is 6000 + 4i.
	for r := range n {
		for i := range size / 4 {
			numeric.SetFloat64(spec.Float32, bufs[r], i, float64(r*1000+i))
		}
	}
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			call := spec.Call{Coll: spec.AllReduce, Count: size / 4, Type: spec.Float32, Send: addr(bufs[r]), Recv: addr(bufs[r]),
				Rank: r, NRanks: n}
			if comms[r].DirectCall(&call) || comms[r].PushesDirect(&call) {
				errList[r] = fmt.Errorf("a call across nodes pushes straight into outputs")
				return
			}
			if errList[r] = comms[r].Collective(&call, 0); errList[r] == nil {
				errList[r] = comms[r].Synchronize()
			}
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
		for i := range size / 4 {
			require.Equal(t, float64(6000+4*i), numeric.GetFloat64(spec.Float32, bufs[r], i), "rank %d element %d", r, i)
		}
	}
	for r := range n {
		require.NoError(t, comms[r].WindowDeregister(wins[r]), "rank %d", r)
	}
	// One more, left registered: Destroy (the test's cleanup) releases it.
	_, _, werr = register(func(int) uint64 { return size })
	for r := range n {
		require.NoError(t, werr[r], "rank %d", r)
	}
}

// TestCommAcrossNodesNeedsEvenNodes: ranks that cannot form equal nodes fail init clearly.
func TestCommAcrossNodesNeedsEvenNodes(t *testing.T) {
	requireInitFails(t, 3, nodesConfig(2), "cannot form 2 nodes")
}

// requireInitFails inits n ranks with cfg and requires every one to fail
// with an error containing want (a rank that succeeds is destroyed).
func requireInitFails(t *testing.T, n int, cfg comm.Config, want string) {
	id, err := comm.GetUniqueID()
	require.NoError(t, err)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c, err := comm.InitRank(n, id, r, cfg, r)
			if err == nil {
				c.Destroy()
			}
			errList[r] = err
		})
	}
	wg.Wait()
	for r := range n {
		require.ErrorContains(t, errList[r], want, "rank %d", r)
	}
}

// TestCommAcrossNodesPeerAbort: a rank that aborts while the others run
// fails them, within nodes and across, instead of leaving them waiting.
func TestCommAcrossNodesPeerAbort(t *testing.T) {
	const n, count = 4, 1 << 12
	cfg := nodesConfig(2)
	cfg.Timeout = 10 * time.Second
	comms := startNodes(t, n, cfg)
	errList := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for r := range n - 1 {
		wg.Go(func() {
			buf := hostBytes(t, count*4)
			c := spec.Call{Coll: spec.AllReduce, Count: count, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Send: addr(buf), Recv: addr(buf)}
			if errList[r] = comms[r].Collective(&c, 0); errList[r] == nil {
				errList[r] = comms[r].Synchronize()
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, comms[n-1].Abort())
	wg.Wait()
	for r := range n - 1 {
		require.Error(t, errList[r], "rank %d", r)
		t.Logf("rank %d: %v", r, errList[r])
	}
	require.Less(t, time.Since(start), cfg.Timeout, "the survivors failed by the abort, not by their timeout")
}

// TestCommAcrossNodesDefaultNetwork: without Config.Network the network is
// NCCL's, which needs the CUDA Atom; on the host Atom init fails saying so
// on every rank.
func TestCommAcrossNodesDefaultNetwork(t *testing.T) {
	cfg := nodesConfig(2)
	cfg.Network = nil
	requireInitFails(t, 2, cfg, "CUDA Atom")
}

// streamLog records the streams the test network's phases were issued on.
type streamLog struct {
	mu      sync.Mutex
	streams map[uintptr]int
}

// loggedNetwork is the test network, its phases' streams recorded in a log.
type loggedNetwork struct {
	network.Network
	log *streamLog
}

func (n loggedNetwork) Run(phases []snac.Phase, stream uintptr) error {
	n.log.mu.Lock()
	n.log.streams[stream]++
	n.log.mu.Unlock()
	return n.Network.Run(phases, stream)
}

// logNetwork makes cfg's network the test network, logged in the log it returns.
func logNetwork(cfg *comm.Config) *streamLog {
	l := &streamLog{streams: map[uintptr]int{}}
	cfg.Network = func(job network.Job) (network.Network, error) {
		net, err := nettest.Loopback(job)
		return loggedNetwork{net, l}, err
	}
	return l
}

// run runs calls on comms (runAcross) and returns the streams their
// network phases went on.
func (l *streamLog) run(t *testing.T, comms []*comm.Comm, calls []*spec.Call, inPlace bool, rng *rand.Rand) []uintptr {
	l.mu.Lock()
	clear(l.streams)
	l.mu.Unlock()
	runAcross(t, comms, calls, inPlace, rng)
	l.mu.Lock()
	defer l.mu.Unlock()
	var k []uintptr
	for s := range l.streams {
		k = append(k, s)
	}
	return k
}

// TestCommAcrossNodesPipelined: an AllReduce, Broadcast, Reduce, AllGather,
// ReduceScatter, AllToAll, AllGatherV or ReduceScatterV whose largest part
// is at least two network chunks runs in chunks whose network phases go on a
// stream beside the caller's (comm/nodes.go runPipelined), on every node
// shape, type and op, in place and apart, against the flat reference; a
// call below two chunks runs whole on the caller's stream.
func TestCommAcrossNodesPipelined(t *testing.T) {
	types := []spec.DataType{spec.Float32, spec.Bfloat16, spec.Int32, spec.Float64, spec.Int8}
	rng := rand.New(rand.NewPCG(16, 2026))
	for _, shape := range [][2]int{{2, 2}, {3, 1}, {4, 2}} {
		n := shape[0] * shape[1]
		cfg := nodesConfig(shape[0])
		cfg.NetChunk = 512
		log := logNetwork(&cfg)
		comms := startNodes(t, n, cfg)
		for _, coll := range []spec.Collective{spec.AllReduce, spec.Broadcast, spec.Reduce, spec.AllGather, spec.ReduceScatter, spec.AllToAll,
			spec.AllGatherV, spec.ReduceScatterV} {
			for _, count := range []uint64{100, 1000, 5001} {
				calls, inPlace, name := acrossCase(rng, types, shape, coll, count, true)
				bytes := snac.LargestPart(calls[0]) * uint64(calls[0].Type.Size())
				t.Run(name, func(t *testing.T) {
					streams := log.run(t, comms, calls, inPlace, rng)
					if bytes >= 2*cfg.NetChunk {
						require.NotContains(t, streams, uintptr(0), "a pipelined call's network phases on the caller's stream")
						require.NotEmpty(t, streams)
					} else {
						require.Subset(t, []uintptr{0}, streams, "a whole call's network phases on the caller's stream")
					}
				})
			}
		}
	}
}

// TestCommAcrossNodesPairsBeside: the all-to-alls sized per pair send
// their pairs across nodes on a stream beside the caller's, while the node
// moves the pairs within it (snac.Phase.Beside), and still equal the flat
// reference.
func TestCommAcrossNodesPairsBeside(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 7))
	cfg := nodesConfig(2)
	log := logNetwork(&cfg)
	comms := startNodes(t, 4, cfg)
	for _, coll := range []spec.Collective{spec.AllToAllV, spec.AllToAllMatrix} {
		for _, count := range []uint64{7, 3000} {
			calls, inPlace, name := acrossCase(rng, []spec.DataType{spec.Float32, spec.Int8}, [2]int{2, 2}, coll, count, false)
			t.Run(name, func(t *testing.T) {
				streams := log.run(t, comms, calls, inPlace, rng)
				require.NotEmpty(t, streams)
				require.NotContains(t, streams, uintptr(0), "pairs across nodes on the caller's stream")
			})
		}
	}
}

// TestCommAcrossNodesEpilogue runs AllReduce epilogues across virtual nodes
// on the host Atom, whole and pipelined in chunks of whole rows, in place
// and apart, each rank with its own residual: every rank's output,
// residual, quantized output and scales must equal the reduction followed
// by numeric.EpilogueRows, byte for byte (the inputs reduce exactly in any
// order).
func TestCommAcrossNodesEpilogue(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 15))
	for _, shape := range [][2]int{{2, 2}, {3, 1}, {2, 3}} {
		for _, chunk := range []uint64{0, 512} {
			n := shape[0] * shape[1]
			cfg := nodesConfig(shape[0])
			cfg.NetChunk = chunk
			comms := startNodes(t, n, cfg)
			for i, tc := range []struct {
				typ          spec.DataType
				kind         spec.EpilogueKind
				hidden, rows uint64
			}{
				{spec.Bfloat16, spec.EpilogueResidualAdd | spec.EpilogueRMSNorm, 64, 9},
				{spec.Float32, spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale, 7, 300},
				{spec.Float16, spec.EpilogueRMSNorm | spec.EpilogueQuantFP8, 1000, 3},
				{spec.Bfloat16, spec.EpilogueResidualAdd | spec.EpilogueRMSNorm | spec.EpilogueQuantFP8 | spec.EpilogueRowScale, 16, 1},
			} {
				inPlace := i%2 == 1
				name := fmt.Sprintf("%dx%d/chunk%d/%s/%s/hidden%d/rows%d/inplace=%v", shape[0], shape[1], chunk, tc.typ, tc.kind, tc.hidden, tc.rows, inPlace)
				t.Run(name, func(t *testing.T) { runAcrossEpilogue(t, comms, tc.typ, tc.kind, tc.hidden, tc.rows, inPlace, rng) })
			}
		}
	}
}

func runAcrossEpilogue(t *testing.T, comms []*comm.Comm, typ spec.DataType, kind spec.EpilogueKind, hidden, rows uint64, inPlace bool, rng *rand.Rand) {
	n := len(comms)
	size := uint64(typ.Size())
	count := hidden * rows
	bytes := count * size
	grid := func(b []byte) {
		for k := range uint64(len(b)) / size {
			numeric.SetFloat64(typ, b, int(k), float64(rng.IntN(33)-16)/8)
		}
	}
	weight := hostBytes(t, hidden*size)
	grid(weight)
	inputs := make([][]byte, n)
	type rank struct{ send, recv, residual, quant, scales []byte }
	ranks, want := make([]rank, n), make([]rank, n)
	for r := range n {
		inputs[r] = make([]byte, bytes)
		grid(inputs[r])
		k := &ranks[r]
		k.send, k.recv, k.residual = hostBytes(t, bytes), hostBytes(t, bytes), hostBytes(t, bytes)
		k.quant, k.scales = hostBytes(t, count), hostBytes(t, 4*rows)
		copy(k.send, inputs[r])
		if inPlace {
			k.recv = k.send
		}
		grid(k.residual)
		clear(k.quant)
		clear(k.scales)
		binary.LittleEndian.PutUint32(k.scales, math.Float32bits(0.5)) // the tensor's scale, read
		want[r] = rank{recv: make([]byte, bytes), residual: slices.Clone(k.residual), quant: make([]byte, count), scales: slices.Clone(k.scales)}
	}
	for r := range n {
		w := &want[r]
		numeric.Reduce(w.recv, inputs, typ, spec.Op{Kind: spec.Sum}, n, 0)
		numeric.EpilogueRows{Type: typ, Kind: kind, Hidden: int(hidden), Eps: 1e-6}.Run(w.recv, w.residual, weight, w.quant, w.scales)
	}
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			k := &ranks[r]
			e := spec.Epilogue{Kind: kind, Hidden: hidden, Weight: addr(weight), Eps: 1e-6}
			if kind&spec.EpilogueResidualAdd != 0 {
				e.Residual = addr(k.residual)
			}
			if kind&spec.EpilogueQuantFP8 != 0 {
				e.Quant, e.Scales = addr(k.quant), addr(k.scales)
			}
			call := spec.Call{Coll: spec.AllReduce, Type: typ, Op: spec.Op{Kind: spec.Sum}, Count: count, Send: addr(k.send), Recv: addr(k.recv), Epilogue: e}
			if errList[r] = comms[r].Collective(&call, 0); errList[r] == nil {
				errList[r] = comms[r].Synchronize()
			}
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
		k, w := &ranks[r], &want[r]
		require.Equal(t, w.recv, k.recv, "rank %d output", r)
		require.Equal(t, w.residual, k.residual, "rank %d residual", r)
		require.Equal(t, w.quant, k.quant, "rank %d quant", r)
		require.Equal(t, w.scales, k.scales, "rank %d scales", r)
	}
}

// TestCommAcrossNodesSplit: ncclCommSplit of a communicator across nodes
// by node, by rail and whole gives children whose collectives run (a
// child inherits the parent's settings: here its ranks form virtual nodes
// again, on real hosts they form nodes by host).
func TestCommAcrossNodesSplit(t *testing.T) {
	const n = 4
	for name, colorOf := range map[string]func(int) int{"node": func(r int) int { return r / 2 }, "rail": func(r int) int { return r % 2 }, "all": func(int) int { return 0 }} {
		t.Run(name, func(t *testing.T) {
			comms := startNodes(t, n, nodesConfig(2))
			kids := make([]*comm.Comm, n)
			errl := make([]error, n)
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() { kids[r], errl[r] = comms[r].Split(colorOf(r), r, nil) })
			}
			wg.Wait()
			for r := range n {
				require.NoError(t, errl[r], "rank %d", r)
			}
			t.Cleanup(func() {
				for _, k := range kids {
					if k != nil {
						k.Destroy()
					}
				}
			})
			groups := map[int][]*comm.Comm{}
			for r := range n {
				groups[colorOf(r)] = append(groups[colorOf(r)], kids[r])
			}
			for _, g := range groups {
				calls := make([]*spec.Call, len(g))
				for r := range g {
					calls[r] = &spec.Call{Coll: spec.AllReduce, Count: 33, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Rank: r, NRanks: len(g)}
				}
				runAcross(t, g, calls, false, rand.New(rand.NewPCG(1, 2)))
			}
		})
	}
}
