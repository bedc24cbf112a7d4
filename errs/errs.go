// Package errs is Purlin's one error vocabulary. Every layer returns these
// sentinels, wrapped with the failing call and object; capi maps them to
// ncclResult_t codes in one table, and Python mirrors them as exceptions.
package errs

import (
	"errors"
	"fmt"
)

// Code is a result code whose numeric values equal NCCL's ncclResult_t.
type Code int32

const (
	Success            Code = 0
	UnhandledCudaError Code = 1
	SystemError        Code = 2
	InternalError      Code = 3
	InvalidArgument    Code = 4
	InvalidUsage       Code = 5
	RemoteError        Code = 6
	InProgress         Code = 7
	Timeout            Code = 8 // ncclTimeout exists from NCCL 2.30; older clients see an unknown code
)

// Error is a failure with a result code. Wrapped errors keep their code:
// CodeOf walks the chain.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return "purlin: " + e.Msg }

// Sentinels, each documented by who returns it.
var (
	// ErrInvalidArgument: spec, for a null pointer, bad count, dtype, op, root or peer.
	ErrInvalidArgument = &Error{InvalidArgument, "invalid argument"}
	// ErrInvalidUsage: comm, for a call in the wrong state (destroyed communicator, unbalanced
	// group, unsupported function, ranks that disagree on a call).
	ErrInvalidUsage = &Error{InvalidUsage, "invalid usage"}
	// ErrUnsupported: any layer, for a function or combination not implemented yet. It is an
	// invalid usage for NCCL clients.
	ErrUnsupported = &Error{InvalidUsage, "not supported"}
	// ErrMismatch: the Atoms, when a peer's call differs from ours (collective, count, dtype, op,
	// root) or was planned for another topology (see Disagree).
	ErrMismatch = &Error{InvalidUsage, "ranks disagree on the collective call"}
	// ErrTimeout: any bounded wait that passed PURLIN_TIMEOUT.
	ErrTimeout = &Error{RemoteError, "timed out waiting for a peer"}
	// ErrAborted: any wait interrupted by CommAbort.
	ErrAborted = &Error{RemoteError, "communicator aborted"}
	// ErrRemote: comm, when a peer process is gone or sent garbage.
	ErrRemote = &Error{RemoteError, "remote peer failed"}
	// ErrSystem: comm, for a failed system call (socket, memfd, mmap).
	ErrSystem = &Error{SystemError, "system error"}
	// ErrCuda: atom/cuda, for a failed CUDA driver call.
	ErrCuda = &Error{UnhandledCudaError, "CUDA error"}
	// ErrInternal: a broken invariant inside Purlin, or a recovered panic.
	ErrInternal = &Error{InternalError, "internal error"}
	// ErrInProgress: comm, for non-blocking communicators whose work has not finished.
	ErrInProgress = &Error{InProgress, "operation in progress"}
)

// Disagree begins the text of every ErrMismatch an Atom reports: what ranks
// may disagree on, so a user knows where to look.
const Disagree = "ranks disagree on the call (its collective, type, count, op or root, or a PURLIN_* setting that shapes Plans)"

// New returns an error with the code of sentinel and a message of its own,
// still matching sentinel under errors.Is.
func New(sentinel *Error, format string, args ...any) error {
	return &wrapped{sentinel, fmt.Sprintf(format, args...)}
}

type wrapped struct {
	sentinel *Error
	msg      string
}

func (w *wrapped) Error() string { return "purlin: " + w.msg }
func (w *wrapped) Unwrap() error { return w.sentinel }

// CodeOf returns the result code of err: Success for nil, InternalError for
// an error that carries no code.
func CodeOf(err error) Code {
	if err == nil {
		return Success
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return InternalError
}
