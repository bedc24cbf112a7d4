package snac

import "purlin/spec"

// AllReduce (allReduces). Small payloads take the exchange its layouts
// derive (exchangeOf), one-shot: every rank writes its whole input as
// packets into every peer's window and reduces all of it. Staged ones run
// reduce-scatter then all-gather per chunk, pushing into the consumer's
// staging: every rank pushes shard q into rank q's scatter segment
// (FlagReady); rank q reduces its shard into its output, pushes the result
// into every rank's gather segment and announces it (FlagReduced); every
// rank copies the reduced shards out. Each worker owns the same sub-slice
// of every shard.

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
		for k := range g.chunks(longest) {
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
						b.copy(w, b.stage(q, b.me, g.stageOff(w, k, b.gatherSeg(b.me, q))), recvRef(lo), hi-lo, 0, 0)
					}
				}
				for q := range b.n {
					if q != b.me {
						b.notify(w, q, b.readySlot(FlagReduced, b.me, q, w), int64(k+1), check)
					}
				}
			}
			// Gather the other reduced shards.
			for p := range b.n {
				if lo, hi := piece(p, w, k); p != b.me && lo < hi {
					b.wait(w, b.readySlot(FlagReduced, p, b.me, w), int64(k+1), check)
					b.copy(w, recvRef(lo), b.stage(b.me, p, g.stageOff(w, k, b.gatherSeg(p, b.me))), hi-lo, 0, 0)
				}
			}
			if ring {
				for p := range b.n {
					if p != b.me && readsFrom(b.me, p, w, k) {
						b.notify(w, p, b.consumedSlot(p, b.me, w), int64(k+1), check)
					}
				}
			}
		}
	}
}

// scatterSeg and gatherSeg are the segments of consumer q's slot that
// producer p pushes its piece of shard q, and its reduced shard p, into.
func (b *builder) scatterSeg(p, q int) int { return inbox(p, q, b.n) }
func (b *builder) gatherSeg(p, q int) int  { return b.n - 1 + inbox(p, q, b.n) }
