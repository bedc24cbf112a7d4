package cuda

/*
#include "launch.h"
*/
import "C"

import (
	"unsafe"

	"purlin/atom"
	"purlin/snac"
	"purlin/spec"
)

var _ atom.Replayer = (*Rank)(nil)

// Replay records plan's launch on stream for C to issue (atom.Replayer),
// uploading plan first if no Launch has: rec receives a purlinReplay head
// (launch.h), then the Launch argument, whose inputs and outputs (its Send
// and Recv arrays) purlin_replay writes at issue. purlin_replay issues it
// only while stream is the rank's latest, which orders it by itself, as
// Launch's hot path does. A Plan that is not one kernel (a copy-engine
// Plan, one with an epilogue) has no record: n is 0. A Plan without workers
// launches nothing, and its record issues nothing.
func (r *Rank) Replay(plan *snac.Plan, stream uintptr, rec unsafe.Pointer, size int) (n int, issue uintptr) {
	if len(plan.Workers) == 0 && size >= 8 {
		return 8, uintptr(unsafe.Pointer(C.purlin_replay_nothing))
	}
	n = int(C.purlinReplayArgs) + int(unsafe.Sizeof(launchArgs{}))
	if len(plan.Workers) == 0 || n > size || cuStream(stream) == streamPerThread {
		return 0, 0
	}
	d := r.plans.lookup(plan)
	if d == nil {
		if inContext(r.ctx, func() (err error) { d, err = r.plans.upload(plan, r.copies); return err }) != nil {
			return 0, 0
		}
	}
	if d.engine != nil || d.epilogue != [MaxBuffers]spec.EpilogueKind{} {
		return 0, 0
	}
	h := (*C.purlinReplay)(rec)
	*h = C.purlinReplay{
		getCurrent: C.uintptr_t(hot.ctxGetCurrent), push: C.uintptr_t(hot.ctxPush), pop: C.uintptr_t(hot.ctxPop),
		launch: C.uintptr_t(hot.launchKernel), ctx: C.uintptr_t(r.ctx), fn: C.uintptr_t(r.fn.run),
		isCapturing: C.uintptr_t(hot.streamIsCapturing), img: (*C.purlinImage)(d.counts),
		last: (*C.uint64_t)(unsafe.Pointer(r.order.last)), grid: C.uint32_t(d.nworkers), block: threadsPerBlock,
		send: C.uint32_t(unsafe.Offsetof(launchArgs{}.Send)), recv: C.uint32_t(unsafe.Offsetof(launchArgs{}.Recv)),
	}
	if r.launchesPDL() && r.device >= 0 && r.device < len(sharedDevices) {
		h.launchEx, h.shared = C.uintptr_t(hot.launchKernelEx), (*C.uint32_t)(unsafe.Pointer(&sharedDevices[r.device]))
	}
	var bufs [1]atom.Buffers // written at issue
	r.fillArgs((*launchArgs)(unsafe.Add(rec, C.purlinReplayArgs)), plan, d, bufs[:])
	return n, uintptr(unsafe.Pointer(C.purlin_replay))
}
