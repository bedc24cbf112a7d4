package comm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"purlin/errs"
)

// mailbox is a rank's abstract AF_UNIX datagram socket, named from the
// communicator's magic and the rank, so peers on this host find it without
// exchanging names and nothing is left in the file system. It carries file
// descriptors (SCM_RIGHTS) for AllGatherFD and small messages (Shrink's new
// unique id). Ranks in one process use it too: the kernel duplicates fds.
//
// A message is [kind u32][src u32][seq u64][payload]; messages that arrive
// before they are asked for are kept (fast peers may be a round ahead).
type mailbox struct {
	fd      int
	untrack func() // the fork hook's registration of fd
	magic   uint64
	rank    int

	mu      sync.Mutex // one receiver at a time; guards pending
	pending map[mailKey]mail
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
)

func mailboxName(magic uint64, rank int) string {
	return fmt.Sprintf("@purlin-%016x-%d", magic, rank) // '@': abstract namespace
}

func openMailbox(magic uint64, rank int) (*mailbox, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, errs.New(errs.ErrSystem, "bootstrap: socket(AF_UNIX) for rank %d: %v", rank, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: mailboxName(magic, rank)}); err != nil {
		unix.Close(fd)
		return nil, errs.New(errs.ErrSystem, "bootstrap: bind %q: %v (is rank %d initialised twice with one unique id?)", mailboxName(magic, rank), err, rank)
	}
	return &mailbox{fd: fd, untrack: trackFD(fd), magic: magic, rank: rank, pending: map[mailKey]mail{}}, nil
}

func (m *mailbox) close() {
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
	msg := make([]byte, mailHeader+len(payload))
	binary.LittleEndian.PutUint32(msg[0:4], kind)
	binary.LittleEndian.PutUint32(msg[4:8], uint32(m.rank))
	binary.LittleEndian.PutUint64(msg[8:16], seq)
	copy(msg[mailHeader:], payload)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	to := &unix.SockaddrUnix{Name: mailboxName(m.magic, dst)}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	want := mailKey{kind, uint32(src), seq}
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		if ml, ok := m.pending[want]; ok {
			delete(m.pending, want)
			return ml.payload, ml.fd, nil
		}
		n, oobn, _, _, err := unix.Recvmsg(m.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EAGAIN || err == unix.EINTR {
			if err := waitCheck(deadline, abort, "rank %d waiting for rank %d's message %d/%d", m.rank, src, kind, seq); err != nil {
				return nil, -1, err
			}
			pfd := []unix.PollFd{{Fd: int32(m.fd), Events: unix.POLLIN}}
			unix.Poll(pfd, 20)
			continue
		}
		if err != nil {
			return nil, -1, errs.New(errs.ErrSystem, "bootstrap: rank %d recvmsg: %v", m.rank, err)
		}
		ml, key, err := parseMail(buf[:n], oob[:oobn])
		if err != nil {
			return nil, -1, err
		}
		if old, dup := m.pending[key]; dup && old.fd >= 0 {
			unix.Close(old.fd)
		}
		m.pending[key] = ml
	}
}

func parseMail(msg, oob []byte) (mail, mailKey, error) {
	ml := mail{fd: -1}
	if len(oob) > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob)
		if err == nil && len(cmsgs) > 0 {
			if fds, err := unix.ParseUnixRights(&cmsgs[0]); err == nil && len(fds) > 0 {
				ml.fd = fds[0]
				for _, extra := range fds[1:] {
					unix.Close(extra)
				}
			}
		}
	}
	if len(msg) < mailHeader {
		if ml.fd >= 0 {
			unix.Close(ml.fd)
		}
		return mail{}, mailKey{}, errs.New(errs.ErrRemote, "bootstrap: truncated mailbox message (%d bytes)", len(msg))
	}
	key := mailKey{binary.LittleEndian.Uint32(msg[0:4]), binary.LittleEndian.Uint32(msg[4:8]), binary.LittleEndian.Uint64(msg[8:16])}
	ml.payload = append([]byte(nil), msg[mailHeader:]...)
	return ml, key, nil
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
