package snac

import "purlin/spec"

// exchangeOf describes this rank's transfers for every collective but
// AllReduce (see allreduce.go). Producers push into their consumer's
// staging, so segs is the number of segments of a consumer's slot: one per
// rank that sends it data (see inbox), or one where only the root sends.
func exchangeOf(c *spec.Call, t Topology) (x *exchange, segs int) {
	x = &exchange{}
	me, n := c.Rank, c.NRanks
	size := uint64(c.Type.Size())
	length := c.Count * size
	check := callCheck(c, t)
	inPlace := c.InPlace()
	local := func(src, dst, length uint64) {
		if !(inPlace && src == dst) && length > 0 {
			x.locals = append(x.locals, localFlow{src, dst, length})
		}
	}
	// toAll and fromAll push into, and read from, the segment inbox names.
	toAll := func(src func(q int) uint64, length func(q int) uint64) {
		for q := range n {
			if q != me {
				x.outs = append(x.outs, outFlow{to: q, seg: inbox(me, q, n), src: src(q), length: length(q), check: check})
			}
		}
	}
	fromAll := func(dst func(p int) uint64, length func(p int) uint64) {
		for p := range n {
			if p != me {
				x.ins = append(x.ins, inFlow{from: p, seg: inbox(p, me, n), dst: dst(p), length: length(p), check: check})
			}
		}
	}
	senders := max(1, n-1)
	at := func(off uint64) func(int) uint64 { return func(int) uint64 { return off } }
	scaled := func(v []uint64) func(int) uint64 { return func(i int) uint64 { return v[i] * size } }
	slice := func(i int) uint64 { return uint64(i) * length }
	switch c.Coll {
	case spec.AllGather:
		toAll(at(0), at(length))
		fromAll(slice, at(length))
		local(0, uint64(me)*length, length)
		return x, senders
	case spec.AllGatherV:
		toAll(at(0), at(c.Counts[me]*size))
		fromAll(scaled(c.Displs), scaled(c.Counts))
		local(0, c.Displs[me]*size, c.Counts[me]*size)
		return x, senders
	case spec.AllToAll:
		toAll(slice, at(length))
		fromAll(slice, at(length))
		local(uint64(me)*length, uint64(me)*length, length)
		return x, senders
	case spec.AllToAllV:
		for q := range n {
			if q != me {
				ls, lr := c.SendCounts[q]*size, c.RecvCounts[q]*size
				x.outs = append(x.outs, outFlow{to: q, seg: inbox(me, q, n), src: c.SendDispls[q] * size, length: ls, check: pairCheck(c, t, ls)})
				x.ins = append(x.ins, inFlow{from: q, seg: inbox(q, me, n), dst: c.RecvDispls[q] * size, length: lr, check: pairCheck(c, t, lr)})
			}
		}
		local(c.SendDispls[me]*size, c.RecvDispls[me]*size, min(c.SendCounts[me], c.RecvCounts[me])*size)
		return x, senders
	case spec.Broadcast:
		if me == c.Root {
			toAll(at(0), at(length))
			for i := range x.outs {
				x.outs[i].seg = 0 // the root is its consumers' only sender
			}
			local(0, 0, length)
		} else {
			x.ins = append(x.ins, inFlow{from: c.Root, dst: 0, length: length, check: check})
		}
		return x, 1
	case spec.Gather:
		if me == c.Root {
			fromAll(slice, at(length))
			local(0, uint64(me)*length, length)
		} else {
			x.outs = append(x.outs, outFlow{to: c.Root, seg: inbox(me, c.Root, n), src: 0, length: length, check: check})
		}
		return x, senders
	case spec.Scatter:
		if me == c.Root {
			toAll(slice, at(length))
			for i := range x.outs {
				x.outs[i].seg = 0 // the root is its consumers' only sender
			}
			local(uint64(me)*length, 0, length)
		} else {
			x.ins = append(x.ins, inFlow{from: c.Root, seg: 0, dst: 0, length: length, check: check})
		}
		return x, 1
	case spec.ReduceScatter:
		toAll(slice, at(length))
		x.reduces = append(x.reduces, reduceFlow{dst: 0, own: uint64(me) * length, length: length, check: check})
		return x, senders
	case spec.ReduceScatterV:
		toAll(scaled(c.Displs), scaled(c.Counts))
		x.reduces = append(x.reduces, reduceFlow{dst: 0, own: c.Displs[me] * size, length: c.Counts[me] * size, check: check})
		return x, senders
	case spec.Reduce:
		if me == c.Root {
			x.reduces = append(x.reduces, reduceFlow{dst: 0, own: 0, length: length, check: check})
		} else {
			x.outs = append(x.outs, outFlow{to: c.Root, seg: inbox(me, c.Root, n), src: 0, length: length, check: check})
		}
		return x, senders
	case spec.SendRecv:
		pc := pairCheck(c, t, length)
		if c.IsSend {
			x.outs = append(x.outs, outFlow{to: c.Peer, length: length, check: pc})
		} else {
			x.ins = append(x.ins, inFlow{from: c.Peer, length: length, check: pc})
		}
		return x, 1
	}
	return nil, 0
}

// copiesLocally reports whether coll copies from some rank's input to its
// output: every rank of AllGather and AllToAll, the root of Broadcast,
// Gather and Scatter (each rank may skip its copy: in place, or nothing).
func copiesLocally(coll spec.Collective) bool {
	switch coll {
	case spec.AllGather, spec.AllGatherV, spec.AllToAll, spec.AllToAllV, spec.Broadcast, spec.Gather, spec.Scatter:
		return true
	}
	return false
}

// inbox is the segment of consumer q's staging slot that producer p pushes
// into: the producers other than q, counted from q+1 round the ranks.
func inbox(p, q, n int) int { return (p - q - 1 + n) % n }

// globalLongest is the longest transfer of the call on any rank, or false
// when ranks cannot know it (AllToAllV: each rank knows its own pairs).
func globalLongest(c *spec.Call) (uint64, bool) {
	size := uint64(c.Type.Size())
	switch c.Coll {
	case spec.AllToAllV:
		if c.NRanks == 1 {
			return min(c.SendCounts[0], c.RecvCounts[0]) * size, true
		}
		return 0, false
	case spec.AllGatherV, spec.ReduceScatterV:
		var m uint64
		for _, v := range c.Counts {
			m = max(m, v)
		}
		return m * size, true
	}
	return c.Count * size, true
}
