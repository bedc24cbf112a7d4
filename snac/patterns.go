package snac

import "purlin/spec"

// exchangeOf describes this rank's transfers for every collective but
// AllReduce (see allreduce.go). segs is the number of segments of a
// producer's slot: one per destination for scattered inputs, one for packed
// inputs (every consumer reads the same staged copy).
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
	toAll := func(seg func(q int) int, src func(q int) uint64, length func(q int) uint64) {
		for q := range n {
			if q != me {
				x.outs = append(x.outs, outFlow{to: q, seg: seg(q), src: src(q), length: length(q), check: check})
			}
		}
	}
	fromAll := func(seg int, dst func(p int) uint64, length func(p int) uint64) {
		for p := range n {
			if p != me {
				x.ins = append(x.ins, inFlow{from: p, seg: seg, dst: dst(p), length: length(p), check: check})
			}
		}
	}
	zero := func(int) int { return 0 }
	self := func(q int) int { return q }
	at := func(off uint64) func(int) uint64 { return func(int) uint64 { return off } }
	scaled := func(v []uint64) func(int) uint64 { return func(i int) uint64 { return v[i] * size } }
	slice := func(i int) uint64 { return uint64(i) * length }
	switch c.Coll {
	case spec.AllGather:
		toAll(zero, at(0), at(length))
		fromAll(0, slice, at(length))
		local(0, uint64(me)*length, length)
		return x, 1
	case spec.AllGatherV:
		toAll(zero, at(0), at(c.Counts[me]*size))
		fromAll(0, scaled(c.Displs), scaled(c.Counts))
		local(0, c.Displs[me]*size, c.Counts[me]*size)
		return x, 1
	case spec.AllToAll:
		toAll(self, slice, at(length))
		fromAll(me, slice, at(length))
		local(uint64(me)*length, uint64(me)*length, length)
		return x, n
	case spec.AllToAllV:
		for q := range n {
			if q != me {
				ls, lr := c.SendCounts[q]*size, c.RecvCounts[q]*size
				x.outs = append(x.outs, outFlow{to: q, seg: q, src: c.SendDispls[q] * size, length: ls, check: pairCheck(c, t, ls)})
				x.ins = append(x.ins, inFlow{from: q, seg: me, dst: c.RecvDispls[q] * size, length: lr, check: pairCheck(c, t, lr)})
			}
		}
		local(c.SendDispls[me]*size, c.RecvDispls[me]*size, min(c.SendCounts[me], c.RecvCounts[me])*size)
		return x, n
	case spec.Broadcast:
		if me == c.Root {
			toAll(zero, at(0), at(length))
			local(0, 0, length)
		} else {
			x.ins = append(x.ins, inFlow{from: c.Root, dst: 0, length: length, check: check})
		}
		return x, 1
	case spec.Gather:
		if me == c.Root {
			fromAll(0, slice, at(length))
			local(0, uint64(me)*length, length)
		} else {
			x.outs = append(x.outs, outFlow{to: c.Root, src: 0, length: length, check: check})
		}
		return x, 1
	case spec.Scatter:
		if me == c.Root {
			toAll(self, slice, at(length))
			local(uint64(me)*length, 0, length)
		} else {
			x.ins = append(x.ins, inFlow{from: c.Root, seg: me, dst: 0, length: length, check: check})
		}
		return x, n
	case spec.ReduceScatter:
		toAll(self, slice, at(length))
		x.reduces = append(x.reduces, reduceFlow{seg: me, dst: 0, own: uint64(me) * length, length: length, check: check})
		return x, n
	case spec.ReduceScatterV:
		toAll(self, scaled(c.Displs), scaled(c.Counts))
		x.reduces = append(x.reduces, reduceFlow{seg: me, dst: 0, own: c.Displs[me] * size, length: c.Counts[me] * size, check: check})
		return x, n
	case spec.Reduce:
		if me == c.Root {
			x.reduces = append(x.reduces, reduceFlow{dst: 0, own: 0, length: length, check: check})
		} else {
			x.outs = append(x.outs, outFlow{to: c.Root, src: 0, length: length, check: check})
		}
		return x, 1
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
