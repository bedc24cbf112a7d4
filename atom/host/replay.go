package host

/*
#include <stdint.h>
__attribute__((visibility("hidden"))) int purlin_host_replay(void *rec, const uint64_t *bufs, int n, uintptr_t stream);
*/
import "C"

import (
	"sync"
	"unsafe"

	"purlin/atom"
	"purlin/snac"
)

var _ atom.Replayer = (*Rank)(nil)

// replays are the launches Replay recorded, by id: C holds an id, never a
// Go pointer. A rank keeps its latest keptReplays; an id dropped or closed
// is declined at issue.
var replays struct {
	sync.Mutex
	next uint64
	byID map[uint64]replayed
}

type replayed struct {
	r    *Rank
	plan *snac.Plan
}

const keptReplays = 16

// Replay records plan's launch (atom.Replayer). The host Atom's record
// names it; its issue enters Go and launches it with Launch, skipping what
// a caller does before Launch. It serves tests of the callers' records on
// machines without GPUs, more than speed.
func (r *Rank) Replay(plan *snac.Plan, stream uintptr, rec unsafe.Pointer, size int) (n int, issue uintptr) {
	const n8 = int(unsafe.Sizeof(uint64(0)))
	if size < n8 {
		return 0, 0
	}
	replays.Lock()
	defer replays.Unlock()
	if replays.byID == nil {
		replays.byID = map[uint64]replayed{}
	}
	replays.next++
	id := replays.next
	slot := &r.replays[id%keptReplays]
	delete(replays.byID, *slot)
	*slot = id
	replays.byID[id] = replayed{r, plan}
	*(*uint64)(rec) = id
	return n8, uintptr(unsafe.Pointer(C.purlin_host_replay))
}

// forgetReplays drops r's records (Close).
func (r *Rank) forgetReplays() {
	replays.Lock()
	defer replays.Unlock()
	for _, id := range r.replays {
		delete(replays.byID, id)
	}
}

//export goHostReplay
func goHostReplay(id C.uint64_t, bufs *C.uint64_t, n C.int, stream C.uintptr_t) C.int {
	if n < 1 || n > atom.MaxBuffers {
		return -1
	}
	pairs := unsafe.Slice(bufs, 2*n)
	list := make([]atom.Buffers, n)
	for i := range list {
		list[i] = atom.Buffers{Send: uintptr(pairs[2*i]), Recv: uintptr(pairs[2*i+1])}
	}
	return C.int(issueReplay(uint64(id), list, uintptr(stream)))
}

// issueReplay launches record id with bufs on stream; 0 once launched, -1
// for a record dropped or closed, 1 for Launch's error.
func issueReplay(id uint64, bufs []atom.Buffers, stream uintptr) int {
	replays.Lock()
	e, ok := replays.byID[id]
	replays.Unlock()
	if !ok {
		return -1
	}
	if e.r.Launch(e.plan, bufs, stream) != nil {
		return 1
	}
	return 0
}
