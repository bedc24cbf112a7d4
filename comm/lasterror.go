package comm

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The last error, in words, per communicator and per OS thread, for
// GetLastError. Only failures write it, so the success path never pays. A
// thread's text lies in a slot of a fixed table (its id modulo its size)
// with the id that wrote it, so threads that come and go cost nothing, and
// a thread never reads a text another thread left (it reads "" then).
var threadErrors struct {
	sync.Mutex
	slots [256]struct {
		tid  int
		text string
	}
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
	slot := &threadErrors.slots[tid%len(threadErrors.slots)]
	slot.tid, slot.text = tid, text
	threadErrors.Unlock()
	if c != nil {
		c.lastErr.Store(&text)
	}
}

// ThreadLastError is the calling thread's last error text, or "".
func ThreadLastError() string {
	tid := unix.Gettid()
	threadErrors.Lock()
	defer threadErrors.Unlock()
	if slot := &threadErrors.slots[tid%len(threadErrors.slots)]; slot.tid == tid {
		return slot.text
	}
	return ""
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
