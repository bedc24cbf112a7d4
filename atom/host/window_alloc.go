package host

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"purlin/errs"
)

// Shared allocations back purlinMemAlloc on the host: each is a memfd
// mapped MAP_SHARED, and its descriptor stays open until FreeShared, so a
// later window registration (MapWindow) can hand the memory to ranks in
// other processes. Each allocation holds one descriptor (and at least a
// page) until it is freed. Memory from anywhere else (malloc, a Go buffer)
// can only be shared between ranks of one process.
type sharedAlloc struct {
	fd  int
	mem []byte // the whole mapping; &mem[0] is the pointer handed out
}

var shared struct {
	sync.Mutex
	byBase map[uintptr]sharedAlloc // guarded by the mutex
}

// AllocShared returns size bytes of zeroed, page-aligned, memfd-backed
// memory that MapWindow can share across processes. Free it with FreeShared.
func AllocShared(size uint64) (uintptr, error) {
	if size == 0 {
		return 0, errs.New(errs.ErrInvalidArgument, "host AllocShared: size is 0")
	}
	fd, err := unix.MemfdCreate("purlin-memalloc", unix.MFD_CLOEXEC)
	if err != nil {
		return 0, errs.New(errs.ErrSystem, "host AllocShared: memfd_create: %v", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return 0, errs.New(errs.ErrSystem, "host AllocShared: ftruncate memfd to %d bytes: %v", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return 0, errs.New(errs.ErrSystem, "host AllocShared: mmap %d bytes: %v", size, err)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	shared.Lock()
	defer shared.Unlock()
	if shared.byBase == nil {
		shared.byBase = map[uintptr]sharedAlloc{}
	}
	shared.byBase[base] = sharedAlloc{fd: fd, mem: mem}
	return base, nil
}

// FreeShared releases memory from AllocShared. ok is false (and nothing
// happens) when ptr is not the start of a live shared allocation.
// Mappings other ranks made through a window keep the pages alive until
// they deregister.
func FreeShared(ptr uintptr) (ok bool, err error) {
	shared.Lock()
	a, ok := shared.byBase[ptr]
	delete(shared.byBase, ptr)
	shared.Unlock()
	if !ok {
		return false, nil
	}
	unix.Close(a.fd)
	if err := unix.Munmap(a.mem); err != nil {
		return true, errs.New(errs.ErrSystem, "host FreeShared %#x: munmap: %v", ptr, err)
	}
	return true, nil
}

// sharedRegion finds the shared allocation holding [ptr, ptr+size): a new
// descriptor for it (the caller closes it), the buffer's offset in it and
// the allocation's size. ok is false for memory AllocShared did not make.
func sharedRegion(ptr uintptr, size uint64) (fd int, offset, allocSize uint64, ok bool, err error) {
	shared.Lock()
	defer shared.Unlock()
	for base, a := range shared.byBase {
		end := base + uintptr(len(a.mem))
		if ptr >= base && ptr < end && uint64(end-ptr) >= size {
			dup, err := unix.FcntlInt(uintptr(a.fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return -1, 0, 0, true, errs.New(errs.ErrSystem, "host window: dup of the memfd of %#x: %v", base, err)
			}
			return dup, uint64(ptr - base), uint64(len(a.mem)), true, nil
		}
	}
	return -1, 0, 0, false, nil
}
