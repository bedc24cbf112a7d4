/*
 * gpucheck.h: what the GPU suite's C programs (memalloc_e2e.c, peerdeath.c)
 * share: one PASS/FAIL line per check, a failure count, MUST for calls that
 * cannot fail, and a monotonic clock. Include it once, from the program.
 */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "purlin_nccl.h"

#define MAXR 8 /* Purlin's ranks per communicator */

static int failures;

/* check prints one PASS or FAIL line and counts failures. */
static void check(int ok, const char* what) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) failures++;
}

/* MUST: a CUDA or NCCL call that cannot fail here; a failure ends the program. */
#define MUST(call)                                                                    \
  do {                                                                                \
    int rc_ = (int)(call);                                                            \
    if (rc_ != 0) {                                                                   \
      printf("FAIL %s -> %d (%s)\n", #call, rc_, ncclGetLastError(NULL));             \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
