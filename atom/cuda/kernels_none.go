//go:build !cudakernels

package cuda

// kernelImage is empty without -tags cudakernels: a fresh clone builds and
// tests without nvcc, and NewRank reports that the kernels are missing.
var kernelImage []byte
