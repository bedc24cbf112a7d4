/**
 * @file reduce.cuh
 * @brief The reduction ops over one element position of N sources, in source
 * (rank) order: acc = first(x0); acc = combine(acc, xj) for j = 1..N-1;
 * result = finish(acc).
 *
 *   Sum, Avg   acc + x              (Avg: finish divides by nranks in A)
 *   Prod       acc * x
 *   Max, Min   (x > acc) ? x : acc, (x < acc) ? x : acc
 *   PreMulSum  first = x0*s; acc + x*s (s converted to A once; from a T at
 *              scalarPtr when set, as ncclScalarDevice)
 */
#pragma once
#include "numeric.cuh"
#include "plan.cuh"

namespace purlin {

/** spec.OpKind values. */
enum OpKind : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulSum = 5 };

/** The ops fall in three families, so only 12 x 3 reducers are compiled:
 * Sum, Avg and PreMulSum are "sum of x*s" (s = 1 is exact: x*1 == x), Avg
 * then divides; Max and Min differ by a comparison. */
enum OpFamily : int { kFamilySum = 0, kFamilyProd = 1, kFamilyMinMax = 2 };

template <int DT, int FAMILY>
struct Reducer {
  using N = Num<DT>;
  using T = typename N::T;
  using A = typename N::A;
  A scalar;
  int nranks;
  bool avg, max;

  __device__ __forceinline__ explicit Reducer(const Launch& L)
      : scalar(N::scalar(1.0)), nranks(L.nranks), avg(L.op == kAvg), max(L.op == kMax) {
    if (L.op == kPreMulSum)
      scalar = L.scalarPtr ? N::up(*(const T*)L.scalarPtr) : N::scalar(L.scalar);
  }
  __device__ __forceinline__ A first(T x) const {
    return FAMILY == kFamilySum ? N::mul(N::up(x), scalar) : N::up(x);
  }
  __device__ __forceinline__ A combine(A acc, T raw) const {
    A x = N::up(raw);
    if (FAMILY == kFamilySum) return N::add(acc, N::mul(x, scalar));
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
  for (int k = 0; k < K; k++) acc[k] = r.first(in.t[k]);
#pragma unroll 1
  for (int j = 1; j < n; j++) {
    in.w = load(j);
#pragma unroll
    for (int k = 0; k < K; k++) acc[k] = r.combine(acc[k], in.t[k]);
  }
  U out;
#pragma unroll
  for (int k = 0; k < K; k++) out.t[k] = r.finish(acc[k]);
  return out.w;
}

}  // namespace purlin
