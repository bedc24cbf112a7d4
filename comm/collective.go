package comm

import (
	"sync"
	"unsafe"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// Collective issues call on c, to run on stream (0: the communicator's own
// queue on the host Atom). The caller fills Coll, buffers, counts, Type,
// Root/Peer/IsSend and Op; Collective writes c's Rank and NRanks into call,
// and the resolved Op of a custom op handle (see RedOpCreatePreMulSum).
// Outside a group it validates, gets the Plan from the cache and launches
// it, never waiting for a peer; inside a group the call is validated and
// queued for GroupEnd, and a call that fails fails the group (FailGroup).
// call is not retained.
func (c *Comm) Collective(call *spec.Call, stream uintptr) error {
	err := c.usableForCall(call)
	if err == nil {
		err = c.Prepare(call)
	}
	g := currentGroup()
	switch {
	case err != nil:
		if g != nil {
			g.fail(err)
		}
		return err
	case g != nil:
		g.ops = append(g.ops, groupOp{c: c, call: cloneCall(call), stream: stream})
		return nil
	}
	return c.launch(call, stream)
}

// Prepare makes call c's and checks it, as Collective does before it
// queues or launches it: c's Rank and NRanks, the resolved Op of a custom
// op handle, then spec.Call.Validate.
func (c *Comm) Prepare(call *spec.Call) error {
	call.Rank, call.NRanks = c.rank, c.nranks
	if call.Coll.Reduces() {
		if err := c.resolveOp(&call.Op, call.Type); err != nil {
			return err
		}
	}
	if err := call.Validate(); err != nil {
		return err
	}
	if c.deviceMemory != nil {
		return c.hostReachable(call)
	}
	return nil
}

// hostReachable refuses a call of a communicator on the host Atom beside a
// usable GPU (deviceMemoryCheck) whose buffers lie in device memory: the
// Atom's threads would fault on them.
func (c *Comm) hostReachable(call *spec.Call) error {
	e := &call.Epilogue
	for _, b := range [...]struct {
		name string
		p    uintptr
	}{{"sendbuff", call.Send}, {"recvbuff", call.Recv}, {"residual", e.Residual}, {"weight", e.Weight}, {"quant", e.Quant}, {"scales", e.Scales}} {
		if b.p != 0 && c.deviceMemory(b.p) {
			return errs.New(errs.ErrInvalidArgument, "%s rank %d: %s %#x is device memory, and this communicator runs on the host Atom "+
				"(PURLIN_ATOM=host), which reads buffers on the CPU: use host memory, or the CUDA Atom (PURLIN_ATOM=auto or cuda)",
				call.Coll, c.rank, b.name, b.p)
		}
	}
	return nil
}

// Ready reports whether c has finished its init and is neither finalized
// nor destroyed: it takes calls outside a group.
func (c *Comm) Ready() bool { return c.state.Load() == stateReady }

// usableForCall accepts a ready communicator, and one whose init is
// deferred to the calling thread's group (its work is queued behind it).
func (c *Comm) usableForCall(call *spec.Call) error {
	if c.state.Load() == stateInit && c.deferred.Load() && c.nranks > 0 {
		if currentGroup() != nil {
			return nil
		}
	}
	return c.usable(call.Coll.String())
}

// bufsPool holds the one-entry buffer lists Launch takes, so the hot path
// allocates nothing (Launch does not retain them).
var bufsPool = sync.Pool{New: func() any { return new([1]atom.Buffers) }}

// launch plans and launches one validated call; the caller has checked
// that c is usable (Collective, or GroupEnd after the deferred inits).
func (c *Comm) launch(call *spec.Call, stream uintptr) error {
	if s, ok := c.dp.(*spanning); ok {
		return s.run(call, stream)
	}
	bufs := bufsPool.Get().(*[1]atom.Buffers)
	bufs[0] = buffersOf(call)
	plan, err := c.plans.get(call, c.directOf(call, &bufs[0]))
	if err == nil {
		err = c.dp.Launch(plan, bufs[:], stream)
	}
	bufsPool.Put(bufs)
	return err
}

// Replay records the launch of calls on stream, which Prepare has checked
// (and Collective may have launched), for C to issue with other input and
// output buffers (atom.Replayer): the C API's call cache. calls is one
// call, or a group's calls on c in the order they were made that the group
// launches as one Plan (launchFor): sends and receives alone, or
// collectives of one type and op alone; buffer pair i of the record is
// call i's. n is 0 where there is no record: the datapath
// records none (the host Atom's only for tests, and never beside a usable
// GPU, where each call's buffers are checked; a communicator across nodes
// never), or a call is not one buffer pair of a Plan cached for its
// shape (an epilogue's buffers, the V forms' counts, a user's op, whose
// scalar its handle may come to name anew).
func (c *Comm) Replay(calls []spec.Call, stream uintptr, rec unsafe.Pointer, size int) (n int, issue uintptr) {
	r, ok := c.dp.(atom.Replayer)
	if !ok || !c.Ready() || len(calls) == 0 || len(calls) > atom.MaxBuffers || c.deviceMemory != nil {
		return 0, 0
	}
	var plans [atom.MaxBuffers]*snac.Plan
	for i := range calls {
		call := &calls[i]
		if call.Epilogue.Kind != 0 || call.Coll.Vectored() || call.Op.Kind >= spec.NumOps || !mergedAlike(&calls[0], call) {
			return 0, 0
		}
		var err error
		if plans[i], err = c.plans.get(call, false); err != nil {
			return 0, 0
		}
	}
	plan := plans[0]
	if len(calls) > 1 {
		var err error
		if plan, err = c.plans.merge(plans[:len(calls)]); err != nil {
			return 0, 0
		}
	}
	return r.Replay(plan, stream, rec, size)
}

// mergedAlike reports whether call goes in one Plan with first when a
// group's calls on a communicator are both alone (launchFor): both are
// sends or receives, or both collectives of one type and op.
func mergedAlike(first, call *spec.Call) bool {
	if (first.Coll == spec.SendRecv) != (call.Coll == spec.SendRecv) {
		return false
	}
	return call.Coll == spec.SendRecv || call.Type == first.Type && call.Op == first.Op
}

// buffersOf is the memory call's Plan addresses.
func buffersOf(call *spec.Call) atom.Buffers {
	e := &call.Epilogue
	return atom.Buffers{Send: call.Send, Recv: call.Recv, Residual: e.Residual, Weight: e.Weight, Quant: e.Quant, Scales: e.Scales}
}

// launchMerged builds the Plans of a group's operations on c, merges them
// into one (buffer i is operation i's) and launches it on stream. A merge
// past the limits of one launch (atom.MaxBuffers calls, snac.Merge's
// workers) launches nothing and returns its error, and launched false: the
// caller may launch the operations another way. Once the datapath's Launch
// was called, launched is true whatever it returned, since a Launch that
// failed may have issued part of the Plan, and launching its calls again
// would run them twice. The lists it passes on are the group's own
// (Merge's cache copies the Plans, Launch does not retain the buffers).
func (g *group) launchMerged(c *Comm, ops []groupOp, stream uintptr) (launched bool, err error) {
	if err := c.usable(ops[0].call.Coll.String()); err != nil {
		return false, err
	}
	if len(ops) == 1 {
		return true, c.launch(&ops[0].call, stream)
	}
	if len(ops) > atom.MaxBuffers {
		return false, errs.New(errs.ErrUnsupported, "GroupEnd: %d operations of rank %d in one launch, at most %d", len(ops), c.rank, atom.MaxBuffers)
	}
	g.plans, g.bufs = g.plans[:0], g.bufs[:0]
	for i := range ops {
		// A call into a symmetric window pushes into the outputs merged
		// or not (snac.Merge), so every rank plans it alike however it
		// grouped its calls.
		b := buffersOf(&ops[i].call)
		p, err := c.plans.get(&ops[i].call, c.directOf(&ops[i].call, &b))
		if err != nil {
			return false, err
		}
		g.plans = append(g.plans, p)
		g.bufs = append(g.bufs, b)
	}
	merged, err := c.plans.merge(g.plans)
	if err != nil {
		return false, errs.New(errs.ErrInternal, "GroupEnd: merging %d operations of rank %d: %v", len(ops), c.rank, err)
	}
	return true, c.dp.Launch(merged, g.bufs, stream)
}

// cloneCall copies call with its own vectors: a queued call must not alias
// the caller's memory (C arrays, reused Go slices).
func cloneCall(call *spec.Call) spec.Call {
	cp := *call
	clone := func(v []uint64) []uint64 {
		if v == nil {
			return nil
		}
		return append([]uint64(nil), v...)
	}
	cp.Counts, cp.Displs = clone(call.Counts), clone(call.Displs)
	cp.SendCounts, cp.SendDispls = clone(call.SendCounts), clone(call.SendDispls)
	cp.RecvCounts, cp.RecvDispls = clone(call.RecvCounts), clone(call.RecvDispls)
	return cp
}
