package cuda

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"purlin/errs"
)

// vmm is one cuMem VMM mapping: physical memory (handle) mapped at ptr.
// Physical memory is created with POSIX file-descriptor handles so another
// process can import it; its owner maps it with access for every device of
// this process that can reach it.
type vmm struct {
	ptr    devicePtr
	size   uintptr
	handle uint64
}

func deviceProp(device int) memAllocationProp {
	return memAllocationProp{
		Type:                 memAllocationTypePinned,
		RequestedHandleTypes: memHandleTypePosixFD,
		LocationType:         memLocationTypeDevice,
		LocationID:           int32(device),
	}
}

// granularity is the size every VMM allocation on device is rounded up to.
func granularity(device int) (uintptr, error) {
	prop := deviceProp(device)
	var g uintptr
	if r := driver.MemGetAllocationGranularity(&g, &prop, memAllocGranularityMinimum); r != cuSuccess {
		return 0, cuErr(r, "cuMemGetAllocationGranularity", "device ", device)
	}
	return g, nil
}

// accessDevices lists device and every device that can access it as a peer.
func accessDevices(device int) ([]int, error) {
	var n int32
	if r := driver.DeviceGetCount(&n); r != cuSuccess {
		return nil, cuErr(r, "cuDeviceGetCount")
	}
	devs := []int{device}
	for d := 0; d < int(n); d++ {
		if d == device {
			continue
		}
		var can int32
		if r := driver.DeviceCanAccessPeer(&can, cuDevice(d), cuDevice(device)); r == cuSuccess && can != 0 {
			devs = append(devs, d)
		}
	}
	return devs, nil
}

// mapHandle reserves address space for size bytes, maps handle there and
// gives every device in devs read-write access.
func mapHandle(handle uint64, size uintptr, devs []int) (devicePtr, error) {
	var ptr devicePtr
	if r := driver.MemAddressReserve(&ptr, size, 0, 0, 0); r != cuSuccess {
		return 0, cuErr(r, "cuMemAddressReserve", size, " bytes")
	}
	if r := driver.MemMap(ptr, size, 0, handle, 0); r != cuSuccess {
		driver.MemAddressFree(ptr, size)
		return 0, cuErr(r, "cuMemMap", size, " bytes")
	}
	desc := make([]memAccessDesc, len(devs))
	for i, d := range devs {
		desc[i] = memAccessDesc{LocationType: memLocationTypeDevice, LocationID: int32(d), Flags: memAccessFlagsReadWrite}
	}
	if r := driver.MemSetAccess(ptr, size, &desc[0], uintptr(len(desc))); r != cuSuccess {
		driver.MemUnmap(ptr, size)
		driver.MemAddressFree(ptr, size)
		return 0, cuErr(r, "cuMemSetAccess", "devices ", devs)
	}
	return ptr, nil
}

// allocVMM allocates size bytes (rounded up to the granularity) on device,
// mapped with access for device and its peers.
func allocVMM(device int, size uintptr) (vmm, error) {
	g, err := granularity(device)
	if err != nil {
		return vmm{}, err
	}
	size = (size + g - 1) / g * g
	prop := deviceProp(device)
	var h uint64
	if r := driver.MemCreate(&h, size, &prop, 0); r != cuSuccess {
		return vmm{}, cuErr(r, "cuMemCreate", size, " bytes on device ", device)
	}
	devs, err := accessDevices(device)
	if err != nil {
		driver.MemRelease(h)
		return vmm{}, err
	}
	ptr, err := mapHandle(h, size, devs)
	if err != nil {
		driver.MemRelease(h)
		return vmm{}, err
	}
	return vmm{ptr: ptr, size: size, handle: h}, nil
}

// export returns a new POSIX file descriptor for m's physical memory.
func (m vmm) export() (int, error) {
	var fd int32
	if r := driver.MemExportToShareableHandle(&fd, m.handle, memHandleTypePosixFD, 0); r != cuSuccess {
		return -1, cuErr(r, "cuMemExportToShareableHandle")
	}
	syscall.CloseOnExec(int(fd)) // the driver's descriptor is inherited otherwise
	return int(fd), nil
}

// importVMM maps memory another process exported as fd (size bytes) for
// device. It does not close fd.
func importVMM(fd int, size uintptr, device int) (vmm, error) {
	var h uint64
	if r := driver.MemImportFromShareableHandle(&h, uintptr(fd), memHandleTypePosixFD); r != cuSuccess {
		return vmm{}, cuErr(r, "cuMemImportFromShareableHandle", "fd ", fd)
	}
	ptr, err := mapHandle(h, size, []int{device})
	if err != nil {
		driver.MemRelease(h)
		return vmm{}, err
	}
	return vmm{ptr: ptr, size: size, handle: h}, nil
}

// retainVMM maps for device, under a reference of its own, the allocation
// another rank of this process made at ptr (size bytes): the memory stays
// until this mapping is freed, whatever its owner does.
func retainVMM(ptr devicePtr, size uintptr, device int) (vmm, error) {
	if err := loadWindowDriver(); err != nil {
		return vmm{}, err
	}
	var h uint64
	if r := windowDriver.MemRetainAllocationHandle(&h, uintptr(ptr)); r != cuSuccess {
		return vmm{}, cuErr(r, "cuMemRetainAllocationHandle", "window at ", uint64(ptr))
	}
	p, err := mapHandle(h, size, []int{device})
	if err != nil {
		driver.MemRelease(h)
		return vmm{}, err
	}
	return vmm{ptr: p, size: size, handle: h}, nil
}

func (m vmm) free() {
	if m.ptr == 0 {
		return
	}
	driver.MemUnmap(m.ptr, m.size)
	driver.MemAddressFree(m.ptr, m.size)
	driver.MemRelease(m.handle)
}

// copyToDevice copies src to device memory at dst, in stream's context
// (current), and returns once the bytes are in device memory: a kernel
// launched afterwards on any stream reads them. cuMemcpyHtoD does not
// promise that: from pageable memory (Go memory is) it returns once src is
// staged, before its DMA has ended, and that DMA runs on the legacy default
// stream, which non-blocking streams do not wait for (CUDA's "API
// synchronization behavior"). So the copy runs on stream, the rank's
// private non-blocking stream, and is awaited there, waiting for nobody
// else's work.
func copyToDevice(dst devicePtr, src []byte, stream cuStream) error {
	if len(src) == 0 {
		return nil
	}
	if r := driver.MemcpyHtoDAsync(dst, unsafe.Pointer(&src[0]), uintptr(len(src)), stream); r != cuSuccess {
		return cuErr(r, "cuMemcpyHtoDAsync", len(src), " bytes")
	}
	err := cuErr(driver.StreamSynchronize(stream), "cuStreamSynchronize", "after a copy of ", len(src), " bytes")
	runtime.KeepAlive(src) // read until the copy has ended, wherever the driver reads it from
	return err
}

// hostMapped is pinned host memory the device reads and writes (the abort
// flag, the status word).
type hostMapped struct {
	host unsafe.Pointer
	dev  devicePtr
}

func allocHostMapped(size uintptr) (hostMapped, error) {
	var m hostMapped
	if r := driver.MemHostAlloc(&m.host, size, memHostAllocPortable|memHostAllocDeviceMap); r != cuSuccess {
		return m, cuErr(r, "cuMemHostAlloc", size, " bytes")
	}
	clear(unsafe.Slice((*byte)(m.host), size))
	if r := driver.MemHostGetDevicePointer(&m.dev, m.host, 0); r != cuSuccess {
		driver.MemFreeHost(m.host)
		return m, cuErr(r, "cuMemHostGetDevicePointer")
	}
	return m, nil
}

func (m hostMapped) free() {
	if m.host != nil {
		driver.MemFreeHost(m.host)
	}
}

// User memory for ncclMemAlloc: VMM allocations any peer device can access
// and any process can import; MemFree needs their sizes and handles.
var userAllocs struct {
	sync.Mutex
	m map[uintptr]vmm // guarded by the mutex
}

// MemAlloc allocates size bytes on device with cuMem VMM (POSIX fd handles,
// access for every peer device), for ncclMemAlloc.
func MemAlloc(device int, size uintptr) (uintptr, error) {
	if err := loadDriver(); err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, errs.New(errs.ErrInvalidArgument, "cuda MemAlloc: size 0")
	}
	m, err := allocVMM(device, size)
	if err != nil {
		return 0, err
	}
	userAllocs.Lock()
	defer userAllocs.Unlock()
	if userAllocs.m == nil {
		userAllocs.m = map[uintptr]vmm{}
	}
	userAllocs.m[uintptr(m.ptr)] = m
	return uintptr(m.ptr), nil
}

// MemFree releases memory from MemAlloc.
func MemFree(ptr uintptr) error {
	userAllocs.Lock()
	m, ok := userAllocs.m[ptr]
	delete(userAllocs.m, ptr)
	userAllocs.Unlock()
	if !ok {
		return errs.New(errs.ErrInvalidArgument, "cuda MemFree: %#x was not allocated by MemAlloc", ptr)
	}
	m.free()
	return nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
}
