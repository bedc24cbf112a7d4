package cuda

import "runtime"

// inContext runs f on a locked OS thread with ctx current, then leaves the
// thread's context as it found it. For cold paths (setup, Plan uploads).
func inContext(ctx cuContext, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cur cuContext
	if r := driver.CtxGetCurrent(&cur); r != cuSuccess {
		return cuErr(r, "cuCtxGetCurrent")
	}
	if cur != ctx {
		if r := driver.CtxPushCurrent(ctx); r != cuSuccess {
			return cuErr(r, "cuCtxPushCurrent")
		}
		defer func() {
			var popped cuContext
			driver.CtxPopCurrent(&popped)
		}()
	}
	return f()
}
