package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"purlin/atom"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// Rank is one rank's GPU datapath: its symmetric memory, epochs, abort flag
// and status word, the kernel loaded in its context, and its cached Plans.
// Launch may be called from any goroutine; the fields below are set by
// NewRank and read-only afterwards, except the plan cache (its own lock).
type Rank struct {
	topo   snac.Topology
	device int
	ctx    cuContext
	// scratch is a multi-node communicator's (Scratch); 0 until asked for.
	// retired holds the scratch it outgrew, kept until Close. side is its
	// stream for network phases (SideStream), likewise.
	scratch      devicePtr
	scratchBytes uint64
	retired      []devicePtr
	side         cuStream
	fn           kernels
	pdl          bool        // launches may be programmatic dependent launches (compute capability 9.0 and up, PURLIN_PDL; not where ranks share a GPU): launchesPDL
	order        launchOrder // the rank's launches across streams
	layout       layout
	mem          *symmetric
	epochs       devicePtr
	host         hostMapped // [0:4] abort word (uint32, see abortAll), [8:16] status word (uint64)
	copies       cuStream   // private non-blocking stream of copyToDevice (Plan uploads, window writes)
	base         launchArgs // the Launch fields every call shares
	plans        plans
	engine       engineStreams                        // side streams of copy-engine Plans; made only where the topology has a copy engine
	gone         [snac.MaxRanks]atomic.Pointer[error] // why rank q is gone (PeerGone); set before its bit
	// unmapLater holds other processes' window allocations whose window
	// closed while the context could not be waited for (UserWindow.Close):
	// unmapped at Close, after the context has finished with them.
	unmapMu    sync.Mutex
	unmapLater []vmm
}

// keepMapped hands ms to the rank, to unmap at its Close.
func (r *Rank) keepMapped(ms []vmm) {
	r.unmapMu.Lock()
	r.unmapLater = append(r.unmapLater, ms...)
	r.unmapMu.Unlock()
}

// abortAll is the bit of the abort word that Abort sets: it ends every wait.
// Bit q (q < snac.MaxRanks) says rank q's process is gone (PeerGone): it
// ends the waits for what rank q writes. csrc/flags.cuh reads them (kAbortAll).
const abortAll = 1 << 31

var _ atom.Rank = (*Rank)(nil)

// NewRank sets up rank topo.Rank on device opts.Device: the caller's current
// context if it is that device's, else the device's primary context. Every
// rank of the communicator must call it (it exchanges memory through ex).
func NewRank(topo snac.Topology, ex atom.Exchange, opts atom.Options) (*Rank, error) {
	if len(kernelImage) == 0 {
		return nil, errs.New(errs.ErrUnsupported, "cuda NewRank: built without CUDA kernels")
	}
	if err := loadDriver(); err != nil {
		return nil, err
	}
	if topo.NRanks < 1 || topo.NRanks > snac.MaxRanks || topo.Rank < 0 || topo.Rank >= topo.NRanks {
		return nil, errs.New(errs.ErrInvalidArgument, "cuda NewRank: rank %d of %d", topo.Rank, topo.NRanks)
	}
	r := &Rank{topo: topo, device: opts.Device, layout: newLayout(topo)}
	var prev cuContext
	if res := driver.CtxGetCurrent(&prev); res != cuSuccess {
		return nil, cuErr(res, "cuCtxGetCurrent")
	}
	ctx, err := bindContext(opts.Device)
	if err != nil {
		return nil, err
	}
	r.ctx = ctx
	err = inContext(ctx, func() error { return r.setup(ex, opts) })
	if prev != 0 && prev != ctx {
		driver.CtxSetCurrent(prev)
	}
	if err != nil {
		r.free()
		return nil, err
	}
	return r, nil
}

func (r *Rank) setup(ex atom.Exchange, opts atom.Options) error {
	var err error
	if r.fn, err = kernelFunctions(r.ctx); err != nil {
		return err
	}
	if r.pdl, err = pdlUsable(); err != nil {
		return err
	}
	if err = r.order.init(); err != nil {
		return err
	}
	if res := driver.StreamCreate(&r.copies, streamNonBlocking); res != cuSuccess {
		return cuErr(res, "cuStreamCreate", "copies")
	}
	r.plans.budget = uintptr(config.Get().PlanBytes) // PURLIN_PLAN_BYTES, else planBudget
	if err = r.plans.reserve(); err != nil {
		return err
	}
	if r.topo.EngineMin > 0 {
		if err := r.engine.init(); err != nil {
			return err
		}
	}
	if r.host, err = allocHostMapped(64); err != nil {
		return err
	}
	size := uintptr(snac.NumEpochs*8 + 8) // the epochs, then the broken word (csrc/run.cu)
	if res := driver.MemAlloc(&r.epochs, size); res != cuSuccess {
		return cuErr(res, "cuMemAlloc", "epochs")
	}
	if res := driver.MemsetD8(r.epochs, 0, size); res != cuSuccess {
		return cuErr(res, "cuMemsetD8", "epochs")
	}
	if r.mem, err = shareSymmetric(ex, r.device, r.layout); err != nil {
		return err
	}
	if r.mem.crowd > 1 {
		r.shareDevices()
	}
	timeout := opts.TimeoutNanos
	if timeout <= 0 {
		timeout = int64(config.Get().Timeout)
	}
	r.base = launchArgs{
		Epochs:    uint64(r.epochs),
		AbortFlag: uint64(r.host.dev),
		Status:    uint64(r.host.dev) + 8,
		TimeoutNs: uint64(timeout),
		Rank:      int32(r.topo.Rank),
		Peers:     r.mem.peersOf(r.layout, r.topo.NRanks),
	}
	return nil
}

// launchesPDL reports whether the rank's launches are programmatic
// dependent launches: where the GPU allows it and PURLIN_PDL does, unless
// ranks of this process share its device, now or since a communicator
// placed them so (deviceShared; shareDevices says why).
func (r *Rank) launchesPDL() bool { return r.pdl && !deviceShared(r.device) }

// shareDevices adapts a communicator whose ranks share GPUs (ranks of one
// process that NCCL would refuse as duplicates): their kernels wait for
// each other, so they must all be on a GPU's SMs at once. Programmatic
// dependent launch is turned off: with it, four to eight ranks on one H200
// waited for each other until the timeout where the same calls without it
// ended (docs/performance.md, twenty-second session); it is off for every
// rank on such a device, of any communicator (launchesPDL). And a launch
// gets at most SMs / crowd blocks (taking a block of purlin_run to fill an
// SM, as its launch bounds allow), a Plan's and a group's merged sends and
// receives (snac.Topology.LaunchWorkers) alike, the same
// number on every rank: crowd is the same everywhere, and so are the SMs of
// a server's GPUs (where they differ, the ranks' Plans disagree, and every
// call fails saying so).
func (r *Rank) shareDevices() {
	if r.pdl {
		r.pdl = false
		config.Infof("rank %d: up to %d ranks share a device: programmatic dependent launch off", r.topo.Rank, r.mem.crowd)
	}
	var dev cuDevice
	var sms int32
	if driver.CtxGetDevice(&dev) != cuSuccess || driver.DeviceGetAttribute(&sms, deviceAttrMultiprocessors, dev) != cuSuccess {
		return
	}
	fit := max(int(sms)/r.mem.crowd, 1)
	if r.topo.Workers > fit {
		config.Infof("rank %d: up to %d ranks share a device of %d SMs: at most %d blocks a call, not %d", r.topo.Rank, r.mem.crowd, sms, fit, r.topo.Workers)
		r.topo.Workers = fit
	}
	r.topo.LaunchWorkers = fit // a group's sends and receives too, merged into one launch
}

// Topology is the topology the rank's Plans must be built for: the one it
// was made with, with fewer workers where ranks share a GPU (shareDevices).
func (r *Rank) Topology() snac.Topology { return r.topo }

// Launch enqueues plan on stream (a CUstream / cudaStream_t; 0 is the
// legacy default stream) and returns at once. It is legal during CUDA graph
// capture, also for a Plan first seen there (see plans.upload).
func (r *Rank) Launch(plan *snac.Plan, bufs []atom.Buffers, stream uintptr) error {
	if len(plan.Workers) == 0 {
		return nil
	}
	if len(bufs) > MaxBuffers {
		return errs.New(errs.ErrUnsupported, "cuda Launch rank %d: %d buffer pairs, at most %d", r.topo.Rank, len(bufs), MaxBuffers)
	}
	for tries := 0; ; tries++ {
		d := r.plans.lookup(plan)
		if d == nil {
			err := inContext(r.ctx, func() (err error) {
				d, err = r.plans.upload(plan, r.copies)
				return err
			})
			if err != nil {
				return err
			}
		}
		err := r.launch(plan, d, bufs, cuStream(stream))
		if err != errLaunchRetry {
			return err
		}
		// The image was being captured, or reclaimed: pinned, it launches
		// next time; freed, its Plan is uploaded again.
		if !r.plans.pin(d) && tries == maxLaunchTries {
			return errs.New(errs.ErrInternal, "cuda Launch rank %d: the Plan's image was reclaimed %d times before it could launch", r.topo.Rank, tries+1)
		}
	}
}

// maxLaunchTries bounds Launch's uploads of a Plan whose image other
// threads' uploads reclaim before it launches (each is idle until then).
const maxLaunchTries = 8

// launch enqueues plan, uploaded as d, on stream: errLaunchRetry where d's
// image may not be read now (purlin_launch).
func (r *Rank) launch(plan *snac.Plan, d *devicePlan, bufs []atom.Buffers, stream cuStream) error {
	var args launchArgs
	r.fillArgs(&args, plan, d, bufs)
	split := uint32(0) // purlin_epilogue's blocks a worker; 0: none to launch
	if d.epilogue != [MaxBuffers]spec.EpilogueKind{} {
		if err := epilogueBuffers(d, bufs, r.topo.Rank); err != nil {
			return err
		}
		split = d.epilogueSplit
	}
	if d.engine != nil {
		return r.launchEngine(plan, d, bufs, stream, &args, split)
	}
	return r.launchInOrder(d.nworkers, stream, &args, split, d.counts)
}

// fillArgs writes the Launch argument of plan, uploaded as d, with bufs.
func (r *Rank) fillArgs(args *launchArgs, plan *snac.Plan, d *devicePlan, bufs []atom.Buffers) {
	*args = r.base
	args.Steps, args.Workers, args.Fill = d.steps, d.workers, d.fill
	args.DType, args.Op, args.NRanks = int32(plan.Type), int32(plan.Op.Kind), int32(plan.Op.AvgDivisor(plan.NRanks))
	args.Scalar, args.ScalarPtr = plan.Op.Scalar, uint64(plan.Op.ScalarPtr)
	for i, b := range bufs {
		args.Send[i], args.Recv[i] = uint64(b.Send), uint64(b.Recv)
		args.Residual[i], args.Weight[i], args.Quant[i], args.Scales[i] = uint64(b.Residual), uint64(b.Weight), uint64(b.Quant), uint64(b.Scales)
	}
	// The peer slots of the Launch's calls (snac.PeerSlot); those past
	// the table, Merge never names.
	for s := range min(len(bufs)*r.topo.NRanks, len(args.PeerRecv)) {
		args.PeerRecv[s] = uint64(atom.PeerOutput(bufs, s, r.topo.NRanks))
	}
}

// epilogueBuffers checks that bufs holds every buffer d's Epilogue steps
// use (csrc/epilogue.cuh would fail the launch, and the rank, without one).
func epilogueBuffers(d *devicePlan, bufs []atom.Buffers, rank int) error {
	for i, k := range d.epilogue {
		if k == 0 {
			continue
		}
		var b atom.Buffers
		if i < len(bufs) {
			b = bufs[i]
		}
		for _, need := range []struct {
			p    uintptr
			used bool
			name string
		}{
			{b.Recv, true, "output"},
			{b.Residual, k&spec.EpilogueResidualAdd != 0, "residual"},
			{b.Weight, k&spec.EpilogueRMSNorm != 0, "weight"},
			{b.Quant, k&spec.EpilogueQuantFP8 != 0, "quant"},
			{b.Scales, k&spec.EpilogueQuantFP8 != 0, "scales"},
		} {
			if need.used && need.p == 0 {
				return errs.New(errs.ErrInternal, "cuda Launch rank %d: epilogue %s of buffer %d: the %s buffer is null", rank, k, i, need.name)
			}
		}
	}
	return nil
}

// AsyncError returns the first failure a kernel of this rank reported; a
// wait that a gone rank ended names why that rank is gone.
func (r *Rank) AsyncError() error {
	if r.host.host == nil {
		return nil
	}
	word := atomic.LoadUint64((*uint64)(unsafe.Add(r.host.host, 8)))
	if word>>56 == statusAborted && atomic.LoadUint32((*uint32)(r.host.host))&abortAll == 0 {
		// Only PeerGone bits: the wait's slot names the rank it waited for
		// (a packet wait reports slot 0: then any gone rank explains it).
		cause := r.goneCause(snac.SlotSource(uint32(word)))
		for q := 0; cause == nil && q < r.topo.NRanks; q++ {
			cause = r.goneCause(q)
		}
		if cause != nil {
			return fmt.Errorf("cuda kernel wait: %s: %w", statusWhere(word, r.topo.Rank), cause)
		}
	}
	return statusError(word, r.topo.Rank)
}

// Abort makes every wait of running and future kernels fail with ErrAborted.
func (r *Rank) Abort() {
	if r.host.host != nil {
		atomic.OrUint32((*uint32)(r.host.host), abortAll)
	}
}

// PeerGone makes the waits of running and future kernels for what rank peer
// writes (every other rank for peer -1) fail once memory does not satisfy
// them; see atom.Rank. A packet wait does not know its writer: any gone
// rank ends it.
func (r *Rank) PeerGone(peer int, cause error) {
	if r.host.host == nil {
		return
	}
	var bits uint32
	for q := range r.topo.NRanks {
		if q != r.topo.Rank && (peer < 0 || peer == q) {
			r.gone[q].CompareAndSwap(nil, &cause)
			bits |= 1 << q
		}
	}
	atomic.OrUint32((*uint32)(r.host.host), bits)
}

// goneCause returns why rank q is gone, or nil.
func (r *Rank) goneCause(q int) error {
	if q < 0 || q >= snac.MaxRanks {
		return nil
	}
	if e := r.gone[q].Load(); e != nil {
		return *e
	}
	return nil
}

// Close waits for the rank's context to finish its work (bounded: every
// kernel wait is), then frees the rank's memory.
func (r *Rank) Close() error {
	var err error
	if r.ctx != 0 {
		err = inContext(r.ctx, func() error {
			res := driver.CtxSynchronize()
			r.free()
			return cuErr(res, "cuCtxSynchronize", "closing rank ", r.topo.Rank)
		})
	}
	return err
}

// InContext runs f on a locked OS thread with the rank's context current
// (a multi-node communicator initialises and drives NCCL's network there).
func (r *Rank) InContext(f func() error) error { return inContext(r.ctx, f) }

// Scratch returns device memory of at least n bytes that the rank keeps
// until Close, for a multi-node communicator's Programs. Outgrown, it is
// replaced by a new allocation of at least twice its size, and the old one
// is kept until Close too: a kernel in flight or a CUDA graph captured
// earlier may still use it, and a call may come during a capture, where
// waiting for the context is not allowed (the allocation is made in
// relaxed capture mode: relaxedCapture). Doubling keeps what is retired
// below what is in use.
func (r *Rank) Scratch(n uint64) (uintptr, error) {
	if n <= r.scratchBytes {
		return uintptr(r.scratch), nil
	}
	err := inContext(r.ctx, func() error {
		restore, err := relaxedCapture()
		if err != nil {
			return err
		}
		defer restore()
		size := max(n, 2*r.scratchBytes)
		var p devicePtr
		if res := driver.MemAlloc(&p, uintptr(size)); res != cuSuccess {
			return cuErr(res, "cuMemAlloc", "scratch of ", size, " bytes")
		}
		if r.scratch != 0 {
			r.retired = append(r.retired, r.scratch)
		}
		r.scratch, r.scratchBytes = p, size
		return nil
	})
	return uintptr(r.scratch), err
}

// freeScratch frees the scratch and what it outgrew.
func (r *Rank) freeScratch() {
	for _, p := range append(r.retired, r.scratch) {
		if p != 0 {
			driver.MemFree(p)
		}
	}
	r.scratch, r.scratchBytes, r.retired = 0, 0, nil
}

// SideStream is a stream of the rank's own beside the caller's, made on
// first use and kept until Close: a multi-node communicator runs a
// Program's network phases there, so that they overlap the node's (Follow
// orders the two). Like Scratch, it is called by one thread at a time.
func (r *Rank) SideStream() (uintptr, error) {
	if r.side != 0 {
		return uintptr(r.side), nil
	}
	err := inContext(r.ctx, func() error {
		return cuErr(driver.StreamCreate(&r.side, streamNonBlocking), "cuStreamCreate", "side stream")
	})
	return uintptr(r.side), err
}

func (r *Rank) free() {
	r.freeScratch()
	r.unmapMu.Lock()
	for _, m := range r.unmapLater {
		m.free()
	}
	r.unmapLater = nil
	r.unmapMu.Unlock()
	if r.side != 0 {
		driver.StreamDestroy(r.side)
		r.side = 0
	}
	r.plans.free()
	r.order.free()
	r.engine.free()
	if r.mem != nil {
		r.mem.free()
		r.mem = nil
	}
	if r.epochs != 0 {
		driver.MemFree(r.epochs)
		r.epochs = 0
	}
	r.host.free()
	r.host = hostMapped{}
	if r.copies != 0 {
		driver.StreamDestroy(r.copies)
		r.copies = 0
	}
}
