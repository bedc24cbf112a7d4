// Package snac says WHEN and WHERE data moves: Build derives, for one rank,
// a Plan (workers of Copy/Reduce/Notify/Wait steps) from a validated
// spec.Call and the Topology. It knows no hardware; atom executes Plans.
//
// # Protocol (push model)
//
// A producer pushes its data into each consumer's staging buffer (Stage),
// into a segment of the slot that is its own (inbox), raises a flag on the
// consumer (Notify), and the consumer waits for the flag and copies or
// reduces out of its own staging (Consume). Data crosses the link as writes,
// which hold up better than reads when both directions are busy, and the
// consumer's reads are local. Small payloads skip staging: producers write
// 16-byte packets (8 data bytes + a flag word) into each consumer's packet
// window, and the consumer waits packet by packet.
//
// Regimes, chosen per transfer from its length (every input to the choice is
// known to both ends: the topology and the call's shape; V collectives use the
// lengths all ranks pass, AllToAllV a pair's own count):
//
//	packet   length <= PacketMax (AllReduce, SendRecv) or PacketMax/2 (the
//	         rest, whose staged form is one phase: packetLimit): one-shot
//	         packets, no separate notify
//	staged   one chunk per worker: stage, notify, consume
//	chunked  several chunks, each in its own slot of the worker's region
//	ring     more chunks than slots: slots are reused; consumers raise
//	         FlagConsumed after each chunk and the producer waits for it
//	         before it overwrites a slot
//
// Every transfer is split among the Plan's workers in 16-byte units, the
// same way on both ends, so worker w of the producer and worker w of the
// consumer handle the same bytes and per-worker flags suffice. Chunk c of a
// worker is announced with flag value epoch+c+1.
//
// # Reusing halves
//
// Staging halves alternate with the epoch's parity, so a producer may only
// rewrite a half once every reader of the call two calls ago has finished.
// On the collective channel that needs no flag of its own: every rank
// hears from every other in each collective, greeting the ranks a V
// collective leaves silent (hello.go). On a point-to-point channel the
// receiver's worker 0 raises FlagDone on the sender with its epoch as a
// transfer begins (the transfers before it are done: a rank's calls run one
// after another), and the sender's workers wait for FlagDone >=
// epoch+DoneDelta before they write (the done rule, done.go). Done flags
// carry the constant check word DoneCheck, since they outlive the call
// that raised them.
//
// # PreMulSum
//
// Each rank multiplies its own input by its own scalar (ranks may pass
// different scalars). A Plan applies it where it first reads this rank's
// input: what it stages or packetises for consumers is a one-source Reduce
// with Step.Scale set, and its own source in a local Reduce is marked in
// Scale. Peers' data and partial sums are never scaled again, so every
// input meets exactly one scalar, its owner's.
//
// # Check words
//
// Every Notify carries a 64-bit fingerprint of the call's shape (collective,
// type, op kind, root, count or pair count, ranks, V counts), and every
// packet its low 32 bits, so ranks that disagree on a call get
// errs.ErrMismatch instead of wrong data. In rooted collectives the root
// decides who reads from whom, so ranks naming different roots might never
// compare: there the Plan also exchanges the check word with every rank
// (FlagAgree, see agree.go), and every rank fails on a disagreement.
//
// # Groups and caching
//
// Merge joins the Plans of one group into one Plan whose workers run
// concurrently; Plans on the same channel are chained, each at the epoch it
// would have alone (an Advance step between two), so a point-to-point
// transfer matches its peer's however either side grouped its calls. Cache
// keeps Plans per shape; a cached Plan serves any buffers, since Plans hold
// no pointers.
//
//	plan, err := snac.Build(&call, topo)
package snac
