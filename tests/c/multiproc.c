/*
 * multiproc.c: the multi-process suite. 2, 4 and 8 processes, one rank each,
 * joined by a unique id that the launcher passes through a pipe; every
 * collective on random data, checked against the double reference by each
 * process for its own rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "dtypes.h"
#include "harness.h"
#include "procs.h"
#include "reference.h"

/* The calls every worker makes, in order; the same on every rank. */
static int worker_colls(int rank, int nranks, ncclComm_t comm) {
  ncclComm_t comms[PROCS_MAX] = {0};
  comms[rank] = comm;
  uint64_t seed = 1000;
  static const size_t counts[] = {1, 9, 4097, 300007};
  for (int coll = 0; coll < COLL_COUNT; coll++)
    for (int i = 0; i < 6; i++) {
      coll_case c;
      c.coll = coll;
      c.dtype = (coll * 7 + i * 5) % DT_COUNT;
      c.op = op_for(c.dtype, (coll + i * 2) % OP_COUNT, nranks);
      c.root = i % nranks;
      c.inplace = i & 1;
      c.count = counts[i % 4];
      if (c.count > 100000 && (coll == COLL_ALLTOALL || coll == COLL_ALLTOALLV || coll == COLL_GATHER ||
                               coll == COLL_SCATTER || coll == COLL_REDUCESCATTER))
        c.count /= 8;
      if (c.count > 100000 && nranks >= 8) c.count /= 16; /* keeps 8 processes on 2 cores fast */
      c.seed = seed++;
      coll_run(&c, nranks, comms, rank, rank + 1);
    }
  return harness_failed();
}

static int worker(int argc, char** argv) {
  if (argc < 5) return 2;
  int rank = atoi(argv[3]), nranks = atoi(argv[4]);
  char prefix[32];
  snprintf(prefix, sizeof prefix, "rank %d/%d", rank, nranks);
  harness_begin(prefix);
  ncclUniqueId id;
  if (procs_read_id(&id) != 0) {
    fprintf(stderr, "%s: no unique id on stdin\n", prefix);
    return 2;
  }
  ncclComm_t comm = NULL;
  ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
  if (rc != ncclSuccess) {
    fprintf(stderr, "%s: ncclCommInitRank: %d (%s)\n", prefix, rc, ncclGetLastError(NULL));
    return 3;
  }
  if (strcmp(argv[2], "colls") == 0) worker_colls(rank, nranks, comm);
  rc = ncclCommDestroy(comm);
  if (rc != ncclSuccess) FAILF("ncclCommDestroy: %d", rc);
  if (harness_failed()) harness_end(); /* prints the FAIL line with the first reason */
  return harness_failed() ? 1 : 0;
}

static void run_ranks(int n) {
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    FAILF("ncclGetUniqueId: %d (%s)", rc, ncclGetLastError(NULL));
    return;
  }
  proc ps[PROCS_MAX];
  if (procs_spawn(ps, n, "colls", &id, NULL) != 0) {
    FAILF("spawning %d workers failed", n);
    return;
  }
  procs_wait(ps, n, 240);
  for (int r = 0; r < n; r++) {
    char how[64];
    EXPECT(ps[r].exited && ps[r].code == 0, "rank %d of %d %s", r, n, procs_describe(&ps[r], how, sizeof how));
  }
}

static void test_two_processes(void) { run_ranks(2); }
static void test_four_processes(void) { run_ranks(4); }
/* 8 = snac.MaxRanks, a full NVLink server: every slot and channel in use. */
static void test_eight_processes(void) { run_ranks(8); }

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "worker") == 0) {
    harness_init("c-multiproc worker", 280);
    return worker(argc, argv);
  }
  harness_init("c-multiproc", 300);
  RUN(test_two_processes);
  RUN(test_four_processes);
  RUN(test_eight_processes);
  return harness_finish();
}
