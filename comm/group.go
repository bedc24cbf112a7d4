package comm

import (
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"purlin/errs"
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
// progress together and never deadlock one another). As in NCCL, the k-th
// send to a peer matches the peer's k-th receive from this rank however
// either side groups them (snac.Merge). Nothing waits for a peer except
// the inits, which are bounded by the timeout.
type group struct {
	depth int
	inits []deferredInit
	jobs  []func() error // deferred splits
	ops   []groupOp
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
		g = &group{}
		groups.byTid[tid] = g
		groups.open.Add(1)
	}
	g.depth++
	return nil
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
	return g.run()
}

// run executes a closed group: inits and splits concurrently, then launches.
func (g *group) run() error {
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
	first := firstError(errList)
	if err := launchGroupOps(g.ops); first == nil {
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

// launchGroupOps launches each communicator's queued collectives in order,
// then its point-to-point operations merged into one Plan.
//
// A communicator whose operations in the group name several streams runs
// them as NCCL does, as one operation posted on every one of them: the
// operations go to the first stream, after the work queued on the others so
// far, and the others then wait for them (see joinStreams).
func launchGroupOps(ops []groupOp) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	var order []*Comm
	streams := map[*Comm][]uintptr{} // each communicator's streams, in order of first use
	for i := range ops {
		c, s := ops[i].c, ops[i].stream
		if _, seen := streams[c]; !seen {
			order = append(order, c)
		}
		if !slices.Contains(streams[c], s) {
			streams[c] = append(streams[c], s)
		}
	}
	joined, unjoined := map[*Comm]bool{}, map[*Comm]bool{}
	for _, c := range order {
		if len(streams[c]) > 1 && c.usable("GroupEnd") == nil {
			err := c.joinStreams(streams[c][0], streams[c][1:], true)
			keep(err)
			joined[c], unjoined[c] = err == nil, err != nil
		}
	}
	p2p := map[*Comm][]groupOp{}
	for i := range ops {
		op := &ops[i]
		if unjoined[op.c] {
			continue // its streams could not be joined (reported above)
		}
		op.stream = streams[op.c][0]
		if op.call.Coll == spec.SendRecv {
			p2p[op.c] = append(p2p[op.c], *op)
			continue
		}
		if err := op.c.usable(op.call.Coll.String()); err != nil { // its init may have failed at GroupEnd
			keep(err)
			continue
		}
		keep(op.c.launch(&op.call, op.stream))
	}
	for _, c := range order {
		if list := p2p[c]; len(list) > 0 {
			keep(c.launchMerged(list))
		}
		if joined[c] {
			keep(c.joinStreams(streams[c][0], streams[c][1:], false))
		}
	}
	return first
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
