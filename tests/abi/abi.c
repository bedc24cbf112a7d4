/*
 * abi.c: libpurlin.so seen through NCCL's own nccl.h (2.28, from PyPI).
 * Compile-time: every enum value and type size equals purlin.h's.
 * Run time: version encoding, error strings, ncclConfig_t read by content,
 * the unique id passed by value, blocking=0 honoured.
 * Prints "PASS x" / "FAIL x: why" lines; run.sh counts them.
 */
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "purlin.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)
SAME(ncclSuccess, purlinSuccess); SAME(ncclUnhandledCudaError, purlinUnhandledCudaError);
SAME(ncclSystemError, purlinSystemError); SAME(ncclInternalError, purlinInternalError);
SAME(ncclInvalidArgument, purlinInvalidArgument); SAME(ncclInvalidUsage, purlinInvalidUsage);
SAME(ncclRemoteError, purlinRemoteError); SAME(ncclInProgress, purlinInProgress);
/* ncclNumResults is 8 in 2.28 and 9 from 2.30 (ncclTimeout = 8); purlin.h follows 2.30. */
SAME(ncclInt8, purlinInt8); SAME(ncclChar, purlinChar); SAME(ncclUint8, purlinUint8);
SAME(ncclInt32, purlinInt32); SAME(ncclInt, purlinInt); SAME(ncclUint32, purlinUint32);
SAME(ncclInt64, purlinInt64); SAME(ncclUint64, purlinUint64); SAME(ncclFloat16, purlinFloat16);
SAME(ncclHalf, purlinHalf); SAME(ncclFloat32, purlinFloat32); SAME(ncclFloat, purlinFloat);
SAME(ncclFloat64, purlinFloat64); SAME(ncclDouble, purlinDouble); SAME(ncclBfloat16, purlinBfloat16);
SAME(ncclFloat8e4m3, purlinFloat8e4m3); SAME(ncclFloat8e5m2, purlinFloat8e5m2); SAME(ncclNumTypes, purlinNumTypes);
SAME(ncclSum, purlinSum); SAME(ncclProd, purlinProd); SAME(ncclMax, purlinMax); SAME(ncclMin, purlinMin);
SAME(ncclAvg, purlinAvg); SAME(ncclNumOps, purlinNumOps); SAME(ncclMaxRedOp, purlinMaxRedOp);
SAME(ncclScalarDevice, purlinScalarDevice); SAME(ncclScalarHostImmediate, purlinScalarHostImmediate);
SAME(NCCL_UNIQUE_ID_BYTES, PURLIN_UNIQUE_ID_BYTES); SAME(NCCL_SPLIT_NOCOLOR, PURLIN_SPLIT_NOCOLOR);
SAME(NCCL_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT);
_Static_assert(sizeof(ncclUniqueId) == 128, "sizeof(ncclUniqueId)");
_Static_assert(sizeof(ncclUniqueId) == sizeof(purlinUniqueId), "unique id sizes");
_Static_assert(sizeof(ncclConfig_t) == sizeof(purlinConfig_t), "config sizes");
_Static_assert(sizeof(ncclRedOp_t) == sizeof(purlinRedOp_t) && sizeof(ncclRedOp_t) == 4, "op size");
_Static_assert(sizeof(ncclDataType_t) == sizeof(purlinDataType_t), "dtype size");
#define SAME_OFFSET(f) _Static_assert(offsetof(ncclConfig_t, f) == offsetof(purlinConfig_t, f), "offset of " #f)
SAME_OFFSET(magic); SAME_OFFSET(version); SAME_OFFSET(blocking); SAME_OFFSET(netName); SAME_OFFSET(splitShare);
SAME_OFFSET(trafficClass); SAME_OFFSET(commName); SAME_OFFSET(CTAPolicy); SAME_OFFSET(nvlinkCentricSched);

static int passed, failed;
static void check(int ok, const char* name, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void check(int ok, const char* name, const char* fmt, ...) {
  if (ok) {
    passed++;
    printf("PASS %s\n", name);
    return;
  }
  failed++;
  printf("FAIL %s: ", name);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_version(void) {
  int v = 0;
  ncclResult_t rc = ncclGetVersion(&v);
  int major = v / 10000, minor = v / 100 % 100, patch = v % 100;
  check(rc == ncclSuccess && v >= 22809, "version", "ncclGetVersion: rc %d, version %d (want >= 22809)", rc, v);
  check(NCCL_VERSION(major, minor, patch) == v && major == 2, "version-encoding",
        "%d is not NCCL_VERSION(%d,%d,%d) = %d", v, major, minor, patch, NCCL_VERSION(major, minor, patch));
  check(ncclGetVersion(NULL) == ncclInvalidArgument, "version-null", "ncclGetVersion(NULL) must be ncclInvalidArgument");
}

static void test_error_strings(void) {
  static const char* want[] = {
      "no error", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
      "unhandled system error (run with NCCL_DEBUG=INFO for details)",
      "internal error - please report this issue to the NCCL developers",
      "invalid argument (run with NCCL_DEBUG=WARN for details)",
      "invalid usage (run with NCCL_DEBUG=WARN for details)",
      "remote process exited or there was a network error", "NCCL operation in progress"};
  int bad = -1;
  for (int i = 0; i < 8 && bad < 0; i++) {
    const char* s = ncclGetErrorString((ncclResult_t)i);
    if (!s || strcmp(s, want[i]) != 0) bad = i;
  }
  check(bad < 0, "error-strings", "ncclGetErrorString(%d) = \"%s\", NCCL says \"%s\"", bad,
        bad >= 0 ? ncclGetErrorString((ncclResult_t)bad) : "", bad >= 0 ? want[bad] : "");
  const char* t = ncclGetErrorString((ncclResult_t)8);
  check(t && (!strcmp(t, "timeout") || strstr(t, "time")), "error-string-timeout", "code 8 (ncclTimeout, 2.30) is \"%s\"", t ? t : "(null)");
  const char* u = ncclGetErrorString((ncclResult_t)99);
  check(u && !strcmp(u, "unknown result code"), "error-string-unknown", "code 99 is \"%s\"", u ? u : "(null)");
}

/* A one-rank communicator from a config; runs one AllReduce to prove it works. */
static ncclResult_t init_one(ncclConfig_t* config, int destroy) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) return rc;
  rc = ncclCommInitRankConfig(&comm, 1, id, 0, config);
  if (rc != ncclSuccess) return rc;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  rc = ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL);
  if (rc == ncclSuccess) rc = (ncclResult_t)purlinCommSynchronize((purlinComm_t)(void*)comm);
  if (rc == ncclSuccess && (y[0] != 1 || y[3] != 4)) rc = ncclInternalError;
  if (destroy) ncclCommDestroy(comm);
  return rc;
}

/* ncclConfig_t as headers of NCCL 2.14 and 2.26 laid it out (sizeof 24 and 48). */
typedef struct { size_t size; unsigned magic, version; int blocking; } config_v2140;
typedef struct {
  size_t size; unsigned magic, version; int blocking, cgaClusterSize, minCTAs, maxCTAs;
  const char* netName; int splitShare, trafficClass;
} config_v22600;

static void test_config(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclResult_t rc = init_one(&config, 1);
  check(rc == ncclSuccess, "config-initializer", "NCCL_CONFIG_INITIALIZER rejected: %d (%s)", rc, ncclGetLastError(NULL));
  rc = init_one(NULL, 1);
  check(rc == ncclSuccess, "config-null", "a NULL config rejected: %d", rc);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0xdeadbeef;
  rc = init_one(&bad, 1);
  check(rc == ncclInvalidArgument, "config-bad-magic", "magic 0xdeadbeef gave %d, want ncclInvalidArgument", rc);
  config_v2140 old = {sizeof old, 0xcafebeef, 21400, 1};
  rc = init_one((ncclConfig_t*)(void*)&old, 1);
  check(rc == ncclSuccess, "config-size-24", "a 2.14-size config (24 bytes) rejected: %d (%s)", rc, ncclGetLastError(NULL));
  config_v22600 mid = {sizeof mid, 0xcafebeef, 22600, 1, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
                       NCCL_CONFIG_UNDEF_INT, NULL, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT};
  rc = init_one((ncclConfig_t*)(void*)&mid, 1);
  check(rc == ncclSuccess, "config-size-48", "a 2.26-size config (48 bytes) rejected: %d (%s)", rc, ncclGetLastError(NULL));
}

/* blocking=0: each rank's init returns at once (success or in progress),
 * even though its peer has not called init yet; async errors then settle. */
static void test_nonblocking(void) {
  ncclUniqueId id;
  ncclComm_t comm[2] = {0};
  ncclResult_t rc[2], async[2] = {ncclInProgress, ncclInProgress};
  ncclGetUniqueId(&id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  double t0 = now_s();
  rc[0] = ncclCommInitRankConfig(&comm[0], 2, id, 0, &config);
  double took = now_s() - t0;
  check((rc[0] == ncclSuccess || rc[0] == ncclInProgress) && took < 2.0, "nonblocking-init-returns",
        "rank 0 of 2 with blocking=0 and no peer yet: rc %d after %.1f s", rc[0], took);
  rc[1] = ncclCommInitRankConfig(&comm[1], 2, id, 1, &config);
  double deadline = now_s() + 30;
  while (now_s() < deadline && (async[0] == ncclInProgress || async[1] == ncclInProgress)) {
    for (int r = 0; r < 2; r++)
      if (comm[r] && ncclCommGetAsyncError(comm[r], &async[r]) != ncclSuccess) async[r] = ncclInternalError;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  check(comm[0] && comm[1] && async[0] == ncclSuccess && async[1] == ncclSuccess, "nonblocking-init-completes",
        "async errors %d %d (rc %d %d)", async[0], async[1], rc[0], rc[1]);
  if (comm[0] && comm[1] && async[0] == ncclSuccess && async[1] == ncclSuccess) {
    double x[2][3] = {{1, 2, 3}, {10, 20, 30}}, y[2][3];
    ncclGroupStart();
    for (int r = 0; r < 2; r++) ncclAllReduce(x[r], y[r], 3, ncclFloat64, ncclSum, comm[r], NULL);
    ncclResult_t g = ncclGroupEnd();
    int ok = g == ncclSuccess || g == ncclInProgress;
    for (int r = 0; r < 2; r++) ok = ok && purlinCommSynchronize((purlinComm_t)(void*)comm[r]) == purlinSuccess;
    ok = ok && y[0][0] == 11 && y[1][2] == 33;
    check(ok, "nonblocking-allreduce", "group end %d, results %g %g", g, y[0][0], y[1][2]);
  }
  for (int r = 0; r < 2; r++)
    if (comm[r]) ncclCommDestroy(comm[r]);
}

static void test_pnccl(void) {
  int v = 0;
  check(pncclGetVersion(&v) == ncclSuccess && v >= 22809, "pnccl-call", "pncclGetVersion gave %d", v);
}

int main(void) {
  alarm(120);
  test_version();
  test_error_strings();
  test_config();
  test_nonblocking();
  test_pnccl();
  printf("abi-c: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
