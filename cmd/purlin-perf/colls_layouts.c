/*
 * colls_layouts.c: Purlin's collectives that only their layouts name
 * (purlinCollective). Column blocks: a rank's part is a rows x w block of a
 * row-major rows x (n*w) matrix: all-gather places every rank's packed
 * block in its column block of every output, reduce-scatter leaves each rank
 * its column block of the reduced matrix, packed. rows is the largest power
 * of two up to 64 that divides the block (a batch of tokens, the hidden
 * dimension split over the ranks). All-to-all by a matrix: every pair's
 * size (split_uneven, so -u 0 makes it even) and destination offset in one
 * matrix every rank passes, slices packed by source at each receiver. Only
 * built against purlin_nccl.h.
 */
#include <string.h>

#include "perf.h"

#ifdef PERF_PURLIN

static double factor_ring(int n) { return (double)(n - 1) / n; }

/* rows_of is the matrix's rows for blocks of count elements. */
static size_t rows_of(size_t count) {
  size_t rows = 64;
  while (rows > 1 && count % rows) rows /= 2;
  return rows;
}

/* columns_shape: the size column counts the whole matrix (as AllGather's
 * does its output); a block is count = size/n elements. */
static int columns_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root, int gathers) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->root = root;
  s->count = bytes / ((size_t)t->size * n);
  s->bytes = s->count * t->size * n;
  for (int r = 0; r < n; r++) {
    s->send_elems[r] = gathers ? s->count : n * s->count;
    s->recv_elems[r] = gathers ? n * s->count : s->count;
  }
  return s->count > 0;
}

static ncclResult_t columns_issue(const call_t* c, int r, int gathers) {
  const purlinLayout_t packed = {purlinPacked, 0, 0, 0, 0}, columns = {purlinScattered, 0, 0, 1, 0};
  purlinCollectiveDesc_t d = {.consume = gathers ? purlinConsumeCopy : purlinConsumeReduce,
                              .in = gathers ? packed : columns, .out = gathers ? columns : packed,
                              .sendbuff = c->send[r], .recvbuff = c->recv[r], .count = c->shape->count,
                              .datatype = c->type->nccl, .op = gathers ? 0 : (int)c->op[r],
                              .rows = rows_of(c->shape->count)};
  return (ncclResult_t)purlinCollective(&d, (purlinComm_t)c->comm[r], (purlinStream_t)c->stream[r]);
}

/* ---------- all-gather into column blocks ---------- */
static int allgathercolumns_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return columns_shape(s, bytes, t, n, root, 1);
}
static ncclResult_t allgathercolumns_issue(const call_t* c, int r) { return columns_issue(c, r, 1); }
/* Output element i is row i/(n*w), column i%(n*w): rank column/w's element (row, column%w). */
static int allgathercolumns_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)r;
  const size_t w = s->count / rows_of(s->count), row = i / (s->n * w), col = i % (s->n * w);
  *sr = (int)(col / w);
  *si = row * w + col % w;
  return SRC_COPY;
}
const coll_t allgathercolumns = {"allgathercolumns", 0, 0, 0, 1, factor_ring, allgathercolumns_shape,
                                 allgathercolumns_issue, allgathercolumns_source, 0};

/* ---------- reduce-scatter out of column blocks ---------- */
static int reducescattercolumns_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return columns_shape(s, bytes, t, n, root, 0);
}
static ncclResult_t reducescattercolumns_issue(const call_t* c, int r) { return columns_issue(c, r, 0); }
/* Rank r's element i is row i/w, column r*w + i%w of the reduced matrix. */
static int reducescattercolumns_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)sr;
  const size_t w = s->count / rows_of(s->count);
  *si = (i / w) * s->n * w + r * w + i % w;
  return SRC_REDUCE;
}
const coll_t reducescattercolumns = {"reducescattercolumns", 1, 0, 0, 1, factor_ring, reducescattercolumns_shape,
                                     reducescattercolumns_issue, reducescattercolumns_source, 0};

/* ---------- all-to-all by a matrix: shape_t's sendcounts[p][q] is the matrix, rdispls[q][p] its offsets ---------- */
static int alltoallmatrix_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->root = root;
  size_t total = bytes / t->size; /* each rank's send buffer */
  if (total < (size_t)n) return 0;
  s->bytes = total * t->size;
  s->count = total / n;
  for (int p = 0; p < n; p++) {
    split_uneven(total, n, 0x3a7c1e00 + total * 131 + p, s->sendcounts[p]);
    s->send_elems[p] = total;
  }
  for (int q = 0; q < n; q++) {
    size_t off = 0;
    for (int p = 0; p < n; p++) {
      s->rdispls[q][p] = off;
      off += s->sendcounts[p][q];
    }
    s->recv_elems[q] = off;
  }
  return 1;
}
static ncclResult_t alltoallmatrix_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  const int n = s->n;
  size_t counts[PERF_MAX_RANKS * PERF_MAX_RANKS], displs[PERF_MAX_RANKS * PERF_MAX_RANKS];
  for (int p = 0; p < n; p++)
    for (int q = 0; q < n; q++) counts[p * n + q] = s->sendcounts[p][q], displs[p * n + q] = s->rdispls[q][p];
  const purlinLayout_t from = {purlinScattered, 1, 0, 0, 1}, to = {purlinTransposed, 1, 0, 0, 1};
  purlinCollectiveDesc_t d = {.consume = purlinConsumeCopy, .in = from, .out = to, .sendbuff = c->send[r],
                              .recvbuff = c->recv[r], .counts = counts, .displs = displs, .datatype = c->type->nccl};
  return (ncclResult_t)purlinCollective(&d, (purlinComm_t)c->comm[r], (purlinStream_t)c->stream[r]);
}
static int alltoallmatrix_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  for (int p = 0; p < s->n; p++) {
    if (i >= s->rdispls[r][p] && i < s->rdispls[r][p] + s->sendcounts[p][r]) {
      size_t at = 0;
      for (int k = 0; k < r; k++) at += s->sendcounts[p][k];
      *sr = p;
      *si = at + (i - s->rdispls[r][p]);
      return SRC_COPY;
    }
  }
  return SRC_NONE;
}
const coll_t alltoallmatrix = {"alltoallmatrix", 0, 0, 0, 1, factor_ring, alltoallmatrix_shape,
                               alltoallmatrix_issue, alltoallmatrix_source, 0};

#endif /* PERF_PURLIN */
