package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// imageRig uploads 8-rank AllReduce Plans (33-820 KB images) into a model
// device and plays the kernels that read them: run counts a launch as
// purlin_launch does, end adds its blocks to the image's header as the
// blocks of purlin_run (and purlin_epilogue) do when done with it.
type imageRig struct {
	t      *testing.T
	m      *modelDevice
	c      plans
	copies cuStream
}

func newImageRig(t *testing.T, budget uintptr) *imageRig {
	const launch, copies cuStream = 0x51, 0x52
	r := &imageRig{t: t, m: useModelDevice(t, launch), copies: copies}
	r.c.budget = budget
	require.NoError(t, r.c.reserve())
	t.Cleanup(r.c.free)
	return r
}

func (r *imageRig) plan(count uint64) *snac.Plan {
	call := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Op: spec.Op{Kind: spec.Sum}, Count: count,
		Rank: 0, NRanks: 8, Send: 1 << 40, Recv: 2 << 40}
	p, err := snac.Build(call, Topology(8, 0))
	require.NoError(r.t, err)
	return p
}

// upload uploads p and checks that its image lies whole where a kernel
// launched now reads it, after a zero header.
func (r *imageRig) upload(p *snac.Plan) *devicePlan {
	d, err := r.c.upload(p, r.copies)
	require.NoError(r.t, err)
	image, err := planBytes(p)
	require.NoError(r.t, err)
	require.Equal(r.t, -1, r.m.stale(devicePtr(d.steps), image), "the image as uploaded")
	return d
}

func (r *imageRig) run(d *devicePlan) {
	require.Equal(r.t, uint64(imageLive), d.counts.status().Load(), "a launch on a live image")
	d.counts.launches().Add(1)
}

func (r *imageRig) end(d *devicePlan) {
	h := r.m.at(d.base, 8)
	binary.LittleEndian.PutUint64(h, binary.LittleEndian.Uint64(h)+d.blocks)
}

// intact fails unless d's image is still in place and named by p.
func (r *imageRig) intact(p *snac.Plan, d *devicePlan, msg string) {
	require.Same(r.t, d, r.c.lookup(p), msg)
	image, err := planBytes(p)
	require.NoError(r.t, err)
	require.Equal(r.t, -1, r.m.stale(devicePtr(d.steps), image), msg)
	require.NotEqual(r.t, uint64(imageFreed), d.counts.status().Load(), msg)
}

// TestPlanImagesStayBounded: a program that calls with a new size every
// time (a server's prefill) holds about the budget of Plan images, not one
// per size: idle images are freed and their room holds the next ones.
func TestPlanImagesStayBounded(t *testing.T) {
	const budget = 2 << 20
	r := newImageRig(t, budget)
	var largest uintptr
	for i := range 400 {
		p := r.plan(uint64(8192 + 4096*i)) // 16 KiB to 3.2 MiB of bfloat16
		d := r.upload(p)
		largest = max(largest, d.size)
		r.run(d)
		r.end(d)
		require.LessOrEqual(t, placed(&r.c), budget+largest, "after %d sizes", i+1)
	}
	require.LessOrEqual(t, len(r.c.chunks), 2, "chunks %v", r.c.chunks)
	require.LessOrEqual(t, len(r.c.evictable), 400/4, "most images freed")
	require.LessOrEqual(t, r.c.pointers, len(r.c.evictable), "freed images are named no more")
}

// TestPlanImagesInUseStay: an image is freed only once every block of every
// launch on it has ended, never when it is pinned (a graph holds it), and
// not in the round after a launch (it may be launched again soon).
func TestPlanImagesInUseStay(t *testing.T) {
	const budget = 1 << 20
	r := newImageRig(t, budget)
	busyPlan, pinnedPlan, hotPlan := r.plan(8192), r.plan(8192+64), r.plan(8192+128)
	busy, pinned, hot := r.upload(busyPlan), r.upload(pinnedPlan), r.upload(hotPlan)
	r.run(busy)
	r.run(busy)
	r.end(busy) // one launch of two has ended
	require.True(t, r.c.pin(pinned))
	others := 0
	churn := func(n int) {
		for range n {
			d := r.upload(r.plan(uint64(1<<20 + 64*others)))
			r.run(d)
			r.end(d)
			r.run(hot)
			r.end(hot)
			others++
		}
	}
	churn(60)
	r.intact(busyPlan, busy, "a launch on it has not ended")
	r.intact(pinnedPlan, pinned, "pinned")
	r.intact(hotPlan, hot, "launched since every reclaim looked")
	require.Less(t, len(r.c.evictable), others, "idle images were freed meanwhile")

	r.end(busy)
	churn(60)
	require.Nil(t, r.c.lookup(busyPlan), "freed once idle")
	require.Equal(t, uint64(imageFreed), busy.counts.status().Load())
	r.intact(pinnedPlan, pinned, "pinned")
	require.False(t, r.c.pin(busy), "a freed image cannot be pinned: its Plan is uploaded again")
	again := r.upload(busyPlan)
	require.NotSame(t, busy, again)
	require.Zero(t, binary.LittleEndian.Uint64(r.m.at(again.base, 8)), "a fresh header")
}

// TestPlanImagesOfTwoKernels: a split epilogue's image is reclaimable, its
// blocks those of both kernels (each counts itself); a copy engine's Plan,
// whose stream operations read the image too, stays: no counts.
func TestPlanImagesOfTwoKernels(t *testing.T) {
	r := newImageRig(t, 1<<20)
	call := &spec.Call{Coll: spec.AllReduce, Type: spec.Bfloat16, Op: spec.Op{Kind: spec.Sum}, Count: 4096 * 4096,
		Epilogue: spec.Epilogue{Kind: spec.EpilogueRMSNorm, Hidden: 4096, Eps: 1e-6}, Rank: 0, NRanks: 2, Send: 1 << 40, Recv: 2 << 40}
	p, err := snac.Build(call, Topology(2, 0))
	require.NoError(t, err)
	d := r.upload(p)
	require.Greater(t, d.epilogueSplit, uint32(1), "an epilogue of its own kernel")
	require.NotNil(t, d.counts)
	require.Equal(t, uint64(d.nworkers)*uint64(1+d.epilogueSplit), d.blocks, "purlin_run's and purlin_epilogue's")

	call = &spec.Call{Coll: spec.AllGather, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 16 << 20,
		Rank: 0, NRanks: 2, Send: 1 << 40, Recv: 2 << 40}
	p, err = snac.Build(call, Topology(2, 0).WithEngine(1<<20, 2, 16<<20))
	require.NoError(t, err)
	d = r.upload(p)
	require.NotNil(t, d.engine, "a copy engine's Plan")
	require.Nil(t, d.counts)
	require.Len(t, r.c.evictable, 1)
}

// TestPlanPointersBoundedByBytes: the pointer map keeps the Plans it names
// alive, so it is emptied once they hold its bytes, not only its count:
// pinned images (a graph's) stay, found by content again.
func TestPlanPointersBoundedByBytes(t *testing.T) {
	r := newImageRig(t, 1<<30)
	r.c.maxNamed = 1 << 20
	var largest uint64
	var first *snac.Plan
	for i := range 20 {
		p := r.plan(uint64(1<<20 + 4096*i)) // 0.2 MB Plans
		d := r.upload(p)
		require.True(t, r.c.pin(d))
		largest = max(largest, p.Bytes())
		require.LessOrEqual(t, r.c.named, r.c.maxNamed+largest, "after %d Plans", i+1)
		if i == 0 {
			first = p
		}
	}
	require.Nil(t, r.c.lookup(first), "no longer named")
	again := r.upload(r.plan(1 << 20))
	require.Equal(t, uint64(imagePinned), again.counts.status().Load(), "the first image, found by its bytes")
}

// TestPlanRoomJoins: freed ranges join their neighbours in the same chunk,
// never across chunks (two allocations that happen to touch), and a claim
// takes the first range that holds it.
func TestPlanRoomJoins(t *testing.T) {
	m := useModelDevice(t, 0x51)
	var c plans
	require.NoError(t, c.grow(4096))
	m.next = c.chunks[0].ptr + 4096 // the next allocation touches the first
	require.NoError(t, c.grow(4096))
	require.Equal(t, c.chunks[0].ptr+4096, c.chunks[1].ptr, "chunks that touch")
	require.Len(t, c.spare, 2, "touching chunks stay apart")

	var got []devicePtr
	for range 4 {
		p, err := c.claim(1024)
		require.NoError(t, err)
		got = append(got, p)
	}
	require.Len(t, c.spare, 1, "the first chunk is full")
	c.release(got[1], 1024)
	c.release(got[3], 1024)
	require.Len(t, c.spare, 3)
	p, err := c.claim(2048)
	require.NoError(t, err)
	require.Equal(t, c.chunks[1].ptr, p, "no range of the first chunk holds 2048")
	c.release(got[2], 1024) // joins got[1] and got[3]: 3072 bytes
	require.Equal(t, span{ptr: got[1], size: 3072, chunk: 0}, c.spare[0])
	c.release(got[0], 1024)
	require.Equal(t, span{ptr: got[0], size: 4096, chunk: 0}, c.spare[0], "the whole first chunk")
	c.release(p, 2048)
	require.Len(t, c.spare, 2, "each chunk whole, apart")
	require.Equal(t, uintptr(4096), c.spare[1].size)
}

// TestPlanReclaimReadsFewHeaders: one upload reads at most maxHeaderReads
// headers (each a wait for the device), however many idle images are over
// the budget; the uploads after it free the rest.
func TestPlanReclaimReadsFewHeaders(t *testing.T) {
	r := newImageRig(t, 1<<30)
	reads := 0
	read := driver.MemcpyDtoHAsync
	driver.MemcpyDtoHAsync = func(dst unsafe.Pointer, src devicePtr, size uintptr, s cuStream) cuResult {
		reads++
		return read(dst, src, size, s)
	}
	for i := range 100 { // 33-66 KB images, never launched: idle
		r.upload(r.plan(uint64(8192 + 64*i)))
	}
	require.Zero(t, reads)
	r.c.budget = 64 << 10
	r.upload(r.plan(1<<13 + 16))
	require.Equal(t, maxHeaderReads, reads, "one upload's reads")
	require.Len(t, r.c.evictable, 101-maxHeaderReads, "as many freed")
	for i := range 20 {
		r.upload(r.plan(uint64(1<<13 + 32 + i)))
	}
	require.LessOrEqual(t, placed(&r.c), uintptr(4*64<<10), "the rest freed by the uploads after")
}

// TestPlanImagesWhenTheGPUIsFull: where the device has no memory for
// another chunk (a server's KV cache fills the GPU), an upload frees every
// idle image, recently launched ones too, and takes their room, under the
// budget or not; an image still running stays, and only an image that fits
// nowhere fails, with the driver's error.
func TestPlanImagesWhenTheGPUIsFull(t *testing.T) {
	r := newImageRig(t, 1<<30)
	alloc := driver.MemAlloc
	driver.MemAlloc = func(p *devicePtr, size uintptr) cuResult { return cuErrorOutOfMemoryForTest }
	var busy *devicePlan
	var busyPlan *snac.Plan
	uploads := 0
	for i := range 400 { // 33-66 KB images: far more than the first chunk holds
		p := r.plan(uint64(8192 + 64*i))
		d := r.upload(p)
		uploads++
		r.run(d)
		if i == 0 {
			busy, busyPlan = d, p // never ends
			continue
		}
		r.end(d)
	}
	require.Len(t, r.c.chunks, 1, "the first chunk only")
	r.intact(busyPlan, busy, "still running")

	driver.MemAlloc = alloc
	huge := r.plan(64 << 20) // 2 MB: more than the first chunk
	driver.MemAlloc = func(p *devicePtr, size uintptr) cuResult { return cuErrorOutOfMemoryForTest }
	_, err := r.c.upload(huge, r.copies)
	require.ErrorContains(t, err, "cuMemAlloc")
	r.intact(busyPlan, busy, "still running")
}

// cuErrorOutOfMemoryForTest is CUDA_ERROR_OUT_OF_MEMORY (cuda.h).
const cuErrorOutOfMemoryForTest cuResult = 2
