package cuda

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
	"purlin/spec/spectest"
)

// TestGPUDirect queues, on 2 ranks (on 2 GPUs, or both on one), calls
// whose outputs lie at one offset of a window every rank mapped
// (MapWindow, as comm registers NCCL_WIN_COLL_SYMMETRIC windows): the
// collectives of copies push straight into the peers' outputs through
// the window (snac direct.go, SpacePeerRecv), and an AllReduce its
// reduced shards, between staged calls, without waiting between calls, so a rank runs into its next
// call while its peer is still in the one before. Every output is checked.
//
// Then the same on the copy engine (engineTopology), whose bulk copies
// push into the peers' outputs.
//
// Then ("stream work first") each call's output is first written by work
// queued on its rank's stream: a producer must not push into it before
// the consumer's stream has reached the call, the first call of the ranks
// (epoch 0) included.
func TestGPUDirect(t *testing.T) {
	needGPUs(t, 1)
	t.Run("blocks", func(t *testing.T) { runGPUDirect(t, gpuTopology) })
	t.Run("engine", func(t *testing.T) { runGPUDirect(t, engineTopology) })
	t.Run("stream work first", func(t *testing.T) { runGPUDirectAfterStreamWork(t, gpuTopology) })
	t.Run("stream work first, engine", func(t *testing.T) { runGPUDirectAfterStreamWork(t, engineTopology) })
	t.Run("merged on one rank", func(t *testing.T) { runGPUDirectMerged(t, gpuTopology) })
}

// runGPUDirectMerged: rank 0 launches an AllGather and an AllReduce whose
// outputs lie in the window as one merged Plan (its second call's peers'
// outputs in peer slots of buffer 1: snac.PeerSlot), rank 1 launches each
// alone; both push into the outputs, and every output is checked.
func runGPUDirectMerged(t *testing.T, topology func(n, rank int) snac.Topology) {
	const n, window = 2, 64 << 20
	ranks := newGPURanksOnDevices(t, n, int64(20*time.Second), topology, inTurn())
	_, peers := mapDirectWindow(t, ranks, window)
	rng := rand.New(rand.NewPCG(9, 35))
	colls := []spec.Collective{spec.AllGather, spec.AllReduce}
	calls := make([][]*spec.Call, len(colls)) // [call][rank]
	want := make([][]spectest.Output, len(colls))
	for i, coll := range colls {
		calls[i] = make([]*spec.Call, n)
		for r := range n {
			calls[i][r] = typedCall(coll, spec.Float32, spectest.OpFor(spec.Op{Kind: spec.Sum}, spec.Float32, n), n, r, 2<<20)
		}
		inputs := spectest.Inputs(rng, calls[i])
		want[i] = spectest.Expected(calls[i], inputs)
		for r, c := range calls[i] {
			in, _ := c.Extents()
			send := ranks[r].alloc(t, int(in))
			ranks[r].upload(t, send, inputs[r])
			c.Send, c.Recv = uintptr(send), peers[r][r]+uintptr(i)*(16<<20)
		}
	}
	for r, g := range ranks {
		topo := g.topo
		topo.Direct = true
		var plans []*snac.Plan
		var bufs []atom.Buffers
		for i := range colls {
			c := calls[i][r]
			p, err := snac.Build(c, topo)
			require.NoError(t, err, "%s", c)
			require.True(t, p.PushesIntoPeers(), "%s", c)
			b := atom.Buffers{Send: c.Send, Recv: c.Recv}
			for q := range n {
				b.PeerRecv[q] = peers[r][q] + uintptr(i)*(16<<20)
			}
			plans, bufs = append(plans, p), append(bufs, b)
		}
		if r == 0 {
			merged, err := snac.Merge(plans...)
			require.NoError(t, err)
			require.NoError(t, g.Launch(merged, bufs, uintptr(g.stream)))
			continue
		}
		for i := range plans {
			require.NoError(t, g.Launch(plans[i], bufs[i:i+1], uintptr(g.stream)))
		}
	}
	for r, g := range ranks {
		g.sync(t)
		require.NoError(t, g.AsyncError(), "rank %d", r)
	}
	for i := range colls {
		for r, c := range calls[i] {
			_, out := c.Extents()
			got := ranks[r].download(t, devicePtr(c.Recv), int(out))
			require.NoError(t, spectest.Compare(c.Type, got, want[i][r]), "%s rank %d", c, r)
		}
	}
}

// mapDirectWindow allocates a window of size bytes on every rank and maps
// it on all of them: each rank's buffer, and every rank's as it addresses them.
func mapDirectWindow(t *testing.T, ranks []*gpuRank, size uintptr) (bufs []uintptr, peers [][]uintptr) {
	n := len(ranks)
	bufs, peers = make([]uintptr, n), make([][]uintptr, n)
	for r, g := range ranks {
		p, err := g.MemAlloc(size)
		require.NoError(t, err)
		t.Cleanup(func() { MemFree(p) })
		bufs[r] = p
	}
	ex := newExchanges(n)
	views := make([]atom.Window, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r, g := range ranks {
		wg.Go(func() { views[r], errList[r] = g.MapWindow(ex[r], bufs[r], uint64(size)) })
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errList[r], "rank %d", r)
		t.Cleanup(func() { views[r].Close() })
		peers[r] = views[r].Peers()
	}
	return bufs, peers
}

func runGPUDirect(t *testing.T, topology func(n, rank int) snac.Topology) {
	const n, window = 2, 256 << 20
	ranks := newGPURanksOnDevices(t, n, int64(20*time.Second), topology, inTurn())
	bufs, peers := mapDirectWindow(t, ranks, window)

	rng := rand.New(rand.NewPCG(5, 31))
	type queued struct {
		calls []*spec.Call
		want  []spectest.Output
	}
	var all []queued
	at, directs, engines, i := uintptr(0), 0, 0, 0
	for _, perRank := range []uint64{1 << 20, 24 << 10, 3 << 20, 100 << 10, 4 << 20} {
		for _, coll := range []spec.Collective{spec.AllGather, spec.Broadcast, spec.AllReduce, spec.Gather, spec.Scatter, spec.AllGatherV, spec.AllToAll} {
			typ := everyGPUType[i%len(everyGPUType)]
			direct := i%3 != 1 // some calls in the window stage
			i++
			calls := make([]*spec.Call, n)
			for r := range calls {
				calls[r] = typedCall(coll, typ, spectest.OpFor(spec.Op{Kind: spec.Sum}, typ, n), n, r, perRank)
			}
			inputs := spectest.Inputs(rng, calls)
			q := queued{calls: calls, want: spectest.Expected(calls, inputs)}
			var most uint64
			for _, c := range calls {
				_, out := c.Extents()
				most = max(most, out)
			}
			require.LessOrEqual(t, uint64(at)+most, uint64(window))
			inPlace := coll == spec.AllToAll && i%2 == 0 // it saves what it sends first (snac emitDirectTranspose)
			for r, c := range calls {
				in, _ := c.Extents()
				fill := make([]byte, most)
				for k := range fill {
					fill[k] = 0xA5
				}
				c.Recv = bufs[r] + at
				ranks[r].upload(t, devicePtr(c.Recv), fill)
				if inPlace {
					c.Send = c.Recv
					ranks[r].upload(t, devicePtr(c.Send), inputs[r])
					continue
				}
				send := ranks[r].alloc(t, int(in))
				ranks[r].upload(t, send, inputs[r])
				c.Send = uintptr(send)
			}
			// One thread issues every rank's call, as purlin-perf does.
			for r, g := range ranks {
				pushed, engine := launchInWindow(t, g, calls[r], direct, peers[r], at)
				directs, engines = directs+pushed, engines+engine
			}
			at += uintptr(most+4095) &^ 4095
			all = append(all, q)
		}
	}
	require.Positive(t, directs)
	require.Equal(t, topology(n, 0).EngineMin != 0, engines > 0, "direct Plans on the copy engine")
	for r, g := range ranks {
		g.sync(t)
		require.NoError(t, g.AsyncError(), "rank %d", r)
	}
	for k, q := range all {
		for r, c := range q.calls {
			_, out := c.Extents()
			got := ranks[r].download(t, devicePtr(c.Recv), int(out))
			require.NoError(t, spectest.Compare(c.Type, got, q.want[r]), "call %d rank %d of %s", k, r, fmt.Sprint(c))
		}
	}
}

// runGPUDirectAfterStreamWork runs direct calls on fresh ranks, every
// output at offset 0 of the window. Before each call, each rank's stream
// first copies a large scratch buffer (so it is busy) and then fills the
// output with 0xA5 bytes; one thread issues rank 0's work and call, then
// rank 1's, so rank 0's call begins while rank 1's fill still waits on its
// stream. A push that does not wait for its consumer to begin the call
// lands before that fill and is overwritten. Each call is checked alone.
func runGPUDirectAfterStreamWork(t *testing.T, topology func(n, rank int) snac.Topology) {
	const n, window, busy = 2, 64 << 20, 256 << 20
	ranks := newGPURanksOnDevices(t, n, int64(20*time.Second), topology, inTurn())
	bufs, peers := mapDirectWindow(t, ranks, window)
	scratch := make([]devicePtr, n)
	sentinel := make([]devicePtr, n)
	for r, g := range ranks {
		scratch[r] = g.alloc(t, 2*busy)
		sentinel[r] = g.alloc(t, window) // 0xA5 bytes
	}
	rng := rand.New(rand.NewPCG(7, 33))
	directs, engines := 0, 0
	for i, coll := range []spec.Collective{spec.AllGather, spec.Broadcast, spec.Scatter, spec.AllGatherV, spec.AllToAll, spec.AllReduce, spec.AllGather} {
		typ := everyGPUType[i%len(everyGPUType)]
		calls := make([]*spec.Call, n)
		for r := range calls {
			calls[r] = typedCall(coll, typ, spectest.OpFor(spec.Op{Kind: spec.Sum}, typ, n), n, r, 4<<20)
		}
		inputs := spectest.Inputs(rng, calls)
		want := spectest.Expected(calls, inputs)
		for r, c := range calls {
			in, out := c.Extents()
			require.LessOrEqual(t, out, uint64(window))
			c.Recv = bufs[r]
			send := ranks[r].alloc(t, int(in))
			ranks[r].upload(t, send, inputs[r])
			c.Send = uintptr(send)
		}
		for r, g := range ranks {
			c := calls[r]
			_, out := c.Extents()
			require.NoError(t, inContext(g.ctx, func() error {
				if err := cuErr(driver.MemcpyAsync(scratch[r]+busy, scratch[r], busy, g.stream), "cuMemcpyAsync", "scratch"); err != nil {
					return err
				}
				return cuErr(driver.MemcpyAsync(devicePtr(c.Recv), sentinel[r], uintptr(out), g.stream), "cuMemcpyAsync", "fill")
			}))
			pushed, engine := launchInWindow(t, g, c, true, peers[r], 0)
			directs, engines = directs+pushed, engines+engine
		}
		for r, g := range ranks {
			g.sync(t)
			require.NoError(t, g.AsyncError(), "rank %d", r)
		}
		for r, c := range calls {
			_, out := c.Extents()
			got := ranks[r].download(t, devicePtr(c.Recv), int(out))
			require.NoError(t, spectest.Compare(c.Type, got, want[r]), "call %d rank %d of %s", i, r, fmt.Sprint(c))
		}
	}
	require.Positive(t, directs)
	require.Equal(t, topology(n, 0).EngineMin != 0, engines > 0, "direct Plans on the copy engine")
}

// launchInWindow launches rank g's call c, whose output lies at offset at
// of a window (peers: every rank's buffer of it, as g addresses them),
// with Topology.Direct set to direct. It returns pushed 1 where the Plan
// pushes into the peers' outputs, and engine 1 where it does so on the
// copy engine.
func launchInWindow(t *testing.T, g *gpuRank, c *spec.Call, direct bool, peers []uintptr, at uintptr) (pushed, engine int) {
	topo := g.topo
	topo.Direct = direct
	plan, err := snac.Build(c, topo)
	require.NoError(t, err, "%s", c)
	b := atom.Buffers{Send: c.Send, Recv: c.Recv}
	for p, base := range peers {
		b.PeerRecv[p] = base + at
	}
	require.NoError(t, g.Launch(plan, []atom.Buffers{b}, uintptr(g.stream)), "%s", c)
	if plan.PushesIntoPeers() {
		return 1, onEngine(plan)
	}
	return 0, 0
}

// onEngine is 1 where a worker of p runs on a copy engine, else 0.
func onEngine(p *snac.Plan) int {
	for _, w := range p.Workers {
		if w.Engine == snac.EngineCopy {
			return 1
		}
	}
	return 0
}
