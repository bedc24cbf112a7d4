package rendezvous

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Fuzz tests of every decoder that reads bytes from a peer: none may panic,
// allocate by a claimed size, or accept what its encoder would not make.
// Seeds are in testdata/fuzz; tests/run.sh's go-fuzz suite runs each for a
// few seconds.

var fuzzKey = jobKey{1, 2, 3, 4, 5, 6, 7, 8}

var fuzzNonce = bytes.Repeat([]byte{0x5a}, nonceBytes)

func fuzzPeers() []PeerInfo {
	return []PeerInfo{{Rank: 0, NRanks: 2, Pid: 10, Device: 0, Host: "a"}, {Rank: 1, NRanks: 2, Pid: 11, Device: 1, Host: "host-b"}}
}

func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	writeFrame(&b, frameHello, encodeHello(&fuzzKey, fuzzNonce, fuzzNonce, fuzzPeers()[0]))
	f.Add(b.Bytes())
	f.Add([]byte{frameHello, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range []uint32{maxHelloFrame, maxFrame} {
			r := bytes.NewReader(data)
			kind, payload, err := readFrame(r, max)
			if err != nil {
				continue
			}
			if uint32(len(payload)) > max {
				t.Fatalf("a frame of %d bytes passed the cap %d", len(payload), max)
			}
			var again bytes.Buffer
			writeFrame(&again, kind, payload)
			if !bytes.Equal(again.Bytes(), data[:len(data)-r.Len()]) {
				t.Fatalf("frame does not round-trip")
			}
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(encodeHello(&fuzzKey, fuzzNonce, fuzzNonce, fuzzPeers()[1]))
	f.Add(make([]byte, nonceBytes+proofBytes+peerFixed))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, clientNonce, ok := decodeHello(&fuzzKey, fuzzNonce, data)
		if ok && !bytes.Equal(encodeHello(&fuzzKey, fuzzNonce, clientNonce, p), data) {
			t.Fatalf("an accepted hello is not the one its PeerInfo makes")
		}
	})
}

// FuzzDecodeTable decodes a table as a rank does (hello), n records.
func FuzzDecodeTable(f *testing.F) {
	var table []byte
	for _, p := range fuzzPeers() {
		table = append(table, p.encode()...)
	}
	f.Add(table, uint8(2))
	f.Add(table[:20], uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		rest := data
		var again []byte
		for range n {
			var p PeerInfo
			var err error
			if p, rest, err = decodePeer(rest); err != nil {
				return
			}
			again = append(again, p.encode()...)
		}
		if !bytes.Equal(again, data[:len(data)-len(rest)]) {
			t.Fatalf("table does not round-trip")
		}
	})
}

func FuzzGatherReply(f *testing.F) {
	f.Add(encodeGatherReply(7, [][]byte{{1, 2}, nil, []byte("three")}), uint8(3))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		round, rest, err := gatherRound(data)
		if err != nil {
			return
		}
		values, err := decodeValues(rest, int(n))
		if err != nil {
			return
		}
		if again := encodeGatherReply(round, values); !bytes.HasPrefix(data, again) {
			t.Fatalf("gather reply does not round-trip")
		}
	})
}

// FuzzParseMail feeds messages with this process's credentials (control
// messages are the kernel's, not the peer's, so they are not fuzzed: random
// SCM_RIGHTS would close random descriptors of the test).
func FuzzParseMail(f *testing.F) {
	msg := binary.LittleEndian.AppendUint32(nil, mailShrinkID)
	msg = binary.LittleEndian.AppendUint32(msg, 1)
	msg = binary.LittleEndian.AppendUint64(msg, 0)
	msg = append(msg, "id"...)
	mac := mailMACOf(&fuzzKey, 0, msg)
	f.Add(append(msg, mac[:]...))
	f.Add(msg[:mailHeader])
	oob := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	f.Fuzz(func(t *testing.T, data []byte) {
		ml, k, ok := parseMail(&fuzzKey, 0, data, oob)
		if !ok {
			return
		}
		again := binary.LittleEndian.AppendUint32(nil, k.kind)
		again = binary.LittleEndian.AppendUint32(again, k.src)
		again = binary.LittleEndian.AppendUint64(again, k.seq)
		again = append(again, ml.payload...)
		mac := mailMACOf(&fuzzKey, 0, again)
		if !bytes.Equal(append(again, mac[:]...), data) || ml.fd != -1 {
			t.Fatalf("an accepted message is not the one its sender makes")
		}
	})
}
