/**
 * @file run.cu
 * @brief purlin_run, the one kernel: thread block b runs worker b of a Plan.
 *
 * Each block reads its epoch, then interprets its steps in order with all
 * of its threads: Stage (Copy into a staging or packet buffer), Notify
 * (the peer's flag and check word, after a fence when it publishes data
 * the block wrote), Wait (acquire our flag, compare its check word) and
 * Consume (Copy or Reduce out of staging); Advance (the next call of a
 * merged group on this channel) adds kEpochAdvance to the block's epoch.
 * Consecutive Notify steps, or consecutive Wait steps, are independent of
 * each other (a run of Waits is satisfied when each one is, in any order),
 * so the lanes of warp 0 run up to 32 of them at once, one each (signalRun,
 * with the run's length that atom/cuda put in the image): a worker's join
 * of its channel's other workers, or its waits for every peer, cost one
 * flag round trip instead of one per flag. A block loads its steps into shared memory
 * kBatch at a time, and lanes of warp 0 decode them (decodeBatch: each
 * step's kind and the address of each of its Refs for either parity of the
 * epoch), so running a step costs no Ref arithmetic; the first batch is
 * loaded and decoded before the block waits for the kernel before it
 * (programmatic dependent launch). A block passes one barrier a step: before
 * a step that follows a plain Copy or Reduce, and at the end of a Wait or a
 * packet step (the only steps that can fail, so the barrier also tells
 * every thread whether one did). At the end it stores epoch + kEpochAdvance;
 * the worker of index 0 also fills its channel's epoch slots the Plan does
 * not use. A block that fails reports a status word and
 * returns without advancing its epoch: the rank is broken from then on
 * (status.cuh). It also raises the broken word after the epochs, and the
 * blocks of later launches return at once when it is set: running with an
 * epoch that did not advance, they would notify peers with the flags of a
 * call the peers are still in and the check words of another (a mismatch on
 * a healthy peer).
 *
 * Epilogue steps (an AllReduce's epilogue on rows of its output,
 * epilogue.cuh) never meet the run loop: atom/cuda places each worker's
 * after its other steps in the image, outside its count, and they run once
 * those are done. Later is as good as where snac put them, as no step
 * touches a row after its epilogue. purlin_run_epilogue, the same loop,
 * then runs them in each block; where a worker has more rows than its
 * block runs at once (atom/cuda epilogueSplitOf), purlin_epilogue runs
 * them instead on more blocks, launched right after purlin_run on the same
 * stream, reading its steps while purlin_run ends. purlin_run itself has no call
 * of the epilogue: an epilogue wants every register, and any call of it,
 * even after the step loop, makes the compiler spill the loop's state (as
 * purlin_run_epilogue does, a few bytes on sm_80 and sm_90).
 */
#include "purlin.cuh"

/** PURLIN_TRACE(i, k): where a measuring build (tests/gpu/stepbench.cu)
 * times step i: k = 0 as the step begins, 1 once the barrier before it is
 * passed, 2 when it is done. Nothing in the library's build. */
#ifndef PURLIN_TRACE
#define PURLIN_TRACE(i, k)
#endif

namespace purlin {

/** Kind is what a step is to the run loop, worked out once per batch (decodeBatch). */
enum Kind : uint8_t {
  kKindCopy,    // a Copy over plain memory
  kKindReduce,  // a Reduce over plain memory
  kKindPacket,  // a Copy or Reduce of which some Ref is in packet space
  kKindSignal,  // a Notify or Wait
  kKindAdvance,
  kKindRepeat,  // a loop's head (snac loop.go): its body follows
  kKindBadRef,  // a Ref outside the launch's spaces (the host checks Plans; this is the kernel's own guard); last
};

static_assert(kKindBadRef == kKindRepeat + 1, "the run loop takes both in one branch");

/** Decoded is a batch step as the run loop reads it: its kind and the
 * address of each Ref for either parity of the epoch, so that running a
 * step costs no Ref arithmetic; a Notify or Wait: dst[0] is its flag
 * slot's pairs (signalPairs) on the rank it raises or reads. */
struct Decoded {
  uint8_t kind;
  uint64_t dst[2];
  uint64_t src[2][kMaxSrc];
};

/** Bases holds base(space, rank) for every space and rank a Ref names (the
 * caller's buffers and every rank's staging and packet memory) and every
 * rank's flags, copied out of the Launch once per block: an indexed read of
 * the Launch is slow. */
struct Bases {
  uint64_t at[kNumSpaces][kMaxBuffers];  // [space][rank]; 0 where nothing is
  uint64_t flags[kMaxRanks];
  uint32_t self;                // this rank
};

static_assert(kMaxPeerSlots <= kMaxBuffers, "a peer slot indexes Bases.at like a buffer");

/** fillBases: threads [0, kNumSpaces*kMaxBuffers) copy one base each, the
 * next kMaxRanks one rank's flags. */
__device__ __forceinline__ void fillBases(Bases& b, const Launch& L) {
  constexpr uint32_t kBases = kNumSpaces * kMaxBuffers;
  const uint32_t t = threadIdx.x, space = t / kMaxBuffers, rank = t % kMaxBuffers;
  if (t == 0) b.self = (uint32_t)L.rank;
  if (t >= kBases && t < kBases + kMaxRanks) b.flags[t - kBases] = L.peers.flags[t - kBases];
  if (t >= kBases) return;
  uint64_t base = 0;
  switch (space) {
    case kSpaceSend: base = L.send[rank]; break;
    case kSpaceRecv: base = L.recv[rank]; break;
    case kSpaceStage: base = rank < kMaxRanks ? L.peers.stage[rank] : 0; break;
    case kSpacePacket: base = rank < kMaxRanks ? L.peers.packet[rank] : 0; break;
    case kSpacePeerRecv: base = rank < kMaxPeerSlots ? L.peerRecv[rank] : 0; break;
  }
  b.at[space][rank] = base;
}

/** resolve writes base(space, rank) + off + parity*half for both parities
 * into at[0], at[1] (at[1] is `stride` words after at[0]); false for a bad Ref. */
__device__ __forceinline__ bool resolve(const Bases& b, const Ref& r, uint64_t* at, int stride) {
  const uint64_t base = r.space < kNumSpaces && r.rank < kMaxBuffers ? b.at[r.space][r.rank] : 0;
  at[0] = base + r.off;
  at[stride] = base + r.off + r.half;
  return base != 0;
}

/** decodeBatch: lane k of warp 0 decodes step k of the batch. */
__device__ __forceinline__ void decodeBatch(Decoded* dec, const Step* batch, uint32_t held, const Bases& b) {
  const uint32_t k = threadIdx.x;
  if (k >= held) return;
  const Step& s = batch[k];
  Decoded& d = dec[k];
  if (s.verb == kAdvance || s.verb == kRepeat) {
    d.kind = s.verb == kAdvance ? kKindAdvance : kKindRepeat;
    return;
  }
  if (s.verb == kNotify || s.verb == kWait) {
    const uint32_t rank = s.verb == kNotify ? s.peer : b.self;
    const uint64_t base = rank < kMaxRanks ? b.flags[rank] : 0;
    d.dst[0] = signalPairs(base, s.slot);
    d.kind = base != 0 ? kKindSignal : kKindBadRef;  // a run's first step: atom/cuda checks every peer
    return;
  }
  const int n = s.verb == kCopy ? 1 : s.nsrc;  // snac leaves NSrc 0 on copies
  bool ok = n >= 1 && n <= kMaxSrc && resolve(b, s.dst, d.dst, 1);
  bool packet = s.dst.space == kSpacePacket;
#pragma unroll
  for (int j = 0; j < kMaxSrc; j++) {
    if (j < n) {
      ok &= resolve(b, s.src[j], &d.src[0][j], kMaxSrc);
      packet |= s.src[j].space == kSpacePacket;
    }
  }
  d.kind = !ok ? kKindBadRef : packet ? kKindPacket : s.verb == kCopy ? kKindCopy : kKindReduce;
}

/** Loop is the loop (a Repeat step, snac loop.go) a block is in: its body,
 * steps [start, end) of the worker, runs reps times, and in repetition rep
 * its flags are rep*delta higher and its Refs in the caller's buffers
 * rep*shift bytes on (shiftBatch). A batch of steps ends at the body's end,
 * so only a batch's load looks at it: the step loop holds none of it in a
 * register, and a step costs nothing more. Thread 0 writes it at the
 * Repeat step, before a barrier, and counts repetitions between two
 * barriers of a load. */
struct Loop {
  uint32_t start, end, rep, reps;
  int64_t delta;
  uint64_t shift;
};
__shared__ Loop blockLoop;
/** blockCounted: the block counted itself in its image's header as it
 * started (countEnded); else it does so at its end. */
__shared__ bool blockCounted;

/** callerSpace: a space of the caller's buffers (snac Space.caller), which a
 * loop's repetitions move on. */
__device__ __forceinline__ bool callerSpace(uint8_t space) {
  return space == kSpaceSend || space == kSpaceRecv || space == kSpacePeerRecv;
}

/** shiftBatch: lane k of warp 0 moves step k of a decoded batch, step
 * first+k of the worker, to repetition blockLoop.rep of the loop, where
 * it lies in its body: its flag's delta (in the batch) or its addresses
 * in the caller's buffers (decoded). Out of line: the run loop calls it
 * only for a loop's later repetitions. */
__device__ __noinline__ void shiftBatch(Decoded* dec, Step* batch, uint32_t held, uint32_t first) {
  const uint32_t k = threadIdx.x;
  const Loop& loop = blockLoop;
  if (k >= held || first + k < loop.start || first + k >= loop.end) return;
  Step& s = batch[k];
  Decoded& d = dec[k];
  if (s.verb == kNotify || s.verb == kWait) {
    s.delta += (int64_t)loop.rep * loop.delta;
    return;
  }
  if (s.verb != kCopy && s.verb != kReduce) return;
  const uint64_t shift = (uint64_t)loop.rep * loop.shift;
  if (callerSpace(s.dst.space)) d.dst[0] += shift, d.dst[1] += shift;
  const int n = s.verb == kCopy ? 1 : s.nsrc;
  for (int j = 0; j < n && j < kMaxSrc; j++)
    if (callerSpace(s.src[j].space)) d.src[0][j] += shift, d.src[1][j] += shift;
}

/** reducePackets runs a Reduce with reducer R of which some Ref is in packet
 * space (Rows: strided Refs, movePackets). */
template <bool Rows, typename R>
__device__ __forceinline__ uint32_t reducePackets(const Launch& L, const Step& s, uint64_t epoch, uint64_t dst,
                                                  const uint64_t* src, int n, const R& r) {
  return movePackets<Rows>(L, s, epoch, dst, src, n, [&](int m, auto load) { return reduceWords<R, uint64_t>(r, m, load); });
}

/** copyPackets runs a Copy of which some Ref is in packet space (Rows:
 * strided Refs, movePackets). */
template <bool Rows>
__device__ __forceinline__ uint32_t copyPackets(const Launch& L, const Step& s, uint64_t epoch, uint64_t dst,
                                                const uint64_t* src) {
  return movePackets<Rows>(L, s, epoch, dst, src, 1, [](int, auto load) { return load(0); });
}

/** copyPacketRows is copyPackets of a column block's rows, kept out of line
 * so that purlin_run's loop holds no registers for them. */
__device__ __noinline__ uint32_t copyPacketRows(const Launch& L, const Step& s, uint64_t epoch, uint64_t dst,
                                                const uint64_t* src) {
  return copyPackets<true>(L, s, epoch, dst, src);
}

/** move runs a Reduce with reducer R. */
template <typename R>
__device__ __forceinline__ uint32_t move(const Launch& L, const Step& s, uint64_t epoch, bool packet,
                                         uint64_t dst, const uint64_t* src, int n, const R& r) {
  if (packet) {
    if (s.row != 0) return reducePackets<true>(L, s, epoch, dst, src, n, r);
    return reducePackets<false>(L, s, epoch, dst, src, n, r);
  }
  if (s.row != 0) reduceRows(r, s, dst, src, n);
  else reducePlain(r, dst, src, n, s.bytes);
  return kStatusOK;
}

template <int DT, int FAMILY>
__device__ __noinline__ uint32_t reduceStep(const Launch& L, const Step& s, uint64_t epoch, bool packet,
                                            uint64_t dst, const uint64_t* src) {
  Reducer<DT, FAMILY> r(blockOp, s);
  return move(L, s, epoch, packet, dst, src, s.nsrc, r);
}

template <int DT>
__device__ __forceinline__ uint32_t reduceOp(const Launch& L, const Step& s, uint64_t epoch, bool packet,
                                             uint64_t dst, const uint64_t* src) {
  switch (L.op) {
    case kProd: return reduceStep<DT, kFamilyProd>(L, s, epoch, packet, dst, src);
    case kMax:
    case kMin: return reduceStep<DT, kFamilyMinMax>(L, s, epoch, packet, dst, src);
    default: return reduceStep<DT, kFamilySum>(L, s, epoch, packet, dst, src);  // Sum, Avg, PreMulSum
  }
}

__device__ uint32_t reduce(const Launch& L, const Step& s, uint64_t epoch, bool packet, uint64_t dst,
                           const uint64_t* src) {
  switch (L.dtype) {
    case kInt8: return reduceOp<kInt8>(L, s, epoch, packet, dst, src);
    case kUint8: return reduceOp<kUint8>(L, s, epoch, packet, dst, src);
    case kInt32: return reduceOp<kInt32>(L, s, epoch, packet, dst, src);
    case kUint32: return reduceOp<kUint32>(L, s, epoch, packet, dst, src);
    case kInt64: return reduceOp<kInt64>(L, s, epoch, packet, dst, src);
    case kUint64: return reduceOp<kUint64>(L, s, epoch, packet, dst, src);
    case kFloat16: return reduceOp<kFloat16>(L, s, epoch, packet, dst, src);
    case kFloat32: return reduceOp<kFloat32>(L, s, epoch, packet, dst, src);
    case kFloat64: return reduceOp<kFloat64>(L, s, epoch, packet, dst, src);
    case kBfloat16: return reduceOp<kBfloat16>(L, s, epoch, packet, dst, src);
    case kFloat8e4m3: return reduceOp<kFloat8e4m3>(L, s, epoch, packet, dst, src);
    default: return reduceOp<kFloat8e5m2>(L, s, epoch, packet, dst, src);
  }
}

/** sumPackets runs a Sum of which some Ref is in packet space in the run
 * loop itself: through the call every other Reduce takes (reduce), such a
 * step costs about 1,200 cycles more, twice a packet Copy's
 * (tests/gpu/stepbench.cu), so the hottest types, float32 and bfloat16,
 * take this path (rows of a column block take the other). */
template <int DT>
__device__ __forceinline__ uint32_t sumPackets(const Launch& L, const Step& s, uint64_t epoch, uint64_t dst,
                                               const uint64_t* src) {
  const Reducer<DT, kFamilySum> r(blockOp, s);
  return reducePackets<false>(L, s, epoch, dst, src, s.nsrc, r);
}

/** moveStep executes one Copy or Reduce with the whole block (strided Refs:
 * a Reduce or a step through packets; runStep copies plain rows), from its
 * decoded addresses for this epoch's parity; returns this
 * thread's status (a plain step cannot fail; a packet step fails in the
 * threads whose packets never came). */
__device__ __forceinline__ uint32_t moveStep(const Launch& L, const Step& s, const Decoded& d, uint64_t epoch) {
  const uint32_t p = (uint32_t)(epoch & 1);
  const bool packet = d.kind == kKindPacket;
  if (s.verb == kCopy) {
    if (!packet) {
      copyPlain(d.dst[p], d.src[p][0], s.bytes);
      return kStatusOK;
    }
    if (s.row != 0) return copyPacketRows(L, s, epoch, d.dst[p], d.src[p]);
    return copyPackets<false>(L, s, epoch, d.dst[p], d.src[p]);
  }
  if (packet && L.op == kSum && s.row == 0) {  // the small AllReduce, ReduceScatter and Reduce of most callers
    if (L.dtype == kFloat32) return sumPackets<kFloat32>(L, s, epoch, d.dst[p], d.src[p]);
    if (L.dtype == kBfloat16) return sumPackets<kBfloat16>(L, s, epoch, d.dst[p], d.src[p]);
  }
  uint64_t src[kMaxSrc];
#pragma unroll
  for (int j = 0; j < kMaxSrc; j++) src[j] = d.src[p][j];
  return reduce(L, s, epoch, packet, d.dst[p], src);
}

/** runStep executes one Copy or Reduce (moveStep). A step with strided Refs
 * (a column block's rows) in plain memory moves them all at once (copyRows,
 * or reduceRows through move); one through packets finds each chunk's row
 * (movePackets). atom/cuda checked the rows; snac cuts packet steps' rows at
 * packet ends. */
__device__ __forceinline__ uint32_t runStep(const Launch& L, const Step& s, const Decoded& d, uint64_t epoch) {
  if (s.row == 0 || d.kind == kKindPacket || s.verb != kCopy) return moveStep(L, s, d, epoch);
  const uint32_t p = (uint32_t)(epoch & 1);
  copyRows(d.dst[p], s.dst.pitch, d.src[p][0], s.src[0].pitch, s.bytes, s.row, s.col);
  return kStatusOK;
}

/** signalRun runs, with the lanes of warp 0, the n steps of one verb (Notify
 * or Wait) at run[0..n), decoded at dec: lane j takes run[j], step index at+j. n is the
 * first step's run (Step.nsrc of a Notify or Wait in the device image, set
 * by atom/cuda's signalRuns: consecutive steps of one verb that name
 * distinct flags, at most 32), cut at the end of the block's batch. Returns
 * this lane's status; wrote: the block wrote plain memory since its last
 * fence (notify). A failed wait reports at once, so the run's other waits
 * (they spin on the status word) stop as soon as a sequence of single waits
 * would have. */
__device__ __forceinline__ uint32_t signalRun(const Launch& L, const Step* run, const Decoded* dec, uint32_t n,
                                              uint64_t epoch, uint32_t at, bool wrote) {
  const uint32_t lane = threadIdx.x;
  if (lane >= n) return kStatusOK;
  const Step& s = run[lane];
  if (s.verb == kNotify) {
    notify(dec[lane].dst[0], s, epoch, wrote);
    return kStatusOK;
  }
  const uint32_t st = wait(L, dec[lane].dst[0], s, epoch);
  if (st != kStatusOK && st != kStatusStopped) report(L.status, statusWord(st, blockIdx.x, at + lane, s.slot));
  return st;
}

/** stop ends a failed block: it returns without advancing its epoch, and
 * raises the rank's broken word for the launches after it (see above). */
__device__ __forceinline__ void stop(volatile uint64_t* broken) {
  if (threadIdx.x == 0) *broken = 1;
}

/** kBatch: the steps a block holds in shared memory at once (7.75 KiB, and 4.75 KiB decoded). */
constexpr uint32_t kBatch = 32;

/** loadBatch copies steps [from, from+n) of the worker at steps into batch,
 * with every thread of the block (the Plan is read-only while it runs). */
__device__ __forceinline__ void loadBatch(Step* batch, const uint64_t* steps, uint32_t from, uint32_t n) {
  constexpr uint32_t kWords = sizeof(Step) / 8;
  const unsigned long long* src = (const unsigned long long*)steps + (uint64_t)from * kWords;
  for (uint32_t k = threadIdx.x; k < n * kWords; k += kThreads) ((uint64_t*)batch)[k] = __ldg(src + k);
}

/** epilogueHeld and epilogueBuffers are where a block holds the Epilogue
 * step it runs and the Launch's buffers, read into shared memory with one
 * load a thread: a field read where it is used would be a round trip to
 * memory each, one after another. */
__shared__ Step epilogueHeld;
__shared__ EpilogueBuffers epilogueBuffers;
/** purlin_run_epilogue's count of its worker's Epilogue steps, kept here
 * across the run loop rather than in a register. */
__shared__ uint32_t epilogueCount;

/** epilogueCountOf is the number of the block's worker's Epilogue steps,
 * a uint32 per worker after fill in the image (4-byte aligned; atom/cuda
 * planBytes). */
__device__ __forceinline__ uint32_t epilogueCountOf(const Launch& L) {
  return ((const uint32_t*)((L.fill + 2 * gridDim.x + 3) & ~3ull))[blockIdx.x];
}

/** stageEpilogues reads the first of a worker's Epilogue steps, step
 * `first` of its steps at steps, and the Launch's buffers into shared
 * memory (visible to the block after its next barrier). Both kernels do so
 * before they wait for the kernel before them: the Plan and the Launch are
 * read-only. */
__device__ __forceinline__ void stageEpilogues(const Launch& L, const uint64_t* steps, uint32_t first) {
  constexpr uint32_t kWords = sizeof(EpilogueBuffers) / 8;
  for (uint32_t k = threadIdx.x; k < kWords; k += kThreads) ((uint64_t*)&epilogueBuffers)[k] = ((const uint64_t*)L.recv)[k];
  loadBatch(&epilogueHeld, steps, first, 1);
}

/** runEpilogues runs the worker's n Epilogue steps (n > 0), steps [first,
 * first+n) at steps, after its other steps in the image (atom/cuda
 * planBytes), in a Plan of type DT. The first is staged (stageEpilogues)
 * behind a barrier. A step the kernel cannot run fails the block as a bad
 * Ref does. Its rows run in functions of their own (epilogue.cuh); this
 * loop is one too, a function for each type: inlined into epilogueSteps,
 * the three loops' state is kept across those calls, spilled and slower
 * (docs/performance.md). */
template <int DT>
__device__ __noinline__ void runEpilogues(const Launch& L, const uint64_t* steps, uint32_t first, uint32_t n) {
  for (uint32_t k = first; k < first + n; k++) {
    if (k > first) {
      __syncthreads();  // every thread is done with the step before
      loadBatch(&epilogueHeld, steps, k, 1);
      __syncthreads();
    }
    if (!epilogue<DT>(epilogueBuffers, epilogueHeld)) {  // in every thread alike
      if (threadIdx.x == 0) report(L.status, statusWord(kStatusBadRef, blockIdx.x, k, 0));
      return stop((volatile uint64_t*)L.epochs + kNumEpochs);
    }
  }
}

/** epilogueSteps runs the block's worker's Epilogue steps, of the Plan's
 * type (runEpilogues). */
__device__ __noinline__ void epilogueSteps(const Launch& L, const uint64_t* steps, uint32_t first, uint32_t n) {
  switch (L.dtype) {  // a Plan with epilogues is of one of these types (atom/cuda checks)
    case kFloat32: return runEpilogues<kFloat32>(L, steps, first, n);
    case kFloat16: return runEpilogues<kFloat16>(L, steps, first, n);
    case kBfloat16: return runEpilogues<kBfloat16>(L, steps, first, n);
  }
}

/** countEnded adds the block to the count in its image's header
 * (kImageHeader): the rank reuses an image's memory once every block
 * launched on it has counted itself (atom/cuda images.go). The caller's
 * threads have read the last of the image before a barrier; the fence
 * orders those reads before the count. */
__device__ __forceinline__ void countEnded(const Launch& L) {
  __threadfence();
  atomicAdd((unsigned long long*)(L.steps - kImageHeader), 1ull);
}

/** runPlan is purlin_run's body; with kEpilogues (purlin_run_epilogue) the
 * block then runs its worker's Epilogue steps itself, once its other steps
 * are done (the rows it wrote are its own: snac places an epilogue after
 * every touch of its rows, and no other worker touches them). */
template <bool kEpilogues>
__device__ __forceinline__ void runPlan(const Launch& L) {
  __shared__ Step batch[kBatch];
  __shared__ Decoded dec[kBatch];
  __shared__ Bases bases;
  __shared__ uint64_t start;
#if __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (atom/cuda launches so on these GPUs): the
  // rank's next kernel on this stream may be scheduled now; what it reads
  // before its own wait below is only its Plan and its Launch, which nothing writes.
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  // purlin_run_epilogue: the worker's Epilogue steps, their number after
  // fill, read at once, its first staged before the wait (stageEpilogues).
  const uint32_t epilogues = kEpilogues ? epilogueCountOf(L) : 0;
  const Worker w = ((const Worker*)L.workers)[blockIdx.x];
  if (w.engine != 0) return;  // a copy-engine worker of a Plan that mixes engines: its stream runs it (purlin_signals)
  const uint64_t* steps = (const uint64_t*)(L.steps + (uint64_t)w.first * sizeof(Step));
  uint32_t first = 0, held = min(w.count, kBatch);  // batch holds steps [first, first+held)
  loadBatch(batch, steps, 0, held);
  if (kEpilogues && epilogues != 0) stageEpilogues(L, steps, w.count);
  fillBases(bases, L);
  const uint32_t used = w.index == 0 ? ((const uint16_t*)L.fill)[blockIdx.x] : kMaxWorkers;
  if (threadIdx.x == 0) {
    blockLookAt = 0, blockAbort = 0, blockStopped = 0;
    blockOp = OpArgs{L.op, L.nranks, L.scalarPtr, L.scalar};
    blockLoop = Loop{};  // no loop: no batch load goes back
    if (kEpilogues) epilogueCount = epilogues;
  }
  __syncthreads();
  // A worker whose steps fit one batch has read all it reads of its image
  // (its Worker and fill too, before the barrier): the block counts itself
  // now, which overlaps the call; another counts itself at its end.
  // (Not one with a loop: it loads its body again for each repetition.)
  // Kept in shared memory for the block's end: in a register across the
  // step loop, the compiler spilled the loop's state.
  if (threadIdx.x == 0) {
    blockCounted = held == w.count && !(kEpilogues && epilogues != 0) && w.loops == 0;
    if (blockCounted) countEnded(L);
  }
  decodeBatch(dec, batch, held, bases);
#if __CUDA_ARCH__ >= 900
  // The kernel before this one on the stream has ended and its writes (the
  // epochs, the broken word, user buffers) are visible from here on.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  uint64_t* epochs = (uint64_t*)L.epochs;
  volatile uint64_t* broken = epochs + kNumEpochs;
  const uint32_t slot = (uint32_t)w.channel * kMaxWorkers + w.index;
  if (threadIdx.x == 0) start = epochs[slot];
  if (__syncthreads_or(threadIdx.x == 0 && *broken != 0)) return;
  uint64_t epoch = start;
  // A barrier orders a step after the data step before it (a Notify after
  // the writes it publishes, a Copy after the Reduce that filled its
  // source); a Wait, and a packet step, end in one, so what follows them
  // needs none of its own.
  bool fenced = true;
  // The block wrote plain memory since its last fence, which the next Notify
  // that publishes data fences for (packets publish themselves; the kernel
  // before this one has ended).
  bool wrote = false;
  for (uint32_t i = 0; i < w.count;) {
    if (i == first + held) {
      // A batch ends at a loop's body's end too (below): the body again,
      // for its next repetition, or the steps after it (a body never ends
      // the worker's steps: snac's LoopsValid).
      const Loop& loop = blockLoop;  // thread 0 writes it only between the barriers below
      const uint32_t at = i == loop.end && loop.rep + 1 < loop.reps ? loop.start : i;
      __syncthreads();  // every thread is done with the batch, and with the data step before
      if (at != i && threadIdx.x == 0) blockLoop.rep++;
      i = first = at;
      held = min(min(w.count - i, kBatch), i < loop.end ? loop.end - i : kBatch);
      loadBatch(batch, steps, first, held);
      __syncthreads();
      decodeBatch(dec, batch, held, bases);
      if (loop.rep != 0 && threadIdx.x < 32) shiftBatch(dec, batch, held, first);
      __syncthreads();
      fenced = true;
    }
    PURLIN_TRACE(i, 0);
    const Decoded& d = dec[i - first];
    const uint8_t kind = d.kind;
    if (kind == kKindAdvance) {  // the next call of a merged group on this channel
      epoch += kEpochAdvance;
      i++;
      continue;
    }
    if (!fenced) __syncthreads();
    fenced = true;
    PURLIN_TRACE(i, 1);
    const Step& s = batch[i - first];
    uint32_t n = 1;
    if (kind == kKindSignal) {
      n = min(s.nsrc < 1 ? 1u : s.nsrc > 32 ? 32u : (uint32_t)s.nsrc, first + held - i);
      const uint32_t st = threadIdx.x < 32 ? signalRun(L, &s, &d, n, epoch, i, wrote) : kStatusOK;
      if (s.verb == kNotify && publishes(s.slot)) wrote = false;  // lane 0 fenced
      // After a Wait every thread may read what it waited for; a Notify
      // publishes what the barrier before it ordered and needs no other.
      if (s.verb == kWait && __syncthreads_or(st != kStatusOK)) return stop(broken);
    } else if (kind == kKindPacket) {
      const uint32_t st = runStep(L, s, d, epoch);
      wrote |= s.dst.space != kSpacePacket;
      if (st != kStatusOK && st != kStatusStopped) report(L.status, statusWord(st, blockIdx.x, i, 0));
      if (__syncthreads_or(st != kStatusOK)) return stop(broken);
    } else if (kind >= kKindRepeat) {
      if (kind == kKindBadRef) {  // in every thread alike
        if (threadIdx.x == 0) report(L.status, statusWord(kStatusBadRef, blockIdx.x, i, 0));
        return stop(broken);
      }
      // A loop: its body, the slot steps after it, runs bytes times. The
      // batch ends here, so the next one starts at the body and ends at
      // its end, where the batch after it starts the body again.
      if (threadIdx.x == 0) blockLoop = Loop{i + 1, i + 1 + s.slot, 0, (uint32_t)s.bytes, s.delta, s.check};
      __syncthreads();  // every thread reads it before the next batch
      held = i + 1 - first;
    } else {  // a plain step cannot fail; the next step fences it
      runStep(L, s, d, epoch);
      fenced = false;
      wrote = true;
    }
    PURLIN_TRACE(i, 2);
    i += n;
  }
  // Later launches of this rank read the epochs only after this one ends.
  const uint64_t advanced = epoch + kEpochAdvance;
  if (threadIdx.x == 0) epochs[slot] = advanced;
  if (threadIdx.x >= used && threadIdx.x < kMaxWorkers)
    epochs[(uint32_t)w.channel * kMaxWorkers + threadIdx.x] = advanced;
  // Every step of the block ran (a failed one returned above), so its rows
  // are whole; after a barrier its writes to them are its threads' too.
  if (kEpilogues && epilogueCount != 0) {
    __syncthreads();
    epilogueSteps(L, steps, w.count, epilogueCount);
  }
  if (!blockCounted) {  // thread 0 wrote it before the step loop's first barrier
    __syncthreads();  // every thread is done with the image (Epilogue steps read it)
    if (threadIdx.x == 0) countEnded(L);
  }
}

}  // namespace purlin

using namespace purlin;

extern "C" __global__ void __launch_bounds__(kThreads, 1) purlin_run(const __grid_constant__ Launch L) {
  runPlan<false>(L);
}

/** purlin_run_epilogue runs a Plan with Epilogue steps whose rows need no
 * more blocks than its workers (atom/cuda's epilogueSplit of 1): one kernel
 * instead of purlin_run and purlin_epilogue, a kernel node fewer. Its
 * registers are purlin_run's and the epilogue's; where they do not fit, it
 * may spill (a few bytes on sm_80 and sm_90), which purlin_run itself never does. */
extern "C" __global__ void __launch_bounds__(kThreads, 1) purlin_run_epilogue(const __grid_constant__ Launch L) {
  runPlan<true>(L);
}

/** purlin_epilogue runs the Epilogue steps of the Plan that purlin_run ran
 * just before it on the stream, with the same Launch: block b those of
 * worker b (epilogueCountOf). It does nothing on a broken rank: the call failed, and
 * the residual it would update is the caller's. Each block counts itself
 * in the image's header once done with it, as purlin_run's do. */
extern "C" __global__ void __launch_bounds__(kThreads, 1) purlin_epilogue(const __grid_constant__ Launch L) {
  const uint32_t n = epilogueCountOf(L);
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  if (n == 0) {  // alike in every thread of the block
    __syncthreads();
    if (threadIdx.x == 0) countEnded(L);
    return;
  }
  const Worker w = ((const Worker*)L.workers)[blockIdx.x];
  const uint64_t* steps = (const uint64_t*)(L.steps + (uint64_t)w.first * sizeof(Step));
  stageEpilogues(L, steps, w.count);
#if __CUDA_ARCH__ >= 900
  // purlin_run before it has ended, and its writes are visible.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  // A barrier (the staged step is the block's) that also makes the broken
  // word's one reading the block's: the epilogue's sums need every thread or none.
  if (__syncthreads_or(threadIdx.x == 0 && *((volatile uint64_t*)L.epochs + kNumEpochs) != 0)) return;
  epilogueSteps(L, steps, w.count, n);
  __syncthreads();  // every thread is done with the image
  if (threadIdx.x == 0) countEnded(L);
}

/** purlin_signals runs one signal segment of a copy-engine worker
 * (snac.EngineCopy; atom/cuda engine.go): the worker's Notify, Wait and
 * Advance steps between two of its Copy steps, which the copy engine runs
 * on the same stream, before and after this kernel. L.workers points at
 * the segment: a Worker whose First and Count are the segment's steps,
 * followed by two uint32, the Advance steps of the worker before the
 * segment, and, for the worker's last segment, the workers of its channel
 * in the Plan (0 for any other segment). The last segment stores the
 * worker's epoch + kEpochAdvance, and for index 0 fills the channel's
 * epoch slots the Plan does not use, as purlin_run's blocks do. One thread
 * runs the steps in order: a segment is a few signals. A failed wait stops
 * the rank as a failed block does (the copies queued after it still run:
 * they read and write only this call's buffers and staging, and the
 * call has failed). */
extern "C" __global__ void __launch_bounds__(32, 1) purlin_signals(const __grid_constant__ Launch L) {
  if (threadIdx.x != 0) return;
  blockLookAt = 0, blockAbort = 0, blockStopped = 0;
  const Worker w = *(const Worker*)L.workers;
  const uint32_t* tail = (const uint32_t*)(L.workers + sizeof(Worker));
  const uint32_t advances = tail[0], used = tail[1];
  uint64_t* epochs = (uint64_t*)L.epochs;
  volatile uint64_t* broken = epochs + kNumEpochs;
  if (*broken != 0) return;
  const uint32_t slot = (uint32_t)w.channel * kMaxWorkers + w.index;
  uint64_t epoch = epochs[slot] + (uint64_t)advances * kEpochAdvance;
  const Step* steps = (const Step*)L.steps + w.first;
  for (uint32_t i = 0; i < w.count; i++) {
    const Step& s = steps[i];
    if (s.verb == kAdvance) {
      epoch += kEpochAdvance;
      continue;
    }
    const uint32_t rank = s.verb == kNotify ? s.peer : (uint32_t)L.rank;
    const uint64_t base = (s.verb == kNotify || s.verb == kWait) && rank < kMaxRanks ? L.peers.flags[rank] : 0;
    if (base == 0) {
      report(L.status, statusWord(kStatusBadRef, w.index, w.first + i, 0));
      *broken = 1;
      return;
    }
    const uint64_t pairs = signalPairs(base, s.slot);
    if (s.verb == kNotify) {
      notify(pairs, s, epoch, true);  // the copies before it on the stream have landed
      continue;
    }
    const uint32_t st = wait(L, pairs, s, epoch);
    if (st != kStatusOK) {
      if (st != kStatusStopped) report(L.status, statusWord(st, w.index, w.first + i, s.slot));
      *broken = 1;
      return;
    }
  }
  if (used == 0) return;
  const uint64_t advanced = epoch + kEpochAdvance;
  epochs[slot] = advanced;
  if (w.index == 0)
    for (uint32_t k = used; k < kMaxWorkers; k++) epochs[(uint32_t)w.channel * kMaxWorkers + k] = advanced;
}
