/* smoke.c: a quick check of libpurlin.so through NCCL's names (not the full
 * C suite, which lives in tests/). Build and run:
 *   make lib && gcc -Iinclude -o build/capi-smoke capi/testdata/smoke.c \
 *       -Lbuild -lpurlin -Wl,-rpath,$PWD/build && build/capi-smoke */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "purlin.h"

typedef purlinResult_t R;
R ncclGetVersion(int*);
R ncclGetUniqueId(purlinUniqueId*);
R ncclCommInitRank(purlinComm_t*, int, purlinUniqueId, int);
R ncclCommInitRankConfig(purlinComm_t*, int, purlinUniqueId, int, purlinConfig_t*);
R ncclGroupStart(void);
R ncclGroupEnd(void);
R ncclAllReduce(const void*, void*, size_t, int, int, purlinComm_t, void*);
R ncclSend(const void*, size_t, int, int, purlinComm_t, void*);
R ncclRecv(void*, size_t, int, int, purlinComm_t, void*);
R ncclCommDestroy(purlinComm_t);
R ncclCommUserRank(purlinComm_t, int*);
R ncclDevCommCreate(void*, void*, void*);
typedef struct { int nRanks, rank, stride; } team_t;
team_t ncclTeamWorld(purlinComm_t);
const char* ncclGetLastError(purlinComm_t);
const char* ncclGetErrorString(R);

#define N 4
#define COUNT 1000
static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

int main(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version) == 0 && version == 22809, "version %d", version);
  CHECK(strcmp(ncclGetErrorString(6), "remote process exited or there was a network error") == 0, "error string");

  purlinUniqueId id;
  CHECK(ncclGetUniqueId(&id) == 0, "GetUniqueId");
  purlinComm_t comms[N];
  purlinConfig_t cfg = PURLIN_CONFIG_INITIALIZER;
  CHECK(ncclGroupStart() == 0, "GroupStart");
  for (int r = 0; r < N; r++) CHECK(ncclCommInitRankConfig(&comms[r], N, id, r, &cfg) == 0, "init %d: %s", r, ncclGetLastError(NULL));
  CHECK(ncclGroupEnd() == 0, "GroupEnd: %s", ncclGetLastError(NULL));

  float* buf[N];
  purlinStream_t streams[N];
  for (int r = 0; r < N; r++) {
    purlinMemAlloc((void**)&buf[r], COUNT * sizeof(float));
    for (int i = 0; i < COUNT; i++) buf[r][i] = (float)(r + i);
    purlinHostStreamCreate(&streams[r]);
  }
  CHECK(ncclGroupStart() == 0, "GroupStart");
  for (int r = 0; r < N; r++) CHECK(ncclAllReduce(buf[r], buf[r], COUNT, purlinFloat32, purlinSum, comms[r], streams[r]) == 0, "allreduce %d: %s", r, ncclGetLastError(NULL));
  CHECK(ncclGroupEnd() == 0, "GroupEnd");
  for (int r = 0; r < N; r++) CHECK(purlinHostStreamSynchronize(streams[r]) == 0, "sync %d: %s", r, ncclGetLastError(comms[r]));
  for (int r = 0; r < N; r++)
    for (int i = 0; i < COUNT; i++)
      if (buf[r][i] != (float)(N * i + N * (N - 1) / 2)) { CHECK(0, "rank %d [%d] = %g", r, i, buf[r][i]); break; }

  /* a ring of sends and receives in one group */
  float* in[N];
  float* out[N];
  for (int r = 0; r < N; r++) {
    purlinMemAlloc((void**)&in[r], 64 * sizeof(float));
    purlinMemAlloc((void**)&out[r], 64 * sizeof(float));
    for (int i = 0; i < 64; i++) in[r][i] = (float)(100 * r + i);
  }
  CHECK(ncclGroupStart() == 0, "GroupStart");
  for (int r = 0; r < N; r++) {
    ncclSend(in[r], 64, purlinFloat32, (r + 1) % N, comms[r], streams[r]);
    ncclRecv(out[r], 64, purlinFloat32, (r + N - 1) % N, comms[r], streams[r]);
  }
  CHECK(ncclGroupEnd() == 0, "GroupEnd p2p: %s", ncclGetLastError(NULL));
  for (int r = 0; r < N; r++) {
    CHECK(purlinHostStreamSynchronize(streams[r]) == 0, "sync %d: %s", r, ncclGetLastError(comms[r]));
    CHECK(out[r][5] == (float)(100 * ((r + N - 1) % N) + 5), "ring rank %d got %g", r, out[r][5]);
  }

  /* bad arguments and unsupported functions */
  CHECK(ncclAllReduce(NULL, buf[0], COUNT, purlinFloat32, purlinSum, comms[0], NULL) == purlinInvalidArgument, "NULL sendbuff");
  CHECK(strstr(ncclGetLastError(NULL), "NULL") != NULL, "last error: %s", ncclGetLastError(NULL));
  CHECK(ncclDevCommCreate(comms[0], NULL, NULL) == purlinInvalidUsage, "DevCommCreate");
  CHECK(strstr(ncclGetLastError(NULL), "ncclDevCommCreate is not supported by Purlin yet") != NULL, "text: %s", ncclGetLastError(NULL));
  team_t t = ncclTeamWorld(comms[0]);
  CHECK(t.nRanks == 0 && t.rank == 0 && t.stride == 0, "zeroed team");
  purlinConfig_t bad = PURLIN_CONFIG_INITIALIZER;
  bad.magic = 0;
  purlinComm_t c2;
  CHECK(ncclCommInitRankConfig(&c2, 1, id, 0, &bad) == purlinInvalidArgument, "bad magic");

  /* fork without exec: an error at once, never a hang */
  pid_t pid = fork();
  if (pid == 0) {
    int rank;
    R res = ncclCommUserRank(comms[0], &rank);
    const char* text = ncclGetLastError(NULL);
    _exit(res == purlinInvalidUsage && strstr(text, "fork") ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child status %d", status);

  for (int r = 0; r < N; r++) CHECK(ncclCommDestroy(comms[r]) == 0, "destroy %d", r);
  int rank;
  CHECK(ncclCommUserRank(comms[0], &rank) == purlinInvalidUsage, "destroyed comm");
  CHECK(strstr(ncclGetLastError(NULL), "destroyed") != NULL, "text: %s", ncclGetLastError(NULL));
  printf("%s: %d failures\n", failures ? "FAILED" : "OK", failures);
  return failures != 0;
}
