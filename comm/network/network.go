// Package network is the contract between a communicator that spans nodes
// (comm) and what carries its calls between nodes: a Network runs the
// rail and world phases of snac.Hierarchy's Programs. comm/ncclnet is
// NCCL's network; comm/nettest a reference for tests.
package network

import (
	"time"

	"purlin/snac"
)

// Network carries the phases of a multi-node communicator's calls that
// cross nodes (snac.LevelRail and snac.LevelWorld).
type Network interface {
	// Run issues phases, one group of calls of one level with their Send
	// and Recv addresses set, on stream: after the work enqueued there so
	// far, and before the work enqueued after it. It never waits for a peer;
	// a failure of the issued work is reported by AsyncError.
	Run(phases []snac.Phase, stream uintptr) error
	// AsyncError is the first error of the issued work, or nil.
	AsyncError() error
	// Abort makes every wait of issued and future work fail promptly.
	Abort()
	// Close releases the network after its work finished or was aborted.
	Close()
}

// Job is what a Network is made from.
type Job struct {
	Rank    int // the communicator's
	Nodes   snac.Nodes
	Device  int
	Timeout time.Duration
	// Colocated: another rank of the communicator runs in this process, so
	// one thread may issue the calls of several ranks in turn.
	Colocated bool
	// AllGather exchanges bytes among every rank of the communicator (its
	// bootstrap), for the network's own setup.
	AllGather func(mine []byte) ([][]byte, error)
	// Enqueue runs f in stream order on the node's datapath, where it has
	// host streams (the host Atom); nil where streams are the GPU's.
	Enqueue func(stream uintptr, f func() error) error
	// InContext runs f with the node's GPU current on the calling thread
	// (the CUDA Atom); nil on the host Atom.
	InContext func(f func() error) error
}

// Factory makes a communicator's Network (comm.Config.Network).
type Factory func(Job) (Network, error)
