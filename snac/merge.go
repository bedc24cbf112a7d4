package snac

import (
	"slices"

	"purlin/errs"
	"purlin/spec"
)

// Merge joins the Plans of one group (each built by Build for this rank)
// into one Plan whose workers all run concurrently, so a group's sends and
// receives progress together.
//
// Plan i's SpaceSend/SpaceRecv Refs are re-indexed to buffer i (offset by
// the buffers of the Plans before it, for Plans that are merges
// themselves): the Launch passes the calls' buffers in group order. Its
// SpacePeerRecv Refs, where it pushes into its peers' outputs (direct.go),
// move to buffer i's peer slots (PeerSlot): so a call pushes into outputs
// whether or not it is merged, and ranks that group their calls
// differently agree on every call, as NCCL lets them group.
//
// Plans on different channels run side by side. Plans on the same channel
// (two collectives, or two transfers to one peer in one direction) are
// chained: worker index w runs them in group order, an Advance step between
// two, so each runs at the epoch it would have if launched alone after the
// one before it, and the merged Plan advances the channel's epochs once per
// call. Collectives chained on the collective channel, and transfers
// chained on a receive channel, are joined between one another (every
// worker raises a flag on its own rank and waits for all of them), as a
// kernel boundary would: see hello.go and done.go. A call's flags,
// packets, check words, staging half and done rule are thus the same
// however the calls around it are grouped: the k-th send from one rank to
// another matches the k-th receive there whether either side posted them in
// one group or in several, as NCCL matches them.
//
// Plans with workers on the collective channel must share Type, Op and
// NRanks; point-to-point Plans only copy, so any type merges with them. A
// merge needing more than MaxWorkers workers, or more than MaxPeerSlots
// peer outputs, is refused.
func Merge(plans ...*Plan) (*Plan, error) {
	if len(plans) == 0 {
		return nil, errs.New(errs.ErrInvalidUsage, "snac: Merge of no Plans")
	}
	out := &Plan{NRanks: plans[0].NRanks, Rank: plans[0].Rank, Type: plans[0].Type, Op: plans[0].Op}
	typed := false
	chains := map[uint16][]chainLink{}
	var channels []uint16
	buffers := uint8(0)
	for i, p := range plans {
		if p.PushesIntoPeers() && PeerSlot(int(buffers+p.buffers()), 0, p.NRanks) > MaxPeerSlots {
			return nil, errs.New(errs.ErrUnsupported, "snac: Merge plan %d pushes into peers' outputs as buffer %d of %d ranks: past %d peer slots", i, buffers, p.NRanks, MaxPeerSlots)
		}
		if p.NRanks != out.NRanks || p.Rank != out.Rank {
			return nil, errs.New(errs.ErrInvalidUsage, "snac: Merge plan %d is rank %d of %d, plan 0 rank %d of %d", i, p.Rank, p.NRanks, out.Rank, out.NRanks)
		}
		if p.collective() {
			if typed && (p.Type != out.Type || p.Op != out.Op) {
				return nil, errs.New(errs.ErrInvalidUsage, "snac: Merge plan %d reduces %s with %s, an earlier one %s with %s", i, p.Type, p.Op, out.Type, out.Op)
			}
			out.Type, out.Op, typed = p.Type, p.Op, true
		}
		out.Regime = max(out.Regime, p.Regime)
		for w := range p.Workers {
			ch := p.Workers[w].Channel
			if _, ok := chains[ch]; !ok {
				channels = append(channels, ch)
			}
			chains[ch] = append(chains[ch], chainLink{plan: p, call: i, worker: w, buffer: buffers})
		}
		buffers += p.buffers()
	}
	slices.Sort(channels)
	for _, ch := range channels {
		out.appendChain(ch, chains[ch])
	}
	if len(out.Workers) > MaxWorkers {
		return nil, errs.New(errs.ErrUnsupported, "snac: Merge of %d Plans needs %d workers, at most %d", len(plans), len(out.Workers), MaxWorkers)
	}
	out.markLoops()
	return out, nil
}

// chainLink is one worker of one Plan joining a channel's chain.
type chainLink struct {
	plan   *Plan
	call   int // the Plan's place among Merge's: a cached Plan may come twice
	worker int
	buffer uint8 // the Plan's first buffer index in the merged Plan
}

// appendChain appends channel ch's merged workers: worker index w runs the
// steps of every Plan's worker w, in group order, with an Advance between
// two Plans. A Plan without a worker w on ch only advances there, once per
// call it holds, so every worker of the channel ends at the same epoch.
func (out *Plan) appendChain(ch uint16, links []chainLink) {
	var parts [][]chainLink // per Plan of the chain, in group order: its workers on ch
	width := 0              // worker indices 0..width-1 are in use
	for i, l := range links {
		if i == 0 || links[i-1].call != l.call {
			parts = append(parts, nil)
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], l)
		width = max(width, int(l.plan.Workers[l.worker].Index)+1)
	}
	for idx := range uint16(width) {
		first := len(out.Steps)
		for i, part := range parts {
			if i > 0 {
				// See hello.go and done.go; a copy engine's transfer
				// keeps its region apart from the next only by its
				// workers' ends (engine.go), so one ends before the next
				// starts on any worker.
				if ch == Collective || receiving(ch) || engineOf(parts[i-1]) || engineOf(part) {
					out.Steps = join(out.Steps, ch, out.Rank, idx, width)
				}
				out.Steps = append(out.Steps, Step{Verb: Advance})
			}
			out.Steps = appendWorker(out.Steps, part, idx)
		}
		out.Steps = closeLoop(out.Steps, first)
		out.Workers = append(out.Workers, Worker{Channel: ch, Index: idx, First: uint32(first), Count: uint32(len(out.Steps) - first),
			Engine: chainEngine(parts, idx)})
	}
}

// engineOf reports whether a Plan's workers on a chain (part) run on a copy engine.
func engineOf(part []chainLink) bool {
	return part[0].plan.Workers[part[0].worker].Engine == EngineCopy
}

// chainEngine is the engine of worker index idx of a chain: the copy
// engine where every Plan with a worker idx there runs it on one (the
// others only advance), else the processors, which run any step.
func chainEngine(parts [][]chainLink, idx uint16) Engine {
	for _, part := range parts {
		for _, l := range part {
			if wk := l.plan.Workers[l.worker]; wk.Index == idx && wk.Engine != EngineCopy {
				return EngineSM
			}
		}
	}
	return EngineCopy
}

// appendWorker appends the steps of worker index idx among one Plan's
// workers on a channel (part), re-indexed to the Plan's buffers; when the
// Plan has no such worker, the Advance steps its workers there hold.
func appendWorker(dst []Step, part []chainLink, idx uint16) []Step {
	for _, w := range part {
		if w.plan.Workers[w.worker].Index != idx {
			continue
		}
		for _, s := range w.plan.WorkerSteps(w.worker) {
			for k := range s.Src {
				s.Src[k] = rebuffer(s.Src[k], w.buffer, w.plan.NRanks)
			}
			s.Dst = rebuffer(s.Dst, w.buffer, w.plan.NRanks)
			dst = append(dst, s)
		}
		return dst
	}
	for _, s := range part[0].plan.WorkerSteps(part[0].worker) {
		if s.Verb == Advance {
			dst = append(dst, s)
		}
	}
	return dst
}

// rebuffer moves a Ref of a Plan whose buffers are a merge's from buffer on.
func rebuffer(r Ref, buffer uint8, nranks int) Ref {
	switch r.Space {
	case SpaceSend, SpaceRecv:
		r.Rank += buffer
	case SpacePeerRecv:
		r.Rank += uint8(PeerSlot(int(buffer), 0, nranks))
	}
	return r
}

// collective reports whether p has workers on the collective channel.
func (p *Plan) collective() bool {
	for _, w := range p.Workers {
		if w.Channel == Collective {
			return true
		}
	}
	return false
}

// buffers is the number of buffer indices p's Refs use (at least one).
func (p *Plan) buffers() uint8 {
	n := uint8(1)
	count := func(r Ref) {
		if (r.Space == SpaceSend || r.Space == SpaceRecv) && r.Rank+1 > n {
			n = r.Rank + 1
		}
	}
	for i := range p.Steps {
		count(p.Steps[i].Dst)
		for _, r := range p.Steps[i].Src {
			count(r)
		}
	}
	return n
}

// SplitP2P assigns a group's sends and receives on one communicator, in
// the order they were made (call(i) for i < len(launch)), to launches of at
// most most operations: all to one where they fit, else in rounds, round k
// holding the k-th send to and the k-th receive from each peer (at most 2 x
// MaxRanks operations), consecutive rounds packed into one launch while
// they fit. It writes operation i's launch to launch[i] and returns the
// number of launches.
//
// As the k-th send to a peer matches the peer's k-th receive from this
// rank, round k of one rank meets round k of a peer that splits its side
// the same way (or posts it call by call in the order of its rounds), and
// no launch waits on a later launch of a peer: each progresses as a whole
// group does. A peer that posts a receive of a later round before a send of
// an earlier one, one call at a time, waits for a launch that waits for it.
func SplitP2P(launch []int, most int, call func(i int) *spec.Call) (int, error) {
	if len(launch) <= most {
		clear(launch)
		return 1, nil
	}
	var seen [2 * MaxRanks]int // [2*peer + send]: the operations so far
	rounds := 0
	for i := range launch {
		c := call(i)
		k := 2 * c.Peer
		if c.IsSend {
			k++
		}
		if c.Peer < 0 || k >= len(seen) {
			return 0, errs.New(errs.ErrInvalidArgument, "snac: %s of rank %d with peer %d, past %d ranks", c.Coll, c.Rank, c.Peer, MaxRanks)
		}
		launch[i] = seen[k]
		seen[k]++
		rounds = max(rounds, seen[k])
	}
	// Pack consecutive rounds: size[r] operations in round r, then
	// round r's launch in place of its size.
	size := make([]int, rounds)
	for _, r := range launch {
		size[r]++
	}
	n, held := 0, 0
	for r, m := range size {
		if held > 0 && held+m > most {
			n, held = n+1, 0
		}
		held += m
		size[r] = n
	}
	for i, r := range launch {
		launch[i] = size[r]
	}
	return n + 1, nil
}
