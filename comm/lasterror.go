package comm

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The last error, in words, per communicator and per OS thread, for
// GetLastError. Only failures write it, so the success path never pays.
var threadErrors struct {
	sync.Mutex
	byTid map[int]string
}

// NoteError records err as the last error of the calling thread and, when
// c is not nil, of c. A nil err records nothing.
func NoteError(c *Comm, err error) {
	if err == nil {
		return
	}
	text := err.Error()
	tid := unix.Gettid()
	threadErrors.Lock()
	if threadErrors.byTid == nil {
		threadErrors.byTid = map[int]string{}
	}
	threadErrors.byTid[tid] = text
	threadErrors.Unlock()
	if c != nil {
		c.lastErr.Store(&text)
	}
}

// ThreadLastError is the calling thread's last error text, or "".
func ThreadLastError() string {
	threadErrors.Lock()
	defer threadErrors.Unlock()
	return threadErrors.byTid[unix.Gettid()]
}

// LastError is c's last error text: the last failed call on it, else its
// asynchronous error, else "".
func (c *Comm) LastError() string {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	if e := c.asyncErr.Load(); e != nil {
		return (*e).Error()
	}
	return ""
}
