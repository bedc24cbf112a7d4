package cuda

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"

	"purlin/config"
	"purlin/snac"
)

// plans caches device Plans by *snac.Plan: comm caches Plans per shape, so
// a pointer names one immutable Plan. Lookups are lock-free (sync.Map); a
// miss uploads under mu.
//
// Device copies are also kept by content (a hash of their bytes): a Plan
// built again for a shape whose Plan comm's cache had dropped (a program
// cycling through more shapes than that cache holds) finds the copy its
// twin left and uploads nothing. The pointer map is emptied when it holds maxPointers, or Plans of
// maxNamedBytes, so Plans comm's cache dropped are not kept alive by it.
//
// Images lie in chunks of device memory allocated ahead of them: the first
// when the rank is made (reserve), each later one, when an image does not
// fit, twice the size of the one before. An allocation per image would put a
// device memory allocation between two launches on different streams of the
// GPU, which CUDA documents keeps them from running at the same time
// (implicit synchronization): the kernel of a call of a new shape would
// wait for the kernels already on the GPU, the caller's compute on another
// stream among them.
//
// Images are reclaimed, so that a program that calls with ever new sizes
// (a server's prefill, one size per batch) holds a bounded amount of them:
// once the reclaimable ones pass the budget (PURLIN_PLAN_BYTES, else
// planBudget), an upload frees the oldest idle ones, down to half of it,
// and places new images in their room. An image is reclaimable when no CUDA graph holds it: a graph may
// replay it at any time, so a launch during a capture pins its image for
// the rank's life (as the copy engine's Plans are, whose stream operations
// read it too). Idle means not launched since the last reclaim looked, and
// every launched block done with it: each launch is counted (imageCounts,
// launch.h purlin_launch) and each block of purlin_run and of
// purlin_epilogue counts itself in the image's header once it has read the
// last of it (csrc/run.cu: purlin_run at its start where its steps fit one
// batch, else at its end), so an image whose header holds its launches
// times their blocks (devicePlan.blocks) is read by no kernel, queued or
// running.
type plans struct {
	cache    sync.Map // *snac.Plan -> *devicePlan
	mu       sync.Mutex
	pointers int                      // entries in cache; guarded by mu
	named    uint64                   // the bytes of their Plans (snac.Plan.Bytes); guarded by mu
	maxNamed uint64                   // replaces maxNamedBytes where set (a test's)
	images   map[uint64][]*devicePlan // the device copies, by a hash of their bytes; guarded by mu
	// chunks are the allocations images lie in, spare their free ranges
	// in address order. Guarded by mu.
	chunks []span
	spare  []span
	// evictable are the images a reclaim may free, oldest first, and
	// evictableBytes their room; budget replaces planBudget where set (a
	// test's). Guarded by mu.
	evictable      []*devicePlan
	evictableBytes uintptr
	budget         uintptr
	// counts are every reclaimable image's, freed with the rank: a C
	// record may name an image's counts after it is freed.
	counts []*imageCounts
	// scratch is where an upload encodes its image (appendPlan), kept for
	// the next. Guarded by mu.
	scratch []byte
}

// span is a range of device memory in chunks[chunk].
type span struct {
	ptr   devicePtr
	size  uintptr
	chunk int
}

const (
	// planChunk is the size of a rank's first chunk of Plan images: it
	// holds dozens to hundreds of packet Plans (0.5-120 KB each); a ring's
	// image grows with its size (AllReduce of 1 GiB: 2.6 MB on 2 ranks, 30
	// MB on 8), and takes a chunk of its own when larger than the next.
	// Each chunk is twice the one before, planChunkGrowth times at most.
	planChunk       = 2 << 20
	planChunkGrowth = 5
	// planBudget is the room of reclaimable images past which an upload
	// reclaims idle ones.
	planBudget = 64 << 20
	// imageHeader is the bytes before an image's steps: the count of the
	// kernels' blocks done reading it (csrc/plan.cuh kImageHeader).
	imageHeader = 16
)

var zeroHeader [imageHeader]byte

// maxScratch is the largest buffer an upload keeps for the next one.
const maxScratch = 4 << 20

// maxPointers and maxNamedBytes bound the Plan pointers plans keeps, and
// their Plans' bytes (comm's cache holds 256 Plans a rank and 256 MiB of
// them, merged point-to-point Plans 64 more).
const (
	maxPointers   = 1024
	maxNamedBytes = 512 << 20
)

var imageSeed = maphash.MakeSeed()

// errLaunchRetry is purlin_launch's refusal to launch on an image: Launch
// pins it, or uploads its Plan again, and launches once more.
var errLaunchRetry = errors.New("cuda: the Plan's image must be pinned or uploaded again")

func (c *plans) lookup(p *snac.Plan) *devicePlan {
	if v, ok := c.cache.Load(p); ok {
		return v.(*devicePlan)
	}
	return nil
}

// upload places p in device memory, copied there on copies (copyToDevice:
// it has landed when upload returns, so a kernel on any stream, now or
// later, reads all of it); ctx is current and the caller holds the thread.
//
// A Plan first seen while a stream is being captured into a CUDA graph is
// uploaded the same way: reading a twin back, the allocation and the copy
// are not stream work of the capture, so the thread is in relaxed capture
// mode for them (relaxedCapture), as the graph then reads the Plan at every
// replay from device memory that lives as long as the rank (the launch pins
// it). There is no limit on how many new shapes a capture may hold.
func (c *plans) upload(p *snac.Plan, copies cuStream) (*devicePlan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.lookup(p); d != nil {
		return d, nil
	}
	b, err := appendPlan(c.scratch, p)
	if err != nil {
		return nil, err
	}
	defer c.keepScratch(b)
	if c.pointers >= maxPointers || c.named >= cmp.Or(c.maxNamed, maxNamedBytes) {
		c.forget()
	}
	restore, err := relaxedCapture()
	if err != nil {
		return nil, err
	}
	defer restore()
	// The host keeps no copy of an image's bytes: holds reads them back.
	// Two Plans of equal bytes and worker count have equal steps too (the
	// image's length fixes them), so they share a copy.
	key, size := maphash.Bytes(imageSeed, b), imageHeader+uintptr(len(b)+15)&^15
	for _, twin := range c.images[key] {
		if twin.nworkers == uint32(len(p.Workers)) && twin.size == size && c.holds(twin, b, copies) {
			c.remember(p, twin)
			return twin, nil
		}
	}
	d := &devicePlan{key: key}
	if len(b) == 0 {
		d.place(0, p)
		c.remember(p, d)
		return d, nil
	}
	if c.evictableBytes+size > c.limit() {
		c.reclaim(copies)
	}
	ptr, err := c.claim(size)
	if err != nil && len(c.evictable) > 0 {
		// No room for a new chunk (the caller's memory fills the GPU, as a
		// server's KV cache does): every idle image goes, and the new one
		// takes their room if it fits there.
		full, held := err, c.evictableBytes
		c.reclaimTo(0, len(c.evictable), true, copies)
		if ptr, err = c.claim(size); err == nil {
			config.Warnf("Plan images: %v; freed idle images (%d of %d bytes left) and placed a new one of %d bytes in their room", full, c.evictableBytes, held, size)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := copyImage(ptr, b, copies); err != nil {
		c.release(ptr, size) // the room is free again
		return nil, fmt.Errorf("cuda plan: %w", err)
	}
	d.base, d.size = ptr, size
	d.place(uint64(ptr)+imageHeader, p)
	if d.reclaimable() {
		d.counts = newImageCounts()
		c.counts = append(c.counts, d.counts)
		c.evictable = append(c.evictable, d)
		c.evictableBytes += size
	}
	if c.images == nil {
		c.images = map[uint64][]*devicePlan{}
	}
	c.images[key] = append(c.images[key], d)
	c.remember(p, d)
	return d, nil
}

// keepScratch keeps b's memory for the next upload's image, unless it is
// large (a ring's, built anew for each size anyway).
func (c *plans) keepScratch(b []byte) {
	c.scratch = nil
	if cap(b) <= maxScratch {
		c.scratch = b[:0]
	}
}

// holds reports whether d's image is b: a copy back from the device (the
// hash said it is, and is wrong once in 2^64).
func (c *plans) holds(d *devicePlan, b []byte, copies cuStream) bool {
	got := make([]byte, len(b))
	if r := driver.MemcpyDtoHAsync(unsafe.Pointer(&got[0]), devicePtr(d.steps), uintptr(len(b)), copies); r != cuSuccess {
		return false
	}
	return driver.StreamSynchronize(copies) == cuSuccess && bytes.Equal(got, b)
}

// copyImage writes a zero header and then b at ptr, on copies, and waits
// for both.
func copyImage(ptr devicePtr, b []byte, copies cuStream) error {
	if r := driver.MemcpyHtoDAsync(ptr, unsafe.Pointer(&zeroHeader[0]), imageHeader, copies); r != cuSuccess {
		return cuErr(r, "cuMemcpyHtoDAsync", "an image's header")
	}
	return copyToDevice(ptr+imageHeader, b, copies)
}

// reclaimable reports whether kernels alone read d's image, each block
// counting itself: not the copy engine.
func (d *devicePlan) reclaimable() bool { return d.engine == nil }

func (c *plans) limit() uintptr { return cmp.Or(c.budget, planBudget) }

// reclaim frees idle reclaimable images, oldest first, until their room
// is at most half the budget, none is left to look at, or it has read
// maxHeaderReads headers (each a copy from the device, waited for: a pass
// of small images would otherwise stall one call for milliseconds; the
// next uploads go on); the caller holds mu and has ctx current.
func (c *plans) reclaim(copies cuStream) { c.reclaimTo(c.limit()/2, maxHeaderReads, false, copies) }

// reclaimTo is reclaim down to target bytes, reading at most reads
// headers; with every set, images launched since the last look are looked
// at too (the device has no room for a new chunk).
func (c *plans) reclaimTo(target uintptr, reads int, every bool, copies cuStream) {
	keep := c.evictable[:0]
	for i, d := range c.evictable {
		if c.evictableBytes <= target || reads == 0 {
			keep = append(keep, c.evictable[i:]...)
			break
		}
		if every {
			d.seen = d.counts.launches().Load()
		}
		left, read := c.settle(d, copies)
		if read {
			reads--
		}
		if left {
			c.evictableBytes -= d.size
		} else {
			keep = append(keep, d)
		}
	}
	clear(c.evictable[len(keep):])
	c.evictable = keep
}

// maxHeaderReads bounds the headers one reclaim reads.
const maxHeaderReads = 16

// settle reports whether d leaves the reclaimable images (pinned, or idle
// and freed now), and whether it read d's header to tell. The mark comes
// before the count is read: a launch that counted itself after the read
// sees the mark and backs off (purlin_launch), and one counted before it
// is in the count.
func (c *plans) settle(d *devicePlan, copies cuStream) (left, read bool) {
	state, launched := d.counts.status(), d.counts.launches()
	if n := launched.Load(); n != d.seen {
		d.seen = n // launched since the last look: kept another round
		return state.Load() == imagePinned, false
	}
	if !state.CompareAndSwap(imageLive, imageRetired) {
		return true, false // pinned
	}
	n := launched.Load()
	if ended, err := endedBlocks(d, copies); err != nil || ended != n*d.blocks {
		state.Store(imageLive)
		d.seen = n
		return false, true
	}
	state.Store(imageFreed)
	c.drop(d)
	return true, true
}

// endedBlocks reads the count in d's header: the kernels' blocks done
// reading it.
func endedBlocks(d *devicePlan, copies cuStream) (uint64, error) {
	var n uint64
	if r := driver.MemcpyDtoHAsync(unsafe.Pointer(&n), d.base, 8, copies); r != cuSuccess {
		return 0, cuErr(r, "cuMemcpyDtoHAsync", "an image's header")
	}
	return n, cuErr(driver.StreamSynchronize(copies), "cuStreamSynchronize", "after reading an image's header")
}

// drop forgets freed d and gives its room back; the caller holds mu.
func (c *plans) drop(d *devicePlan) {
	for _, p := range d.names {
		if c.cache.CompareAndDelete(p, d) {
			c.pointers--
			c.named -= p.Bytes()
		}
	}
	d.names = nil
	list := slices.DeleteFunc(c.images[d.key], func(twin *devicePlan) bool { return twin == d })
	if len(list) == 0 {
		delete(c.images, d.key)
	} else {
		c.images[d.key] = list
	}
	c.release(d.base, d.size)
}

// pin keeps d's image for the rank's life, unless it was freed (false):
// Launch's slow path after purlin_launch refused it, because the stream was
// being captured, or a reclaim was looking at it (which has since kept it,
// and pinning it costs little), or freed it (the caller uploads the Plan
// again).
func (c *plans) pin(d *devicePlan) bool {
	if d.counts == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	state := d.counts.status()
	return state.CompareAndSwap(imageLive, imagePinned) || state.Load() == imagePinned
}

// reserve allocates the first chunk of Plan images; ctx is current.
func (c *plans) reserve() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.chunks) > 0 {
		return nil
	}
	return c.grow(planChunk)
}

// claim returns size bytes (a multiple of 16) for an image, the first
// spare range that holds them or a new chunk; the caller holds mu and has
// ctx current.
func (c *plans) claim(size uintptr) (devicePtr, error) {
	for i := range c.spare {
		s := &c.spare[i]
		if s.size < size {
			continue
		}
		ptr := s.ptr
		s.ptr, s.size = s.ptr+devicePtr(size), s.size-size
		if s.size == 0 {
			c.spare = slices.Delete(c.spare, i, i+1)
		}
		return ptr, nil
	}
	if err := c.grow(max(size, planChunk<<min(len(c.chunks), planChunkGrowth))); err != nil {
		return 0, err
	}
	return c.claim(size)
}

// grow allocates a chunk of n bytes, all of it spare; the caller holds mu
// and has ctx current.
func (c *plans) grow(n uintptr) error {
	var ptr devicePtr
	if r := driver.MemAlloc(&ptr, n); r != cuSuccess {
		return cuErr(r, "cuMemAlloc", "Plans, a chunk of ", n, " bytes")
	}
	c.chunks = append(c.chunks, span{ptr: ptr, size: n, chunk: len(c.chunks)})
	c.release(ptr, n)
	return nil
}

// release makes [ptr, ptr+size) spare, joined to the spare ranges of its
// chunk it touches; the caller holds mu.
func (c *plans) release(ptr devicePtr, size uintptr) {
	chunk := slices.IndexFunc(c.chunks, func(s span) bool { return ptr >= s.ptr && ptr < s.ptr+devicePtr(s.size) })
	i, _ := slices.BinarySearchFunc(c.spare, ptr, func(s span, p devicePtr) int { return cmp.Compare(s.ptr, p) })
	c.spare = slices.Insert(c.spare, i, span{ptr: ptr, size: size, chunk: chunk})
	if i+1 < len(c.spare) && c.touch(c.spare[i], c.spare[i+1]) {
		c.spare[i].size += c.spare[i+1].size
		c.spare = slices.Delete(c.spare, i+1, i+2)
	}
	if i > 0 && c.touch(c.spare[i-1], c.spare[i]) {
		c.spare[i-1].size += c.spare[i].size
		c.spare = slices.Delete(c.spare, i, i+1)
	}
}

func (c *plans) touch(a, b span) bool { return a.chunk == b.chunk && a.ptr+devicePtr(a.size) == b.ptr }

// remember maps p to d; the caller holds mu.
func (c *plans) remember(p *snac.Plan, d *devicePlan) {
	c.cache.Store(p, d)
	c.pointers++
	c.named += p.Bytes()
	d.names = append(d.names, p)
}

// forget empties the pointer map; the caller holds mu.
func (c *plans) forget() {
	c.cache.Clear()
	c.pointers, c.named = 0, 0
	for _, list := range c.images {
		for _, d := range list {
			d.names = nil
		}
	}
}

func (c *plans) free() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.chunks {
		driver.MemFree(s.ptr)
	}
	for _, n := range c.counts {
		freeImageCounts(n)
	}
	c.images, c.pointers, c.named, c.counts = nil, 0, 0, nil
	c.chunks, c.spare, c.evictable, c.evictableBytes = nil, nil, nil, 0
	c.cache.Clear()
}
