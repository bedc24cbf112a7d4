package host

import (
	"sync"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// job is one launched Plan with its own copy of the caller's buffers. Jobs
// are pooled and a single call's buffers live in the job itself, so a
// Launch on the hot path allocates nothing.
type job struct {
	rank *Rank
	plan *snac.Plan
	seq  uint64 // the rank's Plans launched before this one
	bufs []atom.Buffers
	one  [1]atom.Buffers // bufs' storage when the Plan serves one call
	// after, when set, makes the job a wait instead of a Plan (Rank.Follow):
	// it ends once after has finished its first upto jobs.
	after *stream
	upto  uint64
	// fn, when set, makes the job a host function (Rank.Enqueue).
	fn func() error
}

var jobPool = sync.Pool{New: func() any { return new(job) }}

// newJob takes a job from the pool holding a copy of bufs (Launch does not
// retain the caller's list).
func newJob(r *Rank, plan *snac.Plan, bufs []atom.Buffers, seq uint64) *job {
	j := jobPool.Get().(*job)
	j.rank, j.plan, j.seq = r, plan, seq
	if len(bufs) <= len(j.one) {
		j.bufs = append(j.one[:0], bufs...)
	} else {
		j.bufs = append([]atom.Buffers(nil), bufs...)
	}
	return j
}

// release returns a finished job to the pool; nothing may use it afterwards.
func (j *job) release() {
	*j = job{}
	jobPool.Put(j)
}

// stream is an in-order queue of jobs served by one goroutine. The queue is
// unbounded: Launch never waits.
//
// As with NCCL, one rank's Plans also run one at a time in the order they
// were launched, whatever streams they were launched on: a job first waits
// for its rank's earlier jobs on other streams (awaitTurn), as a CUDA
// stream waits on an event. Every rank of a communicator then runs the same
// sequence of calls however it spreads them over streams. Neither wait can
// close a cycle: a rank's jobs enter their streams in launch order (under
// the rank's lock), so every job waits only for jobs enqueued before it.
type stream struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled on enqueue, on job completion and on destroy
	queue   []*job     // guarded by mu
	busy    bool       // a job is running; guarded by mu
	failed  error      // the first error of a job on this stream; guarded by mu
	destroy bool       // guarded by mu
	// enqueued and done count the jobs queued and finished so far (Follow's
	// waits name a point of this stream by them); guarded by mu.
	enqueued, done uint64
}

var registry struct {
	mu      sync.Mutex
	next    uintptr
	streams map[uintptr]*stream // guarded by mu
}

// NewStream creates a stream and returns its handle, a small non-zero
// integer (never a Go pointer), valid until DestroyStream.
func NewStream() uintptr {
	s := &stream{}
	s.cond = sync.NewCond(&s.mu)
	registry.mu.Lock()
	if registry.streams == nil {
		registry.streams = map[uintptr]*stream{}
	}
	registry.next++
	h := registry.next
	registry.streams[h] = s
	registry.mu.Unlock()
	go s.serve()
	return h
}

func lookupStream(h uintptr) *stream {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.streams[h]
}

// SynchronizeStream waits until all work queued on stream h has finished
// and returns the first error of a Plan run on it.
func SynchronizeStream(h uintptr) error {
	s := lookupStream(h)
	if s == nil {
		return errs.New(errs.ErrInvalidArgument, "host.SynchronizeStream: unknown stream %d", h)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 || s.busy {
		s.cond.Wait()
	}
	return s.failed
}

// DestroyStream forgets stream h; work already queued still runs.
func DestroyStream(h uintptr) error {
	registry.mu.Lock()
	s := registry.streams[h]
	delete(registry.streams, h)
	registry.mu.Unlock()
	if s == nil {
		return errs.New(errs.ErrInvalidArgument, "host.DestroyStream: unknown stream %d", h)
	}
	s.mu.Lock()
	s.destroy = true
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

func (s *stream) enqueue(j *job) {
	s.mu.Lock()
	s.queue = append(s.queue, j)
	s.enqueued++
	s.cond.Broadcast()
	s.mu.Unlock()
}

// point is how many jobs s has been given so far: a wait for s's work up to
// now waits until s has finished that many.
func (s *stream) point() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueued
}

// reach waits until s has finished its first n jobs.
func (s *stream) reach(n uint64) {
	s.mu.Lock()
	for s.done < n {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// serve runs the jobs in order until the stream is destroyed and drained.
func (s *stream) serve() {
	s.mu.Lock()
	for {
		for len(s.queue) == 0 && !s.destroy {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		j := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.busy = true
		s.mu.Unlock()

		var err error
		switch {
		case j.fn != nil:
			err = j.fn()
			j.rank.fnDone()
		case j.after != nil:
			j.after.reach(j.upto)
		default:
			j.rank.awaitTurn(j.seq)
			err = j.rank.run(j.plan, j.bufs)
			j.rank.finished()
		}
		j.release()

		s.mu.Lock()
		if err != nil && s.failed == nil {
			s.failed = err
		}
		s.busy = false
		s.done++
		s.cond.Broadcast()
	}
}

// awaitTurn waits until the seq Plans r launched before this one have
// finished (bounded: each is bounded by its own waits).
func (r *Rank) awaitTurn(seq uint64) {
	if r.ran.Load() == seq {
		return
	}
	r.mu.Lock()
	for r.ran.Load() < seq {
		r.idle.Wait()
	}
	r.mu.Unlock()
}
