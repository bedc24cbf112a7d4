/*
 * backend_host.c: ranks on Purlin's host Atom. Buffers are malloc'd host
 * memory, streams come from purlinHostStreamCreate, and a sync is
 * purlinHostStreamSynchronize. Needs Purlin (the host streams are its own).
 */
#ifndef PERF_CUDA

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "perf.h"

#ifndef PERF_PURLIN
#error "the host backend runs on Purlin's host Atom: build with purlin_nccl.h, or use -DPERF_CUDA"
#endif

const char* const backend_name = "host";

static purlinStream_t streams[PERF_MAX_RANKS];
static int first_rank, rank_count;

static int report(const char* what, int r, purlinResult_t res) {
  fprintf(stderr, "purlin-perf: %s (rank %d): %s: %s\n", what, r, ncclGetErrorString((ncclResult_t)res), ncclGetLastError(NULL));
  return 1;
}

int backend_init(int first, int count, int nranks) {
  (void)nranks;
  /* Purlin picks the CUDA Atom when a GPU is usable; this backend needs the host one. */
  setenv("PURLIN_ATOM", "host", 0);
  first_rank = first;
  rank_count = count;
  for (int r = first; r < first + count; r++) {
    purlinResult_t res = purlinHostStreamCreate(&streams[r]);
    if (res != purlinSuccess) return report("purlinHostStreamCreate", r, res);
  }
  return 0;
}

void backend_fini(void) {
  for (int r = first_rank; r < first_rank + rank_count; r++)
    if (streams[r]) purlinHostStreamDestroy(streams[r]);
}

int backend_select_rank(int r) { (void)r; return 0; }

/* 64-byte alignment, like a device allocation would give, and never NULL for 0 bytes. */
void* backend_alloc(int r, size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
    fprintf(stderr, "purlin-perf: cannot allocate %zu bytes for rank %d\n", bytes, r);
    return NULL;
  }
  return p;
}

void backend_free(int r, void* p) { (void)r; free(p); }

int backend_upload(int r, void* dst, const void* host, size_t bytes) { (void)r; memcpy(dst, host, bytes); return 0; }
int backend_download(int r, void* host, const void* src, size_t bytes) { (void)r; memcpy(host, src, bytes); return 0; }

cudaStream_t backend_stream(int r) { return (cudaStream_t)streams[r]; }

int backend_sync(int r, ncclComm_t comm) {
  purlinResult_t res = purlinHostStreamSynchronize(streams[r]);
  if (res != purlinSuccess) return report("purlinHostStreamSynchronize", r, res);
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclSuccess)
    return report("ncclCommGetAsyncError", r, (purlinResult_t)async);
  return 0;
}

double backend_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int backend_graph_supported(void) { return 0; }
int backend_capture_begin(int r) { (void)r; return 1; }
int backend_capture_end(int r) { (void)r; return 1; }
int backend_graph_instantiate(int r) { (void)r; return 1; }
int backend_graph_launch(int r) { (void)r; return 1; }
void backend_graph_destroy(int r) { (void)r; }

void backend_describe(FILE* out, int r) {
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  fprintf(out, "#  Rank %2d Pid %6d on %10s host memory (Purlin host Atom)\n", r, (int)getpid(), host);
}

#endif /* !PERF_CUDA */
