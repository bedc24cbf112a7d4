/* callcache.h: the C API's call cache. Internal to capi/.
 *
 * A collective that Go has validated and planned is recorded for its
 * communicator under its arguments but the buffers (purlinCallKey), with what
 * Go's checks concluded about the buffers and the datapath's record of its
 * launch (atom.Replayer). A later call with the same key whose buffers pass
 * the same checks to the same conclusions is issued from C by that record
 * with its own buffers, without entering Go: at once outside a group, at the
 * group's end inside one. Any other call, and any record the datapath
 * declines to issue, goes through Go.
 *
 * Groups are therefore tracked here first. A thread's group holds its calls
 * in C while each communicator has one recorded collective of the group (the
 * calls a group of one collective per communicator makes, as a thread that
 * drives several GPUs does; Go would launch each alone) or, on one stream,
 * only sends and receives (the exchanges of pipeline stages and of
 * all-to-alls made of them) or only collectives of one type and op
 * (coalesced calls): Go launches those as one Plan, recorded as one launch
 * of them all. The first call or
 * entry point that is anything else moves the group into Go (purlinCallFlush):
 * Go's group is opened as deep as the thread's, and the held calls are handed
 * to it in order, as if they had gone there at once. */
#ifndef PURLIN_CALLCACHE_H_
#define PURLIN_CALLCACHE_H_

#include <stdint.h>

#include "purlin.h"

/* What selects a record: every argument of a call but its buffers. A
 * record of several calls (a group's calls on one communicator, which Go
 * launches together) is selected by the keys of all of them, in order. */
typedef struct {
  uintptr_t comm, stream;
  uint64_t count;
  int32_t coll, dtype, op, root, peer, isSend;
} purlinCallKey;

/* purlinCallOps is the most calls one record issues together: a launch's
 * buffers (atom.MaxBuffers; capi/callcache.go checks they agree).
 * purlinCallWays is the records a communicator keeps: the shapes it
 * alternates between. */
enum { purlinCallOps = 16, purlinCallWays = 8 };

/* What Go's checks (spec.Call.Validate, InPlace) concluded from a call's
 * buffers: the bytes it reads from send and writes to recv, the element size
 * both are aligned to, and whether it was in place, which for a collective
 * with an in-place form (inPlaceForm) means send - recv == inPlaceOff. */
typedef struct {
  uint64_t in, out, align, inPlaceOff;
  int32_t inPlaceForm, inPlace;
  /* directs: the call pushes straight into outputs in a symmetric window
   * (comm's PushesDirect: its shape and size), alone or merged with a
   * group's other calls, which Go alone launches: its record serves a call
   * only where the output lies in none of the communicator's symmetric
   * windows (purlinCallWindows). */
  int32_t directs;
} purlinCallFacts;

/* purlinCall issues an NCCL-shaped collective: from its record, held in the
 * thread's group, or through Go. */
__attribute__((visibility("hidden"))) purlinResult_t purlinCall(purlinCallKey *key, uint64_t send, uint64_t recv);

/* purlinCallGroupStart and purlinCallGroupEnd are ncclGroupStart and
 * ncclGroupEnd; purlinCallFlush moves the thread's group into Go, and every
 * other entry point calls it before it enters Go. */
__attribute__((visibility("hidden"))) purlinResult_t purlinCallGroupStart(void);
__attribute__((visibility("hidden"))) purlinResult_t purlinCallGroupEnd(void);
/* purlinCallGroupDepth is how deep the calling thread's groups are open (0: none). */
__attribute__((visibility("hidden"))) int purlinCallGroupDepth(void);
__attribute__((visibility("hidden"))) purlinResult_t purlinCallFlush(void);

/* purlinCallRecord opens a record of the n calls keys[0..n) for writing and
 * returns where its datapath part goes (*size bytes), or NULL when none can
 * be written now. purlinCallCommit closes it with the facts of each call
 * (n of them) and the datapath's part (bytes long, issued by issue:
 * atom.Replayer); bytes == 0 leaves it empty. */
__attribute__((visibility("hidden"))) void *purlinCallRecord(const purlinCallKey *keys, int n, int *size);
__attribute__((visibility("hidden"))) void purlinCallCommit(void *rec, const purlinCallFacts *facts, int bytes, uintptr_t issue);

/* purlinCallWindows tells the cache the symmetric windows communicator comm
 * has now on this rank: n byte ranges, ranges[2i] to ranges[2i+1] (Go's
 * comm, as they change). */
__attribute__((visibility("hidden"))) void purlinCallWindows(uintptr_t comm, const uint64_t *ranges, int n);

/* purlinCallForget drops every record of communicator comm; the entries
 * that end or finalize a communicator call it before Go sees them. */
__attribute__((visibility("hidden"))) void purlinCallForget(uintptr_t comm);

/* The Go exports behind the cache (capi/collectives.go): the group calls;
 * a collective (grouped: in Go's group, which queues it); and n calls of
 * one communicator (bufs: each one's send and receive buffer) validated,
 * not launched, and with record set recorded as one launch (*recorded: 1
 * recorded, or valid where record is 0; 0 neither, the communicator not
 * ready or the launch not recordable; -1 never: PURLIN_CALL_CACHE=0). */
purlinResult_t goGroup(int start);
purlinResult_t goCollective(purlinCallKey *key, uintptr_t send, uintptr_t recv, int grouped);
purlinResult_t goCollectiveRecord(purlinCallKey *keys, uint64_t *bufs, int n, int record, int *recorded);

#endif
