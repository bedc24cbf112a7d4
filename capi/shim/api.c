/* api.c: every public C entry point of libpurlin.so, defined once here and
 * aliased under NCCL's names (ncclX and its profiling twin pncclX). Each
 * refuses at once in a forked child, then calls its Go export (goX) in the
 * core, loading it first (shim.h); a collective first tries the call cache
 * (callcache.h), which needs no Go. */
#include "shim.h"

#define NCCL_ALIASES(name)                                                     \
  __typeof__(purlin##name) nccl##name __attribute__((alias("purlin" #name))); \
  __typeof__(purlin##name) pnccl##name __attribute__((alias("purlin" #name)));

/* GUARD refuses in a forked child; FLUSH also moves a group the call cache
 * holds into Go (callcache.h), as every entry point but the group calls and
 * the collectives the cache serves does before it enters Go. */
#define GUARD() SHIM_GUARD()
#define FLUSH() do { GUARD(); purlinCallFlush(); } while (0)

extern const char* purlinForkedText;

/* ---------- version, ids, errors ---------- */
/* The version needs no core: a process may ask before it forks its workers,
 * and a child forked after the core was loaded may still ask, as under NCCL. */
purlinResult_t purlinGetVersion(int* version) {
  if (version == NULL) {
    if (purlinForked) return purlinInvalidArgument; /* no core to keep the text */
    GUARD();
    return goNullArgument((char*)"GetVersion: version is NULL");
  }
  *version = PURLIN_NCCL_VERSION_CODE;
  return purlinSuccess;
}
NCCL_ALIASES(GetVersion)

purlinResult_t purlinGetUniqueId(purlinUniqueId* uniqueId) {
  FLUSH();
  return goGetUniqueId((char*)uniqueId);
}
NCCL_ALIASES(GetUniqueId)

const char* purlinGetLastError(purlinComm_t comm) {
  if (purlinForked) return purlinForkedText;
  if (!purlinCoreIsLoaded()) return purlinCoreFailure(); /* nothing else failed yet */
  return goGetLastError((uintptr_t)comm);
}
NCCL_ALIASES(GetLastError)

purlinResult_t purlinCommGetAsyncError(purlinComm_t comm, purlinResult_t* asyncError) {
  FLUSH();
  return goCommGetAsyncError((uintptr_t)comm, (int*)asyncError);
}
NCCL_ALIASES(CommGetAsyncError)

/* ---------- communicators ---------- */
purlinResult_t purlinCommInitRank(purlinComm_t* comm, int nranks, purlinUniqueId commId, int rank) {
  FLUSH();
  return goCommInitRank((uintptr_t*)comm, nranks, commId.internal, rank, NULL);
}
NCCL_ALIASES(CommInitRank)

purlinResult_t purlinCommInitRankConfig(purlinComm_t* comm, int nranks, purlinUniqueId commId, int rank, purlinConfig_t* config) {
  FLUSH();
  return goCommInitRank((uintptr_t*)comm, nranks, commId.internal, rank, config);
}
NCCL_ALIASES(CommInitRankConfig)

purlinResult_t purlinCommInitAll(purlinComm_t* comms, int ndev, const int* devlist) {
  FLUSH();
  return goCommInitAll((uintptr_t*)comms, ndev, (int*)devlist);
}
NCCL_ALIASES(CommInitAll)

/* A communicator's cached calls end before it is finalized, destroyed or
 * aborted, and again once it is: another thread's call may have recorded
 * one while it was still ready (an abort from a watchdog thread), and no
 * record is made once it is not (Comm.Replay). */
#define ENDING(comm, end)                     \
  do {                                        \
    FLUSH();                                  \
    purlinCallForget((uintptr_t)comm);        \
    purlinResult_t r_ = end((uintptr_t)comm); \
    purlinCallForget((uintptr_t)comm);        \
    return r_;                                \
  } while (0)
purlinResult_t purlinCommFinalize(purlinComm_t comm) { ENDING(comm, goCommFinalize); }
NCCL_ALIASES(CommFinalize)
purlinResult_t purlinCommDestroy(purlinComm_t comm) { ENDING(comm, goCommDestroy); }
NCCL_ALIASES(CommDestroy)
purlinResult_t purlinCommAbort(purlinComm_t comm) { ENDING(comm, goCommAbort); }
NCCL_ALIASES(CommAbort)

purlinResult_t purlinCommSplit(purlinComm_t comm, int color, int key, purlinComm_t* newcomm, purlinConfig_t* config) {
  FLUSH();
  return goCommSplit((uintptr_t)comm, color, key, (uintptr_t*)newcomm, config);
}
NCCL_ALIASES(CommSplit)

purlinResult_t purlinCommShrink(purlinComm_t comm, int* excludeRanksList, int excludeRanksCount, purlinComm_t* newcomm, purlinConfig_t* config, int shrinkFlags) {
  FLUSH();
  return goCommShrink((uintptr_t)comm, excludeRanksList, excludeRanksCount, (uintptr_t*)newcomm, config, shrinkFlags);
}
NCCL_ALIASES(CommShrink)

purlinResult_t purlinCommCount(const purlinComm_t comm, int* count) { FLUSH(); return goCommCount((uintptr_t)comm, count); }
NCCL_ALIASES(CommCount)
purlinResult_t purlinCommCuDevice(const purlinComm_t comm, int* device) { FLUSH(); return goCommCuDevice((uintptr_t)comm, device); }
NCCL_ALIASES(CommCuDevice)
purlinResult_t purlinCommUserRank(const purlinComm_t comm, int* rank) { FLUSH(); return goCommUserRank((uintptr_t)comm, rank); }
NCCL_ALIASES(CommUserRank)
purlinResult_t purlinCommSynchronize(purlinComm_t comm) { FLUSH(); return goCommSynchronize((uintptr_t)comm); }

/* ---------- host streams ---------- */
purlinResult_t purlinHostStreamCreate(purlinStream_t* stream) { FLUSH(); return goHostStreamCreate((uintptr_t*)stream); }
purlinResult_t purlinHostStreamSynchronize(purlinStream_t stream) { FLUSH(); return goHostStreamSynchronize((uintptr_t)stream); }
purlinResult_t purlinHostStreamDestroy(purlinStream_t stream) { FLUSH(); return goHostStreamDestroy((uintptr_t)stream); }

/* ---------- reduction ops ---------- */
purlinResult_t purlinRedOpCreatePreMulSum(purlinRedOp_t* op, void* scalar, purlinDataType_t datatype, purlinScalarResidence_t residence, purlinComm_t comm) {
  FLUSH();
  return goRedOpCreatePreMulSum((int*)op, scalar, datatype, residence, (uintptr_t)comm);
}
NCCL_ALIASES(RedOpCreatePreMulSum)
purlinResult_t purlinRedOpDestroy(purlinRedOp_t op, purlinComm_t comm) { FLUSH(); return goRedOpDestroy(op, (uintptr_t)comm); }
NCCL_ALIASES(RedOpDestroy)

/* ---------- collectives ---------- */
/* COLL issues a collective through the call cache (callcache.h). */
#define COLL(kind, send, recv, count, dt, op, root, peer, isSend) \
  purlinCall(&(purlinCallKey){(uintptr_t)comm, (uintptr_t)stream, count, kind, dt, op, root, peer, isSend}, \
             (uintptr_t)(send), (uintptr_t)(recv))

purlinResult_t purlinAllReduce(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinRedOp_t op, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiAllReduce, sendbuff, recvbuff, count, datatype, op, 0, 0, 0);
}
NCCL_ALIASES(AllReduce)
purlinResult_t purlinBroadcast(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiBroadcast, sendbuff, recvbuff, count, datatype, 0, root, 0, 0);
}
NCCL_ALIASES(Broadcast)
purlinResult_t purlinBcast(void* buff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiBroadcast, buff, buff, count, datatype, 0, root, 0, 0);
}
NCCL_ALIASES(Bcast)
purlinResult_t purlinReduce(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinRedOp_t op, int root, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiReduce, sendbuff, recvbuff, count, datatype, op, root, 0, 0);
}
NCCL_ALIASES(Reduce)
purlinResult_t purlinAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiAllGather, sendbuff, recvbuff, sendcount, datatype, 0, 0, 0, 0);
}
NCCL_ALIASES(AllGather)
purlinResult_t purlinReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, purlinDataType_t datatype, purlinRedOp_t op, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, 0, 0);
}
NCCL_ALIASES(ReduceScatter)
purlinResult_t purlinAlltoAll(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiAllToAll, sendbuff, recvbuff, count, datatype, 0, 0, 0, 0);
}
NCCL_ALIASES(AlltoAll)
purlinResult_t purlinGather(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiGather, sendbuff, recvbuff, count, datatype, 0, root, 0, 0);
}
NCCL_ALIASES(Gather)
purlinResult_t purlinScatter(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiScatter, sendbuff, recvbuff, count, datatype, 0, root, 0, 0);
}
NCCL_ALIASES(Scatter)
purlinResult_t purlinSend(const void* sendbuff, size_t count, purlinDataType_t datatype, int peer, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiSendRecv, sendbuff, 0, count, datatype, 0, 0, peer, 1);
}
NCCL_ALIASES(Send)
purlinResult_t purlinRecv(void* recvbuff, size_t count, purlinDataType_t datatype, int peer, purlinComm_t comm, purlinStream_t stream) {
  GUARD(); return COLL(capiSendRecv, 0, recvbuff, count, datatype, 0, 0, peer, 0);
}
NCCL_ALIASES(Recv)

/* ---------- V collectives, collectives by layout and AllReduce epilogues (Purlin's own) ---------- */
purlinResult_t purlinAllGatherV(const void* sendbuff, void* recvbuff, const size_t* counts, const size_t* displs, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream) {
  FLUSH();
  return goCollectiveV(capiAllGatherV, (uintptr_t)sendbuff, (uintptr_t)recvbuff, (size_t*)counts, (size_t*)displs, NULL, NULL, NULL, NULL, datatype, 0, (uintptr_t)comm, (uintptr_t)stream);
}
purlinResult_t purlinReduceScatterV(const void* sendbuff, void* recvbuff, const size_t* counts, const size_t* displs, purlinDataType_t datatype, purlinRedOp_t op, purlinComm_t comm, purlinStream_t stream) {
  FLUSH();
  return goCollectiveV(capiReduceScatterV, (uintptr_t)sendbuff, (uintptr_t)recvbuff, (size_t*)counts, (size_t*)displs, NULL, NULL, NULL, NULL, datatype, op, (uintptr_t)comm, (uintptr_t)stream);
}
purlinResult_t purlinAlltoAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff, const size_t* recvcounts, const size_t* rdispls, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream) {
  FLUSH();
  return goCollectiveV(capiAllToAllV, (uintptr_t)sendbuff, (uintptr_t)recvbuff, NULL, NULL, (size_t*)sendcounts, (size_t*)sdispls, (size_t*)recvcounts, (size_t*)rdispls, datatype, 0, (uintptr_t)comm, (uintptr_t)stream);
}
purlinResult_t purlinCollective(const purlinCollectiveDesc_t* desc, purlinComm_t comm, purlinStream_t stream) {
  FLUSH();
  return goCollectiveDesc((purlinCollectiveDesc_t*)desc, (uintptr_t)comm, (uintptr_t)stream);
}
purlinResult_t purlinAllReduceEpilogue(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinRedOp_t op, const purlinEpilogue_t* epilogue, purlinComm_t comm, purlinStream_t stream) {
  FLUSH();
  return goAllReduceEpilogue((uintptr_t)sendbuff, (uintptr_t)recvbuff, count, datatype, op, (purlinEpilogue_t*)epilogue, (uintptr_t)comm, (uintptr_t)stream);
}

/* ---------- groups ---------- */
purlinResult_t purlinGroupStart(void) { GUARD(); return purlinCallGroupStart(); }
NCCL_ALIASES(GroupStart)
purlinResult_t purlinGroupEnd(void) { GUARD(); return purlinCallGroupEnd(); }
NCCL_ALIASES(GroupEnd)
/* The group moves into Go (FLUSH), which cancels it; then it ends as any group. */
purlinResult_t purlinGroupCancel(void) {
  FLUSH();
  goGroupCancel();
  return purlinCallGroupEnd();
}

/* ---------- memory ---------- */
purlinResult_t purlinMemAlloc(void** ptr, size_t size) { FLUSH(); return goMemAlloc(ptr, size); }
NCCL_ALIASES(MemAlloc)
purlinResult_t purlinMemFree(void* ptr) { FLUSH(); return goMemFree(ptr); }
NCCL_ALIASES(MemFree)
purlinResult_t purlinCommRegister(const purlinComm_t comm, void* buff, size_t size, void** handle) {
  FLUSH(); return goCommRegister((uintptr_t)comm, buff, size, (uintptr_t*)handle);
}
NCCL_ALIASES(CommRegister)
purlinResult_t purlinCommDeregister(const purlinComm_t comm, void* handle) {
  FLUSH(); return goCommDeregister((uintptr_t)comm, (uintptr_t)handle);
}
NCCL_ALIASES(CommDeregister)
purlinResult_t purlinCommWindowRegister(purlinComm_t comm, void* buff, size_t size, purlinWindow_t* win, int winFlags) {
  FLUSH(); return goCommWindowRegister((uintptr_t)comm, buff, size, (uintptr_t*)win, winFlags);
}
NCCL_ALIASES(CommWindowRegister)
purlinResult_t purlinCommWindowDeregister(purlinComm_t comm, purlinWindow_t win) {
  FLUSH(); return goCommWindowDeregister((uintptr_t)comm, (uintptr_t)win);
}
NCCL_ALIASES(CommWindowDeregister)
