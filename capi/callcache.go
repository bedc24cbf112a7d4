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

// remember records call, which c has just launched outside a group from
// the arguments in k (callcache.h), so that the next call of k whose
// buffers pass the same checks is issued from C. It costs a call that
// misses the cache a Plan lookup and the datapath's record.
func remember(c *comm.Comm, k *C.purlinCallKey, call *spec.Call) {
	if !config.Get().CallCache || comm.InGroup() {
		return
	}
	var size C.int
	rec := C.purlinCallRecord(k, &size)
	if rec == nil {
		return
	}
	var facts C.purlinCallFacts
	n, issue := 0, uintptr(0)
	defer func() { C.purlinCallCommit(rec, &facts, C.int(n), C.uintptr_t(issue)) }() // also if Replay panics
	in, out := call.Extents()
	off, form := call.InPlaceOffset()
	facts = C.purlinCallFacts{in: C.uint64_t(in), out: C.uint64_t(out), align: C.uint64_t(call.Type.Size()),
		inPlaceOff: C.uint64_t(off), inPlaceForm: b2i(form), inPlace: b2i(call.InPlace())}
	n, issue = c.Replay(call, uintptr(k.stream), rec, int(size))
}

func b2i(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}
