package rendezvous

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"purlin/config"
)

// authHello runs the handshake on a raw connection to addr with the id's
// secret and me, and returns the frame that follows the server's welcome.
func authHello(t *testing.T, id *UniqueID, me PeerInfo) (byte, []byte) {
	addr, key, err := id.decode()
	require.NoError(t, err)
	c, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	kind, serverNonce, err := readFrame(c, maxHelloFrame)
	require.NoError(t, err)
	require.Equal(t, frameChallenge, kind)
	clientNonce, err := newNonce()
	require.NoError(t, err)
	require.NoError(t, writeFrame(c, frameHello, encodeHello(&key, serverNonce, clientNonce, me)))
	kind, proof, err := readFrame(c, maxHelloFrame)
	require.NoError(t, err)
	want := welcomeProof(&key, serverNonce, clientNonce)
	require.Equal(t, frameWelcome, kind)
	require.Equal(t, want[:], proof)
	kind, payload, err := readFrame(c, maxFrame)
	require.NoError(t, err)
	return kind, payload
}

// The server bounds the ranks an authenticated hello claims before it
// allocates for them, and a refused hello does not fix the job's size.
func TestServerRankBound(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	for _, n := range []int{2147483647, maxRanks + 1, 0, -1} {
		kind, text := authHello(t, &id, PeerInfo{Rank: 0, NRanks: n, Host: "h"})
		assert.Equal(t, frameReject, kind)
		assert.Contains(t, string(text), fmt.Sprintf("asked for %d ranks (at most %d)", n, maxRanks))
	}
	jobWorks(t, startJob(t, &id, 2, 10*time.Second)())
}

// A hello made with the secret for another challenge (a replay), or with
// any byte changed, is closed unanswered.
func TestHelloProofIsChecked(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	addr, key, err := id.decode()
	require.NoError(t, err)
	me := PeerInfo{Rank: 1, NRanks: 2, Host: "h"}
	for _, tc := range []struct {
		name  string
		hello func(serverNonce []byte) []byte
	}{
		{"replayed for another challenge", func([]byte) []byte {
			return encodeHello(&key, make([]byte, nonceBytes), make([]byte, nonceBytes), me)
		}},
		{"rank changed after the proof", func(serverNonce []byte) []byte {
			h := encodeHello(&key, serverNonce, make([]byte, nonceBytes), me)
			h[nonceBytes+proofBytes] = 0
			return h
		}},
		{"another secret", func(serverNonce []byte) []byte {
			other := key
			other[0] ^= 1
			return encodeHello(&other, serverNonce, make([]byte, nonceBytes), me)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr.String())
			require.NoError(t, err)
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, serverNonce, err := readFrame(c, maxHelloFrame)
			require.NoError(t, err)
			require.NoError(t, writeFrame(c, frameHello, tc.hello(serverNonce)))
			rest, err := io.ReadAll(c)
			assert.NoError(t, err, "the server must close the connection, not let it wait")
			assert.Empty(t, rest)
		})
	}
	jobWorks(t, startJob(t, &id, 2, 10*time.Second)())
}

// A mailbox message is taken only with the secret's hmac for its receiver,
// from a sender of this user or of PURLIN_PEER_UIDS; a refused one's
// descriptor is closed.
func TestParseMailChecks(t *testing.T) {
	var key jobKey
	key[0] = 7
	msg := binary.LittleEndian.AppendUint32(nil, mailFD)
	msg = binary.LittleEndian.AppendUint32(msg, 1)
	msg = binary.LittleEndian.AppendUint64(msg, 3)
	msg = append(msg, "payload"...)
	mac := mailMACOf(&key, 0, msg)
	good := append(append([]byte(nil), msg...), mac[:]...)
	other := os.Getuid() + 1
	creds := func(uid int) []byte {
		return unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(uid), Gid: uint32(os.Getgid())})
	}
	for _, tc := range []struct {
		name     string
		msg      []byte
		me, uid  int
		noCreds  bool
		peerUIDs string
		ok       bool
	}{
		{"good", good, 0, os.Getuid(), false, "", true},
		{"for another rank", good, 1, os.Getuid(), false, "", false},
		{"bad hmac", append(append([]byte(nil), msg...), make([]byte, 32)...), 0, os.Getuid(), false, "", false},
		{"truncated", good[:20], 0, os.Getuid(), false, "", false},
		{"no credentials", good, 0, os.Getuid(), true, "", false},
		{"another user", good, 0, other, false, "", false},
		{"another user allowed", good, 0, other, false, strconv.Itoa(other), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { config.Reload() })
			t.Setenv("PURLIN_PEER_UIDS", tc.peerUIDs)
			config.Reload()
			fd, err := unix.MemfdCreate("mail", 0)
			require.NoError(t, err)
			oob := unix.UnixRights(fd)
			if !tc.noCreds {
				oob = append(oob, creds(tc.uid)...)
			}
			ml, k, ok := parseMail(&key, tc.me, tc.msg, oob)
			assert.Equal(t, tc.ok, ok)
			if tc.ok {
				assert.Equal(t, mailKey{mailFD, 1, 3}, k)
				assert.Equal(t, []byte("payload"), ml.payload)
				assert.Equal(t, fd, ml.fd)
				unix.Close(fd)
			} else {
				assert.Equal(t, -1, ml.fd)
				assert.ErrorIs(t, unix.Close(fd), unix.EBADF, "a refused message's descriptor must be closed")
			}
		})
	}
}
