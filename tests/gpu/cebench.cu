// cebench: the copy engine's ceilings, for a copy-engine datapath (issue 11).
//
// Not part of the suite: a measuring program for whoever designs the copy
// engine's Plans. It times cudaMemcpyAsync from GPU 0 into GPU `dst`'s memory
// (its own with one GPU, GPU 1 with two: NVLink, peer access on), one large
// copy and then the same bytes cut in chunks spread round robin over S
// streams, each chunk followed on its stream by a one-thread kernel that
// raises a flag in the destination's memory, as a Notify would. The chunked
// rows are what a pipelined copy through staging can reach; their gap to the
// one large copy is what a chunk's copy launch and signal cost. With two GPUs
// it also times both directions at once. Each row is the best of 5, in a
// CUDA graph (the sequence captured once, replayed) and eagerly. With two
// GPUs, the last rows copy into memory of a pool on the other GPU that
// grants this one access (virtual memory mapped for it, as Purlin's
// staging is), rather than cudaMalloc memory reached through peer access.
//
//	nvcc -std=c++17 -O3 -arch=sm_90 -o cebench tests/gpu/cebench.cu && ./cebench [MiB]
#include "besttime.cuh"

__global__ void raise(unsigned long long* flag, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(flag), "l"(v) : "memory");
}

struct Side {
  int dev;
  char *src, *dst;          // src on dev, dst on the other side's device
  unsigned long long* flag; // in dst's device
  std::vector<cudaStream_t> streams;
  cudaEvent_t fork, join;
};

// issue enqueues one transfer of `bytes` in chunks of `chunk` (0: one copy,
// no signal) over the side's streams, forked from and joined into streams[0].
static void issue(Side& s, size_t bytes, size_t chunk, int nstreams, unsigned long long round) {
  CHECK(cudaSetDevice(s.dev));
  cudaStream_t main = s.streams[0];
  if (chunk == 0) {
    CHECK(cudaMemcpyAsync(s.dst, s.src, bytes, cudaMemcpyDefault, main));
    return;
  }
  CHECK(cudaEventRecord(s.fork, main));
  for (int k = 1; k < nstreams; k++) CHECK(cudaStreamWaitEvent(s.streams[k], s.fork, 0));
  size_t i = 0;
  for (size_t off = 0; off < bytes; off += chunk, i++) {
    cudaStream_t st = s.streams[i % nstreams];
    size_t n = bytes - off < chunk ? bytes - off : chunk;
    CHECK(cudaMemcpyAsync(s.dst + off, s.src + off, n, cudaMemcpyDefault, st));
    raise<<<1, 1, 0, st>>>(s.flag + i % nstreams, round * 4096 + i);
  }
  for (int k = 1; k < nstreams; k++) {
    CHECK(cudaEventRecord(s.join, s.streams[k]));
    CHECK(cudaStreamWaitEvent(main, s.join, 0));
  }
}

// timeit returns the best GB/s (per direction) of 5 runs of `reps` transfers
// on every side at once, eagerly or as one CUDA graph per side.
static double timeit(std::vector<Side>& sides, size_t bytes, size_t chunk, int nstreams, bool graph) {
  const int reps = 4;
  std::vector<cudaGraphExec_t> execs(sides.size());
  if (graph) {
    for (size_t j = 0; j < sides.size(); j++) {
      Side& s = sides[j];
      CHECK(cudaSetDevice(s.dev));
      cudaGraph_t g;
      CHECK(cudaStreamBeginCapture(s.streams[0], cudaStreamCaptureModeThreadLocal));
      for (int r = 0; r < reps; r++) issue(s, bytes, chunk, nstreams, r);
      CHECK(cudaStreamEndCapture(s.streams[0], &g));
      CHECK(cudaGraphInstantiate(&execs[j], g, 0));
      CHECK(cudaGraphDestroy(g));
    }
  }
  std::vector<Lane> lanes;
  for (const Side& s : sides) lanes.push_back(Lane{s.dev, s.streams[0]});
  const double best = bestGBs(lanes, (double)bytes * reps, [&](size_t j) {
    if (graph) CHECK(cudaGraphLaunch(execs[j], sides[j].streams[0]));
    else
      for (int r = 0; r < reps; r++) issue(sides[j], bytes, chunk, nstreams, r);
  });
  if (graph)
    for (size_t j = 0; j < sides.size(); j++) CHECK(cudaGraphExecDestroy(execs[j]));
  return best;
}

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 1024;
  const size_t bytes = mib << 20;
  int ngpus;
  CHECK(cudaGetDeviceCount(&ngpus));
  const int two = ngpus >= 2;
  std::vector<Side> sides(two ? 2 : 1);
  for (size_t j = 0; j < sides.size(); j++) {
    Side& s = sides[j];
    s.dev = (int)j;
    const int other = two ? 1 - (int)j : (int)j;
    CHECK(cudaSetDevice(s.dev));
    if (two) CHECK(cudaDeviceEnablePeerAccess(other, 0));
    CHECK(cudaMalloc(&s.src, bytes));
    CHECK(cudaMemset(s.src, 1, bytes));
    s.streams.resize(4);
    for (auto& st : s.streams) CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
  }
  for (size_t j = 0; j < sides.size(); j++) {
    Side& s = sides[j];
    const int other = two ? 1 - (int)j : (int)j;
    CHECK(cudaSetDevice(other));
    CHECK(cudaMalloc(&s.dst, bytes));
    CHECK(cudaMalloc(&s.flag, 4096));
  }
  printf("# cebench: %d GPU(s), %zu MiB per direction per transfer, GB/s per direction, best of 5\n", ngpus, mib);
  printf("# %-22s %8s %8s %10s %10s\n", "copy", "chunk", "streams", "graph", "eager");
  const size_t chunks[] = {0, 4 << 20, 16 << 20, 32 << 20, 64 << 20};
  const int streams[] = {1, 2, 4};
  for (int dirs = 1; dirs <= (two ? 2 : 1); dirs++) {
    std::vector<Side> use(sides.begin(), sides.begin() + dirs);
    const char* what = !two ? "local (one GPU)" : dirs == 1 ? "peer, one direction" : "peer, both directions";
    for (size_t c : chunks) {
      if (c >= bytes) continue;
      for (int n : streams) {
        if (c == 0 && n > 1) continue;
        printf("  %-22s %8zu %8d %10.1f %10.1f\n", what, c >> 20, n, timeit(use, bytes, c, n, true),
               timeit(use, bytes, c, n, false));
        fflush(stdout);
      }
    }
  }
  if (two) {
    // The destination as Purlin's staging is: mapped memory of the other
    // GPU with access granted to this one (a pool's, here), not memory
    // reached through the context's peer access.
    for (size_t j = 0; j < sides.size(); j++) {
      Side& s = sides[j];
      const int other = 1 - (int)j;
      CHECK(cudaSetDevice(other));
      CHECK(cudaFree(s.dst));
      cudaMemPoolProps props = {};
      props.allocType = cudaMemAllocationTypePinned;
      props.location = {cudaMemLocationTypeDevice, other};
      cudaMemPool_t pool;
      CHECK(cudaMemPoolCreate(&pool, &props));
      cudaMemAccessDesc access = {{cudaMemLocationTypeDevice, s.dev}, cudaMemAccessFlagsProtReadWrite};
      CHECK(cudaMemPoolSetAccess(pool, &access, 1));
      CHECK(cudaMallocFromPoolAsync((void**)&s.dst, bytes, pool, 0));
      CHECK(cudaStreamSynchronize(0));
    }
    for (int dirs = 1; dirs <= 2; dirs++) {
      std::vector<Side> use(sides.begin(), sides.begin() + dirs);
      const char* what = dirs == 1 ? "pool, one direction" : "pool, both directions";
      for (size_t c : {(size_t)0, (size_t)16 << 20}) {
        if (c >= bytes) continue;
        for (int n : {1, 2}) {
          if (c == 0 && n > 1) continue;
          printf("  %-22s %8zu %8d %10.1f %10.1f\n", what, c >> 20, n, timeit(use, bytes, c, n, true),
                 timeit(use, bytes, c, n, false));
          fflush(stdout);
        }
      }
    }
  }
  return 0;
}
