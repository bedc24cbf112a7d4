/* clique.c: see clique.h. */
#include "clique.h"

#include <string.h>
#include "harness.h"

int clique_init(clique* q, int n) {
  memset(q, 0, sizeof *q);
  q->n = n;
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    FAILF("ncclGetUniqueId: %d (%s)", rc, ncclGetLastError(NULL));
    return -1;
  }
  if ((rc = ncclGroupStart()) != ncclSuccess) {
    FAILF("ncclGroupStart: %d", rc);
    return -1;
  }
  for (int r = 0; r < n; r++) {
    rc = ncclCommInitRank(&q->comms[r], n, id, r);
    if (rc != ncclSuccess) FAILF("ncclCommInitRank rank %d of %d inside a group: %d (%s)", r, n, rc, ncclGetLastError(NULL));
  }
  rc = ncclGroupEnd();
  if (rc != ncclSuccess) {
    FAILF("ncclGroupEnd after %d ncclCommInitRank: %d (%s)", n, rc, ncclGetLastError(NULL));
    return -1;
  }
  for (int r = 0; r < n; r++) {
    int count = -1, rank = -1;
    if (!q->comms[r]) {
      FAILF("rank %d: no communicator after ncclGroupEnd", r);
      return -1;
    }
    EXPECT(ncclCommCount(q->comms[r], &count) == ncclSuccess && count == n, "rank %d: ncclCommCount gave %d, want %d", r, count, n);
    EXPECT(ncclCommUserRank(q->comms[r], &rank) == ncclSuccess && rank == r, "rank %d: ncclCommUserRank gave %d", r, rank);
  }
  return harness_failed() ? -1 : 0;
}

void clique_destroy(clique* q) {
  for (int r = 0; r < q->n; r++) {
    if (!q->comms[r]) continue;
    ncclResult_t rc = ncclCommDestroy(q->comms[r]);
    EXPECT(rc == ncclSuccess, "ncclCommDestroy rank %d: %d", r, rc);
    q->comms[r] = NULL;
  }
}
