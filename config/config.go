// Package config holds every PURLIN_* setting, one documented field each.
// Values are read with C getenv when first needed, not at library load: a
// Go c-shared library's os.Getenv is a snapshot taken at load, and Python
// programs often set variables after that.
package config

/*
#include <stdlib.h>
*/
import "C"

import (
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

// Settings are the library-wide settings.
type Settings struct {
	// Debug is PURLIN_DEBUG: "" (quiet), WARN, INFO or TRACE; log lines go to
	// stderr. When PURLIN_DEBUG is unset or empty, NCCL_DEBUG is read instead,
	// so an NCCL user's habit carries over (its other levels, VERSION and
	// ABORT, log nothing here).
	Debug string
	// Timeout is PURLIN_TIMEOUT in seconds (default 300): every wait for a
	// peer, on the host and inside kernels, fails with a timeout after it.
	// 0 is NoTimeout, as NCCL, which never times out a wait (a job then
	// ends a stuck communicator with ncclCommAbort).
	Timeout time.Duration
	// Atom is PURLIN_ATOM: "auto" (default: CUDA when a GPU is usable, host
	// otherwise), "host" or "cuda".
	Atom string
	// GoMaxProcs is PURLIN_GOMAXPROCS: when > 0, the Go runtime's GOMAXPROCS,
	// set when the settings are first read and by each Reload (default:
	// leave Go's choice).
	GoMaxProcs int
	// HostWorkers is PURLIN_HOST_WORKERS: the most goroutines a host-Atom
	// Plan uses per rank (default 4). Every rank must use the same value.
	HostWorkers int
	// StageBytes is PURLIN_STAGE_BYTES: bytes of one half of the collective
	// staging area (host default 8 MiB, CUDA default 64 MiB; 0 means the Atom's default).
	StageBytes uint64
	// MaxCTAs is PURLIN_MAX_CTAS, else NCCL_MAX_CTAS as NCCL reads it: the
	// most thread blocks one CUDA-Atom Plan uses per rank (1-64; 0 means the
	// Atom's default, 32).
	MaxCTAs int
	// PacketBytes is PURLIN_PACKET_BYTES: the largest payload per rank that
	// AllReduce and SendRecv move as packets, one store carrying data and
	// flag; the other collectives move half of it so (0 means the Atom's
	// default).
	PacketBytes uint64
	// P2PBytes is PURLIN_P2P_BYTES: bytes of one half of each peer's
	// point-to-point staging area (0 means the Atom's default).
	P2PBytes uint64
	// ChunkBytes is PURLIN_CHUNK_BYTES: the largest chunk one worker stages
	// at a time in the pipelined sizes (0 means the Atom's default).
	ChunkBytes uint64
	// PlanBytes is PURLIN_PLAN_BYTES: the device memory of reclaimable
	// Plan images a CUDA rank keeps before it frees idle ones (0 means the
	// Atom's default).
	PlanBytes uint64
	// CopyEngine is PURLIN_COPY_ENGINE: the shortest transfer (bytes) that a
	// collective moves with the GPU's copy engines instead of thread
	// blocks: a collective of copies alone (AllGather, AllToAll, Broadcast,
	// Gather, Scatter, SendRecv) leaves the SMs free, a reduction keeps a
	// few blocks to add what the engines deliver (0, the default: never).
	// CopyEngineWorkers (PURLIN_COPY_ENGINE_WORKERS, default 2) is how many
	// copies of one such call are in flight at once, each on a stream of
	// its own, in chunks of up to CopyEngineChunk bytes
	// (PURLIN_COPY_ENGINE_CHUNK, default 16 MiB). Equal on every rank.
	CopyEngine        uint64
	CopyEngineWorkers int
	CopyEngineChunk   uint64
	// PDL is PURLIN_PDL: "0" turns off programmatic dependent launch, where
	// a CUDA-Atom kernel starts while the one before it on its stream ends
	// (default on, on GPUs of compute capability 9.0 and later).
	PDL bool
	// CallCache is PURLIN_CALL_CACHE: "0" turns off the C API's call cache,
	// where a collective called again with the same arguments but its
	// buffers is issued from C without entering Go (default on).
	CallCache bool
	// PeerUIDs is PURLIN_PEER_UIDS: user ids, comma-separated, whose
	// processes may be ranks on this host besides the process's own user
	// (default none). A local peer's messages are checked by the kernel's
	// credentials of its sender.
	PeerUIDs []int
	// Nodes is PURLIN_NODES: when > 0, a communicator's ranks are split
	// into that many virtual nodes of consecutive ranks, whatever hosts they
	// run on, and calls cross between them as between servers (tests of the
	// multi-node path on one machine). 0: one node per host.
	Nodes int
	// NetChunk is PURLIN_NET_CHUNK: a call across nodes of an AllReduce,
	// Broadcast, Reduce, AllGather, ReduceScatter, AllToAll or their V forms whose parts are at
	// least twice this many bytes runs in chunks of it, each chunk's
	// network phase beside the node phases of the chunks around it
	// (default 4 MiB; 0: in one piece).
	NetChunk uint64
	// BootstrapAddr is PURLIN_BOOTSTRAP_ADDR: the address (host or
	// host:port) the rendezvous server of a new unique id listens on, which
	// ranks on other hosts must reach.
	BootstrapAddr string
	// SocketIfname is PURLIN_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME: the
	// network interfaces the rendezvous server may listen on, in NCCL's
	// form (comma-separated name prefixes; a leading ^ excludes them, a
	// leading = matches names exactly). Without it or BootstrapAddr the
	// server listens on loopback, for ranks of one host.
	SocketIfname string
}

// settings holds the current Settings, swapped whole by Reload: Get may run
// on any goroutine while ncclResetDebugInit (capi) rereads the environment.
var settings atomic.Pointer[Settings]

// NoTimeout is PURLIN_TIMEOUT=0: a century, which no wait reaches and no
// deadline computed from it overflows.
const NoTimeout = 100 * 365 * 24 * time.Hour

// Get returns the settings, read from the environment on the first call.
func Get() Settings {
	if s := settings.Load(); s != nil {
		return *s
	}
	s := read()
	if settings.CompareAndSwap(nil, &s) { // a concurrent first call or Reload may have won
		s.apply()
	}
	return *settings.Load()
}

// Reload rereads the environment (ncclResetDebugInit; tests after changing a variable).
func Reload() Settings {
	s := read()
	settings.Store(&s)
	s.apply()
	return s
}

// apply puts into effect the settings that act on the process as a whole.
func (s *Settings) apply() {
	if s.GoMaxProcs > 0 {
		runtime.GOMAXPROCS(s.GoMaxProcs)
	}
}

func read() Settings {
	s := Settings{
		Debug:       strings.ToUpper(debugLevel()),
		Timeout:     300 * time.Second,
		Atom:        strings.ToLower(Getenv("PURLIN_ATOM")),
		GoMaxProcs:  atoi(Getenv("PURLIN_GOMAXPROCS"), 0),
		HostWorkers: atoi(Getenv("PURLIN_HOST_WORKERS"), 4),
		StageBytes:  uint64(atoi(Getenv("PURLIN_STAGE_BYTES"), 0)),
		MaxCTAs:     atoi(Getenv("PURLIN_MAX_CTAS"), atoi(Getenv("NCCL_MAX_CTAS"), 0)),
		PacketBytes: uint64(atoi(Getenv("PURLIN_PACKET_BYTES"), 0)),
		ChunkBytes:  uint64(atoi(Getenv("PURLIN_CHUNK_BYTES"), 0)),
		PlanBytes:   uint64(max(0, atoi(Getenv("PURLIN_PLAN_BYTES"), 0))),
		PDL:         Getenv("PURLIN_PDL") != "0",
		CallCache:   Getenv("PURLIN_CALL_CACHE") != "0",

		CopyEngine:        uint64(atoi(Getenv("PURLIN_COPY_ENGINE"), 0)),
		CopyEngineWorkers: atoi(Getenv("PURLIN_COPY_ENGINE_WORKERS"), 2),
		CopyEngineChunk:   uint64(atoi(Getenv("PURLIN_COPY_ENGINE_CHUNK"), 16<<20)),
		P2PBytes:          uint64(atoi(Getenv("PURLIN_P2P_BYTES"), 0)),
		Nodes:             atoi(Getenv("PURLIN_NODES"), 0),
		NetChunk:          uint64(max(atoi(Getenv("PURLIN_NET_CHUNK"), 4<<20), 0)),

		BootstrapAddr: strings.TrimSpace(Getenv("PURLIN_BOOTSTRAP_ADDR")),
		SocketIfname:  strings.TrimSpace(Getenv("PURLIN_SOCKET_IFNAME")),
	}
	if s.SocketIfname == "" {
		s.SocketIfname = strings.TrimSpace(Getenv("NCCL_SOCKET_IFNAME"))
	}
	switch v, err := strconv.ParseFloat(Getenv("PURLIN_TIMEOUT"), 64); {
	case err == nil && v > 0:
		s.Timeout = time.Duration(min(v*float64(time.Second), float64(NoTimeout)))
	case err == nil && v == 0:
		s.Timeout = NoTimeout
	}
	for _, f := range strings.Split(Getenv("PURLIN_PEER_UIDS"), ",") {
		if uid, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && uid >= 0 {
			s.PeerUIDs = append(s.PeerUIDs, uid)
		}
	}
	if s.Atom == "" {
		s.Atom = "auto"
	}
	if s.HostWorkers < 1 {
		s.HostWorkers = 1
	}
	return s
}

// Sizes replaces an Atom's default staging half, point-to-point half, packet
// limit and chunk limit by PURLIN_STAGE_BYTES, PURLIN_P2P_BYTES,
// PURLIN_PACKET_BYTES and PURLIN_CHUNK_BYTES where they are set. Every rank
// must see the same values.
func (s Settings) Sizes(stageHalf, p2pHalf, packetMax, chunkMax *uint64) {
	for _, o := range []struct {
		dst *uint64
		v   uint64
	}{{stageHalf, s.StageBytes}, {p2pHalf, s.P2PBytes}, {packetMax, s.PacketBytes}, {chunkMax, s.ChunkBytes}} {
		if o.v > 0 {
			*o.dst = o.v
		}
	}
}

// debugLevel is PURLIN_DEBUG, or NCCL_DEBUG when PURLIN_DEBUG is unset or empty.
func debugLevel() string {
	if v := Getenv("PURLIN_DEBUG"); v != "" {
		return v
	}
	return Getenv("NCCL_DEBUG")
}

func atoi(v string, def int) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return n
}

// Getenv reads a variable with C getenv, so values set after load are seen.
func Getenv(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	v := C.getenv(cname)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}
