package snac

import "purlin/spec"

// AllReduce (allReduces). Small payloads take the exchange its layouts
// derive (exchangeOf), one-shot: every rank writes its whole input as
// packets into every peer's window and reduces all of it. Staged ones run
// reduce-scatter then all-gather per chunk, pushing into the consumer's
// staging: every rank pushes shard q into rank q's scatter segment
// (FlagReady); rank q reduces its shard into its output, pushes the result
// into every rank's gather segment and announces it (FlagReduced); every
// rank copies the reduced shards out. Where the outputs are symmetric
// (Topology.Direct), rank q pushes its reduced shard straight into every
// rank's output instead, and nothing is copied out. Each worker owns the
// same sub-slice of every shard.

// shard returns shard q's byte range: the buffer's grains (16-byte units,
// or an epilogue's rows) split as evenly as possible among the ranks.
func shard(length, grain uint64, n, q int) (off, size uint64) {
	lo, hi := split(length, grain, n, q)
	return lo, hi - lo
}

func (b *builder) emitAllReduceStaged(c *spec.Call) {
	length := c.Count * uint64(c.Type.Size())
	check := b.check
	g := b.g
	longest := uint64(0)
	for q := range b.n {
		_, s := shard(length, g.grain, b.n, q)
		longest = max(longest, s)
	}
	ring := g.ring(longest)
	// piece is worker w's chunk k of shard q, as buffer offsets.
	piece := func(q, w, k int) (lo, hi uint64) {
		off, size := shard(length, g.grain, b.n, q)
		lo, hi = g.piece(size, w, k)
		return off + lo, off + hi
	}
	nonempty := func(q, w, k int) bool { lo, hi := piece(q, w, k); return lo < hi }
	// readsFrom reports whether rank q reads anything from rank p's slot at chunk k.
	readsFrom := func(q, p, w, k int) bool { return nonempty(q, w, k) || nonempty(p, w, k) }
	for w := range g.workers {
		whole := maxChunks
		for q := range b.n {
			_, size := shard(length, g.grain, b.n, q)
			whole = min(whole, g.whole(size, w))
		}
		b.emitChunks(w, g.chunks(longest), whole, func(k int) {
			if k >= g.slots {
				for q := range b.n {
					if q != b.me && readsFrom(q, b.me, w, k-g.slots) && (nonempty(q, w, k) || nonempty(b.me, w, k)) {
						b.wait(w, b.consumedSlot(b.me, q, w), int64(k-g.slots+1), check)
					}
				}
			}
			// Push shard q into rank q's staging, and tell it.
			for q := range b.n {
				if lo, hi := piece(q, w, k); q != b.me && lo < hi {
					b.stageInput(w, b.stage(q, b.me, g.stageOff(w, k, b.scatterSeg(b.me, q))), sendRef(lo), hi-lo, 0, 0)
					b.notify(w, q, b.readySlot(FlagReady, b.me, q, w), int64(k+1), check)
				}
			}
			// Reduce my shard into my output, push it to every rank, announce it.
			if lo, hi := piece(b.me, w, k); lo < hi {
				srcs := make([]Ref, b.n)
				for p := range b.n {
					if p != b.me {
						b.wait(w, b.readySlot(FlagReady, p, b.me, w), int64(k+1), check)
						srcs[p] = b.stage(b.me, p, g.stageOff(w, k, b.scatterSeg(p, b.me)))
					}
				}
				srcs[b.me] = sendRef(lo)
				b.reduce(w, recvRef(lo), srcs, b.me, hi-lo, 0, 0)
				for q := range b.n {
					if q != b.me {
						b.copy(w, b.gathered(q, w, k, lo), recvRef(lo), hi-lo, 0, 0)
					}
				}
				for q := range b.n {
					if q != b.me {
						b.notify(w, q, b.readySlot(FlagReduced, b.me, q, w), int64(k+1), check)
					}
				}
			}
			// Gather the other reduced shards (pushed into the output
			// already where it is direct).
			for p := range b.n {
				if lo, hi := piece(p, w, k); p != b.me && lo < hi {
					b.wait(w, b.readySlot(FlagReduced, p, b.me, w), int64(k+1), check)
					if !b.direct {
						b.copy(w, recvRef(lo), b.stage(b.me, p, g.stageOff(w, k, b.gatherSeg(p, b.me))), hi-lo, 0, 0)
					}
				}
			}
			if ring {
				for p := range b.n {
					if p != b.me && readsFrom(b.me, p, w, k) {
						b.notify(w, p, b.consumedSlot(p, b.me, w), int64(k+1), check)
					}
				}
			}
		})
	}
}

// gathered is where worker w pushes chunk k of this rank's reduced shard,
// at byte lo of the output, for rank q: q's gather segment, or where the
// outputs are symmetric (direct.go) q's output itself. q has begun the
// call then (this rank waited for its piece of the shard), so nothing of
// its earlier calls uses its output, and it has pushed that piece, the
// only read of its input there (in place, the same bytes) this call makes.
func (b *builder) gathered(q, w, k int, lo uint64) Ref {
	if b.direct {
		return Ref{Space: SpacePeerRecv, Rank: uint8(q), Off: lo}
	}
	return b.stage(q, b.me, b.g.stageOff(w, k, b.gatherSeg(b.me, q)))
}

// scatterSeg and gatherSeg are the segments of consumer q's slot that
// producer p pushes its piece of shard q, and its reduced shard p, into.
func (b *builder) scatterSeg(p, q int) int { return inbox(p, q, b.n) }
func (b *builder) gatherSeg(p, q int) int  { return b.n - 1 + inbox(p, q, b.n) }

// emitAllReduceEngine is a staged all-reduce on the copy engine (engine.go):
// producer w pushes its pieces of every other rank's shard into that rank's
// scatter segment (FlagReady); w's reducers reduce their parts of this
// rank's shard into its output and say so to w on this rank (FlagReduced,
// raised by the reducer on its own rank); w then pushes the reduced piece
// into every other rank's gather segment (FlagReduced), where that rank's
// reducers copy it out (FlagGathered back once the slot may be reused).
// A producer pushes chunk c's reduced piece after chunk c+1's scatter, and
// a reducer gathers chunk c after it reduced chunk c+1, so neither waits
// for the other's last step.
func (b *builder) emitAllReduceEngine(length, longest uint64) {
	g, check := b.g, b.check
	piece := func(q, w, k int) (lo, hi uint64) {
		off, size := shard(length, g.grain, b.n, q)
		lo, hi = g.piece(size, w, k)
		return off + lo, off + hi
	}
	var peers [MaxRanks]peerWord
	for _, q := range b.others() {
		peers[q] = peerWord{true, check}
	}
	chunks := g.chunks(longest)
	for w := range g.workers {
		b.handshake(w, &peers, &peers, 0)
		for c := 0; c <= chunks; c++ {
			if c < chunks {
				b.scatterChunk(w, c, piece)
			}
			if c > 0 {
				b.gatherChunk(w, c-1, piece)
			}
		}
		b.leave(w, nil)
	}
}

// scatterChunk is chunk c of producer w's pushes (each other rank's shard)
// and of its reducers' reduce (this rank's shard).
func (b *builder) scatterChunk(w, c int, piece func(q, w, k int) (uint64, uint64)) {
	g, check := b.g, b.check
	for _, q := range b.others() {
		lo, hi := piece(q, w, c)
		if lo == hi {
			continue
		}
		if c >= g.slots {
			for k := range b.consumers() {
				b.wait(w, b.consumedSlot(b.me, q, b.consumer(w, k)), int64(c-g.slots+1), check)
			}
		}
		b.copy(w, b.stage(q, b.me, g.stageOff(w, c, b.scatterSeg(b.me, q))), sendRef(lo), hi-lo, 0, 0)
		b.notify(w, q, b.readySlot(FlagReady, b.me, q, w), int64(c+1), check)
	}
	lo, hi := piece(b.me, w, c)
	if lo == hi {
		return
	}
	for k := range b.consumers() {
		v := b.consumer(w, k)
		plo, phi := b.part(lo, hi, k)
		srcs := make([]Ref, b.n)
		for _, p := range b.others() {
			if plo < phi {
				b.wait(v, b.readySlot(FlagReady, p, b.me, w), int64(c+1), check)
			}
			srcs[p] = b.stage(b.me, p, g.stageOff(w, c, b.scatterSeg(p, b.me))+plo-lo)
		}
		srcs[b.me] = sendRef(plo)
		b.reduce(v, recvRef(plo), srcs, b.me, phi-plo, 0, 0)
		b.notify(v, b.me, FlagSlot(Collective, FlagReduced, b.me, v), int64(c+1), check)
		for _, p := range b.others() {
			b.notify(v, p, b.consumedSlot(p, b.me, v), int64(c+1), check)
		}
	}
}

// gatherChunk is chunk c of producer w's push of this rank's reduced shard
// and of its reducers' copies of every other rank's.
func (b *builder) gatherChunk(w, c int, piece func(q, w, k int) (uint64, uint64)) {
	g, check := b.g, b.check
	if lo, hi := piece(b.me, w, c); lo < hi {
		for k := range b.consumers() {
			b.wait(w, FlagSlot(Collective, FlagReduced, b.me, b.consumer(w, k)), int64(c+1), check)
		}
		for _, q := range b.others() {
			if c >= g.slots {
				for k := range b.consumers() {
					b.wait(w, FlagSlot(Collective, FlagGathered, q, b.consumer(w, k)), int64(c-g.slots+1), check)
				}
			}
			b.copy(w, b.stage(q, b.me, g.stageOff(w, c, b.gatherSeg(b.me, q))), recvRef(lo), hi-lo, 0, 0)
			b.notify(w, q, b.readySlot(FlagReduced, b.me, q, w), int64(c+1), check)
		}
	}
	for k := range b.consumers() {
		v := b.consumer(w, k)
		for _, p := range b.others() {
			lo, hi := piece(p, w, c)
			if lo == hi {
				continue
			}
			plo, phi := b.part(lo, hi, k)
			if plo < phi {
				b.wait(v, b.readySlot(FlagReduced, p, b.me, w), int64(c+1), check)
				b.copy(v, recvRef(plo), b.stage(b.me, p, g.stageOff(w, c, b.gatherSeg(p, b.me))+plo-lo), phi-plo, 0, 0)
			}
			b.notify(v, p, FlagSlot(Collective, FlagGathered, b.me, v), int64(c+1), check)
		}
	}
}
