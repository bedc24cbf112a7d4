package host

import (
	"sync"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// plain resolves n bytes from byte k of step s in a Ref in a plain space
// (SpaceSend, SpaceRecv, SpacePeerRecv, SpaceStage): base + s.At(ref, k) + parity*Half,
// contiguous for n bytes (pieces cuts the step so).
func (x *worker) plain(s *snac.Step, ref snac.Ref, k, n uint64) ([]byte, error) {
	start := s.At(ref, k) + x.parity()*ref.Half
	switch ref.Space {
	case snac.SpaceSend, snac.SpaceRecv:
		if int(ref.Rank) >= len(x.bufs) {
			return nil, errs.New(errs.ErrInternal, "%v buffer %d of a Launch with %d", spaceName(ref.Space), ref.Rank, len(x.bufs))
		}
		base := x.bufs[ref.Rank].Send
		if ref.Space == snac.SpaceRecv {
			base = x.bufs[ref.Rank].Recv
		}
		if base == 0 && n > 0 {
			return nil, errs.New(errs.ErrInternal, "%v buffer %d is null", spaceName(ref.Space), ref.Rank)
		}
		return bytesAt(base+uintptr(start), n), nil
	case snac.SpacePeerRecv:
		nranks := len(x.r.syms)
		base := atom.PeerOutput(x.bufs, int(ref.Rank), nranks)
		if base == 0 && n > 0 {
			return nil, errs.New(errs.ErrInternal, "output of rank %d of buffer %d: not reachable in a Launch of %d buffers (a direct Plan needs the peers' outputs)",
				int(ref.Rank)%max(nranks, 1), int(ref.Rank)/max(nranks, 1), len(x.bufs))
		}
		return bytesAt(base+uintptr(start), n), nil
	case snac.SpaceStage:
		if int(ref.Rank) >= len(x.r.syms) {
			return nil, errs.New(errs.ErrInternal, "staging of rank %d in a communicator of %d", ref.Rank, len(x.r.syms))
		}
		stage := x.r.syms[ref.Rank].stage
		if start > uint64(len(stage)) || n > uint64(len(stage))-start {
			return nil, errs.New(errs.ErrInternal, "staging bytes [%d,+%d) of rank %d beyond its %d", start, n, ref.Rank, len(stage))
		}
		return stage[start : start+n], nil
	}
	return nil, errs.New(errs.ErrInternal, "space %d is not plain memory", ref.Space)
}

// packetWords resolves the packets that carry n payload bytes from payload
// offset off of a packet-space Ref; it returns them (two words each) and
// their byte offset in the owner's packet buffer.
func (x *worker) packetWords(ref snac.Ref, off, n uint64) ([]uint64, uint64, error) {
	start := ref.Off + x.parity()*ref.Half + 2*off
	if int(ref.Rank) >= len(x.r.syms) {
		return nil, 0, errs.New(errs.ErrInternal, "packets of rank %d in a communicator of %d", ref.Rank, len(x.r.syms))
	}
	words := x.r.syms[ref.Rank].packets
	packets := (n + 7) / 8
	if start%16 != 0 || start/8 > uint64(len(words)) || 2*packets > uint64(len(words))-start/8 {
		return nil, 0, errs.New(errs.ErrInternal, "packet bytes [%d,+%d) of rank %d: misaligned or beyond its %d",
			start, 16*packets, ref.Rank, 8*len(words))
	}
	return words[start/8 : start/8+2*packets], start, nil
}

// load returns n bytes from byte off of step s in ref: plain memory in
// place, or packets of this call (flag) waited for and gathered into buf.
func (x *worker) load(s *snac.Step, ref snac.Ref, off, n uint64, buf []byte, flag uint64) ([]byte, error) {
	if ref.Space != snac.SpacePacket {
		return x.plain(s, ref, off, n)
	}
	words, at, err := x.packetWords(ref, off, n)
	if err != nil {
		return nil, err
	}
	if err := x.readPackets(buf[:n], words, flag, x.r.topo.PacketSource(ref.Off), int(ref.Rank), at); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// store writes data at byte off of step s in ref, as packets of this call
// (flag) in packet space.
func (x *worker) store(s *snac.Step, ref snac.Ref, off uint64, data []byte, flag uint64) error {
	if ref.Space != snac.SpacePacket {
		dst, err := x.plain(s, ref, off, uint64(len(data)))
		if err != nil {
			return err
		}
		copy(dst, data)
		return nil
	}
	words, _, err := x.packetWords(ref, off, uint64(len(data)))
	if err != nil {
		return err
	}
	writePackets(words, data, flag)
	return nil
}

// chunk is the payload bytes a step moves at a time through packets: a
// multiple of 8, so packets and elements never straddle two chunks.
const chunk = 4096

// scratch holds a worker's packet payloads while it copies or reduces them.
type scratch struct {
	src [snac.MaxSrc][chunk]byte
	dst [chunk]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func spaceName(s snac.Space) string {
	switch s {
	case snac.SpaceSend:
		return "send"
	case snac.SpaceRecv:
		return "recv"
	case snac.SpaceStage:
		return "stage"
	case snac.SpacePacket:
		return "packet"
	case snac.SpacePeerRecv:
		return "peer recv"
	}
	return "space?"
}
