/*
 * procs.h: multi-process tests. The launcher fork+execs its own binary in
 * worker mode (argv: <binary> worker <scenario> <rank> <nranks> [args...]),
 * hands each worker the 128-byte unique id through a pipe on its stdin, and
 * waits for all of them with a deadline, killing any that hang.
 */
#ifndef PURLIN_TESTS_PROCS_H_
#define PURLIN_TESTS_PROCS_H_

#include <sys/types.h>
#include "nccl_api.h"

enum { PROCS_MAX = 16 };

typedef struct {
  pid_t pid;
  int exited;    /* exited normally, with code */
  int code;
  int signaled;  /* killed by signal sig (SIGKILL: by us, for hanging, or by the test) */
  int sig;
  int hung;      /* still running at the deadline */
  double end_s;  /* now_s() when it ended */
} proc;

/* Starts n workers of scenario; id may be NULL (nothing is written). extra is
 * one more argument for every worker (may be NULL). Returns 0 or -1. */
int procs_spawn(proc* ps, int n, const char* scenario, const ncclUniqueId* id, const char* extra);
/* Waits for every worker until deadline_s seconds from now; kills (SIGKILL)
 * and marks as hung those still running then. */
void procs_wait(proc* ps, int n, double deadline_s);
/* Worker side: reads the id from stdin. Returns 0 or -1. */
int procs_read_id(ncclUniqueId* id);
/* Describes how a worker ended, for messages. */
const char* procs_describe(const proc* p, char* buf, size_t size);

#endif
