package snac

import (
	"math"

	"purlin/errs"
	"purlin/spec"
)

// Build derives rank topo.Rank's Plan for call, which must have passed
// spec's Validate and agree with topo on Rank and NRanks. The Plan depends
// only on the call's shape (see Cache), never on its buffers.
//
// A call that moves no bytes on any rank gets a Plan with no workers: it
// changes nothing on any rank, so epochs stay in step. AllToAllV cannot
// know that the others move nothing, so its Plans always have workers.
func Build(call *spec.Call, topo Topology) (*Plan, error) {
	if err := topo.check(call); err != nil {
		return nil, err
	}
	if err := checkStrides(call); err != nil {
		return nil, err
	}
	topo.Direct = DirectOn(call, topo)
	p, err := build(call, topo)
	if err == nil && call.Epilogue.Kind != 0 {
		p, err = withEpilogue(p, call)
	}
	if err != nil {
		return nil, errs.New(errs.ErrInvalidUsage, "snac: Build %s: %v", call, err)
	}
	p.Type, p.Op, p.NRanks, p.Rank = call.Type, call.Op, call.NRanks, call.Rank
	return p, nil
}

func build(c *spec.Call, t Topology) (*Plan, error) {
	if alreadyDone(c) {
		return &Plan{Regime: RegimeEmpty}, nil
	}
	if allReduces(c.Coll) && c.Count*uint64(c.Type.Size()) > packetLimit(c, t) {
		return buildAllReduce(c, t)
	}
	x, segs := exchangeOf(c, t)
	longest, known := globalLongest(c)
	if known && longest == 0 {
		return &Plan{Regime: RegimeEmpty}, nil
	}
	half := t.StageHalf
	if c.Coll == spec.SendRecv {
		half = t.P2PHalf
		// A group merges one Plan per peer and direction (2*NRanks of them with
		// sends to self, as torch's all-to-all does) into one Plan of at most
		// t.launchWorkers() workers, so each point-to-point Plan takes its share only.
		t.Workers = max(1, min(t.Workers, t.launchWorkers()/(2*t.NRanks)))
	}
	engine := engineServes(c, t, longest, known)
	blocks := t.Workers // a reduction's reducers on the copy engine take the processors' workers
	if engine {
		// Both halves, at fixed addresses (engine.go); a worker more for
		// the local copies, where the collective has them.
		half *= 2
		t.Workers, t.ChunkMax = t.EngineWorkers, t.EngineChunk
		if copiesLocally(c.Coll) {
			t.Workers++
		}
	}
	packetMax := packetLimit(c, t)
	packets := known && longest <= packetMax && packable(c) && !engine
	direct := t.Direct // DirectOn: no packets (engine.go's copies may push straight into outputs)
	gt := t
	if c.Coll.Rooted() && c.NRanks > 1 && packets && t.Workers > 1 {
		gt.Workers-- // a rooted call of packets keeps a worker for its agreement (agree.go)
	}
	reserve := 0
	if !packets && copiesLocally(c.Coll) && t.Workers > 1 && c.NRanks > 1 {
		// A staged call copies its local data on workers of its own, beside
		// the transfers (emit): NVLink and the local copy overlap. Every
		// rank reserves them, copy or not, so that worker w handles the
		// same bytes on both ends of every transfer. One rank has no
		// transfers: its copy is spread over every worker.
		reserve = localWorkers(t.Workers)
		if engine {
			reserve = 1
		}
		gt.Workers -= reserve
	}
	g, err := newGeometry(gt, half, longest, segs, packets, !known, Grain(c))
	if err != nil {
		return nil, err
	}
	if engine {
		g = g.engineChunks(longest)
	}
	b := newBuilder(c, t, g)
	if !packable(c) || engine || direct {
		b.packetMax = 0
	}
	b.engine, b.direct = engine, direct
	b.transpose, b.inPlace = c.Coll.Definition().Out.Shape == spec.Transposed, c.InPlace()
	if engine && c.Coll.Reduces() {
		b.addReducers(blocks)
	}
	if reserve > 0 {
		b.locals = min(reserve, int(ceilDiv(x.localLongest(), localGrain)))
	}
	if c.Coll == spec.SendRecv {
		b.p2p, b.peer, b.sender = true, c.Peer, c.IsSend
	}
	b.writes = x.writes()
	if !b.p2p && !b.agree {
		b.silence(x.peers())
	}
	if k := b.chunkCount(x); k > maxChunks && (!direct || b.transpose) { // a direct push is one step, but for a transpose's chunks
		return nil, errs.New(errs.ErrUnsupported, "snac: %d chunks per worker (at most %d)", k, maxChunks)
	}
	b.emit(x)
	return b.plan(b.regimeOf(x)), nil
}

// alreadyDone reports whether c's output is its input as it stands: one
// rank, in place, with no epilogue, and a reduction (if any) that leaves a
// single input as it is (not PreMulSum, whose scalar scales it, nor an Avg
// whose divisor is not 1). Its Plan moves nothing and launches nothing.
func alreadyDone(c *spec.Call) bool {
	identity := c.Op.Kind < spec.Avg || c.Op.Kind == spec.Avg && c.Op.AvgDivisor(1) == 1
	return c.NRanks == 1 && c.InPlace() && c.Epilogue.Kind == 0 && (!c.Coll.Reduces() || identity)
}

// packable reports whether c's parts may move as packets: a packet holds 8
// bytes of one row, so a column block's rows must hold whole packets.
func packable(c *spec.Call) bool {
	return c.InStride().Row%8 == 0 && c.OutStride().Row%8 == 0
}

// checkStrides refuses rows a Plan cannot name (Step.Row and Ref.Pitch are
// 32-bit).
func checkStrides(c *spec.Call) error {
	for _, st := range [...]spec.Stride{c.InStride(), c.OutStride()} {
		if st.Pitch > math.MaxUint32 {
			return errs.New(errs.ErrUnsupported, "snac: rows of %d bytes a matrix (at most %d)", st.Pitch, uint64(math.MaxUint32))
		}
	}
	return nil
}

// packetLimit is the longest transfer of call that moves as packets. A
// packet carries 8 bytes of data in 16, so beyond some length staging wins
// even though it costs a flag round trip: the staged form of most
// collectives is one phase (stage, notify, consume), and packets win only
// up to half the packet window (Broadcast of 1 MiB on 2x H200: 6.8 us
// staged, 8.4 as packets). AllReduce's staged form is two phases and a
// point-to-point transfer's adds the done rule's round trip, so they take
// packets up to the whole window (AllReduce of 1 MiB: 11.6 us as packets,
// 13.6 staged; SendRecv 10.2 and 15.1).
func packetLimit(c *spec.Call, t Topology) uint64 {
	if allReduces(c.Coll) || c.Coll == spec.SendRecv {
		return t.PacketMax
	}
	return t.PacketMax / 2
}

// buildAllReduce is a staged all-reduce: a reduce-scatter and an all-gather
// per chunk (allreduce.go). Packets take the exchange's one-shot form.
func buildAllReduce(c *spec.Call, t Topology) (*Plan, error) {
	length := c.Count * uint64(c.Type.Size())
	_, longest := shard(length, Grain(c), c.NRanks, 0)
	half, blocks := t.StageHalf, t.Workers
	engine := engineServes(c, t, longest, true)
	if engine { // engine.go
		half *= 2
		t.Workers, t.ChunkMax = t.EngineWorkers, t.EngineChunk
	}
	g, err := newGeometry(t, half, longest, max(1, 2*(c.NRanks-1)), false, false, Grain(c))
	if err != nil {
		return nil, err
	}
	if engine {
		g = g.engineChunks(longest)
	}
	b := newBuilder(c, t, g)
	b.direct = t.Direct // DirectOn: not on the copy engine
	if engine {
		b.engine = true
		b.addReducers(blocks)
		b.emitAllReduceEngine(length, longest)
	} else {
		b.emitAllReduceStaged(c)
	}
	return b.plan(g.regime(longest)), nil
}

// check rejects a topology that cannot serve call.
func (t Topology) check(c *spec.Call) error {
	switch {
	case t.NRanks < 1 || t.NRanks > MaxRanks || t.Rank < 0 || t.Rank >= t.NRanks:
		return errs.New(errs.ErrInvalidUsage, "snac: topology rank %d of %d ranks (1..%d)", t.Rank, t.NRanks, MaxRanks)
	case c.NRanks != t.NRanks || c.Rank != t.Rank:
		return errs.New(errs.ErrInvalidUsage, "snac: call for rank %d of %d on topology rank %d of %d", c.Rank, c.NRanks, t.Rank, t.NRanks)
	case t.Workers < 1:
		return errs.New(errs.ErrInvalidUsage, "snac: topology with %d workers", t.Workers)
	case t.EngineMin != 0 && (t.EngineMin <= t.PacketMax || t.EngineWorkers < 1 || t.EngineWorkers >= MaxWorkers || t.EngineChunk < unit):
		return errs.New(errs.ErrInvalidUsage, "snac: topology's copy engine: from %d bytes (packets to %d), %d workers, chunks of %d", t.EngineMin, t.PacketMax, t.EngineWorkers, t.EngineChunk)
	case t.StageHalf < unit*MaxRanks || t.P2PHalf < unit || t.PacketMax < 8 || t.ChunkMax < unit:
		return errs.New(errs.ErrInvalidUsage, "snac: topology too small: %+v", t)
	}
	return nil
}
