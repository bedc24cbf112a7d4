package comm

import (
	"sync"
	"sync/atomic"

	"purlin/errs"
)

// The registry turns communicators into handles C can hold: a handle is
// (generation << 32 | slot+1), never a Go pointer and never 0. Lookup is
// lock-free (one atomic load), so it costs nothing on the hot path; a
// handle whose slot was freed or reused is recognised as destroyed, and
// any other value as not a communicator, so a bad handle is an error, not a crash.
//
// MaxComms is how many communicators may live at once.
const MaxComms = 1 << 13

var registry struct {
	slots [MaxComms]atomic.Pointer[Comm]
	gens  [MaxComms]uint32 // generation of the slot's last handle; guarded by mu
	mu    sync.Mutex
	next  int // slots [0, next) have been used at least once; guarded by mu
	free  []int
}

func register(c *Comm) error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var slot int
	switch {
	case len(registry.free) > 0:
		slot = registry.free[len(registry.free)-1]
		registry.free = registry.free[:len(registry.free)-1]
	case registry.next < MaxComms:
		slot = registry.next
		registry.next++
	default:
		return errs.New(errs.ErrSystem, "too many live communicators (%d): destroy some", MaxComms)
	}
	registry.gens[slot]++
	c.handle = uintptr(registry.gens[slot])<<32 | uintptr(slot+1)
	registry.slots[slot].Store(c)
	return nil
}

func unregister(c *Comm) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	slot := int(c.handle&0xffffffff) - 1
	if registry.slots[slot].CompareAndSwap(c, nil) {
		registry.free = append(registry.free, slot)
	}
}

// Slot is c's place in the registry, in [0, MaxComms): no other live
// communicator has it.
func (c *Comm) Slot() int { return int(c.handle&0xffffffff) - 1 }

// Lookup returns the live communicator of handle h, or ErrInvalidUsage
// saying whether h was destroyed or never was a communicator.
func Lookup(h uintptr) (*Comm, error) {
	slot := int(h&0xffffffff) - 1
	if slot >= 0 && slot < MaxComms {
		if c := registry.slots[slot].Load(); c != nil && c.handle == h {
			return c, nil
		}
	}
	return nil, lookupError(h)
}

func lookupError(h uintptr) error {
	if h == 0 {
		return errs.New(errs.ErrInvalidArgument, "communicator is NULL")
	}
	slot := int(h&0xffffffff) - 1
	gen := uint32(h >> 32)
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if slot >= 0 && slot < registry.next && gen >= 1 && gen <= registry.gens[slot] {
		return errs.New(errs.ErrInvalidUsage, "communicator %#x was destroyed", h)
	}
	return errs.New(errs.ErrInvalidUsage, "%#x is not a Purlin communicator", h)
}
