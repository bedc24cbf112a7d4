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
 * instead of one per flag. While a block runs one step, the
 * next one's words are already being loaded. At the end it stores epoch +
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

/** runStep executes one Copy or Reduce with the whole block; returns a
 * status that is the same in every thread. */
__device__ __forceinline__ uint32_t runStep(const Launch& L, const Step& s, uint64_t epoch,
                                            uint32_t* shared) {
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
  uint32_t st = s.verb == kCopy ? move(L, s, epoch, dst, src, 1, NoReducer{}) : reduce(L, s, epoch, dst, src);
  if (threadIdx.x == 0) *shared = 0;
  __syncthreads();
  if (st) atomicMax(shared, st);
  __syncthreads();
  return *shared;
}

/** Run is what signalRun leaves for the block: the first failure of the
 * run (status, step index, flag slot), or kStatusOK. */
struct Run {
  uint32_t status, at, slot;
};

/** signalRun runs, with the lanes of warp 0, the n steps of verb (Notify or
 * Wait) that start at step i, `first` (in shared memory) among them: lane j
 * takes step i+j. n is the step's run (Step.nsrc of a Notify or Wait in the
 * device image, set by atom/cuda's planBytes: consecutive steps of one verb
 * that name distinct flags, at most 32). Lane 0 writes the result. */
__device__ __forceinline__ void signalRun(const Launch& L, const Step& first, const uint64_t* steps, uint32_t i,
                                          uint32_t n, uint64_t epoch, Run* out) {
  constexpr uint32_t kWords = sizeof(Step) / 8;
  const uint32_t lane = threadIdx.x;
  Signal s{};
  if (lane == 0) s = Signal{first.verb, first.peer, first.slot, first.delta, first.check};
  else if (lane < n) s = signalAt(steps + (uint64_t)(i + lane) * kWords);
  uint32_t st = kStatusOK;
  if (lane < n) {
    if (first.verb == kWait) st = wait(L, s, epoch);
    else notify(L, s, epoch);
  }
  // A failed wait reports at once, so the run's other waits (they spin on
  // the status word) stop as soon as a sequence of single waits would have.
  if (st != kStatusOK && st != kStatusStopped) report(L.status, statusWord(st, blockIdx.x, i + lane, s.slot));
  const uint32_t failed = __ballot_sync(~0u, st != kStatusOK);
  const int bad = failed ? __ffs(failed) - 1 : 0;
  st = __shfl_sync(~0u, st, bad);
  const uint32_t slot = __shfl_sync(~0u, s.slot, bad);
  if (lane == 0) *out = Run{st, i + (uint32_t)bad, slot};
}

}  // namespace purlin

using namespace purlin;

extern "C" __global__ void __launch_bounds__(kThreads, 1) purlin_run(const __grid_constant__ Launch L) {
  constexpr uint32_t kWords = sizeof(Step) / 8;
  __shared__ Step step;
  __shared__ uint64_t epoch;
  __shared__ uint32_t status;
  __shared__ Run run;
#if __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (atom/cuda launches so on these GPUs): the
  // rank's next kernel on this stream may be scheduled now; what it reads
  // before its own wait below is only its Plan, which nothing writes.
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  const Worker w = ((const Worker*)L.workers)[blockIdx.x];
#if __CUDA_ARCH__ >= 900
  // The kernel before this one on the stream has ended and its writes (the
  // epochs, the broken word, user buffers) are visible from here on.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  uint64_t* epochs = (uint64_t*)L.epochs;
  volatile uint64_t* broken = epochs + kNumEpochs;
  const uint32_t slot = (uint32_t)w.channel * kMaxWorkers + w.index;
  if (threadIdx.x == 0) {
    epoch = epochs[slot];
    status = *broken != 0 ? kStatusStopped : kStatusOK;
  }
  __syncthreads();
  if (status != kStatusOK) return;
  const uint64_t* steps = (const uint64_t*)(L.steps + (uint64_t)w.first * sizeof(Step));
  // Threads below kWords hold word threadIdx.x of step `ahead` in `next`,
  // loaded while the step before it ran.
  uint64_t next = 0;
  uint32_t ahead = ~0u;
  for (uint32_t i = 0; i < w.count;) {
    __syncthreads();  // the last step is done with `step` and `run`, and its writes precede a Notify
    if (threadIdx.x < kWords) {
      ((uint64_t*)&step)[threadIdx.x] = ahead == i ? next : steps[i * kWords + threadIdx.x];
      if (i + 1 < w.count) next = steps[(i + 1) * kWords + threadIdx.x], ahead = i + 1;
    }
    __syncthreads();
    if (step.verb == kAdvance) {  // read by all only after the next barrier
      if (threadIdx.x == 0) epoch += kEpochAdvance;
      i++;
      continue;
    }
    uint32_t st, at = i, flag = 0;
    if (step.verb == kNotify || step.verb == kWait) {
      const uint32_t n = step.nsrc < 1 ? 1 : step.nsrc > 32 ? 32 : step.nsrc;
      if (threadIdx.x < 32) signalRun(L, step, steps, i, n, epoch, &run);
      __syncthreads();
      st = run.status, at = run.at, flag = run.slot;
      i += n;
    } else {
      st = runStep(L, step, epoch, &status);
      i++;
    }
    if (st != kStatusOK) {
      if (threadIdx.x == 0) {
        if (st != kStatusStopped) report(L.status, statusWord(st, blockIdx.x, at, flag));
        *broken = 1;
      }
      return;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint64_t advanced = epoch + kEpochAdvance;
    epochs[slot] = advanced;
    if (w.index == 0) {
      uint16_t used = ((const uint16_t*)L.fill)[blockIdx.x];
      for (uint32_t k = used; k < kMaxWorkers; k++) epochs[(uint32_t)w.channel * kMaxWorkers + k] = advanced;
    }
  }
}
