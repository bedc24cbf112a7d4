package host

import "purlin/snac"

// copy moves Bytes from Src[0] to Dst. Plain to plain is one memmove;
// through packets it goes a chunk at a time, waiting for each source packet
// and writing destination packets with this call's flag word.
func (x *worker) copy(s *snac.Step) error {
	n := s.Bytes
	if n == 0 {
		return nil
	}
	src, dst := s.Src[0], s.Dst
	if src.Space != snac.SpacePacket && dst.Space != snac.SpacePacket {
		to, err := x.plain(dst, 0, n)
		if err != nil {
			return err
		}
		from, err := x.plain(src, 0, n)
		if err != nil {
			return err
		}
		copy(to, from)
		return nil
	}
	flag := packetFlag(s.Check, x.target(s))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for off := uint64(0); off < n; off += chunk {
		m := min(chunk, n-off)
		data, err := x.load(src, off, m, sc.src[0][:], flag)
		if err != nil {
			return err
		}
		if err := x.store(dst, off, data, flag); err != nil {
			return err
		}
	}
	return nil
}
