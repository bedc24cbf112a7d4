/*
 * colls_v.c: Purlin's V collectives (AllGatherV, ReduceScatterV, AlltoAllV)
 * with uneven, pseudo-random splits from a fixed seed, so every run and
 * every rank sees the same counts. Only built against purlin_nccl.h.
 */
#include <string.h>

#include "perf.h"

int perf_uneven = 1; /* -u: read by split_uneven; set in every build, used in Purlin's */

#ifdef PERF_PURLIN

/* splitmix64: a small, good mixing function for deterministic choices. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void split_uneven(size_t total, int n, uint64_t seed, size_t* parts) {
  if (!perf_uneven) {
    for (int p = 0; p < n; p++) parts[p] = total / n + ((size_t)p < total % n);
    return;
  }
  uint64_t weight[PERF_MAX_RANKS], sum = 0;
  for (int p = 0; p < n; p++) {
    weight[p] = mix(seed * 131 + p) % 5; /* 0..4: some parts are empty */
    sum += weight[p];
  }
  if (sum == 0) { weight[0] = 1; sum = 1; }
  size_t given = 0;
  for (int p = 0; p < n; p++) {
    parts[p] = (size_t)((unsigned __int128)total * weight[p] / sum);
    given += parts[p];
  }
  for (int p = 0; given < total; p = (p + 1) % n) /* the remainder, to non-empty parts first */
    if (weight[p]) { parts[p]++; given++; }
}

static double factor_ring(int n) { return (double)(n - 1) / n; }

/* The V forms count the whole gathered (or scattered) buffer, like AllGather. */
static int v_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root, int gathers) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->root = root;
  size_t total = bytes / t->size;
  if (total < (size_t)n) return 0;
  s->bytes = total * t->size;
  s->count = total / n;
  split_uneven(total, n, 0x5eed0000 + total, s->counts);
  size_t off = 0;
  for (int r = 0; r < n; r++) { s->displs[r] = off; off += s->counts[r]; }
  for (int r = 0; r < n; r++) {
    s->send_elems[r] = gathers ? s->counts[r] : total;
    s->recv_elems[r] = gathers ? total : s->counts[r];
    s->inplace_elems[r] = total;
    if (gathers) s->send_off[r] = s->displs[r];
    else s->recv_off[r] = s->displs[r];
  }
  return 1;
}

/* find_slice returns the rank whose slice [displs[p], +counts[p]) holds i. */
static int find_slice(const size_t* counts, const size_t* displs, int n, size_t i) {
  for (int p = 0; p < n; p++)
    if (i >= displs[p] && i < displs[p] + counts[p]) return p;
  return -1;
}

/* ---------- AllGatherV ---------- */
static int allgatherv_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return v_shape(s, bytes, t, n, root, 1);
}
static ncclResult_t allgatherv_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  return (ncclResult_t)purlinAllGatherV(c->send[r], c->recv[r], s->counts, s->displs, (purlinDataType_t)c->type->nccl,
                                        (purlinComm_t)c->comm[r], (purlinStream_t)c->stream[r]);
}
static int allgatherv_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)r;
  int p = find_slice(s->counts, s->displs, s->n, i);
  if (p < 0) return SRC_NONE;
  *sr = p;
  *si = i - s->displs[p];
  return SRC_COPY;
}
const coll_t allgatherv = {"allgatherv", 0, 0, 1, 1, factor_ring, allgatherv_shape, allgatherv_issue, allgatherv_source, 0};

/* ---------- ReduceScatterV ---------- */
static int reducescatterv_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  return v_shape(s, bytes, t, n, root, 0);
}
static ncclResult_t reducescatterv_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  return (ncclResult_t)purlinReduceScatterV(c->send[r], c->recv[r], s->counts, s->displs, (purlinDataType_t)c->type->nccl,
                                            (purlinRedOp_t)c->op[r], (purlinComm_t)c->comm[r], (purlinStream_t)c->stream[r]);
}
static int reducescatterv_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)sr;
  *si = s->displs[r] + i;
  return SRC_REDUCE;
}
const coll_t reducescatterv = {"reducescatterv", 1, 0, 1, 1, factor_ring, reducescatterv_shape, reducescatterv_issue, reducescatterv_source, 0};

/* ---------- AlltoAllV: rank s sends sendcounts[s][p] elements to p ---------- */
static int alltoallv_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->root = root;
  size_t total = bytes / t->size; /* each rank's send buffer */
  if (total < (size_t)n) return 0;
  s->bytes = total * t->size;
  s->count = total / n;
  for (int r = 0; r < n; r++) {
    split_uneven(total, n, 0xa11700 + total * 977 + r, s->sendcounts[r]);
    size_t off = 0;
    for (int p = 0; p < n; p++) { s->sdispls[r][p] = off; off += s->sendcounts[r][p]; }
    s->send_elems[r] = total;
  }
  for (int r = 0; r < n; r++) {
    size_t off = 0;
    for (int p = 0; p < n; p++) {
      s->recvcounts[r][p] = s->sendcounts[p][r];
      s->rdispls[r][p] = off;
      off += s->recvcounts[r][p];
    }
    s->recv_elems[r] = off;
    s->inplace_elems[r] = off > total ? off : total;
  }
  return 1;
}
static ncclResult_t alltoallv_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  return (ncclResult_t)purlinAlltoAllV(c->send[r], s->sendcounts[r], s->sdispls[r], c->recv[r], s->recvcounts[r],
                                       s->rdispls[r], (purlinDataType_t)c->type->nccl, (purlinComm_t)c->comm[r],
                                       (purlinStream_t)c->stream[r]);
}
static int alltoallv_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  int p = find_slice(s->recvcounts[r], s->rdispls[r], s->n, i);
  if (p < 0) return SRC_NONE;
  *sr = p;
  *si = s->sdispls[p][r] + (i - s->rdispls[r][p]);
  return SRC_COPY;
}
/* No in-place form: Purlin's AlltoAllV takes disjoint buffers. */
const coll_t alltoallv = {"alltoallv", 0, 0, 0, 1, factor_ring, alltoallv_shape, alltoallv_issue, alltoallv_source, 0};

#endif /* PERF_PURLIN */
