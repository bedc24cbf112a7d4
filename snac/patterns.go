package snac

import "purlin/spec"

// exchangeOf derives this rank's transfers from the collective's
// definition (spec.Definition: a consume op and two layouts), with no code
// per collective:
//
//   - producers are every rank, or the root where the input is rooted;
//     consumers every rank, or the root where the output is rooted
//     (spec's Call.Produces, Call.Consumes);
//   - the part of producer p's input meant for consumer q is all of a
//     packed input, or slice q of a scattered one (Call.InPart);
//   - it lands in all of q's packed output, or in slice p of a scattered
//     or transposed one (Call.OutPart);
//   - a part lies contiguous, or as the rows of a column block
//     (Call.InStride, Call.OutStride);
//   - copy moves each producer's part to each consumer (a local copy where
//     they are one rank); reduce combines, at each consumer, the parts of
//     every rank in rank order, its own read straight from its input.
//
// Producers push into their consumer's staging, so segs is the number of
// segments of a consumer's slot: one per rank that sends it data (see
// inbox), or one where only the root sends. Point-to-point transfers
// (SendRecv) name their peer instead of layouts.
func exchangeOf(c *spec.Call, t Topology) (x *exchange, segs int) {
	x = &exchange{}
	me, n := c.Rank, c.NRanks
	if c.Coll == spec.SendRecv {
		length := c.Count * uint64(c.Type.Size())
		pc := pairCheck(c, t, length)
		if c.IsSend {
			x.outs = append(x.outs, outFlow{to: c.Peer, length: length, check: pc})
		} else {
			x.ins = append(x.ins, inFlow{from: c.Peer, length: length, check: pc})
		}
		return x, 1
	}
	d := c.Coll.Definition()
	check := callCheck(c, t)
	_, known := globalLongest(c)
	// checkOf is a transfer's check word: the call's fingerprint, or where
	// ranks cannot know every length (AllToAllV) the pair's, with its length.
	checkOf := func(length uint64) uint64 {
		if known {
			return check
		}
		return pairCheck(c, t, length)
	}
	seg := func(p, q int) int {
		if d.In.Rooted {
			return 0 // the root is its consumers' only sender
		}
		return inbox(p, q, n)
	}
	inSt, outSt := c.InStride(), c.OutStride()
	segs = 1
	if !d.In.Rooted {
		segs = max(1, n-1)
	}
	if c.Produces(me) {
		for q := range n {
			if q != me && c.Consumes(q) {
				src, length := c.InPart(me, q)
				o := outFlow{to: q, seg: seg(me, q), src: src, length: length, srcStride: inSt, check: checkOf(length)}
				if known && d.Consume == spec.ConsumeCopy {
					o.dst, _ = c.OutPart(q, me)
					o.dstStride = outSt
				}
				x.outs = append(x.outs, o)
			}
		}
	}
	if d.Consume == spec.ConsumeReduce {
		if c.Consumes(me) {
			own, _ := c.InPart(me, me)
			dst, length := c.OutPart(me, me)
			x.reduces = append(x.reduces, reduceFlow{dst: dst, own: own, length: length, dstStride: outSt, ownStride: inSt, check: check})
		}
		return x, segs
	}
	if c.Consumes(me) {
		for p := range n {
			if p != me && c.Produces(p) {
				dst, length := c.OutPart(me, p)
				x.ins = append(x.ins, inFlow{from: p, seg: seg(p, me), dst: dst, length: length, dstStride: outSt, check: checkOf(length)})
			}
		}
	}
	if c.Produces(me) && c.Consumes(me) {
		src, ls := c.InPart(me, me)
		dst, lr := c.OutPart(me, me)
		if length := min(ls, lr); !(c.InPlace() && src == dst) && length > 0 {
			x.locals = append(x.locals, localFlow{src: src, dst: dst, length: length, srcStride: inSt, dstStride: outSt})
		}
	}
	return x, segs
}

// copiesLocally reports whether coll copies from some rank's input to its
// output (every rank of AllGather and AllToAll, the root of Broadcast,
// Gather and Scatter; each rank may skip its copy: in place, or nothing):
// a collective that consumes by copy, where some rank both produces and
// consumes.
func copiesLocally(coll spec.Collective) bool {
	return coll != spec.SendRecv && coll.Definition().Consume == spec.ConsumeCopy
}

// allReduces reports whether coll leaves every rank the reduction of every
// rank's whole input (AllReduce): staged, it runs as a reduce-scatter and an
// all-gather (allreduce.go) instead of each rank reducing everything.
func allReduces(coll spec.Collective) bool {
	d := coll.Definition()
	return d.Consume == spec.ConsumeReduce && d.In.Shape == spec.Packed && d.Out.Shape == spec.Packed && !d.In.Rooted && !d.Out.Rooted
}

// inbox is the segment of consumer q's staging slot that producer p pushes
// into: the producers other than q, counted from q+1 round the ranks.
func inbox(p, q, n int) int { return (p - q - 1 + n) % n }

// globalLongest is the longest transfer of the call on any rank, or false
// when ranks cannot know it (counts per pair: each rank knows its own).
func globalLongest(c *spec.Call) (uint64, bool) {
	size := uint64(c.Type.Size())
	switch {
	case c.Coll.PairCounts():
		if c.NRanks == 1 {
			return min(c.SendCounts[0], c.RecvCounts[0]) * size, true
		}
		return 0, false
	case c.Coll.Vectored():
		var m uint64
		for _, v := range c.Counts {
			m = max(m, v)
		}
		return m * size, true
	}
	return c.Count * size, true
}
