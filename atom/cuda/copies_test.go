package cuda

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/snac"
	"purlin/spec"
)

// modelDevice stands in for the CUDA driver with no more than CUDA promises
// about a copy from pageable host memory to the device ("API
// synchronization behavior"): the copy call returns once the source is
// staged, and the bytes land in device memory when the stream the copy runs
// on is synchronized, not before. Device memory starts as stale bytes. A
// kernel launched at that moment on a non-blocking stream reads what
// modelDevice.read returns.
//
// The caller's stream (launch) holds a kernel waiting for a peer: waiting
// for it, or for the whole context, would stall until the peer's next call.
type modelDevice struct {
	t       *testing.T
	mem     map[devicePtr][]byte
	next    devicePtr
	pending map[cuStream][]func() // staged copies, by stream
	launch  cuStream
	// capturing: launch is being captured into a graph in global mode, where
	// an allocation or a wait made in any thread not in relaxed mode
	// invalidates the capture (cudaStreamBeginCapture); mode is the thread's.
	capturing bool
	mode      uint32
}

const modelContext cuContext = 0x100

// useModelDevice replaces the driver's entry points that a copy into device
// memory uses by the model, until the test ends.
func useModelDevice(t *testing.T, launch cuStream) *modelDevice {
	saved := driver
	t.Cleanup(func() { driver = saved })
	m := &modelDevice{t: t, mem: map[devicePtr][]byte{}, next: 1 << 20, pending: map[cuStream][]func(){}, launch: launch}
	driver.CtxGetCurrent = func(c *cuContext) cuResult { *c = modelContext; return cuSuccess }
	driver.StreamIsCapturing = func(s cuStream, st *uint32) cuResult {
		*st = streamCaptureStatusNone
		if s == m.launch && m.capturing {
			*st = streamCaptureStatusActive
		}
		return cuSuccess
	}
	driver.ThreadExchangeStreamCaptureMode = func(mode *uint32) cuResult {
		*mode, m.mode = m.mode, *mode
		return cuSuccess
	}
	driver.MemAlloc = func(p *devicePtr, size uintptr) cuResult {
		if m.unsafe("cuMemAlloc") {
			return cuErrorCaptureUnsupported
		}
		*p = m.next
		m.mem[m.next] = bytes.Repeat([]byte{0xA5}, int(size))
		m.next += devicePtr(size+255) &^ 255
		return cuSuccess
	}
	driver.MemFree = func(p devicePtr) cuResult { delete(m.mem, p); return cuSuccess }
	driver.MemcpyHtoDAsync = func(dst devicePtr, src unsafe.Pointer, size uintptr, s cuStream) cuResult {
		if s == m.launch && m.capturing {
			t.Errorf("copied on the stream being captured: the graph would copy again at every replay")
		}
		staged := bytes.Clone(unsafe.Slice((*byte)(src), size))
		m.pending[s] = append(m.pending[s], func() { copy(m.at(dst, len(staged)), staged) })
		return cuSuccess
	}
	driver.MemcpyDtoHAsync = func(dst unsafe.Pointer, src devicePtr, size uintptr, s cuStream) cuResult {
		if s == m.launch {
			t.Errorf("read device memory on the caller's stream, where a kernel waits for a peer")
		}
		copy(unsafe.Slice((*byte)(dst), size), m.at(src, int(size))) // pageable: done on return
		return cuSuccess
	}
	driver.StreamSynchronize = func(s cuStream) cuResult {
		if m.unsafe("cuStreamSynchronize") {
			return cuErrorCaptureUnsupported
		}
		if s == m.launch {
			t.Errorf("waited for the caller's stream, where a kernel waits for a peer")
			return cuSuccess
		}
		for _, land := range m.pending[s] {
			land()
		}
		delete(m.pending, s)
		return cuSuccess
	}
	driver.CtxSynchronize = func() cuResult {
		t.Errorf("waited for the whole context, where a kernel waits for a peer")
		return cuSuccess
	}
	return m
}

// unsafe reports (and fails the test for) a call that would invalidate the
// capture in progress.
func (m *modelDevice) unsafe(call string) bool {
	if m.capturing && m.mode != streamCaptureModeRelaxed {
		m.t.Errorf("%s during a global-mode capture, in capture mode %d: the capture is invalidated", call, m.mode)
		return true
	}
	return false
}

// at is device memory [p, p+n) inside one allocation.
func (m *modelDevice) at(p devicePtr, n int) []byte {
	for base, b := range m.mem {
		if p >= base && int(p-base)+n <= len(b) {
			return b[p-base : int(p-base)+n]
		}
	}
	m.t.Fatalf("device range %#x+%d is in no allocation", p, n)
	return nil
}

// stale is the offset of the first byte of want that a kernel launched now
// would not read at p, or -1.
func (m *modelDevice) stale(p devicePtr, want []byte) int {
	got := m.at(p, len(want))
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

// TestCopiesHaveLandedOnReturn: what the CUDA Atom copies into device memory
// is there when the copy returns, for a kernel launched next on any stream,
// and the copy waits for no one else's work. With cuMemcpyHtoD, the kernel
// of a call of a new shape, launched at once on the caller's non-blocking
// stream, could read part of its Plan before it landed: its worker table
// first of all (the image's tail, the last bytes to land), as whatever the
// memory held before. A block then runs at another epoch slot's epoch or
// other steps, and a healthy peer sees ranks that disagree on the call, or
// waits for a flag that never comes.
func TestCopiesHaveLandedOnReturn(t *testing.T) {
	const launch, copies cuStream = 0x51, 0x52
	call := &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 4 << 20,
		Rank: 1, NRanks: 8, Send: 1 << 40, Recv: 2 << 40}
	plan, err := snac.Build(call, Topology(8, 1))
	require.NoError(t, err)
	image, err := planBytes(plan)
	require.NoError(t, err)
	require.Greater(t, len(image), 512<<10, "a large Plan (its image's tail lands last)")

	t.Run("plan upload", func(t *testing.T) {
		m := useModelDevice(t, launch)
		var c plans
		d, err := c.upload(plan, copies)
		require.NoError(t, err)
		require.Equal(t, -1, m.stale(devicePtr(d.steps), image), "the first byte of the %d-byte Plan a kernel launched now would not read", len(image))
		again, err := c.upload(plan, copies)
		require.NoError(t, err)
		require.Same(t, d, again, "uploaded once")
	})
	t.Run("window write", func(t *testing.T) {
		m := useModelDevice(t, launch)
		var buf devicePtr
		require.Equal(t, cuResult(cuSuccess), driver.MemAlloc(&buf, 4<<20))
		w := &UserWindow{ctx: modelContext, copies: copies, size: 4 << 20, peers: []uintptr{uintptr(buf)}}
		src := bytes.Repeat([]byte{7, 1, 9}, 1<<20)
		require.NoError(t, w.Write(0, 1000, src))
		require.Equal(t, -1, m.stale(buf+1000, src), "the first byte written that a kernel launched now would not read")
	})
}

// TestPlansFirstSeenDuringCapture: while the caller's stream is being
// captured in global mode (PyTorch's default), a Plan of a new shape is
// uploaded like any other, to device memory and landed on return, without
// invalidating the capture (the thread is in relaxed mode for the upload
// only) and without a limit on how many: 40 Plans of about 800 KB each, where a
// fixed arena of host-mapped memory held 1 MiB a rank and refused the rest.
// A Plan built again (its twin: equal bytes, another Plan) finds the copy
// already there, also during the capture: reading it back to compare is a
// wait that would invalidate the capture outside relaxed mode (difftest,
// two ranks of one process, a group on three communicators with the call
// cache on, found it).
func TestPlansFirstSeenDuringCapture(t *testing.T) {
	const launch, copies cuStream = 0x51, 0x52
	m := useModelDevice(t, launch)
	m.capturing, m.mode = true, streamCaptureModeGlobal
	var c plans
	total := 0
	for i := range 40 {
		call := &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: 4<<20 + uint64(i)<<10,
			Rank: 1, NRanks: 8, Send: 1 << 40, Recv: 2 << 40}
		plan, err := snac.Build(call, Topology(8, 1))
		require.NoError(t, err)
		image, err := planBytes(plan)
		require.NoError(t, err)
		d, err := c.upload(plan, copies)
		require.NoError(t, err, "Plan %d, %d bytes of Plans before it", i, total)
		require.Equal(t, uint32(streamCaptureModeGlobal), m.mode, "the thread's capture mode is the caller's again")
		require.Equal(t, -1, m.stale(devicePtr(d.steps), image), "Plan %d: the first byte a kernel launched now would not read", i)
		total += len(image)
		twin, err := snac.Build(call, Topology(8, 1))
		require.NoError(t, err)
		again, err := c.upload(twin, copies)
		require.NoError(t, err, "Plan %d's twin", i)
		require.Same(t, d, again, "Plan %d's twin shares its copy", i)
		require.Equal(t, uint32(streamCaptureModeGlobal), m.mode, "the thread's capture mode is the caller's again")
	}
	require.Greater(t, total, 28<<20, "over 28 MiB of Plans")
}

// placed is the room of the device copies c holds, each with its header
// and rounded to 16 as upload places it (devicePlan.size).
func placed(c *plans) uintptr {
	var n uintptr
	for _, list := range c.images {
		for _, d := range list {
			n += d.size
		}
	}
	return n
}

// TestPlanCopiesByContent: a Plan built again for a shape (comm's cache
// dropped the first one, or a program cycles through more shapes than it
// holds) finds its twin's device copy: device memory grows with the distinct
// Plans, not with how often they are built, and the pointers kept stay
// bounded.
func TestPlanCopiesByContent(t *testing.T) {
	const launch, copies cuStream = 0x51, 0x52
	m := useModelDevice(t, launch)
	build := func(count uint64) *snac.Plan {
		call := &spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: count,
			Rank: 0, NRanks: 2, Send: 1 << 40, Recv: 2 << 40}
		plan, err := snac.Build(call, Topology(2, 0))
		require.NoError(t, err)
		return plan
	}
	var c plans
	first, err := c.upload(build(1<<20), copies)
	require.NoError(t, err)
	one := placed(&c)
	twin := build(1 << 20)
	again, err := c.upload(twin, copies)
	require.NoError(t, err)
	require.Same(t, first, again, "the twin's device copy")
	require.Same(t, first, c.lookup(twin), "found by the twin's pointer from then on")
	require.Equal(t, one, placed(&c), "no second copy")

	counts := []uint64{1 << 20, 3000, 1 << 24}
	distinct := map[uint64]uintptr{}
	for round := range 3 * maxPointers {
		count := counts[round%len(counts)]
		d, err := c.upload(build(count), copies)
		require.NoError(t, err)
		image, err := planBytes(build(count))
		require.NoError(t, err)
		require.Equal(t, -1, m.stale(devicePtr(d.steps), image), "round %d", round)
		distinct[count] = imageHeader + uintptr(len(image)+15)&^15
	}
	var want uintptr
	for _, n := range distinct {
		want += n
	}
	require.Equal(t, want, placed(&c), "one device copy per distinct Plan")
	require.Len(t, m.mem, 1, "all in the first chunk")
	require.LessOrEqual(t, c.pointers, maxPointers)

	// The host keeps no bytes: a twin is found by its hash and checked
	// against the device copy, which a copy whose bytes differ fails.
	c.forget()
	d, err := c.upload(build(1<<20), copies)
	require.NoError(t, err)
	image, err := planBytes(build(1 << 20))
	require.NoError(t, err)
	m.at(devicePtr(d.steps)+devicePtr(len(image)-1), 1)[0] ^= 1
	c.forget()
	other, err := c.upload(build(1<<20), copies)
	require.NoError(t, err)
	require.NotSame(t, d, other, "not the copy whose bytes differ")
	require.Equal(t, -1, m.stale(devicePtr(other.steps), image), "a copy of its own")
}

// TestPlansAllocateOnlyToGrow: a rank's Plan images lie in chunks allocated
// ahead of them (plans.reserve when the rank is made), so the call of a new
// shape allocates no device memory, which would keep its kernel from running
// beside any other kernel on the GPU; chunks double as images outgrow them,
// and a copy that fails gives its room back.
func TestPlansAllocateOnlyToGrow(t *testing.T) {
	const launch, copies cuStream = 0x51, 0x52
	m := useModelDevice(t, launch)
	var sizes []uintptr
	alloc := driver.MemAlloc
	driver.MemAlloc = func(p *devicePtr, size uintptr) cuResult {
		sizes = append(sizes, size)
		return alloc(p, size)
	}
	build := func(coll spec.Collective, count uint64) *snac.Plan {
		call := &spec.Call{Coll: coll, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}, Count: count,
			Rank: 0, NRanks: 8, Send: 1 << 40, Recv: 2 << 40}
		plan, err := snac.Build(call, Topology(8, 0))
		require.NoError(t, err)
		return plan
	}
	var c plans
	require.NoError(t, c.reserve())
	require.Equal(t, []uintptr{planChunk}, sizes)

	for count := uint64(1); count <= 4096; count = count*3 + 1 { // packet Plans of 8 ranks
		_, err := c.upload(build(spec.AllReduce, count), copies)
		require.NoError(t, err)
	}
	require.Len(t, sizes, 1, "small Plans fit the first chunk: %d bytes", placed(&c))

	for count := uint64(1 << 20); count <= 32<<20; count *= 2 { // staged and ring Plans, 0.2-8 MB each
		d, err := c.upload(build(spec.AllGather, count), copies)
		require.NoError(t, err)
		image, err := planBytes(build(spec.AllGather, count))
		require.NoError(t, err)
		require.Equal(t, -1, m.stale(devicePtr(d.steps), image), "count %d: the image lies whole in one chunk", count)
	}
	for i := 1; i < len(sizes); i++ {
		require.GreaterOrEqual(t, sizes[i], min(2*sizes[i-1], planChunk<<planChunkGrowth), "chunk %d of %v", i, sizes)
	}
	require.LessOrEqual(t, len(sizes), 6, "chunks %v for %d bytes of Plans", sizes, placed(&c))

	used, n := placed(&c), len(sizes)
	failed := build(spec.AllReduce, 5000)
	image, err := planBytes(failed)
	require.NoError(t, err)
	i := slices.IndexFunc(c.spare, func(s span) bool { return s.size >= imageHeader+uintptr(len(image)+15)&^15 })
	require.GreaterOrEqual(t, i, 0, "room for it in a chunk")
	first := c.spare[i].ptr
	copyAsync := driver.MemcpyHtoDAsync
	driver.MemcpyHtoDAsync = func(devicePtr, unsafe.Pointer, uintptr, cuStream) cuResult { return cuErrorNotReady }
	_, err = c.upload(failed, copies)
	require.Error(t, err)
	require.Equal(t, used, placed(&c))
	driver.MemcpyHtoDAsync = copyAsync
	d, err := c.upload(failed, copies)
	require.NoError(t, err)
	require.Len(t, sizes, n, "no new chunk")
	require.Equal(t, first, d.base, "placed where the failed copy would have been")
	c.free()
	require.Empty(t, m.mem, "every chunk freed")
}

// TestScratchGrowsDuringCapture: a multi-node communicator's scratch may
// first be needed, or outgrown, while the caller's stream is being
// captured: it grows without waiting for the context (not allowed during
// a capture, and a stall besides) and without invalidating the capture,
// and keeps what it outgrew until Close, since a graph captured before
// may still use it.
func TestScratchGrowsDuringCapture(t *testing.T) {
	const launch cuStream = 0x51
	m := useModelDevice(t, launch)
	m.capturing, m.mode = true, streamCaptureModeGlobal
	r := &Rank{ctx: modelContext}
	var held []uintptr
	for _, n := range []uint64{1000, 1000, 1500, 5000, 9000, 100} {
		p, err := r.Scratch(n)
		require.NoError(t, err, "%d bytes", n)
		require.Equal(t, uint32(streamCaptureModeGlobal), m.mode, "the thread's capture mode is the caller's again")
		m.at(devicePtr(p), int(n)) // allocated, n bytes on
		if len(held) == 0 || held[len(held)-1] != p {
			held = append(held, p)
		}
		for _, q := range held {
			m.at(devicePtr(q), 1000) // none freed
		}
	}
	require.Len(t, held, 4, "1000; 2000 (twice 1000) for 1500; 5000; 10000 for 9000")
	r.freeScratch()
	require.Empty(t, m.mem, "Close frees the scratch and what it outgrew")
}
