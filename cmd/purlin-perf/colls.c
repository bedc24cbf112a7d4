/*
 * colls.c: NCCL's collectives as purlin-perf benchmarks them: extents,
 * in-place positions, the calls one rank makes, and each output element's
 * source. Sizes and busbw follow nccl-tests (doc/PERFORMANCE.md).
 */
#include <string.h>

#include "perf.h"

static double factor_one(int n) { (void)n; return 1.0; }
static double factor_ring(int n) { return (double)(n - 1) / n; }
static double factor_allreduce(int n) { return 2.0 * (n - 1) / n; }

/* shape_fixed fills a shape whose buffers are count or n*count elements.
 * per_rank_div is how many count-slices the size column holds (1 or n). */
static int shape_fixed(shape_t* s, size_t bytes, const dtype_t* t, int n, int root,
                       int per_rank_div, size_t send_slices, size_t recv_slices) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->root = root;
  s->count = bytes / ((size_t)t->size * per_rank_div);
  s->bytes = s->count * t->size * per_rank_div;
  for (int r = 0; r < n; r++) {
    s->send_elems[r] = send_slices * s->count;
    s->recv_elems[r] = recv_slices * s->count;
    s->inplace_elems[r] = s->send_elems[r] > s->recv_elems[r] ? s->send_elems[r] : s->recv_elems[r];
  }
  return s->count > 0;
}

/* ---------- AllReduce: packed -> packed, reduce ---------- */
static int allreduce_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return shape_fixed(s, bytes, t, n, root, 1, 1, 1);
}
static ncclResult_t allreduce_issue(const call_t* c, int r) {
  return ncclAllReduce(c->send[r], c->recv[r], c->shape->count, c->type->nccl, c->op[r], c->comm[r], c->stream[r]);
}
static int allreduce_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)s; (void)r; (void)sr;
  *si = i;
  return SRC_REDUCE;
}
static const coll_t allreduce = {"allreduce", 1, 0, 1, 0, factor_allreduce, allreduce_shape, allreduce_issue, allreduce_source, 0};

/* ---------- AllGather: rank r's count elements land at r*count; in place at recv + r*count ---------- */
static int allgather_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  if (!shape_fixed(s, bytes, t, n, root, n, 1, n)) return 0;
  for (int r = 0; r < n; r++) s->send_off[r] = r * s->count;
  return 1;
}
static ncclResult_t allgather_issue(const call_t* c, int r) {
  return ncclAllGather(c->send[r], c->recv[r], c->shape->count, c->type->nccl, c->comm[r], c->stream[r]);
}
static int allgather_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)r;
  *sr = (int)(i / s->count);
  *si = i % s->count;
  return SRC_COPY;
}
static const coll_t allgather = {"allgather", 0, 0, 1, 0, factor_ring, allgather_shape, allgather_issue, allgather_source, 0};

/* ---------- ReduceScatter: rank r gets slice r reduced; in place at send + r*count ---------- */
static int reducescatter_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  if (!shape_fixed(s, bytes, t, n, root, n, n, 1)) return 0;
  for (int r = 0; r < n; r++) s->recv_off[r] = r * s->count;
  return 1;
}
static ncclResult_t reducescatter_issue(const call_t* c, int r) {
  return ncclReduceScatter(c->send[r], c->recv[r], c->shape->count, c->type->nccl, c->op[r], c->comm[r], c->stream[r]);
}
static int reducescatter_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)sr;
  *si = r * s->count + i;
  return SRC_REDUCE;
}
static const coll_t reducescatter = {"reducescatter", 1, 0, 1, 0, factor_ring, reducescatter_shape, reducescatter_issue, reducescatter_source, 0};

/* ---------- AlltoAll: my slice p is rank p's slice addressed to me ---------- */
static int alltoall_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return shape_fixed(s, bytes, t, n, root, n, n, n);
}
static ncclResult_t alltoall_issue(const call_t* c, int r) {
  return ncclAlltoAll(c->send[r], c->recv[r], c->shape->count, c->type->nccl, c->comm[r], c->stream[r]);
}
static int alltoall_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  *sr = (int)(i / s->count);
  *si = r * s->count + i % s->count;
  return SRC_COPY;
}
/* In place (send == recv) is Purlin's; NCCL 2.28 gives wrong results for it (seen on H200s), so
 * a build against the real nccl.h leaves it out. */
#ifdef PERF_PURLIN
#define ALLTOALL_INPLACE 1
#else
#define ALLTOALL_INPLACE 0
#endif
static const coll_t alltoall = {"alltoall", 0, 0, ALLTOALL_INPLACE, 0, factor_ring, alltoall_shape, alltoall_issue, alltoall_source, 0};

/* ---------- Broadcast: the root's count elements everywhere; in place through ncclBcast ---------- */
static int broadcast_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return shape_fixed(s, bytes, t, n, root, 1, 1, 1);
}
static ncclResult_t broadcast_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  if (c->inplace) return ncclBcast(c->recv[r], s->count, c->type->nccl, s->root, c->comm[r], c->stream[r]);
  return ncclBroadcast(c->send[r], c->recv[r], s->count, c->type->nccl, s->root, c->comm[r], c->stream[r]);
}
static int broadcast_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)r;
  *sr = s->root;
  *si = i;
  return SRC_COPY;
}
static const coll_t broadcast = {"broadcast", 0, 1, 1, 0, factor_one, broadcast_shape, broadcast_issue, broadcast_source, 0};

/* ---------- Reduce: the reduction lands on the root only ---------- */
static ncclResult_t reduce_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  return ncclReduce(c->send[r], c->recv[r], s->count, c->type->nccl, c->op[r], s->root, c->comm[r], c->stream[r]);
}
static int reduce_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)sr;
  *si = i;
  return r == s->root ? SRC_REDUCE : SRC_NONE;
}
static const coll_t reduce = {"reduce", 1, 1, 1, 0, factor_one, allreduce_shape, reduce_issue, reduce_source, 0};

/* ---------- Gather: the root receives every rank's count elements, rank order ---------- */
static ncclResult_t gather_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  return ncclGather(c->send[r], c->recv[r], s->count, c->type->nccl, s->root, c->comm[r], c->stream[r]);
}
static int gather_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  if (r != s->root) return SRC_NONE;
  return allgather_source(s, r, i, sr, si);
}
static const coll_t gather = {"gather", 0, 1, 1, 0, factor_ring, allgather_shape, gather_issue, gather_source, 0};

/* ---------- Scatter: rank r receives slice r of the root's buffer ---------- */
static ncclResult_t scatter_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  return ncclScatter(c->send[r], c->recv[r], s->count, c->type->nccl, s->root, c->comm[r], c->stream[r]);
}
static int scatter_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  *sr = s->root;
  *si = r * s->count + i;
  return SRC_COPY;
}
static const coll_t scatter = {"scatter", 0, 1, 1, 0, factor_ring, reducescatter_shape, scatter_issue, scatter_source, 0};

/* ---------- SendRecv: a ring; each rank sends to r+1 and receives from r-1, in one group ---------- */
static ncclResult_t sendrecv_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  int n = s->n;
  ncclResult_t res = ncclSend(c->send[r], s->count, c->type->nccl, (r + 1) % n, c->comm[r], c->stream[r]);
  if (res != ncclSuccess) return res;
  return ncclRecv(c->recv[r], s->count, c->type->nccl, (r + n - 1) % n, c->comm[r], c->stream[r]);
}
static int sendrecv_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  *sr = (r + s->n - 1) % s->n;
  *si = i;
  return SRC_COPY;
}
/* No in-place form: a rank's receive would overwrite what its own send still reads. */
static const coll_t sendrecv = {"sendrecv", 0, 0, 0, 0, factor_one, allreduce_shape, sendrecv_issue, sendrecv_source, 0};

extern const coll_t allgatherv, reducescatterv, alltoallv;  /* colls_v.c */
extern const coll_t allgathercolumns, reducescattercolumns, alltoallmatrix; /* colls_layouts.c */
extern const coll_t allreduce_rmsnorm; /* colls_epilogue.c */

const coll_t* const colls[] = {
    &allreduce, &allgather, &reducescatter, &alltoall, &broadcast, &reduce, &gather, &scatter, &sendrecv,
#ifdef PERF_PURLIN
    &allgatherv, &reducescatterv, &alltoallv, &allgathercolumns, &reducescattercolumns,
    &alltoallmatrix, &allreduce_rmsnorm,
#endif
};
const int num_colls = sizeof(colls) / sizeof(colls[0]);

const coll_t* coll_by_name(const char* name) {
  for (int i = 0; i < num_colls; i++)
    if (strcmp(colls[i]->name, name) == 0) return colls[i];
  return NULL;
}
