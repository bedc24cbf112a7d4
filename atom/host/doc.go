// Package host is the CPU Atom: it runs SNAC Plans with goroutines over host
// memory, the same Plans the GPU Atom runs, so every protocol rule is tested
// without a GPU, and it is a real fallback datapath.
//
// # Shared state
//
// Each rank keeps its symmetric memory (flags, check words, epochs, staging,
// packets; see snac/state.go) in ONE memfd, shared with every rank through
// Exchange.AllGatherFD and mapped MAP_SHARED, so ranks in one process and
// ranks in different processes run the same code. Flags, check words,
// epochs and packet words are only touched with sync/atomic; staging is
// plain memory, published by the flags. User buffers (SpaceSend, SpaceRecv)
// are plain memory given as addresses.
//
// # Streams
//
// A stream stands in for a CUDA stream: an in-order queue served by one
// goroutine. NewStream returns a small non-zero handle (never a Go
// pointer); stream 0 in Launch is the rank's own default stream. The queue
// is unbounded, so Launch never blocks on peers. A Plan runs its workers as
// goroutines; its stream moves on when all of them have finished.
//
//	topo := host.Topology(nranks, me) // the defaults; equal on every rank but Rank
//	rank, err := host.NewRank(topo, ex, atom.Options{})
//	s := host.NewStream()
//	err = rank.Launch(plan, []atom.Buffers{{Send: in, Recv: out}}, s)
//	err = host.SynchronizeStream(s) // or rank.Synchronize()
//
// # Errors
//
// Every wait spins briefly, then yields, then sleeps in growing steps (up
// to 100 us: eight ranks of four workers may share two cores), and polls
// the rank's abort flag and its deadline (Options.TimeoutNanos, default
// PURLIN_TIMEOUT). The first error of a Plan becomes the rank's AsyncError
// and marks its stream failed; the rank is broken from then on, as an NCCL
// communicator is: its other waits give up and later Plans fail at once
// with that error.
package host
