package cuda

import (
	"sync"

	"github.com/ebitengine/purego"

	"purlin/errs"
)

// windowDriver holds the driver entry points only window registration
// needs, opened on first use (driver.go holds the datapath's).
var windowDriver struct {
	once sync.Once
	err  error

	MemRetainAllocationHandle func(h *uint64, addr uintptr) cuResult
	MemGetAddressRange        func(base *devicePtr, size *uintptr, ptr devicePtr) cuResult
}

func loadWindowDriver() error {
	windowDriver.once.Do(func() {
		if err := loadDriver(); err != nil {
			windowDriver.err = err
			return
		}
		lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			windowDriver.err = errs.New(errs.ErrCuda, "dlopen libcuda.so.1: %v", err)
			return
		}
		defer func() {
			if r := recover(); r != nil { // RegisterLibFunc panics on a missing symbol
				windowDriver.err = errs.New(errs.ErrCuda, "libcuda.so.1: %v", r)
			}
		}()
		purego.RegisterLibFunc(&windowDriver.MemRetainAllocationHandle, lib, "cuMemRetainAllocationHandle")
		purego.RegisterLibFunc(&windowDriver.MemGetAddressRange, lib, "cuMemGetAddressRange_v2")
	})
	return windowDriver.err
}
