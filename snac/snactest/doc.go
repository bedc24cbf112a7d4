// Package snactest is a protocol simulator for SNAC Plans: a deterministic,
// single-threaded interpreter of n ranks' Plans over byte slices. It runs
// the verbs exactly as an Atom does (flags, check words, parity halves,
// packets, epochs and the epoch rule) and keeps the shared state of every
// rank across calls, so sequences of mixed calls can be checked.
//
// Workers are picked in a seeded random order among those that can make
// progress; a worker whose Wait (or packet source) is not satisfied is
// blocked. When no worker can progress the simulator reports a deadlock with
// a dump of every blocked worker.
//
// It also checks protocol safety: every staging and packet byte is tagged
// with (writer rank, call index on the writer's channel, from its epoch),
// and a consumer that reads bytes not written in the call it is running (by
// its own epoch) fails, as does a producer that overwrites staging bytes of
// its call before they were read (a ring slot reused too early; ranks that
// disagree on a call may write over each other's segments, and fail on the
// check words). A write outside the Recv extent of the call (or
// into Send) fails. Flags must never go backwards, and the workers of one
// channel in a Plan must hold the same number of Advance steps.
//
// Run stops at the first error; RunEach goes on as Atoms do, with the
// failing rank broken and the others running, and returns every rank's
// error, so a test can check that every rank fails.
//
//	sim := snactest.New(topo, seed)
//	err := sim.Run(launches) // launches[rank] = that rank's calls, in order
package snactest
