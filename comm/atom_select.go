package comm

import (
	"fmt"

	"purlin/atom"
	"purlin/atom/host"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
)

// atomFactory is the seam between comm and a datapath: its name, its
// default topology and how to make a rank. selectAtom picks one per
// communicator from PURLIN_ATOM.
type atomFactory interface {
	name() string
	topology(nranks, rank int, cfg Config) snac.Topology
	newRank(topo snac.Topology, ex atom.Exchange, opts atom.Options) (atom.Rank, error)
}

// cudaAtom is the CUDA datapath's factory (atom_cuda.go sets it), or nil
// in a build without it. available reports whether a GPU is usable;
// currentDevice the calling thread's current CUDA device; deviceMemory
// whether an address lies in memory only a GPU reaches.
var cudaAtom interface {
	atomFactory
	available() error
	currentDevice() (int, bool)
	deviceMemory(p uintptr) bool
}

// deviceMemoryCheck is what a communicator of factory checks its calls'
// buffers with (Comm.hostReachable): on the host Atom in a process with a
// usable GPU, the CUDA Atom's deviceMemory, since the host Atom's threads
// would fault on device memory, which a program that chose the host Atom
// (PURLIN_ATOM=host) may still pass; nil otherwise.
func deviceMemoryCheck(factory atomFactory) func(uintptr) bool {
	f := cudaAtom
	if _, host := factory.(hostAtom); host && f != nil && f.available() == nil {
		return f.deviceMemory
	}
	return nil
}

// callerDevice applies NCCL's rule at InitRank, on the caller's thread (not
// at a deferred GroupEnd, which runs elsewhere, after the caller may have
// switched devices): a communicator's GPU is the device current when it is
// created (cudaGetDevice), device 0 on a thread that made none current,
// where CUDA is usable. It returns that device and true, or fallback and
// false where CUDA is not usable or choice (PURLIN_ATOM) is host.
func callerDevice(choice string, fallback int) (int, bool) {
	if cudaAtom == nil || choice == "host" {
		return fallback, false
	}
	if dev, ok := cudaAtom.currentDevice(); ok {
		return dev, true
	}
	if cudaAtom.available() == nil {
		return 0, true // the runtime's device on a thread that set none
	}
	return fallback, false
}

// selectAtom picks a communicator's datapath from choice (PURLIN_ATOM): "host";
// "cuda" (an error when the CUDA Atom is unusable); "auto": CUDA when it is
// usable and callerDevice gave the communicator a device (onGPU), host
// otherwise. The choice and its reason are logged at PURLIN_DEBUG=INFO.
func selectAtom(choice string, rank, device int, onGPU bool) (atomFactory, error) {
	switch choice {
	case "host":
		config.Infof("rank %d: host Atom (PURLIN_ATOM=host)", rank)
		return hostAtom{}, nil
	case "cuda":
		if cudaAtom == nil {
			return nil, errs.New(errs.ErrUnsupported, "PURLIN_ATOM=cuda, but this build of Purlin has no CUDA Atom")
		}
		if err := cudaAtom.available(); err != nil {
			return nil, err
		}
		config.Infof("rank %d: CUDA Atom on device %d (PURLIN_ATOM=cuda)", rank, device)
		return cudaAtom, nil
	case "auto", "":
		if cudaAtom == nil {
			config.Infof("rank %d: host Atom (PURLIN_ATOM=auto; this build has no CUDA Atom)", rank)
			return hostAtom{}, nil
		}
		if err := cudaAtom.available(); err != nil {
			config.Infof("rank %d: host Atom (PURLIN_ATOM=auto; CUDA unusable: %v)", rank, err)
			return hostAtom{}, nil
		}
		if !onGPU {
			config.Infof("rank %d: host Atom (PURLIN_ATOM=auto; no CUDA device for the communicator)", rank)
			return hostAtom{}, nil
		}
		config.Infof("rank %d: CUDA Atom on device %d (PURLIN_ATOM=auto; the creating thread's current device, or 0 where it had none, as NCCL)", rank, device)
		return cudaAtom, nil
	default:
		return nil, errs.New(errs.ErrInvalidArgument, "PURLIN_ATOM=%q: expected auto, host or cuda", choice)
	}
}

// atomStartError is the error of a datapath that did not start.
func (c *Comm) atomStartError(atomName string, err error) error {
	return fmt.Errorf("CommInitRank rank %d: %s Atom: %w", c.rank, atomName, err)
}

// hostAtom is atom/host: goroutines over shared host memory.
type hostAtom struct{}

func (hostAtom) name() string { return "host" }

func (hostAtom) topology(nranks, rank int, cfg Config) snac.Topology {
	return cfg.override(host.Topology(nranks, rank))
}

func (hostAtom) newRank(topo snac.Topology, ex atom.Exchange, opts atom.Options) (atom.Rank, error) {
	return host.NewRank(topo, ex, opts)
}

// override applies cfg's topology overrides to t.
func (cfg Config) override(t snac.Topology) snac.Topology {
	if cfg.Workers > 0 {
		t.Workers = min(cfg.Workers, snac.MaxWorkers)
	}
	if cfg.StageHalf > 0 {
		t.StageHalf = cfg.StageHalf
	}
	if cfg.P2PHalf > 0 {
		t.P2PHalf = cfg.P2PHalf
	}
	if cfg.PacketMax > 0 {
		t.PacketMax = cfg.PacketMax
	}
	if cfg.ChunkMax > 0 {
		t.ChunkMax = cfg.ChunkMax
	}
	s := config.Get()
	from, workers, chunk := t.EngineMin, t.EngineWorkers, t.EngineChunk
	if cfg.CopyEngine > 0 {
		from, workers, chunk = cfg.CopyEngine, s.CopyEngineWorkers, s.CopyEngineChunk
		if cfg.CopyEngineChunk > 0 {
			chunk = cfg.CopyEngineChunk
		}
	}
	return t.WithEngine(from, workers, chunk) // above the packets' sizes set here
}
