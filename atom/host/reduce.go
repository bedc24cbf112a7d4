package host

import (
	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
)

// reduce combines Src[0..NSrc) into Dst with the Plan's type and op, in
// source order. Packet sources are waited for a chunk at a time; a packet
// destination is written as packets of this call.
func (x *worker) reduce(s *snac.Step) error {
	k := int(s.NSrc)
	if k < 1 || k > snac.MaxSrc {
		return errs.New(errs.ErrInternal, "reduce of %d sources", k)
	}
	if !x.plan.Type.Valid() || !x.op.Valid() || x.op.Kind == spec.Avg && x.plan.NRanks < 1 {
		return errs.New(errs.ErrInternal, "reduce with type %v, op %v over %d ranks", x.plan.Type, x.op, x.plan.NRanks)
	}
	n := s.Bytes
	if n == 0 {
		return nil
	}
	var srcs [snac.MaxSrc][]byte
	packets := s.Dst.Space == snac.SpacePacket
	for i := range k {
		packets = packets || s.Src[i].Space == snac.SpacePacket
	}
	if !packets {
		dst, err := x.plain(s.Dst, 0, n)
		if err != nil {
			return err
		}
		for i := range k {
			if srcs[i], err = x.plain(s.Src[i], 0, n); err != nil {
				return err
			}
		}
		numeric.Reduce(dst, srcs[:k], x.plan.Type, x.op, x.plan.NRanks, uint(s.Scale))
		return nil
	}
	flag := packetFlag(s.Check, x.target(s))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for off := uint64(0); off < n; off += chunk {
		m := min(chunk, n-off)
		var err error
		for i := range k {
			if srcs[i], err = x.load(s.Src[i], off, m, sc.src[i][:], flag); err != nil {
				return err
			}
		}
		out := sc.dst[:m]
		if s.Dst.Space != snac.SpacePacket {
			if out, err = x.plain(s.Dst, off, m); err != nil {
				return err
			}
		}
		numeric.Reduce(out, srcs[:k], x.plan.Type, x.op, x.plan.NRanks, uint(s.Scale))
		if s.Dst.Space == snac.SpacePacket {
			if err := x.store(s.Dst, off, out, flag); err != nil {
				return err
			}
		}
	}
	return nil
}
