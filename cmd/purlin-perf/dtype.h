/*
 * dtype.h: the element types purlin-perf tests, and exact conversions
 * between them and host doubles / integers.
 *
 * Floating types are encoded from a double with round-to-nearest-even in one
 * step (so an expected value is rounded exactly once); fp8 saturates to its
 * largest finite value like CUDA's __NV_SATFINITE, half and bfloat16
 * overflow to infinity. Integer types are stored by truncation to their
 * width, which is two's-complement wrapping, as the library computes them.
 */
#ifndef PERF_DTYPE_H_
#define PERF_DTYPE_H_

#include <stddef.h>
#include <stdint.h>

enum dtype_kind { KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT };

typedef struct {
  const char* name;   /* as nccl-tests spells it: int8 ... f8e5m2 */
  int nccl;           /* ncclDataType_t value */
  int size;           /* bytes */
  int kind;           /* enum dtype_kind */
  int ebits, mbits;   /* floating types: exponent and mantissa bits */
  int fn;             /* 1 for e4m3 "fn": no infinity, only S.1111.111 is NaN */
  double exact_limit; /* largest magnitude up to which every integer is exact */
  double tolerance;   /* allowed |got - expected| / max(|expected|, 1) for reductions */
} dtype_t;

extern const dtype_t dtypes[];
extern const int num_dtypes;

/* dtype_by_name returns the type named name, or NULL. */
const dtype_t* dtype_by_name(const char* name);

/* Floating-point element access (float kinds only). */
double load_float(const dtype_t* t, const void* buf, size_t i);
void store_float(const dtype_t* t, void* buf, size_t i, double v);
/* round_float is v rounded to the type, as store then load would give. */
double round_float(const dtype_t* t, double v);

/* Raw element bits, zero-extended; integers are stored truncated to their width. */
uint64_t load_bits(const dtype_t* t, const void* buf, size_t i);
void store_bits(const dtype_t* t, void* buf, size_t i, uint64_t bits);
/* sign_extend interprets the low t->size bytes of bits as the type's integer. */
int64_t sign_extend(const dtype_t* t, uint64_t bits);

/* minifloat_encode/decode: the generic IEEE-style codec behind the float types. */
uint64_t minifloat_encode(double v, int ebits, int mbits, int fn);
double minifloat_decode(uint64_t bits, int ebits, int mbits, int fn);

#endif
