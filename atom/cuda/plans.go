package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"purlin/errs"
	"purlin/snac"
)

// devicePlan is a Plan in memory the kernel reads:
//
//	[steps (snac.Step, byte-identical to csrc's Step) | workers | fill (uint16 per worker)]
//
// fill[w] is the number of workers of w's channel in the Plan: the worker
// of index 0 advances the channel's unused epoch slots from there on.
type devicePlan struct {
	steps, workers, fill uint64
	nworkers             uint32
}

// planBytes encodes plan's device image, checking what the kernel relies on.
func planBytes(p *snac.Plan) ([]byte, error) {
	nw, ns := len(p.Workers), len(p.Steps)
	if nw > snac.MaxWorkers {
		return nil, errs.New(errs.ErrInternal, "cuda plan: %d workers, at most %d", nw, snac.MaxWorkers)
	}
	perChannel := map[uint16]uint16{}
	for i, w := range p.Workers {
		if uint64(w.First)+uint64(w.Count) > uint64(ns) {
			return nil, errs.New(errs.ErrInternal, "cuda plan: worker %d's steps [%d,+%d) past %d", i, w.First, w.Count, ns)
		}
		if int(w.Channel) >= snac.NumChannels || int(w.Index) >= snac.MaxWorkers {
			return nil, errs.New(errs.ErrInternal, "cuda plan: worker %d's epoch slot (%d,%d) out of range", i, w.Channel, w.Index)
		}
		perChannel[w.Channel]++
	}
	for i, s := range p.Steps {
		if int(s.NSrc) > snac.MaxSrc || (s.Verb == snac.Reduce && s.NSrc == 0) || s.Verb > snac.Advance {
			return nil, errs.New(errs.ErrInternal, "cuda plan: step %d: bad verb %d or %d sources", i, s.Verb, s.NSrc)
		}
	}
	const stepSize, workerSize = int(unsafe.Sizeof(snac.Step{})), int(unsafe.Sizeof(snac.Worker{}))
	b := make([]byte, 0, ns*stepSize+nw*workerSize+2*nw)
	if ns > 0 {
		b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&p.Steps[0])), ns*stepSize)...)
	}
	if nw > 0 {
		b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&p.Workers[0])), nw*workerSize)...)
	}
	for _, w := range p.Workers {
		n := perChannel[w.Channel]
		b = append(b, byte(n), byte(n>>8))
	}
	return b, nil
}

func (d *devicePlan) place(base uint64, p *snac.Plan) {
	d.steps = base
	d.workers = base + uint64(len(p.Steps))*uint64(unsafe.Sizeof(snac.Step{}))
	d.fill = d.workers + uint64(len(p.Workers))*uint64(unsafe.Sizeof(snac.Worker{}))
	d.nworkers = uint32(len(p.Workers))
}

// plans caches device Plans by *snac.Plan: comm caches Plans per shape, so
// a pointer names one immutable Plan. Lookups are lock-free (sync.Map); a
// miss uploads under mu.
type plans struct {
	cache sync.Map // *snac.Plan -> *devicePlan
	mu    sync.Mutex
	// guarded by mu:
	device    []devicePtr // cuMemAlloc'd images
	arena     hostMapped  // images of Plans first seen during stream capture
	arenaSize uintptr
	used      uintptr
}

// captureArenaBytes is the room, per rank, for Plans first seen while their
// stream is being captured into a CUDA graph, when a synchronous copy to
// device memory is illegal: they live in host-mapped memory the kernel
// reads over the bus. Plans grow with the rank count (a staged AllReduce of
// 64 MiB is about 85 KiB at 2 ranks, 260 KiB at 3 and 410 KiB at 8), so the
// arena grows with it: 1 MiB a rank (it was 1 MiB for any rank count).
func captureArenaBytes(nranks int) uintptr { return uintptr(max(nranks, 1)) << 20 }

func (c *plans) lookup(p *snac.Plan) *devicePlan {
	if v, ok := c.cache.Load(p); ok {
		return v.(*devicePlan)
	}
	return nil
}

// upload places p where the kernel can read it; ctx is current. Outside
// capture it goes to device memory, copied there on copies (copyToDevice:
// it has landed when upload returns, so a kernel on any stream, now or
// later, reads all of it); during capture (of stream, or of any stream in
// global mode) into the host-mapped arena.
func (c *plans) upload(p *snac.Plan, stream, copies cuStream) (*devicePlan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.lookup(p); d != nil {
		return d, nil
	}
	b, err := planBytes(p)
	if err != nil {
		return nil, err
	}
	d := &devicePlan{}
	var capturing uint32
	if r := driver.StreamIsCapturing(stream, &capturing); r == cuErrorCaptureImplicit {
		capturing = 1 // the legacy stream while another stream captures in global mode
	} else if r != cuSuccess {
		return nil, cuErr(r, "cuStreamIsCapturing")
	}
	size := uintptr(len(b)+15) &^ 15
	switch {
	case len(b) == 0:
		d.place(0, p)
	case capturing != streamCaptureStatusNone:
		if c.arena.host == nil { // allocated by NewRank: allocating now would invalidate the capture
			return nil, errs.New(errs.ErrInternal, "cuda plan: no capture arena")
		}
		if c.used+size > c.arenaSize {
			return nil, errs.New(errs.ErrUnsupported, "cuda plan: %d bytes of Plans first seen during graph capture, at most %d: run the call once before capturing", c.used+size, c.arenaSize)
		}
		copy(unsafe.Slice((*byte)(unsafe.Add(c.arena.host, c.used)), len(b)), b)
		d.place(uint64(c.arena.dev)+uint64(c.used), p)
		c.used += size
	default:
		var ptr devicePtr
		if r := driver.MemAlloc(&ptr, size); r != cuSuccess {
			return nil, cuErr(r, "cuMemAlloc", "plan of ", size, " bytes")
		}
		if err := copyToDevice(ptr, b, copies); err != nil {
			driver.MemFree(ptr)
			return nil, fmt.Errorf("cuda plan: %w", err)
		}
		c.device = append(c.device, ptr)
		d.place(uint64(ptr), p)
	}
	c.cache.Store(p, d)
	return d, nil
}

// init allocates the capture arena for a rank of nranks; it runs at
// NewRank, outside any capture.
func (c *plans) init(nranks int) (err error) {
	c.arenaSize = captureArenaBytes(nranks)
	c.arena, err = allocHostMapped(c.arenaSize)
	return err
}

func (c *plans) free() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.device {
		driver.MemFree(p)
	}
	c.device = nil
	c.arena.free()
	c.arena, c.arenaSize = hostMapped{}, 0
	c.cache.Clear()
}
