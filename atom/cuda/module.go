package cuda

import (
	"sync"
	"unsafe"

	"purlin/errs"
)

// The kernel module is loaded once per CUDA context and kept for the
// process's life: ranks of several communicators on one device share it.
var modules struct {
	sync.Mutex
	byContext map[cuContext]kernels // guarded by the mutex
}

// kernels are the module's kernels (csrc/run.cu): purlin_run runs a Plan,
// purlin_epilogue its Epilogue steps after it, and purlin_run_epilogue both
// in one kernel (for Plans whose epilogue needs no more blocks than workers);
// purlin_signals runs a copy-engine worker's signals (engine.go).
type kernels struct {
	run, epilogue, runEpilogue, signals cuFunction
}

// kernelFunctions returns the kernels in ctx, loading the module on first
// use. ctx must be current on the calling thread.
func kernelFunctions(ctx cuContext) (kernels, error) {
	if len(kernelImage) == 0 {
		return kernels{}, errs.New(errs.ErrUnsupported, "cuda: built without CUDA kernels (build with `make lib-cuda`, tag cudakernels)")
	}
	modules.Lock()
	defer modules.Unlock()
	if k, ok := modules.byContext[ctx]; ok {
		return k, nil
	}
	var mod cuModule
	if r := driver.ModuleLoadData(&mod, unsafe.Pointer(&kernelImage[0])); r != cuSuccess {
		return kernels{}, cuErr(r, "cuModuleLoadData", "purlin kernels")
	}
	var k kernels
	for _, f := range []struct {
		fn   *cuFunction
		name string
	}{{&k.run, "purlin_run"}, {&k.epilogue, "purlin_epilogue"}, {&k.runEpilogue, "purlin_run_epilogue"}, {&k.signals, "purlin_signals"}} {
		if r := driver.ModuleGetFunction(f.fn, mod, f.name); r != cuSuccess {
			return kernels{}, cuErr(r, "cuModuleGetFunction", f.name)
		}
	}
	if modules.byContext == nil {
		modules.byContext = map[cuContext]kernels{}
	}
	modules.byContext[ctx] = k
	return k, nil
}

// Available returns nil when the CUDA driver loads, a device exists and the
// kernels are built in; otherwise an error that says which is missing.
func Available() error {
	if len(kernelImage) == 0 {
		return errs.New(errs.ErrUnsupported, "cuda: built without CUDA kernels")
	}
	if err := loadDriver(); err != nil {
		return err
	}
	var n int32
	if r := driver.DeviceGetCount(&n); r != cuSuccess {
		return cuErr(r, "cuDeviceGetCount")
	}
	if n == 0 {
		return errs.New(errs.ErrUnsupported, "cuda: no CUDA device")
	}
	return nil
}

// bindContext makes the context of device current on this OS thread: the
// caller's current context when it belongs to device, else device's primary
// context. The caller holds the thread (runtime.LockOSThread) while it uses it.
func bindContext(device int) (cuContext, error) {
	var ctx cuContext
	if r := driver.CtxGetCurrent(&ctx); r != cuSuccess {
		return 0, cuErr(r, "cuCtxGetCurrent")
	}
	if ctx != 0 {
		var dev cuDevice
		if r := driver.CtxGetDevice(&dev); r == cuSuccess && int(dev) == device {
			return ctx, nil
		}
	}
	var dev cuDevice
	if r := driver.DeviceGet(&dev, int32(device)); r != cuSuccess {
		return 0, cuErr(r, "cuDeviceGet", device)
	}
	if r := driver.DevicePrimaryCtxRetain(&ctx, dev); r != cuSuccess {
		return 0, cuErr(r, "cuDevicePrimaryCtxRetain", "device ", device)
	}
	if r := driver.CtxSetCurrent(ctx); r != cuSuccess {
		return 0, cuErr(r, "cuCtxSetCurrent", "device ", device)
	}
	return ctx, nil
}
