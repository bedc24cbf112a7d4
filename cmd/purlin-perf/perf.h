/*
 * perf.h: the shared vocabulary of purlin-perf.
 *
 * A collective (coll_t) says how a benchmark size becomes buffer extents
 * (shape_t), how one rank issues one iteration of it through the NCCL API,
 * and where every output element comes from (a copy of one rank's input
 * element, or the reduction of all ranks' input element j). The benchmark
 * loop (bench.c) and the checker (check.c) know nothing else about it.
 */
#ifndef PERF_PERF_H_
#define PERF_PERF_H_

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "nccl_api.h"

#define PERF_MAX_RANKS 32

/* Buffer extents of one benchmark size, in elements. */
typedef struct {
  int n, root;
  size_t count;  /* the count column (and the count argument, for the fixed forms) */
  size_t bytes;  /* the size column: the largest buffer of a rank, as nccl-tests counts it */
  size_t send_elems[PERF_MAX_RANKS], recv_elems[PERF_MAX_RANKS];
  /* In place, one buffer of inplace_elems per rank: send at send_off, recv at recv_off. */
  size_t inplace_elems[PERF_MAX_RANKS], send_off[PERF_MAX_RANKS], recv_off[PERF_MAX_RANKS];
  /* AllGatherV / ReduceScatterV: the same on every rank. */
  size_t counts[PERF_MAX_RANKS], displs[PERF_MAX_RANKS];
  /* AllToAllV: [r][p] is rank r's view of peer p. */
  size_t sendcounts[PERF_MAX_RANKS][PERF_MAX_RANKS], sdispls[PERF_MAX_RANKS][PERF_MAX_RANKS];
  size_t recvcounts[PERF_MAX_RANKS][PERF_MAX_RANKS], rdispls[PERF_MAX_RANKS][PERF_MAX_RANKS];
  /* An AllReduce epilogue (coll_t.epilogue): the output is count/hidden rows of hidden elements. */
  size_t hidden;
} shape_t;

/* One iteration's arguments for every rank this process drives. */
typedef struct {
  const shape_t* shape;
  const dtype_t* type;
  ncclRedOp_t op[PERF_MAX_RANKS];
  ncclComm_t comm[PERF_MAX_RANKS];
  cudaStream_t stream[PERF_MAX_RANKS];
  void* send[PERF_MAX_RANKS];
  void* recv[PERF_MAX_RANKS];
  void* residual[PERF_MAX_RANKS];  /* an epilogue's: count elements, read and written */
  void* weight[PERF_MAX_RANKS];    /* an epilogue's: hidden elements */
  int inplace;
} call_t;

/* Where an output element comes from. */
enum source_kind {
  SRC_NONE,   /* not written by the collective: not checked */
  SRC_COPY,   /* input element (rank, index) */
  SRC_REDUCE  /* the reduction over all ranks of input element index */
};

typedef struct coll {
  const char* name;
  int reduces;      /* takes a reduction op */
  int rooted;       /* takes a root */
  int has_inplace;  /* NCCL defines an in-place form */
  int purlin_only;  /* a collective of Purlin's own (V, layouts, epilogues): needs PERF_PURLIN */
  /* busbw = algbw * factor(n) (nccl-tests' definitions). */
  double (*busbw_factor)(int n);
  /* shape fills s for a benchmark size; returns 0 if the size holds no element. */
  int (*shape)(shape_t* s, size_t bytes, const dtype_t* t, int n, int root);
  /* issue enqueues rank r's part of one iteration (the caller holds a group open). */
  ncclResult_t (*issue)(const call_t* c, int r);
  /* source says where rank r's output element i comes from (an epilogue's: the reduction it starts from). */
  int (*source)(const shape_t* s, int r, size_t i, int* src_rank, size_t* src_index);
  /* Purlin's AllReduce epilogues (purlinEpilogueKind_t bits, 0: none): each rank adds its residual
   * (updated in place) and applies RMSNorm to each row, on the types epilogue_type accepts. */
  int epilogue;
} coll_t;

extern const coll_t* const colls[];
extern const int num_colls;
const coll_t* coll_by_name(const char* name);

/* split divides total into n deterministic pseudo-random uneven parts (some may be 0),
 * or into even ones (the remainder one element each to the first) when perf_uneven is 0
 * (-u 0: the V collectives then compare with their even forms). */
void split_uneven(size_t total, int n, uint64_t seed, size_t* parts);
extern int perf_uneven;

/* -H: the row length of the epilogue collectives (default 4096); epilogue_type says whether
 * they run on t (float, half and bfloat16). */
extern size_t perf_hidden;
int epilogue_type(const dtype_t* t);

#endif
