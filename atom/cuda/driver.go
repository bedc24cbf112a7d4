package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"purlin/errs"
)

// The CUDA driver API, opened at run time with purego so that the library
// builds and loads on machines without a GPU. Only cold calls go through
// purego; cuLaunchKernel goes through the cgo trampoline in launch_cgo.go.
// Types follow cuda.h: handles are pointers (uintptr), CUdeviceptr is 64-bit.

type (
	cuResult   int32
	cuDevice   int32
	cuContext  uintptr
	cuModule   uintptr
	cuFunction uintptr
	cuStream   uintptr
	cuEvent    uintptr
	devicePtr  uintptr
)

// Constants from cuda.h (CUDA 13.0).
const (
	cuSuccess                    = 0
	cuErrorNotReady              = 600
	cuErrorCaptureUnsupported    = 900 // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
	cuErrorCaptureImplicit       = 906 // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
	memHostAllocPortable         = 0x01
	memHostAllocDeviceMap        = 0x02
	memAllocationTypePinned      = 0x1
	memHandleTypePosixFD         = 0x1
	memLocationTypeDevice        = 0x1
	memAccessFlagsReadWrite      = 0x3
	memAllocGranularityMinimum   = 0x0
	streamCaptureStatusNone      = 0
	streamCaptureStatusActive    = 1
	eventDisableTiming           = 0x2
	streamCaptureModeGlobal      = 0
	streamCaptureModeThreadLocal = 1
	streamCaptureModeRelaxed     = 2
	streamNonBlocking            = 0x1
	deviceAttrComputeMajor       = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	deviceAttrMultiprocessors    = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	pointerAttrMemoryType        = 2  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
	pointerAttrIsManaged         = 8  // CU_POINTER_ATTRIBUTE_IS_MANAGED
	memoryTypeDevice             = 2  // CU_MEMORYTYPE_DEVICE
)

// memAllocationProp is CUmemAllocationProp.
type memAllocationProp struct {
	Type                 uint32
	RequestedHandleTypes uint32
	LocationType         uint32
	LocationID           int32
	Win32HandleMetaData  uintptr
	CompressionType      uint8
	GPUDirectRDMACapable uint8
	Usage                uint16
	_                    [4]byte
}

// memAccessDesc is CUmemAccessDesc.
type memAccessDesc struct {
	LocationType uint32
	LocationID   int32
	Flags        uint32
}

// driver holds the entry points; filled once by loadDriver.
var driver struct {
	Init                            func(flags uint32) cuResult
	DeviceGetCount                  func(count *int32) cuResult
	DeviceGet                       func(dev *cuDevice, ordinal int32) cuResult
	DeviceCanAccessPeer             func(can *int32, dev, peer cuDevice) cuResult
	DeviceGetAttribute              func(v *int32, attr int32, dev cuDevice) cuResult
	DevicePrimaryCtxRetain          func(ctx *cuContext, dev cuDevice) cuResult
	CtxGetCurrent                   func(ctx *cuContext) cuResult
	PointerGetAttribute             func(data unsafe.Pointer, attr int32, p devicePtr) cuResult
	CtxSetCurrent                   func(ctx cuContext) cuResult
	CtxGetDevice                    func(dev *cuDevice) cuResult
	CtxPushCurrent                  func(ctx cuContext) cuResult
	CtxPopCurrent                   func(ctx *cuContext) cuResult
	CtxSynchronize                  func() cuResult
	ModuleLoadData                  func(mod *cuModule, image unsafe.Pointer) cuResult
	ModuleGetFunction               func(fn *cuFunction, mod cuModule, name string) cuResult
	MemAlloc                        func(p *devicePtr, size uintptr) cuResult
	MemFree                         func(p devicePtr) cuResult
	MemcpyHtoDAsync                 func(dst devicePtr, src unsafe.Pointer, size uintptr, s cuStream) cuResult
	MemcpyAsync                     func(dst, src devicePtr, size uintptr, s cuStream) cuResult
	MemcpyDtoH                      func(dst unsafe.Pointer, src devicePtr, size uintptr) cuResult
	MemcpyDtoHAsync                 func(dst unsafe.Pointer, src devicePtr, size uintptr, s cuStream) cuResult
	MemsetD8                        func(dst devicePtr, v uint8, n uintptr) cuResult
	MemHostAlloc                    func(p *unsafe.Pointer, size uintptr, flags uint32) cuResult
	MemHostGetDevicePointer         func(d *devicePtr, p unsafe.Pointer, flags uint32) cuResult
	MemFreeHost                     func(p unsafe.Pointer) cuResult
	MemGetAllocationGranularity     func(g *uintptr, prop *memAllocationProp, option uint32) cuResult
	MemCreate                       func(h *uint64, size uintptr, prop *memAllocationProp, flags uint64) cuResult
	MemRelease                      func(h uint64) cuResult
	MemAddressReserve               func(p *devicePtr, size, align uintptr, addr devicePtr, flags uint64) cuResult
	MemAddressFree                  func(p devicePtr, size uintptr) cuResult
	MemMap                          func(p devicePtr, size, offset uintptr, h uint64, flags uint64) cuResult
	MemUnmap                        func(p devicePtr, size uintptr) cuResult
	MemSetAccess                    func(p devicePtr, size uintptr, desc *memAccessDesc, count uintptr) cuResult
	MemExportToShareableHandle      func(fd *int32, h uint64, handleType uint32, flags uint64) cuResult
	MemImportFromShareableHandle    func(h *uint64, osHandle uintptr, handleType uint32) cuResult
	StreamIsCapturing               func(s cuStream, status *uint32) cuResult
	ThreadExchangeStreamCaptureMode func(mode *uint32) cuResult
	StreamGetCaptureInfo            func(s cuStream, status *uint32, id *uint64, graph, deps, ndeps unsafe.Pointer) cuResult
	StreamWaitEvent                 func(s cuStream, e cuEvent, flags uint32) cuResult
	EventCreate                     func(e *cuEvent, flags uint32) cuResult
	EventRecord                     func(e cuEvent, s cuStream) cuResult
	EventDestroy                    func(e cuEvent) cuResult
	StreamCreate                    func(s *cuStream, flags uint32) cuResult
	StreamDestroy                   func(s cuStream) cuResult
	StreamSynchronize               func(s cuStream) cuResult
	StreamQuery                     func(s cuStream) cuResult
	StreamBeginCapture              func(s cuStream, mode uint32) cuResult
	StreamEndCapture                func(s cuStream, graph *uintptr) cuResult
	GraphInstantiate                func(exec *uintptr, graph uintptr, flags uint64) cuResult
	GraphLaunch                     func(exec uintptr, s cuStream) cuResult
	GraphExecDestroy                func(exec uintptr) cuResult
	GraphDestroy                    func(graph uintptr) cuResult
	GetErrorName                    func(r cuResult, name **byte) cuResult
}

var (
	driverOnce sync.Once
	driverErr  error
)

// loadDriver opens libcuda.so.1 and calls cuInit once; later calls return
// the first result.
func loadDriver() error {
	driverOnce.Do(func() { driverErr = openDriver() })
	return driverErr
}

func openDriver() (err error) {
	lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return errs.New(errs.ErrCuda, "dlopen libcuda.so.1: %v", err)
	}
	defer func() {
		if r := recover(); r != nil { // RegisterLibFunc panics on a missing symbol
			err = errs.New(errs.ErrCuda, "libcuda.so.1: %v", r)
		}
	}()
	reg := func(fn any, name string) { purego.RegisterLibFunc(fn, lib, name) }
	d := &driver
	reg(&d.Init, "cuInit")
	reg(&d.DeviceGetCount, "cuDeviceGetCount")
	reg(&d.DeviceGet, "cuDeviceGet")
	reg(&d.DeviceCanAccessPeer, "cuDeviceCanAccessPeer")
	reg(&d.DeviceGetAttribute, "cuDeviceGetAttribute")
	reg(&d.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	reg(&d.CtxGetCurrent, "cuCtxGetCurrent")
	reg(&d.PointerGetAttribute, "cuPointerGetAttribute")
	reg(&d.CtxSetCurrent, "cuCtxSetCurrent")
	reg(&d.CtxGetDevice, "cuCtxGetDevice")
	reg(&d.CtxPushCurrent, "cuCtxPushCurrent_v2")
	reg(&d.CtxPopCurrent, "cuCtxPopCurrent_v2")
	reg(&d.CtxSynchronize, "cuCtxSynchronize")
	reg(&d.ModuleLoadData, "cuModuleLoadData")
	reg(&d.ModuleGetFunction, "cuModuleGetFunction")
	reg(&d.MemAlloc, "cuMemAlloc_v2")
	reg(&d.MemFree, "cuMemFree_v2")
	reg(&d.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	reg(&d.MemcpyAsync, "cuMemcpyAsync")
	reg(&d.MemcpyDtoH, "cuMemcpyDtoH_v2")
	reg(&d.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	reg(&d.MemsetD8, "cuMemsetD8_v2")
	reg(&d.MemHostAlloc, "cuMemHostAlloc")
	reg(&d.MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2")
	reg(&d.MemFreeHost, "cuMemFreeHost")
	reg(&d.MemGetAllocationGranularity, "cuMemGetAllocationGranularity")
	reg(&d.MemCreate, "cuMemCreate")
	reg(&d.MemRelease, "cuMemRelease")
	reg(&d.MemAddressReserve, "cuMemAddressReserve")
	reg(&d.MemAddressFree, "cuMemAddressFree")
	reg(&d.MemMap, "cuMemMap")
	reg(&d.MemUnmap, "cuMemUnmap")
	reg(&d.MemSetAccess, "cuMemSetAccess")
	reg(&d.MemExportToShareableHandle, "cuMemExportToShareableHandle")
	reg(&d.MemImportFromShareableHandle, "cuMemImportFromShareableHandle")
	reg(&d.StreamIsCapturing, "cuStreamIsCapturing")
	reg(&d.ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode")
	reg(&d.StreamGetCaptureInfo, "cuStreamGetCaptureInfo_v2")
	reg(&d.StreamWaitEvent, "cuStreamWaitEvent")
	reg(&d.EventCreate, "cuEventCreate")
	reg(&d.EventRecord, "cuEventRecord")
	reg(&d.EventDestroy, "cuEventDestroy_v2")
	reg(&d.StreamCreate, "cuStreamCreate")
	reg(&d.StreamDestroy, "cuStreamDestroy_v2")
	reg(&d.StreamSynchronize, "cuStreamSynchronize")
	reg(&d.StreamQuery, "cuStreamQuery")
	reg(&d.StreamBeginCapture, "cuStreamBeginCapture_v2")
	reg(&d.StreamEndCapture, "cuStreamEndCapture")
	reg(&d.GraphInstantiate, "cuGraphInstantiateWithFlags")
	reg(&d.GraphLaunch, "cuGraphLaunch")
	reg(&d.GraphExecDestroy, "cuGraphExecDestroy")
	reg(&d.GraphDestroy, "cuGraphDestroy")
	reg(&d.GetErrorName, "cuGetErrorName")
	if err := loadHot(lib); err != nil {
		return errs.New(errs.ErrCuda, "libcuda.so.1: %v", err)
	}
	if r := d.Init(0); r != cuSuccess {
		return cuErr(r, "cuInit")
	}
	return nil
}

// cuErr wraps a failed driver call as errs.ErrCuda, naming the call and the
// object it failed on; nil for CUDA_SUCCESS.
func cuErr(r cuResult, call string, args ...any) error {
	if r == cuSuccess {
		return nil
	}
	what := call
	if len(args) > 0 {
		what = call + " " + fmt.Sprint(args...)
	}
	return errs.New(errs.ErrCuda, "%s: %s (%d)", what, errorName(r), int32(r))
}

func errorName(r cuResult) string {
	var p *byte
	if driver.GetErrorName == nil || driver.GetErrorName(r, &p) != cuSuccess || p == nil {
		return "CUDA_ERROR"
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}
