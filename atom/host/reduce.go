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
	if s.Bytes == 0 {
		return nil
	}
	var srcs [snac.MaxSrc][]byte
	packets := s.Dst.Space == snac.SpacePacket
	for i := range k {
		packets = packets || s.Src[i].Space == snac.SpacePacket
	}
	if !packets {
		return pieces(s, false, func(off, m uint64) error {
			dst, err := x.plain(s, s.Dst, off, m)
			if err != nil {
				return err
			}
			for i := range k {
				if srcs[i], err = x.plain(s, s.Src[i], off, m); err != nil {
					return err
				}
			}
			numeric.Reduce(dst, srcs[:k], x.plan.Type, x.op, x.plan.NRanks, uint(s.Scale))
			return nil
		})
	}
	flag := packetFlag(s.Check, x.target(s))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	return pieces(s, true, func(off, m uint64) error {
		var err error
		for i := range k {
			if srcs[i], err = x.load(s, s.Src[i], off, m, sc.src[i][:], flag); err != nil {
				return err
			}
		}
		out := sc.dst[:m]
		if s.Dst.Space != snac.SpacePacket {
			if out, err = x.plain(s, s.Dst, off, m); err != nil {
				return err
			}
		}
		numeric.Reduce(out, srcs[:k], x.plan.Type, x.op, x.plan.NRanks, uint(s.Scale))
		if s.Dst.Space == snac.SpacePacket {
			return x.store(s, s.Dst, off, out, flag)
		}
		return nil
	})
}
