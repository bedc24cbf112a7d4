/*
 * nccl_api.h: the tests drive libpurlin.so through its NCCL names
 * (include/purlin_nccl.h), as an NCCL client would, and through purlin.h for
 * what NCCL has no name for (V collectives, host streams, CommSynchronize).
 */
#ifndef PURLIN_TESTS_NCCL_API_H_
#define PURLIN_TESTS_NCCL_API_H_

#include "purlin_nccl.h"

/* PC gives an NCCL communicator handle purlin.h's type: it is the same handle. */
#define PC(comm) ((purlinComm_t)(void*)(comm))

#endif
