package cuda

import (
	"sync"
	"sync/atomic"

	"purlin/errs"
)

// streamPerThread is CU_STREAM_PER_THREAD: one handle that names a
// different stream on every thread.
const streamPerThread cuStream = 0x2

// launchOrder makes a rank's kernels run in launch order whatever streams
// they are launched on, as NCCL chains one communicator's launches: every
// rank of a communicator then runs the same sequence of calls however it
// spreads them over streams. A launch on the stream of the rank's latest
// launch is ordered by the stream itself and costs nothing more. A launch on
// another stream first makes that stream wait for an event recorded, at that
// moment, on the latest launch's stream: it orders the new kernel after the
// previous one (and after any work queued behind it there, which the caller
// issued before this launch).
//
// Under CUDA graph capture the wait is made only when both streams are in
// the same capture, or neither is: then it is legal, and it becomes an edge
// of the graph. Across a capture boundary there is nothing to order, as in
// NCCL: a captured launch runs when its graph is launched, in the graph
// launch's stream order.
type launchOrder struct {
	// last is ^stream of the rank's latest launch, 0 before the first
	// (^ keeps the zero value apart from stream 0). Written under mu. It
	// lies in C memory (newWord), where a recorded launch reads it
	// (purlin_replay: Rank.Replay).
	last *atomic.Uintptr

	mu       sync.Mutex   // serializes launches onto a new stream, and Follow
	event    cuEvent      // guarded by mu
	join     cuEvent      // Follow's; guarded by mu
	recorded bool         // event already marks the latest launch (per-thread stream); guarded by mu
	at       captureState // the capture event was recorded in, when recorded; guarded by mu
}

// captureState is a stream's capture: none, or one capture sequence.
type captureState struct {
	status uint32 // CUstreamCaptureStatus
	id     uint64 // valid when active
}

// init creates the events and the last word; it runs at NewRank, outside any capture.
func (o *launchOrder) init() error {
	o.last = newWord()
	if err := cuErr(driver.EventCreate(&o.event, eventDisableTiming), "cuEventCreate"); err != nil {
		return err
	}
	return cuErr(driver.EventCreate(&o.join, eventDisableTiming), "cuEventCreate")
}

func (o *launchOrder) free() {
	if o.last != nil {
		freeWord(o.last)
		o.last = nil
	}
	for _, e := range []*cuEvent{&o.event, &o.join} {
		if *e != 0 {
			driver.EventDestroy(*e)
			*e = 0
		}
	}
}

// Follow makes the work enqueued on stream from now on wait for the work
// enqueued on after so far (an event recorded on after, waited for on
// stream). Both must be eager or in the same capture, where the wait is a
// graph edge; a capture and anything outside it cannot wait for each other.
func (r *Rank) Follow(stream, after uintptr) error {
	if stream == after {
		return nil
	}
	o := &r.order
	o.mu.Lock()
	defer o.mu.Unlock()
	return inContext(r.ctx, func() error {
		s, a := cuStream(stream), cuStream(after)
		sc, sok := captureOf(s)
		ac, aok := captureOf(a)
		// The rank's side stream (SideStream) joins a capture of the
		// stream it follows, as a fork does; its work joins back before
		// the call ends.
		fork := s == r.side && sok && aok && sc.id == 0
		if !sok || !aok || sc != ac && !fork {
			return errs.New(errs.ErrInvalidUsage, "cuda rank %d: streams %#x and %#x of one group are not in the same CUDA graph capture (or one cannot be used now)", r.topo.Rank, stream, after)
		}
		if err := cuErr(driver.EventRecord(o.join, a), "cuEventRecord", "joining a group's streams"); err != nil {
			return err
		}
		return cuErr(driver.StreamWaitEvent(s, o.join, 0), "cuStreamWaitEvent", "joining a group's streams")
	})
}

// launchInOrder enqueues the rank's kernel with grid workers on stream,
// after the rank's previous kernel (see launchOrder), and with an epilogue
// split (not 0) the kernel that runs the Plan's Epilogue steps right after
// it, on the same stream with the same arguments, split blocks a worker: to
// the order, one launch. counts are the image's (nil where it stays):
// errLaunchRetry where the launch may not read it now (images.go).
func (r *Rank) launchInOrder(grid uint32, stream cuStream, args *launchArgs, epilogue uint32, counts *imageCounts) error {
	o := &r.order
	if o.sameStream(stream) {
		return r.launchKernels(grid, stream, args, epilogue, counts)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return inContext(r.ctx, func() error {
		if last := o.last.Load(); last != 0 {
			if err := o.follow(^cuStream(last), stream); err != nil {
				return err
			}
		}
		if err := r.launchKernels(grid, stream, args, epilogue, counts); err != nil {
			return err
		}
		return o.launched(stream)
	})
}

// launchKernels enqueues purlin_run on stream; with an epilogue split of 1,
// purlin_run_epilogue instead (the Plan and its Epilogue steps in one
// kernel: a kernel node fewer), and with a larger split purlin_run then
// purlin_epilogue (grid x epilogue blocks), which spreads a large
// epilogue's rows over more blocks than the Plan has workers.
func (r *Rank) launchKernels(grid uint32, stream cuStream, args *launchArgs, epilogue uint32, counts *imageCounts) error {
	fn := r.fn.run
	if epilogue == 1 {
		fn = r.fn.runEpilogue
	}
	switch res := launchKernel(r.ctx, fn, grid, 1, threadsPerBlock, stream, args, r.launchesPDL(), counts); res {
	case cuSuccess:
	case launchRetry:
		return errLaunchRetry
	default:
		return cuErr(res, "cuLaunchKernel", "rank ", r.topo.Rank)
	}
	if epilogue <= 1 {
		return nil
	}
	// The launch above counted for both kernels (devicePlan.blocks).
	if res := launchKernel(r.ctx, r.fn.epilogue, grid, epilogue, threadsPerBlock, stream, args, r.launchesPDL(), nil); res != cuSuccess {
		return cuErr(res, "cuLaunchKernel", "rank ", r.topo.Rank, " epilogue")
	}
	return nil
}

// sameStream reports whether stream is the rank's previous launch's, which
// orders the next launch by itself: the hot path.
func (o *launchOrder) sameStream(stream cuStream) bool {
	return o.last.Load() == ^uintptr(stream) && stream != streamPerThread
}

// launched notes the rank's latest launch, on stream.
func (o *launchOrder) launched(stream cuStream) error {
	o.last.Store(^uintptr(stream))
	o.recorded = false
	if stream == streamPerThread {
		// Another thread cannot name this thread's stream later: mark the
		// launch now (every launch on it takes this path).
		return o.record(stream)
	}
	return nil
}

// follow makes next wait for the rank's latest launch, on prev.
func (o *launchOrder) follow(prev, next cuStream) error {
	if !o.recorded {
		if err := o.record(prev); err != nil || !o.recorded {
			return err
		}
	}
	now, ok := captureOf(next)
	if !ok || now != o.at {
		return nil // across a capture boundary: nothing to order
	}
	return cuErr(driver.StreamWaitEvent(next, o.event, 0), "cuStreamWaitEvent", "ordering the rank's launches")
}

// record marks the work queued on s so far with the event, when s's
// capture state allows a later launch to wait for it.
func (o *launchOrder) record(s cuStream) error {
	at, ok := captureOf(s)
	if !ok {
		return nil // a stream that cannot be used now (its launch reports why)
	}
	if err := cuErr(driver.EventRecord(o.event, s), "cuEventRecord", "ordering the rank's launches"); err != nil {
		return err
	}
	o.recorded, o.at = true, at
	return nil
}

// captureOf returns s's capture state, and false when it is neither eager
// nor in an active capture: an invalidated capture, or the legacy stream
// while another stream captures in global mode.
func captureOf(s cuStream) (captureState, bool) {
	var c captureState
	if driver.StreamGetCaptureInfo(s, &c.status, &c.id, nil, nil, nil) != cuSuccess {
		return c, false
	}
	switch c.status {
	case streamCaptureStatusNone:
		c.id = 0
		return c, true
	case streamCaptureStatusActive:
		return c, true
	}
	return c, false
}
