package rendezvous

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"io"

	"purlin/errs"
)

// The bootstrap wire format: every message is a frame
//
//	[kind u8][length u32 little-endian][payload]
//
// Ranks talk only to the rendezvous server: challenge -> hello -> welcome
// -> table (or reject), then gather rounds, then bye (or abort).
//
// The handshake authenticates both ends with the unique id's secret, which
// never travels: the server sends a random nonce (frameChallenge); the rank
// answers with its own nonce, its PeerInfo and an HMAC over both nonces and
// the PeerInfo (frameHello); the server checks it in constant time, then
// proves the secret back with an HMAC over both nonces (frameWelcome). Until
// the hello is verified a frame may be at most maxHelloFrame bytes, and a
// wrong proof (or anything else) closes the connection with nothing said. Gather round i pairs every rank's
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
	frameAbort     // rank -> server: I leave on failure (Abort, a failed init): tell the others
	frameChallenge // server -> rank: [server nonce]
	frameWelcome   // server -> rank: [hmac]: the server knows the secret too
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

const (
	// maxFrame bounds a frame from an authenticated peer, so a garbage
	// length cannot make us allocate a lot.
	maxFrame = 64 << 20
	// maxHelloFrame bounds every frame before the peer is authenticated.
	maxHelloFrame = 4 << 10
	// maxRanks bounds the ranks a hello may claim, before any allocation.
	maxRanks   = 1 << 16
	nonceBytes = 32
	proofBytes = 32
)

func writeFrame(w io.Writer, kind byte, payload []byte) error {
	buf := make([]byte, 5+len(payload))
	buf[0] = kind
	binary.LittleEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame of at most max payload bytes; a larger one is
// an error before anything is allocated or read past its header.
func readFrame(r io.Reader, max uint32) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[1:5])
	if n > max {
		return 0, nil, errs.New(errs.ErrRemote, "bootstrap: frame of %d bytes is larger than %d", n, max)
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
}

func (p PeerInfo) encode() []byte {
	b := make([]byte, 0, peerFixed+len(p.Host))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.Rank)))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.NRanks)))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.Pid)))
	b = binary.LittleEndian.AppendUint32(b, uint32(int32(p.Device)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(p.Host)))
	return append(b, p.Host...)
}

// peerFixed is the size of a PeerInfo record without its host name.
const peerFixed = 18

// decodePeer reads one PeerInfo and returns the rest of b.
func decodePeer(b []byte) (PeerInfo, []byte, error) {
	if len(b) < peerFixed {
		return PeerInfo{}, nil, errs.New(errs.ErrRemote, "bootstrap: truncated peer record (%d bytes)", len(b))
	}
	p := PeerInfo{
		Rank:   int(int32(binary.LittleEndian.Uint32(b[0:4]))),
		NRanks: int(int32(binary.LittleEndian.Uint32(b[4:8]))),
		Pid:    int(int32(binary.LittleEndian.Uint32(b[8:12]))),
		Device: int(int32(binary.LittleEndian.Uint32(b[12:16]))),
	}
	n := int(binary.LittleEndian.Uint16(b[16:18]))
	if len(b) < peerFixed+n {
		return PeerInfo{}, nil, errs.New(errs.ErrRemote, "bootstrap: truncated host name")
	}
	p.Host = string(b[peerFixed : peerFixed+n])
	return p, b[peerFixed+n:], nil
}

// newNonce returns a fresh random nonce.
func newNonce() ([]byte, error) {
	n := make([]byte, nonceBytes)
	if _, err := rand.Read(n); err != nil {
		return nil, errs.New(errs.ErrSystem, "bootstrap: random nonce: %v", err)
	}
	return n, nil
}

// encodeHello is a rank's answer to the server's challenge serverNonce:
// [client nonce][hmac(server nonce, client nonce, PeerInfo)][PeerInfo].
func encodeHello(key *jobKey, serverNonce, clientNonce []byte, p PeerInfo) []byte {
	info := p.encode()
	proof := key.mac("purlin hello", serverNonce, clientNonce, info)
	b := make([]byte, 0, nonceBytes+proofBytes+len(info))
	b = append(b, clientNonce...)
	b = append(b, proof[:]...)
	return append(b, info...)
}

// decodeHello checks a hello against the challenge serverNonce and returns
// its PeerInfo and client nonce; ok is false for anything but a hello made
// with the secret for this challenge (compared in constant time).
func decodeHello(key *jobKey, serverNonce, b []byte) (p PeerInfo, clientNonce []byte, ok bool) {
	if len(b) < nonceBytes+proofBytes {
		return PeerInfo{}, nil, false
	}
	clientNonce, proof, info := b[:nonceBytes], b[nonceBytes:nonceBytes+proofBytes], b[nonceBytes+proofBytes:]
	want := key.mac("purlin hello", serverNonce, clientNonce, info)
	if !hmac.Equal(proof, want[:]) {
		return PeerInfo{}, nil, false
	}
	p, rest, err := decodePeer(info)
	if err != nil || len(rest) != 0 {
		return PeerInfo{}, nil, false
	}
	return p, clientNonce, true
}

// welcomeProof is the server's proof that it knows the secret too.
func welcomeProof(key *jobKey, serverNonce, clientNonce []byte) [32]byte {
	return key.mac("purlin welcome", serverNonce, clientNonce)
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
