/*
 * purlin.h: the C API of Purlin, a collective-communication library for the
 * GPUs of one NVLink server (and, through its host Atom, for CPU ranks).
 *
 * Every type's numeric values equal NCCL's (ncclResult_t, ncclDataType_t,
 * ncclRedOp_t, ncclUniqueId, ncclConfig_t), and libpurlin.so exports every
 * function below also under NCCL's name (ncclAllReduce, ...) and its pnccl
 * twin, so programs written for NCCL run on Purlin unchanged.
 *
 * Threads: every function may be called from any thread. Groups
 * (purlinGroupStart/End) are per thread and nest. No call blocks the host
 * waiting for a peer, except the init of a communicator outside a group,
 * which waits for all its ranks (bounded by PURLIN_TIMEOUT).
 *
 * Streams: on the CUDA Atom a stream is a cudaStream_t. On the host Atom a
 * stream comes from purlinHostStreamCreate (NULL means the communicator's
 * own queue); work on one stream runs in order, and purlinHostStreamSynchronize
 * or purlinCommSynchronize wait for it. As in NCCL, a communicator's calls
 * run in the order they were issued whatever streams they were issued on.
 */
#ifndef PURLIN_H_
#define PURLIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_MAJOR 0
#define PURLIN_MINOR 1
#define PURLIN_PATCH 0
/* The NCCL version Purlin implements the ABI of; ncclGetVersion returns it. */
#define PURLIN_NCCL_VERSION_CODE 22809

typedef enum {
  purlinSuccess = 0,
  purlinUnhandledCudaError = 1,
  purlinSystemError = 2,
  purlinInternalError = 3,
  purlinInvalidArgument = 4,
  purlinInvalidUsage = 5,
  purlinRemoteError = 6,
  purlinInProgress = 7,
  purlinTimeout = 8,
  purlinNumResults = 9
} purlinResult_t;

typedef enum {
  purlinInt8 = 0, purlinChar = 0,
  purlinUint8 = 1,
  purlinInt32 = 2, purlinInt = 2,
  purlinUint32 = 3,
  purlinInt64 = 4,
  purlinUint64 = 5,
  purlinFloat16 = 6, purlinHalf = 6,
  purlinFloat32 = 7, purlinFloat = 7,
  purlinFloat64 = 8, purlinDouble = 8,
  purlinBfloat16 = 9,
  purlinFloat8e4m3 = 10,
  purlinFloat8e5m2 = 11,
  purlinNumTypes = 12
} purlinDataType_t;

/* Ops made by purlinRedOpCreatePreMulSum are >= purlinNumOps. */
typedef enum {
  purlinSum = 0, purlinProd = 1, purlinMax = 2, purlinMin = 3, purlinAvg = 4,
  purlinNumOps = 5,
  purlinMaxRedOp = 0x7fffffff
} purlinRedOp_t;

typedef enum { purlinScalarDevice = 0, purlinScalarHostImmediate = 1 } purlinScalarResidence_t;

typedef struct purlinComm* purlinComm_t;
typedef void* purlinStream_t; /* a cudaStream_t, or a host stream */

#define PURLIN_UNIQUE_ID_BYTES 128
typedef struct { char internal[PURLIN_UNIQUE_ID_BYTES]; } purlinUniqueId;

#define PURLIN_SPLIT_NOCOLOR (-1)
#define PURLIN_CONFIG_UNDEF_INT (-2147483647 - 1)
#define PURLIN_API_MAGIC 0xcafebeef

/* Same layout as ncclConfig_t (NCCL 2.28). Purlin reads it by content, as NCCL
 * does: `size` first, then the fields that size covers; it honours
 * `blocking` and ignores the tuning fields, after refusing the values NCCL
 * 2.28 refuses (PURLIN_INVALID_ARGUMENT: blocking or a 0/1 field outside 0
 * and 1, cgaClusterSize below 0, minCTAs or maxCTAs below 1, minCTAs set
 * without maxCTAs or above it, CTAPolicy outside 0-2, nvlsCTAs below 1,
 * nChannelsPerNetPeer outside 1-64). */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} purlinConfig_t;

#define PURLIN_CONFIG_INITIALIZER {                                              \
  sizeof(purlinConfig_t), PURLIN_API_MAGIC, PURLIN_NCCL_VERSION_CODE,           \
  PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT,    \
  PURLIN_CONFIG_UNDEF_INT, NULL, PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT, \
  NULL, PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT, \
  PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT, PURLIN_CONFIG_UNDEF_INT }

/* ---------- version, ids, errors ---------- */
purlinResult_t purlinGetVersion(int* version);
purlinResult_t purlinGetUniqueId(purlinUniqueId* uniqueId);
const char* purlinGetErrorString(purlinResult_t result);
/* The last error of comm (or of the calling thread's last call if comm is NULL), in words. */
const char* purlinGetLastError(purlinComm_t comm);
purlinResult_t purlinCommGetAsyncError(purlinComm_t comm, purlinResult_t* asyncError);

/* ---------- communicators ---------- */
purlinResult_t purlinCommInitRank(purlinComm_t* comm, int nranks, purlinUniqueId commId, int rank);
purlinResult_t purlinCommInitRankConfig(purlinComm_t* comm, int nranks, purlinUniqueId commId, int rank, purlinConfig_t* config);
/* ndev ranks in this process; devlist may be NULL (devices 0..ndev-1). */
purlinResult_t purlinCommInitAll(purlinComm_t* comms, int ndev, const int* devlist);
purlinResult_t purlinCommFinalize(purlinComm_t comm);
purlinResult_t purlinCommDestroy(purlinComm_t comm);
purlinResult_t purlinCommAbort(purlinComm_t comm);
purlinResult_t purlinCommSplit(purlinComm_t comm, int color, int key, purlinComm_t* newcomm, purlinConfig_t* config);
purlinResult_t purlinCommShrink(purlinComm_t comm, int* excludeRanksList, int excludeRanksCount, purlinComm_t* newcomm, purlinConfig_t* config, int shrinkFlags);
purlinResult_t purlinCommCount(const purlinComm_t comm, int* count);
purlinResult_t purlinCommCuDevice(const purlinComm_t comm, int* device);
purlinResult_t purlinCommUserRank(const purlinComm_t comm, int* rank);
/* Waits until every call launched on comm (every stream) has finished; host Atom. */
purlinResult_t purlinCommSynchronize(purlinComm_t comm);

/* ---------- host streams (host Atom) ---------- */
purlinResult_t purlinHostStreamCreate(purlinStream_t* stream);
purlinResult_t purlinHostStreamSynchronize(purlinStream_t stream);
purlinResult_t purlinHostStreamDestroy(purlinStream_t stream);

/* ---------- reduction ops ---------- */
/* An op that multiplies this rank's input by *scalar (a value of datatype),
 * then sums every rank's product; each rank passes its own scalar, and they
 * may differ. purlinScalarHostImmediate reads the scalar now;
 * purlinScalarDevice reads it from that address each time a collective runs
 * (device memory on the CUDA Atom, host memory on the host Atom). */
purlinResult_t purlinRedOpCreatePreMulSum(purlinRedOp_t* op, void* scalar, purlinDataType_t datatype, purlinScalarResidence_t residence, purlinComm_t comm);
purlinResult_t purlinRedOpDestroy(purlinRedOp_t op, purlinComm_t comm);

/* ---------- collectives (NCCL's signatures) ---------- */
purlinResult_t purlinAllReduce(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinRedOp_t op, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinBroadcast(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinBcast(void* buff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinReduce(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinRedOp_t op, int root, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, purlinDataType_t datatype, purlinRedOp_t op, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinAlltoAll(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinGather(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinScatter(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, int root, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinSend(const void* sendbuff, size_t count, purlinDataType_t datatype, int peer, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinRecv(void* recvbuff, size_t count, purlinDataType_t datatype, int peer, purlinComm_t comm, purlinStream_t stream);

/* ---------- V collectives (Purlin's own) ----------
 * AllGatherV: rank r contributes counts[r] elements, placed at displs[r] in recvbuff.
 * ReduceScatterV: rank r receives counts[r] elements, reduced from displs[r] of every sendbuff.
 * counts and displs have one entry per rank and are equal on every rank. */
purlinResult_t purlinAllGatherV(const void* sendbuff, void* recvbuff, const size_t* counts, const size_t* displs, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream);
purlinResult_t purlinReduceScatterV(const void* sendbuff, void* recvbuff, const size_t* counts, const size_t* displs, purlinDataType_t datatype, purlinRedOp_t op, purlinComm_t comm, purlinStream_t stream);
/* AllToAllV: this rank's view, as in MPI_Alltoallv; sendcounts[p] here must equal recvcounts[me] on p. */
purlinResult_t purlinAlltoAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff, const size_t* recvcounts, const size_t* rdispls, purlinDataType_t datatype, purlinComm_t comm, purlinStream_t stream);

/* ---------- a collective named by its layouts (what NCCL cannot do) ----------
 * A layout says how a buffer is spread over the ranks: packed (one payload),
 * scattered (slice r for rank r) or transposed (slice r from rank r);
 * varying: slice sizes differ per rank (counts/displs); rooted: only the
 * root holds it; columns: the buffer is a row-major matrix of desc.rows rows
 * and slice r is its column block r (in every row, rank r's share, after the
 * shares of the ranks before it). Column blocks serve two collectives:
 *   all-gather into columns:  copy,   packed -> scattered columns
 *     (each rank's sendbuff holds rows x count/rows elements, row-major; every
 *     recvbuff receives rows x nranks*count/rows, rank r's block at column r*count/rows)
 *   reduce-scatter from columns: reduce, scattered columns -> packed
 *     (every sendbuff holds rows x nranks*count/rows; rank r receives its
 *     reduced block, rows x count/rows, packed)
 * matrix (with varying): the sizes are one nranks x nranks matrix that every
 * rank passes alike, counts[p*nranks+q] elements from rank p to rank q, and
 * displs[p*nranks+q] where they land in q's recvbuff; p's sendbuff holds its
 * slices packed in rank order. It serves one collective:
 *   all-to-all by a matrix: copy, scattered varying matrix -> transposed varying matrix
 *     (a mixture of experts' token dispatch, its counts known on the host)
 * A pair no collective takes is refused with purlinInvalidArgument, and
 * purlinGetLastError says what is unsupported. */
typedef enum { purlinPacked = 0, purlinScattered = 1, purlinTransposed = 2 } purlinShape_t;
typedef struct { int shape; int varying; int rooted; int columns; int matrix; } purlinLayout_t; /* shape: purlinShape_t */
typedef enum { purlinConsumeCopy = 0, purlinConsumeReduce = 1 } purlinConsume_t;

typedef struct {
  int consume;                  /* purlinConsume_t */
  purlinLayout_t in, out;       /* e.g. reduce, scattered -> packed is ReduceScatter */
  const void* sendbuff;
  void* recvbuff;
  size_t count;                 /* as the named NCCL-style collective counts it */
  const size_t* counts;         /* AllGatherV, ReduceScatterV; matrix layouts: nranks x nranks */
  const size_t* displs;
  const size_t* sendcounts;     /* AllToAllV */
  const size_t* sdispls;
  const size_t* recvcounts;
  const size_t* rdispls;
  int datatype;                 /* purlinDataType_t */
  int op;                       /* purlinRedOp_t, for reduce */
  int root;                     /* rooted layouts */
  size_t rows;                  /* column layouts: the matrix's rows (count a multiple of it); else 0 */
} purlinCollectiveDesc_t;

purlinResult_t purlinCollective(const purlinCollectiveDesc_t* desc, purlinComm_t comm, purlinStream_t stream);

/* ---------- AllReduce epilogues (Purlin's own) ----------
 * What a transformer layer runs after its tensor-parallel all-reduce, fused
 * into the collective: the output is count/hidden rows of hidden elements,
 * and each rank applies the epilogue to every row of its own result. The
 * kinds combine (OR them); ResidualAdd or RMSNorm is required, RowScale
 * needs QuantFP8:
 *   z = T(reduced + residual), residual = z     (ResidualAdd; else z = reduced)
 *   y = T(z * rsqrt(mean(z*z) + eps) * weight)   (RMSNorm; else y = z)
 *   recvbuff = y; quant = e4m3(y / scale)       (QuantFP8)
 * T(...) rounds to datatype, which is purlinFloat32, purlinFloat16 or
 * purlinBfloat16; each step computes in float32 (the mean square
 * accumulated in float32), as the unfused kernels do. The float8 e4m3
 * output saturates at +-448. Its scale is the one float32 at scales (read),
 * or with RowScale each row's largest |y| / 448 (1 for a row of zeros),
 * written to scales[row]. Buffers: residual, count elements of datatype
 * (read and written in place); weight, hidden elements of datatype; quant,
 * count bytes; scales, float32 (one, or one per row). Each is given exactly
 * when the kind uses it (else NULL), aligned to its element, and no buffer
 * the call writes may overlap another of its buffers (sendbuff may equal
 * recvbuff, as in purlinAllReduce). Any reduction op works. On the CUDA
 * Atom they are device memory. */
typedef enum {
  purlinEpilogueResidualAdd = 1,
  purlinEpilogueRMSNorm = 2,
  purlinEpilogueQuantFP8 = 4,
  purlinEpilogueRowScale = 8
} purlinEpilogueKind_t;

typedef struct {
  int kind;                     /* purlinEpilogueKind_t bits; 0: none (every other field 0 too) */
  size_t hidden;                /* elements of a row; count must be a multiple of it */
  void* residual;               /* ResidualAdd */
  const void* weight;           /* RMSNorm */
  void* quant;                  /* QuantFP8 */
  void* scales;                 /* QuantFP8: float32, read; with RowScale one per row, written */
  float eps;                    /* RMSNorm's epsilon: finite, >= 0 */
} purlinEpilogue_t;

/* purlinAllReduce followed by *epilogue (NULL: a plain all-reduce). Like
 * every collective it may be issued inside a group and captured in a CUDA
 * graph. A bad epilogue (its kind, type, count, a buffer, an overlap) is
 * refused with purlinInvalidArgument before anything runs, and
 * purlinGetLastError says why; the communicator stays usable. */
purlinResult_t purlinAllReduceEpilogue(const void* sendbuff, void* recvbuff, size_t count, purlinDataType_t datatype, purlinRedOp_t op, const purlinEpilogue_t* epilogue, purlinComm_t comm, purlinStream_t stream);

/* ---------- groups ---------- */
purlinResult_t purlinGroupStart(void);
purlinResult_t purlinGroupEnd(void);
/* purlinGroupCancel ends the calling thread's innermost group, as
 * purlinGroupEnd, and cancels the group: its outermost end launches none of
 * its calls (on any communicator) and returns purlinSuccess, or the error of
 * a call the group refused. A thread that stops midway through a group (an
 * exception) cancels it rather than launch part of what its peers launch
 * whole. Its deferred inits and window registrations still run. */
purlinResult_t purlinGroupCancel(void);

/* ---------- memory ---------- */
purlinResult_t purlinMemAlloc(void** ptr, size_t size);
purlinResult_t purlinMemFree(void* ptr);
purlinResult_t purlinCommRegister(const purlinComm_t comm, void* buff, size_t size, void** handle);
purlinResult_t purlinCommDeregister(const purlinComm_t comm, void* handle);

/* ---------- symmetric windows (ncclCommWindowRegister, NCCL 2.27) ----------
 * Collective: every rank registers a buffer of the same size, its address a
 * multiple of PURLIN_WIN_REQUIRED_ALIGNMENT (purlinMemAlloc's buffers are;
 * on GPUs the buffer must come from purlinMemAlloc/cuMem). *win receives an
 * opaque handle. Inside a group the registration runs at purlinGroupEnd.
 * Deregistration is local: each rank unmaps its view without waiting for the
 * others (as NCCL's); purlinCommDestroy releases all windows.
 * With PURLIN_WIN_COLL_SYMMETRIC, a call whose output lies in the window
 * (at the same offset on every rank: the flag's promise, as NCCL's) skips
 * staging past packet sizes: AllGather, AllGatherV, AllGatherColumns,
 * AllToAll and Broadcast push each rank's part straight into the other
 * ranks' outputs, and AllReduce its reduced shards. */
typedef struct purlinWindow* purlinWindow_t;
#define PURLIN_WIN_DEFAULT 0x00
#define PURLIN_WIN_COLL_SYMMETRIC 0x01
#define PURLIN_WIN_REQUIRED_ALIGNMENT 4096
purlinResult_t purlinCommWindowRegister(purlinComm_t comm, void* buff, size_t size, purlinWindow_t* win, int winFlags);
purlinResult_t purlinCommWindowDeregister(purlinComm_t comm, purlinWindow_t win);

#ifdef __cplusplus
}
#endif
#endif /* PURLIN_H_ */
