package cuda

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
