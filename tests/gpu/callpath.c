/*
 * callpath.c: what an eager call costs the host, from the C entry to the
 * launch, the launch itself excluded (the latency issue's call-path figure).
 *
 * On one GPU, one rank, one stream: batches of N AllReduce calls of 8 bytes
 * issued back to back without waiting (the GPU runs them behind), timed on
 * the host; then the same for N launches of an empty kernel shaped like the
 * library's (one block of 512 threads, a 1048-byte argument: sizeof(Launch), as a plain
 * launch and as a programmatic dependent launch). The batches alternate
 * (library, plain launch, dependent launch, library, ...), so a drift of the
 * host's speed lands on both sides of a pair: the median over pairs of a
 * library batch's time per call minus the bare batch's beside it is the
 * library's own host time per call. Prints one line per figure, then
 * "callpath: <lib> own host time per call: X us".
 *
 * Builds against Purlin (purlin_nccl.h, -lpurlin) or, with -DREAL_NCCL,
 * against NCCL's nccl.h and libnccl. The driver is opened at run time
 * (libcuda.so.1), so only -lcudart is linked. Usage: callpath [calls] [batches].
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef REAL_NCCL
#include <nccl.h>
#define LIB "nccl"
#else
#include "purlin_nccl.h"
#define LIB "purlin"
#endif

#define MUST(call)                                                      \
  do {                                                                  \
    int rc_ = (int)(call);                                              \
    if (rc_ != 0) {                                                     \
      printf("FAIL %s -> %d\n", #call, rc_);                            \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

enum { kMaxBatches = 256, kArgBytes = 1048, kThreads = 512 };

/* An empty kernel taking an argument of the library kernel's size. */
static const char kEmptyPTX[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry empty(.param .align 8 .b8 arg[1048]) { ret; }\n";

typedef CUresult (*moduleLoadDataFn)(CUmodule*, const void*);
typedef CUresult (*moduleGetFunctionFn)(CUfunction*, CUmodule, const char*);
typedef CUresult (*launchKernelFn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, CUstream, void**, void**);
typedef CUresult (*launchKernelExFn)(const CUlaunchConfig*, CUfunction, void**, void**);

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* issue is one way of enqueueing one call on the stream. */
typedef void (*issue_fn)(void* ctx);

/* batch_us: the time one issue takes, issued calls times in a row without
 * waiting; the stream drains afterwards, outside the timing. */
static double batch_us(issue_fn issue, void* ctx, cudaStream_t s, int calls) {
  double t0 = now_us();
  for (int i = 0; i < calls; i++) issue(ctx);
  double per = (now_us() - t0) / calls;
  MUST(cudaStreamSynchronize(s));
  return per;
}

static double median(double* v, int n) {
  qsort(v, n, sizeof(double), by_value);
  return v[n / 2];
}

struct allreduce {
  ncclComm_t comm;
  cudaStream_t s;
  float *send, *recv;
};

static void issue_allreduce(void* p) {
  struct allreduce* a = p;
  MUST(ncclAllReduce(a->send, a->recv, 2, ncclFloat, ncclSum, a->comm, a->s));
}

struct empty {
  launchKernelFn launch;
  launchKernelExFn launchEx;
  CUfunction fn;
  cudaStream_t s;
  int pdl;
  unsigned char arg[kArgBytes];
};

static void issue_empty(void* p) {
  struct empty* e = p;
  void* params[] = {e->arg};
  if (!e->pdl) {
    MUST(e->launch(e->fn, 1, 1, 1, kThreads, 1, 1, 0, (CUstream)e->s, params, NULL));
    return;
  }
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = kThreads, cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = (CUstream)e->s;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  MUST(e->launchEx(&cfg, e->fn, params, NULL));
}

int main(int argc, char** argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 200, batches = argc > 2 ? atoi(argv[2]) : 101;
  if (calls < 1 || batches < 1 || batches > kMaxBatches) {
    fprintf(stderr, "usage: callpath [calls 1..] [batches 1..%d]\n", kMaxBatches);
    return 2;
  }
  MUST(cudaSetDevice(0));
  MUST(cudaFree(0)); /* the device's primary context, current on this thread */
  struct allreduce a;
  int dev = 0;
  MUST(ncclCommInitAll(&a.comm, 1, &dev));
  MUST(cudaStreamCreateWithFlags(&a.s, cudaStreamNonBlocking));
  MUST(cudaMalloc((void**)&a.send, 256));
  MUST(cudaMalloc((void**)&a.recv, 256));
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    printf("FAIL dlopen libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  moduleLoadDataFn load = (moduleLoadDataFn)dlsym(cuda, "cuModuleLoadData");
  moduleGetFunctionFn get = (moduleGetFunctionFn)dlsym(cuda, "cuModuleGetFunction");
  struct empty plain = {.launch = (launchKernelFn)dlsym(cuda, "cuLaunchKernel"),
                        .launchEx = (launchKernelExFn)dlsym(cuda, "cuLaunchKernelEx"), .s = a.s};
  if (!load || !get || !plain.launch) {
    printf("FAIL the driver lacks cuModuleLoadData, cuModuleGetFunction or cuLaunchKernel\n");
    return 1;
  }
  CUmodule mod;
  MUST(load(&mod, kEmptyPTX));
  MUST(get(&plain.fn, mod, "empty"));
  int major = 0;
  MUST(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  struct empty pdl = plain;
  pdl.pdl = 1;
  int has_pdl = plain.launchEx && major >= 9;

  /* Warm up each way, then alternate batches. */
  for (int i = 0; i < calls; i++) issue_allreduce(&a), issue_empty(&plain);
  for (int i = 0; has_pdl && i < calls; i++) issue_empty(&pdl);
  MUST(cudaStreamSynchronize(a.s));
  double lib[kMaxBatches], bare_plain[kMaxBatches], bare_pdl[kMaxBatches];
  double own_plain[kMaxBatches], own_pdl[kMaxBatches];
  for (int b = 0; b < batches; b++) {
    lib[b] = batch_us(issue_allreduce, &a, a.s, calls);
    bare_plain[b] = batch_us(issue_empty, &plain, a.s, calls);
    bare_pdl[b] = has_pdl ? batch_us(issue_empty, &pdl, a.s, calls) : bare_plain[b];
    own_plain[b] = lib[b] - bare_plain[b];
    own_pdl[b] = lib[b] - bare_pdl[b];
  }
  double lib_us = median(lib, batches), plain_us = median(bare_plain, batches), pdl_us = median(bare_pdl, batches);
  double own_plain_us = median(own_plain, batches), own_pdl_us = median(own_pdl, batches);
  printf("callpath: %s AllReduce of 8 B, issued back to back: %.3f us a call (median of %d batches of %d)\n", LIB,
         lib_us, batches, calls);
  printf("callpath: empty kernel (one block of %d threads, a %d-byte argument): %.3f us a launch\n", kThreads,
         kArgBytes, plain_us);
  if (has_pdl) printf("callpath: the same as a programmatic dependent launch: %.3f us a launch\n", pdl_us);
  /* Purlin launches with programmatic dependent launch where it can; NCCL's own way is not known
   * here, so its figure is against the cheaper of the two. */
  int use_pdl = has_pdl && (!strcmp(LIB, "purlin") || pdl_us < plain_us);
  printf("callpath: %s own host time per call: %.3f us (median of paired batches, against the %s launch)\n", LIB,
         use_pdl ? own_pdl_us : own_plain_us, use_pdl ? "dependent" : "plain");
  MUST(ncclCommDestroy(a.comm));
  return 0;
}
