package snac

import "purlin/spec"

// An exchange is one rank's part of a collective, as transfers: what it
// pushes to others, what it copies or reduces from what others pushed, and
// what it copies locally. exchangeOf derives it from the collective's
// layouts; the engine below turns it into steps for every regime (a staged
// AllReduce alone takes another form, allreduce.go).
type exchange struct {
	outs    []outFlow
	ins     []inFlow
	reduces []reduceFlow
	locals  []localFlow
}

// An exchange's offsets in the caller's buffers (src, dst, own) are where
// a part starts; the part lies as its stride says (spec.Stride: contiguous,
// or a column block's rows). Staging and packets hold every part contiguous.

// outFlow: length bytes from Send+src to rank to, pushed into segment seg
// of its staging slot; they end at Recv+dst on rank to, laid out as
// dstStride (known where the call's lengths are: a direct push, direct.go).
type outFlow struct {
	to, seg          int
	src, dst, length uint64
	srcStride        spec.Stride
	dstStride        spec.Stride
	check            uint64
}

// inFlow: length bytes that rank from pushed into segment seg of this
// rank's staging slot, to Recv+dst.
type inFlow struct {
	from, seg   int
	dst, length uint64
	dstStride   spec.Stride
	check       uint64
}

// reduceFlow: Recv+dst = reduce over all ranks in rank order of what each
// pushed into its inbox segment (this rank's own contribution read straight
// from Send+own).
type reduceFlow struct {
	dst, own, length     uint64
	dstStride, ownStride spec.Stride
	check                uint64
}

// localFlow: a copy from Send to Recv on this rank.
type localFlow struct {
	src, dst, length     uint64
	srcStride, dstStride spec.Stride
}

// at is byte lo of the part at off in the caller's buffer space (SpaceSend
// or SpaceRecv), laid out as st says.
func at(space Space, off, lo uint64, st spec.Stride) Ref {
	if st.Row == 0 {
		return Ref{Space: space, Off: off + lo}
	}
	return Ref{Space: space, Off: off + lo/st.Row*st.Pitch + lo%st.Row, Pitch: uint32(st.Pitch)}
}

// rows gives step s, which starts at byte lo of its parts, the row geometry
// of the one stride among them (a part's stride, or none).
func rows(s *Step, lo uint64, strides ...spec.Stride) {
	for _, st := range strides {
		if s != nil && st.Row > 0 {
			s.Row, s.Col = uint32(st.Row), uint32(lo%st.Row)
		}
	}
}

// emit writes the exchange into b's workers: packet sends, local copies,
// the staged chunk loop, then packet receives. Local copies go where they
// delay no transfer:
//   - a call of packets alone that leaves a worker free copies up to
//     localGrain there, whole (builder.aside): the packets' flight no longer
//     waits behind its loads. A longer copy on one worker would outlast the
//     packets (AllGather of 512 KiB a rank: 12.1 us in a graph, against 6.4
//     spread over the data workers), so it is spread;
//   - a rooted call of packets keeps them with its data: its aside worker
//     runs the agreement, the longer path (with the copy there too, a small
//     Broadcast took 2.48 us instead of 2.19);
//   - a staged call splits them among workers of their own
//     (builder.locals), which copy while the data workers keep NVLink busy.
func (b *builder) emit(x *exchange) {
	if len(x.locals) > 0 && b.chunkCount(x) == 0 && !b.agree && x.localLongest() <= localGrain {
		b.setAside()
	}
	aside := b.aside != 0
	for w := range b.g.workers {
		b.emitPacketSends(w, x)
		for _, l := range x.locals {
			if !aside && b.locals == 0 {
				lo, hi := b.g.span(l.length, w)
				b.local(w, l, lo, hi)
			}
		}
		if b.direct {
			b.emitDirect(w, x)
			continue
		}
		if b.engine {
			b.enter(w, x)
		}
		whole := maxChunks
		x.eachLength(func(length uint64) {
			if !b.isPacket(length) {
				whole = min(whole, b.g.whole(length, w))
			}
		})
		b.emitChunks(w, b.chunkCount(x), whole, func(c int) { b.emitChunk(w, c, x) })
		if b.engine {
			b.leave(w, x)
		}
		b.emitPacketReceives(w, x)
	}
	for _, l := range x.locals {
		if aside {
			b.local(b.aside, l, 0, l.length)
		}
	}
	if aside {
		return // no staged transfer (one rank): the aside worker copied
	}
	first := len(b.steps)
	b.steps = append(b.steps, make([][]Step, b.locals)...)
	for i := range b.locals {
		for _, l := range x.locals {
			off, size := shard(l.length, b.g.grain, b.locals, i)
			b.local(first+i, l, off, off+size)
		}
	}
}

// local copies bytes [lo, hi) of local flow l on worker w.
func (b *builder) local(w int, l localFlow, lo, hi uint64) {
	rows(b.copy(w, at(SpaceRecv, l.dst, lo, l.dstStride), at(SpaceSend, l.src, lo, l.srcStride), hi-lo, 0, 0), lo, l.srcStride, l.dstStride)
}

func (b *builder) isPacket(length uint64) bool { return length <= b.packetMax }

func (b *builder) emitPacketSends(w int, x *exchange) {
	for _, o := range x.outs {
		if !b.isPacket(o.length) {
			continue
		}
		lo, hi := b.g.span(o.length, w)
		rows(b.stageInput(w, b.packet(b.me, o.to, lo), at(SpaceSend, o.src, lo, o.srcStride), hi-lo, 1, o.check), lo, o.srcStride)
	}
}

func (b *builder) emitPacketReceives(w int, x *exchange) {
	for _, in := range x.ins {
		if !b.isPacket(in.length) {
			continue
		}
		lo, hi := b.g.span(in.length, w)
		rows(b.copy(w, at(SpaceRecv, in.dst, lo, in.dstStride), b.packet(in.from, b.me, lo), hi-lo, 1, in.check), lo, in.dstStride)
	}
	for _, r := range x.reduces {
		if !b.isPacket(r.length) {
			continue
		}
		lo, hi := b.g.span(r.length, w)
		srcs := make([]Ref, b.n)
		for q := range b.n {
			srcs[q] = b.packet(q, b.me, lo)
		}
		srcs[b.me] = at(SpaceSend, r.own, lo, r.ownStride)
		rows(b.reduce(w, at(SpaceRecv, r.dst, lo, r.dstStride), srcs, b.me, hi-lo, 1, r.check), lo, r.ownStride, r.dstStride)
	}
}

// chunkCount is the most chunks any staged transfer of this rank needs.
func (b *builder) chunkCount(x *exchange) int {
	k := 0
	x.eachLength(func(length uint64) {
		if !b.isPacket(length) {
			k = max(k, b.g.chunks(length))
		}
	})
	return k
}

// eachLength calls f with the length of every staged or packet transfer
// (outs, ins and reduces; local copies are neither).
func (x *exchange) eachLength(f func(length uint64)) {
	for _, o := range x.outs {
		f(o.length)
	}
	for _, in := range x.ins {
		f(in.length)
	}
	for _, r := range x.reduces {
		f(r.length)
	}
}

// emitChunk is chunk c of worker w: drain, Stage (push into the consumer's
// staging), Notify, then Consume (from this rank's own staging), each part
// of it on its consumer (engine.go: w itself, or a reduction's reducers).
func (b *builder) emitChunk(w, c int, x *exchange) {
	b.produce(w, c, x)
	for k := range b.consumers() {
		b.consume(w, k, c, x)
	}
}

// produce is chunk c of producer w: drain, Stage, Notify.
func (b *builder) produce(w, c int, x *exchange) {
	g := b.g
	// Drain: before a slot is overwritten, its consumers of chunk c-slots
	// must have raised FlagConsumed.
	if c >= g.slots {
		seen := 0
		for _, o := range x.outs {
			if lo, hi := g.piece(o.length, w, c); !b.isPacket(o.length) && lo < hi && seen&(1<<o.to) == 0 {
				seen |= 1 << o.to
				for k := range b.consumers() {
					b.wait(w, b.consumedSlot(b.me, o.to, b.consumer(w, k)), int64(c-g.slots+1), o.check)
				}
			}
		}
	}
	// Push every consumer's piece into its staging, then notify each once:
	// one fence publishes them all, and the pushes overlap.
	notified := 0
	for _, o := range x.outs {
		lo, hi := g.piece(o.length, w, c)
		if b.isPacket(o.length) || lo == hi {
			continue
		}
		rows(b.stageInput(w, b.stage(o.to, b.me, g.stageOff(w, c, o.seg)), at(SpaceSend, o.src, lo, o.srcStride), hi-lo, 0, 0), lo, o.srcStride)
	}
	for _, o := range x.outs {
		if lo, hi := g.piece(o.length, w, c); !b.isPacket(o.length) && lo < hi && notified&(1<<o.to) == 0 {
			notified |= 1 << o.to
			b.notify(w, o.to, b.readySlot(FlagReady, b.me, o.to, w), int64(c+1), o.check)
		}
	}
}

// consume is part k of chunk c of what producer w's peers pushed, on its
// consumer: Wait, then Copy or Reduce out of this rank's staging, then
// FlagConsumed where the slot is reused (and on the copy engine always).
// A consumer raises FlagConsumed for every chunk of its producer's, its
// own part empty or not, so a producer waits for all of them alike.
func (b *builder) consume(w, k, c int, x *exchange) {
	g, v := b.g, b.consumer(w, k)
	waited, drained := 0, 0
	waitFor := func(from int, check uint64, lo, hi uint64) {
		if waited&(1<<from) == 0 && lo < hi {
			waited |= 1 << from
			b.wait(v, b.readySlot(FlagReady, from, b.me, w), int64(c+1), check)
		}
	}
	for _, in := range x.ins {
		lo, hi := g.piece(in.length, w, c)
		if b.isPacket(in.length) || lo == hi {
			continue
		}
		plo, phi := b.part(lo, hi, k)
		waitFor(in.from, in.check, plo, phi)
		rows(b.copy(v, at(SpaceRecv, in.dst, plo, in.dstStride), b.stage(b.me, in.from, g.stageOff(w, c, in.seg)+plo-lo), phi-plo, 0, 0), plo, in.dstStride)
		if g.ring(in.length) || b.engine {
			drained |= 1 << in.from
		}
	}
	for _, r := range x.reduces {
		lo, hi := g.piece(r.length, w, c)
		if b.isPacket(r.length) || lo == hi {
			continue
		}
		plo, phi := b.part(lo, hi, k)
		srcs := make([]Ref, b.n)
		for q := range b.n {
			if q != b.me {
				waitFor(q, r.check, plo, phi)
				srcs[q] = b.stage(b.me, q, g.stageOff(w, c, inbox(q, b.me, b.n))+plo-lo)
				if g.ring(r.length) || b.engine {
					drained |= 1 << q
				}
			}
		}
		srcs[b.me] = at(SpaceSend, r.own, plo, r.ownStride)
		rows(b.reduce(v, at(SpaceRecv, r.dst, plo, r.dstStride), srcs, b.me, phi-plo, 0, 0), plo, r.ownStride, r.dstStride)
	}
	for q := range b.n {
		if drained&(1<<q) != 0 {
			b.notify(v, q, b.consumedSlot(q, b.me, v), int64(c+1), x.checkFrom(q))
		}
	}
}

// localLongest is the length of the exchange's longest local copy.
func (x *exchange) localLongest() uint64 {
	var m uint64
	for _, l := range x.locals {
		m = max(m, l.length)
	}
	return m
}

// checkFrom is the check word of this rank's transfers from rank q.
func (x *exchange) checkFrom(q int) uint64 {
	for _, in := range x.ins {
		if in.from == q {
			return in.check
		}
	}
	if len(x.reduces) > 0 {
		return x.reduces[0].check
	}
	return 0
}

// writes reports whether the exchange writes staging or packets.
func (x *exchange) writes() bool {
	for _, o := range x.outs {
		if o.length > 0 {
			return true
		}
	}
	return false
}

// regimeOf names what the exchange's longest transfer needs: nothing,
// packets, or a staged regime (see geometry.regime).
func (b *builder) regimeOf(x *exchange) Regime {
	var longest uint64
	x.eachLength(func(length uint64) { longest = max(longest, length) })
	switch {
	case longest == 0:
		return RegimeEmpty
	case b.isPacket(longest):
		return RegimePacket
	case b.direct:
		return RegimeDirect
	}
	return b.g.regime(longest)
}
