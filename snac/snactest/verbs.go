package snactest

import (
	"cmp"
	"encoding/binary"
	"fmt"

	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
)

var le = binary.LittleEndian

func target(w *worker, delta int64) int64 { return int64(w.epoch) + delta }

// packetWord is the flag word of a packet of this step.
func packetWord(w *worker, st *snac.Step) uint64 {
	return uint64(uint32(st.Check))<<32 | uint64(uint32(target(w, st.Delta)))
}

// ready reports whether worker i's next step can run now.
func (s *Sim) ready(rk *rank, i int) bool {
	w := &rk.workers[i]
	st := &rk.plan.Steps[w.pc]
	switch st.Verb {
	case snac.Wait:
		t := target(w, st.Delta)
		return t <= 0 || rk.flags[snac.SignalIndex(st.Slot, uint64(t))] >= uint64(t)
	case snac.Copy, snac.Reduce:
		for k := range nsrc(st) {
			if r := st.Src[k]; r.Space == snac.SpacePacket && !s.packetsReady(w, st, r) {
				return false
			}
		}
	}
	return true
}

func nsrc(st *snac.Step) int {
	if st.Verb == snac.Copy {
		return 1
	}
	return int(st.NSrc)
}

func (s *Sim) packetsReady(w *worker, st *snac.Step, r snac.Ref) bool {
	buf := s.ranks[r.Rank].packets
	base := r.Off + (w.epoch&1)*r.Half
	want := uint32(target(w, st.Delta))
	for p := range (st.Bytes + 7) / 8 {
		at := base + 16*p + 8
		if at+8 > uint64(len(buf)) || uint32(le.Uint64(buf[at:])) != want {
			return at+8 > uint64(len(buf)) // out of bounds: let step report it
		}
	}
	return true
}

// step runs worker i's next step.
func (s *Sim) step(rk *rank, i int) error {
	w := &rk.workers[i]
	st := &rk.plan.Steps[w.pc]
	where := func() string {
		return fmt.Sprintf("rank %d call %d worker %d step %d (%s)", rk.id, rk.calls, i, w.pc, st.Verb)
	}
	var err error
	switch st.Verb {
	case snac.Notify:
		if int(st.Peer) >= len(s.ranks) || st.Slot >= snac.NumSlots {
			return errs.New(errs.ErrInternal, "%s: peer %d slot %d out of range", where(), st.Peer, st.Slot)
		}
		peer := s.ranks[st.Peer]
		v := uint64(target(w, st.Delta))
		at := snac.SignalIndex(st.Slot, v)
		if v < peer.flags[at] {
			return errs.New(errs.ErrInternal, "%s: flag %d on rank %d goes back from %d to %d", where(), st.Slot, st.Peer, peer.flags[at], v)
		}
		peer.checks[at] = st.Check
		peer.flags[at] = v
	case snac.Wait:
		t := target(w, st.Delta)
		if t <= 0 {
			break
		}
		if got := rk.checks[snac.SignalIndex(st.Slot, uint64(t))]; got != st.Check {
			return errs.New(errs.ErrMismatch, "%s: check word %#x, want %#x", where(), got, st.Check)
		}
	case snac.Copy, snac.Reduce:
		err = s.move(rk, w, st)
	case snac.Advance:
		w.epoch += snac.EpochAdvance
	case snac.Epilogue:
		err = s.epilogue(rk, st)
	default:
		err = errs.New(errs.ErrInternal, "unknown verb %d", st.Verb)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where(), err)
	}
	w.pc++
	if w.pc == w.end {
		s.finish(rk, i)
	}
	return nil
}

// move runs a Copy or Reduce: read every source, then write Dst.
func (s *Sim) move(rk *rank, w *worker, st *snac.Step) error {
	if !st.RowsValid() {
		return errs.New(errs.ErrInternal, "strided Refs out of shape (row %d, col %d)", st.Row, st.Col)
	}
	srcs := make([][]byte, nsrc(st))
	for k := range srcs {
		b, err := s.read(rk, w, st, st.Src[k])
		if err != nil {
			return err
		}
		srcs[k] = b
	}
	out := srcs[0]
	if st.Verb == snac.Reduce {
		p := rk.cur.Plan
		out = make([]byte, st.Bytes)
		numeric.Reduce(out, srcs, p.Type, p.Op, p.NRanks, uint(st.Scale))
	}
	return s.write(rk, w, st, st.Dst, out)
}

// read returns a copy of the Bytes a source Ref names, checking that it was
// written in this call.
func (s *Sim) read(rk *rank, w *worker, st *snac.Step, r snac.Ref) ([]byte, error) {
	n := st.Bytes
	switch r.Space {
	case snac.SpaceSend, snac.SpaceRecv:
		l := rk.cur
		if int(r.Rank) >= len(l.Bufs) {
			return nil, errs.New(errs.ErrInternal, "buffer %d of %d", r.Rank, len(l.Bufs))
		}
		b := l.Bufs[r.Rank]
		base, ext := b.Send, b.In
		if r.Space == snac.SpaceRecv {
			base, ext = b.Recv, b.Out
		}
		out := make([]byte, 0, n)
		var err error
		st.Runs(func(k, m uint64) {
			if at := st.At(r, k); at+m > ext || at < r.Off-uint64(st.Col) {
				err = errs.New(errs.ErrInternal, "reads [%d,+%d) of %d-byte %v", at, m, ext, r.Space)
			} else if r.Space == snac.SpaceRecv && anyOf(l.final[base+at:base+at+m]) {
				err = errs.New(errs.ErrInternal, "reads output [%d,+%d) after its epilogue", at, m)
			} else if err == nil {
				out = append(out, l.Mem[base+at:base+at+m]...)
			}
		})
		return out, err
	case snac.SpaceStage:
		owner := s.ranks[r.Rank]
		at := r.Off + (w.epoch&1)*r.Half
		if at+n > uint64(len(owner.stage)) {
			return nil, errs.New(errs.ErrInternal, "reads staging [%d,+%d) of %d", at, n, len(owner.stage))
		}
		want := tag(w.epoch, 0) >> 4 // pushed by any rank in this call
		for k := at / tagUnit; k < (at+n+tagUnit-1)/tagUnit; k++ {
			if owner.stageTag[k]>>4 != want {
				return nil, errs.New(errs.ErrInternal, "reads rank %d staging byte %d tagged %s in channel call %d", owner.id, k*tagUnit, tagString(owner.stageTag[k]), channelCall(w.epoch))
			}
		}
		fill(owner.stageUnread[at/tagUnit:(at+n+tagUnit-1)/tagUnit], false)
		return append([]byte(nil), owner.stage[at:at+n]...), nil
	case snac.SpacePacket:
		owner := s.ranks[r.Rank]
		at := r.Off + (w.epoch&1)*r.Half
		npk := (n + 7) / 8
		if at+16*npk > uint64(len(owner.packets)) {
			return nil, errs.New(errs.ErrInternal, "reads packets [%d,+%d) of %d", at, 16*npk, len(owner.packets))
		}
		out := make([]byte, n)
		for p := range npk {
			pk := at + 16*p
			if hi := uint32(le.Uint64(owner.packets[pk+8:]) >> 32); hi != uint32(st.Check) {
				return nil, errs.New(errs.ErrMismatch, "packet check %#x, want %#x", hi, uint32(st.Check))
			}
			if c := owner.packetTag[pk/16] >> 4; c != tag(w.epoch, 0)>>4 {
				return nil, errs.New(errs.ErrInternal, "reads a packet of rank %d tagged %s in channel call %d", owner.id, tagString(owner.packetTag[pk/16]), channelCall(w.epoch))
			}
			copy(out[8*p:min(8*p+8, n)], owner.packets[pk:pk+8])
		}
		return out, nil
	}
	return nil, errs.New(errs.ErrInternal, "space %d", r.Space)
}

// write stores data where Ref r points, checking extents and ownership.
func (s *Sim) write(rk *rank, w *worker, st *snac.Step, r snac.Ref, data []byte) error {
	n := uint64(len(data))
	switch r.Space {
	case snac.SpaceSend:
		return errs.New(errs.ErrInternal, "writes into Send")
	case snac.SpaceRecv:
		return writeOutput(rk.cur, int(r.Rank), st, r, data)
	case snac.SpacePeerRecv:
		// The slot names a peer's output of one of this Launch's calls
		// (snac.PeerSlot): it must be the call this worker is in.
		if mine := collectiveBuffer(rk, w.epoch); int(r.Rank)/len(s.ranks) != mine {
			return errs.New(errs.ErrInternal, "pushes into peer slot %d (buffer %d) in the call of buffer %d", r.Rank, int(r.Rank)/len(s.ranks), mine)
		}
		l, buf, err := s.peerOutput(w, int(r.Rank)%len(s.ranks))
		if err != nil {
			return err
		}
		return writeOutput(l, buf, st, r, data)
	case snac.SpaceStage:
		owner := s.ranks[r.Rank]
		at := r.Off + (w.epoch&1)*r.Half
		if at+n > uint64(len(owner.stage)) {
			return errs.New(errs.ErrInternal, "writes staging [%d,+%d) of %d", at, n, len(owner.stage))
		}
		units := owner.stageTag[at/tagUnit : (at+n+tagUnit-1)/tagUnit]
		unread := owner.stageUnread[at/tagUnit : (at+n+tagUnit-1)/tagUnit]
		t := tag(w.epoch, rk.id)
		for k := range units {
			// A writer never overwrites what it staged before and no one
			// has read yet: in this call (a ring slot reused early) or in
			// an earlier one (staging that a call does not keep apart from
			// the calls before it, as the copy engine's fixed region). What
			// another writer staged is its own: ranks that disagree on a
			// call collide there, and their check words say so.
			if unread[k] && units[k]&15 == t&15 {
				return errs.New(errs.ErrInternal, "rank %d overwrites rank %d staging byte %d, unread since %s", rk.id, owner.id, at+uint64(k)*tagUnit, tagString(units[k]))
			}
		}
		copy(owner.stage[at:], data)
		fill(units, t)
		fill(unread, true)
	case snac.SpacePacket:
		owner := s.ranks[r.Rank]
		at := r.Off + (w.epoch&1)*r.Half
		npk := (n + 7) / 8
		if at+16*npk > uint64(len(owner.packets)) {
			return errs.New(errs.ErrInternal, "writes packets [%d,+%d) of %d", at, 16*npk, len(owner.packets))
		}
		word := packetWord(w, st)
		t := tag(w.epoch, rk.id)
		for p := range npk {
			pk := at + 16*p
			var payload [8]byte
			copy(payload[:], data[8*p:min(8*p+8, n)])
			copy(owner.packets[pk:], payload[:])
			le.PutUint64(owner.packets[pk+8:], word)
			owner.packetTag[pk/16] = t
		}
	default:
		return errs.New(errs.ErrInternal, "space %d", r.Space)
	}
	return nil
}

// epilogue runs an Epilogue step on the output rows it names, once each,
// with numeric's arithmetic (the host Atom's), marking them final.
func (s *Sim) epilogue(rk *rank, st *snac.Step) error {
	l := rk.cur
	p := rk.cur.Plan
	kind, hidden, eps := st.EpilogueOf()
	e := numeric.EpilogueRows{Type: p.Type, Kind: kind, Hidden: int(hidden), Eps: eps}
	size := uint64(p.Type.Size())
	rowBytes := uint64(e.Hidden) * size
	if int(st.Dst.Rank) >= len(l.Bufs) || st.Dst.Space != snac.SpaceRecv || st.Dst.Pitch != 0 || rowBytes == 0 || st.Dst.Off%rowBytes != 0 || st.Bytes%rowBytes != 0 {
		return errs.New(errs.ErrInternal, "epilogue of %d bytes at %v %d: not whole rows of %d bytes of an output", st.Bytes, st.Dst.Space, st.Dst.Off, rowBytes)
	}
	b := l.Bufs[st.Dst.Rank]
	off, n := st.Dst.Off, st.Bytes
	if off+n > b.Out {
		return errs.New(errs.ErrInternal, "epilogue on [%d,+%d) outside the %d-byte Recv extent", off, n, b.Out)
	}
	out := l.Mem[b.Recv+off : b.Recv+off+n]
	if anyOf(l.final[b.Recv+off : b.Recv+off+n]) {
		return errs.New(errs.ErrInternal, "epilogue on output [%d,+%d) twice", off, n)
	}
	written := func(at, m uint64) []byte {
		fill(l.Written[at:at+m], true)
		return l.Mem[at : at+m]
	}
	var residual, weight, quant, scales []byte
	if e.Kind&spec.EpilogueResidualAdd != 0 {
		residual = written(b.Residual+off, n)
	}
	if e.Kind&spec.EpilogueRMSNorm != 0 {
		weight = l.Mem[b.Weight : b.Weight+rowBytes]
	}
	if e.Kind&spec.EpilogueQuantFP8 != 0 {
		quant = written(b.Quant+off/size, n/size)
		scales = l.Mem[b.Scales : b.Scales+4]
		if e.Kind&spec.EpilogueRowScale != 0 {
			scales = written(b.Scales+4*(off/rowBytes), 4*(n/rowBytes))
		}
	}
	e.Run(out, residual, weight, quant, scales)
	fill(l.Written[b.Recv+off:b.Recv+off+n], true)
	fill(l.final[b.Recv+off:b.Recv+off+n], true)
	return nil
}

func anyOf(s []bool) bool {
	for _, v := range s {
		if v {
			return true
		}
	}
	return false
}

// fill sets every element of s to v with O(log n) copies (cheap under -race).
func fill[T any](s []T, v T) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	for k := 1; k < len(s); k *= 2 {
		copy(s[k:], s[:k])
	}
}

// tagUnit is the staging bytes one tag covers: Plans stage 16-byte-aligned
// pieces, and a piece's reader reads exactly what its writer wrote.
const tagUnit = 16

// tag names the writer of staging or packet bytes and the call it wrote
// them in: the writing worker's epoch, which counts the calls on its
// channel. The reader's worker runs the same call at the same epoch (its
// own channel's count of calls to or from the writer, or the collective
// count), however either rank grouped its calls into Plans.
func tag(epoch uint64, writer int) uint32 { return uint32(channelCall(epoch)+1)<<4 | uint32(writer) }

// channelCall is the index of a worker's call on its channel.
func channelCall(epoch uint64) uint64 { return epoch / snac.EpochAdvance }

func tagString(t uint32) string {
	if t == 0 {
		return "never written"
	}
	return fmt.Sprintf("(rank %d, channel call %d)", t&15, int(t>>4)-1)
}

// writeOutput stores data where Ref r points in the output of buffer buf
// of Launch l, checking its extent and its epilogue's rows.
func writeOutput(l *Launch, buf int, st *snac.Step, r snac.Ref, data []byte) error {
	if buf >= len(l.Bufs) {
		return errs.New(errs.ErrInternal, "buffer %d of %d", buf, len(l.Bufs))
	}
	b := l.Bufs[buf]
	var err error
	st.Runs(func(k, m uint64) {
		at := st.At(r, k)
		if at+m > b.Out || at < r.Off-uint64(st.Col) {
			err = errs.New(errs.ErrInternal, "writes [%d,+%d) outside the %d-byte Recv extent", at, m, b.Out)
			return
		}
		if anyOf(l.final[b.Recv+at : b.Recv+at+m]) {
			err = errs.New(errs.ErrInternal, "writes output [%d,+%d) after its epilogue", at, m)
			return
		}
		copy(l.Mem[b.Recv+at:], data[k:k+m])
		fill(l.Written[b.Recv+at:b.Recv+at+m], true)
	})
	if err != nil || uint64(len(data)) != st.Bytes {
		return cmp.Or(err, errs.New(errs.ErrInternal, "writes %d bytes for a %d-byte step", len(data), st.Bytes))
	}
	return nil
}

// collectiveBuffer is the buffer of rank rk's current Launch whose call
// its collective channel runs at epoch (Launch.Collectives), or -1.
func collectiveBuffer(rk *rank, epoch uint64) int {
	k := int((epoch - rk.collStart) / snac.EpochAdvance)
	switch {
	case rk.cur.Collectives == nil && k == 0:
		return 0
	case k < len(rk.cur.Collectives):
		return rk.cur.Collectives[k]
	}
	return -1
}

// peerOutput is the Launch and buffer whose output a direct push of
// worker w into rank q's output (snac.SpacePeerRecv) lands in: q's
// current Launch, which must be in the same call (q's workers of the
// channel at w's epoch), and that call's buffer there (Launch.Collectives),
// however each rank grouped its calls. Anything else is a push into a
// call that has not begun there, or has ended, the race the direct
// regime's enter handshake exists to prevent.
func (s *Sim) peerOutput(w *worker, q int) (*Launch, int, error) {
	owner := s.ranks[q]
	if owner.cur != nil {
		for i, wk := range owner.plan.Workers {
			if wk.Channel == snac.Collective && owner.workers[i].epoch == w.epoch {
				if buf := collectiveBuffer(owner, w.epoch); buf >= 0 {
					return owner.cur, buf, nil
				}
				return nil, 0, errs.New(errs.ErrInternal, "pushes into rank %d's output of a collective its Launch does not hold", q)
			}
		}
	}
	return nil, 0, errs.New(errs.ErrInternal, "pushes into rank %d's output in channel call %d, which rank %d is not in", q, channelCall(w.epoch), q)
}
