/* capi.h: what the C shim and the Go exports share. Internal to capi/. */
#ifndef PURLIN_CAPI_H_
#define PURLIN_CAPI_H_

#include <stddef.h>
#include <stdint.h>
#include "purlin.h"
#include "callcache.h"

/* Purlin is two files: the C shim (shim/: libpurlin.so, or the drop-in
 * libnccl.so.2), which holds every public entry point, the call cache and the
 * fork guard, and the Go core (this package: libpurlin-core.so beside it),
 * which the shim loads at the first call that needs it (shim/core.c). */

/* Set in a child process forked, without exec, after the core was loaded: the
 * Go runtime does not survive fork, so every entry refuses at once instead of
 * hanging. A child forked before that loads a core of its own. */
extern volatile int purlinForked;

/* Register (unregister) a descriptor the fork handler closes in the child.
 * Internal: hidden from the library's exports. */
__attribute__((visibility("hidden"))) void purlinForkTrack(int fd);
__attribute__((visibility("hidden"))) void purlinForkUntrack(int fd);

/* What the core calls in the shim (the fork guard's descriptors and the call
 * cache's records, callcache.h), handed to it once loaded by purlinCoreBind.
 * Its own C (core.c) forwards purlinForkTrack and the like through them. */
typedef struct {
  void (*forkTrack)(int fd);
  void (*forkUntrack)(int fd);
  void *(*callRecord)(const purlinCallKey *keys, int n, int *size);
  void (*callCommit)(void *rec, const purlinCallFacts *facts, int bytes, uintptr_t issue);
  void (*callWindows)(uintptr_t comm, const uint64_t *ranges, int n);
} purlinShimCalls;
__attribute__((visibility("default"))) void purlinCoreBind(const purlinShimCalls *calls);

/* Collective kinds for goCollective: equal to Go's spec.Collective. */
enum {
  capiAllReduce = 0, capiAllGather = 1, capiReduceScatter = 2, capiAllToAll = 3,
  capiAllGatherV = 4, capiReduceScatterV = 5, capiAllToAllV = 6, capiBroadcast = 7,
  capiReduce = 8, capiGather = 9, capiScatter = 10, capiSendRecv = 11
};

/* ncclTeam_t of nccl_device.h: returned by value by the device-API stubs. */
typedef struct { int nRanks, rank, stride; } capiTeam;

#endif
