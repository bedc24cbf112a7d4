package host

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
)

// Rank is one rank's host datapath, bound to its shared state and its
// mappings of every peer's. It implements atom.Rank. Its methods are safe
// for concurrent use.
type Rank struct {
	topo    snac.Topology
	layout  layout
	syms    []*symmetric // by rank; syms[topo.Rank] is this rank's own. Immutable until Close.
	timeout time.Duration
	stream  uintptr // the default stream (Launch's stream 0)
	side    uintptr // SideStream's, made on first use; guarded by mu

	stop    atomic.Bool // every wait gives up: set by Abort and by the first error
	aborted atomic.Bool
	gone    atomic.Uint32                        // bit q: rank q's process is gone (PeerGone)
	causes  [snac.MaxRanks]atomic.Pointer[error] // why rank q is gone; set before its bit

	replays [keptReplays]uint64 // ids of Replay's latest records; guarded by replays' mutex

	mu       sync.Mutex
	idle     *sync.Cond // signalled when a launched Plan finishes
	inflight int        // launched Plans not finished; guarded by mu
	asyncErr error      // the first error; guarded by mu
	closed   bool       // guarded by mu

	// The rank's Plans run one at a time in launch order (see awaitTurn).
	launched uint64        // Plans launched so far; guarded by mu
	ran      atomic.Uint64 // Plans finished so far; written under mu
}

var _ atom.Rank = (*Rank)(nil)

// NewRank sets up this rank's shared state and maps every rank's. All ranks
// of ex must call it together with equal topologies (but for Rank).
func NewRank(topo snac.Topology, ex atom.Exchange, opts atom.Options) (*Rank, error) {
	if topo.NRanks != ex.NRanks() || topo.Rank != ex.Rank() || topo.NRanks < 1 || topo.NRanks > snac.MaxRanks {
		return nil, errs.New(errs.ErrInvalidArgument, "host.NewRank: topology rank %d of %d, exchange rank %d of %d",
			topo.Rank, topo.NRanks, ex.Rank(), ex.NRanks())
	}
	r := &Rank{topo: topo, layout: newLayout(topo), timeout: time.Duration(opts.TimeoutNanos)}
	if r.timeout <= 0 {
		r.timeout = config.Get().Timeout
	}
	r.idle = sync.NewCond(&r.mu)
	fd, err := createSymmetric(topo.Rank, r.layout)
	if err != nil {
		return nil, fmt.Errorf("host.NewRank: %w", err)
	}
	defer unix.Close(fd) // the mappings keep the memory
	fds, err := ex.AllGatherFD(fd)
	if err != nil {
		return nil, fmt.Errorf("host.NewRank rank %d: exchanging symmetric memory: %w", topo.Rank, err)
	}
	r.syms = make([]*symmetric, topo.NRanks)
	for q, qfd := range fds {
		if err == nil {
			r.syms[q], err = mapSymmetric(qfd, r.layout, q)
		}
		unix.Close(qfd)
	}
	if err != nil {
		r.unmapAll()
		return nil, fmt.Errorf("host.NewRank rank %d: %w", topo.Rank, err)
	}
	r.stream = NewStream()
	return r, nil
}

// Launch enqueues plan on stream (0: the rank's default stream) and returns
// at once. A rank broken by an earlier error refuses with that error.
func (r *Rank) Launch(plan *snac.Plan, bufs []atom.Buffers, stream uintptr) error {
	if plan == nil || len(plan.Workers) > snac.MaxWorkers || plan.NRanks != r.topo.NRanks && len(plan.Workers) > 0 {
		return errs.New(errs.ErrInternal, "host rank %d: Launch of an invalid plan", r.topo.Rank)
	}
	s := r.lookupStream(stream)
	if s == nil {
		return errs.New(errs.ErrInvalidArgument, "host rank %d: Launch on unknown stream %d", r.topo.Rank, stream)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errs.New(errs.ErrInvalidUsage, "host rank %d: Launch after Close", r.topo.Rank)
	}
	if r.asyncErr != nil {
		err := r.asyncErr
		r.mu.Unlock()
		return err
	}
	r.inflight++
	j := newJob(r, plan, bufs, r.launched)
	r.launched++
	s.enqueue(j) // under mu: this rank's jobs reach their streams in launch order
	r.mu.Unlock()
	return nil
}

// Enqueue runs f on stream after the work enqueued on it so far, as CUDA
// runs a host function in stream order (cuLaunchHostFunc); the work
// enqueued after it waits for it. An error f returns is the stream's
// (SynchronizeStream). A multi-node communicator runs its network phases
// on the host Atom's streams this way.
func (r *Rank) Enqueue(stream uintptr, f func() error) error {
	s := r.lookupStream(stream)
	if s == nil {
		return errs.New(errs.ErrInvalidArgument, "host rank %d: Enqueue on unknown stream %d", r.topo.Rank, stream)
	}
	j := jobPool.Get().(*job)
	j.rank, j.fn = r, f
	r.mu.Lock()
	r.inflight++ // Synchronize waits for it as for a Plan
	s.enqueue(j)
	r.mu.Unlock()
	return nil
}

// fnDone ends a function's turn in inflight (a function takes no turn in
// the rank's order of Plans).
func (r *Rank) fnDone() {
	r.mu.Lock()
	r.inflight--
	r.idle.Broadcast()
	r.mu.Unlock()
}

// Follow makes the work enqueued on stream from now on wait for the work
// enqueued on after so far: a job on stream that waits for after to finish
// it, as a CUDA stream waits on an event recorded on after.
func (r *Rank) Follow(stream, after uintptr) error {
	s, a := r.lookupStream(stream), r.lookupStream(after)
	if s == nil || a == nil {
		return errs.New(errs.ErrInvalidArgument, "host rank %d: Follow on unknown stream %d or %d", r.topo.Rank, stream, after)
	}
	if s == a {
		return nil
	}
	j := jobPool.Get().(*job)
	j.after, j.upto = a, a.point()
	s.enqueue(j)
	return nil
}

// lookupStream is stream h, the rank's own for 0 (as CUDA's legacy
// stream), or nil.
func (r *Rank) lookupStream(h uintptr) *stream {
	if h == 0 {
		h = r.stream
	}
	return lookupStream(h)
}

// AsyncError returns the first error of a launched Plan, or nil.
func (r *Rank) AsyncError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asyncErr
}

// fail records err as the rank's first error and stops its waits.
func (r *Rank) fail(err error) {
	r.mu.Lock()
	if r.asyncErr == nil {
		r.asyncErr = err
	}
	r.mu.Unlock()
	r.stop.Store(true)
}

// finished marks one launched Plan done.
func (r *Rank) finished() {
	r.mu.Lock()
	r.inflight--
	r.ran.Add(1)
	r.idle.Broadcast()
	r.mu.Unlock()
}

// Synchronize waits until every Plan this rank launched, on any stream, has
// finished, and returns the rank's first error. It is bounded by the waits
// inside the Plans.
func (r *Rank) Synchronize() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.inflight > 0 {
		r.idle.Wait()
	}
	return r.asyncErr
}

// Abort makes every wait of this rank's running and future Plans fail with
// errs.ErrAborted, promptly. It is safe from any goroutine.
func (r *Rank) Abort() {
	r.aborted.Store(true) // before fail raises stop, so waits report the abort
	r.fail(errs.New(errs.ErrAborted, "host rank %d: aborted", r.topo.Rank))
}

// PeerGone makes waits on what rank peer writes (every other rank for peer
// -1) fail with cause once memory does not satisfy them; see atom.Rank.
func (r *Rank) PeerGone(peer int, cause error) {
	var bits uint32
	for q := range r.topo.NRanks {
		if q != r.topo.Rank && (peer < 0 || peer == q) {
			r.causes[q].CompareAndSwap(nil, &cause)
			bits |= 1 << q
		}
	}
	r.gone.Or(bits)
}

// goneCause returns why rank q is gone, or nil while it is not.
func (r *Rank) goneCause(q int) error {
	if q < 0 || q >= snac.MaxRanks || r.gone.Load()&(1<<q) == 0 {
		return nil
	}
	return *r.causes[q].Load()
}

// Close waits for the rank's launched work (bounded by its waits; Abort
// first to cut it short), then unmaps its memory and destroys its default
// stream. Later Launches fail.
func (r *Rank) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.forgetReplays()
	for r.inflight > 0 {
		r.idle.Wait()
	}
	side := r.side
	r.mu.Unlock()
	err := DestroyStream(r.stream)
	if side != 0 {
		err = errors.Join(err, DestroyStream(side))
	}
	return errors.Join(err, r.unmapAll())
}

// SideStream is a stream of the rank's own beside the caller's, made on
// first use and kept until Close: comm runs a Program's network phases
// there, so that they overlap the node's (Follow orders the two).
func (r *Rank) SideStream() (uintptr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errs.New(errs.ErrInvalidUsage, "host rank %d: SideStream after Close", r.topo.Rank)
	}
	if r.side == 0 {
		r.side = NewStream()
	}
	return r.side, nil
}

func (r *Rank) unmapAll() error {
	var all error
	for q, s := range r.syms {
		if err := s.unmap(); err != nil {
			all = errors.Join(all, errs.New(errs.ErrSystem, "host rank %d: munmap symmetric memory of rank %d: %v", r.topo.Rank, q, err))
		}
	}
	return all
}
