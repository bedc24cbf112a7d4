/* badinput.h: shared pieces of the bad-input suite (badinput.c, badproc.c). */
#ifndef PURLIN_TESTS_BADINPUT_H_
#define PURLIN_TESTS_BADINPUT_H_

#include "clique.h"

/* PURLIN_TIMEOUT of this run, in seconds. */
extern double g_timeout_s;

void expect_usable(clique* q, const char* after);
void expect_rejected(ncclResult_t got, ncclResult_t want, ncclComm_t comm, const char* call, const char* word);

/* Worker exit codes of the multi-process scenarios. */
enum {
  EXIT_OK = 0,          /* the call succeeded with the right result */
  EXIT_INIT = 3,        /* could not join the communicator */
  EXIT_ERRORED = 10,    /* the call reported an error in time: what a failure test wants */
  EXIT_NO_ERROR = 20,   /* ran to the end without noticing the failure */
  EXIT_WRONG = 30,      /* reported success with a wrong result */
  EXIT_SLOW = 40,       /* reported an error, but later than PURLIN_TIMEOUT allows */
  EXIT_OTHER = 50,      /* reported another error in time (a peer's abort that came first) */
};

/* How soon the peers of a rank killed while its fork() child lives on must
 * learn of its death, in seconds (the workers' PURLIN_TIMEOUT is 4 times that). */
enum { forked_child_s = 8 };

int badinput_worker(int argc, char** argv);

void test_destroyed_comm(void);
void test_fork_child(void);
void test_fork_before_first_call(void);
void test_fork_during_load(void);
void test_mismatch_count(void);
void test_mismatch_dtype(void);
void test_mismatch_op(void);
void test_mismatch_root(void);
void test_killed_rank(void);
void test_killed_rank_external(void);
void test_killed_rank_forked_child(void);

#endif
