package snac

import "purlin/spec"

// A collective of copies (AllGather, AllToAll, Broadcast, AllGatherV and
// AllGatherColumns) whose outputs are
// symmetric (Topology.Direct: every rank's output at one offset of a
// registered window) skips staging: each producer pushes its part straight
// into its consumer's output (SpacePeerRecv), and the consumer only waits.
// No byte crosses a GPU's memory twice, and no consumer spends a processor
// copying out what it was sent. Each worker w, for its span of every
// transfer:
//
//   - enter: it tells each producer it hears from that this rank has begun
//     the call (FlagConsumed at delta 1: a first call's epoch is 0, and a
//     wait for 0 waits for nothing), then waits for
//     the same word from each consumer it pushes to. A consumer that has
//     begun the call has finished every call before it (an Atom runs a
//     rank's calls in turn), so nothing of its earlier calls reads or
//     writes the output any more;
//   - push: it copies its span from Send into each consumer's output;
//   - notify: it raises FlagReady on each consumer (delta 1), releasing
//     what it pushed;
//   - wait: it waits for FlagReady from each producer it hears from.
//
// A consumer's call ends once every producer's data is in its output, and
// a producer's input is read by the producer alone, so the call needs no
// exit rendezvous. Transfers short enough for packets keep them (one
// flight, no round trip). On the copy engine (engine.go) the same steps
// run on its workers: each push is one bulk copy into a peer's output.
//
// A staged AllReduce keeps its reduce-scatter through staging, and each
// rank pushes its reduced shard straight into every rank's output instead
// of into their gather segments (allreduce.go, gathered): nothing is
// copied out. Which collectives do is Directs'.

// Directs reports whether c's shape can push straight into its outputs
// where they are symmetric (Topology.Direct), at sizes beyond packets: a
// collective of copies or an AllReduce, on more than one rank, with no
// epilogue, its lengths known to every rank, and an output on every rank
// (each rank decides from where its own output lies: a Gather's other
// ranks have none to tell them where the root's is). Of the transposes,
// the even one alone (AllToAll: emitDirectTranspose); V and column
// layouts have no in-place form to line up with. Not a Scatter: in place,
// each rank's output is its own slice of its input, so where the inputs
// lie at one offset of the windows the outputs do not, and a rank cannot
// tell from its own call where a peer's lies.
func Directs(c *spec.Call) bool {
	d := c.Coll.Definition()
	_, known := globalLongest(c)
	evenTranspose := d.Out.Shape == spec.Transposed && !d.Out.V && !d.Out.Columns
	sliceOfInput := d.In.Shape == spec.Scattered && d.Out.Shape == spec.Packed
	copies := c.Coll != spec.SendRecv && d.Consume == spec.ConsumeCopy && (d.Out.Shape != spec.Transposed || evenTranspose) && !d.Out.Rooted && !sliceOfInput
	return known && c.NRanks > 1 && (copies || allReduces(c.Coll)) && c.Epilogue.Kind == 0
}

// DirectOn is t.Direct where c's Plan pushes straight into its outputs:
// c's shape can (Directs) and its transfers do not move as packets (an
// AllReduce's reduce-scatter not on the copy engine either), which every
// rank decides alike. Elsewhere it is false, so that Plans, and their
// fingerprints, do not depend on a flag they do not use: ranks that
// disagree on it only disagree on calls it changes.
func DirectOn(c *spec.Call, t Topology) bool {
	if !t.Direct || !Directs(c) {
		return false
	}
	longest, _ := globalLongest(c)
	if allReduces(c.Coll) {
		_, shard := shard(longest, Grain(c), c.NRanks, 0)
		return longest > packetLimit(c, t) && !engineServes(c, t, shard, true)
	}
	return !(longest <= packetLimit(c, t) && packable(c) && !engineServes(c, t, longest, true))
}

// emitDirect is worker w's part of a direct exchange: enter, push,
// notify, wait (see above).
func (b *builder) emitDirect(w int, x *exchange) {
	if b.transpose {
		b.emitDirectTranspose(w, x)
		return
	}
	var tell, hear [MaxRanks]peerWord
	for _, in := range x.ins {
		if b.g.hasPiece(in.length, w) {
			tell[in.from] = peerWord{true, in.check}
		}
	}
	for _, o := range x.outs {
		if b.g.hasPiece(o.length, w) {
			hear[o.to] = peerWord{true, o.check}
		}
	}
	b.handshake(w, &tell, &hear, 1)
	for _, o := range x.outs {
		lo, hi := b.g.span(o.length, w)
		dst := at(SpacePeerRecv, o.dst, lo, o.dstStride)
		dst.Rank = uint8(o.to)
		rows(b.copy(w, dst, at(SpaceSend, o.src, lo, o.srcStride), hi-lo, 0, 0), lo, o.srcStride, o.dstStride)
	}
	b.published(w, x)
}

// published is the tail of worker w's direct exchange: FlagReady raised on
// each consumer it pushed a span to, releasing the pushes, then awaited
// from each producer that pushed one to it.
func (b *builder) published(w int, x *exchange) {
	for _, o := range x.outs {
		if b.g.hasPiece(o.length, w) {
			b.notify(w, o.to, b.readySlot(FlagReady, b.me, o.to, w), 1, o.check)
		}
	}
	for _, in := range x.ins {
		if b.g.hasPiece(in.length, w) {
			b.wait(w, b.readySlot(FlagReady, in.from, b.me, w), 1, in.check)
		}
	}
}

// emitDirectTranspose is worker w's part of a direct AllToAll. In place,
// the slice of its output a producer pushes into is the slice of its
// input that the rank itself still has to send to that producer, and
// whether a call is in place is each rank's own: so the enter is per
// chunk, and the protocol the same on every rank. Every producer waits,
// before it pushes chunk k of its span to a consumer, for that consumer's
// FlagConsumed at delta k+1. A rank out of place raises it for all its
// chunks at once; a rank in place first copies chunk k of what it sends
// each peer into its own staging (a slot of the chunk ring, its own
// segment for that peer), raises that peer's word to k+1, and pushes the
// chunk from there. Both ends of a pair chunk their spans alike (the
// pair's lengths are equal, and so is the geometry), and a rank's enter
// depends on nothing but its own copy, so ranks in place on both ends of
// a pair wait for no one's push.
func (b *builder) emitDirectTranspose(w int, x *exchange) {
	g := b.g
	chunks := func(length uint64) int {
		lo, hi := g.span(length, w)
		return int(ceilDiv(hi-lo, g.chunk))
	}
	if !b.inPlace {
		for _, in := range x.ins {
			if g.hasPiece(in.length, w) {
				b.notify(w, in.from, b.consumedSlot(in.from, b.me, w), int64(chunks(in.length)), in.check)
			}
		}
	}
	most := 0
	for _, o := range x.outs {
		most = max(most, chunks(o.length))
	}
	for k := range most {
		for _, o := range x.outs {
			lo, hi := g.piece(o.length, w, k)
			if lo == hi {
				continue
			}
			src := at(SpaceSend, o.src, lo, o.srcStride)
			if b.inPlace {
				saved := b.stage(b.me, b.me, g.stageOff(w, k, o.seg))
				b.copy(w, saved, src, hi-lo, 0, 0)
				b.notify(w, o.to, b.consumedSlot(o.to, b.me, w), int64(k+1), o.check)
				src = saved
			}
			b.wait(w, b.consumedSlot(b.me, o.to, w), int64(k+1), o.check)
			dst := at(SpacePeerRecv, o.dst, lo, o.dstStride)
			dst.Rank = uint8(o.to)
			b.copy(w, dst, src, hi-lo, 0, 0)
		}
	}
	b.published(w, x)
}
