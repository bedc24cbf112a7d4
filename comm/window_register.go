package comm

import (
	"fmt"
	"strings"
	"sync"

	"purlin/errs"
)

// What a rank tells the others when it registers a window, so a rank that
// is at another bootstrap step, window or size is named in the error on
// every rank (deregistration is local: it tells nobody):
//
//	magic u32 | op u32 | seq u64 | size u64 | flags u64 | [refusal code u8 | refusal text]
const (
	windowMagic       = 0x4e495750 // "PWIN"
	windowOpRegister  = 1
	windowRecordBytes = 32
)

func windowRecord(w *window, refusal error) []byte {
	b := windowLE.AppendUint32(nil, windowMagic)
	b = windowLE.AppendUint32(b, windowOpRegister)
	b = windowLE.AppendUint64(b, w.seq)
	size := w.size
	if w.empty() {
		size = 0 // a NULL buffer registers nothing, whatever its size
	}
	b = windowLE.AppendUint64(b, size)
	b = windowLE.AppendUint64(b, uint64(int64(w.flags)))
	if refusal != nil {
		b = append(b, byte(errs.CodeOf(refusal)))
		b = append(b, strings.TrimPrefix(refusal.Error(), "purlin: ")...)
	}
	return b
}

// refusedBy is how the other ranks see rank q's refusal: with its code when
// it was a bad argument (so every rank returns ncclInvalidArgument), as an
// invalid usage otherwise.
func refusedBy(what string, q int, code byte, text []byte) error {
	sentinel := errs.ErrInvalidUsage
	if errs.Code(code) == errs.InvalidArgument {
		sentinel = errs.ErrInvalidArgument
	}
	return errs.New(sentinel, "%s: rank %d refused: %s", what, q, text)
}

// check is this rank's own verdict on its buffer.
func (w *window) check() error {
	if !w.empty() && w.buff%WindowAlignment != 0 {
		return errs.New(errs.ErrInvalidArgument, "CommWindowRegister rank %d: buffer %#x is not aligned to NCCL_WIN_REQUIRED_ALIGNMENT (%d bytes); use ncclMemAlloc",
			w.c.rank, w.buff, WindowAlignment)
	}
	return nil // flags NCCL does not know it ignores, and so does Purlin
}

// agreeOn exchanges w's record and returns the first disagreement or
// refusal, worded alike on every rank; mine is returned as it is.
func (w *window) agreeOn(what string, mine error) error {
	c := w.c
	all, err := c.boot.AllGather(windowRecord(w, mine))
	if err != nil {
		return fmt.Errorf("%s rank %d: exchanging window records: %w", what, c.rank, err)
	}
	if mine != nil {
		return mine
	}
	if len(all[0]) < windowRecordBytes {
		return errs.New(errs.ErrRemote, "%s: rank 0 sent a %d-byte window record", what, len(all[0]))
	}
	size0, flags0 := windowLE.Uint64(all[0][16:]), int64(windowLE.Uint64(all[0][24:]))
	for q, m := range all {
		switch {
		case len(m) < windowRecordBytes || windowLE.Uint32(m) != windowMagic || windowLE.Uint32(m[4:]) != windowOpRegister:
			return errs.New(errs.ErrMismatch, "%s: rank %d is not at the same window step (a different collective call on the bootstrap)", what, q)
		case windowLE.Uint64(m[8:]) != w.seq:
			return errs.New(errs.ErrMismatch, "%s: rank %d names its window #%d, rank %d its window #%d", what, q, windowLE.Uint64(m[8:]), c.rank, w.seq)
		case len(m) > windowRecordBytes:
			return refusedBy(what, q, m[windowRecordBytes], m[windowRecordBytes+1:])
		case windowLE.Uint64(m[16:]) != size0 && (size0 == 0 || windowLE.Uint64(m[16:]) == 0):
			return errs.New(errs.ErrInvalidArgument, "%s: rank %d registers %d bytes, rank 0 %d bytes: a rank registers nothing (a NULL buffer or size 0) only where every rank does", what, q, windowLE.Uint64(m[16:]), size0)
		case windowLE.Uint64(m[16:]) != size0:
			return errs.New(errs.ErrInvalidArgument, "%s: rank %d registers %d bytes, rank 0 %d bytes: every rank must register the same size", what, q, windowLE.Uint64(m[16:]), size0)
		case int64(windowLE.Uint64(m[24:])) != flags0:
			return errs.New(errs.ErrInvalidArgument, "%s: rank %d passes window flags %#x, rank 0 %#x", what, q, windowLE.Uint64(m[24:]), flags0)
		}
	}
	return nil
}

// empty reports whether w registers nothing: a NULL buffer or size 0,
// which NCCL accepts and makes no window of.
func (w *window) empty() bool { return w.buff == 0 || w.size == 0 }

// register runs the collective registration of w (now, or at GroupEnd).
func (w *window) register() error {
	c := w.c
	if c.state.Load() == stateInit {
		if err := c.WaitInit(); err != nil {
			return w.finish(nil, fmt.Errorf("CommWindowRegister: communicator %#x: %w", c.handle, err))
		}
	}
	if err := c.usable("CommWindowRegister"); err != nil {
		return w.finish(nil, err)
	}
	if err := w.agreeOn("CommWindowRegister", w.check()); err != nil {
		return w.finish(nil, err)
	}
	if w.empty() { // every rank registers nothing: no window, as in NCCL
		w.finish(nil, errs.New(errs.ErrInvalidArgument, "CommWindowRegister: a NULL buffer or size 0 registers no window"))
		return nil
	}
	view, err := mapWindow(c, w.buff, w.size)
	if err != nil {
		return w.finish(nil, fmt.Errorf("CommWindowRegister rank %d, window %#x: %w", c.rank, w.handle, err))
	}
	return w.finish(view, nil)
}

// deregister releases w on this rank alone, as NCCL's
// ncclCommWindowDeregister does (it waits for no peer), so one thread may
// deregister its communicators' windows one after another. It is safe
// without the peers: it only unmaps this rank's view, and a view of another
// process's buffer holds that memory (memfd, cuMem allocation) until it is
// unmapped, whatever its owner does meanwhile (in one process, views are
// the owners' own pointers); this rank's own buffer stays the caller's. The
// handle dies even when the registration had failed.
func (w *window) deregister() error {
	if err := w.waitReady(); err != nil {
		dropWindow(w)
		return fmt.Errorf("CommWindowDeregister: window %#x was never registered: %w", w.handle, err)
	}
	if err := w.c.usable("CommWindowDeregister"); err != nil {
		return err
	}
	dropWindow(w)
	return w.release()
}

// Deferred window operations, per group and communicator, run in the order
// issued by one job of the group (so every rank's bootstrap sees them in
// the same order even though a group's jobs run concurrently).
var windowQueues struct {
	sync.Mutex
	m map[*group]map[*Comm]*[]func() error
}

func queueWindowOp(g *group, c *Comm, op func() error) {
	windowQueues.Lock()
	defer windowQueues.Unlock()
	if windowQueues.m == nil {
		windowQueues.m = map[*group]map[*Comm]*[]func() error{}
	}
	byComm := windowQueues.m[g]
	if byComm == nil {
		byComm = map[*Comm]*[]func() error{}
		windowQueues.m[g] = byComm
	}
	queue := byComm[c]
	if queue == nil {
		queue = new([]func() error)
		byComm[c] = queue
		g.jobs = append(g.jobs, func() error { return runWindowQueue(g, c) })
	}
	*queue = append(*queue, op)
}

func runWindowQueue(g *group, c *Comm) error {
	windowQueues.Lock()
	queue := windowQueues.m[g][c]
	delete(windowQueues.m[g], c)
	if len(windowQueues.m[g]) == 0 {
		delete(windowQueues.m, g)
	}
	windowQueues.Unlock()
	var first error
	for _, op := range *queue {
		if err := op(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
