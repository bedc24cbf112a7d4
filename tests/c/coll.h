/*
 * coll.h: runs one collective call on the ranks this process owns and checks
 * every output against the reference. The inputs of every rank derive from
 * (seed, rank), so a process that owns one rank (multi-process suite) checks
 * exactly as one that owns them all (single-process suite).
 */
#ifndef PURLIN_TESTS_COLL_H_
#define PURLIN_TESTS_COLL_H_

#include <stddef.h>
#include <stdint.h>
#include "nccl_api.h"

enum {
  COLL_ALLREDUCE, COLL_BROADCAST, COLL_BCAST, COLL_REDUCE, COLL_ALLGATHER, COLL_REDUCESCATTER,
  COLL_ALLTOALL, COLL_GATHER, COLL_SCATTER, COLL_SENDRECV, COLL_ALLGATHERV, COLL_REDUCESCATTERV,
  COLL_ALLTOALLV, COLL_COUNT
};
const char* coll_name(int coll);
int coll_reduces(int coll);
/* Whether the collective has an in-place form. */
int coll_has_inplace(int coll);

typedef struct {
  int coll, dtype, op; /* op: OP_* of reference.h, for reducing collectives */
  int root;
  int inplace;
  size_t count; /* per rank, as NCCL counts it; V collectives: the largest per-rank count */
  uint64_t seed;
} coll_case;

/* Formats the case for messages. */
void coll_describe(const coll_case* c, int nranks, char* out, size_t size);

/* Runs c on ranks [lo, hi) whose communicators are comms[lo..hi-1], in one
 * group, waits for them, and checks their outputs. Records failures in the
 * harness and returns the number of failures seen. */
int coll_run(const coll_case* c, int nranks, ncclComm_t* comms, int lo, int hi);

#endif /* PURLIN_TESTS_COLL_H_ */
