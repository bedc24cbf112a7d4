package snac

// The done rule of point-to-point channels (see doc.go): before a sender's
// worker first writes a staging or packet half, it waits until the
// receiver has finished the transfer two transfers ago. The receiver says
// so at the start of the transfer after that one, from its channel's worker
// 0, before anything else: a rank's calls run one after another (an Atom
// starts a Plan's work once the Plan before it has ended, the kernel
// boundary of a GPU), so when a transfer starts every worker of the one
// before it is done, and the receiver needs no join of its workers at the
// end of a transfer (which cost a flag round trip on its critical path).
// Within one merged Plan, where nothing separates two transfers chained on
// a receive channel, Merge puts that join between them instead (merge.go).
// The sender's transfer two ahead thus waits for the receiver's next one
// to have begun; a transfer's data never waits for it.

// doneHead frames the head of a transfer: the sender's workers wait for the
// receiver's FlagDone of the transfer two transfers ago (value epoch of the
// one before this, DoneDelta); the receiver's worker 0 raises FlagDone on
// the sender with this transfer's epoch: every transfer before it is done.
func (b *builder) doneHead(p *Plan, w int) {
	switch {
	case b.writes && b.engine: // one region for every transfer: the one before this must be done (engine.go)
		p.Steps = append(p.Steps, Step{Verb: Wait, Slot: FlagSlot(SendChannel(b.peer), FlagDone, b.peer, 0), Delta: 0, Check: DoneCheck})
	case b.writes:
		p.Steps = append(p.Steps, Step{Verb: Wait, Slot: FlagSlot(SendChannel(b.peer), FlagDone, b.peer, 0), Delta: DoneDelta, Check: DoneCheck})
	case !b.sender && w == 0:
		p.Steps = append(p.Steps, Step{Verb: Notify, Peer: uint8(b.peer), Slot: FlagSlot(SendChannel(b.me), FlagDone, b.me, 0), Delta: 0, Check: DoneCheck})
	}
}
