/* coll.c: see coll.h. */
#include "coll.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "harness.h"
#include "reference.h"
#include "coll_shape.h"

enum { MAX_RANKS = 64 };

const char* coll_name(int coll) {
  static const char* names[COLL_COUNT] = {
      "AllReduce", "Broadcast", "Bcast",     "Reduce",     "AllGather",      "ReduceScatter",
      "AlltoAll",  "Gather",    "Scatter",   "SendRecv",   "AllGatherV",     "ReduceScatterV",
      "AlltoAllV"};
  return coll >= 0 && coll < COLL_COUNT ? names[coll] : "?";
}

int coll_reduces(int coll) {
  return coll == COLL_ALLREDUCE || coll == COLL_REDUCE || coll == COLL_REDUCESCATTER ||
         coll == COLL_REDUCESCATTERV;
}

int coll_has_inplace(int coll) {
  return coll == COLL_ALLREDUCE || coll == COLL_BROADCAST || coll == COLL_BCAST ||
         coll == COLL_REDUCE || coll == COLL_ALLGATHER || coll == COLL_REDUCESCATTER ||
         coll == COLL_GATHER || coll == COLL_SCATTER;
}

void coll_describe(const coll_case* c, int nranks, char* out, size_t size) {
  snprintf(out, size, "%s nranks=%d %s%s%s count=%zu root=%d %s seed=%llu", coll_name(c->coll),
           nranks, dt_name(c->dtype), coll_reduces(c->coll) ? " " : "",
           coll_reduces(c->coll) ? op_name(c->op) : "", c->count, c->root,
           c->inplace ? "in-place" : "out-of-place", (unsigned long long)c->seed);
}

/* ---------- the shape of a call: element counts of every rank ---------- */

void shape_init(shape* s, const coll_case* c, int n) {
  memset(s, 0, sizeof *s);
  s->n = n;
  rng_t r = {c->seed ^ 0x5eedull};
  for (int p = 0; p < n; p++) {
    s->vcount[p] = c->count ? (size_t)(rng_next(&r) % (c->count + 1)) : 0;
    s->vdispl[p] = s->vtotal;
    s->vtotal += s->vcount[p];
    for (int q = 0; q < n; q++) s->a2a[p][q] = c->count ? (size_t)(rng_next(&r) % (c->count + 1)) : 0;
  }
}

static size_t row_sum(const size_t* v, int n) {
  size_t t = 0;
  for (int i = 0; i < n; i++) t += v[i];
  return t;
}

/* Elements rank r's input holds. */
size_t shape_in_len(const coll_case* c, const shape* s, int r) {
  size_t n = (size_t)s->n, k = c->count;
  switch (c->coll) {
    case COLL_REDUCESCATTER: case COLL_ALLTOALL: return n * k;
    case COLL_SCATTER: return r == c->root ? n * k : 0;
    case COLL_BROADCAST: case COLL_BCAST: return r == c->root ? k : 0;
    case COLL_ALLGATHERV: return s->vcount[r];
    case COLL_REDUCESCATTERV: return s->vtotal;
    case COLL_ALLTOALLV: return row_sum(s->a2a[r], s->n);
    default: return k;
  }
}

/* Elements of rank r's output that the call defines. */
size_t shape_out_len(const coll_case* c, const shape* s, int r) {
  size_t n = (size_t)s->n, k = c->count;
  switch (c->coll) {
    case COLL_ALLGATHER: case COLL_ALLTOALL: return n * k;
    case COLL_REDUCE: return r == c->root ? k : 0;
    case COLL_GATHER: return r == c->root ? n * k : 0;
    case COLL_ALLGATHERV: return s->vtotal;
    case COLL_REDUCESCATTERV: return s->vcount[r];
    case COLL_ALLTOALLV: {
      size_t t = 0;
      for (int p = 0; p < s->n; p++) t += s->a2a[p][r];
      return t;
    }
    default: return k;
  }
}

void shape_gen_input(const coll_case* c, int r, double* out, size_t len) {
  rng_t g = {c->seed * 0x100000001b3ull + (uint64_t)r + 1};
  for (size_t i = 0; i < len; i++) out[i] = ref_random_input(&g, c->dtype, c->op);
}

/* The value element j of rank r's output should hold, and its tolerance. */
double shape_expected(const coll_case* c, const shape* s, double** in, int r, size_t j, double* tol) {
  size_t k = c->count;
  int n = s->n;
  double xs[MAX_RANKS];
  *tol = 0;
  switch (c->coll) {
    case COLL_ALLREDUCE: case COLL_REDUCE:
      for (int p = 0; p < n; p++) xs[p] = in[p][j];
      return ref_reduce(c->dtype, c->op, xs, n, tol);
    case COLL_REDUCESCATTER:
      for (int p = 0; p < n; p++) xs[p] = in[p][(size_t)r * k + j];
      return ref_reduce(c->dtype, c->op, xs, n, tol);
    case COLL_REDUCESCATTERV:
      for (int p = 0; p < n; p++) xs[p] = in[p][s->vdispl[r] + j];
      return ref_reduce(c->dtype, c->op, xs, n, tol);
    case COLL_BROADCAST: case COLL_BCAST: return in[c->root][j];
    case COLL_ALLGATHER: case COLL_GATHER: return in[j / k][j % k];
    case COLL_ALLTOALL: return in[j / k][(size_t)r * k + j % k];
    case COLL_SCATTER: return in[c->root][(size_t)r * k + j];
    case COLL_SENDRECV: return in[(r + n - 1) % n][j];
    case COLL_ALLGATHERV: {
      int p = 0;
      while (j >= s->vdispl[p] + s->vcount[p]) p++;
      return in[p][j - s->vdispl[p]];
    }
    case COLL_ALLTOALLV: {
      int p = 0;
      size_t at = 0; /* rdispls are packed in rank order */
      while (j >= at + s->a2a[p][r]) at += s->a2a[p++][r];
      size_t sdispl = 0; /* p's sdispls are packed too */
      for (int q = 0; q < r; q++) sdispl += s->a2a[p][q];
      return in[p][sdispl + (j - at)];
    }
  }
  return NAN;
}
