package snac

import (
	"sync"

	"purlin/spec"
)

// builder accumulates the steps of one rank's Plan, worker by worker, and
// knows how this rank addresses staging, packets and flags on its channel.
type builder struct {
	t     Topology
	me, n int
	g     geometry
	// p2p is set for SendRecv: the channel is SendChannel(peer) on the
	// sender and RecvChannel(peer) on the receiver, staging is the sender's
	// area for the receiver, and packets use the point-to-point windows.
	p2p    bool
	peer   int
	sender bool     // p2p: this rank sends
	steps  [][]Step // per worker
	writes bool     // p2p: this rank writes staging or packets (needs the done head)
	// check is the call's check word; agree: the Plan exchanges it with
	// every rank before it waits for any (rooted collectives, see agree.go).
	agree bool
	check uint64
	// aside is the worker, the Plan's last, that runs what no transfer of
	// the call waits for, beside them: a small call's local copies (emit)
	// or a rooted call's agreement (agree.go); 0 when there is none.
	aside int
	// locals is the number of workers, after the data's, that run a staged
	// call's local copies (0: the copies run on the data's workers, or on
	// the aside worker).
	locals int
	// packetMax is the longest transfer that moves as packets (packetLimit).
	packetMax uint64
	// helloTo, helloFrom: the ranks this one sends nothing to, and hears
	// nothing from, in a collective: worker 0 greets the first and waits for
	// the greeting of the second (see hello.go).
	helloTo, helloFrom []int
	// premul is set for a PreMulSum reduction: this rank's input meets its
	// scalar where the Plan first reads it (stageInput, and the own source
	// of each reduce), and nowhere else.
	premul bool
	// engine is set for a Plan of the copy engine (engine.go): its workers
	// are EngineCopy and its staging Refs carry no Half. reducers: a
	// reduction's, the EngineSM workers that consume what each producer's
	// peers push (0: every worker consumes its own part).
	engine   bool
	reducers int
	// loops is set where a ring's repeating chunks may be one loop's body
	// (emitChunks): not under an epilogue (placed after its rows' last
	// steps, epilogue.go) or a column block's rows (a shifted row starts
	// elsewhere in its row), nor on the copy engine.
	loops bool
	// direct is set for a Plan that pushes straight into the consumers'
	// outputs (direct.go): no staging, no packets. transpose: an AllToAll
	// (emitDirectTranspose), inPlace: this rank's call is in place.
	direct, transpose, inPlace bool
}

// loopsOff makes every Build write its chunks out, for tests that compare
// a Plan with its loops unrolled.
var loopsOff bool

func newBuilder(c *spec.Call, t Topology, g geometry) *builder {
	b := &builder{t: t, me: t.Rank, n: t.NRanks, g: g, steps: make([][]Step, g.workers),
		agree: c.Coll.Rooted() && c.NRanks > 1, check: callCheck(c, t), packetMax: packetLimit(c, t),
		premul: c.Coll.Reduces() && c.Op.Kind == spec.PreMulSum,
		loops:  !loopsOff && c.Epilogue.Kind == 0 && c.InStride().Row == 0 && c.OutStride().Row == 0}
	for w := range b.steps {
		if v, ok := workerSteps.Get().(*[]Step); ok {
			b.steps[w] = (*v)[:0]
		}
	}
	return b
}

// workerSteps holds the builders' per-worker lists between Builds: plan
// copies them into the Plan, and a large Plan's lists (a ring's are MBs)
// would otherwise be grown from nothing, copied at every growth, by each
// Build of a new size.
var workerSteps sync.Pool

// recycle returns b's lists to workerSteps; nothing may use them after.
func (b *builder) recycle() {
	for w, steps := range b.steps {
		if cap(steps) > 0 {
			workerSteps.Put(&steps)
		}
		b.steps[w] = nil
	}
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

// channel is this rank's channel for the Plan's workers.
func (b *builder) channel() uint16 {
	switch {
	case !b.p2p:
		return Collective
	case b.sender:
		return SendChannel(b.peer)
	}
	return RecvChannel(b.peer)
}

// readySlot is the slot on consumer `to` that producer `from`'s worker w raises.
func (b *builder) readySlot(kind int, from, to, w int) uint32 {
	if b.p2p {
		return FlagSlot(RecvChannel(from), kind, from, w)
	}
	return FlagSlot(Collective, kind, from, w)
}

// consumedSlot is the slot on producer `from` that consumer `to`'s worker w raises.
func (b *builder) consumedSlot(from, to, w int) uint32 {
	if b.p2p {
		return FlagSlot(SendChannel(to), FlagConsumed, to, w)
	}
	return FlagSlot(Collective, FlagConsumed, to, w)
}

// stage is byte off of the half-relative staging of rank owner, the
// consumer, that producer from pushes into: the collective half (where
// segments keep producers apart), or owner's p2p area for from.
func (b *builder) stage(owner, from int, off uint64) Ref {
	r := Ref{Space: SpaceStage, Rank: uint8(owner), Off: off, Half: b.t.StageHalf}
	if b.p2p {
		r.Off, r.Half = b.t.P2PStageOff(from)+off, b.t.P2PHalf
	}
	if b.engine {
		r.Half = 0 // off spans both halves (engine.go)
	}
	return r
}

// packet is payload byte off of producer from's window on consumer to.
func (b *builder) packet(from, to int, off uint64) Ref {
	if b.p2p {
		return Ref{Space: SpacePacket, Rank: uint8(to), Off: b.t.P2PPacketOff(from) + 2*off, Half: b.t.PacketWindow()}
	}
	return Ref{Space: SpacePacket, Rank: uint8(to), Off: b.t.PacketOff(from) + 2*off, Half: b.t.PacketHalf()}
}

func sendRef(off uint64) Ref { return Ref{Space: SpaceSend, Off: off} }
func recvRef(off uint64) Ref { return Ref{Space: SpaceRecv, Off: off} }

func (b *builder) add(w int, s Step) *Step {
	b.steps[w] = append(b.steps[w], s)
	return &b.steps[w][len(b.steps[w])-1]
}

// copy moves bytes from src to dst; it returns the step it added (nil for
// no bytes), for a strided part to set its rows (exchange.go).
func (b *builder) copy(w int, dst, src Ref, bytes uint64, delta int64, check uint64) *Step {
	if bytes == 0 {
		return nil
	}
	return b.add(w, Step{Verb: Copy, Dst: dst, Src: [MaxSrc]Ref{src}, Bytes: bytes, Delta: delta, Check: check})
}

// reduce combines srcs into dst; srcs[own] is this rank's input, the one
// source a PreMulSum multiplies (by this rank's scalar).
func (b *builder) reduce(w int, dst Ref, srcs []Ref, own int, bytes uint64, delta int64, check uint64) *Step {
	if bytes == 0 {
		return nil
	}
	s := Step{Verb: Reduce, NSrc: uint8(len(srcs)), Dst: dst, Bytes: bytes, Delta: delta, Check: check}
	if b.premul {
		s.Scale = 1 << own
	}
	copy(s.Src[:], srcs)
	return b.add(w, s)
}

// stageInput copies bytes of this rank's input (src) into staging or packets
// for consumers. A PreMulSum multiplies them by this rank's scalar on the
// way (a one-source Reduce), so consumers add what they read as it is.
func (b *builder) stageInput(w int, dst, src Ref, bytes uint64, delta int64, check uint64) *Step {
	if b.premul {
		return b.reduce(w, dst, []Ref{src}, 0, bytes, delta, check)
	}
	return b.copy(w, dst, src, bytes, delta, check)
}

func (b *builder) notify(w, peer int, slot uint32, delta int64, check uint64) {
	b.add(w, Step{Verb: Notify, Peer: uint8(peer), Slot: slot, Delta: delta, Check: check})
}

func (b *builder) wait(w int, slot uint32, delta int64, check uint64) {
	b.add(w, Step{Verb: Wait, Slot: slot, Delta: delta, Check: check})
}

// setAside adds the aside worker when the call's data leaves one free.
func (b *builder) setAside() {
	if len(b.steps) < b.t.Workers {
		b.aside = len(b.steps)
		b.steps = append(b.steps, nil)
	}
}

// plan assembles the workers: worker 0 framed by the agreement of a rooted
// collective or the hellos of another, every worker of a point-to-point
// Plan headed by the done rule. A rooted call whose data leaves a worker
// free runs its agreement on the aside worker instead.
func (b *builder) plan(regime Regime) *Plan {
	p := &Plan{Regime: regime, NRanks: b.n, Rank: b.me}
	total := 0
	for _, steps := range b.steps {
		total += len(steps)
	}
	// The workers' steps, and room for the few a greeting, an agreement or
	// a done head add: a ring's Plan is tens of MB, copied again at every
	// growth of an unsized slice.
	p.Steps, p.Workers = make([]Step, 0, total+2*len(b.steps)+8), make([]Worker, 0, len(b.steps))
	ch := b.channel()
	if b.agree && b.aside == 0 {
		b.setAside()
	}
	for w := range b.steps {
		first := len(p.Steps)
		if b.p2p {
			b.doneHead(p, w)
		}
		switch {
		case w == b.aside && b.aside != 0 && b.agree:
			p.Steps = b.agreement(p.Steps, nil)
		case w == 0 && b.agree && b.aside == 0:
			p.Steps = b.agreement(p.Steps, b.steps[w])
		case w == 0:
			p.Steps = b.greeted(p.Steps, b.steps[w])
		default:
			p.Steps = append(p.Steps, b.steps[w]...)
		}
		p.Steps = closeLoop(p.Steps, first)
		wk := Worker{Channel: ch, Index: uint16(w), First: uint32(first), Count: uint32(len(p.Steps) - first)}
		if b.engine && (b.reducers == 0 || w < b.g.workers) {
			wk.Engine = EngineCopy
		}
		p.Workers = append(p.Workers, wk)
	}
	b.recycle()
	p.markLoops()
	return p
}
