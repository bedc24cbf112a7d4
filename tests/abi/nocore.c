/*
 * nocore.c: the library without its Go core beside it (run.sh copies it
 * alone into a directory). ncclGetVersion needs no core; every call that
 * does returns ncclSystemError at once, again on a second try, and
 * ncclGetLastError says which file is missing. Prints PASS/FAIL lines.
 */
#include <stdio.h>
#include <string.h>

#include "purlin_nccl.h"

static int failed;
#define CHECK(ok, name, ...)                          \
  do {                                                \
    if (ok) {                                         \
      printf("PASS %s\n", name);                      \
    } else {                                          \
      failed = 1;                                     \
      printf("FAIL %s: ", name);                      \
      printf(__VA_ARGS__);                            \
      printf("\n");                                   \
    }                                                 \
  } while (0)

int main(void) {
  int version = 0;
  ncclResult_t rc = ncclGetVersion(&version);
  CHECK(rc == ncclSuccess && version > 0, "nocore-version", "ncclGetVersion gave %d, version %d", rc, version);
  CHECK(strcmp(ncclGetLastError(NULL), "") == 0, "nocore-no-error-yet", "ncclGetLastError before a failure: '%s'",
        ncclGetLastError(NULL));
  ncclUniqueId id;
  for (int attempt = 1; attempt <= 2; attempt++) {
    rc = ncclGetUniqueId(&id);
    const char* text = ncclGetLastError(NULL);
    char name[64];
    snprintf(name, sizeof name, "nocore-uniqueid-%d", attempt);
    CHECK(rc == ncclSystemError && strstr(text, "libpurlin-core.so") != NULL, name,
          "ncclGetUniqueId gave %d, ncclGetLastError '%s'", rc, text);
  }
  ncclComm_t comm = NULL;
  rc = ncclCommInitRank(&comm, 1, id, 0);
  CHECK(rc == ncclSystemError && comm == NULL, "nocore-init", "ncclCommInitRank gave %d", rc);
  rc = ncclGroupStart();
  CHECK(rc == ncclSystemError, "nocore-group", "ncclGroupStart gave %d", rc);
  return failed;
}
