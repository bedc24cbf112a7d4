package comm

import (
	"encoding/binary"
	"io"

	"purlin/errs"
)

// The bootstrap wire format: every message is a frame
//
//	[kind u8][length u32 little-endian][payload]
//
// Ranks talk only to the rendezvous server: hello -> table (or reject),
// then gather rounds, then bye (or abort). Gather round i pairs every rank's
// i-th value, and its reply carries i, so a rank matches each reply to its
// own exchange. The server tells the others when a rank aborts or its
// connection ends without a bye (its process died).
const (
	frameHello   byte = iota + 1 // rank -> server: who I am
	frameTable                   // server -> rank: every rank's hello, in rank order
	frameReject                  // server -> rank: why the rank was refused (text)
	frameGather                  // rank -> server: my value; server -> rank: [round u64] all values
	frameBye                     // rank -> server: I leave on purpose (Destroy)
	frameDropped                 // server -> rank: [rank u32][why u8]: rank left without a bye
	// frameHostLeft (server -> rank): every rank living in the server's own
	// process said bye, so that process may exit, and the server with it, at
	// any time: a connection lost after this is the end of the run, not a death.
	frameHostLeft
	frameAbort // rank -> server: I leave on failure (Abort, a failed init): tell the others
)

// Why a rank left without a bye, as frameDropped says.
const (
	droppedLost    byte = iota // its connection ended: its process exited or died
	droppedAborted             // it said frameAbort
)

// droppedError is the error a rank sees when the server says rank who
// left without a bye, for why.
func droppedError(who int, why byte, seenBy int) error {
	if why == droppedAborted {
		return errs.New(errs.ErrRemote, "rank %d aborted its communicator (CommAbort or a failed init; seen by rank %d)", who, seenBy)
	}
	return errs.New(errs.ErrRemote, "rank %d's process exited or died without destroying its communicator (seen by rank %d)", who, seenBy)
}

// maxFrame bounds a frame, so a garbage length cannot make us allocate a lot.
const maxFrame = 64 << 20

func writeFrame(w io.Writer, kind byte, payload []byte) error {
	buf := make([]byte, 5+len(payload))
	buf[0] = kind
	binary.LittleEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[1:5])
	if n > maxFrame {
		return 0, nil, errs.New(errs.ErrRemote, "bootstrap: frame of %d bytes is larger than %d", n, maxFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

// PeerInfo is what every rank tells the others at init.
type PeerInfo struct {
	Rank, NRanks int
	Pid, Device  int
	Host         string
	Magic        uint64
}

func (p PeerInfo) encode() []byte {
	b := make([]byte, 0, 32+len(p.Host))
	b = binary.LittleEndian.AppendUint64(b, p.Magic)
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.Rank)))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.NRanks)))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.Pid)))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.Device)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(p.Host)))
	return append(b, p.Host...)
}

// decodePeer reads one PeerInfo and returns the rest of b.
func decodePeer(b []byte) (PeerInfo, []byte, error) {
	if len(b) < 26 {
		return PeerInfo{}, nil, errs.New(errs.ErrRemote, "bootstrap: truncated peer record (%d bytes)", len(b))
	}
	p := PeerInfo{
		Magic:  binary.LittleEndian.Uint64(b[0:8]),
		Rank:   int(int32(binary.LittleEndian.Uint32(b[8:12]))),
		NRanks: int(int32(binary.LittleEndian.Uint32(b[12:16]))),
		Pid:    int(int32(binary.LittleEndian.Uint32(b[16:20]))),
		Device: int(int32(binary.LittleEndian.Uint32(b[20:24]))),
	}
	n := int(binary.LittleEndian.Uint16(b[24:26]))
	if len(b) < 26+n {
		return PeerInfo{}, nil, errs.New(errs.ErrRemote, "bootstrap: truncated host name")
	}
	p.Host = string(b[26 : 26+n])
	return p, b[26+n:], nil
}

// encodeGatherReply packs gather round's values, one byte string per rank:
// [round u64]([len u32][bytes])...
func encodeGatherReply(round uint64, values [][]byte) []byte {
	size := 8
	for _, v := range values {
		size += 4 + len(v)
	}
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, size), round)
	for _, v := range values {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// gatherRound returns the round number of a gather reply and the rest,
// the values that decodeValues reads.
func gatherRound(b []byte) (uint64, []byte, error) {
	if len(b) < 8 {
		return 0, nil, errs.New(errs.ErrRemote, "bootstrap: gather reply of %d bytes has no round number", len(b))
	}
	return binary.LittleEndian.Uint64(b), b[8:], nil
}

func decodeValues(b []byte, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		if len(b) < 4 {
			return nil, errs.New(errs.ErrRemote, "bootstrap: truncated gather reply")
		}
		l := int(binary.LittleEndian.Uint32(b))
		if len(b) < 4+l {
			return nil, errs.New(errs.ErrRemote, "bootstrap: truncated gather value of rank %d", i)
		}
		out[i] = b[4 : 4+l : 4+l]
		b = b[4+l:]
	}
	return out, nil
}
