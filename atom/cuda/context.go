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

// relaxedCapture puts the calling thread in relaxed stream-capture mode
// until restore gives it its mode back. In global or thread-local mode,
// calls that are not stream work of a capture in progress (an allocation,
// a copy waited for on another stream) are "potentially unsafe" and would
// invalidate the capture. The caller holds the thread (inContext).
func relaxedCapture() (restore func(), err error) {
	mode := uint32(streamCaptureModeRelaxed)
	if r := driver.ThreadExchangeStreamCaptureMode(&mode); r != cuSuccess {
		return nil, cuErr(r, "cuThreadExchangeStreamCaptureMode")
	}
	return func() { driver.ThreadExchangeStreamCaptureMode(&mode) }, nil
}
