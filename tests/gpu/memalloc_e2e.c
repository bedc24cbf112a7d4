/*
 * memalloc_e2e.c: the CUDA Atom serving communicators through the NCCL C ABI,
 * as an NCCL program drives it: one thread, rank r created (in one group)
 * while device nranks-1-r is current, so a communicator that took the rank for its
 * device would show up. Checks ncclCommCuDevice, that ncclMemAlloc returns
 * device memory on the current device, AllReduce/AllGather on it (packet and
 * large regimes) against a host reference, ncclMemFree (and its refusal of a
 * pointer it never gave), and symmetric windows (ncclCommWindowRegister) on
 * ncclMemAlloc memory, deregistered in a group and, as NCCL programs also do,
 * one communicator after the other without a group; first, that a communicator made
 * before any CUDA device is current refuses device buffers with an error (its host
 * Atom would fault on them). Prints one PASS/FAIL line per check; exit 1 on any
 * failure. Ranks: argv[1] (tests/gpu/run.sh passes $NGPUS), default 2, at most 8;
 * rank r's device is nranks-1-r. Build: gcc -Iinclude -I$CUDA_HOME/include ... -lpurlin -lcudart.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpucheck.h"

static int nranks = 2;

/* check_rank: check, naming the rank. */
static void check_rank(int ok, const char* what, int r) {
  char line[512];
  snprintf(line, sizeof line, "%s (rank %d)", what, r);
  check(ok, line);
}

static int dev_of(int r) { return nranks - 1 - r; }

/* run_allreduce sums rank-dependent floats (exact in fp32) and checks all of recv. */
static void run_allreduce(ncclComm_t* comms, cudaStream_t* streams, size_t count) {
  float *send[MAXR], *recv[MAXR];
  float* host = malloc(count * sizeof(float));
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(ncclMemAlloc((void**)&send[r], count * sizeof(float)));
    MUST(ncclMemAlloc((void**)&recv[r], count * sizeof(float)));
    struct cudaPointerAttributes a;
    MUST(cudaPointerGetAttributes(&a, send[r]));
    check_rank(a.type == cudaMemoryTypeDevice && a.device == dev_of(r), "ncclMemAlloc gives memory of the current device", r);
    for (size_t i = 0; i < count; i++) host[i] = (float)(r + 1 + i % 7);
    MUST(cudaMemcpy(send[r], host, count * sizeof(float), cudaMemcpyHostToDevice));
    MUST(cudaMemset(recv[r], 0xff, count * sizeof(float)));
  }
  MUST(ncclGroupStart());
  for (int r = 0; r < nranks; r++) MUST(ncclAllReduce(send[r], recv[r], count, ncclFloat, ncclSum, comms[r], streams[r]));
  MUST(ncclGroupEnd());
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(cudaStreamSynchronize(streams[r]));
    MUST(cudaMemcpy(host, recv[r], count * sizeof(float), cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int s = 0; s < nranks; s++) want += (float)(s + 1 + i % 7);
      wrong += host[i] != want;
    }
    char what[96];
    snprintf(what, sizeof what, "AllReduce float sum, %zu elements on ncclMemAlloc memory (%zu wrong)", count, wrong);
    check_rank(wrong == 0, what, r);
    ncclResult_t async = ncclSuccess;
    MUST(ncclCommGetAsyncError(comms[r], &async));
    check_rank(async == ncclSuccess, "no asynchronous error", r);
  }
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    check_rank(ncclMemFree(send[r]) == ncclSuccess && ncclMemFree(recv[r]) == ncclSuccess, "ncclMemFree", r);
  }
  free(host);
}

/* ncclWinGetUserPtr (2.29) is not in every nccl.h: declared here. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* run_windows registers an ncclMemAlloc buffer per rank as one window (in a
 * group, as one thread must), checks the handle and ncclWinGetUserPtr, that
 * a cudaMalloc buffer is refused, and deregisters. */
static void run_windows(ncclComm_t* comms) {
  const size_t size = 4 << 20;
  void* buf[MAXR];
  ncclWindow_t win[MAXR];
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(ncclMemAlloc(&buf[r], size));
  }
  MUST(ncclGroupStart());
  for (int r = 0; r < nranks; r++) MUST(ncclCommWindowRegister(comms[r], buf[r], size, &win[r], NCCL_WIN_COLL_SYMMETRIC));
  ncclResult_t rc = ncclGroupEnd();
  check_rank(rc == ncclSuccess, "ncclCommWindowRegister of ncclMemAlloc buffers (in a group)", 0);
  for (int r = 0; r < nranks && rc == ncclSuccess; r++) {
    void* user = NULL;
    check_rank(win[r] != NULL && ncclWinGetUserPtr(comms[r], win[r], &user) == ncclSuccess && user == buf[r],
          "window handle and ncclWinGetUserPtr", r);
  }
  if (rc == ncclSuccess) {
    MUST(ncclGroupStart());
    for (int r = 0; r < nranks; r++) MUST(ncclCommWindowDeregister(comms[r], win[r]));
    check_rank(ncclGroupEnd() == ncclSuccess, "ncclCommWindowDeregister (in a group)", 0);
    check_rank(ncclCommWindowDeregister(comms[0], win[0]) != ncclSuccess, "a deregistered window is refused", 0);
  }
  /* Two windows per communicator registered in a group, then deregistered
   * without one, communicator after communicator: deregistration waits for
   * no peer (as in NCCL), so each returns at once. */
  void* buf2[MAXR];
  ncclWindow_t two[MAXR][2];
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(ncclMemAlloc(&buf2[r], size));
  }
  MUST(ncclGroupStart());
  for (int r = 0; r < nranks; r++) {
    MUST(ncclCommWindowRegister(comms[r], buf[r], size, &two[r][0], NCCL_WIN_COLL_SYMMETRIC));
    MUST(ncclCommWindowRegister(comms[r], buf2[r], size, &two[r][1], NCCL_WIN_COLL_SYMMETRIC));
  }
  rc = ncclGroupEnd();
  check_rank(rc == ncclSuccess, "two windows per communicator (in a group)", 0);
  for (int r = 0; r < nranks && rc == ncclSuccess; r++) {
    double t0 = now_s();
    int ok = ncclCommWindowDeregister(comms[r], two[r][0]) == ncclSuccess &&
             ncclCommWindowDeregister(comms[r], two[r][1]) == ncclSuccess;
    double took = now_s() - t0;
    char what[128];
    snprintf(what, sizeof what, "ncclCommWindowDeregister without a group, one communicator after another (%.3f s)", took);
    check_rank(ok && took < 2, what, r);
  }
  void* plain[MAXR];
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(cudaMalloc(&plain[r], size));
  }
  MUST(ncclGroupStart());
  for (int r = 0; r < nranks; r++) MUST(ncclCommWindowRegister(comms[r], plain[r], size, &win[r], NCCL_WIN_DEFAULT));
  rc = ncclGroupEnd();
  check_rank(rc == ncclInvalidArgument || rc == ncclInvalidUsage, "a cudaMalloc buffer is refused as a window", 0);
  printf("     (%s)\n", ncclGetLastError(NULL));
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(cudaFree(plain[r]));
    MUST(ncclMemFree(buf[r]));
    MUST(ncclMemFree(buf2[r]));
  }
}

/* run_no_device: a communicator made before any CUDA device is current
 * runs on device 0, as NCCL's (cudaGetDevice's default) does: it reports
 * device 0 and all-reduces device buffers there. Runs first, before this
 * process's first CUDA call. */
static void run_no_device(void) {
  const char* atom = getenv("PURLIN_ATOM");
  if (atom && *atom && strcmp(atom, "auto") != 0 && strcmp(atom, "cuda") != 0) {
    printf("SKIP no-device check: PURLIN_ATOM=%s\n", atom);
    return;
  }
  ncclUniqueId id;
  ncclComm_t c;
  MUST(ncclGetUniqueId(&id));
  MUST(ncclCommInitRank(&c, 1, id, 0));
  int dev = -1;
  MUST(ncclCommCuDevice(c, &dev));
  check(dev == 0, "a communicator made with no current device is on device 0");
  MUST(cudaSetDevice(0));
  enum { n = 1031 };
  float *d, *host = malloc(2 * n * sizeof(float));
  for (int i = 0; i < n; i++) host[i] = (float)i;
  MUST(cudaMalloc((void**)&d, 2 * n * sizeof(float)));
  MUST(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice));
  ncclResult_t r = ncclAllReduce(d, d + n, n, ncclFloat, ncclSum, c, 0);
  int ok = r == ncclSuccess && cudaDeviceSynchronize() == cudaSuccess &&
           cudaMemcpy(host + n, d + n, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  for (int i = 0; i < n && ok; i++) ok = host[n + i] == (float)i;
  check(ok, "it all-reduces device buffers on device 0");
  MUST(ncclCommDestroy(c));
  MUST(cudaFree(d));
  free(host);
}

int main(int argc, char** argv) {
  /* A call that waits for a peer that never comes fails in seconds, not minutes. */
  setenv("PURLIN_TIMEOUT", "30", 0);
  if (argc > 1) nranks = atoi(argv[1]);
  run_no_device();
  if (nranks < 1 || nranks > MAXR) {
    printf("FAIL memalloc_e2e: %d ranks, want 1..%d\n", nranks, MAXR);
    return 1;
  }
  int ndev = 0;
  MUST(cudaGetDeviceCount(&ndev));
  if (ndev < nranks) {
    printf("SKIP memalloc_e2e: %d devices, need %d\n", ndev, nranks);
    return 0;
  }
  ncclUniqueId id;
  MUST(ncclGetUniqueId(&id));
  ncclComm_t comms[MAXR];
  cudaStream_t streams[MAXR];
  MUST(ncclGroupStart());
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    MUST(ncclCommInitRank(&comms[r], nranks, id, r));
  }
  MUST(cudaSetDevice(0)); /* the device current at GroupEnd must not matter */
  MUST(ncclGroupEnd());
  for (int r = 0; r < nranks; r++) {
    int dev = -1;
    MUST(ncclCommCuDevice(comms[r], &dev));
    char what[80];
    snprintf(what, sizeof what, "ncclCommCuDevice is the device current at init (%d, want %d)", dev, dev_of(r));
    check_rank(dev == dev_of(r), what, r);
  }
  run_allreduce(comms, streams, 5);            /* packets */
  run_allreduce(comms, streams, 3 << 20);      /* staged/chunked */
  run_allreduce(comms, streams, (40 << 20) + 3); /* ring, odd tail */
  run_windows(comms);
  int bogus = 0;
  check_rank(ncclMemFree(&bogus) != ncclSuccess, "ncclMemFree refuses a pointer it never gave", 0);
  for (int r = 0; r < nranks; r++) {
    MUST(cudaSetDevice(dev_of(r)));
    MUST(ncclCommDestroy(comms[r]));
    MUST(cudaStreamDestroy(streams[r]));
  }
  printf("memalloc_e2e: %s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
