// Command capi is libpurlin.so's C skin (go build -buildmode=c-shared).
//
// Every public C function is written once in C (api.c, nccl_only.c) and
// aliased as purlinX, ncclX and pncclX; the C layer refuses every call in
// a child forked without exec (guard.c), then calls a Go export named goX.
// The Go exports are thin: they convert arguments, call package comm, map
// the error to a result code with one table (result.go), record the error
// text for GetLastError, and recover any panic into an internal error.
//
// Handles: a communicator is comm's registry handle (an integer, never a Go
// pointer); strings returned to C are C memory that stays valid until the
// next GetLastError call on the same thread or communicator.
package main

func main() {}
