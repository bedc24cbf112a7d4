package cuda

import "unsafe"

// CurrentDevice returns the device of the calling OS thread's current CUDA
// context, and whether there is one. It is NCCL's rule for which GPU a
// communicator uses: the device current when ncclCommInitRank is called
// (cudaSetDevice makes its primary context current). A Go caller must hold
// its goroutine on one thread (runtime.LockOSThread) for the answer to mean
// anything; a cgo export already runs on the C caller's thread. Without a
// CUDA driver it reports no device.
func CurrentDevice() (int, bool) {
	if loadDriver() != nil {
		return 0, false
	}
	var ctx cuContext
	if r := driver.CtxGetCurrent(&ctx); r != cuSuccess || ctx == 0 {
		return 0, false
	}
	var dev cuDevice
	if r := driver.CtxGetDevice(&dev); r != cuSuccess {
		return 0, false
	}
	return int(dev), true
}

// DeviceMemory reports whether p lies in memory only a GPU reaches: device
// memory that is not managed (pinned or managed host memory, and memory
// CUDA does not know, the CPU reaches). Without a CUDA driver it reports
// false.
func DeviceMemory(p uintptr) bool {
	if p == 0 || loadDriver() != nil {
		return false
	}
	var kind, managed uint32
	if driver.PointerGetAttribute(unsafe.Pointer(&kind), pointerAttrMemoryType, devicePtr(p)) != cuSuccess || kind != memoryTypeDevice {
		return false
	}
	return driver.PointerGetAttribute(unsafe.Pointer(&managed), pointerAttrIsManaged, devicePtr(p)) != cuSuccess || managed == 0
}
