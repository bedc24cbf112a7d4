package snac

// The done rule of point-to-point channels (see doc.go): before a sender's
// worker first writes a staging or packet half, it waits until the
// receiver has finished the transfer two transfers ago; the receiver says
// so once per transfer, from its channel's worker 0, after all its workers
// are done. (The collective channel needs no done rule: see hello.go.)

// doneHead: the receiver's worker waits for nothing; the sender's for the
// receiver's FlagDone of the transfer two transfers ago.
func (b *builder) doneHead(p *Plan) {
	p.Steps = append(p.Steps, Step{Verb: Wait, Slot: FlagSlot(SendChannel(b.peer), FlagDone, b.peer, 0), Delta: DoneDelta, Check: DoneCheck})
}

// doneTail: on the receiver, workers 1.. raise a flag on their own rank;
// worker 0 waits for them, then raises FlagDone on the sender. The sender's
// workers raise nothing (the receiver never writes for the sender).
func (b *builder) doneTail(p *Plan, w int) {
	if b.sender {
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
	p.Steps = append(p.Steps, Step{Verb: Notify, Peer: uint8(b.peer), Slot: FlagSlot(SendChannel(b.me), FlagDone, b.me, 0), Delta: EpochAdvance, Check: DoneCheck})
}
