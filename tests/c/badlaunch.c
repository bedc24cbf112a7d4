/* badlaunch.c: the launcher side of badproc.c's scenarios, and the fork() test. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "badinput.h"
#include "harness.h"
#include "procs.h"

static int spawn_with_id(proc* ps, int n, const char* scenario, const char* extra) {
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    FAILF("ncclGetUniqueId: %d (%s)", rc, ncclGetLastError(NULL));
    return -1;
  }
  if (procs_spawn(ps, n, scenario, &id, extra) != 0) {
    FAILF("spawning %d workers failed", n);
    return -1;
  }
  return 0;
}

void test_destroyed_comm(void) {
  proc p;
  if (procs_spawn(&p, 1, "destroyed", NULL, NULL) != 0) {
    FAILF("spawn failed");
    return;
  }
  procs_wait(&p, 1, 30);
  char how[64];
  EXPECT(p.exited && p.code == EXIT_ERRORED,
         "a call on a destroyed communicator must return an error: the worker %s", procs_describe(&p, how, sizeof how));
}

static void mismatch(const char* kind) {
  proc ps[2];
  if (spawn_with_id(ps, 2, "mismatch", kind) != 0) return;
  procs_wait(ps, 2, 3 * g_timeout_s + 20);
  int errored = 0;
  for (int r = 0; r < 2; r++) {
    char how[64];
    procs_describe(&ps[r], how, sizeof how);
    if (ps[r].exited && ps[r].code == EXIT_ERRORED) errored++;
    else EXPECT(ps[r].exited && ps[r].code == EXIT_OK, "ranks disagree on %s: rank %d %s (%s)", kind, r, how,
                ps[r].exited && ps[r].code == EXIT_WRONG ? "a silently wrong result"
                : ps[r].exited && ps[r].code == EXIT_SLOW ? "the error came after PURLIN_TIMEOUT"
                                                          : "see stderr");
  }
  EXPECT(errored >= 1, "ranks disagree on %s, yet no rank reported an error", kind);
}

void test_mismatch_count(void) { mismatch("count"); }
void test_mismatch_dtype(void) { mismatch("dtype"); }
void test_mismatch_op(void) { mismatch("op"); }

/* Ranks (processes) that name different roots: every rank fails in time,
 * and one says the ranks disagree (the others may see its abort first: a
 * rank still joining when a faster one aborts fails its init), for every
 * rooted collective at 2 ranks (packets) and 4 (1 Mi elements). */
void test_mismatch_root(void) {
  static const char* colls[] = {"broadcast", "reduce", "gather", "scatter"};
  static const struct { int n; size_t count; } shapes[] = {{2, 1024}, {4, 1 << 20}};
  for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      enum { N = 4 };
      proc ps[N];
      int n = shapes[s].n, disagree = 0;
      char what[48];
      snprintf(what, sizeof what, "%s:%zu", colls[c], shapes[s].count);
      if (spawn_with_id(ps, n, "root", what) != 0) return;
      procs_wait(ps, n, 3 * g_timeout_s + 20);
      for (int r = 0; r < n; r++) {
        char how[64];
        procs_describe(&ps[r], how, sizeof how);
        disagree += ps[r].exited && ps[r].code == EXIT_ERRORED;
        EXPECT(ps[r].exited && (ps[r].code == EXIT_ERRORED || ps[r].code == EXIT_OTHER || ps[r].code == EXIT_INIT),
               "%d ranks each naming itself the root of %s: rank %d %s (%s)", n, what, r, how,
               !ps[r].exited                 ? "want an error"
               : ps[r].code == EXIT_NO_ERROR ? "reported success"
               : ps[r].code == EXIT_SLOW     ? "the error came after PURLIN_TIMEOUT"
                                             : "see stderr");
      }
      EXPECT(disagree >= 1, "%d ranks each naming itself the root of %s: no rank said the ranks disagree", n, what);
    }
}

static void killed(const char* how) {
  enum { N = 3 };
  proc ps[N];
  if (spawn_with_id(ps, N, "kill", how) != 0) return;
  if (!strcmp(how, "external")) {
    struct timespec ts = {1, 500 * 1000 * 1000}; /* past init, inside the AllReduce loop */
    nanosleep(&ts, NULL);
    kill(ps[N - 1].pid, SIGKILL);
  }
  procs_wait(ps, N, 3 * g_timeout_s + 30);
  EXPECT(ps[N - 1].signaled && ps[N - 1].sig == SIGKILL, "the victim rank was not killed as planned");
  for (int r = 0; r < N - 1; r++) {
    char desc[64];
    procs_describe(&ps[r], desc, sizeof desc);
    EXPECT(ps[r].exited && ps[r].code == EXIT_ERRORED,
           "rank %d, after a peer was SIGKILLed (%s), %s: want an error within PURLIN_TIMEOUT (%s)", r, how, desc,
           ps[r].hung ? "it hung" : ps[r].code == EXIT_SLOW ? "the error came late" : "see stderr");
  }
}

void test_killed_rank(void) { killed("self"); }
void test_killed_rank_external(void) { killed("external"); }

/* The victim forks a child (no exec) that outlives it: the others must learn
 * of its death within forked_child_s, not at PURLIN_TIMEOUT (long here). */
void test_killed_rank_forked_child(void) {
  char saved[32];
  snprintf(saved, sizeof saved, "%s", getenv("PURLIN_TIMEOUT"));
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%d", 4 * forked_child_s);
  setenv("PURLIN_TIMEOUT", timeout, 1); /* for the workers */
  killed("fork");
  setenv("PURLIN_TIMEOUT", saved, 1);
}

/* Ranks forked from a process that loaded the library but never called it
 * work as under NCCL (badproc.c's scenario_fork_first). */
void test_fork_before_first_call(void) {
  proc p;
  if (procs_spawn(&p, 1, "forkfirst", NULL, NULL) != 0) {
    FAILF("spawn failed");
    return;
  }
  procs_wait(&p, 1, 3 * g_timeout_s + 40);
  char how[64];
  EXPECT(p.exited && p.code == EXIT_OK, "two ranks forked before the first call: the worker %s (%s)",
         procs_describe(&p, how, sizeof how),
         p.exited && p.code == EXIT_WRONG ? "a wrong result, or the core loaded too early" : "see stderr");
}

/* Forks while another thread loads the core, at delays across the load (a
 * fresh process each): every child's call succeeds or is refused at once. */
void test_fork_during_load(void) {
  static const char* delays_us[] = {"0", "50", "100", "200", "400", "800", "1600", "5000"};
  for (size_t i = 0; i < sizeof delays_us / sizeof *delays_us; i++) {
    proc p;
    if (procs_spawn(&p, 1, "forkload", NULL, delays_us[i]) != 0) {
      FAILF("spawn failed");
      return;
    }
    procs_wait(&p, 1, 40);
    char how[64];
    EXPECT(p.exited && p.code == EXIT_OK, "a fork %s us into the core's load: the worker %s", delays_us[i],
           procs_describe(&p, how, sizeof how));
  }
}

/* A fork() child without exec shares the parent's communicators but not its
 * threads; any library call there must fail at once instead of hanging. */
void test_fork_child(void) {
  clique q;
  if (clique_init(&q, 2) != 0) return;
  expect_usable(&q, "init");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(5);
    float send[16] = {0}, recv[16];
    double t0 = now_s();
    ncclResult_t a = ncclAllReduce(send, recv, 16, ncclFloat32, ncclSum, q.comms[0], NULL);
    ncclUniqueId id;
    ncclResult_t b = ncclGetUniqueId(&id);
    double took = now_s() - t0;
    int version = 0; /* needs no Go runtime: answered there too, as NCCL does */
    if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) _exit(3);
    if (a == ncclSuccess || b == ncclSuccess) _exit(1);
    _exit(took < 2.0 ? 0 : 2);
  }
  proc p;
  memset(&p, 0, sizeof p);
  p.pid = pid;
  procs_wait(&p, 1, 15);
  char how[64];
  EXPECT(p.exited && p.code == 0, "fork() child calling the library: %s (%s)", procs_describe(&p, how, sizeof how),
         p.exited && p.code == 1 ? "a call succeeded" : p.exited && p.code == 2 ? "the error took over 2 s"
         : p.exited && p.code == 3 ? "ncclGetVersion was refused"
         : p.signaled ? "it crashed or hung until its alarm" : "");
  expect_usable(&q, "a fork() child called the library");
  clique_destroy(&q);
}
