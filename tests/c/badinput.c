/*
 * badinput.c: the bad-input suite. Rejected arguments (NULL pointers, huge
 * counts, bad dtype/op/root/peer, avg or PreMulSum on a float8 type on a
 * one-rank communicator, a destroyed communicator), ranks that disagree on a call, a rank SIGKILLed
 * mid-collective (also while its fork() child lives on), and a fork() child
 * without exec: each must give an error,
 * never a hang, a crash or a silently wrong result, and the communicator
 * must stay usable after a rejected argument.
 * PURLIN_TIMEOUT is 3 s here (unless set), so the failure tests are quick.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "badinput.h"
#include "clique.h"
#include "coll.h"
#include "dtypes.h"
#include "harness.h"
#include "procs.h"
#include "reference.h"

double g_timeout_s = 3;

/* Whether the comm still runs a correct collective. */
void expect_usable(clique* q, const char* after) {
  static uint64_t seed = 77;
  coll_case c = {COLL_ALLREDUCE, 7, OP_SUM, 0, 0, 1000, seed++};
  if (coll_run(&c, q->n, q->comms, 0, q->n)) FAILF("the communicators broke after %s", after);
}

static int contains_ci(const char* s, const char* word) {
  size_t n = strlen(word);
  for (; s && *s; s++)
    if (strncasecmp(s, word, n) == 0) return 1;
  return 0;
}

/* A rejected call: its result code, and the last-error text naming the problem. */
void expect_rejected(ncclResult_t got, ncclResult_t want, ncclComm_t comm, const char* call, const char* word) {
  if (got != want) {
    FAILF("%s returned %d, want %d", call, got, want);
    return;
  }
  const char* text = ncclGetLastError(comm);
  EXPECT(text && strlen(text) > 8, "%s: ncclGetLastError gave \"%s\"", call, text ? text : "(null)");
  if (word && text) EXPECT(contains_ci(text, word), "%s: last error \"%s\" does not mention \"%s\"", call, text, word);
}

static void test_error_strings(void) {
  const char* seen[9] = {0};
  for (int rc = 0; rc <= 8; rc++) {
    const char* s = ncclGetErrorString((ncclResult_t)rc);
    EXPECT(s && strlen(s) > 3, "ncclGetErrorString(%d) is \"%s\"", rc, s ? s : "(null)");
    for (int j = 0; j < rc; j++)
      if (s && seen[j]) EXPECT(strcmp(s, seen[j]) != 0, "codes %d and %d share the text \"%s\"", j, rc, s);
    seen[rc] = s;
  }
  const char* unknown = ncclGetErrorString((ncclResult_t)1234);
  EXPECT(unknown && strlen(unknown) > 3, "ncclGetErrorString(1234) is empty");
}

static void test_null_out_pointers(void) {
  expect_rejected(ncclGetVersion(NULL), ncclInvalidArgument, NULL, "ncclGetVersion(NULL)", NULL);
  expect_rejected(ncclGetUniqueId(NULL), ncclInvalidArgument, NULL, "ncclGetUniqueId(NULL)", NULL);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return;
  expect_rejected(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, NULL, "ncclCommInitRank(NULL comm)", NULL);
  ncclComm_t c = NULL;
  expect_rejected(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument, NULL, "ncclCommInitRank(rank 2 of 2)", "rank");
  expect_rejected(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument, NULL, "ncclCommInitRank(0 ranks)", NULL);
  expect_rejected(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument, NULL, "ncclCommInitRank(rank -1)", "rank");
}

static void test_bad_arguments(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return;
  ncclComm_t c0 = q.comms[0];
  float send[64] = {0}, recv[64 * 2];
  const size_t huge = SIZE_MAX / 2;
  expect_rejected(ncclAllReduce(NULL, recv, 64, ncclFloat32, ncclSum, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(sendbuff NULL)", "null");
  expect_rejected(ncclAllReduce(send, NULL, 64, ncclFloat32, ncclSum, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(recvbuff NULL)", "null");
  expect_rejected(ncclAllReduce(send, recv, 64, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument, NULL,
                  "ncclAllReduce(comm NULL)", NULL);
  expect_rejected(ncclAllReduce(send, recv, huge, ncclFloat32, ncclSum, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(count SIZE_MAX/2)", "count");
  expect_rejected(ncclAllGather(send, recv, SIZE_MAX / 4 + 1, ncclFloat32, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllGather(count*nranks overflows)", "count");
  expect_rejected(ncclAllReduce(send, recv, 64, (ncclDataType_t)12, ncclSum, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(dtype 12)", "type");
  expect_rejected(ncclAllReduce(send, recv, 64, (ncclDataType_t)-1, ncclSum, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(dtype -1)", "type");
  expect_rejected(ncclAllReduce(send, recv, 64, ncclFloat32, (ncclRedOp_t)5, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(op 5, never created)", "op");
  expect_rejected(ncclAllReduce(send, recv, 64, ncclFloat32, (ncclRedOp_t)-1, c0, NULL), ncclInvalidArgument, c0,
                  "ncclAllReduce(op -1)", "op");
  expect_rejected(ncclBroadcast(send, recv, 64, ncclFloat32, 2, c0, NULL), ncclInvalidArgument, c0,
                  "ncclBroadcast(root 2 of 2)", "root");
  expect_rejected(ncclReduce(send, recv, 64, ncclFloat32, ncclSum, -1, c0, NULL), ncclInvalidArgument, c0,
                  "ncclReduce(root -1)", "root");
  expect_rejected(ncclSend(send, 64, ncclFloat32, 2, c0, NULL), ncclInvalidArgument, c0, "ncclSend(peer 2 of 2)", "peer");
  expect_rejected(ncclRecv(recv, 64, ncclFloat32, -1, c0, NULL), ncclInvalidArgument, c0, "ncclRecv(peer -1)", "peer");
  int count = 0;
  expect_rejected(ncclCommCount(c0, NULL), ncclInvalidArgument, c0, "ncclCommCount(count NULL)", "CommCount");
  expect_rejected(ncclCommUserRank(c0, NULL), ncclInvalidArgument, c0, "ncclCommUserRank(rank NULL)", "CommUserRank");
  expect_rejected(ncclCommCuDevice(c0, NULL), ncclInvalidArgument, c0, "ncclCommCuDevice(device NULL)", "CommCuDevice");
  expect_rejected(ncclCommCount(NULL, &count), ncclInvalidArgument, NULL, "ncclCommCount(comm NULL)", NULL);
  expect_usable(&q, "rejected arguments");
  clique_destroy(&q);
}

/* As NCCL: avg and PreMulSum on a float8 type are rejected on a one-rank
 * communicator (its one-rank path has no float8 PreMulSum, and avg is
 * PreMulSum by 1/nranks there), the comm staying usable; an empty call is
 * discarded first, so it succeeds. On two ranks both reduce correctly. */
static void test_float8_avg_premulsum(void) {
  clique q;
  if (clique_init(&q, 1) != 0) return;
  ncclComm_t c0 = q.comms[0];
  uint8_t send[64] = {0}, recv[64];
  uint8_t one_e4m3 = 0x38, one_e5m2 = 0x3c; /* 1.0 */
  ncclRedOp_t premul[2];
  if (ncclRedOpCreatePreMulSum(&premul[0], &one_e4m3, ncclFloat8e4m3, ncclScalarHostImmediate, c0) != ncclSuccess ||
      ncclRedOpCreatePreMulSum(&premul[1], &one_e5m2, ncclFloat8e5m2, ncclScalarHostImmediate, c0) != ncclSuccess) {
    FAILF("ncclRedOpCreatePreMulSum: %s", ncclGetLastError(c0));
    clique_destroy(&q);
    return;
  }
  static const char* const word = "not supported on a one-rank communicator";
  for (int k = 0; k < 2; k++) {
    ncclDataType_t dt = k ? ncclFloat8e5m2 : ncclFloat8e4m3;
    ncclRedOp_t ops[2] = {ncclAvg, premul[k]};
    for (int j = 0; j < 2; j++) {
      char what[96];
      snprintf(what, sizeof what, "one rank, %s, %s", dt_name(dt), j ? "premulsum" : "avg");
      expect_rejected(ncclAllReduce(send, recv, 64, dt, ops[j], c0, NULL), ncclInvalidArgument, c0, what, word);
      expect_rejected(ncclReduce(send, recv, 64, dt, ops[j], 0, c0, NULL), ncclInvalidArgument, c0, what, word);
      expect_rejected(ncclReduceScatter(send, recv, 64, dt, ops[j], c0, NULL), ncclInvalidArgument, c0, what, word);
      EXPECT(ncclAllReduce(send, recv, 0, dt, ops[j], c0, NULL) == ncclSuccess, "%s: an empty AllReduce failed (%s)",
             what, ncclGetLastError(c0));
    }
    EXPECT(ncclRedOpDestroy(premul[k], c0) == ncclSuccess, "ncclRedOpDestroy: %s", ncclGetLastError(c0));
  }
  expect_usable(&q, "avg on float8 on one rank");
  clique_destroy(&q);

  static uint64_t seed = 91;
  if (clique_init(&q, 2) != 0) return;
  const int colls[] = {COLL_ALLREDUCE, COLL_REDUCE, COLL_REDUCESCATTER, COLL_REDUCESCATTERV};
  for (int dt = 10; dt <= 11; dt++)
    for (int op = OP_AVG; op <= OP_PREMULSUM; op++)
      for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++) {
        coll_case c = {colls[k], dt, op, 1, (int)k & 1, 777, seed++};
        if (coll_run(&c, q.n, q.comms, 0, q.n)) FAILF("two ranks: %s %s failed", dt_name(dt), op_name(op));
      }
  clique_destroy(&q);
}

/* One thread drives the ranks (as nccl-tests does), each naming itself the
 * root of a rooted collective: every rank's call fails, in time, and its
 * ncclGetLastError says the ranks disagree; at 2 and 4 ranks, for 1 Ki and
 * 1 Mi elements. */
static void test_mismatch_root_one_process(void) {
  static const size_t counts[] = {1024, 1 << 20};
  for (int n = 2; n <= 4; n += 2)
    for (int coll = 0; coll < 4; coll++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        static const char* names[] = {"ncclBroadcast", "ncclReduce", "ncclGather", "ncclScatter"};
        size_t count = counts[k];
        clique q;
        if (clique_init(&q, n) != 0) return;
        float* bufs[2 * CLIQUE_MAX];
        for (int b = 0; b < 2 * n; b++) bufs[b] = calloc(count * n, sizeof(float)); /* room for a root's n slices */
        double t0 = now_s();
        ncclGroupStart();
        for (int r = 0; r < n; r++) {
          float *send = bufs[2 * r], *recv = bufs[2 * r + 1];
          ncclComm_t c = q.comms[r];
          ncclResult_t rc = coll == 0   ? ncclBroadcast(send, recv, count, ncclFloat32, r, c, NULL)
                            : coll == 1 ? ncclReduce(send, recv, count, ncclFloat32, ncclSum, r, c, NULL)
                            : coll == 2 ? ncclGather(send, recv, count, ncclFloat32, r, c, NULL)
                                        : ncclScatter(send, recv, count, ncclFloat32, r, c, NULL);
          EXPECT(rc == ncclSuccess, "%s rank %d of %d: %d (%s)", names[coll], r, n, rc, ncclGetLastError(c));
        }
        ncclGroupEnd();
        for (int r = 0; r < n; r++) {
          ncclResult_t rc = (ncclResult_t)purlinCommSynchronize(PC(q.comms[r]));
          const char* text = ncclGetLastError(q.comms[r]);
          EXPECT(rc != ncclSuccess && text && strstr(text, "disagree"),
                 "%d ranks each naming itself the root of %s (%zu elements): rank %d gave %d, \"%s\"", n, names[coll], count,
                 r, rc, text ? text : "(null)");
        }
        EXPECT(now_s() - t0 < g_timeout_s, "%s with %d disagreeing roots: the errors took %.1f s", names[coll], n, now_s() - t0);
        for (int r = 0; r < n; r++) ncclCommAbort(q.comms[r]);
        for (int b = 0; b < 2 * n; b++) free(bufs[b]);
      }
}

/* A call rejected inside a group fails the group, as in NCCL: the call
 * and ncclGroupEnd return its error, and the group launches none of its
 * calls, on any communicator; the communicators stay usable. */
static void test_rejected_inside_group(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return;
  float send[2][16], recv[2][16];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 16; i++) send[r][i] = 1, recv[r][i] = -7;
  for (int bad = 0; bad < 2; bad++) { /* the bad call first, then after the good ones */
    ncclGroupStart();
    ncclResult_t rc = ncclSuccess;
    if (bad == 0) rc = ncclAllReduce(NULL, recv[0], 16, ncclFloat32, ncclSum, q.comms[0], NULL);
    for (int r = 0; r < 2; r++)
      EXPECT(ncclAllReduce(send[r], recv[r], 16, ncclFloat32, ncclSum, q.comms[r], NULL) == ncclSuccess, "rank %d's call", r);
    if (bad == 1) rc = ncclBroadcast(send[1], recv[1], 16, ncclFloat32, 2, q.comms[1], NULL);
    ncclResult_t end = ncclGroupEnd();
    EXPECT(rc == ncclInvalidArgument && end == ncclInvalidArgument, "case %d: the call gave %d and ncclGroupEnd %d", bad, rc, end);
    for (int r = 0; r < 2; r++) {
      EXPECT(purlinCommSynchronize(PC(q.comms[r])) == purlinSuccess, "case %d rank %d: %s", bad, r, ncclGetLastError(q.comms[r]));
      EXPECT(recv[r][0] == -7 && recv[r][15] == -7, "case %d: rank %d's output was written (%g): the failed group launched", bad, r,
             recv[r][0]);
    }
  }
  expect_usable(&q, "a rejected call inside a group");
  clique_destroy(&q);
}

/* ncclGroupSimulateEnd ends the group without launching its calls, and
 * says Purlin has no estimate (ncclInvalidUsage); the thread is then in no
 * group. Without a group it is ncclGroupEnd's misuse. */
static void test_group_simulate_end(void) {
  clique q;
  if (clique_init(&q, 1) != 0) return;
  float send[16], recv[16];
  for (int i = 0; i < 16; i++) send[i] = 2, recv[i] = -7;
  ncclGroupStart();
  EXPECT(ncclAllReduce(send, recv, 16, ncclFloat32, ncclSum, q.comms[0], NULL) == ncclSuccess, "the call");
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  expect_rejected(ncclGroupSimulateEnd(&info), ncclInvalidUsage, NULL, "ncclGroupSimulateEnd", "estimate");
  EXPECT(purlinCommSynchronize(PC(q.comms[0])) == purlinSuccess && recv[0] == -7, "the simulated group launched (%g)", recv[0]);
  EXPECT(ncclAllReduce(send, recv, 16, ncclFloat32, ncclSum, q.comms[0], NULL) == ncclSuccess, "a call after it");
  EXPECT(purlinCommSynchronize(PC(q.comms[0])) == purlinSuccess && recv[0] == 2, "a call after it is in no group (%g)", recv[0]);
  expect_rejected(ncclGroupSimulateEnd(&info), ncclInvalidUsage, NULL, "ncclGroupSimulateEnd without a group", "GroupStart");

  /* Nested, it only ends its level, as in NCCL: the outer end launches the group. */
  recv[0] = -7;
  ncclGroupStart();
  ncclGroupStart();
  EXPECT(ncclAllReduce(send, recv, 16, ncclFloat32, ncclSum, q.comms[0], NULL) == ncclSuccess, "the nested call");
  EXPECT(ncclGroupSimulateEnd(&info) == ncclSuccess, "a nested ncclGroupSimulateEnd failed");
  EXPECT(ncclGroupEnd() == ncclSuccess, "the outer end failed: %s", ncclGetLastError(NULL));
  EXPECT(purlinCommSynchronize(PC(q.comms[0])) == purlinSuccess && recv[0] == 2, "the outer end did not launch (%g)", recv[0]);

  /* purlinGroupCancel, at any depth, makes the outermost end launch nothing, and succeed. */
  for (int depth = 1; depth <= 2; depth++) {
    recv[0] = -7;
    for (int d = 0; d < depth; d++) ncclGroupStart();
    EXPECT(ncclAllReduce(send, recv, 16, ncclFloat32, ncclSum, q.comms[0], NULL) == ncclSuccess, "the call");
    EXPECT(purlinGroupCancel() == purlinSuccess, "depth %d: purlinGroupCancel failed", depth);
    if (depth == 2) EXPECT(ncclGroupEnd() == ncclSuccess, "the end after a cancel failed: %s", ncclGetLastError(NULL));
    EXPECT(purlinCommSynchronize(PC(q.comms[0])) == purlinSuccess && recv[0] == -7, "depth %d: the cancelled group launched (%g)", depth,
           recv[0]);
  }
  EXPECT(ncclAllReduce(send, recv, 16, ncclFloat32, ncclSum, q.comms[0], NULL) == ncclSuccess, "a call after them");
  EXPECT(purlinCommSynchronize(PC(q.comms[0])) == purlinSuccess && recv[0] == 2, "a call after them is in no group (%g)", recv[0]);
  clique_destroy(&q);
}

/* A config whose blocking is neither 0 nor 1 or whose tuning fields NCCL
 * refuses, and ncclCommInitRankScalable with no unique id: NCCL's
 * ncclInvalidArgument, with a text naming the field. */
static void test_bad_config_and_ids(void) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return;
  ncclComm_t c = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  expect_rejected(ncclCommInitRankConfig(&c, 1, id, 0, &config), ncclInvalidArgument, NULL,
                  "ncclCommInitRankConfig(blocking 7)", "blocking");
  config.blocking = -1;
  expect_rejected(ncclCommInitRankConfig(&c, 1, id, 0, &config), ncclInvalidArgument, NULL,
                  "ncclCommInitRankConfig(blocking -1)", "blocking");
  /* The tuning fields Purlin ignores, checked as NCCL 2.28 checks them
   * (measured on it, one rank): each refused with ncclInvalidArgument and a
   * text naming the field, or accepted. */
  static const struct {
    const char *name, *field;
    int off, value, off2, value2, refused;
  } tuning[] = {
#define AT(f) (int)offsetof(ncclConfig_t, f)
      {"cgaClusterSize -1", "cgaClusterSize", AT(cgaClusterSize), -1, -1, 0, 1},
      {"cgaClusterSize 9", NULL, AT(cgaClusterSize), 9, -1, 0, 0},
      {"minCTAs 0", "minCTAs", AT(minCTAs), 0, -1, 0, 1},
      {"minCTAs 1 alone", "minCTAs", AT(minCTAs), 1, -1, 0, 1},
      {"maxCTAs 0", "maxCTAs", AT(maxCTAs), 0, -1, 0, 1},
      {"maxCTAs 100000", NULL, AT(maxCTAs), 100000, -1, 0, 0},
      {"minCTAs 64 maxCTAs 2", "minCTAs", AT(minCTAs), 64, AT(maxCTAs), 2, 1},
      {"minCTAs 100 maxCTAs 200", NULL, AT(minCTAs), 100, AT(maxCTAs), 200, 0},
      {"splitShare 2", "splitShare", AT(splitShare), 2, -1, 0, 1},
      {"splitShare 1", NULL, AT(splitShare), 1, -1, 0, 0},
      {"trafficClass -5", NULL, AT(trafficClass), -5, -1, 0, 0},
      {"collnetEnable -1", "collnetEnable", AT(collnetEnable), -1, -1, 0, 1},
      {"CTAPolicy 3", "CTAPolicy", AT(CTAPolicy), 3, -1, 0, 1},
      {"CTAPolicy 2", NULL, AT(CTAPolicy), 2, -1, 0, 0},
      {"shrinkShare 2", "shrinkShare", AT(shrinkShare), 2, -1, 0, 1},
      {"nvlsCTAs 0", "nvlsCTAs", AT(nvlsCTAs), 0, -1, 0, 1},
      {"nvlsCTAs 1000", NULL, AT(nvlsCTAs), 1000, -1, 0, 0},
      {"nChannelsPerNetPeer 65", "nChannelsPerNetPeer", AT(nChannelsPerNetPeer), 65, -1, 0, 1},
      {"nChannelsPerNetPeer 64", NULL, AT(nChannelsPerNetPeer), 64, -1, 0, 0},
      {"nvlinkCentricSched 2", "nvlinkCentricSched", AT(nvlinkCentricSched), 2, -1, 0, 1},
#undef AT
  };
  for (size_t i = 0; i < sizeof tuning / sizeof tuning[0]; i++) {
    ncclConfig_t t = NCCL_CONFIG_INITIALIZER;
    memcpy((char*)&t + tuning[i].off, &tuning[i].value, sizeof(int));
    if (tuning[i].off2 >= 0) memcpy((char*)&t + tuning[i].off2, &tuning[i].value2, sizeof(int));
    char call[96];
    snprintf(call, sizeof call, "ncclCommInitRankConfig(%s)", tuning[i].name);
    if (tuning[i].refused) {
      expect_rejected(ncclCommInitRankConfig(&c, 1, id, 0, &t), ncclInvalidArgument, NULL, call, tuning[i].field);
      continue;
    }
    ncclUniqueId fresh;
    if (ncclGetUniqueId(&fresh) != ncclSuccess) return;
    c = NULL;
    EXPECT(ncclCommInitRankConfig(&c, 1, fresh, 0, &t) == ncclSuccess, "%s refused: %s", call, ncclGetLastError(NULL));
    if (c) ncclCommDestroy(c);
  }
  for (int nId = 0; nId >= -1; nId--) {
    char call[64];
    snprintf(call, sizeof call, "ncclCommInitRankScalable(nId %d)", nId);
    expect_rejected(ncclCommInitRankScalable(&c, 1, 0, nId, &id, NULL), ncclInvalidArgument, NULL, call, "nId");
    const char* text = ncclGetLastError(NULL);
    EXPECT(!text || !strstr(text, "several"), "%s: last error \"%s\" speaks of several ids", call, text);
  }
}

/* A buffer pointer that maps no memory, on the host Atom: the call (or the
 * synchronize that runs it) fails, and the process lives. */
static void test_unmapped_buffer(void) {
  clique q;
  if (clique_init(&q, 1) != 0) return;
  size_t bytes = 1 << 20;
  float* hole = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (hole == MAP_FAILED) {
    FAILF("mmap: %s", strerror(errno));
    clique_destroy(&q);
    return;
  }
  munmap(hole, bytes);
  float recv[64];
  ncclResult_t rc = ncclAllReduce(hole, recv, 64, ncclFloat32, ncclSum, q.comms[0], NULL);
  if (rc == ncclSuccess) rc = (ncclResult_t)purlinCommSynchronize(PC(q.comms[0]));
  EXPECT(rc != ncclSuccess, "ncclAllReduce from an unmapped sendbuff succeeded");
  ncclCommAbort(q.comms[0]); /* after a failed call, as NCCL asks */
}

int main(int argc, char** argv) {
  setenv("PURLIN_TIMEOUT", "3", 0);
  g_timeout_s = atof(getenv("PURLIN_TIMEOUT"));
  if (argc > 1 && strcmp(argv[1], "worker") == 0) {
    harness_init("c-badinput worker", 120);
    return badinput_worker(argc, argv);
  }
  harness_init("c-badinput", 280);
  RUN(test_error_strings);
  RUN(test_null_out_pointers);
  RUN(test_bad_arguments);
  RUN(test_bad_config_and_ids);
  RUN(test_unmapped_buffer);
  RUN(test_float8_avg_premulsum);
  RUN(test_rejected_inside_group);
  RUN(test_group_simulate_end);
  RUN(test_destroyed_comm);
  RUN(test_fork_child);
  RUN(test_fork_before_first_call);
  RUN(test_fork_during_load);
  RUN(test_mismatch_count);
  RUN(test_mismatch_dtype);
  RUN(test_mismatch_op);
  RUN(test_mismatch_root);
  RUN(test_mismatch_root_one_process);
  RUN(test_killed_rank);
  RUN(test_killed_rank_external);
  RUN(test_killed_rank_forked_child);
  return harness_finish();
}
