/* dtype.c: element types and their exact encodings (see dtype.h). */
#include "dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "nccl_api.h"

/* exact_limit for floats is 2^(mbits+1); tolerance about two units in the last place. */
const dtype_t dtypes[] = {
    {"int8", ncclInt8, 1, KIND_SIGNED, 0, 0, 0, 127, 0},
    {"uint8", ncclUint8, 1, KIND_UNSIGNED, 0, 0, 0, 255, 0},
    {"int32", ncclInt32, 4, KIND_SIGNED, 0, 0, 0, 2147483647.0, 0},
    {"uint32", ncclUint32, 4, KIND_UNSIGNED, 0, 0, 0, 4294967295.0, 0},
    {"int64", ncclInt64, 8, KIND_SIGNED, 0, 0, 0, 9007199254740992.0, 0},
    {"uint64", ncclUint64, 8, KIND_UNSIGNED, 0, 0, 0, 9007199254740992.0, 0},
    {"half", ncclFloat16, 2, KIND_FLOAT, 5, 10, 0, 2048, 0x1p-9},
    {"float", ncclFloat32, 4, KIND_FLOAT, 8, 23, 0, 16777216.0, 0x1p-20},
    {"double", ncclFloat64, 8, KIND_FLOAT, 11, 52, 0, 9007199254740992.0, 0x1p-45},
    {"bfloat16", ncclBfloat16, 2, KIND_FLOAT, 8, 7, 0, 256, 0x1p-6},
    {"f8e4m3", ncclFloat8e4m3, 1, KIND_FLOAT, 4, 3, 1, 16, 0x1p-2},
    {"f8e5m2", ncclFloat8e5m2, 1, KIND_FLOAT, 5, 2, 0, 8, 0x1p-1},
};
const int num_dtypes = sizeof(dtypes) / sizeof(dtypes[0]);

const dtype_t* dtype_by_name(const char* name) {
  for (int i = 0; i < num_dtypes; i++)
    if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
  /* NCCL's other spellings */
  static const struct { const char* alias; const char* name; } aliases[] = {
      {"char", "int8"}, {"int", "int32"}, {"float16", "half"}, {"float32", "float"},
      {"float64", "double"}, {"bf16", "bfloat16"}, {"fp8e4m3", "f8e4m3"}, {"fp8e5m2", "f8e5m2"},
  };
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
    if (strcmp(aliases[i].alias, name) == 0) return dtype_by_name(aliases[i].name);
  return NULL;
}

/* Largest finite magnitude of a format. fn formats lose only the all-ones
 * mantissa of the top exponent (NaN); IEEE ones lose the whole top exponent. */
static double minifloat_max(int ebits, int mbits, int fn) {
  int bias = (1 << (ebits - 1)) - 1;
  if (fn) return ldexp(2.0 - ldexp(2.0, -mbits), (1 << ebits) - 1 - bias);
  return ldexp(2.0 - ldexp(1.0, -mbits), (1 << ebits) - 2 - bias);
}

uint64_t minifloat_encode(double v, int ebits, int mbits, int fn) {
  int bias = (1 << (ebits - 1)) - 1;
  uint64_t sign = signbit(v) ? 1ull << (ebits + mbits) : 0;
  uint64_t exp_all = (1ull << ebits) - 1;
  if (isnan(v)) {
    uint64_t nan = fn ? (exp_all << mbits) | ((1ull << mbits) - 1) : (exp_all << mbits) | (1ull << (mbits - 1));
    return sign | nan;
  }
  double a = fabs(v);
  double maxf = minifloat_max(ebits, mbits, fn);
  if (a == 0) return sign;
  if (isinf(a)) a = DBL_MAX; /* then saturates or overflows below, as a finite overflow does */
  /* Quantise to the spacing of a's binade (or of the subnormals), ties to even. */
  int e;
  frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  int unbiased = e - 1;
  int min_normal = 1 - bias;
  int quantum_exp = (unbiased < min_normal ? min_normal : unbiased) - mbits;
  double q = nearbyint(ldexp(a, -quantum_exp));
  double r = ldexp(q, quantum_exp);
  if (r > maxf) {
    /* fp8 saturates (CUDA's __NV_SATFINITE); wider formats overflow to infinity. */
    if (1 + ebits + mbits == 8) return sign | minifloat_encode(maxf, ebits, mbits, fn);
    return sign | (exp_all << mbits);
  }
  if (r < ldexp(1.0, min_normal)) return sign | (uint64_t)ldexp(r, -(min_normal - mbits));
  frexp(r, &e);
  unbiased = e - 1;
  uint64_t mant = (uint64_t)(ldexp(r, mbits - unbiased)) - (1ull << mbits);
  return sign | ((uint64_t)(unbiased + bias) << mbits) | mant;
}

double minifloat_decode(uint64_t bits, int ebits, int mbits, int fn) {
  int bias = (1 << (ebits - 1)) - 1;
  uint64_t exp_all = (1ull << ebits) - 1;
  int neg = (bits >> (ebits + mbits)) & 1;
  uint64_t ef = (bits >> mbits) & exp_all;
  uint64_t mant = bits & ((1ull << mbits) - 1);
  double r;
  if (fn && ef == exp_all && mant == (1ull << mbits) - 1) r = NAN;
  else if (!fn && ef == exp_all) r = mant ? NAN : INFINITY;
  else if (ef == 0) r = ldexp((double)mant, 1 - bias - mbits);
  else r = ldexp((double)(mant | (1ull << mbits)), (int)ef - bias - mbits);
  return neg ? -r : r;
}

uint64_t load_bits(const dtype_t* t, const void* buf, size_t i) {
  const unsigned char* p = (const unsigned char*)buf + i * t->size;
  switch (t->size) {
    case 1: return *p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

void store_bits(const dtype_t* t, void* buf, size_t i, uint64_t bits) {
  unsigned char* p = (unsigned char*)buf + i * t->size;
  switch (t->size) {
    case 1: *p = (unsigned char)bits; break;
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); break; }
    default: memcpy(p, &bits, 8); break;
  }
}

int64_t sign_extend(const dtype_t* t, uint64_t bits) {
  int shift = 64 - 8 * t->size;
  return shift ? (int64_t)(bits << shift) >> shift : (int64_t)bits;
}

double load_float(const dtype_t* t, const void* buf, size_t i) {
  if (t->nccl == ncclFloat32) { float f; memcpy(&f, (const char*)buf + i * 4, 4); return f; }
  if (t->nccl == ncclFloat64) { double d; memcpy(&d, (const char*)buf + i * 8, 8); return d; }
  return minifloat_decode(load_bits(t, buf, i), t->ebits, t->mbits, t->fn);
}

void store_float(const dtype_t* t, void* buf, size_t i, double v) {
  if (t->nccl == ncclFloat32) { float f = (float)v; memcpy((char*)buf + i * 4, &f, 4); return; }
  if (t->nccl == ncclFloat64) { memcpy((char*)buf + i * 8, &v, 8); return; }
  store_bits(t, buf, i, minifloat_encode(v, t->ebits, t->mbits, t->fn));
}

double round_float(const dtype_t* t, double v) {
  unsigned char tmp[8];
  store_float(t, tmp, 0, v);
  return load_float(t, tmp, 0);
}
