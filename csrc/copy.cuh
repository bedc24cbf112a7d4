/**
 * @file copy.cuh
 * @brief Block-wide data movement for Copy and Reduce steps over plain memory
 * (caller buffers, staging; local or an NVLink peer's), and over packets.
 *
 * Plain memory moves in 16-byte vectors, sixteen in flight per thread (a
 * reduction: eight per source), when every address is 16-byte aligned, with
 * a scalar tail; otherwise in the widest unit all addresses share. Packets
 * move 8 payload bytes per thread per packet (packets.cuh).
 */
#pragma once
#include <stdint.h>

#include "packets.cuh"
#include "reduce.cuh"

namespace purlin {

constexpr int kThreads = 512;  // threads per block (one worker)
// 16-byte vectors in flight per thread and source: many, since a block's
// bandwidth over NVLink is what it has in flight (its reads of a peer take
// microseconds); a reduction keeps fewer, its accumulators need registers.
constexpr int kCopyUnroll = 16;
constexpr int kUnroll = 8;

template <typename W>
__device__ __forceinline__ void copyUnits(uint64_t dst, uint64_t src, uint64_t n) {
  const W* s = (const W*)src;
  W* d = (W*)dst;
  uint64_t i = threadIdx.x;
  for (; i + (kCopyUnroll - 1) * kThreads < n; i += kCopyUnroll * kThreads) {
    W v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; u++) v[u] = s[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; u++) d[i + u * kThreads] = v[u];
  }
  for (; i < n; i += kThreads) d[i] = s[i];
}

/** copyPlain: Copy bytes from src to dst with all threads of the block. */
__device__ __forceinline__ void copyPlain(uint64_t dst, uint64_t src, uint64_t bytes) {
  uint64_t align = dst | src;
  uint64_t head = 0;
  if ((align & 15) == 0) {
    copyUnits<uint4>(dst, src, bytes / 16);
    head = bytes & ~15ull;
  } else if ((align & 7) == 0) {
    copyUnits<uint64_t>(dst, src, bytes / 8);
    head = bytes & ~7ull;
  } else if ((align & 3) == 0) {
    copyUnits<uint32_t>(dst, src, bytes / 4);
    head = bytes & ~3ull;
  }
  for (uint64_t i = head + threadIdx.x; i < bytes; i += kThreads)
    ((uint8_t*)dst)[i] = ((const uint8_t*)src)[i];
}

/** rowUnit is unit i of a step's Ref that lies in rows of `row` units,
 * `pitch` bytes apart, its first unit `col` into its row (pitch 0: contiguous). */
template <typename W>
__device__ __forceinline__ W* rowUnit(uint64_t base, uint64_t pitch, uint64_t i, uint64_t row, uint64_t col) {
  if (pitch == 0) return (W*)base + i;
  const uint64_t c = col + i, r = c / row;
  return (W*)(base + r * pitch) + ((int64_t)(c - r * row) - (int64_t)col);
}

/** copyRowUnits copies n units W of a step whose Refs may be strided (rows
 * of `row` units, `pitch` bytes apart, the step's first unit `col` units
 * into its row; pitch 0: contiguous), each thread finding every unit's
 * address on its own, so that the loads of many short rows are in flight at
 * once (kCopyUnroll a thread). */
template <typename W>
__device__ __forceinline__ void copyRowUnits(uint64_t dst, uint64_t dpitch, uint64_t src, uint64_t spitch, uint64_t n,
                                             uint64_t row, uint64_t col) {
  auto at = [&](uint64_t base, uint64_t pitch, uint64_t i) { return rowUnit<W>(base, pitch, i, row, col); };
  uint64_t i = threadIdx.x;
  for (; i + (kCopyUnroll - 1) * kThreads < n; i += kCopyUnroll * kThreads) {
    W v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; u++) v[u] = *at(src, spitch, i + u * kThreads);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; u++) *at(dst, dpitch, i + u * kThreads) = v[u];
  }
  for (; i < n; i += kThreads) *at(dst, dpitch, i) = *at(src, spitch, i);
}

/** copyRows copies bytes between two Refs of which one or both are strided
 * (rows of `row` bytes, the first byte `col` into its row; see snac's
 * Step.At), in the widest unit that every address, pitch, row and col
 * share. */
__device__ __noinline__ void copyRows(uint64_t dst, uint64_t dpitch, uint64_t src, uint64_t spitch, uint64_t bytes,
                                      uint64_t row, uint64_t col) {
  const uint64_t align = dst | src | dpitch | spitch | row | col | bytes;
  if ((align & 15) == 0) copyRowUnits<uint4>(dst, dpitch, src, spitch, bytes / 16, row / 16, col / 16);
  else if ((align & 7) == 0) copyRowUnits<uint64_t>(dst, dpitch, src, spitch, bytes / 8, row / 8, col / 8);
  else if ((align & 3) == 0) copyRowUnits<uint32_t>(dst, dpitch, src, spitch, bytes / 4, row / 4, col / 4);
  else copyRowUnits<uint8_t>(dst, dpitch, src, spitch, bytes, row, col);
}

/** reduceRowUnits reduces n sources into dst unit by unit (elements, or 16
 * bytes where every address, pitch, row and col allows), any Ref strided:
 * one load per source in flight per thread, but every thread on its own
 * units, so short rows do not serialise. */
template <typename R, typename W>
__device__ __forceinline__ void reduceRowUnits(const R& r, uint64_t dst, uint64_t dpitch, const uint64_t* src,
                                               const uint64_t* spitch, int n, uint64_t units, uint64_t row,
                                               uint64_t col) {
  for (uint64_t i = threadIdx.x; i < units; i += kThreads)
    *rowUnit<W>(dst, dpitch, i, row, col) =
        reduceWords<R, W>(r, n, [&](int j) { return *rowUnit<const W>(src[j], spitch[j], i, row, col); });
}

/** reduceRows: reducePlain for a step with strided Refs (Step.row, .col and
 * each Ref's pitch). */
template <typename R>
__device__ __forceinline__ void reduceRows(const R& r, const Step& s, uint64_t dst, const uint64_t* src, int n) {
  using T = typename R::T;
  uint64_t spitch[kMaxSrc], align = dst | s.dst.pitch | s.row | s.col | s.bytes;
  for (int j = 0; j < kMaxSrc; j++) {
    spitch[j] = j < n ? s.src[j].pitch : 0;
    if (j < n) align |= src[j] | spitch[j];
  }
  if ((align & 15) == 0)
    reduceRowUnits<R, uint4>(r, dst, s.dst.pitch, src, spitch, n, s.bytes / 16, s.row / 16, s.col / 16);
  else
    reduceRowUnits<R, T>(r, dst, s.dst.pitch, src, spitch, n, s.bytes / sizeof(T), s.row / sizeof(T), s.col / sizeof(T));
}

/** reduceVectors reduces U 16-byte vectors, kThreads apart, from n sources
 * into out[0], out[kThreads], ...: each source's U loads are issued before
 * any is combined, so U loads per thread are in flight instead of one. The
 * loop over sources stays rolled, as in reduceWords. */
template <typename R, int U>
__device__ __forceinline__ void reduceVectors(const R& r, int n, uint4* out, const uint64_t* src,
                                              uint64_t i) {
  using T = typename R::T;
  using A = typename R::A;
  constexpr int K = 16 / sizeof(T);
  union V { uint4 w; T t[K]; };
  A acc[U][K];
  V in[U];
#pragma unroll
  for (int u = 0; u < U; u++) in[u].w = ((const uint4*)src[0])[i + u * kThreads];
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int k = 0; k < K; k++) acc[u][k] = r.first(in[u].t[k], 0);
#pragma unroll 1
  for (int j = 1; j < n; j++) {
#pragma unroll
    for (int u = 0; u < U; u++) in[u].w = ((const uint4*)src[j])[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int k = 0; k < K; k++) acc[u][k] = r.combine(acc[u][k], in[u].t[k], j);
  }
#pragma unroll
  for (int u = 0; u < U; u++) {
    V o;
#pragma unroll
    for (int k = 0; k < K; k++) o.t[k] = r.finish(acc[u][k]);
    out[u * kThreads] = o.w;
  }
}

/** reducePlain: Reduce n plain sources into dst, element by element. */
template <typename R>
__device__ __forceinline__ void reducePlain(const R& r, uint64_t dst, const uint64_t* src, int n,
                                            uint64_t bytes) {
  using T = typename R::T;
  uint64_t align = dst;
  for (int j = 0; j < n; j++) align |= src[j];
  uint64_t head = 0;
  if ((align & 15) == 0) {
    uint64_t nv = bytes / 16;
    // 1-byte types keep 16 accumulators per vector: two vectors fit in registers.
    constexpr int U = sizeof(T) == 1 ? 2 : kUnroll;
    uint64_t i = threadIdx.x;
    for (; i + (U - 1) * kThreads < nv; i += U * kThreads) reduceVectors<R, U>(r, n, (uint4*)dst + i, src, i);
    for (; i < nv; i += kThreads)
      ((uint4*)dst)[i] = reduceWords<R, uint4>(r, n, [&](int j) { return ((const uint4*)src[j])[i]; });
    head = nv * 16;
  }
  uint64_t elems = bytes / sizeof(T);
  for (uint64_t e = head / sizeof(T) + threadIdx.x; e < elems; e += kThreads)
    ((T*)dst)[e] = reduceWords<R, T>(r, n, [&](int j) { return ((const T*)src[j])[e]; });
}

/* ---------- packets: 8 payload bytes per thread ---------- */

/** loadBytes reads a packet's valid payload bytes from plain memory: one
 * load for an aligned payload of 8 or 4 bytes (a 4-byte element is the
 * whole payload of a small call), else each byte, all issued at once (the
 * loop is unrolled: no load waits for the one before). */
__device__ __forceinline__ uint64_t loadBytes(uint64_t addr, uint32_t valid) {
  if (valid == 8 && (addr & 7) == 0) return *(const uint64_t*)addr;
  if (valid == 4 && (addr & 3) == 0) return *(const uint32_t*)addr;
  uint64_t w = 0;
#pragma unroll
  for (uint32_t b = 0; b < 8; b++)
    if (b < valid) w |= (uint64_t)((const uint8_t*)addr)[b] << (8 * b);
  return w;
}
__device__ __forceinline__ void storeBytes(uint64_t addr, uint64_t w, uint32_t valid) {
  if (valid == 8 && (addr & 7) == 0) {
    *(uint64_t*)addr = w;
    return;
  }
  if (valid == 4 && (addr & 3) == 0) {
    *(uint32_t*)addr = (uint32_t)w;
    return;
  }
#pragma unroll
  for (uint32_t b = 0; b < 8; b++)
    if (b < valid) ((uint8_t*)addr)[b] = (uint8_t)(w >> (8 * b));
}

/** chunkAt is where payload chunk c (8 bytes) of step s lies in plain Ref r
 * resolved at base: 8c bytes on, or in r's rows when r is strided (snac
 * keeps a packet step's rows and first column whole packets, so no chunk
 * straddles two rows; a packet step is far below 4 GiB, so 32 bits count
 * its bytes). */
__device__ __forceinline__ uint64_t chunkAt(const Step& s, const Ref& r, uint64_t base, uint64_t c) {
  if (r.pitch == 0) return base + 8 * c;
  const uint32_t at = s.col + 8 * (uint32_t)c, row = at / s.row;
  return base + (uint64_t)row * r.pitch + (at - row * s.row) - s.col;
}

/** movePackets runs a Copy or Reduce step of which some Ref is in packet
 * space: each thread takes 8-byte chunks, reads each source word (waiting
 * for packet sources), combines them with combine(n, load) and writes a
 * plain word or a packet. With Rows, a strided plain Ref (a column block's
 * rows) is found chunk by chunk (chunkAt), so every thread's packets of
 * many short rows are in flight at once. Returns this thread's status. */
template <bool Rows, typename Combine>
__device__ __forceinline__ uint32_t movePackets(const Launch& L, const Step& s, uint64_t epoch,
                                                uint64_t dst, const uint64_t* src, int n,
                                                const Combine& combine) {
  const uint64_t flag = packetFlag(s.check, epoch, s.delta);
  const bool dstPacket = s.dst.space == kSpacePacket;
  const uint64_t chunks = (s.bytes + 7) / 8;
  for (uint64_t c = threadIdx.x; c < chunks; c += kThreads) {
    uint64_t left = s.bytes - 8 * c;
    uint32_t valid = left < 8 ? (uint32_t)left : 8u;
    uint32_t st = kStatusOK;
    uint64_t out = combine(n, [&](int j) -> uint64_t {
      uint64_t w = 0;
      if (st) return 0;
      if (s.src[j].space == kSpacePacket) st = loadPacket(L, src[j] + 16 * c, flag, &w);
      else w = loadBytes(Rows ? chunkAt(s, s.src[j], src[j], c) : src[j] + 8 * c, valid);
      return w;
    });
    if (st) return st;
    if (dstPacket) storePacket(dst + 16 * c, out, flag);
    else storeBytes(Rows ? chunkAt(s, s.dst, dst, c) : dst + 8 * c, out, valid);
  }
  return kStatusOK;
}

}  // namespace purlin
