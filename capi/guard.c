/* guard.c: the fork guard and NCCL's fixed error strings, in C so that they
 * work without entering Go (a forked child cannot). */
#include <pthread.h>
#include "capi.h"

volatile int purlinForked = 0;

static void purlinMarkForked(void) { purlinForked = 1; }

__attribute__((constructor)) static void purlinInstallForkGuard(void) {
  pthread_atfork(NULL, NULL, purlinMarkForked);
}

const char* purlinForkedText = "called in a child process after fork() without exec: "
                               "Purlin (its Go runtime) cannot run there; use spawn or exec";

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
