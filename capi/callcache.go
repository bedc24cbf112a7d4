package main

/*
#cgo noescape purlinCallCommit
#cgo nocallback purlinCallCommit
#cgo noescape purlinCallRecord
#cgo nocallback purlinCallRecord
#cgo noescape purlinCallWindows
#cgo nocallback purlinCallWindows
#include "callcache.h"
*/
import "C"

import (
	"purlin/atom"
	"purlin/comm"
	"purlin/config"
	"purlin/spec"
)

// The C side's records issue at most a launch's buffers of calls.
var _ = [1]struct{}{}[C.purlinCallOps-atom.MaxBuffers]

// remember records calls, validated by c for the arguments in keys (one
// call, or a group's calls on c that it launches as one Plan, in order:
// comm.Replay), as one launch for
// the call cache (callcache.h), and reports whether it did: the
// datapath's record of their Plan's launch, and what the checks concluded
// from each call's buffers, so that later calls of these keys whose
// buffers lead to the same conclusions are issued from C. Never for a call
// of a group Go holds, which Go launches with the group's others, maybe
// merged with them: the C side, which tracks the thread's groups, calls it
// outside those. It costs calls that missed the cache a Plan lookup and
// the datapath's record.
func remember(c *comm.Comm, keys []C.purlinCallKey, calls []spec.Call) bool {
	if !config.Get().CallCache {
		return false
	}
	for i := range calls {
		if c.DirectCall(&calls[i]) {
			return false // Go pushes it into the outputs (comm direct.go), alone or merged: no record
		}
	}
	var size C.int
	rec := C.purlinCallRecord(&keys[0], C.int(len(keys)), &size) // held until purlinCallCommit
	if rec == nil {
		return false
	}
	var facts [C.purlinCallOps]C.purlinCallFacts
	n, issue := 0, uintptr(0)
	defer func() { C.purlinCallCommit(rec, &facts[0], C.int(n), C.uintptr_t(issue)) }() // also if Replay panics
	for i := range calls {
		call := &calls[i]
		in, out := call.Extents()
		off, form := call.InPlaceOffset()
		facts[i] = C.purlinCallFacts{in: C.uint64_t(in), out: C.uint64_t(out), align: C.uint64_t(call.Type.Size()),
			inPlaceOff: C.uint64_t(off), inPlaceForm: C.int32_t(b2i(form)), inPlace: C.int32_t(b2i(call.InPlace())),
			directs: C.int32_t(b2i(c.PushesDirect(call)))}
	}
	n, issue = c.Replay(calls, uintptr(keys[0].stream), rec, int(size))
	return n > 0 && issue != 0
}

func init() {
	comm.SymmetricWindowsHook = func(handle uintptr, ranges []uint64) {
		var first *C.uint64_t
		if len(ranges) > 0 {
			first = (*C.uint64_t)(&ranges[0])
		}
		C.purlinCallWindows(C.uintptr_t(handle), first, C.int(len(ranges)/2))
	}
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
