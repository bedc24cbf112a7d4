/**
 * @file reduce.cuh
 * @brief The reduction ops over one element position of N sources, in source
 * (rank) order: acc = first(x0, 0); acc = combine(acc, xj, j) for
 * j = 1..N-1; result = finish(acc).
 *
 *   Sum, Avg   acc + x              (Avg: finish divides by nranks in A)
 *   Prod       acc * x
 *   Max, Min   (x > acc) ? x : acc, (x < acc) ? x : acc
 *   PreMulSum  acc + x, where a source the step marks in Step.scale (this
 *              rank's own input) is first multiplied by this rank's scalar
 *              s and rounded to T: down(x*s), the value it has when a peer
 *              reads it pre-multiplied. s is converted to A once; from a T
 *              at scalarPtr when set, as ncclScalarDevice. Unmarked sources
 *              (peers' pre-multiplied inputs, partial sums) are added as
 *              they are.
 */
#pragma once
#include "numeric.cuh"
#include "plan.cuh"

namespace purlin {

/** spec.OpKind values. */
enum OpKind : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulSum = 5 };

/** The ops fall in three families, so only 12 x 3 reducers are compiled:
 * Sum, Avg and PreMulSum are sums (PreMulSum's marked sources multiplied
 * first), Avg then divides; Max and Min differ by a comparison. */
enum OpFamily : int { kFamilySum = 0, kFamilyProd = 1, kFamilyMinMax = 2 };

/** OpArgs: the Launch's op fields, copied to shared memory once per block
 * (blockOp, run.cu): a Reduce step runs in a called function, where reading
 * them through the Launch is a load from parameter space on its critical
 * path (about 150 cycles a step, tests/gpu/stepbench.cu). */
struct OpArgs {
  int32_t op;
  int32_t nranks;
  uint64_t scalarPtr;
  double scalar;
};
__shared__ OpArgs blockOp;

template <int DT, int FAMILY>
struct Reducer {
  using N = Num<DT>;
  using T = typename N::T;
  using A = typename N::A;
  A scalar;
  uint32_t scaled;  // bit j: source j is multiplied by scalar (PreMulSum only)
  int nranks;
  bool avg, max;

  __device__ __forceinline__ Reducer(const OpArgs& a, const Step& s)
      : scalar(N::scalar(1.0)), scaled(0), nranks(a.nranks), avg(a.op == kAvg), max(a.op == kMax) {
    if (FAMILY == kFamilySum && a.op == kPreMulSum) {
      scalar = a.scalarPtr ? N::up(*(const T*)a.scalarPtr) : N::scalar(a.scalar);
      scaled = s.scale;
    }
  }
  /** term is source j's value as the op adds it. */
  __device__ __forceinline__ A term(T raw, int j) const {
    if ((scaled >> j) & 1) return N::up(N::down(N::mul(N::up(raw), scalar)));
    return N::up(raw);
  }
  __device__ __forceinline__ A first(T x, int j) const { return term(x, j); }
  __device__ __forceinline__ A combine(A acc, T raw, int j) const {
    A x = term(raw, j);
    if (FAMILY == kFamilySum) return N::add(acc, x);
    if (FAMILY == kFamilyProd) return N::mul(acc, x);
    bool take = max ? (x > acc) : (x < acc);  // Max: (x > acc) ? x : acc; Min: (x < acc)
    return take ? x : acc;
  }
  __device__ __forceinline__ T finish(A acc) const { return N::down(avg ? N::div(acc, nranks) : acc); }
};

/** reduceWords reduces K = sizeof(W)/sizeof(T) elements packed in a word W
 * (uint4, uint64_t or T) from n sources; load(j) returns source j's word.
 * The loop over sources stays rolled (only the element loop unrolls): it
 * keeps the 72 dtype x op instances small enough to compile in seconds. */
template <typename R, typename W, typename Load>
__device__ __forceinline__ W reduceWords(const R& r, int n, const Load& load) {
  using T = typename R::T;
  using A = typename R::A;
  constexpr int K = sizeof(W) / sizeof(T);
  union U { W w; T t[K]; };
  A acc[K];
  U in;
  in.w = load(0);
#pragma unroll
  for (int k = 0; k < K; k++) acc[k] = r.first(in.t[k], 0);
#pragma unroll 1
  for (int j = 1; j < n; j++) {
    in.w = load(j);
#pragma unroll
    for (int k = 0; k < K; k++) acc[k] = r.combine(acc[k], in.t[k], j);
  }
  U out;
#pragma unroll
  for (int k = 0; k < K; k++) out.t[k] = r.finish(acc[k]);
  return out.w;
}

}  // namespace purlin
