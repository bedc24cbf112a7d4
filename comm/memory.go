package comm

/*
#include <stdlib.h>
*/
import "C"

import (
	"sync"
	"unsafe"

	"purlin/atom/host"
	"purlin/errs"
)

// memAlign is the alignment of MemAlloc's buffers: a cache line, enough for
// every data type and for 16-byte vector copies.
const memAlign = 64

// MemAlloc allocates size bytes that collectives may use; a size of 0 gives
// NULL and no error, as NCCL's (cudaMalloc's) does. With a usable
// CUDA Atom (and PURLIN_ATOM not host) it is device memory on the calling
// thread's current device, device 0 where none is current, as NCCL's
// (cudaMemAlloc); otherwise page-aligned host memory backed by a memfd
// (host.AllocShared), so a window can share it with ranks in other
// processes; C memory aligned to 64 bytes if memfd is unavailable. Neither
// is ever moved by Go's collector.
func MemAlloc(size uint64) (unsafe.Pointer, error) {
	if size == 0 {
		return nil, nil
	}
	if p, handled, err := cudaMemAlloc(size); handled {
		return p, err
	}
	if ptr, err := host.AllocShared(size); err == nil {
		// Not Go memory: converted without arithmetic, as in cudaMemAlloc.
		return *(*unsafe.Pointer)(unsafe.Pointer(&ptr)), nil
	}
	var p unsafe.Pointer
	if rc := C.posix_memalign(&p, memAlign, C.size_t(size)); rc != 0 {
		return nil, errs.New(errs.ErrSystem, "MemAlloc: posix_memalign(%d bytes): error %d", size, int(rc))
	}
	allocs.Lock()
	allocs.m[uintptr(p)] = p
	allocs.Unlock()
	return p, nil
}

// MemFree frees memory from MemAlloc; NULL is nothing to free, as in
// NCCL; any other pointer is an error.
func MemFree(ptr unsafe.Pointer) error {
	if ptr == nil {
		return nil
	}
	if ok, err := host.FreeShared(uintptr(ptr)); ok {
		return err
	}
	allocs.Lock()
	p, ok := allocs.m[uintptr(ptr)]
	delete(allocs.m, uintptr(ptr))
	allocs.Unlock()
	if !ok {
		if cudaMemFree(ptr) == nil {
			return nil
		}
		return errs.New(errs.ErrInvalidArgument, "MemFree: %#x was not allocated by MemAlloc (or was freed)", ptr)
	}
	C.free(p)
	return nil
}

var allocs = struct {
	sync.Mutex
	m map[uintptr]unsafe.Pointer
}{m: map[uintptr]unsafe.Pointer{}}

// Register records a buffer for collectives on c and returns a handle. The
// host Atom reads user buffers in place, so registration changes nothing
// for it; the handle only has to be deregistered.
func (c *Comm) Register(buff uintptr, size uint64) (uintptr, error) {
	if err := c.usable("CommRegister"); err != nil {
		return 0, err
	}
	if buff == 0 && size > 0 {
		return 0, errs.New(errs.ErrInvalidArgument, "CommRegister: buffer is NULL for %d bytes", size)
	}
	regs.Lock()
	defer regs.Unlock()
	regs.next++
	regs.m[regs.next] = c
	return regs.next, nil
}

// Deregister drops a registration made by Register on c.
func (c *Comm) Deregister(handle uintptr) error {
	regs.Lock()
	defer regs.Unlock()
	if owner, ok := regs.m[handle]; !ok || owner != c {
		return errs.New(errs.ErrInvalidArgument, "CommDeregister: %#x is not a registration of communicator %#x", handle, c.handle)
	}
	delete(regs.m, handle)
	return nil
}

var regs = struct {
	sync.Mutex
	next uintptr
	m    map[uintptr]*Comm
}{m: map[uintptr]*Comm{}}
