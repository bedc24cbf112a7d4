/*
 * dtypes.h: the twelve NCCL data types as the C tests see them: size, name,
 * and exact conversions to and from double. 16-bit and 8-bit floats are
 * encoded with round-to-nearest-even; fp8 saturates to its largest finite
 * value (like CUDA's __NV_SATFINITE). Integers wrap like C casts.
 */
#ifndef PURLIN_TESTS_DTYPES_H_
#define PURLIN_TESTS_DTYPES_H_

#include <stddef.h>
#include <stdint.h>

enum { DT_COUNT = 12 };

size_t dt_size(int dtype);
const char* dt_name(int dtype);
int dt_is_float(int dtype);
int dt_is_signed(int dtype);
int dt_is_float8(int dtype);
/* Relative precision (2^-mantissa bits) of a float type; 0 for integers. */
double dt_eps(int dtype);
/* Smallest positive (subnormal) value of a float type; 0 for integers. */
double dt_tiny(int dtype);

/* Element i of buf as a double. */
double dt_load(int dtype, const void* buf, size_t i);
/* Stores v into element i of buf, rounded (floats) or wrapped (integers). */
void dt_store(int dtype, void* buf, size_t i, double v);
/* v as the type holds it: dt_load of dt_store. */
double dt_round(int dtype, double v);

#endif /* PURLIN_TESTS_DTYPES_H_ */
