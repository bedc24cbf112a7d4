package snac

// The done rule (see doc.go): before a worker first writes a staging or
// packet half, it waits until every rank that may read that half has
// finished the call two calls ago; each rank says so once per call, from
// its channel's worker 0, after all its workers are done.

// doneTargets are the ranks that write for this one, so wait for its
// FlagDone: on the collective channel every other rank, on a receive
// channel the sender, on a send channel nobody (the receiver never writes
// for the sender).
func (b *builder) doneTargets() []int {
	if b.p2p {
		if b.sender {
			return nil
		}
		return []int{b.peer}
	}
	return b.others()
}

// others are the ranks other than this one, in rank order.
func (b *builder) others() []int {
	r := make([]int, 0, b.n)
	for q := range b.n {
		if q != b.me {
			r = append(r, q)
		}
	}
	return r
}

// doneSlot is the slot that reader's worker 0 raises on a rank that writes
// for it (the slot lives on the writer, so the writer needs no naming).
func (b *builder) doneSlot(reader int) uint32 {
	if b.p2p {
		return FlagSlot(SendChannel(reader), FlagDone, reader, 0)
	}
	return FlagSlot(Collective, FlagDone, reader, 0)
}

// doneHead: wait for every reader of this rank's halves to be done with
// the call two calls ago.
func (b *builder) doneHead(p *Plan) {
	readers := b.others()
	if b.p2p {
		readers = []int{b.peer}
	}
	for _, q := range readers {
		p.Steps = append(p.Steps, Step{Verb: Wait, Slot: b.doneSlot(q), Delta: DoneDelta, Check: DoneCheck})
	}
}

// doneTail: workers 1.. raise a flag on their own rank; worker 0 waits for
// them, then raises FlagDone on every rank that writes for this one.
func (b *builder) doneTail(p *Plan, w int) {
	targets := b.doneTargets()
	if len(targets) == 0 {
		return
	}
	ch := b.channel()
	if w != 0 {
		p.Steps = append(p.Steps, Step{Verb: Notify, Peer: uint8(b.me), Slot: FlagSlot(ch, FlagDone, b.me, w), Delta: EpochAdvance, Check: DoneCheck})
		return
	}
	for v := 1; v < len(b.steps); v++ {
		p.Steps = append(p.Steps, Step{Verb: Wait, Slot: FlagSlot(ch, FlagDone, b.me, v), Delta: EpochAdvance, Check: DoneCheck})
	}
	for _, q := range targets {
		p.Steps = append(p.Steps, Step{Verb: Notify, Peer: uint8(q), Slot: b.doneSlot(b.me), Delta: EpochAdvance, Check: DoneCheck})
	}
}
