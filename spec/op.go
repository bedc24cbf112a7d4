package spec

import "fmt"

// OpKind is a reduction; the first five values equal NCCL's ncclRedOp_t.
type OpKind int32

const (
	Sum    OpKind = 0
	Prod   OpKind = 1
	Max    OpKind = 2
	Min    OpKind = 3
	Avg    OpKind = 4
	NumOps OpKind = 5
	// PreMulSum multiplies each rank's input by that rank's own Op.Scalar
	// (ranks may pass different scalars), then sums. NCCL clients reach it
	// through ncclRedOpCreatePreMulSum, whose handles are >= NumOps.
	PreMulSum OpKind = 5
)

var opNames = [...]string{"sum", "prod", "max", "min", "avg", "premulsum"}

// Op is a reduction as the Atoms apply it.
type Op struct {
	Kind OpKind
	// Scalar is PreMulSum's factor for this rank's input, already converted
	// to float64 (integer types use it rounded toward zero, as the source
	// type would hold it).
	Scalar float64
	// ScalarPtr, when not 0, is a device address where PreMulSum reads its
	// factor while the collective runs (ncclScalarDevice).
	ScalarPtr uintptr
	// Divisor, when not 0, is what Avg divides its sum by in place of the
	// call's rank count: a node's phase of a call across nodes that reduces
	// sums the network already took finishes the mean of every rank.
	Divisor int
}

// Valid reports whether op is a known kind, with a Divisor only for Avg.
func (op Op) Valid() bool {
	return op.Kind >= 0 && op.Kind <= PreMulSum && op.Divisor >= 0 && (op.Divisor == 0 || op.Kind == Avg)
}

// AvgDivisor is what Avg divides by on a call of nranks ranks.
func (op Op) AvgDivisor(nranks int) int {
	if op.Divisor != 0 {
		return op.Divisor
	}
	return nranks
}

// DefinedFor reports whether NCCL runs a reduction with op on t across
// nranks ranks: every kind on every type, except Avg and PreMulSum on the
// float8 types when nranks is 1. A one-rank NCCL communicator copies the
// input for every op but those two (Avg on a floating type is PreMulSum by
// 1/nranks there), and its one-rank PreMulSum kernel has no float8 case, so
// NCCL returns ncclInvalidArgument; with two or more ranks it reduces them.
func (op Op) DefinedFor(t DataType, nranks int) bool {
	return nranks > 1 || !t.IsFloat8() || (op.Kind != Avg && op.Kind != PreMulSum)
}

func (op Op) String() string {
	if !op.Valid() {
		return fmt.Sprintf("op(%d)", int32(op.Kind))
	}
	return opNames[op.Kind]
}
