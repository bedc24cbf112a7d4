package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"purlin/config"
)

// server is the rendezvous of one communicator. It lives in the process that
// called GetUniqueID, as goroutines: one accepting, one reading each rank.
//
// Phase 1 (init): it authenticates every connection (wire.go's handshake;
// at most maxHandshakes at once, each within handshakeTimeout), then
// collects one hello per rank, refusing a rank out of range, a duplicate
// rank or a disagreeing nranks, and gives up when not all ranks arrived
// within the timeout from the first arrival, or when no rank arrived within
// the timeout from its start (an unused id: its listener and goroutine are
// released).
// Phase 2 (relay): once all arrived it sends everyone the table, then
// answers gather rounds (a round completes when every rank sent its value)
// and tells the others when a rank leaves without a bye: it aborted, or its
// connection ended (its process died).
type server struct {
	ln         net.Listener
	key        jobKey
	timeout    time.Duration
	hmu        sync.Mutex // guards handshakes
	handshakes []pendingConn

	mu       sync.Mutex // guards everything below
	nranks   int        // 0 until the first valid hello
	conns    []*serverConn
	arrived  int
	started  bool        // the table was sent
	failed   bool        // init failed or a rank dropped: no more gather rounds
	queues   [][][]byte  // pending gather values per rank
	rounds   uint64      // gather rounds answered: the next round's number
	timer    *time.Timer // fires at deadline
	deadline time.Time   // of the first rank's arrival, then of the last's
}

// acceptBackoffMax bounds the pause after a failed Accept (EMFILE, ENFILE,
// ECONNABORTED...): such errors pass, so the rendezvous retries.
const acceptBackoffMax = 500 * time.Millisecond

// pendingConn is a connection not yet authenticated, since when.
type pendingConn struct {
	conn  net.Conn
	since time.Time
}

type serverConn struct {
	conn  net.Conn
	info  PeerInfo
	wmu   sync.Mutex
	left  bool // said bye; guarded by server.mu
	ready bool // hello accepted; guarded by server.mu
}

// localServers holds the rendezvous servers this process started, by
// jobKey, so a rank living in the same process can leave synchronously
// (leaveLocal).
var localServers sync.Map

// LocalServers is the number of rendezvous this process hosts: a server
// leaves once its communicator's ranks are gone, or its id went unused.
func LocalServers() int {
	n := 0
	localServers.Range(func(any, any) bool { n++; return true })
	return n
}

const (
	// maxHandshakes bounds the connections a server authenticates at once.
	// When a new one comes while all are taken, the oldest is closed once it
	// had handshakeGrace to prove itself (a real rank needs a round trip):
	// idle intruders cannot keep the real ranks out, nor can a flood of
	// connections push a real rank out before it answers.
	maxHandshakes  = 16
	handshakeGrace = 500 * time.Millisecond
	// handshakeTimeout bounds one connection's handshake (or the server's
	// timeout, when shorter).
	handshakeTimeout = 10 * time.Second
)

func startServer(ln net.Listener, key jobKey, timeout time.Duration) {
	s := &server{ln: trackListener(ln), key: key, timeout: timeout, deadline: time.Now().Add(timeout)}
	localServers.Store(key, s)
	s.timer = time.AfterFunc(timeout, s.initTimedOut)
	go s.accept()
}

// leaveLocal records the bye (or abort) of a rank living in the server's
// own process before that rank's frame is even read: once its caller
// returns, the process may exit at once, taking this server and its relay
// goroutines along, so the other ranks must hear frameHostLeft (or
// frameDropped) now.
func (s *server) leaveLocal(rank int, bye bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rank < 0 || rank >= len(s.conns) || s.conns[rank] == nil {
		return
	}
	s.leaveLocked(s.conns[rank], bye, nil)
}

// leaveLocked handles a rank that leaves: with bye, on purpose; without,
// on failure (cause: its connection's end, nil when it said frameAbort).
// s.mu must be held.
func (s *server) leaveLocked(sc *serverConn, bye bool, cause error) {
	if !bye {
		s.dropLocked(sc, cause)
	}
	sc.left = true
	s.announceHostLeftLocked()
	s.forgetIfDoneLocked()
}

// accept runs until the listener is closed (once every rank arrived, or on
// failure). Any other error is taken as passing: a shortage of descriptors
// must not end the rendezvous, so it backs off and retries.
func (s *server) accept() {
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, 5*time.Millisecond), acceptBackoffMax)
			config.Tracef("rendezvous %016x: accept: %v; retrying in %v", s.key.tag(), err, backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.startHandshake(c)
		go s.serve(&serverConn{conn: c})
	}
}

func (sc *serverConn) send(kind byte, payload []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return writeFrame(sc.conn, kind, payload)
}

func (sc *serverConn) reject(format string, args ...any) {
	sc.send(frameReject, []byte(fmt.Sprintf(format, args...)))
	sc.conn.Close()
}

// startHandshake takes a handshake slot for c, closing the oldest
// connection still in its handshake when all are taken (waiting until it
// had handshakeGrace).
func (s *server) startHandshake(c net.Conn) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	for len(s.handshakes) >= maxHandshakes {
		if wait := handshakeGrace - time.Since(s.handshakes[0].since); wait > 0 {
			s.hmu.Unlock()
			time.Sleep(wait)
			s.hmu.Lock()
			continue
		}
		s.handshakes[0].conn.Close()
		s.handshakes = s.handshakes[1:]
	}
	s.handshakes = append(s.handshakes, pendingConn{c, time.Now()})
}

// endHandshake frees c's handshake slot and says whether it still had one
// (false: c was closed to make room).
func (s *server) endHandshake(c net.Conn) bool {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	n := len(s.handshakes)
	s.handshakes = slices.DeleteFunc(s.handshakes, func(p pendingConn) bool { return p.conn == c })
	return len(s.handshakes) < n
}

func (s *server) serve(sc *serverConn) {
	ok := s.handshake(sc)
	s.endHandshake(sc.conn) // when the handshake failed
	if !ok {
		sc.conn.Close() // nothing said: an intruder learns nothing
		return
	}
	if !s.admit(sc) {
		return
	}
	s.relay(sc)
}

// handshake authenticates a new connection (wire.go) and reads its
// PeerInfo; false means close it unanswered.
func (s *server) handshake(sc *serverConn) bool {
	sc.conn.SetDeadline(time.Now().Add(min(s.timeout, handshakeTimeout)))
	defer sc.conn.SetDeadline(time.Time{})
	serverNonce, err := newNonce()
	if err != nil || writeFrame(sc.conn, frameChallenge, serverNonce) != nil {
		return false
	}
	kind, payload, err := readFrame(sc.conn, maxHelloFrame)
	if err != nil || kind != frameHello {
		return false
	}
	info, clientNonce, ok := decodeHello(&s.key, serverNonce, payload)
	if !ok || !s.endHandshake(sc.conn) {
		return false
	}
	welcome := welcomeProof(&s.key, serverNonce, clientNonce)
	if writeFrame(sc.conn, frameWelcome, welcome[:]) != nil {
		return false
	}
	sc.info = info
	return true
}

// admit registers a hello, or refuses it with a reason the rank reports.
func (s *server) admit(sc *serverConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := sc.info
	switch {
	case s.failed || s.started:
		sc.reject("rank %d arrived after the rendezvous closed", p.Rank)
		return false
	case p.NRanks < 1 || p.NRanks > maxRanks:
		sc.reject("rank %d asked for %d ranks (at most %d)", p.Rank, p.NRanks, maxRanks)
		return false
	case s.nranks != 0 && p.NRanks != s.nranks:
		sc.reject("rank %d says there are %d ranks, but earlier ranks said %d", p.Rank, p.NRanks, s.nranks)
		return false
	case p.Rank < 0 || p.Rank >= p.NRanks:
		sc.reject("rank %d is not a rank of %d", p.Rank, p.NRanks)
		return false
	}
	if s.nranks == 0 {
		s.nranks = p.NRanks
		s.conns = make([]*serverConn, p.NRanks)
		s.queues = make([][][]byte, p.NRanks)
		s.deadline = time.Now().Add(s.timeout) // the idle bound becomes the init bound
		s.timer.Reset(s.timeout)
	}
	if s.conns[p.Rank] != nil {
		sc.reject("rank %d was given twice (pids %d and %d): every rank must be unique", p.Rank, s.conns[p.Rank].info.Pid, p.Pid)
		return false
	}
	s.conns[p.Rank] = sc
	sc.ready = true
	s.arrived++
	if s.arrived < s.nranks {
		return true
	}
	s.timer.Stop()
	s.started = true
	s.ln.Close()
	table := make([]byte, 0, 64*s.nranks)
	for _, c := range s.conns {
		table = append(table, c.info.encode()...)
	}
	for _, c := range s.conns {
		c.send(frameTable, table)
	}
	config.Tracef("rendezvous %016x: all %d ranks arrived", s.key.tag(), s.nranks)
	return true
}

// initTimedOut ends a rendezvous whose ranks did not all arrive in time, or
// an unused one, releasing its listener and its place in localServers: no
// rank of this process can hold it (none was admitted to the end).
func (s *server) initTimedOut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.failed || time.Now().Before(s.deadline) { // a superseded firing
		return
	}
	s.failed = true
	s.ln.Close()
	localServers.Delete(s.key)
	if s.nranks == 0 {
		config.Tracef("rendezvous %016x: no rank arrived within %v; closed", s.key.tag(), s.timeout)
		return
	}
	var missing []int
	for r, c := range s.conns {
		if c == nil {
			missing = append(missing, r)
		}
	}
	for _, c := range s.conns {
		if c != nil {
			c.reject("only %d of %d ranks arrived within %v; missing ranks %v", s.arrived, s.nranks, s.timeout, missing)
		}
	}
}

// relay serves one rank after its hello until it leaves.
func (s *server) relay(sc *serverConn) {
	for {
		kind, payload, err := readFrame(sc.conn, maxFrame)
		if err != nil {
			s.drop(sc, err)
			return
		}
		switch kind {
		case frameGather:
			s.gather(sc.info.Rank, payload)
		case frameBye, frameAbort:
			s.mu.Lock()
			s.leaveLocked(sc, kind == frameBye, nil)
			s.mu.Unlock()
			sc.conn.Close()
			return
		default:
			s.drop(sc, fmt.Errorf("unexpected frame %d", kind))
			return
		}
	}
}

// gather queues a rank's value and answers every rank once a round is full:
// round i pairs every rank's i-th value, and its reply says i.
func (s *server) gather(rank int, v []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	s.queues[rank] = append(s.queues[rank], v)
	for _, q := range s.queues {
		if len(q) == 0 {
			return
		}
	}
	round := make([][]byte, s.nranks)
	for r := range s.queues {
		round[r] = s.queues[r][0]
		s.queues[r] = s.queues[r][1:]
	}
	reply := encodeGatherReply(s.rounds, round)
	s.rounds++
	for _, c := range s.conns {
		if !c.left {
			c.send(frameGather, reply)
		}
	}
}

// announceHostLeftLocked tells the ranks still here, once every rank of the
// server's own process has left, that the server may vanish with that
// process: ranks of other processes then read a closed connection as the end
// of the run, not as a dead peer. s.mu must be held.
func (s *server) announceHostLeftLocked() {
	pid := os.Getpid()
	for _, c := range s.conns {
		if c != nil && c.info.Pid == pid && !c.left {
			return
		}
	}
	for _, c := range s.conns {
		if c != nil && !c.left && c.info.Pid != pid {
			c.send(frameHostLeft, nil)
		}
	}
}

// drop handles a rank whose connection ended without a bye (cause): its
// process died, or it aborted.
func (s *server) drop(sc *serverConn, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(sc, cause)
}

// dropLocked handles a rank that left without a bye: its connection ended
// (cause) or it said frameAbort (cause nil). Every rank still here is told,
// so its waits on that rank end early; the others stay connected, so a
// later departure is told too. s.mu must be held.
func (s *server) dropLocked(sc *serverConn, cause error) {
	sc.conn.Close()
	if !s.started {
		if sc.ready {
			// A rank that gave up during init: let another take its place.
			s.conns[sc.info.Rank] = nil
			s.arrived--
		}
		return
	}
	if sc.left {
		return
	}
	sc.left = true
	s.failed = true // no gather round can complete any more
	why := droppedAborted
	if cause != nil {
		why = droppedLost
		config.Warnf("rendezvous %016x: rank %d (pid %d) left without a bye (its connection ended: %v)", s.key.tag(), sc.info.Rank, sc.info.Pid, cause)
	} else {
		config.Warnf("rendezvous %016x: rank %d (pid %d) aborted its communicator", s.key.tag(), sc.info.Rank, sc.info.Pid)
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(sc.info.Rank))
	msg = append(msg, why)
	for _, c := range s.conns {
		if !c.left {
			c.send(frameDropped, msg)
		}
	}
	s.forgetIfDoneLocked()
}

// forgetIfDoneLocked drops the server from localServers once every rank
// has left. s.mu must be held.
func (s *server) forgetIfDoneLocked() {
	if !s.started {
		return
	}
	for _, c := range s.conns {
		if !c.left {
			return
		}
	}
	localServers.Delete(s.key)
}
