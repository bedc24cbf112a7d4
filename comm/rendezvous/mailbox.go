package rendezvous

import (
	"crypto/hmac"
	"encoding/binary"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"purlin/config"
	"purlin/errs"
)

// mailbox is a rank's abstract AF_UNIX datagram socket, named from the
// unique id's secret and the rank (jobKey.mailboxName), so peers on this
// host find it without exchanging names and nothing is left in the file
// system. It carries file
// descriptors (SCM_RIGHTS) for AllGatherFD and small messages (Shrink's new
// unique id). Ranks in one process use it too: the kernel duplicates fds.
//
// A message is [kind u32][src u32][seq u64][payload][hmac]: the hmac,
// under the secret, covers the receiving rank, header and payload, so only a
// holder of the unique id can make one, for that rank only. The kernel adds
// the sender's credentials (SO_PASSCRED); a message whose sender is not of
// this process's user (or PURLIN_PEER_UIDS), or whose hmac is wrong, is
// dropped unread, its descriptor closed. A goroutine empties the socket as
// messages come, so a flood of forged ones cannot fill its queue and keep
// the ranks' own out; valid messages wait in pending until asked for (fast
// peers may be a round ahead).
type mailbox struct {
	fd      int
	untrack func() // the fork hook's registration of fd
	key     jobKey
	rank    int

	mu      sync.Mutex // guards pending
	pending map[mailKey]mail
	arrived chan struct{} // a message was put in pending (buffered 1)
	closing atomic.Bool
	done    chan struct{} // closed when the reader goroutine exits
}

type mailKey struct {
	kind uint32
	src  uint32
	seq  uint64
}

type mail struct {
	payload []byte
	fd      int // -1 when none
}

const (
	mailFD       uint32 = 1 // AllGatherFD round
	mailShrinkID uint32 = 2 // the unique id of a shrunk communicator
	mailHeader          = 16
	mailMAC             = 32
	mailMax             = 64 << 10 // the largest message, header and hmac included
)

func openMailbox(key jobKey, rank int) (*mailbox, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, errs.New(errs.ErrSystem, "bootstrap: socket(AF_UNIX) for rank %d: %v", rank, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fd)
		return nil, errs.New(errs.ErrSystem, "bootstrap: SO_PASSCRED for rank %d: %v", rank, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: key.mailboxName(rank)}); err != nil {
		unix.Close(fd)
		return nil, errs.New(errs.ErrSystem, "bootstrap: bind rank %d's mailbox: %v (is rank %d initialised twice with one unique id?)", rank, err, rank)
	}
	m := &mailbox{fd: fd, untrack: trackFD(fd), key: key, rank: rank, pending: map[mailKey]mail{},
		arrived: make(chan struct{}, 1), done: make(chan struct{})}
	go m.read()
	return m, nil
}

// read moves every valid message into pending until close.
func (m *mailbox) read() {
	defer close(m.done)
	buf := make([]byte, mailMax)
	oob := make([]byte, unix.CmsgSpace(4*4)+unix.CmsgSpace(unix.SizeofUcred))
	for !m.closing.Load() {
		n, oobn, _, _, err := unix.Recvmsg(m.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EAGAIN || err == unix.EINTR {
			pfd := []unix.PollFd{{Fd: int32(m.fd), Events: unix.POLLIN}}
			unix.Poll(pfd, 200) // close's shutdown wakes it
			continue
		}
		if err != nil {
			config.Warnf("bootstrap: rank %d recvmsg: %v", m.rank, err)
			return
		}
		ml, key, ok := parseMail(&m.key, m.rank, buf[:n], oob[:oobn])
		if !ok {
			continue // not from a rank of this job: dropped unread
		}
		m.mu.Lock()
		if old, dup := m.pending[key]; dup && old.fd >= 0 {
			unix.Close(old.fd)
		}
		m.pending[key] = ml
		m.mu.Unlock()
		select {
		case m.arrived <- struct{}{}:
		default:
		}
	}
}

// mailMACOf is the hmac of a message to rank dst (msg: header and payload).
func mailMACOf(key *jobKey, dst int, msg []byte) [32]byte {
	return key.mac("purlin mail", binary.LittleEndian.AppendUint32(nil, uint32(dst)), msg)
}

func (m *mailbox) close() {
	m.closing.Store(true)
	unix.Shutdown(m.fd, unix.SHUT_RD)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, ml := range m.pending {
		if ml.fd >= 0 {
			unix.Close(ml.fd)
		}
		delete(m.pending, k)
	}
	m.untrack()
	unix.Close(m.fd)
}

// send delivers a message (and fd, when >= 0) to rank dst, retrying while
// its queue is full, until deadline or abort.
func (m *mailbox) send(dst int, kind uint32, seq uint64, payload []byte, fd int, deadline time.Time, abort *atomic.Bool) error {
	if mailHeader+len(payload)+mailMAC > mailMax {
		return errs.New(errs.ErrInternal, "bootstrap: rank %d: a mailbox message of %d bytes is larger than %d", m.rank, len(payload), mailMax-mailHeader-mailMAC)
	}
	msg := make([]byte, mailHeader+len(payload), mailHeader+len(payload)+mailMAC)
	binary.LittleEndian.PutUint32(msg[0:4], kind)
	binary.LittleEndian.PutUint32(msg[4:8], uint32(m.rank))
	binary.LittleEndian.PutUint64(msg[8:16], seq)
	copy(msg[mailHeader:], payload)
	mac := mailMACOf(&m.key, dst, msg)
	msg = append(msg, mac[:]...)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	to := &unix.SockaddrUnix{Name: m.key.mailboxName(dst)}
	for backoff := 50 * time.Microsecond; ; backoff = min(2*backoff, 20*time.Millisecond) {
		err := unix.Sendmsg(m.fd, msg, oob, to, unix.MSG_DONTWAIT)
		if err == nil {
			return nil
		}
		if err != unix.EAGAIN && err != unix.ECONNREFUSED && err != unix.ENOENT {
			return errs.New(errs.ErrSystem, "bootstrap: rank %d sendmsg to rank %d: %v", m.rank, dst, err)
		}
		if err := waitCheck(deadline, abort, "rank %d sending to rank %d's mailbox", m.rank, dst); err != nil {
			return err
		}
		time.Sleep(backoff)
	}
}

// recv returns the message (kind, src, seq), waiting until deadline or abort.
// The caller owns the returned fd.
func (m *mailbox) recv(kind uint32, src int, seq uint64, deadline time.Time, abort *atomic.Bool) ([]byte, int, error) {
	want := mailKey{kind, uint32(src), seq}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		ml, ok := m.pending[want]
		delete(m.pending, want)
		m.mu.Unlock()
		if ok {
			return ml.payload, ml.fd, nil
		}
		if err := waitCheck(deadline, abort, "rank %d waiting for rank %d's message %d/%d", m.rank, src, kind, seq); err != nil {
			return nil, -1, err
		}
		select {
		case <-m.arrived:
		case <-m.done:
			return nil, -1, errs.New(errs.ErrSystem, "bootstrap: rank %d's mailbox stopped receiving", m.rank)
		case <-tick.C:
		}
	}
}

// parseMail checks and reads a message received by rank me (oob: its
// control messages); ok is false, and any descriptor it carried closed, for
// one that a process of another user sent, that carries no credentials, or
// whose hmac is wrong.
func parseMail(key *jobKey, me int, msg, oob []byte) (ml mail, k mailKey, ok bool) {
	ml = mail{fd: -1}
	var cred *unix.Ucred
	cmsgs, _ := unix.ParseSocketControlMessage(oob)
	for i := range cmsgs {
		if fds, err := unix.ParseUnixRights(&cmsgs[i]); err == nil {
			for _, fd := range fds {
				if ml.fd < 0 {
					ml.fd = fd
				} else {
					unix.Close(fd)
				}
			}
		} else if c, err := unix.ParseUnixCredentials(&cmsgs[i]); err == nil {
			cred = c
		}
	}
	n := len(msg) - mailMAC
	if cred == nil || !uidAllowed(int(cred.Uid)) || n < mailHeader {
		return dropMail(ml)
	}
	want := mailMACOf(key, me, msg[:n])
	if !hmac.Equal(msg[n:], want[:]) {
		return dropMail(ml)
	}
	k = mailKey{binary.LittleEndian.Uint32(msg[0:4]), binary.LittleEndian.Uint32(msg[4:8]), binary.LittleEndian.Uint64(msg[8:16])}
	ml.payload = append([]byte(nil), msg[mailHeader:n]...)
	return ml, k, true
}

func dropMail(ml mail) (mail, mailKey, bool) {
	if ml.fd >= 0 {
		unix.Close(ml.fd)
	}
	return mail{fd: -1}, mailKey{}, false
}

// uidAllowed says whether a process of user uid may be a rank on this host:
// this process's user, or one PURLIN_PEER_UIDS names.
func uidAllowed(uid int) bool {
	return uid == os.Getuid() || slices.Contains(config.Get().PeerUIDs, uid)
}

// waitCheck reports an abort or a passed deadline as an error naming what
// was awaited; nil means keep waiting.
func waitCheck(deadline time.Time, abort *atomic.Bool, format string, args ...any) error {
	if abort != nil && abort.Load() {
		return errs.New(errs.ErrAborted, "bootstrap: aborted while "+format, args...)
	}
	if time.Now().After(deadline) {
		return errs.New(errs.ErrTimeout, "bootstrap: timed out "+format, args...)
	}
	return nil
}

func closeFD(fd int) { unix.Close(fd) }
