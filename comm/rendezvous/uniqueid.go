package rendezvous

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net"
	"time"

	"purlin/config"
	"purlin/errs"
)

// UniqueIDBytes is the size of a UniqueID, equal to NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID names one communicator's rendezvous: a TCP address and a random
// 256-bit secret that every rank must prove it knows. It is plain bytes, so
// it can travel through any out-of-band channel (a pipe, torch.distributed,
// a file); whoever holds it may join the communicator, so it must travel
// only to the job's own ranks.
//
// Layout (the rest is zero):
//
//	[0:4)   "PRLN"
//	[4]     format version (2)
//	[6:8)   TCP port, big-endian
//	[8:24)  IPv6 or IPv4-in-IPv6 address
//	[24:56) secret
type UniqueID [UniqueIDBytes]byte

const idFormat = 2

var idTag = [4]byte{'P', 'R', 'L', 'N'}

// jobKey is a unique id's secret. It never leaves the process except inside
// the unique id itself: connections prove they know it (hmac), and every
// name or log line uses values derived from it that cannot be inverted.
type jobKey [32]byte

// GetUniqueID starts a rendezvous server in this process and returns its
// id. The server listens on loopback, or where PURLIN_BOOTSTRAP_ADDR or
// PURLIN_SOCKET_IFNAME (NCCL_SOCKET_IFNAME) say, for ranks on other hosts. The server is a goroutine that waits for the ranks of one communicator
// (bounded by PURLIN_TIMEOUT from the first rank's arrival; an id no rank
// uses within PURLIN_TIMEOUT is released), then relays the ranks' bootstrap
// exchanges until every rank has left.
func GetUniqueID() (UniqueID, error) {
	addr, err := listenAddr(config.Get())
	if err != nil {
		return UniqueID{}, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return UniqueID{}, errs.New(errs.ErrSystem, "GetUniqueID: listen on %s: %v", addr, err)
	}
	return NewUniqueID(ln, config.Get().Timeout)
}

// GetLocalUniqueID is GetUniqueID for ranks of this host alone: its server
// listens on loopback whatever the settings (a node's own communicator).
func GetLocalUniqueID() (UniqueID, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return UniqueID{}, errs.New(errs.ErrSystem, "GetUniqueID: listen on loopback: %v", err)
	}
	return NewUniqueID(ln, config.Get().Timeout)
}

// newUniqueID starts a rendezvous server on ln, bounded by timeout, under a
// new random secret, and returns its id.
func NewUniqueID(ln net.Listener, timeout time.Duration) (UniqueID, error) {
	var key jobKey
	if _, err := rand.Read(key[:]); err != nil {
		ln.Close()
		return UniqueID{}, errs.New(errs.ErrSystem, "GetUniqueID: random secret: %v", err)
	}
	startServer(ln, key, timeout)
	return encodeID(ln.Addr().(*net.TCPAddr), key), nil
}

func encodeID(addr *net.TCPAddr, key jobKey) UniqueID {
	var id UniqueID
	copy(id[0:4], idTag[:])
	id[4] = idFormat
	binary.BigEndian.PutUint16(id[6:8], uint16(addr.Port))
	copy(id[8:24], addr.IP.To16())
	copy(id[24:56], key[:])
	return id
}

// Addr is the address of the rendezvous id names, or why it names none
// (not made by GetUniqueID, no port or no secret).
func (id *UniqueID) Addr() (*net.TCPAddr, error) {
	addr, _, err := id.decode()
	return addr, err
}

// decode returns the rendezvous address and secret an id names.
func (id *UniqueID) decode() (*net.TCPAddr, jobKey, error) {
	if [4]byte(id[0:4]) != idTag || id[4] != idFormat {
		return nil, jobKey{}, errs.New(errs.ErrInvalidArgument, "unique id was not made by purlinGetUniqueId/ncclGetUniqueId of Purlin (bad tag)")
	}
	ip := make(net.IP, 16)
	copy(ip, id[8:24])
	port := int(binary.BigEndian.Uint16(id[6:8]))
	key := jobKey(id[24:56])
	if port == 0 || key == (jobKey{}) {
		return nil, jobKey{}, errs.New(errs.ErrInvalidArgument, "unique id names no rendezvous (no port or no secret)")
	}
	return &net.TCPAddr{IP: ip, Port: port}, key, nil
}

// mac returns HMAC-SHA256 under the secret of label and parts; label keeps
// the uses apart, so no mac made for one can stand for another.
func (k *jobKey) mac(label string, parts ...[]byte) [32]byte {
	h := hmac.New(sha256.New, k[:])
	h.Write([]byte(label))
	h.Write([]byte{0})
	for _, p := range parts {
		h.Write(p)
	}
	return [32]byte(h.Sum(nil))
}

// tag is the job's public label for logs and the table of local servers:
// derived from the secret, it tells nothing about it.
func (k *jobKey) tag() uint64 {
	m := k.mac("purlin tag")
	return binary.LittleEndian.Uint64(m[:8])
}

// mailboxName is the abstract AF_UNIX name of rank's mailbox ('@': abstract
// namespace). It is visible to every local user (/proc/net/unix), so it is a
// keyed hash: it reveals nothing of the secret, and one rank's name does not
// tell another's.
func (k *jobKey) mailboxName(rank int) string {
	m := k.mac("purlin mailbox", binary.LittleEndian.AppendUint32(nil, uint32(rank)))
	return "@purlin-" + hex.EncodeToString(m[:16])
}

// deadlineFrom returns the instant a wait that starts now must give up.
func deadlineFrom(timeout time.Duration) time.Time {
	if timeout <= 0 {
		timeout = config.Get().Timeout
	}
	return time.Now().Add(timeout)
}
