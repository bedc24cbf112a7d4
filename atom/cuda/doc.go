// Package cuda is the GPU Atom: it executes SNAC Plans with the kernel in
// csrc/ (purlin_run), loaded through the CUDA driver API.
//
// # Contract
//
// A Rank implements atom.Rank for one GPU. NewRank binds it to a CUDA
// context (the caller's current one if it is opts.Device's, else the
// device's primary context), loads the kernel module once per context and
// allocates the rank's symmetric window (staging | packets | flags)
// as one cuMem VMM allocation with POSIX fd handles: ranks in one process
// address each other's windows directly (peer access granted at
// allocation); ranks in several processes exchange fds through
// atom.Exchange.AllGatherFD and map them. Epochs live in device memory; the
// abort flag and the status word in host-mapped pinned memory.
//
// Launch enqueues one kernel on the caller's stream (grid = Plan workers,
// 512 threads each; a Plan with Epilogue steps, an AllReduce's epilogue,
// runs them in the same kernel's second form, or in a second kernel with
// more blocks when they want more than the workers) and returns: no synchronisation,
// no allocation and one cgo call a kernel on the hot path, legal under CUDA
// graph capture. A launch on
// another stream than the rank's previous one first makes that stream wait
// for the previous one (an event; see launchOrder), so a rank's kernels
// run in launch order as atom.Rank requires. Plans are uploaded once, the
// first time they are seen (outside capture a copy on the rank's private
// stream that has landed before the launch, host-mapped memory during
// capture). A failing kernel wait writes the status word, which AsyncError
// turns into errs.ErrTimeout, errs.ErrAborted or errs.ErrMismatch; Abort
// raises the abort flag every kernel wait polls. Results are bit-identical
// to atom/host: same source order, fp32 accumulation for 16- and 8-bit
// floats, one rounding; but for an epilogue's RMSNorm, whose row sum of
// squares adds in another order (1 unit in the last place at most,
// csrc/epilogue.cuh).
//
// # Build
//
// The kernels are embedded only with the build tag cudakernels (`make
// lib-cuda`, which runs `make kernels`, which uses tools/nvcc.sh). Without
// it the package builds and its CPU tests run, and NewRank and Available
// report "built without CUDA kernels". libcuda.so.1 is opened at run time
// with purego, so nothing links against CUDA.
//
// # Use
//
//	if err := cuda.Available(); err == nil {
//		r, err := cuda.NewRank(topo, exchange, atom.Options{Device: dev})
//		...
//		err = r.Launch(plan, []atom.Buffers{{Send: sendPtr, Recv: recvPtr}}, stream)
//		...
//		err = r.AsyncError() // after the stream is synchronised, or any time
//	}
//
// The GPU tests (gpu_*_test.go) skip where Available fails; tests/gpu/run.sh
// runs them on the GPU machine from a binary built here.
package cuda
