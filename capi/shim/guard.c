/* guard.c: the fork guard and NCCL's fixed error strings, in C so that they
 * work without entering Go (a forked child cannot). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include "shim.h"

volatile int purlinForked = 0;

/* The descriptors a forked child closes (comm's fork hooks: the bootstrap's
 * sockets), each stored as fd+1 in a free slot (0). Lock-free, so that the
 * child's handler never waits for a lock a vanished thread held. */
enum { forkFDsMax = 1 << 16 };
static atomic_int forkFDs[forkFDsMax];
static atomic_int forkFDsEnd; /* slots [0, end) were used at least once */

void purlinForkTrack(int fd) {
  int end = atomic_load(&forkFDsEnd);
  for (int i = 0; i < end && i < forkFDsMax; i++) {
    int free = 0;
    if (atomic_compare_exchange_strong(&forkFDs[i], &free, fd + 1)) return;
  }
  int i = atomic_fetch_add(&forkFDsEnd, 1);
  if (i < forkFDsMax) atomic_store(&forkFDs[i], fd + 1);
  /* else: too many; that descriptor stays open in a child, as without the hook */
}

void purlinForkUntrack(int fd) {
  int end = atomic_load(&forkFDsEnd);
  for (int i = 0; i < end && i < forkFDsMax; i++) {
    int mine = fd + 1;
    if (atomic_compare_exchange_strong(&forkFDs[i], &mine, 0)) return;
  }
}

/* In the child of a process whose core was loaded: no Go, and none of the
 * parent's bootstrap sockets, so the parent's peers see its death at once even
 * while the child lives on. A child forked before the core was loaded loads
 * its own. */
static void purlinMarkForked(void) {
  if (!purlinCoreIsLoaded()) return;
  purlinForked = 1;
  int end = atomic_load(&forkFDsEnd);
  for (int i = 0; i < end && i < forkFDsMax; i++) {
    int v = atomic_exchange(&forkFDs[i], 0);
    if (v > 0) close(v - 1);
  }
}

/* A fork waits for a load of the core in progress on another thread
 * (core.c): forked in its middle, the child would hold the loader's locks
 * and a Go runtime half started, and crash or hang at its first call. */
static void waitForLoad(void) { pthread_mutex_lock(&purlinCoreLoading); }
static void loadDone(void) { pthread_mutex_unlock(&purlinCoreLoading); }
static void childOfFork(void) {
  pthread_mutex_unlock(&purlinCoreLoading);
  purlinMarkForked();
}

__attribute__((constructor)) static void purlinInstallForkGuard(void) {
  pthread_atfork(waitForLoad, loadDone, childOfFork);
}

const char* purlinForkedText = "called in a child process forked (without exec) after Purlin was first used: "
                               "Purlin (its Go runtime) cannot run there; fork before the first call, or use spawn or exec";

/* NCCL's exact strings (ncclGetErrorString). */
const char* purlinGetErrorString(purlinResult_t result) {
  switch (result) {
  case purlinSuccess: return "no error";
  case purlinUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case purlinSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case purlinInternalError: return "internal error - please report this issue to the NCCL developers";
  case purlinInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case purlinInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case purlinRemoteError: return "remote process exited or there was a network error";
  case purlinInProgress: return "NCCL operation in progress";
  case purlinTimeout: return "timeout";
  default: return "unknown result code";
  }
}
__typeof__(purlinGetErrorString) ncclGetErrorString __attribute__((alias("purlinGetErrorString")));
__typeof__(purlinGetErrorString) pncclGetErrorString __attribute__((alias("purlinGetErrorString")));
