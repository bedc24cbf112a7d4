package cuda

/*
#cgo noescape purlin_launch
#cgo nocallback purlin_launch
#include <stdint.h>

typedef int (*ctxGetCurrentFn)(void **ctx);
typedef int (*ctxPushFn)(void *ctx);
typedef int (*ctxPopFn)(void **ctx);
typedef int (*launchKernelFn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shmem, void *stream,
                              void **params, void **extra);

// CUlaunchAttribute and CUlaunchConfig as cuda.h lays them out.
typedef struct {
	int id;
	char pad[4];
	union {
		char bytes[64];
		unsigned long long align;
		int allowed; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
	} value;
} launchAttribute;
typedef struct {
	unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
	void *hStream;
	launchAttribute *attrs;
	unsigned numAttrs;
} launchConfig;
typedef int (*launchKernelExFn)(const launchConfig *config, void *f, void **params, void **extra);
enum { launchAttributeProgrammaticStreamSerialization = 6 };

// purlin_launch calls cuLaunchKernel (or cuLaunchKernelEx with programmatic
// dependent launch, when launchEx is set) through its pointer with one
// by-value argument (the Launch struct at arg), in ctx: when ctx is not the thread's
// current context it is pushed for the launch and popped after, so the
// caller's context is left as it was.
static int purlin_launch(uintptr_t getCurrent, uintptr_t push, uintptr_t pop, uintptr_t launch,
                         uintptr_t launchEx, uintptr_t ctxAddr, uintptr_t fn, unsigned grid,
                         unsigned gridY, unsigned block, uintptr_t stream, void *arg) {
	void *ctx = (void *)ctxAddr;
	void *cur = 0;
	int r = ((ctxGetCurrentFn)getCurrent)(&cur);
	if (r) return r;
	if (cur != ctx && (r = ((ctxPushFn)push)(ctx))) return r;
	void *params[1] = {arg};
	if (launchEx) {
		// Programmatic dependent launch: the kernel may start while the one
		// before it on stream ends (csrc/run.cu waits for it before it reads
		// anything that kernel writes).
		launchAttribute attr = {.id = launchAttributeProgrammaticStreamSerialization};
		attr.value.allowed = 1;
		launchConfig cfg = {grid, gridY, 1, block, 1, 1, 0, (void *)stream, &attr, 1};
		r = ((launchKernelExFn)launchEx)(&cfg, (void *)fn, params, 0);
	} else {
		r = ((launchKernelFn)launch)((void *)fn, grid, gridY, 1, block, 1, 1, 0, (void *)stream, params, 0);
	}
	if (cur != ctx) {
		void *popped;
		int r2 = ((ctxPopFn)pop)(&popped);
		if (!r) r = r2;
	}
	return r;
}
*/
import "C"

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// The trampoline takes the driver's entry points as plain addresses, found
// once with purego.Dlsym; the hot path is one cgo call and no allocation
// (noescape: the Launch argument stays on the caller's stack).

var hot struct {
	ctxGetCurrent, ctxPush, ctxPop, launchKernel uintptr
	launchKernelEx                               uintptr // 0 where the driver lacks it
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
	} {
		if *e.dst, err = purego.Dlsym(lib, e.name); err != nil {
			return err
		}
	}
	hot.launchKernelEx, _ = purego.Dlsym(lib, "cuLaunchKernelEx")
	return nil
}

// launchKernel enqueues fn(args) on stream in ctx with grid x gridY blocks;
// with pdl, as a programmatic dependent launch.
func launchKernel(ctx cuContext, fn cuFunction, grid, gridY, block uint32, stream cuStream, args *launchArgs, pdl bool) cuResult {
	ex := uintptr(0)
	if pdl {
		ex = hot.launchKernelEx
	}
	return cuResult(C.purlin_launch(C.uintptr_t(hot.ctxGetCurrent), C.uintptr_t(hot.ctxPush),
		C.uintptr_t(hot.ctxPop), C.uintptr_t(hot.launchKernel), C.uintptr_t(ex), C.uintptr_t(ctx),
		C.uintptr_t(fn), C.uint(grid), C.uint(gridY), C.uint(block), C.uintptr_t(stream), unsafe.Pointer(args)))
}
