// Package comm holds Purlin's communicators: bootstrap, ranks, groups,
// streams, errors and abort. It joins spec (what a call is), snac (its
// Plan) and an Atom (the datapath); capi is a thin C skin over it.
//
// # Bootstrap
//
// GetUniqueID starts a rendezvous server (goroutines) in the calling
// process and returns a 128-byte UniqueID naming its TCP address (loopback)
// and a random 256-bit secret. InitRank connects and proves it knows the
// secret by challenge-response (HMAC-SHA256 over both ends' nonces; the
// server proves it back), sends (rank, nranks, pid, host, device) and
// receives every rank's record once all arrived, bounded by the timeout. A
// connection without the proof is closed unanswered, may send no frame
// larger than a few KiB and gets a short handshake deadline; a duplicate
// rank or a disagreeing nranks from an authenticated rank is refused with a
// clear error. The connection stays open: it carries later
// exchanges (Split) and tells every rank when another rank aborts or its
// process ends without destroying its communicator. A rank gone is an error
// only for work that still needs it: the datapath fails, with errs.ErrRemote
// naming the rank, the waits that what the rank wrote before it went does
// not satisfy (so a slower rank's last collective, whose data all arrived,
// succeeds). Each rank also owns an abstract AF_UNIX socket, which passes
// file descriptors (SCM_RIGHTS) for the Atoms' shared memory and Shrink's
// new unique id; it is named by a keyed hash of the secret and its rank
// (nothing about the secret shows in /proc/net/unix), and takes only
// messages with the secret's HMAC from a sender the kernel says is of the
// same user (or of PURLIN_PEER_UIDS). Ranks may be
// goroutines of one process or processes of one host.
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
