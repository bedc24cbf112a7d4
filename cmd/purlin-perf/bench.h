/*
 * bench.h: one benchmark run: options, the ranks this process drives, and
 * the per-size loop that checks, times and prints a result line.
 */
#ifndef PERF_BENCH_H_
#define PERF_BENCH_H_

#include "perf.h"
#include "values.h"

typedef struct {
  size_t min_bytes, max_bytes;
  double factor;
  int nranks;
  const dtype_t* type; /* NULL: every type */
  int op;              /* enum perf_op, or -1: every op */
  int root;
  int iters, warmup, check, graph_iters, multiproc;
  int registered; /* -R 1: buffers from ncclMemAlloc, registered as symmetric windows */
} options_t;

/* A result line's numbers, before printing; in multi-process mode they are
 * combined over the processes first (times averaged, wrong counts summed). */
typedef struct {
  double time_us[2];       /* out of place, in place; < 0 when not run */
  long long wrong[2];      /* < 0 when not checked */
} result_t;

typedef struct session {
  options_t opt;
  int first, count; /* this process drives ranks [first, first+count) */
  ncclComm_t comm[PERF_MAX_RANKS];
  /* combine merges this process's result with the other processes' (NULL: one process). */
  void (*combine)(struct session* s, result_t* res);
  int printer;      /* this process prints */
  long long wrong_total;
  double busbw_sum;
  int busbw_count;
} session_t;

/* bench_collective runs every size of coll for one type and op (OP_NONE for copies). */
int bench_collective(session_t* s, const coll_t* coll, const dtype_t* t, int op);

/* print_columns prints the table header of one collective. */
void print_columns(session_t* s, const coll_t* coll);

/* fail reports a failed NCCL call with the library's last error and exits. */
void fail(const char* what, ncclResult_t res, int rank);

#define NCCLCHECK(call, rank)                                \
  do {                                                       \
    ncclResult_t res_ = (call);                              \
    if (res_ != ncclSuccess) fail(#call, res_, (rank));      \
  } while (0)

#endif
