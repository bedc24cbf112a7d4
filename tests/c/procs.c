/* procs.c: see procs.h. */
#include "procs.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

int procs_spawn(proc* ps, int n, const char* scenario, const ncclUniqueId* id, const char* extra) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return -1;
  self[len] = 0;
  for (int r = 0; r < n; r++) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    memset(&ps[r], 0, sizeof ps[r]);
    char rank[16], nranks[16];
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(nranks, sizeof nranks, "%d", n);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      /* Only async-signal-safe calls between fork and exec. */
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
      execl(self, self, "worker", scenario, rank, nranks, extra, (char*)NULL);
      _exit(127);
    }
    close(fds[0]);
    if (id) {
      ssize_t w = write(fds[1], id, sizeof *id);
      if (w != (ssize_t)sizeof *id) FAILF("writing the unique id to worker %d: %s", r, strerror(errno));
    }
    close(fds[1]);
    ps[r].pid = pid;
  }
  return 0;
}

void procs_wait(proc* ps, int n, double deadline_s) {
  double deadline = now_s() + deadline_s;
  int left = n;
  while (left > 0) {
    left = 0;
    for (int r = 0; r < n; r++) {
      if (ps[r].exited || ps[r].signaled || ps[r].hung) continue;
      int st;
      pid_t got = waitpid(ps[r].pid, &st, WNOHANG);
      if (got == ps[r].pid) {
        ps[r].end_s = now_s();
        if (WIFEXITED(st)) ps[r].exited = 1, ps[r].code = WEXITSTATUS(st);
        else if (WIFSIGNALED(st)) ps[r].signaled = 1, ps[r].sig = WTERMSIG(st);
        continue;
      }
      if (now_s() > deadline) {
        kill(ps[r].pid, SIGKILL);
        waitpid(ps[r].pid, &st, 0);
        ps[r].hung = 1;
        ps[r].end_s = now_s();
        continue;
      }
      left++;
    }
    if (left) {
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

int procs_read_id(ncclUniqueId* id) {
  size_t got = 0;
  while (got < sizeof *id) {
    ssize_t n = read(0, (char*)id + got, sizeof *id - got);
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

const char* procs_describe(const proc* p, char* buf, size_t size) {
  if (p->hung) snprintf(buf, size, "hung (killed at the deadline)");
  else if (p->signaled) snprintf(buf, size, "killed by signal %d", p->sig);
  else snprintf(buf, size, "exited %d", p->code);
  return buf;
}
