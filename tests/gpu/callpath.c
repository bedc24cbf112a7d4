/*
 * callpath.c: what an eager call costs the host, from the C entry to the
 * launch, the launch itself excluded (the latency issue's call-path figure).
 *
 * On one GPU, one rank, one stream: batches of N AllReduce calls of 8 bytes
 * issued back to back without waiting (the GPU runs them behind), timed on
 * the host; then the same for N launches of an empty kernel shaped like the
 * library's (one block of 512 threads, a 536-byte argument, as a plain
 * launch and as a programmatic dependent launch). The median time a call
 * takes to issue, minus the median time a bare launch takes, is the
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

enum { kMaxBatches = 64, kArgBytes = 536, kThreads = 512 };

/* An empty kernel taking an argument of the library kernel's size. */
static const char kEmptyPTX[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry empty(.param .align 8 .b8 arg[536]) { ret; }\n";

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

/* median_us: the median over batches of the time one issue takes, issued
 * calls times in a row without waiting; the stream drains between batches,
 * outside the timing. */
static double median_us(issue_fn issue, void* ctx, cudaStream_t s, int calls, int batches) {
  double per[kMaxBatches];
  for (int i = 0; i < calls; i++) issue(ctx); /* warm up */
  MUST(cudaStreamSynchronize(s));
  for (int b = 0; b < batches; b++) {
    double t0 = now_us();
    for (int i = 0; i < calls; i++) issue(ctx);
    per[b] = (now_us() - t0) / calls;
    MUST(cudaStreamSynchronize(s));
  }
  qsort(per, batches, sizeof(double), by_value);
  return per[batches / 2];
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
  int calls = argc > 1 ? atoi(argv[1]) : 200, batches = argc > 2 ? atoi(argv[2]) : 25;
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
  double lib_us = median_us(issue_allreduce, &a, a.s, calls, batches);
  printf("callpath: %s AllReduce of 8 B, issued back to back: %.3f us a call (median of %d batches of %d)\n", LIB,
         lib_us, batches, calls);

  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    printf("FAIL dlopen libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  moduleLoadDataFn load = (moduleLoadDataFn)dlsym(cuda, "cuModuleLoadData");
  moduleGetFunctionFn get = (moduleGetFunctionFn)dlsym(cuda, "cuModuleGetFunction");
  struct empty e = {.launch = (launchKernelFn)dlsym(cuda, "cuLaunchKernel"),
                    .launchEx = (launchKernelExFn)dlsym(cuda, "cuLaunchKernelEx"), .s = a.s};
  if (!load || !get || !e.launch) {
    printf("FAIL the driver lacks cuModuleLoadData, cuModuleGetFunction or cuLaunchKernel\n");
    return 1;
  }
  CUmodule mod;
  MUST(load(&mod, kEmptyPTX));
  MUST(get(&e.fn, mod, "empty"));
  double plain_us = median_us(issue_empty, &e, a.s, calls, batches), pdl_us = -1;
  printf("callpath: empty kernel (one block of %d threads, a %d-byte argument): %.3f us a launch\n", kThreads,
         kArgBytes, plain_us);
  int major = 0;
  MUST(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (e.launchEx && major >= 9) {
    e.pdl = 1;
    pdl_us = median_us(issue_empty, &e, a.s, calls, batches);
    printf("callpath: the same as a programmatic dependent launch: %.3f us a launch\n", pdl_us);
  }
  /* Purlin launches with programmatic dependent launch where it can; NCCL's own way is not known
   * here, so its figure is against the cheaper of the two. */
  double bare = pdl_us >= 0 && (!strcmp(LIB, "purlin") || pdl_us < plain_us) ? pdl_us : plain_us;
  printf("callpath: %s own host time per call: %.3f us\n", LIB, lib_us - bare);
  MUST(ncclCommDestroy(a.comm));
  return 0;
}
