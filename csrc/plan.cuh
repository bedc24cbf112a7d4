/**
 * @file plan.cuh
 * @brief The Plan IR as the kernels read it: Ref, Step, Worker (byte-identical
 * to snac.Ref, snac.Step, snac.Worker in Go) and Launch, the kernel's one
 * by-value argument (mirrored by atom/cuda's launchArgs).
 *
 * The PURLIN_OFFSET/PURLIN_SIZE lines are the single source of the layout:
 * nvcc checks the C structs against them, and atom/cuda's layout_test.go
 * parses them and checks the Go structs against the same numbers.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace purlin {

/* ---------- limits shared with snac (plan.go, state.go) ---------- */
constexpr int kMaxRanks = 8;
constexpr int kMaxSrc = kMaxRanks;
constexpr int kMaxWorkers = 128;
constexpr int kNumChannels = 1 + 2 * kMaxRanks;
constexpr int kNumEpochs = kNumChannels * kMaxWorkers;
constexpr uint64_t kEpochAdvance = (1ull << 20) + 1;
/** The check word of done and join flags (snac.DoneCheck); no call's
 * fingerprint equals it, so notify and wait skip it (flags.cuh). */
constexpr uint64_t kDoneCheck = 0;
/** Caller buffers one launch may address (SpaceSend/SpaceRecv Ref.rank). */
constexpr int kMaxBuffers = 16;
/** Most peers' outputs one Plan names (snac.MaxPeerSlots): slot buffer*nranks+peer. */
constexpr int kMaxPeerSlots = 16;
/** Bytes before a Plan image's steps (Launch.steps): a uint64_t that each
 * block of purlin_run and purlin_epilogue adds one to once it has read the
 * last of the image, which the rank reads before it reuses the image's
 * memory (atom/cuda images.go). */
constexpr uint64_t kImageHeader = 16;

/** Flag kinds, as snac.FlagSlot lays out slots (snac.FlagReady ...). */
enum FlagKind : uint32_t { kFlagReady = 0, kFlagReduced = 1, kFlagConsumed = 2, kFlagDone = 3, kFlagAgree = 4, kFlagGathered = 5, kFlagJoined = 6, kNumFlagKinds = 7 };
enum Verb : uint8_t { kCopy = 0, kReduce = 1, kNotify = 2, kWait = 3, kAdvance = 4, kEpilogue = 5, kRepeat = 6 };
enum Space : uint8_t { kSpaceSend = 0, kSpaceRecv = 1, kSpaceStage = 2, kSpacePacket = 3, kSpacePeerRecv = 4, kNumSpaces = 5 };

/** A byte address: base(space, rank) + off + (epoch & 1) * half. With pitch
 * set (caller buffers only) the step's bytes lie in rows of Step.row bytes,
 * pitch bytes apart, off being the first one's, Step.col bytes into its row. */
struct Ref {
  uint64_t off;
  uint64_t half;
  uint8_t space;
  uint8_t rank;
  uint8_t pad[2];
  uint32_t pitch;
};

/** One instruction of a worker (snac.Step). */
struct Step {
  uint8_t verb;
  uint8_t nsrc;  // Reduce: sources; Notify, Wait: the run (atom/cuda signalRuns, run.cu signalRun)
  uint8_t peer;
  uint8_t scale;  // Reduce, PreMulSum: bit j marks src[j] as this rank's input (multiplied)
  uint32_t slot;
  int64_t delta;
  uint64_t check;
  uint64_t bytes;
  Ref dst;
  Ref src[kMaxSrc];  // an Epilogue's src[0] in the device image: off its first row, half its rows (atom/cuda)
  uint32_t row;  // bytes of a row of the strided Refs (0: none is)
  uint32_t col;  // where in its row the step's first byte lies
};

/** One lane of a Plan (snac.Worker): a thread block. */
struct Worker {
  uint16_t channel;
  uint16_t index;
  uint32_t first;
  uint32_t count;
  uint8_t engine;  // snac.Engine: the copy engine's workers run in purlin_signals and copies (atom/cuda engine.go)
  uint8_t loops;   // 1: the worker's steps hold a loop, whose body run.cu loads again for each repetition
  uint8_t pad[2];
};

/** Every rank's symmetric memory, as this rank's device addresses it. */
struct Peers {
  uint64_t stage[kMaxRanks];
  uint64_t packet[kMaxRanks];
  uint64_t flags[kMaxRanks];   // {flag, check} uint64_t pairs [NumSlots*2] each (flags.cuh signalPairs)
};

/** The kernel's argument, passed by value (constant bank). */
struct Launch {
  uint64_t steps;      // const Step*: the Plan's steps, in device memory
  uint64_t workers;    // const Worker*: one per thread block
  uint64_t fill;       // const uint16_t*: per worker, the workers of its channel in the Plan (then its epilogues: run.cu)
  uint64_t epochs;     // uint64_t[kNumEpochs + 1]: this rank's epochs, then its broken word (run.cu)
  uint64_t abortFlag;  // host-mapped uint32_t: the abort word (flags.cuh, kAbortAll)
  uint64_t status;     // host-mapped uint64_t: the first failure (see status.cuh)
  uint64_t timeoutNs;  // bound of every wait
  uint64_t scalarPtr;  // PreMulSum: device address of a T factor, or 0
  double scalar;       // PreMulSum: the factor when scalarPtr is 0
  int32_t dtype;       // spec.DataType
  int32_t op;          // spec.OpKind
  int32_t nranks;      // Avg divides by it
  int32_t rank;
  Peers peers;
  uint64_t send[kMaxBuffers];
  uint64_t recv[kMaxBuffers];
  // An AllReduce epilogue's buffers beside each call's output (atom.Buffers;
  // 0 where unused), which its Epilogue steps address (epilogue.cuh).
  uint64_t residual[kMaxBuffers];
  uint64_t weight[kMaxBuffers];
  uint64_t quant[kMaxBuffers];
  uint64_t scales[kMaxBuffers];
  // The peers' outputs a Plan pushes into (snac direct.go), by peer slot
  // buffer*nranks+peer (snac.PeerSlot): every rank's output of each call
  // that does, as this rank addresses it (kSpacePeerRecv; 0 elsewhere).
  uint64_t peerRecv[kMaxPeerSlots];
};

/* ---------- layout, checked here and by atom/cuda/layout_test.go ---------- */
#define PURLIN_OFFSET(Type, cfield, GoField, off) \
  static_assert(offsetof(Type, cfield) == (off), #Type "." #cfield " moved")
#define PURLIN_SIZE(Type, size) static_assert(sizeof(Type) == (size), #Type " resized")

PURLIN_SIZE(Ref, 24);
PURLIN_OFFSET(Ref, off, Off, 0);
PURLIN_OFFSET(Ref, half, Half, 8);
PURLIN_OFFSET(Ref, space, Space, 16);
PURLIN_OFFSET(Ref, rank, Rank, 17);
PURLIN_OFFSET(Ref, pitch, Pitch, 20);

PURLIN_SIZE(Step, 256);
PURLIN_OFFSET(Step, verb, Verb, 0);
PURLIN_OFFSET(Step, nsrc, NSrc, 1);
PURLIN_OFFSET(Step, peer, Peer, 2);
PURLIN_OFFSET(Step, scale, Scale, 3);
PURLIN_OFFSET(Step, slot, Slot, 4);
PURLIN_OFFSET(Step, delta, Delta, 8);
PURLIN_OFFSET(Step, check, Check, 16);
PURLIN_OFFSET(Step, bytes, Bytes, 24);
PURLIN_OFFSET(Step, dst, Dst, 32);
PURLIN_OFFSET(Step, src, Src, 56);
PURLIN_OFFSET(Step, row, Row, 248);
PURLIN_OFFSET(Step, col, Col, 252);

PURLIN_SIZE(Worker, 16);
PURLIN_OFFSET(Worker, channel, Channel, 0);
PURLIN_OFFSET(Worker, index, Index, 2);
PURLIN_OFFSET(Worker, first, First, 4);
PURLIN_OFFSET(Worker, count, Count, 8);
PURLIN_OFFSET(Worker, engine, Engine, 12);
PURLIN_OFFSET(Worker, loops, Loops, 13);

PURLIN_SIZE(Peers, 192);
PURLIN_SIZE(Launch, 1176);
PURLIN_OFFSET(Launch, steps, Steps, 0);
PURLIN_OFFSET(Launch, workers, Workers, 8);
PURLIN_OFFSET(Launch, fill, Fill, 16);
PURLIN_OFFSET(Launch, epochs, Epochs, 24);
PURLIN_OFFSET(Launch, abortFlag, AbortFlag, 32);
PURLIN_OFFSET(Launch, status, Status, 40);
PURLIN_OFFSET(Launch, timeoutNs, TimeoutNs, 48);
PURLIN_OFFSET(Launch, scalarPtr, ScalarPtr, 56);
PURLIN_OFFSET(Launch, scalar, Scalar, 64);
PURLIN_OFFSET(Launch, dtype, DType, 72);
PURLIN_OFFSET(Launch, op, Op, 76);
PURLIN_OFFSET(Launch, nranks, NRanks, 80);
PURLIN_OFFSET(Launch, rank, Rank, 84);
PURLIN_OFFSET(Launch, peers, Peers, 88);
PURLIN_OFFSET(Launch, send, Send, 280);
PURLIN_OFFSET(Launch, recv, Recv, 408);
PURLIN_OFFSET(Launch, residual, Residual, 536);
PURLIN_OFFSET(Launch, weight, Weight, 664);
PURLIN_OFFSET(Launch, quant, Quant, 792);
PURLIN_OFFSET(Launch, scales, Scales, 920);
PURLIN_OFFSET(Launch, peerRecv, PeerRecv, 1048);

}  // namespace purlin
