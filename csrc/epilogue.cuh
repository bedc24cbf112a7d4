/**
 * @file epilogue.cuh
 * @brief An AllReduce's epilogue (snac.Epilogue, spec.Epilogue) over whole
 * rows of the output, in place, with numeric.EpilogueRows's arithmetic:
 *
 *   z = T(reduced + residual)   residual = z        (ResidualAdd; else z = reduced)
 *   y = T(z * (1 / sqrt(mean(z*z) + eps)) * weight)  (RMSNorm; else y = z)
 *   out = y;  quant = e4m3(y / scale)                (QuantFP8)
 *
 * each operation in float32 and correctly rounded (_rn intrinsics: no FMA
 * contraction; division and square root exact without the calls into slow
 * paths that CUDA's make: Quotient, sqrtRN), T(...) rounding to the type
 * once. The one difference from numeric's order is each row's sum of
 * squares, which the threads of a row accumulate apart (fused multiply-add)
 * and then combine: RMSNorm's results may differ from the host Atom's in
 * the last place of T. A row scale (RowScale) is the row's largest |y| /
 * 448 (1 for a row of zeros, or one holding a NaN, as numeric's max).
 *
 * It runs in a kernel of its own (run.cu purlin_epilogue), after the Plan's
 * other steps, and does not divide 64-bit integers (a call too): atom/cuda
 * gives each step its first row and its number of rows.
 *
 * A group of threads runs one row: a power of two from a warp to the block,
 * which atom/cuda chooses from the rows each block gets (epilogueGroup), so
 * that the groups of a block run its rows at once; the group reduces its
 * row's sum of squares and largest magnitude with shuffles (and, wider than
 * a warp, shared memory and a named barrier of its own). Each pass over a
 * row moves 16-byte vectors where every buffer of the row is aligned for
 * them, element by element elsewhere; every pass gives a thread the same
 * elements, so what it reads back (the residual, the output) it wrote itself.
 */
#pragma once
#include <stdint.h>

#include "copy.cuh"
#include "numeric.cuh"
#include "plan.cuh"

namespace purlin {

/** spec.EpilogueKind bits. */
enum EpilogueKind : uint8_t { kEpilogueResidualAdd = 1, kEpilogueRMSNorm = 2, kEpilogueQuantFP8 = 4, kEpilogueRowScale = 8 };

/** spec.FP8Max: the largest finite e4m3 value, a row scale's divisor. */
constexpr float kFP8Max = 448.0f;

/** Elements a thread has in flight, in vectors, per array a pass reads
 * where the kind is read as it runs (epilogueRows of kEpilogueAnyKind): 4
 * float32 vectors, 2 of 16-bit types, beside what every kind keeps in
 * registers. */
constexpr int kEpilogueElements = 16;

/** The vectors a thread has in flight per array in a pass over whole rows
 * of one kind (epilogueRows of a KIND), where nothing else of the kind's
 * takes registers: four, twice the 16-bit types' above (stepbench, 1024
 * rows of 4096 on 64 blocks: 11.0 us with two, 10.1 with four, 11.0 with
 * eight). */
constexpr int kEpilogueWholeVectors = 4;

/** The vectors in flight in such a pass where a thread has fewer than
 * kEpilogueWholeVectors of a row: two, since the loop of four would not
 * run and its 2-3 vectors would be loaded one at a time (one row of 8192
 * bfloat16 on a block, two vectors a thread: 6.3 us a fused call with
 * four, 5.9 with two; `purlin-perf allreduce_rmsnorm`, one H200). */
constexpr int kEpilogueFewVectors = 2;

/** The partial results of the warps of a group wider than a warp, each
 * group at its own warps' places. */
__shared__ float epilogueWarps[kThreads / 32];

/** Pack is N consecutive elements of T, read or written as one access. */
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T t[N];
};

/** Two packs of one unit: what a pass loads. */
template <typename T, int N>
struct Pair {
  Pack<T, N> a, b;
};

/** Width names how many elements a pass moves at once (1, or a vector's). */
template <int N>
struct Width {
  static constexpr int value = N;
};

/** maxNaN is Go's max on float32: a NaN wins (fmaxf drops it). */
__device__ __forceinline__ float maxNaN(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
#else
  return a != a || b != b ? __int_as_float(0x7fffffff) : fmaxf(a, b);
#endif
}

/** rcp64 is 1/d within 2^-52 of it (relative), or 1/d itself for d zero,
 * infinite or NaN: the approximate reciprocal, refined by Newton's
 * iteration (each step squares the error). d is a float32's value, so
 * nothing in it is subnormal in double. */
__device__ __forceinline__ double rcp64(double d) {
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(d));
  if (r == 0.0 || !(fabs(r) < __longlong_as_double(0x7ff0000000000000ll))) return r;
#pragma unroll
  for (int k = 0; k < 3; k++) r = __fma_rn(r, __fma_rn(-d, r, 1.0), r);
  return r;
}

/** Quotient divides by one divisor d, each quotient float32's correctly
 * rounded y / d (numeric's): y times d's reciprocal in double is within
 * 2^-51 of y / d (relative; nothing overflows or underflows in double),
 * while y / d lies at least 2^-49 away from every float32 rounding boundary
 * (a quotient of two 24-bit significands against a 25-bit midpoint), so
 * the product rounds to float32 as y / d does. Zero, infinite and NaN
 * operands come out as the division's. */
struct Quotient {
  double inv;
  __device__ __forceinline__ explicit Quotient(float d) : inv(rcp64(d)) {}
  __device__ __forceinline__ float of(float y) const { return __double2float_rn(__dmul_rn((double)y, inv)); }
};

/** sqrtRN is float32's correctly rounded square root (numeric's): an
 * approximation in double, rounded to float32 and moved to the neighbour
 * whose rounding interval holds sqrt(x), told by comparing x with the
 * squares of the interval's ends (25-bit values: exact in double; no
 * float32 square root is one of them). */
__device__ __forceinline__ float sqrtRN(float x) {
  if (!(x > 0.0f && x < __int_as_float(0x7f800000))) return x < 0.0f ? __int_as_float(0x7fffffff) : x;  // -0, 0, +Inf, NaN
  const double d = x;
  double r;
  asm("rsqrt.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(d));
#pragma unroll
  for (int k = 0; k < 2; k++) r = __fma_rn(r, __fma_rn(-0.5 * d * r, r, 0.5), r);
  float y = __double2float_rn(__dmul_rn(d, r));
  const double lo = 0.5 * ((double)y + (double)__int_as_float(__float_as_int(y) - 1));
  const double hi = 0.5 * ((double)y + (double)__int_as_float(__float_as_int(y) + 1));
  if (d < __dmul_rn(lo, lo)) y = __int_as_float(__float_as_int(y) - 1);
  else if (d > __dmul_rn(hi, hi)) y = __int_as_float(__float_as_int(y) + 1);
  return y;
}

/** groupSync is the barrier of the group of g threads that holds this
 * thread: the block's for a group that is the block, else a named barrier
 * of the group's own (1 + its index: barrier 0 is __syncthreads'). */
__device__ __forceinline__ void groupSync(uint32_t g) {
  if (g == kThreads) {
    __syncthreads();
    return;
  }
  asm volatile("bar.sync %0, %1;" ::"r"(1 + threadIdx.x / g), "r"(g) : "memory");
}

/** groupReduce combines v over a group of g threads (a power of two, from a
 * warp to the block) and gives each of them the result: each lane of a
 * butterfly combines the same two values, so all of them hold the same
 * bits. A group wider than a warp passes two of its barriers. */
template <typename Op>
__device__ __forceinline__ float groupReduce(float v, uint32_t g, const Op& op) {
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
  if (g == 32) return v;
  if (threadIdx.x % 32 == 0) epilogueWarps[threadIdx.x / 32] = v;
  groupSync(g);
  const float* warps = epilogueWarps + (threadIdx.x & ~(g - 1)) / 32;
  v = warps[0];
#pragma unroll
  for (int k = 1; k < kThreads / 32; k++)
    if (k < g / 32) v = op(v, warps[k]);
  groupSync(g);  // the group's epilogueWarps are free for its next reduction
  return v;
}

/** eachPart runs one pass over a row of `hidden` elements with a group of
 * g threads: its `vectors` vectors of K elements from element `head` on,
 * E / K a thread at a time, all loaded (load) before any is
 * used (use), so that their loads are in flight together; then, unless
 * kWhole (the row is `vectors` whole vectors from its start), the elements
 * outside them (the head before, the rest after) one by one. The same
 * thread gets the same elements in every pass. */
template <int K, int E, bool kWhole, typename Load, typename Use>
__device__ __forceinline__ void eachPart(uint32_t lane, uint32_t g, uint32_t hidden, uint32_t head, uint32_t vectors,
                                         const Load& load, const Use& use) {
  constexpr int U = E / K;
  using V = decltype(load(Width<K>{}, 0u));
  uint32_t u = lane;
  for (; u + (U - 1) * g < vectors; u += U * g) {
    V v[U];
#pragma unroll
    for (int k = 0; k < U; k++) v[k] = load(Width<K>{}, head + (u + k * g) * K);
#pragma unroll
    for (int k = 0; k < U; k++) use(Width<K>{}, head + (u + k * g) * K, v[k]);
  }
  for (; u < vectors; u += g) use(Width<K>{}, head + u * K, load(Width<K>{}, head + u * K));
  if (kWhole) return;
  const uint32_t tail = head + vectors * K, rest = head + hidden - tail;
  for (uint32_t e = lane; e < rest; e += g) {
    const uint32_t i = e < head ? e : tail + (e - head);
    use(Width<1>{}, i, load(Width<1>{}, i));
  }
}

/** Rows is what an Epilogue step names: its rows of the output and the
 * call's epilogue buffers, from the first of them on. */
struct Rows {
  uint64_t out, residual, weight, quant, scales;
  uint64_t rows;
};

/** An Epilogue step's first row in its output and its number of rows,
 * which atom/cuda writes into the step's unused Src[0] in the device image
 * (planBytes), so that the kernel divides nothing: a 64-bit division is a
 * call. */
__device__ __forceinline__ uint64_t epilogueFirstRow(const Step& s) { return s.src[0].off; }
__device__ __forceinline__ uint64_t epilogueRowCount(const Step& s) { return s.src[0].half; }
/** An Epilogue step's group: the threads that run one of its rows, a power
 * of two from a warp to the block, which atom/cuda chooses from the rows
 * each block gets and writes into the step's Src[0].Pitch (epilogueGroup). */
__device__ __forceinline__ uint32_t epilogueGroup(const Step& s) { return s.src[0].pitch; }

/** kEpilogueAnyKind: epilogueRows's kind is the step's, read as it runs,
 * on rows aligned anyhow. */
constexpr int kEpilogueAnyKind = -1;

/** kEpilogueAddNorm is the kind nearly every caller names: the residual
 * added, then RMSNorm, nothing quantized. */
constexpr int kEpilogueAddNorm = kEpilogueResidualAdd | kEpilogueRMSNorm;

/** epilogueRows runs an epilogue of `kind`, of rows of `hidden` elements,
 * with eps, on rows r, a group of g threads (epilogueGroup) a row. KIND is
 * kEpilogueAnyKind, or kind itself for rows that are whole vectors in
 * every buffer the kind uses (epilogueWhole): then nothing in a pass is
 * decided while it runs, and no code for other kinds or for single
 * elements lies between the instructions a row runs; VECTORS is then the
 * vectors a thread has in flight. */
template <int DT, int KIND, int VECTORS = kEpilogueWholeVectors>
__device__ __forceinline__ void epilogueRows(uint32_t kind, uint32_t hidden, float eps, const Rows& r, uint32_t g) {
  using Nm = Num<DT>;
  using T = typename Nm::T;
  constexpr int K = 16 / sizeof(T);
  constexpr bool kWhole = KIND != kEpilogueAnyKind;
  constexpr int E = kWhole ? VECTORS * K : kEpilogueElements;
  if (kWhole) kind = (uint32_t)KIND;
  const uint64_t rowBytes = (uint64_t)hidden * sizeof(T), rows = r.rows;
  const bool add = kind & kEpilogueResidualAdd, norm = kind & kEpilogueRMSNorm;
  const bool quant = kind & kEpilogueQuantFP8, rowScale = quant && (kind & kEpilogueRowScale);
  const bool tensorQuant = quant && !rowScale;
  float* const scales = (float*)r.scales;
  const Quotient byTensor(tensorQuant ? *scales : 1.0f);
  const uint32_t lane = threadIdx.x & (g - 1), shift = 31 - __clz(g);
  // The worker's rows are spread over its gridDim.y blocks (atom/cuda's
  // epilogueSplit), a group of g threads a row.
  const uint64_t groups = kThreads >> shift;
  for (uint64_t row = blockIdx.y * groups + (threadIdx.x >> shift); row < rows; row += gridDim.y * groups) {
    T* const o = (T*)(r.out + row * rowBytes);
    T* const res = (T*)(r.residual + row * rowBytes);
    const T* const w = (const T*)r.weight;
    uint8_t* const q = (uint8_t*)(r.quant + row * hidden);
    // Vectors start where the output is 16-byte aligned, if every other
    // buffer the kind uses is aligned for them there too.
    const uint64_t o0 = (uint64_t)o;
    uint32_t head = kWhole ? 0 : (uint32_t)(((16 - (o0 & 15)) & 15) / sizeof(T));
    const bool vec = kWhole || (o0 % sizeof(T) == 0 && head < hidden && (!add || ((uint64_t)(res + head) & 15) == 0) &&
                                (!norm || ((uint64_t)(w + head) & 15) == 0) &&
                                (!quant || ((uint64_t)(q + head) & (K - 1)) == 0));
    if (!vec) head = hidden;
    const uint32_t vectors = (hidden - head) / K;

    // finish takes y where it is made: its largest magnitude for a row
    // scale, or its quantization with the tensor's scale.
    float ss = 0.0f, amax = 0.0f;
    auto finish = [&](auto n, uint32_t i, const auto& y) {
      constexpr int N = decltype(n)::value;
      if (rowScale) {
#pragma unroll
        for (int j = 0; j < N; j++) amax = maxNaN(amax, fabsf(Nm::up(y.t[j])));
      } else if (tensorQuant) {
        Pack<uint8_t, N> qs;
#pragma unroll
        for (int j = 0; j < N; j++) qs.t[j] = fp8Down<__NV_E4M3>(byTensor.of(Nm::up(y.t[j])));
        *(Pack<uint8_t, N>*)(q + i) = qs;
      }
    };

    // Pass 1: z (the residual sum) and its sum of squares; without RMSNorm
    // z is y: stored and finished.
    eachPart<K, E, kWhole>(
        lane, g, hidden, head, vectors,
        [&](auto n, uint32_t i) {
          constexpr int N = decltype(n)::value;
          Pair<T, N> v;
          v.a = *(const Pack<T, N>*)(o + i);
          if (add) v.b = *(const Pack<T, N>*)(res + i);
          return v;
        },
        [&](auto n, uint32_t i, const auto& v) {
          constexpr int N = decltype(n)::value;
          Pack<T, N> z = v.a;
          if (add) {
#pragma unroll
            for (int j = 0; j < N; j++) z.t[j] = Nm::down(__fadd_rn(Nm::up(v.a.t[j]), Nm::up(v.b.t[j])));
            *(Pack<T, N>*)(res + i) = z;
          }
          if (norm) {
#pragma unroll
            for (int j = 0; j < N; j++) ss = __fmaf_rn(Nm::up(z.t[j]), Nm::up(z.t[j]), ss);
            return;
          }
          if (add) *(Pack<T, N>*)(o + i) = z;
          finish(n, i, z);
        });

    // Pass 2 (RMSNorm): y = T(z * inv * weight), stored and finished; z is
    // where pass 1 left it.
    if (norm) {
      ss = groupReduce(ss, g, [](float a, float b) { return __fadd_rn(a, b); });
      const float inv = Quotient(sqrtRN(__fadd_rn(Quotient(__uint2float_rn(hidden)).of(ss), eps))).of(1.0f);
      const T* const z = add ? res : o;
      eachPart<K, E, kWhole>(
          lane, g, hidden, head, vectors,
          [&](auto n, uint32_t i) {
            constexpr int N = decltype(n)::value;
            Pair<T, N> v;
            v.a = *(const Pack<T, N>*)(z + i);
            v.b = *(const Pack<T, N>*)(w + i);
            return v;
          },
          [&](auto n, uint32_t i, const auto& v) {
            constexpr int N = decltype(n)::value;
            Pack<T, N> y;
#pragma unroll
            for (int j = 0; j < N; j++) y.t[j] = Nm::down(__fmul_rn(__fmul_rn(Nm::up(v.a.t[j]), inv), Nm::up(v.b.t[j])));
            *(Pack<T, N>*)(o + i) = y;
            finish(n, i, y);
          });
    }

    // Pass 3 (RowScale): the row's scale, then y / scale from the output.
    if (rowScale) {
      amax = groupReduce(amax, g, [](float a, float b) { return maxNaN(a, b); });
      const float scale = amax > 0.0f ? Quotient(kFP8Max).of(amax) : 1.0f;
      if (lane == 0) scales[row] = scale;
      const Quotient byRow(scale);
      eachPart<K, E, kWhole>(
          lane, g, hidden, head, vectors,
          [&](auto n, uint32_t i) {
            constexpr int N = decltype(n)::value;
            return *(const Pack<T, N>*)(o + i);
          },
          [&](auto n, uint32_t i, const auto& y) {
            constexpr int N = decltype(n)::value;
            Pack<uint8_t, N> qs;
#pragma unroll
            for (int j = 0; j < N; j++) qs.t[j] = fp8Down<__NV_E4M3>(byRow.of(Nm::up(y.t[j])));
            *(Pack<uint8_t, N>*)(q + i) = qs;
          });
    }
  }
}

/** EpilogueBuffers is a Launch's buffers from recv to scales, in its layout:
 * what an Epilogue step addresses, which a block reads once into shared
 * memory (run.cu runEpilogues) rather than field by field from the
 * parameters. */
struct EpilogueBuffers {
  uint64_t recv[kMaxBuffers], residual[kMaxBuffers], weight[kMaxBuffers], quant[kMaxBuffers], scales[kMaxBuffers];
};
static_assert(offsetof(Launch, scales) - offsetof(Launch, recv) == offsetof(EpilogueBuffers, scales) &&
                  offsetof(Launch, peerRecv) - offsetof(Launch, recv) == sizeof(EpilogueBuffers),
              "EpilogueBuffers is Launch's recv to scales");

/** epilogueWhole: rows of `hidden` elements of type T at r are whole
 * vectors in the output, the residual and the weight (each row starts
 * 16-byte aligned in every one of them). */
template <typename T>
__device__ __forceinline__ bool epilogueWhole(const Rows& r, uint32_t hidden) {
  return ((r.out | r.residual | r.weight) & 15) == 0 && hidden % (16 / sizeof(T)) == 0;
}

/** epilogueAddNorm is epilogueRows of kEpilogueAddNorm on whole rows, in a
 * function of its own: its code is this kind's alone, with no branch to
 * other kinds' or to single elements, and VECTORS vectors in flight
 * (kEpilogueWholeVectors, twice the 16-bit types' of epilogueAny, or
 * kEpilogueFewVectors). */
template <int DT, int VECTORS>
__device__ __noinline__ void epilogueAddNorm(Rows r, uint32_t hidden, float eps, uint32_t g) {
  epilogueRows<DT, kEpilogueAddNorm, VECTORS>(kEpilogueAddNorm, hidden, eps, r, g);
}

/** epilogueAny is epilogueRows of the kind a step names, on rows aligned
 * anyhow: the rare path, in a function of its own, so that its code does
 * not lie between its caller's instructions. */
template <int DT>
__device__ __noinline__ void epilogueAny(Rows r, uint32_t kind, uint32_t hidden, float eps, uint32_t g) {
  epilogueRows<DT, kEpilogueAnyKind>(kind, hidden, eps, r, g);
}

/** epilogueType runs step s of type DT on the rows of buffer index buf in
 * B, a group of epilogueGroup(s) threads a row. */
template <int DT>
__device__ __forceinline__ void epilogueType(const EpilogueBuffers& B, const Step& s, uint32_t buf) {
  using T = typename Num<DT>::T;
  const uint64_t off = s.dst.off;
  const uint32_t kind = s.peer, hidden = s.slot, g = epilogueGroup(s);
  const float eps = __uint_as_float((uint32_t)s.check);
  const Rows r{B.recv[buf] + off, B.residual[buf] + off, B.weight[buf], B.quant[buf] + off / sizeof(T),
               B.scales[buf] + (kind & kEpilogueRowScale ? 4 * epilogueFirstRow(s) : 0), epilogueRowCount(s)};
  if (kind == kEpilogueAddNorm && epilogueWhole<T>(r, hidden)) {
    constexpr uint32_t K = 16 / sizeof(T);
    if (hidden < kEpilogueWholeVectors * g * K) return epilogueAddNorm<DT, kEpilogueFewVectors>(r, hidden, eps, g);
    return epilogueAddNorm<DT, kEpilogueWholeVectors>(r, hidden, eps, g);
  }
  epilogueAny<DT>(r, kind, hidden, eps, g);
}

/** epilogue runs an Epilogue step (snac.Epilogue) of a Plan of type DT
 * with the whole block: Bytes of whole rows of the output of call Dst.Rank
 * at Dst.Off (the worker's steps that wrote them are behind a barrier),
 * with that call's epilogue buffers in B. s and B are in shared memory,
 * where each field is a read of a few cycles. It is the kernel's guard as
 * well (atom/cuda checks Plans and buffers): false, having touched nothing,
 * for a step that is no rows of an output or a buffer its kind uses that
 * is null. */
template <int DT>
__device__ __forceinline__ bool epilogue(const EpilogueBuffers& B, const Step& s) {
  const uint32_t buf = s.dst.rank, kind = s.peer;
  const uint32_t g = epilogueGroup(s);
  if (s.dst.space != kSpaceRecv || s.dst.pitch != 0 || buf >= kMaxBuffers || s.slot == 0 || B.recv[buf] == 0 ||
      g < 32 || g > kThreads || (g & (g - 1)) != 0 ||
      (kind & kEpilogueResidualAdd && B.residual[buf] == 0) || (kind & kEpilogueRMSNorm && B.weight[buf] == 0) ||
      (kind & kEpilogueQuantFP8 && (B.quant[buf] == 0 || B.scales[buf] == 0)))
    return false;
  epilogueType<DT>(B, s, buf);
  return true;
}

}  // namespace purlin
