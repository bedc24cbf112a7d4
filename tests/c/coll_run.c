/* coll_run.c: coll_run, the launch-and-check half of coll.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "dtypes.h"
#include "harness.h"
#include "reference.h"

enum { GUARD_BYTES = 64, GUARD_BYTE = 0xA5, MAX_RANKS = 64 };

/* coll.c's shape helpers, shared by the two halves. */
#include "coll_shape.h"

/* One rank's buffers. In place, send and recv point into one region (`io`)
 * at the offsets NCCL defines; out of place they are separate. */
typedef struct {
  unsigned char *io, *send, *recv;
  size_t io_bytes, send_bytes, recv_bytes;
  unsigned char* send_copy; /* out of place: the input, to check it is left alone */
  size_t counts[MAX_RANKS], displs[MAX_RANKS], rcounts[MAX_RANKS], rdispls[MAX_RANKS];
  ncclRedOp_t op;
  int op_created;
  unsigned char scalar[8]; /* PreMulSum: the scalar's memory (ncclScalarDevice reads it at run time) */
} rank_bufs;

static unsigned char* alloc_guarded(size_t bytes) {
  unsigned char* p = malloc(bytes + GUARD_BYTES);
  memset(p, 0x5A, bytes); /* a pattern no correct output equals everywhere */
  memset(p + bytes, GUARD_BYTE, GUARD_BYTES);
  return p;
}

static int guard_intact(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < GUARD_BYTES; i++)
    if (p[bytes + i] != GUARD_BYTE) return 0;
  return 1;
}

/* Where the input and output live inside the in-place region, in elements. */
static void inplace_offsets(const coll_case* c, int n, int r, size_t* len, size_t* send_off, size_t* recv_off) {
  size_t k = c->count;
  *len = k, *send_off = 0, *recv_off = 0;
  switch (c->coll) {
    case COLL_ALLGATHER: *len = n * k, *send_off = r * k; break;
    case COLL_REDUCESCATTER: *len = n * k, *recv_off = r * k; break;
    case COLL_GATHER: *len = n * k, *send_off = c->root * k; break;
    case COLL_SCATTER: *len = n * k, *recv_off = c->root * k; break;
  }
}

static void setup_rank(const coll_case* c, const shape* s, double* input, int r, rank_bufs* b) {
  size_t es = dt_size(c->dtype), il = shape_in_len(c, s, r), ol = shape_out_len(c, s, r);
  int inplace = c->inplace && coll_has_inplace(c->coll) &&
                !((c->coll == COLL_GATHER || c->coll == COLL_SCATTER) && r != c->root);
  memset(b, 0, sizeof *b);
  if (inplace) {
    size_t len, so, ro;
    inplace_offsets(c, s->n, r, &len, &so, &ro);
    b->io_bytes = len * es;
    b->io = alloc_guarded(b->io_bytes);
    b->send = b->io + so * es;
    b->recv = b->io + ro * es;
  } else {
    /* Bcast has one buffer: the root's input, every rank's output. */
    size_t sl = c->coll == COLL_BCAST ? 0 : il;
    b->send_bytes = sl * es;
    b->send = alloc_guarded(b->send_bytes);
    b->recv_bytes = (c->coll == COLL_BCAST ? c->count : ol) * es;
    b->recv = alloc_guarded(b->recv_bytes);
  }
  unsigned char* in = c->coll == COLL_BCAST ? b->recv : b->send;
  for (size_t i = 0; i < il; i++) dt_store(c->dtype, in, i, input[i]);
  if (!inplace && b->send_bytes) {
    b->send_copy = malloc(b->send_bytes);
    memcpy(b->send_copy, b->send, b->send_bytes);
  }
  for (int p = 0; p < s->n; p++) {
    b->counts[p] = c->coll == COLL_ALLTOALLV ? s->a2a[r][p] : s->vcount[p];
    b->displs[p] = c->coll == COLL_ALLTOALLV ? (p ? b->displs[p - 1] + b->counts[p - 1] : 0) : s->vdispl[p];
    b->rcounts[p] = s->a2a[p][r];
    b->rdispls[p] = p ? b->rdispls[p - 1] + b->rcounts[p - 1] : 0;
  }
  b->op = (ncclRedOp_t)c->op;
}

static ncclResult_t launch(const coll_case* c, int n, int r, rank_bufs* b, ncclComm_t comm) {
  ncclDataType_t dt = (ncclDataType_t)c->dtype;
  size_t k = c->count;
  switch (c->coll) {
    case COLL_ALLREDUCE: return ncclAllReduce(b->send, b->recv, k, dt, b->op, comm, NULL);
    case COLL_BROADCAST: return ncclBroadcast(b->send, b->recv, k, dt, c->root, comm, NULL);
    case COLL_BCAST: return ncclBcast(b->io ? b->io : b->recv, k, dt, c->root, comm, NULL);
    case COLL_REDUCE: return ncclReduce(b->send, b->recv, k, dt, b->op, c->root, comm, NULL);
    case COLL_ALLGATHER: return ncclAllGather(b->send, b->recv, k, dt, comm, NULL);
    case COLL_REDUCESCATTER: return ncclReduceScatter(b->send, b->recv, k, dt, b->op, comm, NULL);
    case COLL_ALLTOALL: return ncclAlltoAll(b->send, b->recv, k, dt, comm, NULL);
    case COLL_GATHER: return ncclGather(b->send, b->recv, k, dt, c->root, comm, NULL);
    case COLL_SCATTER: return ncclScatter(b->send, b->recv, k, dt, c->root, comm, NULL);
    case COLL_SENDRECV: {
      ncclResult_t rc = ncclSend(b->send, k, dt, (r + 1) % n, comm, NULL);
      return rc != ncclSuccess ? rc : ncclRecv(b->recv, k, dt, (r + n - 1) % n, comm, NULL);
    }
    case COLL_ALLGATHERV:
      return (ncclResult_t)purlinAllGatherV(b->send, b->recv, b->counts, b->displs, (purlinDataType_t)dt, PC(comm), NULL);
    case COLL_REDUCESCATTERV:
      return (ncclResult_t)purlinReduceScatterV(b->send, b->recv, b->counts, b->displs, (purlinDataType_t)dt,
                                                (purlinRedOp_t)b->op, PC(comm), NULL);
    case COLL_ALLTOALLV:
      return (ncclResult_t)purlinAlltoAllV(b->send, b->counts, b->displs, b->recv, b->rcounts, b->rdispls,
                                           (purlinDataType_t)dt, PC(comm), NULL);
  }
  return ncclInvalidArgument;
}

static void check_rank(const coll_case* c, const shape* s, double** in, int r, rank_bufs* b, const char* what) {
  size_t ol = shape_out_len(c, s, r);
  for (size_t j = 0; j < ol; j++) {
    double tol, want = shape_expected(c, s, in, r, j, &tol);
    double got = dt_load(c->dtype, b->recv, j);
    if (!(fabs(got - want) <= tol)) {
      FAILF("%s: rank %d element %zu of %zu: got %.9g, want %.9g (tolerance %.3g)", what, r, j, ol, got, want, tol);
      return;
    }
  }
  if (b->io && !guard_intact(b->io, b->io_bytes)) FAILF("%s: rank %d wrote past its buffer", what, r);
  if (!b->io && !guard_intact(b->recv, b->recv_bytes)) FAILF("%s: rank %d wrote past recvbuff", what, r);
  if (b->send_copy && memcmp(b->send_copy, b->send, b->send_bytes) != 0)
    FAILF("%s: rank %d: an out-of-place call changed sendbuff", what, r);
}

/* create_premul makes rank r's PreMulSum op with its own scalar. Ranks
 * alternate residences (which one starts depends on the seed): a
 * host-immediate scalar is read now, so its memory then holds another
 * value; a device-resident one (host memory on the host Atom) is read when
 * the collective runs, so it holds another value until after creation. */
static void create_premul(const coll_case* c, int r, rank_bufs* b, ncclComm_t comm, const char* what) {
  ncclScalarResidence_t res = (r + c->seed) & 1 ? ncclScalarDevice : ncclScalarHostImmediate;
  double mine = ref_premul_scalar(c->dtype, r), other = ref_premul_scalar(c->dtype, r + 1);
  dt_store(c->dtype, b->scalar, 0, res == ncclScalarDevice ? other : mine);
  ncclResult_t rc = ncclRedOpCreatePreMulSum(&b->op, b->scalar, (ncclDataType_t)c->dtype, res, comm);
  dt_store(c->dtype, b->scalar, 0, res == ncclScalarDevice ? mine : other);
  if (rc != ncclSuccess) FAILF("%s: ncclRedOpCreatePreMulSum rank %d: %d (%s)", what, r, rc, ncclGetLastError(comm));
  else b->op_created = 1;
}

static void free_rank(rank_bufs* b) {
  if (b->io) free(b->io);
  else free(b->send), free(b->recv);
  free(b->send_copy);
}

int coll_run(const coll_case* c, int nranks, ncclComm_t* comms, int lo, int hi) {
  char what[256];
  coll_describe(c, nranks, what, sizeof what);
  int before = harness_failed();
  shape s;
  shape_init(&s, c, nranks);
  double* in[MAX_RANKS];
  for (int p = 0; p < nranks; p++) {
    size_t len = shape_in_len(c, &s, p);
    in[p] = malloc((len ? len : 1) * sizeof(double));
    shape_gen_input(c, p, in[p], len);
  }
  rank_bufs bufs[MAX_RANKS];
  for (int r = lo; r < hi; r++) {
    setup_rank(c, &s, in[r], r, &bufs[r]);
    if (c->op == OP_PREMULSUM && coll_reduces(c->coll)) create_premul(c, r, &bufs[r], comms[r], what);
  }
  int grouped = hi - lo > 1 || c->coll == COLL_SENDRECV;
  if (harness_failed() == before) {
    if (grouped) ncclGroupStart();
    for (int r = lo; r < hi; r++) {
      ncclResult_t rc = launch(c, nranks, r, &bufs[r], comms[r]);
      if (rc != ncclSuccess) FAILF("%s: rank %d launch returned %d (%s)", what, r, rc, ncclGetLastError(comms[r]));
    }
    if (grouped) {
      ncclResult_t rc = ncclGroupEnd();
      if (rc != ncclSuccess) FAILF("%s: ncclGroupEnd returned %d (%s)", what, rc, ncclGetLastError(NULL));
    }
    for (int r = lo; r < hi; r++) {
      purlinResult_t rc = purlinCommSynchronize(PC(comms[r]));
      if (rc != purlinSuccess) FAILF("%s: rank %d synchronize returned %d (%s)", what, r, rc, ncclGetLastError(comms[r]));
    }
    if (harness_failed() == before)
      for (int r = lo; r < hi; r++) check_rank(c, &s, in, r, &bufs[r], what);
  }
  for (int r = lo; r < hi; r++) {
    if (bufs[r].op_created) ncclRedOpDestroy(bufs[r].op, comms[r]);
    free_rank(&bufs[r]);
  }
  for (int p = 0; p < nranks; p++) free(in[p]);
  return harness_failed() - before;
}
