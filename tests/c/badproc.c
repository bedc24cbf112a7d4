/*
 * badproc.c: the bad-input scenarios that need processes of their own: calls
 * that may crash (a destroyed communicator), ranks that disagree, ranks that
 * die, a fork() child, and ranks forked before any call. Each runs in exec'd
 * workers under a deadline.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "badinput.h"
#include "harness.h"
#include "procs.h"

/* Slack over PURLIN_TIMEOUT for an error to arrive (process start, scheduling on 2 cores). */
static double slack_s(void) { return g_timeout_s + 4; }

/* ---------- worker side ---------- */

/* The label of a worker's error line: "expected: " when the error is the
 * outcome the scenario wants (so a log never reads like a failure), else none. */
static const char* expected_label(int outcome) { return outcome == EXIT_ERRORED ? "expected: " : ""; }

static int scenario_destroyed(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return EXIT_INIT;
  ncclComm_t stale = q.comms[0];
  clique_destroy(&q);
  float send[8] = {0}, recv[8];
  ncclResult_t a = ncclAllReduce(send, recv, 8, ncclFloat32, ncclSum, stale, NULL);
  ncclResult_t b = ncclCommDestroy(stale);
  if (a == ncclSuccess || b == ncclSuccess) {
    fprintf(stderr, "destroyed comm: ncclAllReduce gave %d, a second ncclCommDestroy gave %d\n", a, b);
    return EXIT_NO_ERROR;
  }
  return EXIT_ERRORED;
}

/* core_mapped reports whether Purlin's Go core (libpurlin-core.so) is loaded in this process. */
static int core_mapped(void) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return -1;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, maps) != NULL) found = strstr(line, "/libpurlin-core.so") != NULL;
  fclose(maps);
  return found;
}

/* One rank of scenario_fork_first, in a child forked before any call: rank 0
 * makes the unique id and hands it to rank 1 through the pipe. */
static int fork_first_rank(int rank, const int fds[2]) {
  alarm((unsigned)(3 * g_timeout_s + 20));
  close(fds[rank == 0 ? 0 : 1]); /* rank 0 failing closes the pipe: rank 1 then reads nothing at once */
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess || write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) return EXIT_INIT;
  } else if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) {
    return EXIT_INIT;
  }
  ncclComm_t comm = NULL;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    fprintf(stderr, "  forked rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return EXIT_INIT;
  }
  float send[1000], recv[1000];
  for (int i = 0; i < 1000; i++) send[i] = (float)(rank + 1 + i), recv[i] = -1;
  ncclResult_t rc = ncclAllReduce(send, recv, 1000, ncclFloat32, ncclSum, comm, NULL);
  if (rc == ncclSuccess) rc = (ncclResult_t)purlinCommSynchronize(PC(comm));
  if (rc != ncclSuccess) {
    fprintf(stderr, "  forked rank %d: ncclAllReduce: %d (%s)\n", rank, rc, ncclGetLastError(comm));
    return EXIT_ERRORED;
  }
  for (int i = 0; i < 1000; i++) {
    if (recv[i] != (float)(3 + 2 * i)) return EXIT_WRONG;
  }
  return ncclCommDestroy(comm) == ncclSuccess ? EXIT_OK : EXIT_ERRORED;
}

/* A process that has the library loaded but has not called it yet forks its
 * ranks (a launcher, an inference server's worker pool, Python's
 * multiprocessing): as under NCCL, each child must be able to use it. The
 * Go core is loaded by the first call that needs it, so each child starts its
 * own; ncclGetVersion before the fork must not load it. */
static int scenario_fork_first(void) {
  int version = 0;
  if (core_mapped() != 0 || ncclGetVersion(&version) != ncclSuccess || core_mapped() != 0) {
    fprintf(stderr, "  the core was loaded before any call that needs it (version %d)\n", version);
    return EXIT_WRONG;
  }
  int fds[2];
  if (pipe(fds) != 0) return EXIT_INIT;
  fflush(NULL);
  proc kids[2];
  memset(kids, 0, sizeof kids);
  for (int r = 0; r < 2; r++) {
    kids[r].pid = fork();
    if (kids[r].pid == 0) _exit(fork_first_rank(r, fds));
  }
  close(fds[0]);
  close(fds[1]);
  procs_wait(kids, 2, 3 * g_timeout_s + 30);
  int worst = EXIT_OK;
  for (int r = 0; r < 2; r++) {
    char how[64];
    if (!kids[r].exited || kids[r].code != EXIT_OK) {
      fprintf(stderr, "  forked rank %d: %s\n", r, procs_describe(&kids[r], how, sizeof how));
      worst = kids[r].exited && kids[r].code != EXIT_OK ? kids[r].code : EXIT_ERRORED;
    }
  }
  return worst;
}

/* A thread's first call loads the core while this thread forks, delay_us
 * after starting it: the fork waits for the load, or comes before it, so the
 * child's call either loads its own core or is refused as a child forked
 * after the load, at once. Forked in the load's middle, a child crashed or
 * hung. */
static void* load_core(void* unused) {
  (void)unused;
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  return NULL;
}

static int scenario_fork_load(int delay_us) {
  pthread_t t;
  if (pthread_create(&t, NULL, load_core, NULL) != 0) return EXIT_INIT;
  if (delay_us > 0) usleep(delay_us);
  fflush(NULL);
  proc kid;
  memset(&kid, 0, sizeof kid);
  kid.pid = fork();
  if (kid.pid == 0) {
    alarm(10);
    ncclUniqueId id;
    ncclResult_t rc = ncclGetUniqueId(&id);
    _exit(rc == ncclSuccess || rc == ncclInvalidUsage ? EXIT_OK : EXIT_WRONG);
  }
  procs_wait(&kid, 1, 20);
  pthread_join(t, NULL);
  char how[64];
  if (!kid.exited || kid.code != EXIT_OK) {
    fprintf(stderr, "  forked %d us into the core's load: the child %s\n", delay_us, procs_describe(&kid, how, sizeof how));
    return EXIT_WRONG;
  }
  return EXIT_OK;
}

/* Both ranks fill sendbuff with rank+1; each checks its own output if its call succeeds. */
static int scenario_mismatch(const char* kind, int rank, ncclComm_t comm) {
  size_t count = 4096;
  ncclDataType_t dt = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  if (!strcmp(kind, "count") && rank == 1) count = 3 * 4096 + 1;
  if (!strcmp(kind, "dtype") && rank == 1) dt = ncclInt32;
  if (!strcmp(kind, "op") && rank == 1) op = ncclMax;
  float* send = malloc(count * 4);
  float* recv = malloc(count * 4);
  for (size_t i = 0; i < count; i++) {
    if (dt == ncclInt32) ((int32_t*)send)[i] = rank + 1;
    else send[i] = (float)(rank + 1);
    recv[i] = -7;
  }
  double t0 = now_s();
  ncclResult_t rc = ncclAllReduce(send, recv, count, dt, op, comm, NULL);
  if (rc == ncclSuccess) rc = (ncclResult_t)purlinCommSynchronize(PC(comm));
  if (rc != ncclSuccess) {
    double took = now_s() - t0;
    int outcome = took <= slack_s() ? EXIT_ERRORED : EXIT_SLOW;
    fprintf(stderr, "  %srank %d (mismatch %s): error %d after %.1f s: %s\n", expected_label(outcome), rank, kind, rc,
            took, ncclGetLastError(comm));
    ncclCommAbort(comm);
    return outcome;
  }
  float want = op == ncclMax ? 2.0f : 3.0f;
  for (size_t i = 0; i < count; i++) {
    float got = dt == ncclInt32 ? (float)((int32_t*)recv)[i] : recv[i];
    if (got != want) {
      fprintf(stderr, "  rank %d (mismatch %s): success, but element %zu is %g, want %g\n", rank, kind, i, got, want);
      return EXIT_WRONG;
    }
  }
  ncclCommDestroy(comm);
  return EXIT_OK;
}

/* A rooted collective ("broadcast:COUNT", "reduce:", "gather:", "scatter:")
 * in which each rank names itself the root: every rank must fail without
 * waiting for PURLIN_TIMEOUT, saying the ranks disagree, unless the abort of
 * a rank that failed first reached it before. */
static int scenario_root(const char* what, int rank, int nranks, ncclComm_t comm) {
  char coll[16] = "";
  size_t count = 0;
  if (sscanf(what, "%15[a-z]:%zu", coll, &count) != 2) return 2;
  float* send = calloc(count * nranks, sizeof(float)); /* room for a Scatter root's input */
  float* recv = calloc(count * nranks, sizeof(float)); /* and a Gather root's output */
  double t0 = now_s();
  ncclResult_t rc;
  if (!strcmp(coll, "broadcast")) rc = ncclBroadcast(send, recv, count, ncclFloat32, rank, comm, NULL);
  else if (!strcmp(coll, "reduce")) rc = ncclReduce(send, recv, count, ncclFloat32, ncclSum, rank, comm, NULL);
  else if (!strcmp(coll, "gather")) rc = ncclGather(send, recv, count, ncclFloat32, rank, comm, NULL);
  else if (!strcmp(coll, "scatter")) rc = ncclScatter(send, recv, count, ncclFloat32, rank, comm, NULL);
  else return 2;
  if (rc == ncclSuccess) rc = (ncclResult_t)purlinCommSynchronize(PC(comm));
  double took = now_s() - t0;
  if (rc == ncclSuccess) {
    fprintf(stderr, "  rank %d (root %s): success, though the ranks named different roots\n", rank, what);
    ncclCommDestroy(comm);
    return EXIT_NO_ERROR;
  }
  const char* text = ncclGetLastError(comm);
  int disagree = text && strstr(text, "disagree");
  int outcome = took >= g_timeout_s ? EXIT_SLOW : disagree ? EXIT_ERRORED : EXIT_OTHER;
  fprintf(stderr, "  %srank %d (root %s): error %d after %.1f s: %s\n", expected_label(outcome), rank, what, rc, took,
          text);
  ncclCommAbort(comm);
  return outcome;
}

/* Ranks loop on AllReduce; the victim (the last rank) dies mid-collective:
 * by its own SIGKILL right after a launch ("self"), or the launcher's
 * ("external"); or ("fork") by its own SIGKILL while a child it forked
 * (without exec) after init lives on: the others must still learn of the
 * death within seconds (forked_child_s), though PURLIN_TIMEOUT is long. */
static int scenario_kill(const char* how, int rank, int nranks, ncclComm_t comm) {
  size_t count = 1 << 20;
  float* send = calloc(count, 4);
  float* recv = calloc(count, 4);
  int victim = rank == nranks - 1;
  int forked = !strcmp(how, "fork");
  if (victim && forked) {
    fflush(NULL);
    if (fork() == 0) { /* outlives the victim by far; alarm ends it */
      close(STDOUT_FILENO); /* the launcher's output pipe must not wait for it */
      close(STDERR_FILENO);
      alarm(3 * forked_child_s);
      for (;;) pause();
    }
  }
  double limit_s = forked ? forked_child_s : slack_s();
  double start = now_s();
  for (int it = 0; now_s() - start < 60; it++) {
    double t0 = now_s();
    ncclResult_t rc = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, NULL);
    if (victim && (!strcmp(how, "self") || forked) && it == 3) raise(SIGKILL);
    if (rc == ncclSuccess) rc = (ncclResult_t)purlinCommSynchronize(PC(comm));
    if (rc != ncclSuccess) {
      double took = now_s() - t0;
      int outcome = took <= limit_s ? EXIT_ERRORED : EXIT_SLOW;
      fprintf(stderr, "  %srank %d (kill %s): error %d at iteration %d after %.1f s: %s\n", expected_label(outcome), rank,
              how, rc, it, took, ncclGetLastError(comm));
      ncclCommAbort(comm);
      return outcome;
    }
  }
  return EXIT_NO_ERROR;
}

int badinput_worker(int argc, char** argv) {
  if (argc < 5) return 2;
  const char* scenario = argv[2];
  int rank = atoi(argv[3]), nranks = atoi(argv[4]);
  const char* extra = argc > 5 ? argv[5] : "";
  if (!strcmp(scenario, "destroyed")) return scenario_destroyed();
  if (!strcmp(scenario, "forkfirst")) return scenario_fork_first();
  if (!strcmp(scenario, "forkload")) return scenario_fork_load(atoi(extra));
  ncclUniqueId id;
  if (procs_read_id(&id) != 0) return EXIT_INIT;
  ncclComm_t comm = NULL;
  ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
  if (rc != ncclSuccess) {
    fprintf(stderr, "  rank %d: ncclCommInitRank: %d (%s)\n", rank, rc, ncclGetLastError(NULL));
    return EXIT_INIT;
  }
  if (!strcmp(scenario, "mismatch")) return scenario_mismatch(extra, rank, comm);
  if (!strcmp(scenario, "root")) return scenario_root(extra, rank, nranks, comm);
  if (!strcmp(scenario, "kill")) return scenario_kill(extra, rank, nranks, comm);
  return 2;
}
