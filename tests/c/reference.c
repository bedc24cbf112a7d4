/* reference.c: see reference.h. */
#include "reference.h"

#include <math.h>
#include "dtypes.h"

const char* op_name(int op) {
  static const char* names[OP_COUNT] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return op >= 0 && op < OP_COUNT ? names[op] : "?";
}

int op_defined(int dtype, int op, int nranks) {
  return nranks > 1 || !dt_is_float8(dtype) || (op != OP_AVG && op != OP_PREMULSUM);
}

int op_for(int dtype, int op, int nranks) {
  while (!op_defined(dtype, op, nranks)) op = (op + OP_COUNT - 1) % OP_COUNT;
  return op;
}

double ref_random_input(rng_t* r, int dtype, int op) {
  if (!dt_is_float(dtype)) {
    /* Small integers: sums and products stay exact in double, and wrap in
     * narrow types exactly as two's-complement arithmetic does. */
    return dt_is_signed(dtype) ? rng_int(r, -4, 4) : rng_int(r, 0, 8);
  }
  double v;
  if (op == OP_PROD) {
    v = 0.5 + 1.5 * rng_unit(r); /* |product| of 8 stays inside fp8's range */
    if (rng_next(r) & 1) v = -v;
  } else {
    v = 4.0 * rng_unit(r) - 2.0;
  }
  return dt_round(dtype, v);
}

double ref_premul_scalar(int dtype, int rank) {
  static const double floats[] = {0.75, -1.5, 2, 0.5, -0.25, 1.25, 3, -0.75};
  static const double ints[] = {3, -2, 5, -1, 2, 7, -3, 4};
  int k = rank % 8;
  return dt_is_float(dtype) ? dt_round(dtype, floats[k]) : ints[k];
}

/* Rank p's input as it enters the sum: PreMulSum's product, rounded to a
 * float type (integers wrap once, at the end: wrapping commutes with the
 * sum). */
static double ref_term(int dtype, int op, double x, int p) {
  if (op != OP_PREMULSUM) return x;
  double v = x * ref_premul_scalar(dtype, p);
  return dt_is_float(dtype) ? dt_round(dtype, v) : v;
}

/* Accumulation in a wide float, rounded once (fp16, bf16, fp8), or in the type itself. */
static int rounds_once(int dtype) { return dtype == 6 || dtype >= 9; }

double ref_reduce(int dtype, int op, const double* xs, int n, double* tolerance) {
  double acc = ref_term(dtype, op, xs[0], 0), sumabs = 0;
  for (int i = 0; i < n; i++) sumabs += fabs(ref_term(dtype, op, xs[i], i));
  for (int i = 1; i < n; i++) {
    switch (op) {
      case OP_SUM: case OP_AVG: acc += xs[i]; break;
      case OP_PREMULSUM: acc += ref_term(dtype, op, xs[i], i); break;
      case OP_PROD: acc *= xs[i]; break;
      case OP_MAX: acc = xs[i] > acc ? xs[i] : acc; break;
      case OP_MIN: acc = xs[i] < acc ? xs[i] : acc; break;
    }
  }
  if (!dt_is_float(dtype)) {
    *tolerance = 0;
    acc = dt_round(dtype, acc); /* wraps like arithmetic in the type */
    if (op == OP_AVG) acc = dt_round(dtype, trunc(acc / n)); /* truncating division */
    return acc;
  }
  if (op == OP_AVG) acc /= n;
  if (op == OP_MAX || op == OP_MIN) {
    *tolerance = 0;
    return acc;
  }
  double scale = op == OP_PROD ? fabs(acc) : sumabs;
  if (rounds_once(dtype)) {
    /* One rounding of the fp32 accumulator into the type: half an ulp of
     * the result, plus fp32's own accumulation error. */
    *tolerance = dt_eps(dtype) * fabs(acc) + (n + 2) * ldexp(1.0, -23) * scale + dt_tiny(dtype);
  } else {
    *tolerance = (n + 2) * dt_eps(dtype) * scale + dt_tiny(dtype);
  }
  return acc;
}
