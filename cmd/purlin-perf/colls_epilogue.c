/*
 * colls_epilogue.c: Purlin's AllReduce epilogues (purlinAllReduceEpilogue).
 * allreduce_rmsnorm is what a transformer layer runs after its
 * tensor-parallel all-reduce, fused into it: each rank adds its residual to
 * the reduced rows (the residual updated in place) and applies RMSNorm with
 * a weight, rows of -H elements (default 4096); a size's count is rounded
 * down to whole rows. Sizes, counts and busbw are allreduce's. NCCL has no
 * such call (there the same work is an all-reduce and separate kernels), so
 * its rows are Purlin's alone; only built against purlin_nccl.h. The check
 * (bench.c) compares the residual with the reduction plus the initial
 * residual, and the output with RMSNorm of that residual.
 */
#include <string.h>

#include "perf.h"
#include "values.h"

size_t perf_hidden = 4096;

int epilogue_type(const dtype_t* t) {
  return t->nccl == ncclFloat32 || t->nccl == ncclFloat16 || t->nccl == ncclBfloat16;
}

#ifdef PERF_PURLIN

static double factor_allreduce(int n) { return 2.0 * (n - 1) / n; }

static int allreduce_rmsnorm_shape(shape_t* s, size_t bytes, const dtype_t* t, int n, int root) {
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->root = root;
  s->hidden = perf_hidden;
  s->count = bytes / t->size / s->hidden * s->hidden;
  s->bytes = s->count * t->size;
  for (int r = 0; r < n; r++) s->send_elems[r] = s->recv_elems[r] = s->inplace_elems[r] = s->count;
  return s->count > 0;
}

static ncclResult_t allreduce_rmsnorm_issue(const call_t* c, int r) {
  const shape_t* s = c->shape;
  purlinEpilogue_t e = {.kind = purlinEpilogueResidualAdd | purlinEpilogueRMSNorm, .hidden = s->hidden,
                        .residual = c->residual[r], .weight = c->weight[r], .eps = EPILOGUE_EPS};
  return (ncclResult_t)purlinAllReduceEpilogue(c->send[r], c->recv[r], s->count, (purlinDataType_t)c->type->nccl,
                                               (purlinRedOp_t)c->op[r], &e, (purlinComm_t)c->comm[r],
                                               (purlinStream_t)c->stream[r]);
}

/* Element i starts from the reduction of input element i. */
static int allreduce_rmsnorm_source(const shape_t* s, int r, size_t i, int* sr, size_t* si) {
  (void)s; (void)r; (void)sr;
  *si = i;
  return SRC_REDUCE;
}

const coll_t allreduce_rmsnorm = {"allreduce_rmsnorm", 1, 0, 1, 1, factor_allreduce, allreduce_rmsnorm_shape,
                                  allreduce_rmsnorm_issue, allreduce_rmsnorm_source,
                                  purlinEpilogueResidualAdd | purlinEpilogueRMSNorm};

#endif /* PERF_PURLIN */
