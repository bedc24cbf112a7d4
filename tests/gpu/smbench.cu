// smbench: the ceilings of thread blocks moving bytes over NVLink, against
// which every bandwidth figure is a fraction (issue 11).
//
// A plain copy kernel (16-byte loads and stores, four in flight per thread,
// 512 threads a block, a grid-stride loop) copies `MiB` from one GPU's
// memory into another's, at 4 to 132 blocks: a push (the kernel runs on the
// GPU that holds the source and stores across NVLink) and a pull (it runs
// on the GPU that holds the destination and loads across NVLink), one
// direction and both at once (GPU 0 to 1 and 1 to 0 together, as every
// collective keeps both busy). Each figure is the best of 5 timed runs of 4
// copies (a warm-up first), in GB/s per direction. With one GPU it measures
// a local copy instead (both sides on GPU 0): the HBM ceiling of a copy
// out of staging.
//
//	nvcc -std=c++17 -O3 -arch=sm_90 -o smbench tests/gpu/smbench.cu && ./smbench [MiB]
//
// Output: one line per (kind, directions, blocks): "push both 64 361.2".
#include "besttime.cuh"

constexpr int kThreads = 512, kUnroll = 4;

// copy moves n 16-byte units from src to dst, kUnroll independent loads in
// flight per thread before their stores.
__global__ void __launch_bounds__(kThreads) copy(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  const size_t stride = (size_t)gridDim.x * kThreads;
  size_t i = (size_t)blockIdx.x * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// A direction: a copy from src into dst, its kernel run on GPU runner
// (the source's: a push; the destination's: a pull) on stream.
struct Direction {
  int runner;
  uint4 *src, *dst;
  cudaStream_t stream;
};

// best returns the best GB/s per direction of 5 timed runs of 4 copies on
// every direction at once.
static double best(std::vector<Direction>& dirs, size_t bytes, int blocks) {
  const int reps = 4;
  std::vector<Lane> lanes;
  for (const Direction& d : dirs) lanes.push_back(Lane{d.runner, d.stream});
  return bestGBs(lanes, (double)bytes * reps, [&](size_t j) {
    for (int r = 0; r < reps; r++) copy<<<blocks, kThreads, 0, dirs[j].stream>>>(dirs[j].dst, dirs[j].src, bytes / sizeof(uint4));
    CHECK(cudaGetLastError());
  });
}

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? strtoul(argv[1], 0, 10) : 1024) << 20;
  int ngpus;
  CHECK(cudaGetDeviceCount(&ngpus));
  const bool two = ngpus >= 2;
  if (two)
    for (int g = 0; g < 2; g++) {
      CHECK(cudaSetDevice(g));
      CHECK(cudaDeviceEnablePeerAccess(1 - g, 0));
    }
  // Direction j copies from GPU j to GPU 1-j (with one GPU, within GPU 0),
  // each with its own source and destination buffers.
  uint4 *src[2], *dst[2];
  for (int j = 0; j < 2; j++) {
    const int from = two ? j : 0, to = two ? 1 - j : 0;
    CHECK(cudaSetDevice(from));
    CHECK(cudaMalloc(&src[j], bytes));
    CHECK(cudaMemset(src[j], j + 1, bytes));
    CHECK(cudaSetDevice(to));
    CHECK(cudaMalloc(&dst[j], bytes));
  }
  // A stream on every GPU for every direction whose kernel it may run.
  cudaStream_t streams[2][2];
  for (int g = 0; g < 2; g++)
    for (int j = 0; j < 2; j++) {
      CHECK(cudaSetDevice(two ? g : 0));
      CHECK(cudaStreamCreateWithFlags(&streams[g][j], cudaStreamNonBlocking));
    }
  printf("# smbench: %zu MiB, %d GPUs (%s), %d threads a block, GB/s per direction, best of 5\n", bytes >> 20, ngpus,
         two ? "GPU 0 <-> GPU 1 over NVLink" : "one GPU: a local copy", kThreads);
  const int blockCounts[] = {4, 8, 16, 32, 64, 132};
  for (int pull = 0; pull < 2; pull++)
    for (int both = 0; both < 2; both++)
      for (int blocks : blockCounts) {
        std::vector<Direction> dirs;
        for (int j = 0; j <= both; j++) {
          const int from = two ? j : 0, to = two ? 1 - j : 0, runner = pull ? to : from;
          dirs.push_back(Direction{runner, src[j], dst[j], streams[runner][j]});
        }
        printf("%s %s %d %.1f\n", pull ? "pull" : "push", both ? "both" : "one", blocks, best(dirs, bytes, blocks));
        fflush(stdout);
      }
  return 0;
}
