/*
 * stepbench.cu: where the time of a kernel step goes, on one GPU.
 *
 * Builds Purlin's kernel (csrc/run.cu) with PURLIN_TRACE defined to read the
 * SM clock at three points of every step (begin, after the barrier before
 * it, done), then runs synthetic one-block Plans on GPU 0 and prints, per
 * Plan, the time a launch takes (100 launches in a CUDA graph) and the
 * median cycles of a step's parts:
 *   copies   33 Copy steps of 16 bytes, send -> recv
 *   packets  16 pairs of a Copy of 16 bytes into this GPU's own packet
 *            window and a Reduce of the input with those packets (float sum),
 *            the shape of a small AllReduce's steps without a peer
 *   signals  16 pairs of a Notify of this GPU's own flag and a Wait for it,
 *            each satisfied at once: what a signal step costs besides the
 *            flag's flight between GPUs
 * and, as the floor, a plain kernel that copies 16 bytes and passes a
 * barrier 33 times, by one thread and through Purlin's copyPlain with the
 * whole block. Then the epilogue of an AllReduce (residual add + RMSNorm,
 * bfloat16, rows of 4096; csrc/epilogue.cuh) on 1 to 1024 rows:
 *   epilogue  purlin_epilogue alone, on 16, 4 and 1 rows a block, with each
 *            group width (threads a row) from a warp to the block, against
 *            a plain kernel that does the same arithmetic a block a row in
 *            float32 (rsqrtf, fused multiply-adds: not Purlin's rounding)
 *   fused    for each group width, one worker's Copy of a row and its Epilogue step in
 *            purlin_run_epilogue, against purlin_run then purlin_epilogue
 *            and the Copy alone in purlin_run: the shape of a one-row fused
 *            call
 * and, before them, the epilogue's fixed cost (overhead): an empty kernel,
 * with a small and with Launch's parameters, against purlin_epilogue with
 * no step, with one row of 8 and 512 elements and with one of 4096. Last,
 * what a taken branch costs by how far it goes:
 *   jumps    one thread takes 8 forward branches in a row, each over 0 to
 *            1024 instructions that never run, twice in one launch (the
 *            second time over code it has just fetched), in three
 *            launches: cycles a branch, against the same chain with
 *            nothing to jump over
 * No peer and no other GPU; launches are plain, not programmatic dependent
 * ones as atom/cuda's, so what a kernel reads before its wait shows here.
 *
 *   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc -o stepbench tests/gpu/stepbench.cu && ./stepbench [PLAN]
 *
 * PLAN (one copy, copies, packets, signals, overhead, epilogue or jumps) runs that Plan alone and no
 * floor: one shape for a profiler to sample; `profile ROWS BLOCKS GROUP`
 * launches purlin_epilogue three times on that many rows, blocks and threads
 * a row, and nothing else.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

__device__ long long traceClock[64][3];
#define PURLIN_TRACE(i, k)                                       \
  do {                                                           \
    if (threadIdx.x == 0 && (i) < 64) traceClock[i][k] = clock64(); \
  } while (0)
#include "run.cu"

#define MUST(call)                                                                \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      printf("FAIL %s: %s\n", #call, cudaGetErrorString(e_));                     \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

namespace {

constexpr int kCopies = 33, kPairs = 16, kLaunches = 100, kReps = 10;

__global__ void floorKernel(const uint4* src, uint4* dst, int n) {
  for (int k = 0; k < n; k++) {
    if (threadIdx.x == 0) dst[k] = src[k];
    __syncthreads();
  }
}

/* floorCopyPlain is floorKernel through Purlin's copyPlain (the whole
 * block, as a Copy step moves): the copy's own cost, without the step
 * loop around it. */
__global__ void floorCopyPlain(const uint4* src, uint4* dst, int n) {
  for (int k = 0; k < n; k++) {
    purlin::copyPlain((uint64_t)(dst + k), (uint64_t)(src + k), 16);
    __syncthreads();
  }
}

constexpr uint32_t kHidden = 4096, kMaxRows = 1024;
constexpr float kEps = 1e-6f;

/* rmsnormFloor: out = norm(out + res) * w, res = out + res, a block of 512
 * threads a row of 4096 bfloat16, one 16-byte vector a thread: the plain
 * kernel an epilogue of these rows could be. */
__global__ void rmsnormFloor(__nv_bfloat16* out, __nv_bfloat16* res, const __nv_bfloat16* w, float eps) {
  static_assert(kHidden == kThreads * 8, "one vector a thread");
  __shared__ float warps[kThreads / 32];
  const uint64_t at = (uint64_t)blockIdx.x * kHidden + threadIdx.x * 8;
  uint4 o = *(const uint4*)(out + at), r = *(const uint4*)(res + at), wv = *(const uint4*)(w + threadIdx.x * 8);
  __nv_bfloat16* ob = (__nv_bfloat16*)&o;
  const __nv_bfloat16* rb = (const __nv_bfloat16*)&r;
  const __nv_bfloat16* wb = (const __nv_bfloat16*)&wv;
  float z[8], ss = 0.0f;
  for (int j = 0; j < 8; j++) {
    ob[j] = __float2bfloat16(__bfloat162float(ob[j]) + __bfloat162float(rb[j]));
    z[j] = __bfloat162float(ob[j]);
    ss += z[j] * z[j];
  }
  *(uint4*)(res + at) = o;
  for (int m = 16; m >= 1; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = ss;
  __syncthreads();
  ss = 0.0f;
  for (int k = 0; k < kThreads / 32; k++) ss += warps[k];
  const float inv = rsqrtf(ss / kHidden + eps);
  for (int j = 0; j < 8; j++) ob[j] = __float2bfloat16(z[j] * inv * __bfloat162float(wb[j]));
  *(uint4*)(out + at) = o;
}

Ref ref(uint8_t space, uint64_t off, uint64_t half = 0) {
  Ref r;
  memset(&r, 0, sizeof r);
  r.space = space, r.off = off, r.half = half;
  return r;
}

Step copyStep(Ref dst, Ref src, uint64_t bytes) {
  Step s;
  memset(&s, 0, sizeof s);
  s.verb = kCopy, s.bytes = bytes, s.dst = dst, s.src[0] = src, s.delta = 1, s.check = 0x5eed;
  return s;
}

/* usPerLaunch times kLaunches launches captured in a graph, kReps replays. */
template <typename F>
float usPerLaunch(cudaStream_t s, F launch) {
  for (int i = 0; i < 10; i++) launch();
  MUST(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunches; i++) launch();
  MUST(cudaStreamEndCapture(s, &g));
  MUST(cudaGraphInstantiate(&ge, g, 0));
  MUST(cudaGraphLaunch(ge, s));
  MUST(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  MUST(cudaEventCreate(&a));
  MUST(cudaEventCreate(&b));
  MUST(cudaEventRecord(a, s));
  for (int r = 0; r < kReps; r++) MUST(cudaGraphLaunch(ge, s));
  MUST(cudaEventRecord(b, s));
  MUST(cudaStreamSynchronize(s));
  float ms = 0;
  MUST(cudaEventElapsedTime(&ms, a, b));
  MUST(cudaGraphExecDestroy(ge));
  MUST(cudaGraphDestroy(g));
  return ms * 1000.f / (kLaunches * kReps);
}

long long median(std::vector<long long> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

/* epilogueStep is an Epilogue step of residual add + RMSNorm on rows of
 * kHidden bfloat16 from the output's start, a group of g threads a row, in
 * the device image's form (atom/cuda planBytes: src[0] holds its first
 * row, its rows and its group). */
Step epilogueStep(uint32_t rows, uint32_t g, uint32_t hidden = kHidden) {
  Step e = copyStep(ref(kSpaceRecv, 0), ref(kSpaceRecv, 0), (uint64_t)rows * hidden * 2);
  uint32_t bits;
  memcpy(&bits, &kEps, 4);
  e.verb = kEpilogue, e.peer = kEpilogueResidualAdd | kEpilogueRMSNorm, e.slot = hidden, e.check = bits;
  e.src[0].off = 0, e.src[0].half = rows, e.src[0].pitch = g;
  return e;
}

/* EpilogueMem is device memory for an epilogue of `rows` rows of kHidden
 * bfloat16: the input its Copy reads, the output, the residual and the
 * weight, each filled with small values; use names them as buffer 0 of L. */
struct EpilogueMem {
  void *in, *out, *res, *w;
  explicit EpilogueMem(uint32_t rows) {
    const uint64_t bytes = (uint64_t)rows * kHidden * 2;
    std::vector<__nv_bfloat16> host(bytes / 2);
    for (size_t i = 0; i < host.size(); i++) host[i] = __float2bfloat16((float)((i * 7919) % 17) / 16.0f - 0.5f);
    for (void** p : {&in, &out, &res}) {
      MUST(cudaMalloc(p, bytes));
      MUST(cudaMemcpy(*p, host.data(), bytes, cudaMemcpyHostToDevice));
    }
    MUST(cudaMalloc(&w, kHidden * 2));
    MUST(cudaMemcpy(w, host.data(), kHidden * 2, cudaMemcpyHostToDevice));
  }
  ~EpilogueMem() {
    for (void* p : {in, out, res, w}) cudaFree(p);
  }
  void use(Launch& L) const {
    L.dtype = kBfloat16;
    L.send[0] = (uint64_t)in, L.recv[0] = (uint64_t)out, L.residual[0] = (uint64_t)res, L.weight[0] = (uint64_t)w;
  }
};

/* oneWorker writes the image of one worker of `count` steps followed by
 * `epilogues` Epilogue steps: its Worker, then fill's uint16 of its
 * channel's workers and (4-aligned) its epilogue count. */
void oneWorker(void* workers, void* fill, uint32_t count, uint16_t epilogues) {
  const Worker w = {0, 0, 0, count};
  const uint16_t image[4] = {1, 0, epilogues, 0};
  MUST(cudaMemcpy(workers, &w, sizeof w, cudaMemcpyHostToDevice));
  MUST(cudaMemcpy(fill, image, sizeof image, cudaMemcpyHostToDevice));
}

/* epilogueBench times the epilogue of 1-1024 rows: purlin_epilogue against
 * rmsnormFloor, and in a one-row call's shape (see the top). L's buffers
 * are replaced by the epilogue's for the while. */
void epilogueBench(cudaStream_t s, Launch L, void* steps, void* workers, void* fill, void* status) {
  const EpilogueMem m(kMaxRows);
  m.use(L);
  auto failed = [&](const char* what) {
    if (*(volatile uint64_t*)status == 0) return false;
    printf("FAIL %s: the kernel reported status %#llx\n", what, (unsigned long long)*(volatile uint64_t*)status);
    return true;
  };
  // Each row count on 1, 4 and 16 rows a block (atom/cuda spreads a worker's
  // rows over its blocks), each group width from a warp to the block.
  for (uint32_t rows : {1u, 2u, 4u, 8u, 16u, 128u, kMaxRows}) {
    oneWorker(workers, fill, 0, 1);  // no steps before its epilogue
    const float plain = usPerLaunch(s, [&] {
      rmsnormFloor<<<rows, kThreads, 0, s>>>((__nv_bfloat16*)m.out, (__nv_bfloat16*)m.res, (const __nv_bfloat16*)m.w, kEps);
    });
    uint32_t last = 0;
    for (uint32_t perBlock : {16u, 4u, 1u}) {
      const dim3 grid(1, std::max(1u, std::min((rows + perBlock - 1) / perBlock, 1024u)));
      if (grid.y == last) continue;
      last = grid.y;
      printf("stepbench: epilogue %4u rows of %u bf16 on %3u blocks: plain kernel %6.2f us (%u blocks); purlin_epilogue",
             rows, kHidden, grid.y, plain, rows);
      for (uint32_t g = 32; g <= kThreads; g *= 2) {
        const Step e = epilogueStep(rows, g);
        MUST(cudaMemcpy(steps, &e, sizeof e, cudaMemcpyHostToDevice));
        const float purlin = usPerLaunch(s, [&] { purlin_epilogue<<<grid, kThreads, 0, s>>>(L); });
        if (failed("purlin_epilogue")) return;
        printf(" %6.2f (%u)", purlin, g);
      }
      printf(" a group of threads\n");
    }
  }
  for (uint32_t g = 32; g <= kThreads; g *= 2) {
    const Step one[2] = {copyStep(ref(kSpaceRecv, 0), ref(kSpaceSend, 0), kHidden * 2), epilogueStep(1, g)};
    MUST(cudaMemcpy(steps, one, sizeof one, cudaMemcpyHostToDevice));
    oneWorker(workers, fill, 1, 1);  // the Copy; its epilogue follows outside the count
    const float fused = usPerLaunch(s, [&] { purlin_run_epilogue<<<1, kThreads, 0, s>>>(L); });
    const float copy = usPerLaunch(s, [&] { purlin_run<<<1, kThreads, 0, s>>>(L); });
    const float two = usPerLaunch(s, [&] {
      purlin_run<<<1, kThreads, 0, s>>>(L);
      purlin_epilogue<<<1, kThreads, 0, s>>>(L);
    });
    if (failed("fused")) return;
    printf("stepbench: fused    a Copy of one row then its epilogue, a group of %3u: purlin_run_epilogue %6.2f us a "
           "launch, purlin_run + purlin_epilogue %6.2f, the Copy alone in purlin_run %6.2f\n",
           g, fused, two, copy);
  }
}

__global__ void emptyKernel(int* p) {
  if (threadIdx.x == 0 && p == nullptr) *p = 1;
}
__global__ void emptyLaunch(const __grid_constant__ Launch L) {
  if (threadIdx.x == 0 && L.rank == 12345) *(int*)L.status = 1;
}

/* overheadBench: what one block of purlin_epilogue costs besides its row's
 * data: an empty kernel with a small and with Launch's parameters, the
 * kernel with no step, with one row of 8 elements, with one of kHidden, and
 * the plain kernel on that row. */
void overheadBench(cudaStream_t s, Launch L, void* steps, void* workers, void* fill, void* status) {
  const EpilogueMem m(1);
  m.use(L);
  printf("stepbench: overhead empty kernel %6.2f us, with Launch's parameters %6.2f us, plain kernel on a row of %u %6.2f us\n",
         usPerLaunch(s, [&] { emptyKernel<<<1, kThreads, 0, s>>>((int*)status); }),
         usPerLaunch(s, [&] { emptyLaunch<<<1, kThreads, 0, s>>>(L); }), kHidden,
         usPerLaunch(s, [&] { rmsnormFloor<<<1, kThreads, 0, s>>>((__nv_bfloat16*)m.out, (__nv_bfloat16*)m.res, (const __nv_bfloat16*)m.w, kEps); }));
  oneWorker(workers, fill, 0, 0);
  printf("stepbench: overhead purlin_epilogue with no step %6.2f us", usPerLaunch(s, [&] { purlin_epilogue<<<1, kThreads, 0, s>>>(L); }));
  oneWorker(workers, fill, 0, 1);
  for (uint32_t hidden : {8u, 512u, kHidden}) {
    for (uint32_t g : {32u, 512u}) {
      const Step e = epilogueStep(1, g, hidden);
      MUST(cudaMemcpy(steps, &e, sizeof e, cudaMemcpyHostToDevice));
      printf(", a row of %u (group %u) %6.2f us", hidden, g, usPerLaunch(s, [&] { purlin_epilogue<<<1, kThreads, 0, s>>>(L); }));
    }
  }
  printf("\n");
  if (*(volatile uint64_t*)status != 0) printf("FAIL overhead: status %#llx\n", (unsigned long long)*(volatile uint64_t*)status);
}

/* epilogueProfile launches purlin_epilogue three times, eagerly, on rows
 * of the output on the given blocks and group: one shape for a profiler. */
void epilogueProfile(cudaStream_t s, Launch L, void* steps, void* workers, void* fill, uint32_t rows, uint32_t blocks,
                     uint32_t g) {
  const EpilogueMem m(rows);
  m.use(L);
  oneWorker(workers, fill, 0, 1);
  const Step e = epilogueStep(rows, g);
  MUST(cudaMemcpy(steps, &e, sizeof e, cudaMemcpyHostToDevice));
  for (int k = 0; k < 3; k++) purlin_epilogue<<<dim3(1, blocks), kThreads, 0, s>>>(L);
  MUST(cudaStreamSynchronize(s));
}

constexpr int kHops = 8;

/* jumpKernel: thread 0 takes kHops forward branches in a row, each over GAP
 * dependent fused multiply-adds and a store that never run (every flag is
 * 0, read before the clock starts, so the compiler cannot join the
 * branches), twice over the same code; cycles[pass] gets each pass's time. */
template <int GAP>
__global__ void jumpKernel(const int* flags, float* sink, long long* cycles) {
  if (threadIdx.x != 0) return;
  int f[kHops];
#pragma unroll
  for (int h = 0; h < kHops; h++) f[h] = ((const volatile int*)flags)[h];
  float acc = (float)f[0];
#pragma unroll 1
  for (int pass = 0; pass < 2; pass++) {
    const long long t0 = clock64();
#pragma unroll
    for (int h = 0; h < kHops; h++) {
      if (f[h] != 0) {
        float x = acc;
#pragma unroll
        for (int i = 0; i < GAP; i++) x = __fmaf_rn(x, 1.0001f, (float)i);
        sink[h] = x;
      }
      acc = __fadd_rn(acc, 1.0f);
    }
    cycles[pass] = clock64() - t0;
  }
  sink[kHops] = acc;
}

/* jumpRun prints jumpKernel<GAP>'s cycles a branch in three launches in a
 * row; flags (kHops zeros), sink and the host-mapped cycles are its buffers. */
template <int GAP>
void jumpRun(cudaStream_t s, const int* flags, float* sink, long long* cycles) {
  printf("stepbench: jumps    %d branches over %4d instructions each, cycles a branch (first pass, second):", kHops, GAP);
  for (int k = 0; k < 3; k++) {
    jumpKernel<GAP><<<1, 32, 0, s>>>(flags, sink, cycles);
    MUST(cudaStreamSynchronize(s));
    printf(" launch %d %5.1f, %5.1f;", k + 1, cycles[0] / (double)kHops, cycles[1] / (double)kHops);
  }
  printf("\n");
}

/* jumpBench runs jumpRun for branches over 0 to 1024 instructions. */
void jumpBench(cudaStream_t s) {
  int* flags;
  float* sink;
  long long* cycles;
  MUST(cudaMalloc(&flags, kHops * sizeof(int)));
  MUST(cudaMemset(flags, 0, kHops * sizeof(int)));
  MUST(cudaMalloc(&sink, (kHops + 1) * sizeof(float)));
  MUST(cudaMallocHost(&cycles, 2 * sizeof(long long)));
  jumpRun<0>(s, flags, sink, cycles);
  jumpRun<8>(s, flags, sink, cycles);
  jumpRun<64>(s, flags, sink, cycles);
  jumpRun<256>(s, flags, sink, cycles);
  jumpRun<1024>(s, flags, sink, cycles);
  MUST(cudaFree(flags));
  MUST(cudaFree(sink));
  MUST(cudaFreeHost(cycles));
}

}  // namespace

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : nullptr;
  MUST(cudaSetDevice(0));
  int clockKHz = 0;
  MUST(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, 0));
  void *send, *recv, *packets, *flags, *steps, *workers, *fill, *epochs, *abortWord, *status;
  MUST(cudaMalloc(&send, 4096));
  MUST(cudaMalloc(&recv, 4096));
  MUST(cudaMalloc(&packets, 1 << 16));
  MUST(cudaMemset(send, 1, 4096));
  MUST(cudaMemset(packets, 0, 1 << 16));
  MUST(cudaMalloc(&flags, 1 << 16));
  MUST(cudaMemset(flags, 0, 1 << 16));
  MUST(cudaMalloc(&steps, kImageHeader + 64 * sizeof(Step)));  // an image's header, then its steps
  MUST(cudaMemset(steps, 0, kImageHeader));
  steps = (char*)steps + kImageHeader;
  MUST(cudaMalloc(&workers, sizeof(Worker)));
  MUST(cudaMalloc(&fill, 16));  // a worker's uint16, then its epilogue steps (epilogueBench)
  MUST(cudaMalloc(&epochs, (kNumEpochs + 1) * 8));
  MUST(cudaMemset(epochs, 0, (kNumEpochs + 1) * 8));
  MUST(cudaHostAlloc(&abortWord, 64, cudaHostAllocMapped));
  MUST(cudaHostAlloc(&status, 64, cudaHostAllocMapped));
  memset(abortWord, 0, 64);
  memset(status, 0, 64);
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  Launch L;
  memset(&L, 0, sizeof L);
  L.steps = (uint64_t)steps, L.workers = (uint64_t)workers, L.fill = (uint64_t)fill, L.epochs = (uint64_t)epochs;
  L.abortFlag = (uint64_t)abortWord, L.status = (uint64_t)status, L.timeoutNs = 1000000000ull;
  L.dtype = kFloat32, L.op = kSum, L.nranks = 1, L.rank = 0;
  L.send[0] = (uint64_t)send, L.recv[0] = (uint64_t)recv, L.peers.packet[0] = (uint64_t)packets;
  L.peers.flags[0] = (uint64_t)flags;

  struct Plan {
    const char* name;
    std::vector<Step> steps;
  } plans[4];
  plans[0].name = "one copy";
  plans[0].steps.push_back(copyStep(ref(kSpaceRecv, 0), ref(kSpaceSend, 0), 16));
  plans[1].name = "copies";
  for (int k = 0; k < kCopies; k++)
    plans[1].steps.push_back(copyStep(ref(kSpaceRecv, 16 * k), ref(kSpaceSend, 16 * k), 16));
  plans[2].name = "packets";
  for (int k = 0; k < kPairs; k++) {
    const uint64_t half = 1 << 15;  // the packet window's other half
    plans[2].steps.push_back(copyStep(ref(kSpacePacket, 64 * k, half), ref(kSpaceSend, 16 * k), 16));
    Step r = copyStep(ref(kSpaceRecv, 16 * k), ref(kSpaceSend, 16 * k), 16);
    r.verb = kReduce, r.nsrc = 2, r.src[1] = ref(kSpacePacket, 64 * k, half);
    plans[2].steps.push_back(r);
  }
  plans[3].name = "signals";
  for (int k = 0; k < kPairs; k++) {
    Step n = copyStep(ref(kSpaceRecv, 0), ref(kSpaceSend, 0), 0);
    n.verb = kNotify, n.slot = (uint32_t)k, n.peer = 0, n.nsrc = 1;  // a run of one (atom/cuda signalRuns)
    plans[3].steps.push_back(n);
    n.verb = kWait;
    plans[3].steps.push_back(n);
  }

  printf("stepbench: GPU 0 at %d MHz; times per launch (graph of %d, %d replays); cycles per step (median)\n",
         clockKHz / 1000, kLaunches, kReps);
  for (const Plan& p : plans) {
    if (only && strcmp(only, p.name) != 0) continue;
    const uint32_t n = (uint32_t)p.steps.size();
    MUST(cudaMemcpy(steps, p.steps.data(), n * sizeof(Step), cudaMemcpyHostToDevice));
    Worker w = {0, 0, 0, n};
    uint16_t one = 1;
    MUST(cudaMemcpy(workers, &w, sizeof w, cudaMemcpyHostToDevice));
    MUST(cudaMemcpy(fill, &one, 2, cudaMemcpyHostToDevice));
    const float us = usPerLaunch(s, [&] { purlin_run<<<1, kThreads, 0, s>>>(L); });
    if (*(volatile uint64_t*)status != 0) {
      printf("FAIL %s: the kernel reported status %#llx\n", p.name, (unsigned long long)*(volatile uint64_t*)status);
      return 1;
    }
    long long t[64][3];
    purlin_run<<<1, kThreads, 0, s>>>(L);
    MUST(cudaStreamSynchronize(s));
    MUST(cudaMemcpyFromSymbol(t, traceClock, sizeof t));
    static const char* verbs[] = {"Copy", "Reduce", "Notify", "Wait"};
    for (int verb = 0; verb < 4; verb++) {
      std::vector<long long> fence, body, next;
      for (uint32_t i = 0; i < n && i < 64; i++) {
        if (p.steps[i].verb != verb) continue;
        fence.push_back(t[i][1] - t[i][0]);
        body.push_back(t[i][2] - t[i][1]);
        if (i + 1 < n && i + 1 < 64) next.push_back(t[i + 1][0] - t[i][2]);
      }
      if (body.empty()) continue;
      printf("stepbench: %-8s %2u steps, %7.3f us a launch; a %s step: %lld cycles to its barrier, %lld in it, "
             "%lld to the next\n",
             p.name, n, us, verbs[verb], median(fence), median(body), median(next));
    }
  }
  if (!only || strcmp(only, "overhead") == 0) overheadBench(s, L, steps, workers, fill, status);
  if (!only || strcmp(only, "epilogue") == 0) epilogueBench(s, L, steps, workers, fill, status);
  if (!only || strcmp(only, "jumps") == 0) jumpBench(s);
  if (only && strcmp(only, "profile") == 0 && argc == 5) {  // profile ROWS BLOCKS GROUP: 3 plain launches
    const uint32_t rows = atoi(argv[2]), blocks = atoi(argv[3]), g = atoi(argv[4]);
    epilogueProfile(s, L, steps, workers, fill, rows, blocks, g);
  }
  for (int n : {1, kCopies}) {
    if (only) break;
    const float us = usPerLaunch(s, [&] { floorKernel<<<1, kThreads, 0, s>>>((const uint4*)send, (uint4*)recv, n); });
    printf("stepbench: floor    %2d copies of 16 B with a barrier each in a plain kernel: %7.3f us a launch\n", n, us);
    const float viaCopy = usPerLaunch(s, [&] { floorCopyPlain<<<1, kThreads, 0, s>>>((const uint4*)send, (uint4*)recv, n); });
    printf("stepbench: floor    %2d copies of 16 B with a barrier each through copyPlain:    %7.3f us a launch\n", n, viaCopy);
  }
  return 0;
}
