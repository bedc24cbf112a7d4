package host

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"purlin/atom"
	"purlin/errs"
	"purlin/numeric"
	"purlin/snac"
	"purlin/spec"
)

// run executes one Plan: one goroutine per worker (the first on the
// stream's own goroutine), returning when all have finished. A rank broken
// by an earlier error runs nothing and returns that error.
func (r *Rank) run(p *snac.Plan, bufs []atom.Buffers) error {
	if err := r.AsyncError(); err != nil {
		return err
	}
	if len(p.Workers) == 0 {
		return nil
	}
	var op spec.Op
	err := r.guard(func() (err error) {
		op, err = resolveScalar(p.Type, p.Op)
		return err
	})
	if err != nil {
		r.fail(err)
		return err
	}
	var wg sync.WaitGroup
	for w := 1; w < len(p.Workers); w++ {
		wg.Go(func() {
			if err := r.guard(func() error { return r.runWorker(p, op, w, bufs) }); err != nil {
				r.fail(err)
			}
		})
	}
	if err := r.guard(func() error { return r.runWorker(p, op, 0, bufs) }); err != nil {
		r.fail(err)
	}
	wg.Wait()
	return r.AsyncError()
}

// guard runs f, part of a Plan, and turns a panic in it into an error, so
// the host process never dies of a Plan, as a GPU reports a bad address or
// a broken kernel as an error. A memory fault (debug.SetPanicOnFault) is the
// caller's: a buffer that is not mapped, because it was never valid or was
// freed while the call ran (a program that exits, or frees its buffers,
// with work still queued); it fails the call as an invalid argument.
// Anything else is a broken invariant of Purlin.
func (r *Rank) guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if fault, ok := v.(interface{ Addr() uintptr }); ok {
			err = errs.New(errs.ErrInvalidArgument, "host rank %d: memory fault at %#x: a buffer of the call is not mapped (never valid, or freed before the call finished)", r.topo.Rank, fault.Addr())
			return
		}
		err = errs.New(errs.ErrInternal, "host rank %d: panic running a Plan: %v\n%s", r.topo.Rank, v, debug.Stack())
	}()
	return f()
}

// resolveScalar reads PreMulSum's factor where the caller left it in memory
// (ncclScalarDevice: host memory for this Atom).
func resolveScalar(t spec.DataType, op spec.Op) (spec.Op, error) {
	if op.Kind != spec.PreMulSum || op.ScalarPtr == 0 {
		return op, nil
	}
	if !t.Valid() {
		return op, errs.New(errs.ErrInternal, "host: PreMulSum scalar of invalid type %v", t)
	}
	op.Scalar = numeric.GetScalar(t, bytesAt(op.ScalarPtr, uint64(t.Size())))
	op.ScalarPtr = 0
	return op, nil
}

// worker is one worker's view while it runs: its epoch and its buffers.
type worker struct {
	r     *Rank
	plan  *snac.Plan
	op    spec.Op
	bufs  []atom.Buffers
	epoch uint64
}

// runWorker runs worker w's steps between reading and advancing its epoch
// (Advance steps advance it on the way).
func (r *Rank) runWorker(p *snac.Plan, op spec.Op, w int, bufs []atom.Buffers) error {
	wk := p.Workers[w]
	if wk.Channel >= snac.NumChannels || wk.Index >= snac.MaxWorkers || uint64(wk.First)+uint64(wk.Count) > uint64(len(p.Steps)) {
		return errs.New(errs.ErrInternal, "host rank %d: worker %d has channel %d index %d steps [%d,+%d) of %d",
			r.topo.Rank, w, wk.Channel, wk.Index, wk.First, wk.Count, len(p.Steps))
	}
	epochs := r.syms[r.topo.Rank].epochs
	slot := snac.EpochSlot(wk.Channel, wk.Index)
	x := worker{r: r, plan: p, op: op, bufs: bufs, epoch: atomic.LoadUint64(&epochs[slot])}
	err := p.Unroll(w, func(i int, s *snac.Step) error {
		if err := x.step(s); err != nil {
			return fmt.Errorf("host rank %d worker %d (channel %d index %d) step %d %v: %w",
				r.topo.Rank, w, wk.Channel, wk.Index, i, s.Verb, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	next := x.epoch + snac.EpochAdvance
	atomic.StoreUint64(&epochs[slot], next)
	if wk.Index == 0 {
		// Slots this Plan leaves unused follow too, so a later Plan with
		// more workers starts every worker from the same epoch on every rank.
		used := 0
		for _, o := range p.Workers {
			if o.Channel == wk.Channel {
				used++
			}
		}
		for i := used; i < snac.MaxWorkers; i++ {
			atomic.StoreUint64(&epochs[snac.EpochSlot(wk.Channel, uint16(i))], next)
		}
	}
	return nil
}

func (x *worker) step(s *snac.Step) error {
	switch s.Verb {
	case snac.Copy:
		return x.copy(s)
	case snac.Reduce:
		return x.reduce(s)
	case snac.Notify:
		return x.notify(s)
	case snac.Wait:
		return x.wait(s)
	case snac.Advance:
		x.epoch += snac.EpochAdvance
		return nil
	case snac.Epilogue:
		return x.epilogue(s)
	}
	return errs.New(errs.ErrInternal, "unknown verb %d", s.Verb)
}

// target is the flag value of this worker's call for a step's Delta.
func (x *worker) target(s *snac.Step) int64 { return int64(x.epoch) + s.Delta }

// parity picks the staging or packet half of this call.
func (x *worker) parity() uint64 { return x.epoch & 1 }
