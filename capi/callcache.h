/* callcache.h: the C API's call cache. Internal to capi/.
 *
 * A collective that the library has launched once, outside a group, is
 * recorded for its communicator under its arguments but the buffers
 * (purlinCallKey), with what Go's checks concluded about the buffers and
 * the datapath's record of the launch (atom.Replayer). A later call with the
 * same key, on a thread without an open group, whose buffers pass the same
 * checks to the same conclusions, is issued from C by that record with its
 * own buffers: it never enters Go. Anything else, and any call the record
 * declines to issue, takes the path through Go, which may record it. */
#ifndef PURLIN_CALLCACHE_H_
#define PURLIN_CALLCACHE_H_

#include <stdint.h>

/* What selects a record: every argument of a call but its buffers. */
typedef struct {
  uintptr_t comm, stream;
  uint64_t count;
  int32_t coll, dtype, op, root, peer, isSend;
} purlinCallKey;

/* What Go's checks (spec.Call.Validate, InPlace) concluded from a call's
 * buffers: the bytes it reads from send and writes to recv, the element size
 * both are aligned to, and whether it was in place, which for a collective
 * with an in-place form (inPlaceForm) means send - recv == inPlaceOff. */
typedef struct {
  uint64_t in, out, align, inPlaceOff;
  int32_t inPlaceForm, inPlace;
} purlinCallFacts;

/* purlinCallCached issues the call of key with send and recv from its record
 * and returns 1, or returns 0 having done nothing. */
__attribute__((visibility("hidden"))) int purlinCallCached(const purlinCallKey *key, uint64_t send, uint64_t recv);

/* purlinCallRecord opens a record of key for writing and returns where its
 * datapath part goes (*size bytes), or NULL when none can be written now.
 * purlinCallCommit closes it with the facts and the datapath's part (n bytes,
 * issued by issue: atom.Replayer); n == 0 leaves it empty. */
__attribute__((visibility("hidden"))) void *purlinCallRecord(const purlinCallKey *key, int *size);
__attribute__((visibility("hidden"))) void purlinCallCommit(void *rec, const purlinCallFacts *facts, int n, uintptr_t issue);

/* purlinCallForget drops every record of communicator comm; the entries
 * that end or finalize a communicator call it before Go sees them. */
__attribute__((visibility("hidden"))) void purlinCallForget(uintptr_t comm);

/* purlinCallInGroup says whether the calling thread has a group open
 * (comm.InGroup), after each GroupStart and GroupEnd: its calls are queued,
 * never issued from a record. */
__attribute__((visibility("hidden"))) void purlinCallInGroup(int open);

#endif
