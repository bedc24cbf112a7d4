package host

import (
	"purlin/errs"
	"purlin/snac"
)

// copy moves Bytes from Src[0] to Dst. Plain to plain is one memmove per
// run of the step's bytes (one, or a row's where a Ref is strided); through
// packets it goes a chunk at a time, waiting for each source packet and
// writing destination packets with this call's flag word.
func (x *worker) copy(s *snac.Step) error {
	if s.Bytes == 0 {
		return nil
	}
	src, dst := s.Src[0], s.Dst
	if src.Space != snac.SpacePacket && dst.Space != snac.SpacePacket {
		return pieces(s, false, func(k, m uint64) error {
			to, err := x.plain(s, dst, k, m)
			if err != nil {
				return err
			}
			from, err := x.plain(s, src, k, m)
			if err != nil {
				return err
			}
			copy(to, from)
			return nil
		})
	}
	flag := packetFlag(s.Check, x.target(s))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	return pieces(s, true, func(k, m uint64) error {
		data, err := x.load(s, src, k, m, sc.src[0][:], flag)
		if err != nil {
			return err
		}
		return x.store(s, dst, k, data, flag)
	})
}

// pieces calls f for each piece [k, k+m) of the step's bytes that lies
// contiguous in every Ref (the whole step, or up to a row's end where a Ref
// is strided) and, for a step through packets, spans at most one chunk.
// Strided Refs must be well formed (snac.Step.RowsValid).
func pieces(s *snac.Step, packets bool, f func(k, m uint64) error) error {
	if !s.RowsValid() {
		return errs.New(errs.ErrInternal, "strided step out of shape: row %d, col %d, packets %v", s.Row, s.Col, packets)
	}
	var err error
	s.Runs(func(k, n uint64) {
		for off := k; err == nil && off < k+n; {
			m := k + n - off
			if packets {
				m = min(m, chunk)
			}
			err = f(off, m)
			off += m
		}
	})
	return err
}
