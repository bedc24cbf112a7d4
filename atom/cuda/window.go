package cuda

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"syscall"

	"purlin/atom"
	"purlin/errs"
)

// UserWindow is one rank's view of a symmetric window (ncclCommWindowRegister):
// every rank's registered buffer as a device address usable on this rank's
// device. Ranks of this process are reached through their own pointers (the
// allocation gets access for this device); ranks of other processes through
// their cuMem allocation, exported as a POSIX fd, imported and mapped here,
// until Close. A direct Plan (snac.SpacePeerRecv) pushes into peers'
// outputs through Peers.
type UserWindow struct {
	ctx     cuContext
	copies  cuStream  // the Rank's (Write)
	size    uint64    // bytes of each rank's buffer
	peers   []uintptr // by rank; immutable
	imports []vmm     // other processes' allocations mapped here
	rank    *Rank     // keeps the imports where Close cannot wait (keepMapped)
}

// Peers returns every rank's buffer as this rank's device addresses it.
func (w *UserWindow) Peers() []uintptr { return append([]uintptr(nil), w.peers...) }

// Close unmaps the other processes' allocations, once the device has
// finished the work that may still write through them (a direct call's
// pushes into peers' outputs). It is local: peers' own memory is untouched.
// Where the context cannot be waited for (a stream of it is being captured
// into a CUDA graph, or it failed), the Rank keeps them mapped until its
// own Close: an unmapping under a running push would fault the context.
func (w *UserWindow) Close() error {
	imports := w.imports
	w.imports = nil
	if len(imports) == 0 {
		return nil
	}
	return inContext(w.ctx, func() error {
		// Relaxed: a wait in global mode would invalidate another
		// thread's capture instead of failing here.
		if restore, err := relaxedCapture(); err == nil {
			defer restore()
		}
		if res := driver.CtxSynchronize(); res != cuSuccess && w.rank != nil {
			w.rank.keepMapped(imports)
			return nil
		}
		for _, m := range imports {
			m.free()
		}
		return nil
	})
}

// userBuffer is what a rank learns about its own buffer before sharing it.
type userBuffer struct {
	ptr, base, allocSize uint64
	handle               uint64 // retained; released by release
	fd                   int    // exported POSIX fd, or -1
}

// inspect finds the cuMem allocation holding [ptr, ptr+size) and exports
// it when other processes need it.
func inspect(ptr uintptr, size uint64, export bool) (userBuffer, error) {
	b := userBuffer{ptr: uint64(ptr), fd: -1}
	if err := loadWindowDriver(); err != nil {
		return b, err
	}
	if r := windowDriver.MemRetainAllocationHandle(&b.handle, ptr); r != cuSuccess {
		return b, errs.New(errs.ErrInvalidArgument,
			"window buffer %#x: buffer must come from ncclMemAlloc/cuMem (cuMemRetainAllocationHandle: %s)", ptr, errorName(r))
	}
	var base devicePtr
	var allocSize uintptr
	if r := windowDriver.MemGetAddressRange(&base, &allocSize, devicePtr(ptr)); r != cuSuccess {
		return b, cuErr(r, "cuMemGetAddressRange", "window buffer ", ptr)
	}
	b.base, b.allocSize = uint64(base), uint64(allocSize)
	if b.ptr-b.base+size > b.allocSize {
		return b, errs.New(errs.ErrInvalidArgument, "window buffer %#x: %d bytes run past its allocation (%d bytes at %#x)", ptr, size, allocSize, base)
	}
	if export {
		var fd int32
		if r := driver.MemExportToShareableHandle(&fd, b.handle, memHandleTypePosixFD, 0); r != cuSuccess {
			return b, errs.New(errs.ErrInvalidArgument,
				"window buffer %#x: its cuMem allocation cannot be exported as a POSIX fd (allocate it with ncclMemAlloc): %s", ptr, errorName(r))
		}
		syscall.CloseOnExec(int(fd)) // the driver's descriptor is inherited otherwise
		b.fd = int(fd)
	}
	return b, nil
}

func (b userBuffer) release() {
	if b.handle != 0 {
		driver.MemRelease(b.handle)
	}
	closeFDs([]int{b.fd})
}

// MapWindow is collective over ex: every rank passes its buffer (a cuMem
// allocation, as from ncclMemAlloc; equal sizes, checked by the caller) and
// gets every rank's buffer addressable from this rank's device. When any
// rank fails, every rank returns an error naming it, and none keeps a window.
func (r *Rank) MapWindow(ex atom.Exchange, ptr uintptr, size uint64) (atom.Window, error) {
	var w *UserWindow
	err := inContext(r.ctx, func() (err error) {
		w, err = r.mapWindow(ex, ptr, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (r *Rank) mapWindow(ex atom.Exchange, ptr uintptr, size uint64) (*UserWindow, error) {
	// Who lives where decides whether fds are needed: learn that first.
	pids, err := ex.AllGather(binary.LittleEndian.AppendUint64(nil, uint64(os.Getpid())))
	if err != nil {
		return nil, fmt.Errorf("cuda window rank %d: exchanging pids: %w", ex.Rank(), err)
	}
	onePID := true
	for _, p := range pids {
		onePID = onePID && len(p) == 8 && binary.LittleEndian.Uint64(p) == uint64(os.Getpid())
	}
	mine, localErr := inspect(ptr, size, !onePID)
	defer mine.release()
	msg := binary.LittleEndian.AppendUint64(nil, mine.ptr)
	msg = binary.LittleEndian.AppendUint64(msg, mine.base)
	msg = binary.LittleEndian.AppendUint64(msg, mine.allocSize)
	if localErr != nil {
		msg = append(msg, strings.TrimPrefix(localErr.Error(), "purlin: ")...)
	}
	all, err := ex.AllGather(msg)
	if err != nil {
		return nil, fmt.Errorf("cuda window rank %d: exchanging buffers: %w", ex.Rank(), err)
	}
	if localErr != nil {
		return nil, localErr
	}
	for q, m := range all {
		if len(m) < 24 {
			return nil, errs.New(errs.ErrRemote, "cuda window: rank %d sent %d bytes", q, len(m))
		}
		if len(m) > 24 {
			return nil, errs.New(errs.ErrInvalidUsage, "cuda window: rank %d failed: %s", q, m[24:])
		}
	}
	fds := make([]int, len(all))
	for q := range fds {
		fds[q] = -1
	}
	if !onePID {
		if fds, err = ex.AllGatherFD(mine.fd); err != nil {
			return nil, fmt.Errorf("cuda window rank %d: exchanging descriptors: %w", ex.Rank(), err)
		}
		defer closeFDs(fds)
	}
	w := &UserWindow{ctx: r.ctx, copies: r.copies, size: size, peers: make([]uintptr, len(all)), rank: r}
	for q, m := range all {
		if err == nil {
			samePID := binary.LittleEndian.Uint64(pids[q]) == uint64(os.Getpid())
			err = w.reach(q, q == ex.Rank(), samePID, fds[q], m, r.device)
		}
	}
	if err = atom.Agree(ex, "cuda window", err); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// reach makes rank q's buffer addressable from device: its own pointer
// (with access for device) in this process, an import of its fd otherwise.
func (w *UserWindow) reach(q int, self, samePID bool, fd int, rec []byte, device int) error {
	ptr := binary.LittleEndian.Uint64(rec[0:])
	base := binary.LittleEndian.Uint64(rec[8:])
	allocSize := binary.LittleEndian.Uint64(rec[16:])
	if self {
		w.peers[q] = uintptr(ptr)
		return nil
	}
	if samePID {
		desc := memAccessDesc{LocationType: memLocationTypeDevice, LocationID: int32(device), Flags: memAccessFlagsReadWrite}
		if r := driver.MemSetAccess(devicePtr(base), uintptr(allocSize), &desc, 1); r != cuSuccess {
			return cuErr(r, "cuMemSetAccess", "rank ", q, "'s window buffer for device ", device)
		}
		w.peers[q] = uintptr(ptr)
		return nil
	}
	m, err := importVMM(fd, uintptr(allocSize), device)
	if err != nil {
		return fmt.Errorf("cuda window: importing rank %d's buffer: %w", q, err)
	}
	w.imports = append(w.imports, m)
	w.peers[q] = uintptr(m.ptr) + uintptr(ptr-base)
	return nil
}
