/* nccl_only.c: NCCL functions with no purlin* counterpart. The ones Purlin
 * does not implement return ncclInvalidUsage and leave "<name> is not
 * supported by Purlin yet" for ncclGetLastError; those that return a value
 * other than ncclResult_t return an empty one of the right type and size.
 * Arguments of unimplemented functions are never read, so their prototypes
 * only need NCCL's return types. */
#include "shim.h"

/* Refuses in a forked child or without a core; moves a group the call cache holds into Go (api.c's FLUSH). */
#define GUARD() do { SHIM_GUARD(); purlinCallFlush(); } while (0)

#define NCCL_ONLY(name)                                                   \
  __typeof__(capi_##name) nccl##name __attribute__((alias("capi_" #name))); \
  __typeof__(capi_##name) pnccl##name __attribute__((alias("capi_" #name)));

/* An unimplemented function returning ncclResult_t, whatever its arguments. */
#define UNSUPPORTED(name)                                             \
  static purlinResult_t capi_##name() {                              \
    GUARD();                                                          \
    return goUnsupported((char*)"nccl" #name);                        \
  }                                                                   \
  NCCL_ONLY(name)

/* ---------- implemented ---------- */
static purlinResult_t capi_CommInitRankScalable(purlinComm_t* comm, int nranks, int myrank, int nId, purlinUniqueId* commIds, purlinConfig_t* config) {
  GUARD();
  if (nId < 1) return goNullArgument((char*)"ncclCommInitRankScalable: nId is below 1; it must be at least 1");
  if (nId != 1) return goUnsupported((char*)"ncclCommInitRankScalable with several unique ids");
  if (commIds == NULL) return goNullArgument((char*)"ncclCommInitRankScalable: commIds is NULL");
  return goCommInitRank((uintptr_t*)comm, nranks, commIds[0].internal, myrank, config);
}
NCCL_ONLY(CommInitRankScalable)

/* ncclWinGetUserPtr (2.29): the buffer this rank registered as win. */
static purlinResult_t capi_WinGetUserPtr(purlinComm_t comm, void* win, void** outUserPtr) {
  GUARD();
  return goWinGetUserPtr((uintptr_t)comm, (uintptr_t)win, (uintptr_t*)outUserPtr);
}
NCCL_ONLY(WinGetUserPtr)

/* Debug settings are reread from the environment (PURLIN_DEBUG, ...). */
static void capi_ResetDebugInit(void) {
  if (!purlinForked && purlinCoreIsLoaded()) goResetDebugInit(); /* else read at its load */
}
NCCL_ONLY(ResetDebugInit)
static void capi_ResetDebugInitInternal(void) { capi_ResetDebugInit(); }
NCCL_ONLY(ResetDebugInitInternal)

/* ncclGroupSimulateEnd ends the group, as ncclGroupEnd, but launches none
 * of its calls (the outermost level cancels it); Purlin has no estimate of
 * their time, so it returns ncclInvalidUsage saying so, and simInfo is left
 * as it was. An inner level only ends, as in NCCL. */
static purlinResult_t capi_GroupSimulateEnd(void* simInfo) {
  (void)simInfo;
  GUARD();
  if (purlinCallGroupDepth() != 1) return purlinCallGroupEnd();
  goGroupCancel();
  purlinResult_t r = purlinCallGroupEnd();
  return r != purlinSuccess ? r : goUnsupported((char*)"ncclGroupSimulateEnd's estimate of a group's time");
}
NCCL_ONLY(GroupSimulateEnd)

/* ---------- not implemented yet ---------- */
UNSUPPORTED(CommRevoke)
UNSUPPORTED(CommGetUniqueId)
UNSUPPORTED(CommGrow)
UNSUPPORTED(CommSuspend)
UNSUPPORTED(CommResume)
UNSUPPORTED(CommMemStats)
UNSUPPORTED(PutSignal)
UNSUPPORTED(Signal)
UNSUPPORTED(WaitSignal)
UNSUPPORTED(CommQueryProperties)
UNSUPPORTED(DevCommCreate)
UNSUPPORTED(DevCommDestroy)
UNSUPPORTED(GetLsaDevicePointer)
UNSUPPORTED(GetLsaMultimemDevicePointer)
UNSUPPORTED(GetMultimemDevicePointer)
UNSUPPORTED(GetPeerDevicePointer)
UNSUPPORTED(LsaBarrierCreateRequirement)
UNSUPPORTED(GinBarrierCreateRequirement)
UNSUPPORTED(LLA2ACreateRequirement)

/* ncclTeam_t ncclTeamX(ncclComm_t): a zeroed team (12 bytes, in registers). */
#define UNSUPPORTED_TEAM(name)                                        \
  static capiTeam capi_##name(purlinComm_t comm) {                    \
    capiTeam none = {0, 0, 0};                                        \
    (void)comm;                                                       \
    if (!purlinForked && purlinCoreReady()) goUnsupported((char*)"nccl" #name);            \
    return none;                                                      \
  }                                                                   \
  NCCL_ONLY(name)

UNSUPPORTED_TEAM(TeamWorld)
UNSUPPORTED_TEAM(TeamLsa)
UNSUPPORTED_TEAM(TeamRail)

/* int ncclTeamRankToX(ncclComm_t, ncclTeam_t, int) and
 * int ncclLLA2ACalcSlots(int, int): -1, never a valid rank or count. */
#define UNSUPPORTED_INT(name)                                         \
  static int capi_##name() {                                          \
    if (!purlinForked && purlinCoreReady()) goUnsupported((char*)"nccl" #name);            \
    return -1;                                                        \
  }                                                                   \
  NCCL_ONLY(name)

UNSUPPORTED_INT(TeamRankToLsa)
UNSUPPORTED_INT(TeamRankToWorld)
UNSUPPORTED_INT(LLA2ACalcSlots)
