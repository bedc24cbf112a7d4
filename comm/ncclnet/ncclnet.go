// Package ncclnet is NCCL's network between nodes for Purlin's
// communicators that span them: the rail and world phases of their
// Programs run as NCCL calls on the caller's CUDA stream, over whatever
// transport NCCL picks (InfiniBand, RoCE, sockets). NCCL is loaded at run
// time from a real libnccl.so.2: PURLIN_NCCL_LIBRARY, else the pip package
// nvidia-nccl-cu13 (or -cu12) where Python keeps it, else the system's.
// Purlin's own drop-in build is also named libnccl.so.2; it is recognised
// and passed over. A job on one node never loads NCCL.
//
// Each rank makes two NCCL communicators: the world (every rank, for sends
// and receives between nodes) and its rail (ncclCommSplit by local rank:
// the ranks of its local index, one per node).
package ncclnet

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"purlin/comm/network"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

var loaded struct {
	once sync.Once
	path string
	err  error
}

// Load finds and opens NCCL once and returns the path it loaded.
func Load() (string, error) {
	loaded.once.Do(func() { loaded.path, loaded.err = load(Candidates()) })
	return loaded.path, loaded.err
}

func load(paths []string) (string, error) {
	var why []string
	for _, p := range paths {
		cp := C.CString(p)
		buf := (*C.char)(C.malloc(512))
		rc := C.pn_load(cp, buf, 512)
		msg := C.GoString(buf)
		C.free(unsafe.Pointer(cp))
		C.free(unsafe.Pointer(buf))
		if rc == 0 {
			return p, nil
		}
		why = append(why, msg)
	}
	return "", errs.New(errs.ErrSystem, "no NCCL to carry calls between nodes (set PURLIN_NCCL_LIBRARY to a libnccl.so.2, or pip install nvidia-nccl-cu13): tried %v", why)
}

// Candidates are the libraries Load tries, in order: PURLIN_NCCL_LIBRARY
// alone when set; else the pip packages' copies under Python's usual
// prefixes ($VIRTUAL_ENV, $CONDA_PREFIX, PYTHONPATH, ~/.local, /usr/local,
// /usr); else the system's, by name and at the usual library paths.
func Candidates() []string {
	if p := config.Getenv("PURLIN_NCCL_LIBRARY"); p != "" {
		return []string{p}
	}
	var roots []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := config.Getenv(v); d != "" {
			roots = append(roots, d)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, ".local"))
	}
	roots = append(roots, "/usr/local", "/usr")
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, d := range filepath.SplitList(config.Getenv("PYTHONPATH")) {
		if d != "" {
			m, _ := filepath.Glob(filepath.Join(d, "nvidia", "nccl", "lib", "libnccl.so.2"))
			for _, p := range m {
				add(p)
			}
		}
	}
	for _, r := range roots {
		for _, site := range []string{"site-packages", "dist-packages"} {
			m, _ := filepath.Glob(filepath.Join(r, "lib", "python3*", site, "nvidia", "nccl", "lib", "libnccl.so.2"))
			for _, p := range m {
				add(p)
			}
		}
	}
	add("libnccl.so.2")
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64"} {
		add(filepath.Join(d, "libnccl.so.2"))
	}
	return out
}

// ncclInProgress is NCCL's "not finished yet" result (non-blocking communicators).
const ncclInProgress = 7

func check(rc C.int, what string) error {
	if rc == 0 {
		return nil
	}
	return errs.New(errs.ErrRemote, "NCCL %s: %s (%d)", what, C.GoString(C.pn_error_string(rc)), int(rc))
}

// New is a network.Factory: NCCL's world and rail communicators for job's rank.
func New(job network.Job) (network.Network, error) {
	if job.InContext == nil {
		return nil, errs.New(errs.ErrUnsupported, "NCCL's network needs the CUDA Atom (its calls run on CUDA streams)")
	}
	if _, err := Load(); err != nil {
		return nil, err
	}
	connectAtInit()
	var id [128]byte
	var mine []byte
	if job.Rank == 0 {
		cid := C.malloc(C.size_t(len(id)))
		err := check(C.pn_get_unique_id(cid), "ncclGetUniqueId")
		copy(id[:], C.GoBytes(cid, C.int(len(id))))
		C.free(cid)
		if err != nil {
			return nil, err
		}
		mine = id[:]
	}
	all, err := job.AllGather(mine)
	if err != nil {
		return nil, err
	}
	if copy(id[:], all[0]) != len(id) {
		return nil, errs.New(errs.ErrRemote, "NCCL's network: rank 0 sent no NCCL unique id")
	}
	n := &nccl{nodes: job.Nodes, rank: job.Rank, inContext: job.InContext}
	err = job.InContext(func() error {
		nranks := job.Nodes.Count * job.Nodes.Local
		cid := C.CBytes(id[:])
		defer C.free(cid)
		var world, rail unsafe.Pointer
		err := check(C.pn_comm_init_rank(&world, C.int(nranks), cid, C.int(job.Rank)), "ncclCommInitRank")
		n.world = world
		if err == nil {
			err = check(C.pn_comm_split(world, C.int(job.Nodes.LocalRank(job.Rank)), C.int(job.Nodes.Node(job.Rank)), &rail), "ncclCommSplit")
			n.rail = rail
		}
		if err == nil && job.Colocated {
			err = n.preconnect()
		}
		return err
	})
	if err != nil {
		n.Abort()
		if n.preconnects != nil {
			C.pn_mem_free(n.preconnects)
		}
		return nil, err
	}
	return n, nil
}

// connectAtInit makes NCCL connect its peers in ncclCommInitRank, where
// every rank runs at once, rather than in the first collective
// (NCCL_RUNTIME_CONNECT=0, unless the user set it): a Program issues one
// rank's network group at a time, and a process that drives several ranks
// from one thread would otherwise wait in rank 0's first group for a peer
// its own thread has not reached (on 2x H200 every first collective hung).
// Sends and receives still connect on first use (preconnect).
func connectAtInit() {
	if _, set := os.LookupEnv("NCCL_RUNTIME_CONNECT"); !set {
		os.Setenv("NCCL_RUNTIME_CONNECT", "0")
	}
}

type nccl struct {
	nodes       snac.Nodes
	rank        int
	inContext   func(func() error) error
	world, rail unsafe.Pointer
	preconnects unsafe.Pointer // preconnect's bytes (ncclMemAlloc), or nil
	aborted     atomic.Bool
	closed      bool
}

// preconnect connects this rank to every peer its Programs may send to or
// receive from on either communicator, in init, where every rank of the
// communicator runs at once. NCCL connects a pair for sends and receives in
// the first group that has one, and waits there for the peer to reach its
// own; where one thread issues the calls of several ranks in turn
// (colocated ranks: one process driving GPUs of several nodes, or all of
// its node's GPUs while another process drives another node's), the peer's
// group may come from a thread that waits in turn, and neither wait ends. A
// send and a receive of one byte to each peer, in one group, connect every
// channel NCCL would use for the pair whatever the size: NCCL marks all of
// a peer's point-to-point channels on its first use. Without ncclMemAlloc
// (NCCL before 2.19) it connects nothing and says so.
func (n *nccl) preconnect() error {
	world, rail := preconnectPeers(n.nodes, n.rank)
	pairs := len(world) + len(rail)
	if pairs == 0 {
		return nil
	}
	if C.pn_mem_alloc(&n.preconnects, C.size_t(2*pairs)) != 0 {
		n.preconnects = nil
		config.Warnf("rank %d: this NCCL has no ncclMemAlloc, so its sends and receives between nodes connect on first use, "+
			"which hangs where one thread drives several ranks; use NCCL 2.19 or later", n.rank)
		return nil
	}
	if err := check(C.pn_group_start(), "ncclGroupStart"); err != nil {
		return err
	}
	var first error
	i := 0
	for _, side := range []struct {
		comm  unsafe.Pointer
		peers []int
	}{{n.world, world}, {n.rail, rail}} {
		for _, q := range side.peers {
			b := uintptr(n.preconnects) + uintptr(2*i)
			i++
			if err := check(C.pn_send(ptr(b), 1, C.int(spec.Int8), C.int(q), side.comm, nil), "ncclSend"); err != nil && first == nil {
				first = err
			}
			if err := check(C.pn_recv(ptr(b+1), 1, C.int(spec.Int8), C.int(q), side.comm, nil), "ncclRecv"); err != nil && first == nil {
				first = err
			}
		}
	}
	if err := check(C.pn_group_end(), "ncclGroupEnd"); first == nil {
		first = err
	}
	return first
}

// preconnectPeers are the peers rank's Programs may send to or receive from
// (snac.Hierarchy): on the world communicator the ranks of other nodes, on
// its rail (whose rank r is node r's rank of this local index) the other
// nodes.
func preconnectPeers(nodes snac.Nodes, rank int) (world, rail []int) {
	me := nodes.Node(rank)
	for q := range nodes.Count * nodes.Local {
		if nodes.Node(q) != me {
			world = append(world, q)
		}
	}
	for r := range nodes.Count {
		if r != me {
			rail = append(rail, r)
		}
	}
	return world, rail
}

// Run issues phases as one NCCL group on stream.
func (n *nccl) Run(phases []snac.Phase, stream uintptr) error {
	return n.inContext(func() error {
		if err := check(C.pn_group_start(), "ncclGroupStart"); err != nil {
			return err
		}
		var first error
		for i := range phases {
			if err := n.issue(&phases[i], stream); err != nil && first == nil {
				first = err
			}
		}
		if err := check(C.pn_group_end(), "ncclGroupEnd"); first == nil {
			first = err
		}
		return first
	})
}

// issue enqueues one phase. The rooted and all-to-all phases are sends and
// receives in the group, as NCCL composes them itself.
func (n *nccl) issue(p *snac.Phase, stream uintptr) error {
	c := &p.Call
	comm := n.rail
	if p.Level == snac.LevelWorld {
		comm = n.world
	}
	if c.Op.Divisor != 0 { // NCCL's Avg divides by its communicator's ranks
		return errs.New(errs.ErrInternal, "ncclnet: %s with Avg over %d ranks on a network phase", c.Coll, c.Op.Divisor)
	}
	st := ptr(stream) // a CUDA stream handle
	t, op := C.int(c.Type), C.int(c.Op.Kind)
	count := C.size_t(c.Count)
	size := uintptr(c.Type.Size())
	send, recv := ptr(c.Send), ptr(c.Recv)
	at := func(base uintptr, i int) unsafe.Pointer { return ptr(base + uintptr(i)*uintptr(c.Count)*size) }
	switch c.Coll {
	case spec.AllReduce:
		return check(C.pn_all_reduce(send, recv, count, t, op, comm, st), "ncclAllReduce")
	case spec.AllGather:
		return check(C.pn_all_gather(send, recv, count, t, comm, st), "ncclAllGather")
	case spec.ReduceScatter:
		return check(C.pn_reduce_scatter(send, recv, count, t, op, comm, st), "ncclReduceScatter")
	case spec.Broadcast:
		return check(C.pn_broadcast(send, recv, count, t, C.int(c.Root), comm, st), "ncclBroadcast")
	case spec.Reduce:
		return check(C.pn_reduce(send, recv, count, t, op, C.int(c.Root), comm, st), "ncclReduce")
	case spec.SendRecv:
		if c.IsSend {
			return check(C.pn_send(send, count, t, C.int(c.Peer), comm, st), "ncclSend")
		}
		return check(C.pn_recv(recv, count, t, C.int(c.Peer), comm, st), "ncclRecv")
	case spec.AllToAll:
		for q := range c.NRanks {
			if err := check(C.pn_send(at(c.Send, q), count, t, C.int(q), comm, st), "ncclSend"); err != nil {
				return err
			}
			if err := check(C.pn_recv(at(c.Recv, q), count, t, C.int(q), comm, st), "ncclRecv"); err != nil {
				return err
			}
		}
		return nil
	case spec.Gather:
		inPlace := c.Rank == c.Root && c.Send == c.Recv+uintptr(c.Root)*uintptr(c.Count)*size
		if c.Rank == c.Root {
			for q := range c.NRanks {
				if q == c.Root && inPlace {
					continue
				}
				if err := check(C.pn_recv(at(c.Recv, q), count, t, C.int(q), comm, st), "ncclRecv"); err != nil {
					return err
				}
			}
		}
		if inPlace {
			return nil
		}
		return check(C.pn_send(send, count, t, C.int(c.Root), comm, st), "ncclSend")
	case spec.AllGatherV: // a Broadcast from each rank of its part, in the group
		for q := range c.NRanks {
			part := c.Recv + uintptr(c.Displs[q])*size
			src := part // the root's buffer only is read
			if q == c.Rank {
				src = c.Send
			}
			if c.Counts[q] == 0 {
				continue
			}
			if err := check(C.pn_broadcast(ptr(src), ptr(part), C.size_t(c.Counts[q]), t, C.int(q), comm, st), "ncclBroadcast"); err != nil {
				return err
			}
		}
		return nil
	case spec.ReduceScatterV: // a Reduce of each rank's part to it, in the group
		for q := range c.NRanks {
			if c.Counts[q] == 0 {
				continue
			}
			part := ptr(c.Send + uintptr(c.Displs[q])*size)
			if err := check(C.pn_reduce(part, recv, C.size_t(c.Counts[q]), t, op, C.int(q), comm, st), "ncclReduce"); err != nil {
				return err
			}
		}
		return nil
	case spec.Scatter:
		if c.Rank == c.Root {
			for q := range c.NRanks {
				if err := check(C.pn_send(at(c.Send, q), count, t, C.int(q), comm, st), "ncclSend"); err != nil {
					return err
				}
			}
		}
		return check(C.pn_recv(recv, count, t, C.int(c.Root), comm, st), "ncclRecv")
	}
	return errs.New(errs.ErrInternal, "NCCL's network: no NCCL call for a %s phase", c.Coll)
}

// ptr converts a device address to the pointer NCCL's C ABI takes.
func ptr(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

func (n *nccl) AsyncError() error {
	for _, c := range []unsafe.Pointer{n.world, n.rail} {
		var res C.int
		if c == nil {
			continue
		}
		if err := check(C.pn_comm_async_error(c, &res), "ncclCommGetAsyncError"); err != nil {
			return err
		}
		if res != 0 && res != ncclInProgress {
			return check(res, "asynchronous error")
		}
	}
	return nil
}

func (n *nccl) Abort() {
	if n.aborted.Swap(true) {
		return
	}
	for _, c := range []unsafe.Pointer{n.rail, n.world} {
		if c != nil {
			C.pn_comm_abort(c)
		}
	}
}

func (n *nccl) Close() {
	if n.closed || n.aborted.Load() {
		return
	}
	n.closed = true
	n.inContext(func() error {
		for _, c := range []unsafe.Pointer{n.rail, n.world} {
			if c != nil {
				C.pn_comm_destroy(c)
			}
		}
		if n.preconnects != nil { // after the communicators, whose work used it
			C.pn_mem_free(n.preconnects)
		}
		return nil
	})
}
