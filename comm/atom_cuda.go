package comm

import (
	"runtime"
	"unsafe"

	"purlin/atom"
	"purlin/atom/cuda"
	"purlin/config"
	"purlin/snac"
)

// The CUDA Atom (atom/cuda) serves communicators whose ranks are GPUs. The
// package always builds; without the cudakernels tag or a driver,
// available() says why and selectAtom falls back to (or refuses, under
// PURLIN_ATOM=cuda) the host Atom.
func init() { cudaAtom = cudaFactory{} }

type cudaFactory struct{}

func (cudaFactory) name() string     { return "cuda" }
func (cudaFactory) available() error { return cuda.Available() }

// currentDevice is the calling thread's current CUDA device, if any.
func (cudaFactory) currentDevice() (int, bool) { return cuda.CurrentDevice() }

func (cudaFactory) deviceMemory(p uintptr) bool { return cuda.DeviceMemory(p) }

func (cudaFactory) topology(nranks, rank int, cfg Config) snac.Topology {
	return cfg.override(cuda.Topology(nranks, rank))
}

// newRank holds the goroutine on its thread: NewRank makes the device's
// context current while it sets the rank up.
func (cudaFactory) newRank(topo snac.Topology, ex atom.Exchange, opts atom.Options) (atom.Rank, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cuda.NewRank(topo, ex, opts)
}

// cudaMemAlloc serves MemAlloc with device memory when CUDA may be used
// (PURLIN_ATOM is not host, the CUDA Atom is available): a cuMem VMM
// allocation that every peer device can access and any process can
// import, on the calling thread's current device, or device 0 where it has
// none, as NCCL's (callerDevice). handled is false when host memory should
// be used instead.
func cudaMemAlloc(size uint64) (p unsafe.Pointer, handled bool, err error) {
	if config.Get().Atom == "host" || cuda.Available() != nil {
		return nil, false, nil
	}
	dev, _ := cuda.CurrentDevice() // 0 where none is current
	ptr, err := cuda.MemAlloc(dev, uintptr(size))
	if err != nil {
		return nil, true, err
	}
	// A device address, never dereferenced by Go; converted without
	// arithmetic so vet and the collector see an opaque pointer.
	return *(*unsafe.Pointer)(unsafe.Pointer(&ptr)), true, nil
}

// cudaMemFree frees memory from cudaMemAlloc.
func cudaMemFree(ptr unsafe.Pointer) error { return cuda.MemFree(uintptr(ptr)) }
