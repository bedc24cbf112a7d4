package cuda

/*
#cgo noescape purlin_launch
#cgo nocallback purlin_launch
#include <stdlib.h>
#include "launch.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The trampoline takes the driver's entry points as plain addresses, found
// once with purego.Dlsym; the hot path is one cgo call and no allocation
// (noescape: the Launch argument stays on the caller's stack).

var hot struct {
	ctxGetCurrent, ctxPush, ctxPop, launchKernel, streamIsCapturing uintptr
	launchKernelEx                                                  uintptr // 0 where the driver lacks it
}

func loadHot(lib uintptr) error {
	var err error
	for _, e := range []struct {
		dst  *uintptr
		name string
	}{
		{&hot.ctxGetCurrent, "cuCtxGetCurrent"},
		{&hot.ctxPush, "cuCtxPushCurrent_v2"},
		{&hot.ctxPop, "cuCtxPopCurrent_v2"},
		{&hot.launchKernel, "cuLaunchKernel"},
		{&hot.streamIsCapturing, "cuStreamIsCapturing"},
	} {
		if *e.dst, err = purego.Dlsym(lib, e.name); err != nil {
			return err
		}
	}
	hot.launchKernelEx, _ = purego.Dlsym(lib, "cuLaunchKernelEx")
	return nil
}

// cSharedDevices is launch.c's purlinSharedDevices (symmetric.go
// sharedDevices).
func cSharedDevices() *[C.purlinMaxDevices]atomic.Uint32 {
	return (*[C.purlinMaxDevices]atomic.Uint32)(unsafe.Pointer(&C.purlinSharedDevices[0]))
}

// launchKernel enqueues fn(args) on stream in ctx with grid x gridY blocks;
// with pdl, as a programmatic dependent launch. With counts set, the kernel
// reads an image the rank may reclaim: the launch is counted, or refused
// with launchRetry (launch.h purlin_launch).
func launchKernel(ctx cuContext, fn cuFunction, grid, gridY, block uint32, stream cuStream, args *launchArgs, pdl bool, counts *imageCounts) cuResult {
	ex := uintptr(0)
	if pdl {
		ex = hot.launchKernelEx
	}
	return cuResult(C.purlin_launch(C.uintptr_t(hot.ctxGetCurrent), C.uintptr_t(hot.ctxPush),
		C.uintptr_t(hot.ctxPop), C.uintptr_t(hot.launchKernel), C.uintptr_t(ex), C.uintptr_t(ctx),
		C.uintptr_t(fn), C.uint(grid), C.uint(gridY), C.uint(block), C.uintptr_t(stream), unsafe.Pointer(args),
		(*C.purlinImage)(counts), C.uintptr_t(hot.streamIsCapturing)))
}

// imageCounts is a Plan image's launch count and state (launch.h
// purlinImage), in C memory, where C records may keep it: images.go.
type imageCounts C.purlinImage

// The states of an image (purlinImage.state), and what purlin_launch
// returns when it enqueues nothing and the caller must take the slow path.
const (
	imageLive    = 0
	imagePinned  = C.purlinImagePinned
	imageRetired = C.purlinImageRetired
	imageFreed   = C.purlinImageFreed
	launchRetry  = cuResult(C.purlinLaunchRetry)
)

// newImageCounts is a zeroed purlinImage (a live image, never launched).
func newImageCounts() *imageCounts {
	return (*imageCounts)(C.calloc(1, C.size_t(unsafe.Sizeof(C.purlinImage{}))))
}

func freeImageCounts(c *imageCounts) { C.free(unsafe.Pointer(c)) }

func (c *imageCounts) launches() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&c.launched)) }
func (c *imageCounts) status() *atomic.Uint64   { return (*atomic.Uint64)(unsafe.Pointer(&c.state)) }

// newWord is a zeroed word of C memory, which C code may read after the
// call that made it returns (Go memory it may not keep); freeWord frees it.
func newWord() *atomic.Uintptr {
	return (*atomic.Uintptr)(C.calloc(1, C.size_t(unsafe.Sizeof(uintptr(0)))))
}

func freeWord(w *atomic.Uintptr) { C.free(unsafe.Pointer(w)) }
