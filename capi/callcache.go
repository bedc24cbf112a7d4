package main

/*
#cgo noescape purlinCallCommit
#cgo nocallback purlinCallCommit
#cgo noescape purlinCallRecord
#cgo nocallback purlinCallRecord
#include "callcache.h"
*/
import "C"

import (
	"purlin/comm"
	"purlin/config"
	"purlin/spec"
)

// remember records call, validated by c for the arguments in k, for the
// call cache (callcache.h), and reports whether it did: the datapath's
// record of its Plan's launch, and what the checks concluded from its
// buffers, so that a later call of k whose buffers lead to the same
// conclusions is issued from C. Never for a call of a group Go holds,
// which Go launches with the group's others, maybe merged with them: the
// C side, which tracks the thread's groups, calls it outside those. It
// costs a call that missed the cache a Plan lookup and the datapath's
// record.
func remember(c *comm.Comm, k *C.purlinCallKey, call *spec.Call) bool {
	if !config.Get().CallCache {
		return false
	}
	var size C.int
	rec := C.purlinCallRecord(k, &size)
	if rec == nil {
		return false
	}
	var facts C.purlinCallFacts
	n, issue := 0, uintptr(0)
	defer func() { C.purlinCallCommit(rec, &facts, C.int(n), C.uintptr_t(issue)) }() // also if Replay panics
	in, out := call.Extents()
	off, form := call.InPlaceOffset()
	facts = C.purlinCallFacts{in: C.uint64_t(in), out: C.uint64_t(out), align: C.uint64_t(call.Type.Size()),
		inPlaceOff: C.uint64_t(off), inPlaceForm: C.int32_t(b2i(form)), inPlace: C.int32_t(b2i(call.InPlace()))}
	n, issue = c.Replay(call, uintptr(k.stream), rec, int(size))
	return n > 0 && issue != 0
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
