package cuda

import (
	"cmp"
	"encoding/binary"
	"unsafe"

	"purlin/atom"
	"purlin/errs"
	"purlin/snac"
)

// The copy engine (snac.EngineCopy; snac/engine.go). A copy-engine worker
// of a Plan is no thread block: it is a sequence of operations on a stream
// of its own, forked from the caller's stream and joined back into it, so
// the workers run side by side and the caller's next work waits for all of
// them. Each Copy is one cuMemcpyAsync, which the driver gives a copy
// engine; each run of signals between two copies is one launch of
// purlin_signals (csrc/run.cu), one thread. A worker's last run of
// signals, empty if need be, advances its epoch. The Plan's other workers,
// where a group merged a copy-engine call with others, run in purlin_run
// on the caller's stream at the same time (its blocks of copy-engine
// workers return at once). Legal under CUDA graph capture: the fork and
// the join are events, and the side streams join the capture.
//
// A Plan with more copy-engine workers than a rank has streams, or whose
// copies a copy engine cannot take, runs whole in purlin_run: its image
// marks no worker for the copy engine, and a copy-engine worker's steps
// are steps like any other, only in larger chunks.

// maxEngineWorkers is the side streams of a rank with a copy engine: one
// for each copy-engine worker of a Plan, which may be a group's merge of
// several calls (Topology caps one call's at PURLIN_COPY_ENGINE_WORKERS
// of at most 7, and a call may add one for its local copy).
const maxEngineWorkers = 32

// segmentSize is one segment's descriptor in the device image: a Worker
// whose First and Count are the segment's steps, the worker's Advance steps
// before it (uint32), and for its last segment the workers of its channel
// in the Plan (uint32; 0 for the others). csrc/run.cu purlin_signals reads it.
const segmentSize = int(unsafe.Sizeof(snac.Worker{})) + 8

// engineOp is one operation of a copy-engine worker: a Copy (step, its
// index in the Plan's steps) or a run of signals (step -1, segment: its
// descriptor's index).
type engineOp struct {
	step    int
	segment uint32
}

// engineSegments returns each copy-engine worker's operations (nil for
// the Plan's other workers) and the descriptors of their segments; nil
// when the Plan has no copy-engine worker, more than maxEngineWorkers, or
// one with a copy the copy engine cannot take (snactest checks the
// contract; this is the Atom's own guard).
func engineSegments(p *snac.Plan) (ops [][]engineOp, table []byte) {
	perChannel := map[uint16]uint32{}
	engines := 0
	for w, wk := range p.Workers {
		perChannel[wk.Channel]++
		if wk.Engine != snac.EngineCopy {
			continue
		}
		engines++
		for _, s := range p.WorkerSteps(w) {
			plain := func(r snac.Ref) bool {
				return r.Half == 0 && r.Pitch == 0 && (r.Space == snac.SpaceSend || r.Space == snac.SpaceRecv || r.Space == snac.SpaceStage || r.Space == snac.SpacePeerRecv)
			}
			if s.Verb == snac.Copy && (s.Row != 0 || !plain(s.Dst) || !plain(s.Src[0])) || s.Verb == snac.Reduce || s.Verb == snac.Epilogue {
				return nil, nil
			}
		}
	}
	if engines == 0 || engines > maxEngineWorkers {
		return nil, nil
	}
	ops = make([][]engineOp, len(p.Workers))
	for w, wk := range p.Workers {
		if wk.Engine != snac.EngineCopy {
			continue
		}
		steps := p.WorkerSteps(w)
		var list []engineOp
		advances, start := uint32(0), -1
		segment := func(end int, last bool) {
			if start < 0 && !last {
				return
			}
			if start < 0 {
				start = end
			}
			seg := snac.Worker{Channel: wk.Channel, Index: wk.Index, First: wk.First + uint32(start), Count: uint32(end - start), Engine: snac.EngineCopy}
			table = append(table, unsafe.Slice((*byte)(unsafe.Pointer(&seg)), unsafe.Sizeof(seg))...)
			table = binary.LittleEndian.AppendUint32(table, advances)
			used := uint32(0)
			if last {
				used = perChannel[wk.Channel]
			}
			table = binary.LittleEndian.AppendUint32(table, used)
			list = append(list, engineOp{step: -1, segment: uint32(len(table)/segmentSize - 1)})
			for _, s := range steps[start:end] {
				if s.Verb == snac.Advance {
					advances++
				}
			}
			start = -1
		}
		for i, s := range steps {
			switch {
			case s.Verb == snac.Copy:
				segment(i, false)
				if s.Bytes > 0 {
					list = append(list, engineOp{step: int(wk.First) + i})
				}
			case start < 0:
				start = i
			}
		}
		segment(len(steps), true)
		ops[w] = list
	}
	return ops, table
}

// engineStreams are a rank's side streams and events for copy-engine
// Plans, made at setup when its topology has a copy engine.
type engineStreams struct {
	side       [maxEngineWorkers]cuStream
	fork, join cuEvent
}

func (e *engineStreams) init() error {
	for i := range e.side {
		if res := driver.StreamCreate(&e.side[i], streamNonBlocking); res != cuSuccess {
			return cuErr(res, "cuStreamCreate", "copy engine")
		}
	}
	for _, ev := range []*cuEvent{&e.fork, &e.join} {
		if res := driver.EventCreate(ev, eventDisableTiming); res != cuSuccess {
			return cuErr(res, "cuEventCreate", "copy engine")
		}
	}
	return nil
}

func (e *engineStreams) free() {
	for i, s := range e.side {
		if s != 0 {
			driver.StreamDestroy(s)
			e.side[i] = 0
		}
	}
	for _, ev := range []*cuEvent{&e.fork, &e.join} {
		if *ev != 0 {
			driver.EventDestroy(*ev)
			*ev = 0
		}
	}
}

// launchEngine enqueues Plan p (its device copy d), which has copy-engine
// workers, on stream, after the rank's previous launch (launchOrder), as
// the package comment says; args and epilogue are purlin_run's, for the
// Plan's other workers.
func (r *Rank) launchEngine(p *snac.Plan, d *devicePlan, bufs []atom.Buffers, stream cuStream, args *launchArgs, epilogue uint32) error {
	if r.engine.fork == 0 {
		return errs.New(errs.ErrInternal, "cuda Launch rank %d: a copy-engine Plan on a rank without a copy engine", r.topo.Rank)
	}
	o := &r.order
	o.mu.Lock()
	defer o.mu.Unlock()
	return inContext(r.ctx, func() error {
		if last := o.last.Load(); last != 0 && !o.sameStream(stream) {
			if err := o.follow(^cuStream(last), stream); err != nil {
				return err
			}
		}
		// Even a failed call may have left work on stream: the next
		// launch on another stream follows it.
		err := r.enqueueEngine(p, d, bufs, stream, args, epilogue)
		return cmp.Or(err, o.launched(stream))
	})
}

// enqueueEngine enqueues d on stream and its side streams. A side stream
// once forked joins back into stream also where a later operation fails,
// so that the caller's stream still follows what was issued (and a
// capture stays joined); the first error is returned.
func (r *Rank) enqueueEngine(p *snac.Plan, d *devicePlan, bufs []atom.Buffers, stream cuStream, args *launchArgs, epilogue uint32) error {
	e := &r.engine
	if err := cuErr(driver.EventRecord(e.fork, stream), "cuEventRecord", "copy engine fork"); err != nil {
		return err
	}
	if d.kernel {
		if err := r.launchKernels(d.nworkers, stream, args, epilogue, nil); err != nil {
			return err
		}
	}
	var lanes [maxEngineWorkers]engineLane
	n := 0
	var err error
	for _, ops := range d.engine {
		if ops == nil {
			continue
		}
		if err = cuErr(driver.StreamWaitEvent(e.side[n], e.fork, 0), "cuStreamWaitEvent", "copy engine fork"); err != nil {
			break
		}
		lanes[n] = engineLane{side: e.side[n], ops: ops}
		n++
	}
	if err == nil {
		err = r.issueEngine(p, d, bufs, lanes[:n])
	}
	for k := range n {
		if jerr := cuErr(driver.EventRecord(e.join, lanes[k].side), "cuEventRecord", "copy engine join"); jerr != nil {
			err = cmp.Or(err, jerr)
			continue
		}
		err = cmp.Or(err, cuErr(driver.StreamWaitEvent(stream, e.join, 0), "cuStreamWaitEvent", "copy engine join"))
	}
	return err
}

// engineLane is a copy-engine worker's operations and the side stream
// they are issued on.
type engineLane struct {
	side cuStream
	ops  []engineOp
}

// issueEngine issues the lanes' operations in turn, one of each at a
// time, so that every copy engine starts at once: issued worker by
// worker, an eager call's last worker would start only once the host had
// issued all the others' (a few microseconds an operation).
func (r *Rank) issueEngine(p *snac.Plan, d *devicePlan, bufs []atom.Buffers, lanes []engineLane) error {
	signals := r.base
	signals.Steps = d.steps
	longest := 0
	for _, l := range lanes {
		longest = max(longest, len(l.ops))
	}
	for i := range longest {
		for _, l := range lanes {
			if i >= len(l.ops) {
				continue
			}
			op := l.ops[i]
			if op.step < 0 {
				signals.Workers = d.segments + uint64(op.segment)*uint64(segmentSize)
				if res := launchKernel(r.ctx, r.fn.signals, 1, 1, 32, l.side, &signals, false, nil); res != cuSuccess {
					return cuErr(res, "cuLaunchKernel", "purlin_signals")
				}
				continue
			}
			s := &p.Steps[op.step]
			dst, src := r.engineAddress(s.Dst, bufs), r.engineAddress(s.Src[0], bufs)
			if dst == 0 || src == 0 {
				return errs.New(errs.ErrInternal, "cuda Launch rank %d: copy-engine step %d names no memory", r.topo.Rank, op.step)
			}
			if dst == src {
				continue // an in-place call's own part
			}
			if res := driver.MemcpyAsync(devicePtr(dst), devicePtr(src), uintptr(s.Bytes), l.side); res != cuSuccess {
				return cuErr(res, "cuMemcpyAsync", s.Bytes, " bytes")
			}
		}
	}
	return nil
}

// engineAddress is where plain Ref ref lies (0 where nothing is): the
// caller's buffers (a peer's output too), or a rank's staging as this
// rank addresses it.
func (r *Rank) engineAddress(ref snac.Ref, bufs []atom.Buffers) uint64 {
	var base uint64
	switch ref.Space {
	case snac.SpacePeerRecv:
		base = uint64(atom.PeerOutput(bufs, int(ref.Rank), r.topo.NRanks))
	case snac.SpaceSend, snac.SpaceRecv:
		if int(ref.Rank) < len(bufs) {
			base = uint64(bufs[ref.Rank].Send)
			if ref.Space == snac.SpaceRecv {
				base = uint64(bufs[ref.Rank].Recv)
			}
		}
	case snac.SpaceStage:
		if int(ref.Rank) < snac.MaxRanks {
			base = r.base.Peers.Stage[ref.Rank]
		}
	}
	if base == 0 {
		return 0
	}
	return base + ref.Off
}
