package cuda

import (
	"fmt"
	"unsafe"

	"purlin/errs"
)

// Read copies len(dst) bytes at off of rank q's window buffer into dst,
// through this rank's mapping, and waits for the copy. It is for checks
// and tools (tests prove a peer's data is reachable with it), not the
// datapath.
func (w *UserWindow) Read(q int, off uint64, dst []byte) error {
	if err := w.checkRange("Read", q, off, len(dst)); err != nil || len(dst) == 0 {
		return err
	}
	return inContext(w.ctx, func() error {
		src := devicePtr(w.peers[q] + uintptr(off))
		return cuErr(driver.MemcpyDtoH(unsafe.Pointer(&dst[0]), src, uintptr(len(dst))), "cuMemcpyDtoH", "window of rank ", q)
	})
}

// Write copies src to off of rank q's window buffer through this rank's
// mapping; the bytes have landed when it returns (copyToDevice). Like Read,
// it is for checks and tools, while the Rank is open.
func (w *UserWindow) Write(q int, off uint64, src []byte) error {
	if err := w.checkRange("Write", q, off, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return inContext(w.ctx, func() error {
		if err := copyToDevice(devicePtr(w.peers[q]+uintptr(off)), src, w.copies); err != nil {
			return fmt.Errorf("cuda window of rank %d: %w", q, err)
		}
		return nil
	})
}

func (w *UserWindow) checkRange(what string, q int, off uint64, n int) error {
	if q < 0 || q >= len(w.peers) {
		return errs.New(errs.ErrInvalidArgument, "cuda window %s: rank %d of %d", what, q, len(w.peers))
	}
	if off > w.size || uint64(n) > w.size-off {
		return errs.New(errs.ErrInvalidArgument, "cuda window %s: %d bytes at %d pass the window's %d bytes", what, n, off, w.size)
	}
	return nil
}

// MemAlloc is ncclMemAlloc on r's device with r's context current, for a
// caller whose thread has no current device (tests, tools) that needs a
// buffer it can register as a window.
func (r *Rank) MemAlloc(size uintptr) (uintptr, error) {
	var p uintptr
	err := inContext(r.ctx, func() (err error) {
		p, err = MemAlloc(r.device, size)
		return err
	})
	return p, err
}

// DeviceCount is the number of CUDA devices, 0 without a usable driver.
func DeviceCount() int {
	if loadDriver() != nil {
		return 0
	}
	var n int32
	if driver.DeviceGetCount(&n) != cuSuccess {
		return 0
	}
	return int(n)
}
