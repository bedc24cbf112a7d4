/* shim.h: the Go core as the shim sees it. The core (libpurlin-core.so, beside
 * this library) is loaded at the first call that needs it, not when this
 * library is loaded (core.c): a process that maps Purlin at its start
 * (LD_PRELOAD, or a program linked to libnccl.so.2) and forks workers before
 * its first call leaves each worker free to start a Go runtime of its own,
 * as NCCL leaves it free to use NCCL. Internal to capi/. */
#ifndef PURLIN_SHIM_H_
#define PURLIN_SHIM_H_

#include <pthread.h>

#include "capi.h"
#include "callcache.h"
#include "libpurlin-core.h" /* the core's exports, as `go build -buildmode=c-shared` writes them */

#define PURLIN_CORE_EXPORTS(X)                                                                      \
  X(goCollective) X(goCollectiveRecord) X(goAllReduceEpilogue) X(goCollectiveV) X(goCollectiveDesc) \
  X(goGroup) X(goRedOpCreatePreMulSum) X(goRedOpDestroy) X(goGetUniqueId) X(goCommInitRank)        \
  X(goCommInitAll) X(goCommFinalize) X(goCommDestroy) X(goCommAbort) X(goCommSplit) X(goCommShrink) \
  X(goCommCount) X(goCommCuDevice) X(goCommUserRank) X(goCommGetAsyncError) X(goCommSynchronize)   \
  X(goHostStreamCreate) X(goHostStreamSynchronize) X(goHostStreamDestroy) X(goResetDebugInit)      \
  X(goGetLastError) X(goMemAlloc) X(goMemFree) X(goCommRegister) X(goCommDeregister)               \
  X(goNullArgument) X(goUnsupported) X(goCommWindowRegister) X(goCommWindowDeregister)             \
  X(goWinGetUserPtr) X(goGroupCancel)

typedef struct {
#define PURLIN_CORE_FIELD(f) __typeof__(f) *f;
  PURLIN_CORE_EXPORTS(PURLIN_CORE_FIELD)
#undef PURLIN_CORE_FIELD
} purlinCoreExports;

/* purlinCore holds the core's exports once purlinCoreLoaded is set. */
__attribute__((visibility("hidden"))) extern purlinCoreExports purlinCore;
__attribute__((visibility("hidden"))) extern int purlinCoreLoaded;
/* purlinCoreLoading is held while the core loads (core.c); a fork waits for it (guard.c). */
__attribute__((visibility("hidden"))) extern pthread_mutex_t purlinCoreLoading;

/* purlinCoreLoad loads the core once and reports whether it is loaded;
 * purlinCoreFailure says why not ("" while nothing failed). */
__attribute__((visibility("hidden"))) int purlinCoreLoad(void);
__attribute__((visibility("hidden"))) const char *purlinCoreFailure(void);

/* purlinCoreIsLoaded reports whether the core is loaded, loading nothing;
 * purlinCoreReady loads it first where it is not. */
static inline int purlinCoreIsLoaded(void) { return __atomic_load_n(&purlinCoreLoaded, __ATOMIC_ACQUIRE); }
static inline int purlinCoreReady(void) { return purlinCoreIsLoaded() || purlinCoreLoad(); }

/* SHIM_GUARD opens every entry point that enters the core: it refuses in a
 * child forked after the core was loaded (capi.h), and with a system error
 * where the core cannot be loaded (ncclGetLastError says why). */
#define SHIM_GUARD()                                  \
  do {                                                \
    if (purlinForked) return purlinInvalidUsage;      \
    if (!purlinCoreReady()) return purlinSystemError; \
  } while (0)

/* From here on goX(...) calls the loaded core's goX (but in core.c, which
 * loads them). goGroup, goCollective and goCollectiveRecord are functions of
 * core.c instead, for callcache.c (which its unit test links with fakes). */
#ifndef PURLIN_SHIM_LOADER
#define goAllReduceEpilogue purlinCore.goAllReduceEpilogue
#define goCollectiveV purlinCore.goCollectiveV
#define goCollectiveDesc purlinCore.goCollectiveDesc
#define goRedOpCreatePreMulSum purlinCore.goRedOpCreatePreMulSum
#define goRedOpDestroy purlinCore.goRedOpDestroy
#define goGetUniqueId purlinCore.goGetUniqueId
#define goCommInitRank purlinCore.goCommInitRank
#define goCommInitAll purlinCore.goCommInitAll
#define goCommFinalize purlinCore.goCommFinalize
#define goCommDestroy purlinCore.goCommDestroy
#define goCommAbort purlinCore.goCommAbort
#define goCommSplit purlinCore.goCommSplit
#define goCommShrink purlinCore.goCommShrink
#define goCommCount purlinCore.goCommCount
#define goCommCuDevice purlinCore.goCommCuDevice
#define goCommUserRank purlinCore.goCommUserRank
#define goCommGetAsyncError purlinCore.goCommGetAsyncError
#define goCommSynchronize purlinCore.goCommSynchronize
#define goHostStreamCreate purlinCore.goHostStreamCreate
#define goHostStreamSynchronize purlinCore.goHostStreamSynchronize
#define goHostStreamDestroy purlinCore.goHostStreamDestroy
#define goResetDebugInit purlinCore.goResetDebugInit
#define goGetLastError purlinCore.goGetLastError
#define goMemAlloc purlinCore.goMemAlloc
#define goMemFree purlinCore.goMemFree
#define goCommRegister purlinCore.goCommRegister
#define goCommDeregister purlinCore.goCommDeregister
#define goNullArgument purlinCore.goNullArgument
#define goUnsupported purlinCore.goUnsupported
#define goCommWindowRegister purlinCore.goCommWindowRegister
#define goCommWindowDeregister purlinCore.goCommWindowDeregister
#define goWinGetUserPtr purlinCore.goWinGetUserPtr
#define goGroupCancel purlinCore.goGroupCancel
#endif

#endif
