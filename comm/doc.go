// Package comm holds Purlin's communicators: bootstrap, ranks, groups,
// streams, errors and abort. It joins spec (what a call is), snac (its
// Plan) and an Atom (the datapath); capi is a thin C skin over it.
//
// # Bootstrap
//
// A communicator's ranks meet at a rendezvous (package comm/rendezvous):
// GetUniqueID starts one and names it, InitRank joins it, and the
// connection stays open for later exchanges (Split, window registration,
// the Atoms' shared memory) and to learn when another rank goes.
//
// # Use
//
//	id, _ := comm.GetUniqueID()             // one rank; send id to the others
//	c, err := comm.InitRank(n, id, rank, comm.DefaultConfig(), device)
//	call := spec.Call{Coll: spec.AllReduce, Send: s, Recv: r, Count: k,
//		Type: spec.Float32, Op: spec.Op{Kind: spec.Sum}}
//	err = c.Collective(&call, stream)       // enqueued; never waits for a peer
//	err = c.Synchronize()                   // host Atom: wait for the work
//	err = c.Destroy()
//
// # Groups
//
// GroupStart/GroupEnd are per OS thread and nest (see group.go). Inside a
// group InitRank, Split and Shrink return at once and collectives are
// queued; the outermost GroupEnd runs the inits concurrently, then launches
// each communicator's collectives in order and its point-to-point operations
// merged into one Plan. This is what lets one thread drive all ranks of a
// clique (NCCL's `-g N` pattern).
//
// # Handles and errors
//
// C sees a communicator as Handle(): an opaque non-zero integer from a
// registry, never a Go pointer; Lookup of a destroyed or unknown handle is
// errs.ErrInvalidUsage, never a crash. Every error is built from the errs
// sentinels and names the failing call; NoteError keeps the last one per
// thread and per communicator for GetLastError. A communicator's
// asynchronous error (failed work, abort) is AsyncError; its first one is
// logged at WARN, since programs that abort on it may not say it.
//
// # Datapaths
//
// atom_select.go picks the Atom per communicator from PURLIN_ATOM: under
// auto, the CUDA Atom (atom_cuda.go) when the build has its kernels, a GPU
// is usable and the thread calling InitRank had a current CUDA device (NCCL's
// rule; that device becomes the communicator's), the host Atom otherwise.
// MemAlloc follows the same rule for device memory.
//
// Concurrency: every function is safe from any goroutine. Abort may be
// called from any thread while others wait. Collectives of one
// communicator must be issued in the same order on every rank.
package comm
