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
	byContext map[cuContext]cuFunction // guarded by the mutex
}

// kernelFunction returns purlin_run in ctx, loading the module on first use.
// ctx must be current on the calling thread.
func kernelFunction(ctx cuContext) (cuFunction, error) {
	if len(kernelImage) == 0 {
		return 0, errs.New(errs.ErrUnsupported, "cuda: built without CUDA kernels (build with `make lib-cuda`, tag cudakernels)")
	}
	modules.Lock()
	defer modules.Unlock()
	if fn, ok := modules.byContext[ctx]; ok {
		return fn, nil
	}
	var mod cuModule
	if r := driver.ModuleLoadData(&mod, unsafe.Pointer(&kernelImage[0])); r != cuSuccess {
		return 0, cuErr(r, "cuModuleLoadData", "purlin kernels")
	}
	var fn cuFunction
	if r := driver.ModuleGetFunction(&fn, mod, "purlin_run"); r != cuSuccess {
		return 0, cuErr(r, "cuModuleGetFunction", "purlin_run")
	}
	if modules.byContext == nil {
		modules.byContext = map[cuContext]cuFunction{}
	}
	modules.byContext[ctx] = fn
	return fn, nil
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
