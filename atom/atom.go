// Package atom defines the datapath contract: an Atom executes SNAC Plans
// with four primitives (copy, reduce, notify, wait), plus Advance, which
// starts the next call of a merged Plan on a worker's channel, and
// Epilogue, an AllReduce's row-wise epilogue on its output. It knows
// Plans, data types and reduction ops, never which collective a Plan came
// from.
//
// Running a Plan, each worker:
//  1. reads its epoch e from the shared state (EpochSlot(channel, index));
//  2. runs its steps in order, resolving Refs with e's parity and flag
//     values as e+Delta; an Advance step adds EpochAdvance to e;
//  3. stores e+EpochAdvance back. The worker of index 0 of each channel also
//     stores it into that channel's epoch slots the Plan does not use, so a
//     later Plan with more workers starts from the same epoch on every rank.
//
// Every wait is bounded: it polls the abort flag and gives up after the
// communicator's timeout, returning errs.ErrAborted or errs.ErrTimeout; a
// check word that differs returns errs.ErrMismatch.
package atom

import (
	"unsafe"

	"purlin/snac"
)

// MaxBuffers is the most calls (buffer pairs) one Launch may address: a
// merged group Plan's SpaceSend/SpaceRecv Ref.Rank is below it.
const MaxBuffers = 16

// Buffers are the caller's memory for one call (addresses in the caller's
// address space; device pointers for a GPU Atom): its input and output, and
// the buffers of an AllReduce epilogue (spec.Epilogue; 0 when unused),
// which Epilogue steps address alongside the output (snac.Epilogue).
type Buffers struct {
	Send, Recv                      uintptr
	Residual, Weight, Quant, Scales uintptr
	// PeerRecv is, for a call that pushes into its peers' outputs
	// (snac.SpacePeerRecv), every rank's output of the call as this rank
	// addresses it, Recv on each rank of a window they all registered; 0
	// elsewhere.
	PeerRecv [snac.MaxRanks]uintptr
}

// PeerOutput is where a SpacePeerRecv Ref of peer slot slot points among
// a Launch's bufs, on nranks ranks (snac.PeerSlot): peer slot%nranks's
// output of buffer slot/nranks's call; 0 where there is none.
func PeerOutput(bufs []Buffers, slot, nranks int) uintptr {
	if nranks <= 0 || nranks > snac.MaxRanks || slot/nranks >= len(bufs) {
		return 0
	}
	return bufs[slot/nranks].PeerRecv[slot%nranks]
}

// Rank is one rank's datapath, bound to its symmetric memory.
type Rank interface {
	// Launch enqueues plan on stream and returns without waiting for peers.
	// Work on one stream runs in order, and the rank's Plans run in the
	// order they were launched whatever their streams (as NCCL runs one
	// communicator's calls), so every rank runs the same sequence of calls
	// however it spreads them over streams. An error in the running Plan is
	// reported through AsyncError, never by blocking. A SpaceSend/SpaceRecv
	// Ref with Rank i resolves against bufs[i]; Launch does not retain bufs.
	// A GPU Atom keeps a device copy of each distinct Plan for the rank's
	// life and finds it by the Plan's pointer: callers pass cached,
	// never-modified Plans (snac.Cache), or every call looks for it again.
	Launch(plan *snac.Plan, bufs []Buffers, stream uintptr) error
	// Follow makes the work enqueued on stream from now on wait for the work
	// enqueued on after so far, as a CUDA stream waits on an event recorded
	// on after (comm joins the streams of a group with it, as NCCL does).
	// Streams in different CUDA graph captures cannot wait for each other:
	// that is an invalid usage.
	Follow(stream, after uintptr) error
	// AsyncError returns the first error of a launched Plan, or nil.
	AsyncError() error
	// Abort makes every wait of this rank's running and future Plans fail
	// with errs.ErrAborted. It is safe from any goroutine.
	Abort()
	// PeerGone says that rank peer's process is gone (peer -1: the ranks
	// gone are not known, so any peer may be). A wait for a flag or packet
	// that a gone rank writes fails with cause (its code: errs.RemoteError),
	// promptly, once it is not satisfied by what is in memory; everything
	// the gone rank wrote before it went still satisfies waits, and waits on
	// other ranks go on. Work whose data is complete therefore succeeds. It
	// is safe from any goroutine.
	PeerGone(peer int, cause error)
	// Close releases the rank's memory after its work is done or aborted.
	Close() error
}

// Replayer is the optional part of a Rank that can record a launch for C
// code to issue with other inputs and outputs, without entering Go (the C
// API's call cache). Replay writes a record of plan's launch on stream into
// rec (C memory of size bytes), and returns its length and issue, the
// address of a C function
//
//	int issue(void *rec, const uint64_t *bufs, int n, uintptr_t stream)
//
// that enqueues it as Launch would with n Buffers, Buffers i being
// {Send: bufs[2i], Recv: bufs[2i+1]} (n at most MaxBuffers, the buffers
// plan uses), given a copy of the record it may write. issue returns 0
// once enqueued, else non-zero with nothing enqueued: the caller then goes
// through Launch, which does what issue declined (say, a stream other than
// the rank's latest, which Launch orders after it) or reports its error. n
// is 0 where plan has no record. A record stays valid until the Rank is
// closed.
type Replayer interface {
	Replay(plan *snac.Plan, stream uintptr, rec unsafe.Pointer, size int) (n int, issue uintptr)
}

// Window is one registered buffer of every rank, as one rank addresses it:
// Peers()[q] is rank q's buffer; Close unmaps the peers' buffers.
type Window interface {
	Peers() []uintptr
	Close() error
}

// WindowMapper is the optional part of a Rank whose Atom can make a buffer
// of every rank addressable from this one (ncclCommWindowRegister). MapWindow
// is collective over ex: every rank passes its own buffer, of one size on
// every rank, and when any rank fails every rank returns an error and none
// keeps a window.
type WindowMapper interface {
	MapWindow(ex Exchange, buff uintptr, size uint64) (Window, error)
}

// Exchange is the bootstrap an Atom uses to set up symmetric memory. comm
// provides it, in one process or across processes on one host.
type Exchange interface {
	Rank() int
	NRanks() int
	// AllGather sends mine to every rank and returns all ranks' values in
	// rank order (mine included). Every rank must call it the same number of times.
	AllGather(mine []byte) ([][]byte, error)
	// AllGatherFD shares a file descriptor (memfd, CUDA POSIX handle) with
	// every rank and returns all ranks' descriptors in rank order, each a new
	// descriptor the caller owns and must close.
	AllGatherFD(fd int) ([]int, error)
}

// Options are the per-communicator settings an Atom needs.
type Options struct {
	// Timeout bounds every wait; 0 means the default of config.Timeout.
	TimeoutNanos int64
	// Device is the CUDA device ordinal (GPU Atoms only).
	Device int
}
