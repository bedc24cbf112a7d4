package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "capi.h"
*/
import "C"

import (
	"errors"
	"runtime/debug"

	"purlin/comm"
	"purlin/config"
	"purlin/errs"
)

// results is the one table from Purlin's error codes to C result codes.
var results = map[errs.Code]C.purlinResult_t{
	errs.Success:            C.purlinSuccess,
	errs.UnhandledCudaError: C.purlinUnhandledCudaError,
	errs.SystemError:        C.purlinSystemError,
	errs.InternalError:      C.purlinInternalError,
	errs.InvalidArgument:    C.purlinInvalidArgument,
	errs.InvalidUsage:       C.purlinInvalidUsage,
	errs.RemoteError:        C.purlinRemoteError,
	errs.InProgress:         C.purlinInProgress,
	errs.Timeout:            C.purlinTimeout,
}

// result maps err to a C result and records its text as the last error of
// the calling thread and of c (which may be nil). In-progress is a state,
// not a failure: it is not recorded.
func result(c *comm.Comm, err error) C.purlinResult_t {
	if err == nil {
		return C.purlinSuccess
	}
	if errs.CodeOf(err) != errs.InProgress {
		comm.NoteError(c, err)
		config.Warnf("%v", err)
	}
	return resultCode(err)
}

// resultCode is err's C result through the table (success for nil).
func resultCode(err error) C.purlinResult_t {
	if r, ok := results[errs.CodeOf(err)]; ok {
		return r
	}
	return C.purlinInternalError
}

// recovered turns a panic in an export into an internal error; use as
// `defer recovered(&res)` in every export.
func recovered(res *C.purlinResult_t) {
	if p := recover(); p != nil {
		err := errs.New(errs.ErrInternal, "panic: %v\n%s", p, debug.Stack())
		*res = result(nil, err)
	}
}

// lookup returns the communicator of handle h.
func lookup(h C.uintptr_t) (*comm.Comm, error) { return comm.Lookup(uintptr(h)) }

// callResult is result for a call NCCL lets a group hold (a collective, a
// communicator's init, split or shrink): one that fails inside a group
// fails the group too (comm.FailGroup), whatever refused it; a
// non-blocking init in progress is no failure.
func callResult(c *comm.Comm, err error) C.purlinResult_t {
	if err != nil && !errors.Is(err, errs.ErrInProgress) {
		comm.FailGroup(err)
	}
	return result(c, err)
}

//export goNullArgument
func goNullArgument(what *C.char) (res C.purlinResult_t) {
	defer recovered(&res)
	return result(nil, errs.New(errs.ErrInvalidArgument, "%s", C.GoString(what)))
}

//export goUnsupported
func goUnsupported(name *C.char) (res C.purlinResult_t) {
	defer recovered(&res)
	return result(nil, errs.New(errs.ErrUnsupported, "%s is not supported by Purlin yet", C.GoString(name)))
}

// goGroupCancel cancels the calling thread's open group, if any
// (comm.CancelGroup): its outermost end launches none of its calls.
//
//export goGroupCancel
func goGroupCancel() {
	defer func() { recover() }()
	comm.CancelGroup()
}

func nullArg(what string) error { return errs.New(errs.ErrInvalidArgument, "%s is NULL", what) }
