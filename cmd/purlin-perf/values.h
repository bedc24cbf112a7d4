/*
 * values.h: deterministic test data and the host reference.
 *
 * Rank r's input element j is value(r, j): a pseudo-random pick from a small
 * table chosen per type, op and rank count so that results stay exact:
 * sums of small nonzero integers that fit the type's exact-integer range
 * (so fp16/bf16/fp8 sums are exactly representable for moderate rank
 * counts), powers of two near 1 (+-1/2, +-1, +-2) for products. Integer
 * results wrap exactly as the library's in-type arithmetic does.
 */
#ifndef PERF_VALUES_H_
#define PERF_VALUES_H_

#include "perf.h"

enum perf_op { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_MULSUM, OP_NONE, NUM_PERF_OPS };
extern const char* const op_names[NUM_PERF_OPS];
int op_by_name(const char* name); /* -1 if unknown */
/* Whether NCCL reduces type t with op across nranks ranks: all, but avg and
 * PreMulSum on the float8 types only on two or more (on one rank NCCL
 * returns ncclInvalidArgument there). */
int op_defined(const dtype_t* t, int op, int nranks);

/* Rank r's PreMulSum factor: MULSUM_SCALAR on even ranks, 1 on odd ones.
 * Ranks may pass different scalars (NCCL multiplies each rank's input by
 * its own), and these are exact in every type. */
#define MULSUM_SCALAR 2
static inline int mulsum_scalar(int r) { return r % 2 ? 1 : MULSUM_SCALAR; }

#define VALUE_TABLE_MAX 40

typedef struct {
  const dtype_t* type;
  int op, nranks;
  uint64_t seed;
  int size;                          /* entries in the tables */
  double value[VALUE_TABLE_MAX];     /* the input values */
  uint64_t bits[VALUE_TABLE_MAX];    /* their encodings in type */
  /* exact: every partial result of the reduction is representable, in any
   * order, so a reduced element must equal the reference bit for bit.
   * Otherwise (float averages, too many ranks for the type's exact range)
   * it may differ by the type's tolerance times the larger of the result
   * and term_max, the largest term's magnitude, which covers NCCL's
   * in-type, per-step rounding as well as Purlin's fp32 accumulation. */
  int exact;
  double term_max;
} valuegen_t;

void valuegen_init(valuegen_t* g, const dtype_t* t, int op, int nranks, uint64_t seed);

/* value_index picks rank r's element j; value and bits are g->value/bits at that index. */
static inline int value_index(const valuegen_t* g, int r, size_t j) {
  uint64_t x = g->seed ^ ((uint64_t)r << 48) ^ (uint64_t)j;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (int)(x % (uint64_t)g->size);
}

/* fill_input writes rank r's input elements [0, count) into buf (host memory). */
void fill_input(const valuegen_t* g, int r, void* buf, size_t count);

/* fill_sentinel marks count elements as never written: NaN for floats, 0xA5 bytes
 * for integers (a value no test result can take). */
void fill_sentinel(const dtype_t* t, void* buf, size_t count);

/* reference_reduce writes the expected reduction of input element j over all
 * ranks, for j in [0, count), encoded in the type (rounded once) into out. */
void reference_reduce(const valuegen_t* g, void* out, size_t count);

/* element_matches compares an output element with its expectation (encoded
 * bits): bit for bit for copies and exact reductions, else within tolerance. */
int element_matches(const valuegen_t* g, uint64_t got, uint64_t want, int reduced);

/* AllReduce epilogues (coll_t.epilogue): rank r's residual element j and the
 * weight's element j (the same on every rank) come from the value table too,
 * and RMSNorm's epsilon is EPILOGUE_EPS. */
#define EPILOGUE_EPS 1e-5f
static inline double residual_value(const valuegen_t* g, int r, size_t j) {
  return g->value[value_index(g, PERF_MAX_RANKS + 1 + r, j)];
}
static inline double weight_value(const valuegen_t* g, size_t j) {
  return g->value[value_index(g, 2 * PERF_MAX_RANKS + 1, j)];
}

/* epilogue_matches compares an output element after RMSNorm over rows of
 * hidden elements with its double reference want (computed from the
 * residual the call left, rounded once): within 1 unit in the last place of
 * the type, plus the error of the float32 arithmetic the epilogue is
 * specified in (the mean square accumulated in float32 in any order, then
 * the division, eps, square root, reciprocal and two products), which only
 * float outputs can show: (hidden / 2 + 8) * 2^-24 * |want|. */
int epilogue_matches(const dtype_t* t, size_t hidden, double got, double want);

#endif
