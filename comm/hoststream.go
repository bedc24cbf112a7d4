package comm

import "purlin/atom/host"

// Host streams stand in for CUDA streams on the host Atom: an in-order queue
// per stream (see atom/host). comm hands them out so the C API needs nothing
// below comm.

// NewHostStream returns a new host stream handle (never 0).
func NewHostStream() uintptr { return host.NewStream() }

// SynchronizeHostStream waits until every call launched on stream finished,
// and returns the first error among them.
func SynchronizeHostStream(stream uintptr) error { return host.SynchronizeStream(stream) }

// DestroyHostStream forgets stream; work already queued on it still runs.
func DestroyHostStream(stream uintptr) error { return host.DestroyStream(stream) }
