/**
 * @file numeric.cuh
 * @brief The 12 data types as the reduce sees them: storage type T, the
 * accumulation type A, and the conversions between them.
 *
 * 16- and 8-bit floats accumulate in fp32 and round once at the end (fp8:
 * nearest even, saturating to the largest finite value, NaN stays NaN, as
 * __NV_SATFINITE); every other type accumulates in itself. Integer
 * arithmetic wraps (it runs in uint64_t and truncates: no signed overflow).
 */
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace purlin {

/** spec.DataType values. */
enum DType : int32_t {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};

/** Integer types: accumulate in T, wrapping. */
template <typename Int>
struct IntNum {
  using T = Int;
  using A = Int;
  static constexpr bool kFloat = false;
  __device__ __forceinline__ static A up(T x) { return x; }
  __device__ __forceinline__ static T down(A a) { return a; }
  __device__ __forceinline__ static A add(A a, A b) { return (A)((uint64_t)a + (uint64_t)b); }
  __device__ __forceinline__ static A mul(A a, A b) { return (A)((uint64_t)a * (uint64_t)b); }
  __device__ __forceinline__ static A div(A a, int n) { return (A)(a / (A)n); }  // truncates
  __device__ __forceinline__ static A scalar(double s) {
    return (A)(int64_t)s;  // toward zero, then wrapped into T (as numeric.Reduce)
  }
};

/** fp32 and fp64: accumulate in T; _rn intrinsics stop FMA contraction. */
struct F32Num {
  using T = float;
  using A = float;
  static constexpr bool kFloat = true;
  __device__ __forceinline__ static A up(T x) { return x; }
  __device__ __forceinline__ static T down(A a) { return a; }
  __device__ __forceinline__ static A add(A a, A b) { return __fadd_rn(a, b); }
  __device__ __forceinline__ static A mul(A a, A b) { return __fmul_rn(a, b); }
  __device__ __forceinline__ static A div(A a, int n) { return __fdiv_rn(a, (float)n); }
  __device__ __forceinline__ static A scalar(double s) { return (float)s; }
};
struct F64Num {
  using T = double;
  using A = double;
  static constexpr bool kFloat = true;
  __device__ __forceinline__ static A up(T x) { return x; }
  __device__ __forceinline__ static T down(A a) { return a; }
  __device__ __forceinline__ static A add(A a, A b) { return __dadd_rn(a, b); }
  __device__ __forceinline__ static A mul(A a, A b) { return __dmul_rn(a, b); }
  __device__ __forceinline__ static A div(A a, int n) { return __ddiv_rn(a, (double)n); }
  __device__ __forceinline__ static A scalar(double s) { return s; }
};

/** Narrow floats (raw bits as T): accumulate in fp32. */
template <typename Raw, float (*Up)(Raw), Raw (*Down)(float)>
struct NarrowNum : F32Num {
  using T = Raw;
  __device__ __forceinline__ static A up(T x) { return Up(x); }
  __device__ __forceinline__ static T down(A a) { return Down(a); }
};

__device__ __forceinline__ float f16Up(uint16_t x) { return __half2float(__ushort_as_half(x)); }
__device__ __forceinline__ uint16_t f16Down(float a) { return __half_as_ushort(__float2half_rn(a)); }
__device__ __forceinline__ float bf16Up(uint16_t x) {
  return __bfloat162float(__ushort_as_bfloat16(x));
}
__device__ __forceinline__ uint16_t bf16Down(float a) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(a));
}
template <__nv_fp8_interpretation_t Kind>
__device__ __forceinline__ float fp8Up(uint8_t x) {
  __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)x, Kind);
  return __half2float(__half(h));  // exact: every fp8 value is a half
}
template <__nv_fp8_interpretation_t Kind>
__device__ __forceinline__ uint8_t fp8Down(float a) {
  return (uint8_t)__nv_cvt_float_to_fp8(a, __NV_SATFINITE, Kind);
}

/* ---------- the dtype -> Num table ---------- */
template <int DT> struct Num;
template <> struct Num<kInt8> : IntNum<int8_t> {};
template <> struct Num<kUint8> : IntNum<uint8_t> {};
template <> struct Num<kInt32> : IntNum<int32_t> {};
template <> struct Num<kUint32> : IntNum<uint32_t> {};
template <> struct Num<kInt64> : IntNum<int64_t> {};
template <> struct Num<kUint64> : IntNum<uint64_t> {};
template <> struct Num<kFloat16> : NarrowNum<uint16_t, f16Up, f16Down> {};
template <> struct Num<kFloat32> : F32Num {};
template <> struct Num<kFloat64> : F64Num {};
template <> struct Num<kBfloat16> : NarrowNum<uint16_t, bf16Up, bf16Down> {};
template <> struct Num<kFloat8e4m3> : NarrowNum<uint8_t, fp8Up<__NV_E4M3>, fp8Down<__NV_E4M3>> {};
template <> struct Num<kFloat8e5m2> : NarrowNum<uint8_t, fp8Up<__NV_E5M2>, fp8Down<__NV_E5M2>> {};

}  // namespace purlin
