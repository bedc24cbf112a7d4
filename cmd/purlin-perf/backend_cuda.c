/*
 * backend_cuda.c (-DPERF_CUDA): one GPU per rank, rank r on device r.
 * Buffers come from cudaMalloc, each rank has its own non-blocking stream,
 * a sync is cudaStreamSynchronize (after polling ncclCommGetAsyncError so a
 * failed collective is reported rather than waited on forever), and -G
 * captures each rank's stream into a CUDA graph that is replayed.
 * Builds against the real <nccl.h> (PERF_REAL_NCCL) or purlin_nccl.h.
 */
#ifdef PERF_CUDA

#include <cuda_runtime.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "perf.h"

const char* const backend_name = "cuda";

static cudaStream_t streams[PERF_MAX_RANKS];
static cudaGraph_t graphs[PERF_MAX_RANKS];
static cudaGraphExec_t execs[PERF_MAX_RANKS];
static int first_rank, rank_count, ndevices;

static int cuda_failed(const char* what, int r, cudaError_t err) {
  fprintf(stderr, "purlin-perf: %s (rank %d): %s\n", what, r, cudaGetErrorString(err));
  return 1;
}
#define CUDACHECK(call, r)                                        \
  do {                                                            \
    cudaError_t e_ = (call);                                      \
    if (e_ != cudaSuccess) return cuda_failed(#call, (r), e_);    \
  } while (0)

static int device_of(int r) { return r % ndevices; }

int backend_init(int first, int count, int nranks) {
  first_rank = first;
  rank_count = count;
  CUDACHECK(cudaGetDeviceCount(&ndevices), first);
  if (ndevices < nranks)
    fprintf(stderr, "purlin-perf: %d ranks on %d GPUs: ranks share devices\n", nranks, ndevices);
  for (int r = first; r < first + count; r++) {
    CUDACHECK(cudaSetDevice(device_of(r)), r);
    CUDACHECK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), r);
  }
  return 0;
}

void backend_fini(void) {
  for (int r = first_rank; r < first_rank + rank_count; r++) {
    cudaSetDevice(device_of(r));
    if (streams[r]) cudaStreamDestroy(streams[r]);
  }
}

int backend_select_rank(int r) {
  CUDACHECK(cudaSetDevice(device_of(r)), r);
  return 0;
}

void* backend_alloc(int r, size_t bytes) {
  void* p = NULL;
  if (cudaSetDevice(device_of(r)) != cudaSuccess) return NULL;
  cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
  if (err != cudaSuccess) { cuda_failed("cudaMalloc", r, err); return NULL; }
  return p;
}

void backend_free(int r, void* p) {
  cudaSetDevice(device_of(r));
  cudaFree(p);
}

/* Copies go on rank r's own stream and are waited for. A plain cudaMemcpy would
 * not do: it runs on the legacy default stream, which a non-blocking stream does
 * not wait for, and from pageable memory it returns once the data is staged,
 * before the DMA to the device has ended. A collective issued right after it
 * could then read the input's tail before it arrived. */
int backend_upload(int r, void* dst, const void* host, size_t bytes) {
  CUDACHECK(cudaSetDevice(device_of(r)), r);
  CUDACHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, streams[r]), r);
  CUDACHECK(cudaStreamSynchronize(streams[r]), r);
  return 0;
}

int backend_download(int r, void* host, const void* src, size_t bytes) {
  CUDACHECK(cudaSetDevice(device_of(r)), r);
  CUDACHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, streams[r]), r);
  CUDACHECK(cudaStreamSynchronize(streams[r]), r);
  return 0;
}

cudaStream_t backend_stream(int r) { return streams[r]; }

int backend_sync(int r, ncclComm_t comm) {
  for (;;) {
    cudaError_t q = cudaStreamQuery(streams[r]);
    if (q == cudaSuccess) return 0;
    if (q != cudaErrorNotReady) return cuda_failed("cudaStreamQuery", r, q);
    ncclResult_t async = ncclSuccess;
    ncclResult_t res = ncclCommGetAsyncError(comm, &async);
    if (res != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      fprintf(stderr, "purlin-perf: rank %d: asynchronous error: %s (%s)\n", r,
              ncclGetErrorString(res != ncclSuccess ? res : async), ncclGetLastError(comm));
      return 1;
    }
  }
}

double backend_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int backend_graph_supported(void) { return 1; }

/* Thread-local capture mode, as nccl-tests uses: the library may still do
 * its own (uncaptured) CUDA work on other streams while we capture. */
int backend_capture_begin(int r) {
  CUDACHECK(cudaSetDevice(device_of(r)), r);
  CUDACHECK(cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeThreadLocal), r);
  return 0;
}

int backend_capture_end(int r) {
  CUDACHECK(cudaSetDevice(device_of(r)), r);
  CUDACHECK(cudaStreamEndCapture(streams[r], &graphs[r]), r);
  return 0;
}

/* Called for every rank once every capture has ended (CUDA refuses it while
 * another rank's stream is still capturing in this thread), before any launch. */
int backend_graph_instantiate(int r) {
  CUDACHECK(cudaSetDevice(device_of(r)), r);
  CUDACHECK(cudaGraphInstantiate(&execs[r], graphs[r], 0), r);
  return 0;
}

int backend_graph_launch(int r) {
  CUDACHECK(cudaGraphLaunch(execs[r], streams[r]), r);
  return 0;
}

void backend_graph_destroy(int r) {
  if (execs[r]) cudaGraphExecDestroy(execs[r]);
  if (graphs[r]) cudaGraphDestroy(graphs[r]);
  execs[r] = NULL;
  graphs[r] = NULL;
}

void backend_describe(FILE* out, int r) {
  struct cudaDeviceProp prop;
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  int dev = device_of(r);
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) prop.name[0] = '\0';
  fprintf(out, "#  Rank %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", r, (int)getpid(), host, dev,
          prop.pciDomainID, prop.pciBusID, prop.pciDeviceID, prop.name);
}

#endif /* PERF_CUDA */
