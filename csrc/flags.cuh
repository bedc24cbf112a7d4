/**
 * @file flags.cuh
 * @brief Notify and Wait: monotonic 64-bit flags, check words, bounded spins.
 *
 * Flags are never cleared: a Notify raises a peer's flag to epoch+delta and a
 * Wait is satisfied by any value >= its target, so a peer that is a call
 * ahead never un-satisfies us. A slot is two 16-byte pairs {flag, check},
 * one per parity of the call a value belongs to (snac.SignalIndex), so a
 * flag and its check word travel in one store and are read in one load.
 */
#pragma once
#include <stdint.h>

#include "plan.cuh"
#include "status.cuh"

namespace purlin {

/** Spins between two looks at the clock. */
constexpr uint32_t kSpinsPerCheck = 256;
/** Nanoseconds between two looks at the abort and status words. */
constexpr uint64_t kLookNs = 20000;

/** The block's view of the abort and status words. They are host memory,
 * read across PCIe, and a packet step polls with every thread of its
 * blocks: were each thread to read them, thousands of reads would queue on
 * the bus and every one would wait for the rest (a wait that outlasted its
 * first check took hundreds of microseconds). So one thread of the block
 * at a time reads them, at most every kLookNs, into these words, and every
 * spinning thread reads the block's copy. run.cu zeroes them at start. */
__shared__ uint64_t blockLookAt;  // when the block looks next (globaltimer ns)
__shared__ uint32_t blockAbort;   // the abort word at the block's last look
__shared__ uint32_t blockStopped; // the status word was set at the block's last look

/** The abort word (Launch.abortFlag): kAbortAll, set by Abort, ends every
 * wait; bit q (q < kMaxRanks), set by PeerGone, says rank q's process is
 * gone and ends the waits for what rank q writes (atom/cuda abortAll). */
constexpr uint32_t kAbortAll = 1u << 31;
constexpr uint32_t kAllRanks = (1u << kMaxRanks) - 1;

/* ---------- ordered loads and stores (system scope: peers and the host) ---------- */

/** loadRelaxed: no ordering; for polling only (Notify and Wait order their own). */
__device__ __forceinline__ uint64_t loadRelaxed(uint64_t addr) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t loadRelaxed32(uint64_t addr) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* ---------- the bound every wait runs under ---------- */

/** Bound is one wait's budget: call spin() once per failed poll; a non-zero
 * result is the status to stop with. The clock is read only once a wait has
 * spun kSpinsPerCheck times, so a wait satisfied at once costs nothing, and
 * the abort and status words every kLookNs from then on.
 * mask: the bits of the abort word that end this wait. Once one is seen,
 * the wait polls once more before it gives up: what a gone rank wrote
 * before it went is in memory by then and may still satisfy it. */
struct Bound {
  const Launch& L;
  uint32_t mask;
  uint64_t deadline = 0;
  uint32_t spins = 0;
  bool lastLook = false;

  __device__ __forceinline__ Bound(const Launch& l, uint32_t m) : L(l), mask(m) {}

  __device__ __forceinline__ uint32_t spin() {
    if (lastLook) return kStatusAborted;
    if (++spins % kSpinsPerCheck != 0) return kStatusOK;
    const uint64_t now = globalTimer();
    if (deadline == 0) deadline = now + L.timeoutNs;
    const uint64_t at = *(volatile uint64_t*)&blockLookAt;
    if (now >= at && atomicCAS((unsigned long long*)&blockLookAt, at, now + kLookNs) == at) {
      // Atomic stores, as blockLookAt's: other threads read these words
      // while they change (compute-sanitizer's racecheck flags plain ones).
      atomicExch(&blockAbort, loadRelaxed32(L.abortFlag));
      atomicExch(&blockStopped, loadRelaxed(L.status) != 0 ? 1u : 0u);
    }
    if (*(volatile uint32_t*)&blockAbort & mask) {
      __threadfence_system();
      lastLook = true;
      return kStatusOK;
    }
    if (*(volatile uint32_t*)&blockStopped) return kStatusStopped;
    return now > deadline ? kStatusTimeout : kStatusOK;
  }
};

/* ---------- Notify and Wait (one thread each) ---------- */

/** signalPairs: the first of slot's two {flag, check} pairs in the flags at
 * base; the second follows it. A Notify of value v, or a Wait for target
 * v, uses the pair of v's call parity (signalPair; snac.SignalIndex), so a
 * check word is always of its flag's call. run.cu decodes a signal step to
 * its slot's pairs once, so running it reads no base out of the Launch. */
__device__ __forceinline__ uint64_t signalPairs(uint64_t base, uint32_t slot) { return base + 32ull * slot; }

/** signalPair: of a slot's pairs at pairs, the one of value v's call parity. */
__device__ __forceinline__ uint64_t signalPair(uint64_t pairs, uint64_t v) { return pairs + 16ull * (v / kEpochAdvance & 1); }

/** slotSource is the rank that raises a flag slot (snac.SlotSource). */
__device__ __forceinline__ uint32_t slotSource(uint32_t slot) {
  return (slot / kMaxWorkers) % kMaxRanks;
}

/** slotKind is a flag slot's kind (snac.SlotKind). */
__device__ __forceinline__ uint32_t slotKind(uint32_t slot) {
  return (slot / (kMaxRanks * kMaxWorkers)) % kNumFlagKinds;
}

/** publishes: a Notify of this slot tells the peer that data is there to
 * read (a staged chunk, a reduced shard). The other kinds say the peer may
 * reuse memory this worker has read (its loads are done: their values were
 * stored before the barrier), or agree on a call, and publish nothing. */
__device__ __forceinline__ bool publishes(uint32_t slot) {
  const uint32_t kind = slotKind(slot);
  return kind == kFlagReady || kind == kFlagReduced;
}

/** waitMask: the abort word's bits that end a wait for what rank src writes
 * (this rank's own workers are never gone). */
__device__ __forceinline__ uint32_t waitMask(const Launch& L, uint32_t src) {
  return kAbortAll | (src == (uint32_t)L.rank ? 0u : 1u << src);
}

/** notify: Notify the peer: its flag and check word in one 16-byte store
 * into the slot's pairs on the peer (pairs, signalPairs).
 * wrote: the block wrote plain memory since its last fence (the caller has
 * passed a barrier after the writes). When it did and this Notify publishes
 * data, a fence first makes the writes visible; any other Notify (a done or
 * consumed signal, an agreement, a greeting) costs one store, not a fence
 * that waits for an NVLink round trip. */
__device__ __forceinline__ void notify(uint64_t pairs, const Step& s, uint64_t epoch, bool wrote) {
  const uint64_t v = epoch + (uint64_t)s.delta;
  if (wrote && publishes(s.slot)) asm volatile("fence.acq_rel.sys;" ::: "memory");
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(signalPair(pairs, v)),
               "l"(v), "l"(s.check)
               : "memory");
}

/** wait: Wait until this rank's flag slot (its pairs: signalPairs) >=
 * epoch+delta (acquire), then compare the check word read with it. Returns
 * a status code (kStatusOK when satisfied). */
__device__ __forceinline__ uint32_t wait(const Launch& L, uint64_t pairs, const Step& s, uint64_t epoch) {
  const int64_t target = (int64_t)epoch + s.delta;
  if (target <= 0) return kStatusOK;  // names a call before the first: done by definition
  const uint64_t at = signalPair(pairs, (uint64_t)target);
  Bound bound(L, waitMask(L, slotSource(s.slot)));
  for (;;) {
    uint64_t flag, check;
    asm volatile("ld.acquire.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(flag), "=l"(check) : "l"(at) : "memory");
    if (flag >= (uint64_t)target) return s.check == kDoneCheck || check == s.check ? kStatusOK : kStatusMismatch;
    if (uint32_t st = bound.spin()) return st;
  }
}

}  // namespace purlin
