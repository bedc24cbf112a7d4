package rendezvous

import (
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"purlin/errs"
)

// bootstrap is one rank's connection to its communicator's rendezvous. It
// implements atom.Exchange: AllGather travels through the rendezvous over
// TCP; AllGatherFD through the ranks' mailboxes. The connection stays open
// for the communicator's life; when it drops without this rank saying bye,
// or the rendezvous says another rank dropped, onDrop runs, once per rank
// gone (-1: any rank may be), with why (comm tells the rank's datapath then,
// so waits on that rank end before the timeout).
//
// Every rank makes the same sequence of exchanges, each matched to its own
// round. An exchange this rank gives up on (a timeout, an abort) leaves it
// out of step with the others, which may still complete that round and go
// on to the next; so every later exchange of this rank fails at once, naming
// the first failure (NCCL: the communicator must be aborted). The round's
// late reply is dropped.
type Bootstrap struct {
	rank, nranks int
	key          jobKey     // the unique id's secret; finds the rendezvous in localServers when this process hosts it
	peers        []PeerInfo // immutable after connect
	timeout      time.Duration
	conn         net.Conn
	mail         *mailbox

	wmu       sync.Mutex    // serialises writes to conn
	gmu       sync.Mutex    // one AllGather or AllGatherFD at a time
	done      chan struct{} // closed when the reader goroutine exits
	round     uint64        // this rank's next gather round; guarded by gmu
	fdRound   uint64        // guarded by gmu
	outOfStep error         // the exchange this rank gave up on; guarded by gmu

	rmu     sync.Mutex // guards waiting
	waiting gatherWait // the AllGather waiting for its reply

	leaving  atomic.Bool // close was called: a closed connection is expected
	hostLeft atomic.Bool // the server's process may exit: a closed connection is expected
	aborted  atomic.Bool

	dmu    sync.Mutex
	drops  []dropped                 // ranks seen gone, in order; guarded by dmu
	onDrop func(peer int, err error) // guarded by dmu
}

// gatherWait is an AllGather waiting for the reply of its round; reply is
// nil when none waits.
type gatherWait struct {
	round uint64
	reply chan []byte // buffered 1: the reader never blocks on it
}

// dropped is a rank that left without a bye (-1: not known which) and why.
type dropped struct {
	peer int
	err  error
}

// connect joins the rendezvous id names as rank of nranks and returns once
// every rank arrived (bounded by timeout).
// Closing cancel ends the wait early with ErrAborted.
func Connect(id *UniqueID, rank, nranks, device int, timeout time.Duration, cancel <-chan struct{}) (*Bootstrap, error) {
	addr, key, err := id.decode()
	if err != nil {
		return nil, err
	}
	if nranks < 1 || nranks > maxRanks || rank < 0 || rank >= nranks {
		return nil, errs.New(errs.ErrInvalidArgument, "CommInitRank: rank %d is not a rank of %d (at most %d ranks)", rank, nranks, maxRanks)
	}
	deadline := deadlineFrom(timeout)
	mail, err := openMailbox(key, rank)
	if err != nil {
		return nil, err
	}
	raw, err := net.DialTimeout("tcp", addr.String(), time.Until(deadline))
	if err != nil {
		mail.close()
		return nil, errs.New(errs.ErrSystem, "CommInitRank rank %d: connect to the rendezvous %v: %v", rank, addr, err)
	}
	conn := trackConn(raw)
	host, _ := os.Hostname()
	me := PeerInfo{Rank: rank, NRanks: nranks, Pid: os.Getpid(), Device: device, Host: host}
	b := &Bootstrap{rank: rank, nranks: nranks, key: key, timeout: timeout, conn: conn, mail: mail,
		done: make(chan struct{})}
	helloDone := make(chan struct{})
	go func() {
		select {
		case <-cancel:
			b.aborted.Store(true)
			conn.Close()
		case <-helloDone:
		}
	}()
	err = b.hello(me, deadline)
	close(helloDone)
	if err == nil && b.aborted.Load() {
		err = errs.New(errs.ErrAborted, "CommInitRank rank %d: aborted", rank)
	}
	if err != nil {
		conn.Close()
		mail.close()
		if b.aborted.Load() {
			err = errs.New(errs.ErrAborted, "CommInitRank rank %d of %d: aborted while waiting for the other ranks", rank, nranks)
		}
		return nil, err
	}
	go b.read()
	return b, nil
}

// hello runs the handshake (wire.go) and waits for every rank's record.
func (b *Bootstrap) hello(me PeerInfo, deadline time.Time) error {
	b.conn.SetDeadline(deadline)
	defer b.conn.SetDeadline(time.Time{})
	kind, serverNonce, err := b.helloRead(maxHelloFrame)
	if err != nil {
		return err
	}
	if kind != frameChallenge || len(serverNonce) != nonceBytes {
		return errs.New(errs.ErrRemote, "CommInitRank rank %d: the rendezvous sent no challenge (frame %d)", b.rank, kind)
	}
	clientNonce, err := newNonce()
	if err != nil {
		return err
	}
	if err := writeFrame(b.conn, frameHello, encodeHello(&b.key, serverNonce, clientNonce, me)); err != nil {
		return errs.New(errs.ErrSystem, "CommInitRank rank %d: send hello: %v", b.rank, err)
	}
	kind, proof, err := b.helloRead(maxHelloFrame)
	if err != nil {
		return err
	}
	want := welcomeProof(&b.key, serverNonce, clientNonce)
	if kind != frameWelcome || !hmac.Equal(proof, want[:]) {
		return errs.New(errs.ErrRemote, "CommInitRank rank %d: the rendezvous did not prove it knows the unique id's secret", b.rank)
	}
	kind, payload, err := b.helloRead(maxFrame)
	if err != nil {
		return err
	}
	switch kind {
	case frameReject:
		return errs.New(errs.ErrInvalidUsage, "CommInitRank rank %d refused: %s", b.rank, payload)
	case frameTable:
	default:
		return errs.New(errs.ErrRemote, "CommInitRank rank %d: unexpected frame %d from the rendezvous", b.rank, kind)
	}
	for range b.nranks {
		var p PeerInfo
		if p, payload, err = decodePeer(payload); err != nil {
			return err
		}
		b.peers = append(b.peers, p)
	}
	return nil
}

// helloRead reads one frame of the handshake, of at most max bytes.
func (b *Bootstrap) helloRead(max uint32) (byte, []byte, error) {
	kind, payload, err := readFrame(b.conn, max)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return 0, nil, errs.New(errs.ErrTimeout, "CommInitRank rank %d of %d: not every rank arrived at the rendezvous within the timeout", b.rank, b.nranks)
	}
	if err != nil {
		return 0, nil, errs.New(errs.ErrRemote, "CommInitRank rank %d: the rendezvous closed the connection (a unique id that is stale, belongs to another communicator or was altered is refused so): %v", b.rank, err)
	}
	return kind, payload, nil
}

// read delivers gather replies and turns a lost connection into onDrop. It
// never waits for anyone, so a departure is told whatever the exchanges do.
func (b *Bootstrap) read() {
	defer close(b.done)
	for {
		kind, payload, err := readFrame(b.conn, maxFrame)
		if err != nil {
			if !b.leaving.Load() && !b.hostLeft.Load() {
				// Every rank may be gone with the rendezvous' process, and no
				// later departure can be told: any other rank counts as gone.
				b.fail(-1, errs.New(errs.ErrRemote, "rank %d lost its bootstrap connection (the rendezvous process exited?): %v", b.rank, err))
			}
			return
		}
		switch kind {
		case frameGather:
			round, values, err := gatherRound(payload)
			if err != nil {
				b.fail(-1, err) // no exchange can be matched any more
				return
			}
			b.deliver(round, values)
		case frameHostLeft:
			b.hostLeft.Store(true)
		case frameDropped: // the connection stays: a later departure is told too
			who, why := -1, droppedLost
			if len(payload) >= 5 {
				who, why = int(int32(binary.LittleEndian.Uint32(payload))), payload[4]
			}
			b.fail(who, droppedError(who, why, b.rank))
		}
	}
}

// deliver hands the reply of round to the AllGather waiting for it, if any:
// the reply of a round its AllGather gave up on is dropped.
func (b *Bootstrap) deliver(round uint64, values []byte) {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if w := b.waiting; w.reply != nil && w.round == round {
		w.reply <- values
		b.waiting = gatherWait{}
	}
}

// wait makes w the AllGather waiting for a reply (a zero w: none).
func (b *Bootstrap) wait(w gatherWait) {
	b.rmu.Lock()
	b.waiting = w
	b.rmu.Unlock()
}

// fail records that peer is gone (-1: any rank may be) because of err and
// tells onDrop.
func (b *Bootstrap) fail(peer int, err error) {
	b.dmu.Lock()
	b.drops = append(b.drops, dropped{peer, err})
	f := b.onDrop
	b.dmu.Unlock()
	if f != nil {
		f(peer, err)
	}
}

// setOnDrop installs f and tells it every rank already seen gone; each
// departure reaches f once.
func (b *Bootstrap) SetOnDrop(f func(peer int, err error)) {
	b.dmu.Lock()
	b.onDrop = f
	past := slices.Clone(b.drops)
	b.dmu.Unlock()
	for _, d := range past {
		f(d.peer, d.err)
	}
}

// Failure returns why the bootstrap is unusable (the first rank seen gone),
// or nil.
func (b *Bootstrap) Failure() error {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	if len(b.drops) > 0 {
		return b.drops[0].err
	}
	return nil
}

// ready returns why no exchange can start: a rank is gone, or this rank
// gave up on an earlier exchange. b.gmu must be held.
func (b *Bootstrap) ready(what string) error {
	if err := b.Failure(); err != nil {
		return err
	}
	if b.outOfStep != nil {
		return fmt.Errorf("bootstrap %s rank %d: an earlier exchange of this rank failed, so it is out of step with the other ranks (abort the communicator): %w",
			what, b.rank, b.outOfStep)
	}
	return nil
}

// giveUp records that this rank gave up on an exchange with err, if not nil.
// b.gmu must be held.
func (b *Bootstrap) giveUp(err error) {
	if err != nil && b.outOfStep == nil {
		b.outOfStep = err
	}
}

// Peers is every rank's record (rank, pid, host, device), in rank order.
func (b *Bootstrap) Peers() []PeerInfo { return b.peers }

func (b *Bootstrap) Rank() int   { return b.rank }
func (b *Bootstrap) NRanks() int { return b.nranks }

// AllGather sends mine to every rank through the rendezvous and returns all
// ranks' values in rank order.
func (b *Bootstrap) AllGather(mine []byte) (_ [][]byte, err error) {
	b.gmu.Lock()
	defer b.gmu.Unlock()
	if err := b.ready("AllGather"); err != nil {
		return nil, err
	}
	defer func() { b.giveUp(err) }()
	w := gatherWait{b.round, make(chan []byte, 1)}
	b.round++
	b.wait(w)
	defer b.wait(gatherWait{})
	b.wmu.Lock()
	err = writeFrame(b.conn, frameGather, mine)
	b.wmu.Unlock()
	if err != nil {
		return nil, errs.New(errs.ErrRemote, "bootstrap AllGather rank %d: send: %v", b.rank, err)
	}
	timer := time.NewTimer(time.Until(deadlineFrom(b.timeout)))
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case reply := <-w.reply:
			return decodeValues(reply, b.nranks)
		case <-b.done:
			if err := b.Failure(); err != nil {
				return nil, err
			}
			return nil, errs.New(errs.ErrInvalidUsage, "bootstrap AllGather rank %d: the communicator was closed", b.rank)
		case <-timer.C:
			return nil, errs.New(errs.ErrTimeout, "bootstrap AllGather rank %d of %d: not every rank joined within the timeout", b.rank, b.nranks)
		case <-tick.C:
			if b.aborted.Load() {
				return nil, errs.New(errs.ErrAborted, "bootstrap AllGather rank %d: aborted", b.rank)
			}
			if err := b.Failure(); err != nil { // a rank is gone: the round cannot complete
				return nil, err
			}
		}
	}
}

// AllGatherFD sends fd to every rank's mailbox and returns every rank's fd
// in rank order, each a new descriptor the caller owns (its own is a dup).
func (b *Bootstrap) AllGatherFD(fd int) (_ []int, err error) {
	b.gmu.Lock()
	defer b.gmu.Unlock()
	if err := b.ready("AllGatherFD"); err != nil {
		return nil, err
	}
	defer func() { b.giveUp(err) }()
	round := b.fdRound
	b.fdRound++
	deadline := deadlineFrom(b.timeout)
	for p := range b.nranks {
		if p != b.rank {
			if err := b.mail.send(p, mailFD, round, nil, fd, deadline, &b.aborted); err != nil {
				return nil, err
			}
		}
	}
	fds := make([]int, b.nranks)
	for i := range fds {
		fds[i] = -1
	}
	for p := range b.nranks {
		if p == b.rank {
			fds[p], err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				err = errs.New(errs.ErrSystem, "bootstrap AllGatherFD rank %d: dup: %v", b.rank, err)
			}
		} else {
			var got int
			_, got, err = b.mail.recv(mailFD, p, round, deadline, &b.aborted)
			if err == nil && got < 0 {
				err = errs.New(errs.ErrRemote, "bootstrap AllGatherFD rank %d: rank %d sent no descriptor", b.rank, p)
			}
			fds[p] = got
		}
		if err == nil {
			err = b.Failure()
		}
		if err != nil {
			for _, f := range fds {
				if f >= 0 {
					unix.Close(f)
				}
			}
			return nil, err
		}
	}
	return fds, nil
}

// abort makes every bootstrap wait of this rank end with ErrAborted.
func (b *Bootstrap) Abort() { b.aborted.Store(true) }

// close leaves the rendezvous; with bye, the other ranks are not told that
// this rank failed (Destroy); without it, they are told it aborted (Abort,
// a failed init). Only the first call acts.
func (b *Bootstrap) Close(bye bool) {
	if b.leaving.Swap(true) {
		return
	}
	if s, ok := localServers.Load(b.key); ok { // our process hosts the rendezvous
		s.(*server).leaveLocal(b.rank, bye)
	}
	kind := frameAbort
	if bye {
		kind = frameBye
	}
	b.wmu.Lock()
	b.conn.SetWriteDeadline(time.Now().Add(time.Second))
	writeFrame(b.conn, kind, nil)
	b.wmu.Unlock()
	b.conn.Close()
	<-b.done
	b.mail.close()
}

// SendUniqueID sends id to rank dst's mailbox as the seq-th id this rank
// passes on (CommShrink: the new rank 0 gives the survivors their id).
func (b *Bootstrap) SendUniqueID(dst int, seq uint64, id UniqueID, deadline time.Time) error {
	return b.mail.send(dst, mailShrinkID, seq, id[:], -1, deadline, &b.aborted)
}

// RecvUniqueID waits for the seq-th id rank src sends this rank (SendUniqueID).
func (b *Bootstrap) RecvUniqueID(src int, seq uint64, deadline time.Time) (UniqueID, error) {
	var id UniqueID
	payload, fd, err := b.mail.recv(mailShrinkID, src, seq, deadline, &b.aborted)
	if err != nil {
		return id, err
	}
	if fd >= 0 {
		closeFD(fd)
	}
	if copy(id[:], payload) != UniqueIDBytes {
		return id, errs.New(errs.ErrRemote, "CommShrink: rank %d sent a %d-byte unique id", src, len(payload))
	}
	return id, nil
}

// Gone is the number of departures seen so far (a rank gone, or -1: any rank
// may be), each reported once to the SetOnDrop function.
func (b *Bootstrap) Gone() int {
	b.dmu.Lock()
	defer b.dmu.Unlock()
	return len(b.drops)
}

// Sever drops this rank's connection to the rendezvous without a word, as
// a process that dies does: the other ranks learn that this rank is gone
// (fault injection in tests).
func (b *Bootstrap) Sever() { b.conn.Close() }
