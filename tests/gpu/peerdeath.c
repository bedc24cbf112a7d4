/*
 * peerdeath.c: rank departures on the CUDA Atom, through the NCCL C ABI, one
 * process driving every rank from one thread.
 *
 *   stress  ROUNDS rounds of what nccl-tests' all_reduce_perf -g N does:
 *           ncclGroupStart; ncclCommInitRank per device; ncclGroupEnd; 5
 *           warm-up AllReduces at the largest size, then every size from
 *           8 B to MAXBYTES (x4), 20 calls out of place then 20 in place,
 *           each batch awaited by polling cudaStreamQuery and
 *           ncclCommGetAsyncError; data checked; destroy. Any asynchronous
 *           error fails (every rank lives: none may be taken for gone).
 *   abort   the last rank aborts (ncclCommAbort) while every rank has
 *           AllReduces queued; the others keep launching. Each survivor's
 *           work must end within the timeout with ncclRemoteError (a gone
 *           peer), never ncclInvalidUsage (which a survivor saw when the
 *           aborted rank's later kernels ran with an epoch that had not
 *           advanced), and ncclGetLastError must say the rank aborted.
 *
 * Prints one PASS/FAIL line per check; exit 1 on any failure.
 * Usage: peerdeath NRANKS [ROUNDS [MAXBYTES]] (defaults: 2, 20, 1 GiB; at
 * most 8 ranks). Rank r runs on device r.
 * Build: gcc -Iinclude -I$CUDA_HOME/include ... -lpurlin -lcudart.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpucheck.h"

static int nranks = 2;

typedef struct {
  int n;
  ncclComm_t comm[MAXR];
  cudaStream_t stream[MAXR];
  float *send[MAXR], *recv[MAXR];
} clique_t;

static void clique_init(clique_t* q, int n, size_t maxbytes) {
  ncclUniqueId id;
  q->n = n;
  MUST(ncclGetUniqueId(&id));
  MUST(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    MUST(cudaSetDevice(r));
    MUST(ncclCommInitRank(&q->comm[r], n, id, r));
  }
  MUST(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    MUST(cudaSetDevice(r));
    MUST(cudaStreamCreateWithFlags(&q->stream[r], cudaStreamNonBlocking));
    MUST(cudaMalloc((void**)&q->send[r], maxbytes));
    MUST(cudaMalloc((void**)&q->recv[r], maxbytes));
  }
}

static void clique_free(clique_t* q, int destroy) {
  for (int r = 0; r < q->n; r++) {
    MUST(cudaSetDevice(r));
    if (destroy && q->comm[r]) MUST(ncclCommDestroy(q->comm[r]));
    MUST(cudaStreamDestroy(q->stream[r]));
    MUST(cudaFree(q->send[r]));
    MUST(cudaFree(q->recv[r]));
  }
}

/* wait polls every rank r with live[r] as nccl-tests does until its stream is
 * done or it reports an asynchronous error, stored in async[r]. Returns 0, or
 * -1 past timeout_s. */
static int wait_ranks(clique_t* q, const int* live, ncclResult_t* async, double timeout_s) {
  int done[MAXR] = {0};
  double start = now_s();
  for (int left = 1; left;) {
    left = 0;
    for (int r = 0; r < q->n; r++) {
      if (!live[r] || done[r]) continue;
      cudaError_t e = cudaStreamQuery(q->stream[r]);
      if (e != cudaSuccess && e != cudaErrorNotReady) MUST(e);
      ncclResult_t a = ncclSuccess;
      MUST(ncclCommGetAsyncError(q->comm[r], &a));
      async[r] = a;
      if (e == cudaSuccess || (a != ncclSuccess && a != ncclInProgress)) done[r] = 1;
      else left = 1;
    }
    if (left && now_s() - start > timeout_s) return -1;
  }
  return 0;
}

/* batch issues reps grouped AllReduces of count floats and waits for them;
 * an asynchronous error fails, naming the rank and the library's words. */
static int batch(clique_t* q, size_t count, int inplace, int reps, int round) {
  for (int i = 0; i < reps; i++) {
    MUST(ncclGroupStart());
    for (int r = 0; r < q->n; r++)
      MUST(ncclAllReduce(q->send[r], inplace ? q->send[r] : q->recv[r], count, ncclFloat, ncclSum, q->comm[r],
                         q->stream[r]));
    MUST(ncclGroupEnd());
  }
  int live[MAXR];
  ncclResult_t async[MAXR];
  for (int r = 0; r < q->n; r++) live[r] = 1, async[r] = ncclSuccess;
  if (wait_ranks(q, live, async, 60) != 0) {
    printf("FAIL stress round %d: %zu floats did not finish in 60 s\n", round, count);
    failures++;
    return -1;
  }
  for (int r = 0; r < q->n; r++)
    if (async[r] != ncclSuccess) {
      printf("FAIL stress round %d rank %d: %zu floats: asynchronous error %s (%s)\n", round, r, count,
             ncclGetErrorString(async[r]), ncclGetLastError(q->comm[r]));
      failures++;
      return -1;
    }
  return 0;
}

/* fill writes rank r's input (r + 1 + i % 7, exact in fp32 sums) into send. */
static void fill(clique_t* q, float* host, size_t count) {
  for (int r = 0; r < q->n; r++) {
    for (size_t i = 0; i < count; i++) host[i] = (float)(r + 1 + i % 7);
    MUST(cudaSetDevice(r));
    MUST(cudaMemcpy(q->send[r], host, count * sizeof(float), cudaMemcpyHostToDevice));
  }
}

static size_t wrong_sums(clique_t* q, float* host, size_t count, int inplace) {
  size_t wrong = 0;
  int n = q->n;
  for (int r = 0; r < n; r++) {
    MUST(cudaSetDevice(r));
    MUST(cudaMemcpy(host, inplace ? q->send[r] : q->recv[r], count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) wrong += host[i] != (float)(n * (int)(i % 7) + n * (n + 1) / 2);
  }
  return wrong;
}

/* Sizes up to this many floats have their data checked (the largest ones
 * would cost more time copying and comparing than running). */
#define CHECK_MAX ((size_t)16 << 20)

static void stress(int rounds, size_t maxbytes) {
  size_t maxcount = maxbytes / sizeof(float);
  float* host = malloc((maxcount < CHECK_MAX ? maxcount : CHECK_MAX) * sizeof(float));
  int bad = 0;
  double start = now_s();
  for (int round = 0; round < rounds && !bad; round++) {
    clique_t q;
    clique_init(&q, nranks, maxbytes);
    bad |= batch(&q, maxcount, 0, 5, round) != 0; /* warm-up, on whatever the memory holds */
    for (size_t count = 2; count <= maxcount && !bad; count *= 4) {
      int checked = count <= CHECK_MAX;
      if (checked) fill(&q, host, count);
      bad |= batch(&q, count, 0, 20, round) != 0;
      if (!bad && checked && wrong_sums(&q, host, count, 0)) {
        printf("FAIL stress round %d: %zu floats out of place: wrong sums\n", round, count);
        failures++, bad = 1;
      }
      bad |= !bad && batch(&q, count, 1, 1, round) != 0; /* in place, checked once: later calls sum sums */
      if (!bad && checked && wrong_sums(&q, host, count, 1)) {
        printf("FAIL stress round %d: %zu floats in place: wrong sums\n", round, count);
        failures++, bad = 1;
      }
      for (int i = 0; i < 19 && !bad; i++) bad |= batch(&q, count, 1, 1, round) != 0;
    }
    clique_free(&q, 1);
  }
  char what[160];
  snprintf(what, sizeof what, "stress: %d rounds of init, AllReduce 8 B..%zu B with async polling, destroy, %d ranks (%.1f s)",
           rounds, maxbytes, nranks, now_s() - start);
  check(!bad, what);
  free(host);
}

static void abort_one(void) {
  const size_t count = 16 << 20; /* 64 MiB: long enough to be mid-flight */
  clique_t q;
  clique_init(&q, nranks, count * sizeof(float));
  int gone = nranks - 1;
  if (batch(&q, 1024, 0, 2, -1) != 0) return;
  for (int i = 0; i < 10; i++) {
    MUST(ncclGroupStart());
    for (int r = 0; r < nranks; r++)
      MUST(ncclAllReduce(q.send[r], q.recv[r], count, ncclFloat, ncclSum, q.comm[r], q.stream[r]));
    MUST(ncclGroupEnd());
  }
  MUST(ncclCommAbort(q.comm[gone]));
  q.comm[gone] = NULL;
  for (int i = 0; i < 10; i++)
    for (int r = 0; r < gone; r++)
      MUST(ncclAllReduce(q.send[r], q.recv[r], count, ncclFloat, ncclSum, q.comm[r], q.stream[r]));
  int live[MAXR];
  ncclResult_t async[MAXR];
  for (int r = 0; r < nranks; r++) live[r] = r != gone, async[r] = ncclSuccess;
  double start = now_s();
  int ended = wait_ranks(&q, live, async, 30) == 0;
  check(ended, "abort: every survivor's work ends soon after a peer aborts");
  for (int r = 0; r < gone && ended; r++) {
    char what[256];
    const char* text = ncclGetLastError(q.comm[r]);
    snprintf(what, sizeof what, "abort: rank %d's asynchronous error is ncclRemoteError, got %s after %.2f s (%s)", r,
             ncclGetErrorString(async[r]), now_s() - start, text);
    check(async[r] == ncclRemoteError, what);
    snprintf(what, sizeof what, "abort: rank %d's last error says rank %d aborted", r, gone);
    check(strstr(text, "aborted its communicator") != NULL, what);
  }
  for (int r = 0; r < gone; r++) {
    MUST(cudaSetDevice(r));
    MUST(ncclCommAbort(q.comm[r]));
    q.comm[r] = NULL;
  }
  clique_free(&q, 0);
}

int main(int argc, char** argv) {
  int rounds = 20;
  size_t maxbytes = (size_t)1 << 30;
  if (argc > 1) nranks = atoi(argv[1]);
  if (argc > 2) rounds = atoi(argv[2]);
  if (argc > 3) maxbytes = strtoull(argv[3], NULL, 10);
  if (nranks < 2 || nranks > MAXR || rounds < 1 || maxbytes < 8) {
    printf("FAIL peerdeath: usage: peerdeath NRANKS(2..%d) [ROUNDS [MAXBYTES]]\n", MAXR);
    return 1;
  }
  int ndev = 0;
  MUST(cudaGetDeviceCount(&ndev));
  if (ndev < nranks) {
    printf("SKIP peerdeath: %d devices, need %d\n", ndev, nranks);
    return 0;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  stress(rounds, maxbytes);
  abort_one();
  printf("peerdeath: %s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
