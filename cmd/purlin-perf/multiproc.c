/* multiproc.c: one process per rank (see multiproc.h). */
#define _GNU_SOURCE /* memfd_create */
#include "multiproc.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"

struct multiproc {
  pthread_barrier_t barrier;
  int nranks;
  ncclUniqueId id;
  result_t results[PERF_MAX_RANKS];
  char describe[PERF_MAX_RANKS][192];
};

static multiproc_t* shared; /* the mapping, in every rank's process */

static void barrier(multiproc_t* mp) { pthread_barrier_wait(&mp->barrier); }

/* combine leaves every rank with the same merged numbers, so all agree on the exit status. */
static void combine(session_t* s, result_t* res) {
  multiproc_t* mp = shared;
  mp->results[s->first] = *res;
  barrier(mp);
  for (int k = 0; k < 2; k++) {
    double time = 0;
    long long wrong = 0;
    for (int r = 0; r < mp->nranks; r++) {
      time += mp->results[r].time_us[k];
      if (mp->results[r].wrong[k] > 0) wrong += mp->results[r].wrong[k];
    }
    res->time_us[k] = res->time_us[k] < 0 ? -1 : time / mp->nranks;
    res->wrong[k] = res->wrong[k] < 0 ? -1 : wrong;
  }
  barrier(mp); /* nobody overwrites a result before every rank has read it */
}

void multiproc_attach(multiproc_t* mp, session_t* s, ncclUniqueId* id) {
  s->combine = combine;
  if (s->first == 0) NCCLCHECK(ncclGetUniqueId(&mp->id), 0);
  barrier(mp);
  *id = mp->id;
}

void multiproc_describe(multiproc_t* mp, session_t* s) {
  FILE* f = fmemopen(mp->describe[s->first], sizeof(mp->describe[0]), "w");
  if (f) {
    backend_describe(f, s->first);
    fclose(f);
  }
  barrier(mp);
  if (s->printer)
    for (int r = 0; r < mp->nranks; r++) fputs(mp->describe[r], stdout);
}

int multiproc_child(const options_t* o, const char* which) {
  const char* rank = getenv("PURLIN_PERF_RANK");
  const char* fd = getenv("PURLIN_PERF_SHM_FD");
  if (!rank || !fd) return -1;
  shared = mmap(NULL, sizeof(multiproc_t), PROT_READ | PROT_WRITE, MAP_SHARED, atoi(fd), 0);
  if (shared == MAP_FAILED) { perror("purlin-perf: mmap of the shared results"); return 2; }
  close(atoi(fd));
  ncclUniqueId id;
  return run_ranks(o, which, atoi(rank), 1, &id, shared);
}

int multiproc_run(const options_t* o, char** argv) {
  int n = o->nranks;
  int fd = memfd_create("purlin-perf", 0); /* inherited across exec: no MFD_CLOEXEC */
  if (fd < 0 || ftruncate(fd, sizeof(multiproc_t)) != 0) { perror("purlin-perf: memfd"); return 2; }
  shared = mmap(NULL, sizeof(multiproc_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (shared == MAP_FAILED) { perror("purlin-perf: mmap"); return 2; }
  shared->nranks = n;
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&shared->barrier, &attr, n);
  fflush(stdout);

  pid_t pids[PERF_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] < 0) { perror("purlin-perf: fork"); return 2; }
    if (pids[r] == 0) {
      char rank[16], fdstr[16];
      snprintf(rank, sizeof(rank), "%d", r);
      snprintf(fdstr, sizeof(fdstr), "%d", fd);
      setenv("PURLIN_PERF_RANK", rank, 1);
      setenv("PURLIN_PERF_SHM_FD", fdstr, 1);
      execv("/proc/self/exe", argv);
      perror("purlin-perf: exec of /proc/self/exe");
      _exit(2);
    }
  }
  /* A rank that fails leaves the others waiting at a barrier: end them (our own children). */
  int worst = 0, alive = n;
  while (alive > 0) {
    int status;
    pid_t pid = wait(&status);
    if (pid < 0) break;
    alive--;
    for (int r = 0; r < n; r++)
      if (pids[r] == pid) pids[r] = 0; /* reaped: never signal a recycled pid */
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
    if (code > worst) worst = code;
    if (code >= 2)
      for (int r = 0; r < n; r++)
        if (pids[r] > 0) kill(pids[r], SIGTERM);
  }
  return worst;
}
