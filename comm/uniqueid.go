package comm

import (
	"crypto/rand"
	"encoding/binary"
	"net"
	"time"

	"purlin/config"
	"purlin/errs"
)

// UniqueIDBytes is the size of a UniqueID, equal to NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID names one communicator's rendezvous: a TCP address and a random
// 64-bit magic that every rank must present. It is plain bytes, so it can
// travel through any out-of-band channel (a pipe, torch.distributed, a file).
//
// Layout (the rest is zero):
//
//	[0:4)   "PRLN"
//	[4]     format version (1)
//	[6:8)   TCP port, big-endian
//	[8:24)  IPv6 or IPv4-in-IPv6 address
//	[24:32) magic, little-endian
type UniqueID [UniqueIDBytes]byte

const idFormat = 1

var idTag = [4]byte{'P', 'R', 'L', 'N'}

// GetUniqueID starts a rendezvous server in this process and returns its
// id. The server is a goroutine that waits for the ranks of one communicator
// (bounded by PURLIN_TIMEOUT from the first rank's arrival; an id no rank
// uses within PURLIN_TIMEOUT is released), then relays the ranks' bootstrap
// exchanges until every rank has left.
func GetUniqueID() (UniqueID, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return UniqueID{}, errs.New(errs.ErrSystem, "GetUniqueID: listen on loopback: %v", err)
	}
	return newUniqueID(ln, config.Get().Timeout)
}

// newUniqueID starts a rendezvous server on ln, bounded by timeout, and
// returns its id.
func newUniqueID(ln net.Listener, timeout time.Duration) (UniqueID, error) {
	var magicBytes [8]byte
	if _, err := rand.Read(magicBytes[:]); err != nil {
		ln.Close()
		return UniqueID{}, errs.New(errs.ErrSystem, "GetUniqueID: random magic: %v", err)
	}
	magic := binary.LittleEndian.Uint64(magicBytes[:])
	if magic == 0 {
		magic = 1
	}
	startServer(ln, magic, timeout)
	return encodeID(ln.Addr().(*net.TCPAddr), magic), nil
}

func encodeID(addr *net.TCPAddr, magic uint64) UniqueID {
	var id UniqueID
	copy(id[0:4], idTag[:])
	id[4] = idFormat
	binary.BigEndian.PutUint16(id[6:8], uint16(addr.Port))
	copy(id[8:24], addr.IP.To16())
	binary.LittleEndian.PutUint64(id[24:32], magic)
	return id
}

// decode returns the rendezvous address and magic an id names.
func (id *UniqueID) decode() (*net.TCPAddr, uint64, error) {
	if [4]byte(id[0:4]) != idTag || id[4] != idFormat {
		return nil, 0, errs.New(errs.ErrInvalidArgument, "unique id was not made by purlinGetUniqueId/ncclGetUniqueId of Purlin (bad tag)")
	}
	ip := make(net.IP, 16)
	copy(ip, id[8:24])
	port := int(binary.BigEndian.Uint16(id[6:8]))
	magic := binary.LittleEndian.Uint64(id[24:32])
	if port == 0 || magic == 0 {
		return nil, 0, errs.New(errs.ErrInvalidArgument, "unique id names no rendezvous (port %d, magic %#x)", port, magic)
	}
	return &net.TCPAddr{IP: ip, Port: port}, magic, nil
}

// deadlineFrom returns the instant a wait that starts now must give up.
func deadlineFrom(timeout time.Duration) time.Time {
	if timeout <= 0 {
		timeout = config.Get().Timeout
	}
	return time.Now().Add(timeout)
}
