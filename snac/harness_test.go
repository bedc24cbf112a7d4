package snac_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/snac/snactest"
	"purlin/spec"
	"purlin/spec/spectest"
)

// testTopo is small, so every regime (ring included) is reached by small sizes.
func testTopo(n int) snac.Topology {
	return snac.Topology{NRanks: n, Workers: 4, StageHalf: 64 << 10, P2PHalf: 16 << 10, PacketMax: 2 << 10, ChunkMax: 8 << 10}
}

// engineTopo is testTopo with a copy engine: 2 workers, chunks of 4 KiB,
// for every copy collective from 6 KiB on.
func engineTopo(n int) snac.Topology {
	t := testTopo(n)
	t.EngineMin, t.EngineWorkers, t.EngineChunk = 6<<10, 2, 4<<10
	return t
}

const base = 1 << 12 // simulated address of every rank's user memory

// world is n simulated ranks running calls one after another.
type world struct {
	t    *testing.T
	n    int
	topo snac.Topology
	sim  *snactest.Sim
	rng  *rand.Rand
	// plans are each rank's Plans by shape, as comm keeps them: calls of
	// one shape get one *Plan, which a merged group may hold twice.
	plans []*snac.Cache
	// alter, when set, changes rank r's topology (ranks whose settings differ).
	alter func(r int, t *snac.Topology)
}

// newWorld makes n ranks; with an odd seed their Atom has a copy engine,
// from 6 KiB (engine.go), so every test runs both forms of the copies.
func newWorld(t *testing.T, n int, seed uint64) *world {
	topo := testTopo(n)
	if seed%2 == 1 {
		topo = engineTopo(n)
	}
	w := &world{t: t, n: n, topo: topo, sim: snactest.New(topo, seed), rng: rand.New(rand.NewPCG(seed, 7))}
	for range n {
		w.plans = append(w.plans, snac.NewCache(64, 1<<40))
	}
	return w
}

func (w *world) rankTopo(r int) snac.Topology {
	t := w.topo
	t.Rank = r
	if w.alter != nil {
		w.alter(r, &t)
	}
	return t
}

// place gives a call addresses: disjoint, or NCCL's in-place positions.
// It returns the memory size the call needs.
func place(c *spec.Call, inPlace bool) uint64 {
	in, out := c.Extents()
	size := uint64(c.Type.Size())
	c.Send, c.Recv = base, base+uintptr(in)+64
	for !inPlace && c.InPlace() { // apart, though a V call's empty part of this rank may lie where Recv fell
		c.Recv += 64
	}
	if inPlace {
		switch c.Coll {
		case spec.AllReduce, spec.Broadcast, spec.Reduce, spec.AllToAll:
			c.Recv = base
		case spec.AllGather, spec.Gather:
			c.Recv, c.Send = base, base+uintptr(uint64(c.Rank)*c.Count*size)
		case spec.ReduceScatter, spec.Scatter:
			c.Recv = base + uintptr(uint64(c.Rank)*c.Count*size)
		case spec.AllGatherV:
			c.Recv, c.Send = base, base+uintptr(c.Displs[c.Rank]*size)
		case spec.ReduceScatterV:
			c.Recv = base + uintptr(c.Displs[c.Rank]*size)
		}
	}
	return max(uint64(c.Send)+in, uint64(c.Recv)+out) - base + 64
}

// run builds and runs one call per rank (calls[r] for rank r), checks the
// outputs against spectest and that nothing else was touched.
func (w *world) run(calls []*spec.Call, inPlace bool) error {
	inputs := spectest.Inputs(w.rng, calls)
	want := spectest.Expected(calls, inputs)
	launches := make([][]*snactest.Launch, w.n)
	for r, c := range calls {
		l, err := w.launch(c, inPlace, inputs[r])
		if err != nil {
			return err
		}
		launches[r] = []*snactest.Launch{l}
	}
	if err := w.sim.Run(launches); err != nil {
		return err
	}
	for r, c := range calls {
		w.checkOutput(c, launches[r][0], want[r], inPlace)
	}
	return nil
}

func (w *world) launch(c *spec.Call, inPlace bool, input []byte) (*snactest.Launch, error) {
	size := place(c, inPlace)
	require.NoError(w.t, c.Validate(), "%s", c)
	if inPlaceExists(c.Coll) {
		require.Equal(w.t, inPlace, c.InPlace(), "%s", c)
	}
	plan, err := snac.Build(c, w.rankTopo(c.Rank))
	if err != nil {
		return nil, err
	}
	blocks := 0 // the copy engine's workers are no thread blocks
	for _, wk := range plan.Workers {
		if wk.Engine == snac.EngineSM {
			blocks++
		}
	}
	require.LessOrEqual(w.t, blocks, w.rankTopo(c.Rank).Workers, "%s: more workers than the topology has", c)
	require.LessOrEqual(w.t, len(plan.Workers), snac.MaxWorkers, "%s", c)
	mem := make([]byte, size)
	garbage(w.rng, mem)
	in, out := c.Extents()
	copy(mem[uint64(c.Send)-base:], input)
	return &snactest.Launch{Plan: plan, Mem: mem, Bufs: []snactest.Buffer{{Send: uint64(c.Send) - base, Recv: uint64(c.Recv) - base, In: in, Out: out}}}, nil
}

func inPlaceExists(coll spec.Collective) bool {
	return coll != spec.AllToAllV && coll != spec.SendRecv
}

func (w *world) checkOutput(c *spec.Call, l *snactest.Launch, want spectest.Output, inPlace bool) {
	_, out := c.Extents()
	recv := uint64(c.Recv) - base
	got := l.Mem[recv : recv+out]
	require.NoError(w.t, spectest.Compare(c.Type, got, want), "rank %d of %s", c.Rank, c)
	written := l.Written[recv : recv+out]
	if !inPlace && slices.Equal(want.Covered, written) {
		return
	}
	for i := range out {
		if want.Covered[i] && !l.Written[recv+i] && !inPlace {
			w.t.Fatalf("rank %d of %s: output byte %d not written", c.Rank, c, i)
		}
		if !want.Covered[i] && l.Written[recv+i] {
			w.t.Fatalf("rank %d of %s: byte %d outside the layout written", c.Rank, c, i)
		}
	}
}

// garbage fills mem with random bytes.
func garbage(rng *rand.Rand, mem []byte) {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rng.Uint64())
	_, _ = rand.NewChaCha8(seed).Read(mem)
}

// callsFor returns one call per rank of a collective shape, each rank with
// its own PreMulSum scalar (spectest.RankOp).
func callsFor(n int, coll spec.Collective, t spec.DataType, op spec.Op, count uint64, root int) []*spec.Call {
	calls := make([]*spec.Call, n)
	for r := range n {
		calls[r] = &spec.Call{Coll: coll, Type: t, Op: spectest.RankOp(op, r), Count: count, Root: root, Rank: r, NRanks: n}
	}
	return calls
}

func describe(calls []*spec.Call, inPlace bool) string {
	return fmt.Sprintf("%s inPlace=%v", calls[0], inPlace)
}
