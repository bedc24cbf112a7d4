package comm

import (
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// Groups are per OS thread, as NCCL's are: a C caller's thread is the
// thread a cgo export runs on, and a Go caller must hold its goroutine on
// one thread (runtime.LockOSThread) between GroupStart and GroupEnd.
// Groups nest; only the outermost GroupEnd acts.
//
// Inside a group, InitRank and Split return at once and collectives are
// queued; the outermost GroupEnd runs every deferred init and split
// concurrently, waits for them, then launches each communicator's queued
// work: its collectives in the order issued, then all its point-to-point
// operations merged into one Plan (so sends and receives of the group
// progress together and never deadlock one another; more than one launch
// holds go in rounds, see snac.SplitP2P). As in NCCL, the k-th
// send to a peer matches the peer's k-th receive from this rank however
// either side groups them (snac.Merge). Nothing waits for a peer except
// the inits, which are bounded by the timeout.
type group struct {
	depth  int
	failed error // the first call the group refused (FailGroup)
	inits  []deferredInit
	jobs   []func() error // deferred splits
	ops    []groupOp
	// Scratch of GroupEnd's launches, kept with the group: a closed group
	// goes back to groupPool, so a thread's groups allocate nothing once
	// warm (the collector's pauses would land on the calling thread).
	order      []*Comm
	mine       []groupOp
	colls, p2p []groupOp
	merged     []groupOp
	launches   []int // launchP2P: each operation's launch
	streams    []uintptr
	plans      []*snac.Plan
	bufs       []atom.Buffers
}

var groupPool = sync.Pool{New: func() any { return new(group) }}

// release returns a closed group to groupPool, its slices emptied (their
// arrays kept) and cleared of references.
func (g *group) release() {
	*g = group{inits: emptied(g.inits), jobs: emptied(g.jobs), ops: emptied(g.ops), order: emptied(g.order),
		mine: emptied(g.mine), colls: emptied(g.colls), p2p: emptied(g.p2p), merged: emptied(g.merged),
		launches: g.launches[:0], streams: g.streams[:0], plans: emptied(g.plans), bufs: g.bufs[:0]}
	groupPool.Put(g)
}

// emptied returns s with no elements and none of the references it held.
func emptied[T any](s []T) []T {
	clear(s)
	return s[:0]
}

type deferredInit struct {
	c  *Comm
	id UniqueID
}

type groupOp struct {
	c      *Comm
	call   spec.Call
	stream uintptr
}

var groups struct {
	open  atomic.Int32 // number of threads inside a group: 0 skips the lookup
	mu    sync.Mutex
	byTid map[int]*group
}

// currentGroup returns the calling thread's open group, or nil. With no
// group open anywhere it is one atomic load.
func currentGroup() *group {
	if groups.open.Load() == 0 {
		return nil
	}
	tid := unix.Gettid()
	groups.mu.Lock()
	defer groups.mu.Unlock()
	return groups.byTid[tid]
}

// GroupStart opens (or nests) the calling thread's group.
func GroupStart() error {
	tid := unix.Gettid()
	groups.mu.Lock()
	defer groups.mu.Unlock()
	if groups.byTid == nil {
		groups.byTid = map[int]*group{}
	}
	g := groups.byTid[tid]
	if g == nil {
		g = groupPool.Get().(*group)
		groups.byTid[tid] = g
		groups.open.Add(1)
	}
	g.depth++
	return nil
}

// FailGroup fails the calling thread's open group, if any, with err: a
// call made in it was refused (a bad argument, a bad communicator). As in
// NCCL, the outermost GroupEnd then launches none of the group's
// operations, on any communicator, and returns the first such error; its
// deferred inits and splits still run, since other ranks wait for them.
func FailGroup(err error) {
	if g := currentGroup(); g != nil {
		g.fail(err)
	}
}

// CancelGroup cancels the calling thread's open group, if any: its
// outermost end launches none of its calls and, unless a call failed the
// group (FailGroup), returns nil. A thread whose code stopped midway
// through a group (an exception) cancels it, so that it does not launch a
// part of what its peers launch whole.
func CancelGroup() { FailGroup(errGroupCancelled) }

var errGroupCancelled = errs.New(errs.ErrInvalidUsage, "the group was cancelled: none of its calls was launched")

func (g *group) fail(err error) {
	if g.failed == nil {
		g.failed = err
	}
}

// GroupEnd closes the calling thread's innermost group; the outermost one
// runs what the group deferred and returns its first error.
func GroupEnd() error {
	tid := unix.Gettid()
	groups.mu.Lock()
	g := groups.byTid[tid]
	if g == nil {
		groups.mu.Unlock()
		return errs.New(errs.ErrInvalidUsage, "GroupEnd without GroupStart on this thread")
	}
	g.depth--
	if g.depth > 0 {
		groups.mu.Unlock()
		return nil
	}
	delete(groups.byTid, tid)
	groups.open.Add(-1)
	groups.mu.Unlock()
	err := g.run()
	g.release()
	if err == errGroupCancelled {
		return nil
	}
	return err
}

// run executes a closed group: inits and splits concurrently, then
// launches, unless a call failed the group.
func (g *group) run() error {
	if len(g.inits)+len(g.jobs) == 0 {
		if g.failed != nil {
			return g.failed
		}
		return g.launch()
	}
	var wg sync.WaitGroup
	errList := make([]error, len(g.inits)+len(g.jobs))
	for i, d := range g.inits {
		if d.c.state.Load() != stateInit { // destroyed or aborted inside the group
			continue
		}
		wg.Go(func() {
			d.c.deferred.Store(false)
			if err := d.c.init(d.id); err != nil {
				errList[i] = err
			}
		})
	}
	for i, job := range g.jobs {
		wg.Go(func() { errList[len(g.inits)+i] = job() })
	}
	wg.Wait()
	if g.failed != nil {
		return g.failed
	}
	first := firstError(errList)
	if err := g.launch(); first == nil {
		first = err
	}
	return first
}

func firstError(list []error) error {
	for _, err := range list {
		if err != nil {
			return err
		}
	}
	return nil
}

// launch launches each communicator's operations of the group, in the order
// the communicators first appear, and returns the first error.
//
// A communicator's point-to-point operations run in one Plan together with
// its first run of collectives of one type and op that fits one launch with
// them (snac.Merge: side by side on their channels), so a send does not wait
// for such a collective of its own group:
// a peer that posts the matching receive before that collective, outside any
// group, is served, as NCCL serves it. Its other collectives follow, each run
// of one type and op as one Plan. Where a merge would pass the limits of one
// launch, the collectives go one by one and the point-to-point operations
// last, in rounds (snac.SplitP2P).
//
// A communicator whose operations name several streams runs them as NCCL
// does, as one operation posted on every one of them: they go to the first
// stream, after the work queued on the others so far, and the others then
// wait for them (see joinStreams).
func (g *group) launch() error {
	for _, op := range g.ops {
		if !slices.Contains(g.order, op.c) {
			g.order = append(g.order, op.c)
		}
	}
	var first error
	for _, c := range g.order {
		g.mine = g.mine[:0]
		for _, op := range g.ops {
			if op.c == c {
				g.mine = append(g.mine, op)
			}
		}
		if err := g.launchFor(c); first == nil {
			first = err
		}
	}
	return first
}

// launchFor launches communicator c's operations of the group (g.mine, see
// launch), on the first stream they name, joined with the others.
func (g *group) launchFor(c *Comm) error {
	g.streams = g.streams[:0]
	for _, op := range g.mine {
		if !slices.Contains(g.streams, op.stream) {
			g.streams = append(g.streams, op.stream)
		}
	}
	if err := c.usable("GroupEnd"); err != nil { // its init may have failed at GroupEnd
		return err
	}
	stream, others := g.streams[0], g.streams[1:]
	if len(others) > 0 {
		if err := c.joinStreams(stream, others, true); err != nil {
			return err
		}
	}
	if s, ok := c.dp.(*spanning); ok {
		err := s.runGroup(g.mine, stream)
		if len(others) > 0 && err == nil {
			err = c.joinStreams(stream, others, false)
		}
		return err
	}
	g.colls, g.p2p = g.colls[:0], g.p2p[:0]
	for _, op := range g.mine {
		if op.call.Coll == spec.SendRecv {
			g.p2p = append(g.p2p, op)
		} else {
			g.colls = append(g.colls, op)
		}
	}
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	colls, p2p := g.colls, g.p2p
	for len(colls) > 0 {
		n := 1 // the run of collectives of one type and op
		for n < len(colls) && mergedAlike(&colls[0].call, &colls[n].call) {
			n++
		}
		run := colls[:n:n]
		colls = colls[n:]
		if len(p2p) > 0 {
			g.merged = append(append(g.merged[:0], run...), p2p...)
			if launched, err := g.launchMerged(c, g.merged, stream); launched {
				note(err)
				p2p = nil
				continue
			}
		}
		if len(run) > 1 {
			if launched, err := g.launchMerged(c, run, stream); launched {
				note(err)
				continue
			}
		}
		for i := range run {
			note(c.launch(&run[i].call, stream))
		}
	}
	if len(p2p) > 0 {
		note(g.launchP2P(c, p2p, stream))
	}
	if len(others) > 0 {
		note(c.joinStreams(stream, others, false))
	}
	return first
}

// A round of sends and receives (snac.SplitP2P) fits one launch.
var _ = [1]struct{}{}[max(0, 2*snac.MaxRanks-atom.MaxBuffers)]

// launchP2P launches a group's sends and receives on c (p2p, in the order
// they were made): as one Plan where they fit one launch, else in the
// launches of snac.SplitP2P, each one's operations in the order they were
// made. A launch's error stops the ones after it.
func (g *group) launchP2P(c *Comm, p2p []groupOp, stream uintptr) error {
	if len(p2p) <= atom.MaxBuffers {
		_, err := g.launchMerged(c, p2p, stream)
		return err
	}
	g.launches = slices.Grow(g.launches[:0], len(p2p))[:len(p2p)]
	n, err := snac.SplitP2P(g.launches, atom.MaxBuffers, func(i int) *spec.Call { return &p2p[i].call })
	if err != nil {
		return err
	}
	for l := range n {
		g.merged = g.merged[:0]
		for i, k := range g.launches {
			if k == l {
				g.merged = append(g.merged, p2p[i])
			}
		}
		if _, err := g.launchMerged(c, g.merged, stream); err != nil {
			return err
		}
	}
	return nil
}

// joinStreams orders a group's streams around its operations on first:
// before them (before), first waits for the work queued on each of others
// so far; after them, each of others waits for first.
func (c *Comm) joinStreams(first uintptr, others []uintptr, before bool) error {
	for _, s := range others {
		var err error
		if before {
			err = c.dp.Follow(first, s)
		} else {
			err = c.dp.Follow(s, first)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
