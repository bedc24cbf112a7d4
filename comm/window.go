package comm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"purlin/atom"
	"purlin/errs"
)

// Symmetric windows (ncclCommWindowRegister, NCCL 2.27+). Registration is
// collective: every rank of a communicator registers a buffer of the same
// size, aligned to WindowAlignment (NCCL_WIN_REQUIRED_ALIGNMENT); comm
// checks that through the bootstrap, naming the rank that differs, then
// asks the Atom to make every rank's buffer addressable here (mapWindow).
// The result is an opaque handle from a registry (never a Go pointer); a
// stale or foreign handle is an error, never a crash. The mappings live
// until WindowDeregister or the communicator's Destroy, both local: each
// rank unmaps its own view without waiting for the others, as in NCCL.
//
// Windows registered with WindowCollSymmetric carry collectives of copies
// whose output lies in them straight into every rank's output (direct.go);
// other calls stage through the Atom's symmetric memory.
//
// Groups: inside a group (of the calling OS thread), WindowRegister
// returns the handle at once and the registration runs at the outermost
// GroupEnd, like a deferred init (the communicator may itself be initialised
// in the same group); WindowDeregister is deferred likewise, so it follows
// a registration of the same group. A
// communicator's window operations of one group run in the order issued.
// A failed deferred registration makes GroupEnd fail and its handle dead.
// Do not issue a Split or Shrink of the same communicator in the same group
// as its window operations: both use its bootstrap and their order would differ
// between ranks.

// Window registration flags (NCCL_WIN_*).
const (
	WindowDefault       = 0x00
	WindowCollSymmetric = 0x01
	// WindowAlignment is NCCL_WIN_REQUIRED_ALIGNMENT: a window buffer's
	// address must be a multiple of it.
	WindowAlignment = 4096
)

// window is one registration on one rank.
type window struct {
	handle uintptr
	c      *Comm
	seq    uint64 // the communicator's registration count: equal on every rank
	buff   uintptr
	size   uint64
	flags  int
	ready  chan struct{} // closed when the registration finished, well or not

	mu      sync.Mutex
	err     error       // the registration's outcome; guarded by mu
	view    atom.Window // nil until registered and after release; guarded by mu
	leaving bool        // a deregistration was issued; guarded by mu
}

// windowTag marks window handles so they never look like communicators'.
const windowTag = uintptr(0x57) << 48

var windows struct {
	sync.Mutex
	next  uintptr
	m     map[uintptr]*window // live handles
	seqOf map[*Comm]uint64    // registrations issued per communicator
}

func addWindow(w *window) {
	windows.Lock()
	defer windows.Unlock()
	if windows.m == nil {
		windows.m = map[uintptr]*window{}
		windows.seqOf = map[*Comm]uint64{}
	}
	windows.next++
	w.handle = windowTag | windows.next
	w.seq = windows.seqOf[w.c]
	windows.seqOf[w.c]++
	windows.m[w.handle] = w
}

func dropWindow(w *window) {
	windows.Lock()
	delete(windows.m, w.handle)
	windows.Unlock()
}

// lookupWindow returns c's live window of handle h.
func (c *Comm) lookupWindow(what string, h uintptr) (*window, error) {
	if h == 0 {
		return nil, errs.New(errs.ErrInvalidArgument, "%s: window is NULL", what)
	}
	windows.Lock()
	w := windows.m[h]
	windows.Unlock()
	if w == nil {
		return nil, errs.New(errs.ErrInvalidArgument, "%s: %#x is not a live window (never registered, deregistered, failed, or its communicator was destroyed)", what, h)
	}
	if w.c != c {
		return nil, errs.New(errs.ErrInvalidArgument, "%s: window %#x belongs to communicator %#x, not %#x", what, h, w.c.handle, c.handle)
	}
	return w, nil
}

// WindowRegister registers buff (size bytes) on every rank of c as one
// window and returns its handle. It is collective, and outside a group it
// blocks until every rank called it (bounded by the timeout). Every rank
// fails when any rank's buffer is refused or the sizes differ. A NULL
// buffer or a size of 0 registers nothing and returns handle 0, as in NCCL,
// where every rank does so (where only some do, every rank fails).
func (c *Comm) WindowRegister(buff uintptr, size uint64, flags int) (uintptr, error) {
	g := currentGroup()
	deferredInit := g != nil && c.state.Load() == stateInit && c.deferred.Load()
	if !deferredInit {
		if err := c.usable("CommWindowRegister"); err != nil {
			return 0, err
		}
	}
	w := &window{c: c, buff: buff, size: size, flags: flags, ready: make(chan struct{})}
	addWindow(w)
	handle := w.handle
	if w.empty() {
		handle = 0
	}
	if g != nil {
		queueWindowOp(g, c, w.register)
		return handle, nil
	}
	if err := w.register(); err != nil {
		return 0, err
	}
	return handle, nil
}

// WindowDeregister releases window h on this rank: it unmaps this rank's
// view of the peers' buffers, without waiting for them (every rank
// deregisters its own handle, as in NCCL). The handle is dead afterwards.
// Handle 0 (a registration of nothing) is no window: nothing to do.
func (c *Comm) WindowDeregister(h uintptr) error {
	if h == 0 {
		return nil
	}
	w, err := c.lookupWindow("CommWindowDeregister", h)
	if err != nil {
		return err
	}
	w.mu.Lock()
	leaving := w.leaving
	w.leaving = true
	w.mu.Unlock()
	if leaving {
		return errs.New(errs.ErrInvalidUsage, "CommWindowDeregister: window %#x is already being deregistered", h)
	}
	if g := currentGroup(); g != nil {
		queueWindowOp(g, c, w.deregister)
		return nil
	}
	return w.deregister()
}

// WindowPeers returns every rank's buffer of window h as this rank
// addresses it (device pointers on the CUDA Atom), by rank.
func (c *Comm) WindowPeers(h uintptr) ([]uintptr, error) {
	w, err := c.lookupWindow("CommWindowPeers", h)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.view == nil {
		return nil, errs.New(errs.ErrInvalidUsage, "CommWindowPeers: window %#x is not registered yet (end the group)", h)
	}
	return w.view.Peers(), nil
}

// WindowUserPtr returns the buffer this rank registered as window h.
func (c *Comm) WindowUserPtr(h uintptr) (uintptr, error) {
	w, err := c.lookupWindow("WinGetUserPtr", h)
	if err != nil {
		return 0, err
	}
	return w.buff, nil
}

// releaseWindows drops every window of c, locally (Destroy, Abort): the
// peers' buffers are unmapped from this process, nothing is exchanged.
func (c *Comm) releaseWindows() {
	windows.Lock()
	var mine []*window
	for h, w := range windows.m {
		if w.c == c {
			mine = append(mine, w)
			delete(windows.m, h)
		}
	}
	delete(windows.seqOf, c)
	windows.Unlock()
	for _, w := range mine {
		w.release()
	}
}

// release unmaps w's view, once.
func (w *window) release() error {
	w.mu.Lock()
	view := w.view
	w.view = nil
	if view != nil {
		w.c.dropDirect(w)
	}
	w.mu.Unlock()
	if view == nil {
		return nil
	}
	if err := view.Close(); err != nil {
		return fmt.Errorf("window %#x of communicator %#x: %w", w.handle, w.c.handle, err)
	}
	return nil
}

// finish records the registration's outcome; a failed window's handle dies.
func (w *window) finish(view atom.Window, err error) error {
	w.mu.Lock()
	w.err = err
	live := true
	if err == nil {
		windows.Lock()
		live = windows.m[w.handle] == w // not dropped by a Destroy meanwhile
		windows.Unlock()
		if live {
			w.view = view
			w.c.addDirect(w, view)
		}
	}
	w.mu.Unlock()
	close(w.ready)
	if err != nil {
		dropWindow(w)
	} else if !live {
		view.Close()
		return errs.New(errs.ErrInvalidUsage, "CommWindowRegister: communicator %#x was destroyed during the registration", w.c.handle)
	}
	return err
}

// waitReady waits (bounded) until w's registration finished.
func (w *window) waitReady() error {
	select {
	case <-w.ready:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.err
	case <-time.After(w.c.cfg.timeout() + time.Second):
		return errs.New(errs.ErrTimeout, "window %#x: its registration did not finish within the timeout", w.handle)
	}
}

// windowLE is the byte order of window records.
var windowLE = binary.LittleEndian

// mapWindow asks c's Atom to make every rank's window buffer addressable
// on this rank (atom.WindowMapper, which an Atom implements or not). It is
// collective over c's bootstrap; on failure every rank fails. Across nodes
// the buffers of this rank's node are mapped (nodeWindow).
func mapWindow(c *Comm, buff uintptr, size uint64) (atom.Window, error) {
	if s, across := c.dp.(*spanning); across {
		return mapNodeWindow(c, s, buff, size)
	}
	m, ok := c.dp.(atom.WindowMapper)
	if !ok {
		return nil, errs.New(errs.ErrUnsupported, "CommWindowRegister: the %s Atom has no windows", c.atomName)
	}
	return m.MapWindow(c.boot, buff, size)
}

// nodeWindow is a window of a communicator across nodes: the node's
// communicator maps the buffers of this rank's node, and a buffer on
// another node, which no load or store of this rank reaches, is 0 in Peers.
// Collectives across nodes run as they would without it (NCCL accepts
// windows on any communicator; its symmetric kernels serve one node).
type nodeWindow struct {
	atom.Window
	first, nranks int // the node's first rank, the communicator's ranks
}

func (w nodeWindow) Peers() []uintptr {
	all := make([]uintptr, w.nranks)
	copy(all[w.first:], w.Window.Peers())
	return all
}

// mapNodeWindow maps buff within this rank's node (collective over the
// node's bootstrap), then agrees over every rank's: a node that failed
// fails every rank, and the others close what they mapped.
func mapNodeWindow(c *Comm, s *spanning, buff uintptr, size uint64) (atom.Window, error) {
	l := s.local
	m, ok := l.dp.(atom.WindowMapper)
	if !ok {
		return nil, errs.New(errs.ErrUnsupported, "CommWindowRegister: the %s Atom has no windows", l.atomName)
	}
	view, mine := m.MapWindow(l.boot, buff, size)
	verdict := []byte{0}
	if mine != nil {
		verdict = append([]byte{1}, mine.Error()...)
	}
	all, err := c.boot.AllGather(verdict)
	if err == nil {
		for q, v := range all {
			if len(v) == 0 || v[0] != 0 {
				err = errs.New(errs.ErrRemote, "rank %d could not map its node's window buffers: %s", q, v[min(len(v), 1):])
				break
			}
		}
	}
	switch {
	case mine != nil:
		return nil, mine
	case err != nil:
		view.Close()
		return nil, err
	}
	return nodeWindow{view, s.nodes.Node(c.rank) * s.nodes.Local, c.nranks}, nil
}
