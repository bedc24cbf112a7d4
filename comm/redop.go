package comm

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"purlin/errs"
	"purlin/numeric"
	"purlin/spec"
)

// redOpTable holds a communicator's PreMulSum ops. The handle NCCL clients
// see is spec.NumOps + index. Readers (every collective with a custom op)
// load an immutable snapshot; creators copy it under mu.
type redOpTable struct {
	mu  sync.Mutex // serialises creators and destroyers
	ops atomic.Pointer[[]redOpEntry]
}

type redOpEntry struct {
	op    spec.Op
	dtype spec.DataType // the type it was made for: the only type it reduces
	used  bool
}

// maxRedOps bounds a communicator's live custom ops.
const maxRedOps = 1 << 16

// Scalar residence, as ncclScalarResidence_t.
const (
	ScalarDevice        = 0 // read while the collective runs, from the pointer
	ScalarHostImmediate = 1 // read now, from host memory
)

// RedOpCreatePreMulSum makes an op that multiplies this rank's input by the
// scalar (of type dtype), then sums every rank's product; each rank passes
// its own scalar, and they may differ. A host-immediate scalar is read
// now; a device-resident one is read by the datapath while each collective
// runs, as a value of the collective's type. As with NCCL, the op is meant
// for collectives of dtype on c; it is not checked per call.
func (c *Comm) RedOpCreatePreMulSum(scalar unsafe.Pointer, dtype spec.DataType, residence int) (int32, error) {
	if err := c.usable("RedOpCreatePreMulSum"); err != nil {
		return 0, err
	}
	if !dtype.Valid() {
		return 0, errs.New(errs.ErrInvalidArgument, "RedOpCreatePreMulSum: invalid data type %d", int32(dtype))
	}
	if scalar == nil {
		return 0, errs.New(errs.ErrInvalidArgument, "RedOpCreatePreMulSum: scalar is NULL")
	}
	op := spec.Op{Kind: spec.PreMulSum}
	switch residence {
	case ScalarHostImmediate:
		op.Scalar = numeric.GetScalar(dtype, unsafe.Slice((*byte)(scalar), dtype.Size()))
	case ScalarDevice:
		op.ScalarPtr = uintptr(scalar)
	default:
		return 0, errs.New(errs.ErrInvalidArgument, "RedOpCreatePreMulSum: invalid scalar residence %d", residence)
	}
	t := &c.redops
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur []redOpEntry
	if p := t.ops.Load(); p != nil {
		cur = *p
	}
	next := append([]redOpEntry(nil), cur...)
	slot := len(next)
	for i, e := range next {
		if !e.used {
			slot = i
			break
		}
	}
	if slot == len(next) {
		if slot >= maxRedOps {
			return 0, errs.New(errs.ErrInvalidUsage, "RedOpCreatePreMulSum: %d ops are live on communicator %#x", slot, c.handle)
		}
		next = append(next, redOpEntry{})
	}
	next[slot] = redOpEntry{op: op, dtype: dtype, used: true}
	t.ops.Store(&next)
	return int32(spec.NumOps) + int32(slot), nil
}

// RedOpDestroy frees an op made by RedOpCreatePreMulSum.
func (c *Comm) RedOpDestroy(op int32) error {
	if c.state.Load() == stateDestroyed {
		return errs.New(errs.ErrInvalidUsage, "RedOpDestroy: communicator %#x was destroyed", c.handle)
	}
	if op < int32(spec.NumOps) {
		return errs.New(errs.ErrInvalidArgument, "RedOpDestroy: op %d is built in, not made by RedOpCreatePreMulSum", op)
	}
	t := &c.redops
	t.mu.Lock()
	defer t.mu.Unlock()
	slot := int(op - int32(spec.NumOps))
	p := t.ops.Load()
	if p == nil || slot >= len(*p) || !(*p)[slot].used {
		return errs.New(errs.ErrInvalidArgument, "RedOpDestroy: op %d is not a live op of communicator %#x", op, c.handle)
	}
	next := append([]redOpEntry(nil), (*p)...)
	next[slot] = redOpEntry{}
	t.ops.Store(&next)
	return nil
}

// resolveOp turns an op handle (Op.Kind as the caller passed it) into the
// op the Atoms apply to a call of type dtype. A custom op reduces only the
// type it was made for, as in NCCL (its scalar is of that type; a device
// scalar read as another would be garbage).
func (c *Comm) resolveOp(op *spec.Op, dtype spec.DataType) error {
	if op.Kind >= 0 && op.Kind < spec.NumOps {
		return nil
	}
	slot := int(op.Kind) - int(spec.NumOps)
	if p := c.redops.ops.Load(); p != nil && slot >= 0 && slot < len(*p) && (*p)[slot].used {
		e := &(*p)[slot]
		if e.dtype != dtype {
			return errs.New(errs.ErrInvalidArgument, "reduction op %d was made for %s, not %s: a custom op reduces only the type it was made for",
				int32(op.Kind), e.dtype, dtype)
		}
		*op = e.op
		return nil
	}
	return errs.New(errs.ErrInvalidArgument, "invalid reduction op %d: not built in and not a live op of communicator %#x", int32(op.Kind), c.handle)
}
