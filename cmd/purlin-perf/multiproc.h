/*
 * multiproc.h: -m 1, one process per rank. The parent starts every rank as
 * a fresh copy of this program (fork, then exec of /proc/self/exe: neither
 * the Go runtime of libpurlin.so, which starts when the program loads, nor
 * CUDA survives a bare fork), with PURLIN_PERF_RANK and PURLIN_PERF_SHM_FD
 * in its environment. The ranks share one memfd mapping: rank 0's unique
 * id, a process-shared barrier, and each rank's results, which every rank
 * combines (times averaged, wrong counts summed); rank 0 prints.
 */
#ifndef PERF_MULTIPROC_H_
#define PERF_MULTIPROC_H_

#include "bench.h"

typedef struct multiproc multiproc_t;

/* multiproc_run starts o->nranks rank processes running argv and returns the worst exit status. */
int multiproc_run(const options_t* o, char** argv);
/* multiproc_child runs this process's rank when it is one (returns -1 when it is not). */
int multiproc_child(const options_t* o, const char* which);

/* In a rank's process: get the unique id (rank 0 makes it) and hook result combining. */
void multiproc_attach(multiproc_t* mp, session_t* s, ncclUniqueId* id);
/* multiproc_describe prints every rank's device line from rank 0, in rank order. */
void multiproc_describe(multiproc_t* mp, session_t* s);

/* run_ranks (main.c) is one process's benchmark over ranks [first, first+count). */
int run_ranks(const options_t* o, const char* which, int first, int count, ncclUniqueId* id, multiproc_t* mp);

#endif
