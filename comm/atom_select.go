package comm

import (
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

// cudaAtom is the CUDA datapath's factory, or nil in a build without it.
// atom/cuda's glue sets it (and reports whether a GPU is usable).
var cudaAtom interface {
	atomFactory
	available() error
}

func selectAtom(device int) (atomFactory, error) {
	switch choice := config.Get().Atom; choice {
	case "host":
		return hostAtom{}, nil
	case "cuda":
		if cudaAtom == nil {
			return nil, errs.New(errs.ErrUnsupported, "PURLIN_ATOM=cuda, but this build of Purlin has no CUDA Atom")
		}
		if err := cudaAtom.available(); err != nil {
			return nil, err
		}
		return cudaAtom, nil
	case "auto", "":
		if cudaAtom != nil && cudaAtom.available() == nil {
			return cudaAtom, nil
		}
		return hostAtom{}, nil
	default:
		return nil, errs.New(errs.ErrInvalidArgument, "PURLIN_ATOM=%q: expected auto, host or cuda", choice)
	}
}

// hostAtom is atom/host: goroutines over shared host memory.
type hostAtom struct{}

// Host Atom defaults (see snac.Topology).
const (
	hostStageHalf = 8 << 20
	hostP2PHalf   = 1 << 20
	hostPacketMax = 16 << 10
	hostChunkMax  = 1 << 20
)

func (hostAtom) name() string { return "host" }

func (hostAtom) topology(nranks, rank int, cfg Config) snac.Topology {
	s := config.Get()
	t := snac.Topology{NRanks: nranks, Rank: rank, Workers: s.HostWorkers, StageHalf: hostStageHalf,
		P2PHalf: hostP2PHalf, PacketMax: hostPacketMax, ChunkMax: hostChunkMax}
	if s.StageBytes > 0 {
		t.StageHalf = s.StageBytes
	}
	return cfg.override(t)
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
	return t
}
