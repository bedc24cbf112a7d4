package snac

// The agreement of rooted collectives. Who waits for whom in Broadcast,
// Reduce, Gather and Scatter depends on the root, so ranks that name
// different roots may never compare a check word: each group reads only
// from the root it names, and returns its own data as a success. Worse,
// a rank may wait for a transfer its claimed root never makes.
//
// So a rooted Plan first sends the call's check word to every rank
// (FlagAgree), then waits for every rank's. Every rank sends before it
// waits, so nobody blocks on a rank that disagrees; and any two ranks that
// disagree make every rank see a check word that differs from its own (a
// rank cannot agree with both), so every rank fails with errs.ErrMismatch.
// Every rank hears from every other here, which is also what lets the
// collective channel go without a done rule (hello.go).
//
// Where the call's data leaves a worker free (a call of packets always
// does: build keeps one), the agreement runs on a worker of its own,
// beside the data: an agreement orders no data (a rank raises it before it
// writes anything), so nothing waits for it but the end of the call, and
// the flag's flight and the wait's load are off the data's path. A data worker that meanwhile waits
// for a transfer its claimed root never makes is ended by the agreement's
// failure, as any wait is by an earlier error on its rank (the Atoms bound
// every wait so). Otherwise worker 0 sends first and waits before its first
// step that waits for a peer; the steps before only write (a root's packets
// and staged chunks), so a root's data still leaves at once.

// agreement appends the agreement: a notify to every other rank, then, when
// body is not nil, body's steps up to its first that waits for a peer, then
// a wait for every other rank, then the rest of body.
func (b *builder) agreement(dst, body []Step) []Step {
	others := b.others()
	for _, q := range others {
		dst = append(dst, Step{Verb: Notify, Peer: uint8(q), Slot: FlagSlot(Collective, FlagAgree, b.me, 0), Delta: 1, Check: b.check})
	}
	first := len(body)
	for i := range body {
		if body[i].waitsForPeer() {
			first = i
			break
		}
	}
	dst = append(dst, body[:first]...)
	for _, q := range others {
		dst = append(dst, Step{Verb: Wait, Slot: FlagSlot(Collective, FlagAgree, q, 0), Delta: 1, Check: b.check})
	}
	return append(dst, body[first:]...)
}

// waitsForPeer reports whether a step may block on another rank: a Wait,
// or a copy or reduce that reads packets.
func (s *Step) waitsForPeer() bool {
	switch s.Verb {
	case Wait, Repeat: // a loop's body waits for its chunks
		return true
	case Copy:
		return s.Src[0].Space == SpacePacket
	case Reduce:
		for _, r := range s.Src[:s.NSrc] {
			if r.Space == SpacePacket {
				return true
			}
		}
	}
	return false
}
