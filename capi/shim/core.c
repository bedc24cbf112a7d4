/* core.c: loading the Go core (shim.h). Its path is fixed when this library
 * is loaded (libpurlin-core.so in the directory of this library's real file);
 * the core itself is loaded, with its Go runtime, by the first call that
 * needs it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PURLIN_SHIM_LOADER
#include "shim.h"

purlinCoreExports purlinCore;
int purlinCoreLoaded;

static char corePath[PATH_MAX + 32];
static char failure[PATH_MAX + 512];
static pthread_once_t loadOnce = PTHREAD_ONCE_INIT;

/* The core's path, while the path this library was loaded by still means
 * what it meant (a relative one is relative to the directory of that time). */
__attribute__((constructor)) static void findCore(void) {
  Dl_info self;
  char real[PATH_MAX];
  if (dladdr((void *)findCore, &self) == 0 || self.dli_fname == NULL || realpath(self.dli_fname, real) == NULL) {
    snprintf(failure, sizeof failure, "purlin: cannot find the file of its own library, beside which lies libpurlin-core.so");
    return;
  }
  char *slash = strrchr(real, '/');
  if (slash != NULL) *slash = '\0';
  snprintf(corePath, sizeof corePath, "%s/libpurlin-core.so", real);
}

/* Held while the core loads: a fork waits for it (guard.c), so that no
 * child is forked with the loader's state or the core's runtime half made. */
pthread_mutex_t purlinCoreLoading = PTHREAD_MUTEX_INITIALIZER;

static void loadLocked(void);

static void load(void) {
  pthread_mutex_lock(&purlinCoreLoading);
  loadLocked();
  pthread_mutex_unlock(&purlinCoreLoading);
}

static void loadLocked(void) {
  if (corePath[0] == '\0') return; /* findCore said why */
  void *h = dlopen(corePath, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(failure, sizeof failure, "purlin: cannot load its core: %s", dlerror());
    return;
  }
  void (*bind)(const purlinShimCalls *) = (void (*)(const purlinShimCalls *))dlsym(h, "purlinCoreBind");
  const char *missing = bind == NULL ? "purlinCoreBind" : NULL;
#define PURLIN_CORE_SYMBOL(f) \
  if ((purlinCore.f = (__typeof__(purlinCore.f))dlsym(h, #f)) == NULL && missing == NULL) missing = #f;
  PURLIN_CORE_EXPORTS(PURLIN_CORE_SYMBOL)
#undef PURLIN_CORE_SYMBOL
  if (missing != NULL) {
    snprintf(failure, sizeof failure, "purlin: %s has no %s: it is not this library's core", corePath, missing);
    return;
  }
  static const purlinShimCalls calls = {purlinForkTrack, purlinForkUntrack, purlinCallRecord, purlinCallCommit,
                                                purlinCallWindows};
  bind(&calls);
  __atomic_store_n(&purlinCoreLoaded, 1, __ATOMIC_RELEASE);
}

int purlinCoreLoad(void) {
  pthread_once(&loadOnce, load);
  int loaded = purlinCoreIsLoaded();
  static int told;
  if (!loaded && !__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED)) fprintf(stderr, "%s\n", failure);
  return loaded;
}

const char *purlinCoreFailure(void) { return failure; }

/* The core's exports callcache.c calls, as functions (shim.h). */
purlinResult_t goGroup(int start) { return purlinCore.goGroup(start); }
purlinResult_t goCollective(purlinCallKey *key, uintptr_t send, uintptr_t recv, int grouped) {
  return purlinCore.goCollective(key, send, recv, grouped);
}
purlinResult_t goCollectiveRecord(purlinCallKey *keys, uint64_t *bufs, int n, int record, int *recorded) {
  return purlinCore.goCollectiveRecord(keys, bufs, n, record, recorded);
}
