package host

import (
	"fmt"
	"runtime"
	"time"

	"purlin/errs"
)

// Backoff schedule of every wait: spin, then yield, then sleep in growing
// steps. Many ranks' workers may share few cores, so a waiter must get off
// the CPU soon, but the first few polls stay hot for small messages.
const (
	spinPolls  = 64
	yieldPolls = 256
	minSleep   = 1 * time.Microsecond
	maxSleep   = 100 * time.Microsecond
)

// backoff is one wait's state; its zero value starts a wait.
type backoff struct {
	polls    int
	sleep    time.Duration
	deadline time.Time
	lastLook bool // src was seen gone: the condition gets one more look
}

// pause is called each time the awaited condition is still false; src is
// the rank whose write would satisfy it. It returns errs.ErrAborted once
// the rank is aborted (or broken by an earlier error), src's cause once src
// is gone and the condition, looked at once more after that was seen, still
// is false (what src wrote before it went is in memory by then), and
// errs.ErrTimeout past the deadline; what describes the wait.
func (b *backoff) pause(r *Rank, src int, what func() string) error {
	if r.stop.Load() {
		if r.aborted.Load() {
			return errs.New(errs.ErrAborted, "host rank %d: aborted while waiting for %s", r.topo.Rank, what())
		}
		return errs.New(errs.ErrAborted, "host rank %d: gave up waiting for %s after an earlier error", r.topo.Rank, what())
	}
	if cause := r.goneCause(src); cause != nil {
		if b.lastLook {
			return fmt.Errorf("host rank %d: gave up waiting for %s: %w", r.topo.Rank, what(), cause)
		}
		b.lastLook = true
		return nil
	}
	b.polls++
	switch {
	case b.polls < spinPolls:
		return nil
	case b.polls == spinPolls:
		b.deadline = time.Now().Add(r.timeout)
		return nil
	case b.polls < yieldPolls:
		runtime.Gosched()
	default:
		if b.sleep < maxSleep {
			b.sleep = max(minSleep, b.sleep*2)
		}
		time.Sleep(min(b.sleep, maxSleep))
	}
	if time.Now().After(b.deadline) {
		return errs.New(errs.ErrTimeout, "host rank %d: timed out after %v waiting for %s", r.topo.Rank, r.timeout, what())
	}
	return nil
}
