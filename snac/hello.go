package snac

// Why the collective channel needs no done rule. Staging halves and packet
// windows alternate with the epoch's parity, so a rank R may rewrite a half
// in call e+2 only once every rank Q that reads it has finished call e. An
// Atom runs a rank's calls on a channel one after another (a kernel starts
// its work after the one before it has ended), so anything Q sends in call
// e+1 was sent after Q finished call e; if R waits for it in call e+1, R's
// call e+2 starts after Q is done with call e; the same holds when R waits
// for a rank that waited for Q. So it is enough that in every collective
// each rank hears from every other, directly or through a third: every
// AllGather, ReduceScatter and AllToAll does (each rank reads every other
// rank's data), every rooted collective through its agreement (agree.go),
// and every AllReduce (a rank whose shard is too small to hold data still
// waits for the shards of others, which waited for every rank). V
// collectives with zero counts leave some pairs silent; for those,
// worker 0 sends the call's check word to each rank it sends nothing to
// (FlagAgree: a rooted call's agreement and a greeting are never in one
// call) and waits, after its body, for the greetings of each rank it hears
// nothing from. Both ends derive the silence from the call's shape alone,
// so a greeting is sent exactly when it is awaited.
//
// Merge keeps the argument in a group: collectives chained on the channel
// are joined between one another (join), so that within a Plan too, a call
// starts once every worker has finished the one before it.

// greeted appends worker 0's body framed by its greetings.
func (b *builder) greeted(dst, body []Step) []Step {
	for _, q := range b.helloTo {
		dst = append(dst, Step{Verb: Notify, Peer: uint8(q), Slot: FlagSlot(Collective, FlagAgree, b.me, 0), Delta: 1, Check: b.check})
	}
	dst = append(dst, body...)
	for _, q := range b.helloFrom {
		dst = append(dst, Step{Verb: Wait, Slot: FlagSlot(Collective, FlagAgree, q, 0), Delta: 1, Check: b.check})
	}
	return dst
}

// silence sets b.helloTo and b.helloFrom from which ranks this one sends to
// and hears from: sends and hears hold one bit per rank.
func (b *builder) silence(sends, hears uint64) {
	for _, q := range b.others() {
		if sends&(1<<q) == 0 {
			b.helloTo = append(b.helloTo, q)
		}
		if hears&(1<<q) == 0 {
			b.helloFrom = append(b.helloFrom, q)
		}
	}
}

// peers returns the ranks the exchange sends to and hears from, one bit
// each. A transfer from R to Q has one length on both ends (the call's
// shape fixes it; AllToAllV's pair counts must match as NCCL's must), so
// R sends to Q exactly when Q hears from R.
func (x *exchange) peers() (sends, hears uint64) {
	for _, o := range x.outs {
		if o.length > 0 {
			sends |= 1 << o.to
		}
	}
	for _, in := range x.ins {
		if in.length > 0 {
			hears |= 1 << in.from
		}
	}
	for _, r := range x.reduces {
		if r.length > 0 {
			hears = ^uint64(0) // a reduction reads every rank's part
		}
	}
	return sends, hears
}

// join appends, to worker idx of a chain of width workers on channel ch,
// the join that ends one call of the chain: it raises its own flag on this
// rank, then waits for every worker's (one run of waits).
// epoch+EpochAdvance is the value: the next call's epoch, above any earlier
// join's. The flags are of their own kind (FlagJoined): on a send channel
// to this rank itself, a FlagDone of this rank is the receiver's done rule
// (done.go), which a join must not satisfy.
func join(dst []Step, ch uint16, rank int, idx uint16, width int) []Step {
	dst = append(dst, Step{Verb: Notify, Peer: uint8(rank), Slot: FlagSlot(ch, FlagJoined, rank, int(idx)), Delta: EpochAdvance, Check: DoneCheck})
	for v := range width {
		dst = append(dst, Step{Verb: Wait, Slot: FlagSlot(ch, FlagJoined, rank, v), Delta: EpochAdvance, Check: DoneCheck})
	}
	return dst
}
