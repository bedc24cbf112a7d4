/* dtypes.c: encodings of the NCCL data types; see dtypes.h. */
#include "dtypes.h"

#include "dtype.h" /* cmd/purlin-perf: minifloat_encode, minifloat_decode */

#include <math.h>
#include <string.h>

/* The 16- and 8-bit float formats, encoded by purlin-perf's codec
 * (cmd/purlin-perf/dtype.c): exponent and mantissa widths, and fn for fp8
 * e4m3, which has no infinity and whose only NaN is all ones. */
typedef struct {
  int ebits, mbits, fn;
} minifloat;

static const minifloat kHalf = {5, 10, 0};
static const minifloat kBf16 = {8, 7, 0};
static const minifloat kE4M3 = {4, 3, 1};
static const minifloat kE5M2 = {5, 2, 0};

static int bias(const minifloat* f) { return (1 << (f->ebits - 1)) - 1; }

static uint32_t mf_encode(const minifloat* f, double x) {
  return (uint32_t)minifloat_encode(x, f->ebits, f->mbits, f->fn);
}

static double mf_decode(const minifloat* f, uint32_t bits) {
  return minifloat_decode(bits, f->ebits, f->mbits, f->fn);
}

static const minifloat* minifloat_of(int dtype) {
  switch (dtype) {
    case 6: return &kHalf;
    case 9: return &kBf16;
    case 10: return &kE4M3;
    case 11: return &kE5M2;
    default: return NULL;
  }
}

size_t dt_size(int dtype) {
  static const size_t sizes[DT_COUNT] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return dtype >= 0 && dtype < DT_COUNT ? sizes[dtype] : 0;
}

const char* dt_name(int dtype) {
  static const char* names[DT_COUNT] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                        "fp16", "fp32", "fp64", "bf16", "fp8e4m3", "fp8e5m2"};
  return dtype >= 0 && dtype < DT_COUNT ? names[dtype] : "?";
}

int dt_is_float(int dtype) { return dtype >= 6; }
int dt_is_signed(int dtype) { return dtype == 0 || dtype == 2 || dtype == 4 || dt_is_float(dtype); }
int dt_is_float8(int dtype) { return dtype == 10 || dtype == 11; }

double dt_eps(int dtype) {
  if (dtype == 7) return ldexp(1.0, -23);
  if (dtype == 8) return ldexp(1.0, -52);
  const minifloat* f = minifloat_of(dtype);
  return f ? ldexp(1.0, -f->mbits) : 0;
}

double dt_tiny(int dtype) {
  if (dtype == 7) return ldexp(1.0, -149);
  if (dtype == 8) return ldexp(1.0, -1074);
  const minifloat* f = minifloat_of(dtype);
  return f ? ldexp(1.0, 1 - bias(f) - f->mbits) : 0;
}

double dt_load(int dtype, const void* buf, size_t i) {
  const unsigned char* p = (const unsigned char*)buf + i * dt_size(dtype);
  switch (dtype) {
    case 0: return *(const int8_t*)p;
    case 1: return *(const uint8_t*)p;
    case 2: { int32_t v; memcpy(&v, p, 4); return v; }
    case 3: { uint32_t v; memcpy(&v, p, 4); return v; }
    case 4: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case 5: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case 7: { float v; memcpy(&v, p, 4); return v; }
    case 8: { double v; memcpy(&v, p, 8); return v; }
    case 6: case 9: { uint16_t v; memcpy(&v, p, 2); return mf_decode(minifloat_of(dtype), v); }
    case 10: case 11: return mf_decode(minifloat_of(dtype), *p);
  }
  return NAN;
}

void dt_store(int dtype, void* buf, size_t i, double v) {
  unsigned char* p = (unsigned char*)buf + i * dt_size(dtype);
  /* Integers wrap through a 64-bit two's-complement value, like C casts. */
  uint64_t w = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
  switch (dtype) {
    case 0: case 1: *p = (unsigned char)w; return;
    case 2: case 3: { uint32_t x = (uint32_t)w; memcpy(p, &x, 4); return; }
    case 4: case 5: memcpy(p, &w, 8); return;
    case 7: { float x = (float)v; memcpy(p, &x, 4); return; }
    case 8: memcpy(p, &v, 8); return;
    case 6: case 9: { uint16_t x = (uint16_t)mf_encode(minifloat_of(dtype), v); memcpy(p, &x, 2); return; }
    case 10: case 11: *p = (unsigned char)mf_encode(minifloat_of(dtype), v); return;
  }
}

double dt_round(int dtype, double v) {
  unsigned char tmp[8];
  dt_store(dtype, tmp, 0, v);
  return dt_load(dtype, tmp, 0);
}
