package snac

import "purlin/spec"

// A collective of copies alone (AllGather, AllToAll, Broadcast, Gather,
// Scatter, SendRecv and the V forms whose lengths every rank knows) whose
// longest transfer is at least Topology.EngineMin runs on the Atom's copy
// engine: its workers are EngineCopy, Topology.EngineWorkers of them for
// the data (and one for a local copy), in chunks of up to
// Topology.EngineChunk, each chunk one Copy a copy engine moves whole.
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
//     copied out all it was sent: each data worker, once done, raises
//     FlagDone on every other rank, and worker 0 waits for every rank's.
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
	return t.EngineMin != 0 && known && longest >= t.EngineMin && c.NRanks > 1 && !c.Coll.Reduces() &&
		c.Epilogue.Kind == 0 && c.InStride().Row == 0 && c.OutStride().Row == 0
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
func (b *builder) enter(w int, x *exchange) {
	if b.p2p {
		return // the done head (doneHead)
	}
	told, heard := 0, 0
	for _, in := range x.ins {
		if b.g.hasPiece(in.length, w) && told&(1<<in.from) == 0 {
			told |= 1 << in.from
			b.notify(w, in.from, b.consumedSlot(in.from, b.me, w), 0, in.check)
		}
	}
	for _, o := range x.outs {
		if b.g.hasPiece(o.length, w) && heard&(1<<o.to) == 0 {
			heard |= 1 << o.to
			b.wait(w, b.consumedSlot(b.me, o.to, w), 0, o.check)
		}
	}
}

// leave is the tail of a copy-engine worker: see the protocol above.
func (b *builder) leave(w int, x *exchange) {
	if !b.p2p {
		for _, q := range b.others() {
			b.notify(w, q, FlagSlot(Collective, FlagDone, b.me, w), 1, DoneCheck)
		}
		if w == 0 {
			for _, q := range b.others() {
				for v := range b.g.workers {
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
