package snac

import "purlin/spec"

// A collective of copies alone (AllGather, AllToAll, Broadcast, Gather,
// Scatter, SendRecv and the V forms whose lengths every rank knows) whose
// longest transfer is at least Topology.EngineMin runs on the Atom's copy
// engine: its workers are EngineCopy, Topology.EngineWorkers of them for
// the data (and one for a local copy), in chunks of up to
// Topology.EngineChunk, each chunk one Copy a copy engine moves whole.
//
// A reduction (ReduceScatter, Reduce, AllReduce and the V form) splits the
// roles: its EngineWorkers producers are EngineCopy and push each chunk of
// the rank's input into its consumer's staging, while reducers workers a
// producer (EngineSM, after the producers: b.consumer) each reduce their
// part of every chunk that producer's peers pushed, as a copy engine
// cannot add. An AllReduce's producers then push the reduced chunks too,
// which the reducers copy out on the other ranks (emitAllReduceEngine). A
// PreMulSum stays on the processors (its input is scaled where it is
// staged).
//
// A copy engine's transfer names fixed addresses (a CUDA graph replays
// them), so such a Plan's staging Refs carry no Half: every call uses the
// same region, both halves of the staging area (or of a point-to-point
// area). The halves' guarantee, that a call never writes where the call
// before it may still be read, is made by signals instead:
//   - enter: before a producer first pushes into a consumer's region, the
//     consumer says it has begun this call (FlagConsumed at the call's
//     epoch, delta 0): every call before it on that rank is done, as an
//     Atom runs a rank's calls in turn. A point-to-point transfer's done
//     head says the same (doneHead, delta 0 instead of DoneDelta).
//   - every chunk: the consumer raises FlagConsumed once it has copied the
//     chunk out (the ring regime's drain signal), and a producer waits for
//     it before it reuses a slot, as in the ring regime.
//   - leave: a collective's call ends on no rank before every rank has
//     copied out all it was sent: each worker that consumes, once done,
//     raises FlagDone on every other rank, and worker 0 waits for every
//     rank's.
//     The next call, of any regime and from any rank, then finds every
//     region read. (Its producers alone waiting for their consumers is not
//     enough: in a Scatter, the next call's root may be a rank that sent
//     nothing in this one.) A point-to-point area has one writer, so there
//     the sender's workers wait only until the receiver has copied out
//     their last chunk.

// engineServes reports whether c, whose longest transfer on any rank is
// longest (known: every rank knows it), runs on t's copy engine. Every
// rank decides alike: the call's shape and the topology only.
func engineServes(c *spec.Call, t Topology, longest uint64, known bool) bool {
	reducible := c.Op.Kind != spec.PreMulSum && t.Workers >= t.EngineWorkers // a reducer a producer at least
	return t.EngineMin != 0 && known && longest >= t.EngineMin && c.NRanks > 1 && (!c.Coll.Reduces() || reducible) &&
		c.Epilogue.Kind == 0 && c.InStride().Row == 0 && c.OutStride().Row == 0
}

// maxEngineChunks bounds the chunks a copy-engine worker moves in one
// call (engineChunks). Each chunk is a few operations on the worker's
// stream (a copy and its signals), and a stream holds only so many queued:
// one thread that issues every rank's calls (NCCL's one-process form) and
// finds a stream full waits there for work that needs a call it has not
// issued yet.
const maxEngineChunks = 64

// engineChunks is g with chunks grown so that no worker moves more than
// maxEngineChunks of a transfer of longest bytes, where they fit its
// region (they do up to several GiB at the default sizes).
func (g geometry) engineChunks(longest uint64) geometry {
	if capped, err := g.within(longest, maxEngineChunks); err == nil {
		return capped
	}
	return g
}

// engineReducers is the most thread blocks that reduce what a reduction's
// copy engines deliver (never more than Topology.Workers): one block
// copies about 50 GB/s within an H200 and a reduce reads twice what it
// writes, while NVLink delivers about 390 GB/s (and an AllReduce's
// reducers also copy the gathered shards out).
const engineReducers = 32

// reducersPer is how many reducers each of producers copy-engine workers
// of a reduction gets, of a topology's blocks workers.
func reducersPer(blocks, producers int) int {
	return max(1, min(engineReducers, blocks)/producers)
}

// addReducers gives a reduction on the copy engine its reducers, of a
// topology's blocks workers, after the producers.
func (b *builder) addReducers(blocks int) {
	b.reducers = reducersPer(blocks, b.g.workers)
	b.steps = append(b.steps, make([][]Step, b.g.workers*b.reducers)...)
}

// part is consumer k's part of bytes [lo, hi) of a chunk.
func (b *builder) part(lo, hi uint64, k int) (uint64, uint64) {
	a, z := split(hi-lo, b.g.grain, b.consumers(), k)
	return lo + a, lo + z
}

// consumer is the worker that consumes part k of what producer w's peers
// push to this rank: w itself, or with reducers its k-th reducer.
func (b *builder) consumer(w, k int) int {
	if b.reducers == 0 {
		return w
	}
	return b.g.workers + w*b.reducers + k
}

// consumers is how many workers consume what one producer's peers push.
func (b *builder) consumers() int { return max(1, b.reducers) }

// consumersOf is every worker that consumes.
func (b *builder) consumersOf() []int {
	var v []int
	for w := range b.g.workers {
		for k := range b.consumers() {
			v = append(v, b.consumer(w, k))
		}
	}
	return v
}

// hasPiece reports whether worker w stages any byte of a transfer of length bytes.
func (g geometry) hasPiece(length uint64, w int) bool {
	lo, hi := g.span(length, w)
	return lo < hi
}

// lastChunk is the last chunk of a transfer of length bytes that worker w
// stages (hasPiece must hold).
func (g geometry) lastChunk(length uint64, w int) int {
	lo, hi := g.span(length, w)
	return int(ceilDiv(hi-lo, g.chunk)) - 1
}

// enter is the head of a copy-engine worker of a collective: worker w
// tells each producer it consumes from that this rank has begun the call,
// then waits for the same word from each consumer it pushes to.
// A reduction's first consumer of w's part says it.
func (b *builder) enter(w int, x *exchange) {
	if b.p2p {
		return // the done head (doneHead)
	}
	var tell, hear [MaxRanks]peerWord
	for _, in := range x.ins {
		if b.g.hasPiece(in.length, w) {
			tell[in.from] = peerWord{true, in.check}
		}
	}
	for _, r := range x.reduces {
		for _, q := range b.others() {
			if b.g.hasPiece(r.length, w) {
				tell[q] = peerWord{true, r.check}
			}
		}
	}
	for _, o := range x.outs {
		if b.g.hasPiece(o.length, w) {
			hear[o.to] = peerWord{true, o.check}
		}
	}
	b.handshake(w, &tell, &hear, 0)
}

// peerWord is a signal to or from one rank, with its check word.
type peerWord struct {
	on    bool
	check uint64
}

// handshake is enter's signals: w's first consumer tells each rank of tell
// that this rank has begun the call, then producer w waits for the same
// word from each rank of hear. At delta 0 a call's first epoch (0) waits
// for nothing, which suits staging (no call before used it); a push into
// an output, which earlier work on the consumer's stream may still use,
// says it at delta 1 (direct.go).
func (b *builder) handshake(w int, tell, hear *[MaxRanks]peerWord, delta int64) {
	v := b.consumer(w, 0)
	for q, t := range tell {
		if t.on {
			b.notify(v, q, b.consumedSlot(q, b.me, v), delta, t.check)
		}
	}
	for q, h := range hear {
		if h.on {
			b.wait(w, b.consumedSlot(b.me, q, v), delta, h.check)
		}
	}
}

// leave is the tail of a copy-engine worker: see the protocol above.
func (b *builder) leave(w int, x *exchange) {
	if !b.p2p {
		for k := range b.consumers() {
			v := b.consumer(w, k)
			for _, q := range b.others() {
				b.notify(v, q, FlagSlot(Collective, FlagDone, b.me, v), 1, DoneCheck)
			}
		}
		if w == 0 {
			for _, q := range b.others() {
				for _, v := range b.consumersOf() {
					b.wait(w, FlagSlot(Collective, FlagDone, q, v), 1, DoneCheck)
				}
			}
		}
		return
	}
	last, check := -1, uint64(0)
	for _, o := range x.outs {
		if b.g.hasPiece(o.length, w) {
			last, check = max(last, b.g.lastChunk(o.length, w)), o.check
		}
	}
	if last >= 0 {
		b.wait(w, b.consumedSlot(b.me, b.peer, w), int64(last+1), check)
	}
}
