/**
 * @file run.cu
 * @brief purlin_run, the one kernel: thread block b runs worker b of a Plan.
 *
 * Each block reads its epoch, then interprets its steps in order with all
 * of its threads: Stage (Copy into a staging or packet buffer), Notify
 * (check word, then release the peer's flag), Wait (acquire our flag,
 * compare the check word) and Consume (Copy or Reduce out of staging);
 * Advance (the next call of a merged group on this channel) adds
 * kEpochAdvance to the block's epoch. Consecutive Notify steps, or
 * consecutive Wait steps, are independent of each other (a run of Waits is
 * satisfied when each one is, in any order), so the lanes of warp 0 run up
 * to 32 of them at once, one each (signalRun, with the run's length that
 * atom/cuda put in the image): a worker's end-of-call join of its channel's
 * other workers, or its waits for every peer, cost one flag round trip
 * instead of one per flag. A block loads its steps into shared memory
 * kBatch at a time, while it reads its epoch (one round trip to memory for
 * both), and passes one barrier a step: before a step that follows a plain
 * Copy or Reduce, and at the end of a Wait or a packet step (the only steps
 * that can fail, so the barrier also tells every thread whether one did). At the end it stores epoch +
 * kEpochAdvance; the worker of index 0 also fills its channel's epoch slots
 * the Plan does not use. A block that fails reports a status word and
 * returns without advancing its epoch: the rank is broken from then on
 * (status.cuh). It also raises the broken word after the epochs, and the
 * blocks of later launches return at once when it is set: running with an
 * epoch that did not advance, they would notify peers with the flags of a
 * call the peers are still in and the check words of another (a mismatch on
 * a healthy peer).
 */
#include "purlin.cuh"

namespace purlin {

/** resolve: base(space, rank) + off + (epoch&1)*half, or 0 for a bad Ref. */
__device__ __forceinline__ uint64_t resolve(const Launch& L, const Ref& r, uint64_t epoch) {
  uint64_t base = 0;
  switch (r.space) {
    case kSpaceSend: base = r.rank < kMaxBuffers ? L.send[r.rank] : 0; break;
    case kSpaceRecv: base = r.rank < kMaxBuffers ? L.recv[r.rank] : 0; break;
    case kSpaceStage: base = r.rank < kMaxRanks ? L.peers.stage[r.rank] : 0; break;
    case kSpacePacket: base = r.rank < kMaxRanks ? L.peers.packet[r.rank] : 0; break;
  }
  return base ? base + r.off + (epoch & 1) * r.half : 0;
}

/** hasPacket: some Ref of the step is in packet space. A Copy has one
 * source whatever its NSrc says (snac leaves NSrc 0 on copies). */
__device__ __forceinline__ bool hasPacket(const Step& s, int n) {
  bool p = s.dst.space == kSpacePacket;
  for (int j = 0; j < n; j++) p |= s.src[j].space == kSpacePacket;
  return p;
}

/** move runs a Copy (n = 1, the identity) or a Reduce with reducer R. */
template <typename R>
__device__ __forceinline__ uint32_t move(const Launch& L, const Step& s, uint64_t epoch,
                                         uint64_t dst, const uint64_t* src, int n, const R& r) {
  if (hasPacket(s, n)) {
    if (s.verb == kCopy)
      return movePackets(L, s, epoch, dst, src, 1, [](int, auto load) { return load(0); });
    return movePackets(L, s, epoch, dst, src, n,
                       [&](int m, auto load) { return reduceWords<R, uint64_t>(r, m, load); });
  }
  if (s.verb == kCopy) copyPlain(dst, src[0], s.bytes);
  else reducePlain(r, dst, src, n, s.bytes);
  return kStatusOK;
}

/** The Copy path needs no reducer; this one is never called. */
struct NoReducer {
  using T = uint8_t;
  using A = uint8_t;
  __device__ A first(T x, int) const { return x; }
  __device__ A combine(A a, T, int) const { return a; }
  __device__ T finish(A a) const { return a; }
};

template <int DT, int FAMILY>
__device__ __noinline__ uint32_t reduceStep(const Launch& L, const Step& s, uint64_t epoch,
                                            uint64_t dst, const uint64_t* src) {
  Reducer<DT, FAMILY> r(L, s);
  return move(L, s, epoch, dst, src, s.nsrc, r);
}

template <int DT>
__device__ __forceinline__ uint32_t reduceOp(const Launch& L, const Step& s, uint64_t epoch,
                                             uint64_t dst, const uint64_t* src) {
  switch (L.op) {
    case kProd: return reduceStep<DT, kFamilyProd>(L, s, epoch, dst, src);
    case kMax:
    case kMin: return reduceStep<DT, kFamilyMinMax>(L, s, epoch, dst, src);
    default: return reduceStep<DT, kFamilySum>(L, s, epoch, dst, src);  // Sum, Avg, PreMulSum
  }
}

__device__ uint32_t reduce(const Launch& L, const Step& s, uint64_t epoch, uint64_t dst,
                           const uint64_t* src) {
  switch (L.dtype) {
    case kInt8: return reduceOp<kInt8>(L, s, epoch, dst, src);
    case kUint8: return reduceOp<kUint8>(L, s, epoch, dst, src);
    case kInt32: return reduceOp<kInt32>(L, s, epoch, dst, src);
    case kUint32: return reduceOp<kUint32>(L, s, epoch, dst, src);
    case kInt64: return reduceOp<kInt64>(L, s, epoch, dst, src);
    case kUint64: return reduceOp<kUint64>(L, s, epoch, dst, src);
    case kFloat16: return reduceOp<kFloat16>(L, s, epoch, dst, src);
    case kFloat32: return reduceOp<kFloat32>(L, s, epoch, dst, src);
    case kFloat64: return reduceOp<kFloat64>(L, s, epoch, dst, src);
    case kBfloat16: return reduceOp<kBfloat16>(L, s, epoch, dst, src);
    case kFloat8e4m3: return reduceOp<kFloat8e4m3>(L, s, epoch, dst, src);
    default: return reduceOp<kFloat8e5m2>(L, s, epoch, dst, src);
  }
}

/** runStep executes one Copy or Reduce with the whole block; returns this
 * thread's status (a plain step cannot fail; a packet step fails in the
 * threads whose packets never came). */
__device__ __forceinline__ uint32_t runStep(const Launch& L, const Step& s, uint64_t epoch) {
  uint64_t src[kMaxSrc];
  int n = s.verb == kCopy ? 1 : s.nsrc;
  uint64_t dst = resolve(L, s.dst, epoch);
  bool bad = dst == 0 || n < 1 || n > kMaxSrc;
#pragma unroll
  for (int j = 0; j < kMaxSrc; j++) {
    src[j] = j < n ? resolve(L, s.src[j], epoch) : 0;
    bad |= j < n && src[j] == 0;
  }
  if (bad) return kStatusBadRef;
  return s.verb == kCopy ? move(L, s, epoch, dst, src, 1, NoReducer{}) : reduce(L, s, epoch, dst, src);
}

/** signalRun runs, with the lanes of warp 0, the n steps of one verb (Notify
 * or Wait) at run[0..n): lane j takes run[j], step index at+j. n is the
 * first step's run (Step.nsrc of a Notify or Wait in the device image, set
 * by atom/cuda's signalRuns: consecutive steps of one verb that name
 * distinct flags, at most 32), cut at the end of the block's batch. Returns
 * this lane's status; a failed wait reports at once, so the run's other
 * waits (they spin on the status word) stop as soon as a sequence of single
 * waits would have. */
__device__ __forceinline__ uint32_t signalRun(const Launch& L, const Step* run, uint32_t n, uint64_t epoch,
                                              uint32_t at) {
  const uint32_t lane = threadIdx.x;
  if (lane >= n) return kStatusOK;
  const Step& s = run[lane];
  if (s.verb == kNotify) {
    notify(L, s, epoch);
    return kStatusOK;
  }
  const uint32_t st = wait(L, s, epoch);
  if (st != kStatusOK && st != kStatusStopped) report(L.status, statusWord(st, blockIdx.x, at + lane, s.slot));
  return st;
}

/** stop ends a failed block: it returns without advancing its epoch, and
 * raises the rank's broken word for the launches after it (see above). */
__device__ __forceinline__ void stop(volatile uint64_t* broken) {
  if (threadIdx.x == 0) *broken = 1;
}

/** kBatch: the steps a block holds in shared memory at once (7.75 KiB). */
constexpr uint32_t kBatch = 32;

/** loadBatch copies steps [from, from+n) of the worker at steps into batch,
 * with every thread of the block (the Plan is read-only while it runs). */
__device__ __forceinline__ void loadBatch(Step* batch, const uint64_t* steps, uint32_t from, uint32_t n) {
  constexpr uint32_t kWords = sizeof(Step) / 8;
  const unsigned long long* src = (const unsigned long long*)steps + (uint64_t)from * kWords;
  for (uint32_t k = threadIdx.x; k < n * kWords; k += kThreads) ((uint64_t*)batch)[k] = __ldg(src + k);
}

}  // namespace purlin

using namespace purlin;

extern "C" __global__ void __launch_bounds__(kThreads, 1) purlin_run(const __grid_constant__ Launch L) {
  __shared__ Step batch[kBatch];
  __shared__ uint64_t start;
#if __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (atom/cuda launches so on these GPUs): the
  // rank's next kernel on this stream may be scheduled now; what it reads
  // before its own wait below is only its Plan, which nothing writes.
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  const Worker w = ((const Worker*)L.workers)[blockIdx.x];
  const uint64_t* steps = (const uint64_t*)(L.steps + (uint64_t)w.first * sizeof(Step));
  uint32_t first = 0, held = min(w.count, kBatch);  // batch holds steps [first, first+held)
  loadBatch(batch, steps, 0, held);
  const uint32_t used = w.index == 0 ? ((const uint16_t*)L.fill)[blockIdx.x] : kMaxWorkers;
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
  for (uint32_t i = 0; i < w.count;) {
    if (i == first + held) {
      __syncthreads();  // every thread is done with the batch, and with the data step before
      first = i, held = min(w.count - i, kBatch);
      loadBatch(batch, steps, first, held);
      __syncthreads();
      fenced = true;
    }
    const Step& s = batch[i - first];
    if (s.verb == kAdvance) {  // the next call of a merged group on this channel
      epoch += kEpochAdvance;
      i++;
      continue;
    }
    if (!fenced) __syncthreads();
    fenced = true;
    uint32_t n = 1;
    if (s.verb == kNotify || s.verb == kWait) {
      n = min(s.nsrc < 1 ? 1u : s.nsrc > 32 ? 32u : (uint32_t)s.nsrc, first + held - i);
      const uint32_t st = threadIdx.x < 32 ? signalRun(L, &s, n, epoch, i) : kStatusOK;
      // After a Wait every thread may read what it waited for; a Notify
      // publishes what the barrier before it ordered and needs no other.
      if (s.verb == kWait && __syncthreads_or(st != kStatusOK)) return stop(broken);
    } else if (hasPacket(s, s.verb == kCopy ? 1 : min((int)s.nsrc, kMaxSrc))) {
      const uint32_t st = runStep(L, s, epoch);
      if (st != kStatusOK && st != kStatusStopped) report(L.status, statusWord(st, blockIdx.x, i, 0));
      if (__syncthreads_or(st != kStatusOK)) return stop(broken);
    } else {  // a plain step fails only on a bad Ref, in every thread alike; the next step fences it
      if (const uint32_t st = runStep(L, s, epoch)) {
        if (threadIdx.x == 0) report(L.status, statusWord(st, blockIdx.x, i, 0));
        return stop(broken);
      }
      fenced = false;
    }
    i += n;
  }
  // Later launches of this rank read the epochs only after this one ends.
  const uint64_t advanced = epoch + kEpochAdvance;
  if (threadIdx.x == 0) epochs[slot] = advanced;
  if (threadIdx.x >= used && threadIdx.x < kMaxWorkers) epochs[(uint32_t)w.channel * kMaxWorkers + threadIdx.x] = advanced;
}
