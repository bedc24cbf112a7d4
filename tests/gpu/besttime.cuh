// besttime.cuh: what the ceiling benchmarks (cebench.cu, smbench.cu) share:
// CHECK, and the timing of work enqueued on several GPUs at once.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// Lane is one GPU's share of a timed run: its device and the stream its
// work is timed on.
struct Lane {
  int dev;
  cudaStream_t stream;
};

// bestGBs returns the best of 5 timed runs (a warm-up first) of `bytes`
// moved on every lane at once, in GB/s per lane: enqueue(j) enqueues lane
// j's work of one run on its stream (its device current), and a run lasts
// until the slowest lane's work ends.
template <typename Enqueue>
double bestGBs(const std::vector<Lane>& lanes, double bytes, Enqueue enqueue) {
  double best = 0;
  for (int t = 0; t < 6; t++) {
    std::vector<cudaEvent_t> a(lanes.size()), b(lanes.size());
    for (const Lane& l : lanes) {
      CHECK(cudaSetDevice(l.dev));
      CHECK(cudaDeviceSynchronize());
    }
    for (size_t j = 0; j < lanes.size(); j++) {
      CHECK(cudaSetDevice(lanes[j].dev));
      CHECK(cudaEventCreate(&a[j]));
      CHECK(cudaEventCreate(&b[j]));
      CHECK(cudaEventRecord(a[j], lanes[j].stream));
      enqueue(j);
      CHECK(cudaEventRecord(b[j], lanes[j].stream));
    }
    float worst = 0;
    for (size_t j = 0; j < lanes.size(); j++) {
      CHECK(cudaSetDevice(lanes[j].dev));
      CHECK(cudaEventSynchronize(b[j]));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a[j], b[j]));
      worst = ms > worst ? ms : worst;
      CHECK(cudaEventDestroy(a[j]));
      CHECK(cudaEventDestroy(b[j]));
    }
    const double gbs = bytes / (worst * 1e-3) / 1e9;
    if (t > 0 && gbs > best) best = gbs;  // the first is a warm-up
  }
  return best;
}
