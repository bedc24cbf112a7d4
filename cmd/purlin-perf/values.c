/* values.c: test data and reference results (see values.h). */
#include "values.h"

#include <math.h>
#include <string.h>

const char* const op_names[NUM_PERF_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum", "none"};

int op_by_name(const char* name) {
  for (int i = 0; i < NUM_PERF_OPS; i++)
    if (strcmp(op_names[i], name) == 0) return i;
  if (strcmp(name, "premulsum") == 0) return OP_MULSUM;
  return -1;
}

int op_defined(const dtype_t* t, int op, int nranks) {
  return nranks > 1 || (op != OP_AVG && op != OP_MULSUM) || (t->nccl != ncclFloat8e4m3 && t->nccl != ncclFloat8e5m2);
}

static void add(valuegen_t* g, double v) {
  if (g->size >= VALUE_TABLE_MAX) return;
  g->value[g->size] = v;
  unsigned char tmp[8] = {0};
  if (g->type->kind == KIND_FLOAT) store_float(g->type, tmp, 0, v);
  else store_bits(g->type, tmp, 0, (uint64_t)(int64_t)v);
  g->bits[g->size] = load_bits(g->type, tmp, 0);
  g->size++;
}

void valuegen_init(valuegen_t* g, const dtype_t* t, int op, int nranks, uint64_t seed) {
  memset(g, 0, sizeof(*g));
  g->type = t;
  g->op = op;
  g->nranks = nranks;
  g->seed = seed;
  g->exact = t->kind != KIND_FLOAT; /* integers wrap exactly */
  if (op == OP_PROD) {
    if (t->kind == KIND_FLOAT) { add(g, 0.5); add(g, -0.5); }
    add(g, 1); add(g, 2);
    if (t->kind != KIND_UNSIGNED) { add(g, -1); add(g, -2); }
    g->term_max = 2;
    /* Products of n factors in [1/2, 2] are powers of two in [2^-n, 2^n]. */
    double hi = ldexp(1, nranks), lo = ldexp(1, -nranks);
    if (t->kind == KIND_FLOAT) g->exact = round_float(t, hi) == hi && round_float(t, lo) == lo;
    return;
  }
  /* Keep |sum| within the exact range: n values of magnitude <= R, times the largest PreMulSum factor. */
  double scale = op == OP_MULSUM ? MULSUM_SCALAR : 1;
  double r = floor(t->exact_limit / (nranks * scale));
  int range = r < 1 ? 1 : r > 16 ? 16 : (int)r;
  for (int v = 1; v <= range; v++) {
    add(g, v);
    if (t->kind != KIND_UNSIGNED) add(g, -v);
  }
  g->term_max = range * scale;
  if (t->kind == KIND_FLOAT) {
    int sums_exact = nranks * range * scale <= t->exact_limit;
    int pow2 = (nranks & (nranks - 1)) == 0; /* then an average is a sum times an exact 1/n */
    g->exact = op == OP_AVG ? sums_exact && pow2 : sums_exact;
  }
}

void fill_input(const valuegen_t* g, int r, void* buf, size_t count) {
  const dtype_t* t = g->type;
  for (size_t j = 0; j < count; j++) store_bits(t, buf, j, g->bits[value_index(g, r, j)]);
}

void fill_sentinel(const dtype_t* t, void* buf, size_t count) {
  memset(buf, t->kind == KIND_FLOAT ? 0xff : 0xa5, count * t->size);
}

/* The integer reference: in-type wrapping arithmetic, Go-style truncating average. */
static uint64_t reduce_int(const valuegen_t* g, size_t j) {
  const dtype_t* t = g->type;
  int n = g->nranks;
  uint64_t acc = 0;
  int64_t best = 0;
  for (int r = 0; r < n; r++) {
    int64_t v = (int64_t)g->value[value_index(g, r, j)];
    switch (g->op) {
      case OP_PROD: acc = r ? acc * (uint64_t)v : (uint64_t)v; break;
      case OP_MAX: best = (r == 0 || v > best) ? v : best; break;
      case OP_MIN: best = (r == 0 || v < best) ? v : best; break;
      case OP_MULSUM: acc += (uint64_t)v * (uint64_t)mulsum_scalar(r); break;
      default: acc += (uint64_t)v; break; /* sum, avg */
    }
  }
  if (g->op == OP_MAX || g->op == OP_MIN) return (uint64_t)best;
  if (g->op == OP_AVG) {
    if (t->kind == KIND_SIGNED) return (uint64_t)(sign_extend(t, acc) / n);
    uint64_t mask = t->size == 8 ? ~0ull : (1ull << (8 * t->size)) - 1;
    return (acc & mask) / (uint64_t)n;
  }
  return acc;
}

/* The float reference: exact in double for the chosen values, rounded once on store. */
static double reduce_float(const valuegen_t* g, size_t j) {
  int n = g->nranks;
  double acc = 0;
  for (int r = 0; r < n; r++) {
    double v = g->value[value_index(g, r, j)];
    switch (g->op) {
      case OP_PROD: acc = r ? acc * v : v; break;
      case OP_MAX: acc = (r == 0 || v > acc) ? v : acc; break;
      case OP_MIN: acc = (r == 0 || v < acc) ? v : acc; break;
      case OP_MULSUM: acc += v * mulsum_scalar(r); break;
      default: acc += v; break;
    }
  }
  return g->op == OP_AVG ? acc / n : acc;
}

void reference_reduce(const valuegen_t* g, void* out, size_t count) {
  const dtype_t* t = g->type;
  for (size_t j = 0; j < count; j++) {
    if (t->kind == KIND_FLOAT) store_float(t, out, j, reduce_float(g, j));
    else store_bits(t, out, j, reduce_int(g, j));
  }
}

int element_matches(const valuegen_t* g, uint64_t got, uint64_t want, int reduced) {
  const dtype_t* t = g->type;
  if (got == want) return 1;
  if (!reduced || g->exact) return 0;
  unsigned char a[8] = {0}, b[8] = {0};
  store_bits(t, a, 0, got);
  store_bits(t, b, 0, want);
  double x = load_float(t, a, 0), y = load_float(t, b, 0);
  if (isnan(x) || isnan(y)) return 0;
  double mag = fabs(y) > g->term_max ? fabs(y) : g->term_max;
  return fabs(x - y) <= t->tolerance * mag;
}

int epilogue_matches(const dtype_t* t, size_t hidden, double got, double want) {
  if (isnan(got) || isnan(want)) return 0;
  int bias = (1 << (t->ebits - 1)) - 1;
  double tiny = ldexp(1, 1 - bias - t->mbits); /* the smallest subnormal */
  double ulp = want == 0 ? tiny : ldexp(1, ilogb(want) - t->mbits);
  if (ulp < tiny) ulp = tiny;
  double slack = ((double)hidden / 2 + 8) * ldexp(1, -24) * fabs(want);
  return fabs(got - want) <= ulp + slack;
}
