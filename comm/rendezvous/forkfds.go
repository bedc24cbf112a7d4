package rendezvous

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// A process that forks without exec (a C program, Python's multiprocessing
// with fork) gives its child a copy of every descriptor, close-on-exec or
// not. Peers learn that a rank's process died from the end of its bootstrap
// sockets; a child that outlives its parent would keep them open, and the
// peers would wait until the timeout. So the bootstrap's sockets (a rank's
// connection and mailbox, the rendezvous' listener and connections) are
// registered with fork hooks: the C shim's fork handler closes, in the child,
// every descriptor registered (Go itself never forks without exec, so pure
// Go installs no hooks).
var forkHooks atomic.Pointer[forkHookFuncs]

type forkHookFuncs struct {
	track, untrack func(fd int)
}

// SetForkHooks installs the functions that register and unregister a
// descriptor to be closed in a forked child (nil: none). A descriptor
// registered is unregistered by the functions current then.
func SetForkHooks(track, untrack func(fd int)) {
	if track == nil || untrack == nil {
		forkHooks.Store(nil)
		return
	}
	forkHooks.Store(&forkHookFuncs{track, untrack})
}

// trackFD registers fd and returns the function that unregisters it, to
// call once, just before fd is closed (a later call could unregister a
// reuse of the number).
func trackFD(fd int) (untrack func()) {
	h := forkHooks.Load()
	if h == nil {
		return func() {}
	}
	h.track(fd)
	return func() { h.untrack(fd) }
}

// trackSyscallConn registers the descriptor of c (a net.Conn or
// net.Listener of the net package; others are not tracked).
func trackSyscallConn(c any) (untrack func()) {
	sc, ok := c.(syscall.Conn)
	if !ok || forkHooks.Load() == nil {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	untrack = func() {}
	raw.Control(func(fd uintptr) { untrack = trackFD(int(fd)) })
	return untrack
}

// trackedConn is a net.Conn whose descriptor a forked child closes; Close
// unregisters it (once) first.
type trackedConn struct {
	net.Conn
	untrack func()
}

func trackConn(c net.Conn) net.Conn {
	return &trackedConn{Conn: c, untrack: sync.OnceFunc(trackSyscallConn(c))}
}

func (c *trackedConn) Close() error {
	c.untrack()
	return c.Conn.Close()
}

// trackedListener is a net.Listener whose descriptor a forked child
// closes; Close unregisters it (once) first. Accepted connections are
// tracked too.
type trackedListener struct {
	net.Listener
	untrack func()
}

func trackListener(ln net.Listener) net.Listener {
	return &trackedListener{Listener: ln, untrack: sync.OnceFunc(trackSyscallConn(ln))}
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return trackConn(c), nil
}

func (l *trackedListener) Close() error {
	l.untrack()
	return l.Listener.Close()
}
