package snac

import (
	"slices"

	"purlin/errs"
)

// opSpan is the range of flag deltas one Plan's body may use (deltas
// 1..maxChunks, plus one for its done tail). Merge offsets the i-th Plan of
// a channel's chain by i*opSpan, a value every rank computes alike.
const opSpan = maxChunks + 1

// Merge joins the Plans of one group (each built by Build for this rank)
// into one Plan whose workers all run concurrently, so a group's sends and
// receives progress together.
//
// Plan i's SpaceSend/SpaceRecv Refs are re-indexed to buffer i (offset by
// the buffers of the Plans before it, for Plans that are merges
// themselves): the Launch passes the calls' buffers in group order.
//
// Plans on different channels run side by side. Plans on the same channel
// (two collectives, or two transfers to one peer in one direction) are
// chained: worker w runs them in group order, and the i-th Plan's flag
// deltas are offset by i*opSpan. Between two chained Plans the done rule
// applies within the call: the earlier Plan's done tail raises epoch+end
// instead of epoch+EpochAdvance, and the later Plan's writers wait for it, so
// a staging half is never rewritten while a reader of the earlier Plan is
// still at it. Every rank must group the same calls on a channel in the same
// order, as NCCL requires of matching sends and receives.
//
// Plans with workers on the collective channel must share Type, Op and
// NRanks; point-to-point Plans only copy, so any type merges with them.
func Merge(plans ...*Plan) (*Plan, error) {
	if len(plans) == 0 {
		return nil, errs.New(errs.ErrInvalidUsage, "snac: Merge of no Plans")
	}
	out := &Plan{NRanks: plans[0].NRanks, Type: plans[0].Type, Op: plans[0].Op}
	typed := false
	chains := map[uint16][]chainLink{}
	var channels []uint16
	buffers := uint8(0)
	for i, p := range plans {
		if p.NRanks != out.NRanks {
			return nil, errs.New(errs.ErrInvalidUsage, "snac: Merge plan %d has %d ranks, plan 0 has %d", i, p.NRanks, out.NRanks)
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
			chains[ch] = append(chains[ch], chainLink{plan: p, worker: w, buffer: buffers})
		}
		buffers += p.buffers()
	}
	slices.Sort(channels)
	for _, ch := range channels {
		if err := out.appendChain(ch, chains[ch]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// chainLink is one worker of one Plan joining a channel's chain.
type chainLink struct {
	plan   *Plan
	worker int
	buffer uint8 // the Plan's first buffer index in the merged Plan
}

// appendChain appends channel ch's merged workers: worker index w runs the
// steps of every Plan's worker w, in group order.
func (out *Plan) appendChain(ch uint16, links []chainLink) error {
	var order []*Plan // Plans of the chain, in group order
	for _, l := range links {
		if len(order) == 0 || order[len(order)-1] != l.plan {
			order = append(order, l.plan)
		}
	}
	if int64(len(order))*opSpan >= EpochAdvance {
		return errs.New(errs.ErrUnsupported, "snac: Merge chains %d Plans on channel %d (at most %d)", len(order), ch, EpochAdvance/opSpan-1)
	}
	byIndex := map[uint16][]Step{}
	var indices []uint16
	for _, l := range links {
		op := slices.Index(order, l.plan)
		wk := l.plan.Workers[l.worker]
		if _, ok := byIndex[wk.Index]; !ok {
			indices = append(indices, wk.Index)
		}
		byIndex[wk.Index] = appendLinked(byIndex[wk.Index], l.plan.WorkerSteps(l.worker), op, op == len(order)-1, l.buffer)
	}
	slices.Sort(indices)
	for _, idx := range indices {
		first := len(out.Steps)
		out.Steps = append(out.Steps, byIndex[idx]...)
		out.Workers = append(out.Workers, Worker{Channel: ch, Index: idx, First: uint32(first), Count: uint32(len(out.Steps) - first)})
	}
	return nil
}

// appendLinked appends the steps of the op-th Plan of a chain, shifted: body
// deltas by op*opSpan, the done tail to the op's end unless it is the last,
// and, after each done wait, a wait for the previous op's end.
func appendLinked(dst, steps []Step, op int, last bool, buffer uint8) []Step {
	base := int64(op) * opSpan
	for _, s := range steps {
		for k := range s.Src {
			s.Src[k] = rebuffer(s.Src[k], buffer)
		}
		s.Dst = rebuffer(s.Dst, buffer)
		switch {
		case s.Delta == DoneDelta:
			dst = append(dst, s)
			if op > 0 {
				s.Delta = base // previous op's end: (op-1)*opSpan + opSpan
			}
		case s.Delta == EpochAdvance && slotKind(s.Slot) == FlagDone:
			if !last {
				s.Delta = base + opSpan
			}
		case s.Delta > 0:
			s.Delta += base
		}
		if s.Delta != DoneDelta {
			dst = append(dst, s)
		}
	}
	return dst
}

func rebuffer(r Ref, buffer uint8) Ref {
	if r.Space == SpaceSend || r.Space == SpaceRecv {
		r.Rank += buffer
	}
	return r
}

// slotKind is the flag kind of a slot (see FlagSlot).
func slotKind(slot uint32) int { return int(slot/(MaxRanks*MaxWorkers)) % numFlagKinds }

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
