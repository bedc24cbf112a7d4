/* core.c: the core's side of the shim (capi.h): the shim's functions the Go
 * exports call, reached through the table the shim binds after loading the
 * core. Unbound (the core alone, as in go test), descriptors are not tracked
 * and no call is recorded. */
#include "capi.h"
#include "callcache.h"

static purlinShimCalls shim;

void purlinCoreBind(const purlinShimCalls *calls) { shim = *calls; }

void purlinForkTrack(int fd) {
  if (shim.forkTrack) shim.forkTrack(fd);
}

void purlinForkUntrack(int fd) {
  if (shim.forkUntrack) shim.forkUntrack(fd);
}

void *purlinCallRecord(const purlinCallKey *keys, int n, int *size) {
  return shim.callRecord ? shim.callRecord(keys, n, size) : NULL;
}

void purlinCallCommit(void *rec, const purlinCallFacts *facts, int bytes, uintptr_t issue) {
  if (shim.callCommit) shim.callCommit(rec, facts, bytes, issue);
}

void purlinCallWindows(uintptr_t comm, const uint64_t *ranges, int n) {
  if (shim.callWindows) shim.callWindows(comm, ranges, n);
}
