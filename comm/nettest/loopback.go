// Package nettest is a network between nodes for tests: ranks that are
// goroutines of one process, on the host Atom, exchange their rail and world
// phases through a reference fabric (snactest.Fabric), so a multi-node
// communicator runs end to end, node phases on Purlin's own Plans, without
// a network or GPUs. It is for tests only: it copies every message and
// computes reductions in float64.
package nettest

import (
	"crypto/rand"
	"sync"
	"sync/atomic"
	"unsafe"

	"purlin/comm/network"
	"purlin/errs"
	"purlin/snac"
	"purlin/snac/snactest"
)

// fabrics holds the fabric of each job, by a key its rank 0 draws.
var fabrics struct {
	mu   sync.Mutex
	byID map[[16]byte]*fabric
}

type fabric struct {
	*snactest.Fabric
	users int
}

// Loopback is a network.Factory for ranks of one process on the host
// Atom (comm.Config.Network).
func Loopback(job network.Job) (network.Network, error) {
	if job.Enqueue == nil {
		return nil, errs.New(errs.ErrUnsupported, "nettest.Loopback serves the host Atom only")
	}
	var mine []byte
	if job.Rank == 0 {
		mine = make([]byte, 16)
		rand.Read(mine)
	}
	all, err := job.AllGather(mine)
	if err != nil {
		return nil, err
	}
	if len(all[0]) != 16 {
		return nil, errs.New(errs.ErrRemote, "nettest.Loopback: rank 0 sent no fabric key")
	}
	id := [16]byte(all[0])
	fabrics.mu.Lock()
	if fabrics.byID == nil {
		fabrics.byID = map[[16]byte]*fabric{}
	}
	f := fabrics.byID[id]
	if f == nil {
		f = &fabric{Fabric: snactest.NewFabric()}
		fabrics.byID[id] = f
	}
	f.users++
	fabrics.mu.Unlock()
	n := &loopback{id: id, f: f, job: job}
	n.party = snactest.Party{Rank: job.Rank, Nodes: job.Nodes, Memory: memory}
	return n, nil
}

type loopback struct {
	id     [16]byte
	f      *fabric
	job    network.Job
	party  snactest.Party // used by the stream functions, one at a time per rank
	mu     sync.Mutex     // the party's meeting counts: streams may run concurrently
	failed atomic.Pointer[error]
	closed bool
}

// memory is the bytes at a Phase's address: host memory of this process.
func memory(_ snac.Span, addr uintptr, n uint64) []byte {
	if n == 0 || addr == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr)) // memory the caller owns and keeps for the call
	return unsafe.Slice((*byte)(p), n)
}

func (n *loopback) Run(phases []snac.Phase, stream uintptr) error {
	batch := append([]snac.Phase(nil), phases...)
	return n.job.Enqueue(stream, func() error {
		n.mu.Lock()
		err := snactest.RunPhases(n.f.Fabric, &n.party, batch, n.job.Timeout)
		n.mu.Unlock()
		if err != nil {
			n.failed.CompareAndSwap(nil, &err)
		}
		return err
	})
}

func (n *loopback) AsyncError() error {
	if e := n.failed.Load(); e != nil {
		return *e
	}
	return nil
}

func (n *loopback) Abort() { n.f.Abort() }

func (n *loopback) Close() {
	fabrics.mu.Lock()
	defer fabrics.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	if n.f.users--; n.f.users == 0 {
		delete(fabrics.byID, n.id)
	}
}
