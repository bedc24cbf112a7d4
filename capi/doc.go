// Command capi is Purlin's Go core, libpurlin-core.so (go build
// -buildmode=c-shared), behind the C shim in shim/ (libpurlin.so, or the
// drop-in libnccl.so.2), which loads it from beside itself at the first call
// that needs it, so that a process may load Purlin and fork workers before
// that call (capi.h).
//
// Every public C function is written once in the shim (api.c, nccl_only.c)
// and aliased as purlinX, ncclX and pncclX; the shim refuses every call in a
// child forked without exec after the core was loaded (guard.c), then calls a
// Go export named goX. The Go exports are thin: they convert arguments, call
// package comm, map the error to a result code with one table (result.go),
// record the error text for GetLastError, and recover any panic into an
// internal error.
//
// Handles: a communicator is comm's registry handle (an integer, never a Go
// pointer); strings returned to C are C memory that stays valid until the
// next GetLastError call on the same thread or communicator.
package main

func main() {}
