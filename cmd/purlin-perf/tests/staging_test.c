/*
 * staging_test.c (CUDA, run by tests/gpu/run.sh): purlin-perf's uploads and
 * downloads keep the promise of backend.h: each comes after the work already
 * queued on the rank's stream and has ended when it returns.
 *
 *   upload:   backend_upload of a pageable buffer, then at once a copy of its
 *             last 64 KiB on the rank's stream: the copy must see the uploaded
 *             bytes (a collective issued right after an upload reads them so).
 *   download: a long memset, then a 64 KiB copy into the buffer, both queued on
 *             the rank's stream, then at once backend_download of that 64 KiB:
 *             it must see the copied bytes.
 *
 * With cudaMemcpy on the legacy stream (which purlin-perf's non-blocking
 * streams do not wait for) both fail: an upload from pageable memory returns
 * before its last DMA has landed, and a download does not wait for the stream.
 * Exit status 0 when every round saw the right bytes.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "../perf.h"

#define PROBE (64u << 10)
#define ROUNDS 40
#define BUSY_BYTES ((size_t)512 << 20)

static int check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 0;
  fprintf(stderr, "staging: %s: %s\n", what, cudaGetErrorString(e));
  exit(2);
}

/* first_wrong returns the index of the first byte of p[0, n) other than want, or -1. */
static long first_wrong(const unsigned char* p, size_t n, unsigned char want) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != want) return (long)i;
  return -1;
}

int main(void) {
  int ndev = 0;
  check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (ndev < 1) {
    fprintf(stderr, "staging: no CUDA device\n");
    return 2;
  }
  if (ndev > PERF_MAX_RANKS) ndev = PERF_MAX_RANKS;
  if (backend_init(0, ndev, ndev)) return 2;
  static const size_t sizes[] = {1u << 20, 8u << 20, 64u << 20};
  size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
  unsigned char* host = malloc(max); /* pageable, as purlin-perf's staging buffer */
  unsigned char* probe = malloc(PROBE);
  if (!host || !probe) return 2;
  int stale_up = 0, stale_down = 0, rounds = 0;
  for (int r = 0; r < ndev; r++) {
    unsigned char* dev = backend_alloc(r, max);
    unsigned char* tail = backend_alloc(r, PROBE);
    unsigned char* src = backend_alloc(r, PROBE);
    unsigned char* busy = backend_alloc(r, BUSY_BYTES);
    if (!dev || !tail || !src || !busy) return 2;
    cudaStream_t s = backend_stream(r);
    for (int round = 0; round < ROUNDS; round++) {
      for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++, rounds++) {
        size_t n = sizes[k];
        unsigned char up = (unsigned char)(1 + (round * 3 + k) % 250), down = (unsigned char)(up ^ 0x80);
        /* upload: the device buffer starts as zeros, everything idle */
        check(cudaMemset(dev, 0, n), "cudaMemset");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        memset(host, up, n);
        if (backend_upload(r, dev, host, n)) return 2;
        check(cudaMemcpyAsync(tail, dev + n - PROBE, PROBE, cudaMemcpyDeviceToDevice, s), "copy tail");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        check(cudaMemcpy(probe, tail, PROBE, cudaMemcpyDeviceToHost), "read tail");
        long i = first_wrong(probe, PROBE, up);
        if (i >= 0 && stale_up++ < 5)
          fprintf(stderr, "staging: rank %d, %zu B upload: byte %zu is %#x, want %#x: the upload had not landed\n", r,
                  n, n - PROBE + (size_t)i, probe[i], up);
        /* download: queued work ahead of it on the stream */
        check(cudaMemset(src, down, PROBE), "cudaMemset");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        check(cudaMemsetAsync(busy, round, BUSY_BYTES, s), "busy memset");
        check(cudaMemcpyAsync(dev, src, PROBE, cudaMemcpyDeviceToDevice, s), "copy head");
        if (backend_download(r, probe, dev, PROBE)) return 2;
        i = first_wrong(probe, PROBE, down);
        if (i >= 0 && stale_down++ < 5)
          fprintf(stderr, "staging: rank %d: downloaded byte %ld is %#x, want %#x: the download ran ahead of the stream\n",
                  r, i, probe[i], down);
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      }
    }
    backend_free(r, busy);
    backend_free(r, src);
    backend_free(r, tail);
    backend_free(r, dev);
  }
  backend_fini();
  free(host);
  free(probe);
  printf("staging: %d rounds on %d GPUs, %d stale uploads, %d stale downloads: %s\n", rounds, ndev, stale_up,
         stale_down, stale_up || stale_down ? "FAIL" : "ok");
  return stale_up || stale_down ? 1 : 0;
}
