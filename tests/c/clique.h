/*
 * clique.h: several ranks driven by one thread, made the way nccl-tests makes
 * them: ncclGetUniqueId, then ncclGroupStart; ncclCommInitRank x N; ncclGroupEnd.
 */
#ifndef PURLIN_TESTS_CLIQUE_H_
#define PURLIN_TESTS_CLIQUE_H_

#include "nccl_api.h"

enum { CLIQUE_MAX = 8 };

typedef struct {
  int n;
  ncclComm_t comms[CLIQUE_MAX];
} clique;

/* Returns 0 and fills q, or records a failure and returns -1. */
int clique_init(clique* q, int n);
void clique_destroy(clique* q);

#endif
