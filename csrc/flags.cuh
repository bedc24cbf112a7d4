/**
 * @file flags.cuh
 * @brief Notify and Wait: monotonic 64-bit flags, check words, bounded spins.
 *
 * Flags are never cleared: a Notify raises a peer's flag to epoch+delta and a
 * Wait is satisfied by any value >= its target, so a peer that is a call
 * ahead never un-satisfies us. Check words sit beside the flags, indexed
 * slot*2 + (epoch&1), because a peer may already be one call ahead when we
 * read ours.
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

/** loadRelaxed: no ordering; for polling only. */
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
/** loadAcquire: later loads of this thread (and of its block, after a
 * barrier) see every write the releasing peer made before its release. */
__device__ __forceinline__ uint64_t loadAcquire(uint64_t addr) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}
/** storeRelaxed: no ordering; the release that follows publishes it. */
__device__ __forceinline__ void storeRelaxed(uint64_t addr, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}
/** storeRelease: every write this block made before the preceding barrier is
 * visible to whoever acquires this value. */
__device__ __forceinline__ void storeRelease(uint64_t addr, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
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
      *(volatile uint32_t*)&blockAbort = loadRelaxed32(L.abortFlag);
      *(volatile uint32_t*)&blockStopped = loadRelaxed(L.status) != 0;
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

__device__ __forceinline__ uint32_t checkIndex(uint32_t slot, uint64_t epoch) {
  return slot * 2 + (uint32_t)(epoch & 1);
}

/** slotSource is the rank that raises a flag slot (snac.SlotSource). */
__device__ __forceinline__ uint32_t slotSource(uint32_t slot) {
  return (slot / kMaxWorkers) % kMaxRanks;
}

/** waitMask: the abort word's bits that end a wait for what rank src writes
 * (this rank's own workers are never gone). */
__device__ __forceinline__ uint32_t waitMask(const Launch& L, uint32_t src) {
  return kAbortAll | (src == (uint32_t)L.rank ? 0u : 1u << src);
}

/** notify: Notify the peer: its check word, then (release) its flag.
 * The caller has passed a barrier after the block's last write. */
__device__ __forceinline__ void notify(const Launch& L, const Step& s, uint64_t epoch) {
  if (s.check != kDoneCheck) storeRelaxed(L.peers.checks[s.peer] + 8ull * checkIndex(s.slot, epoch), s.check);
  storeRelease(L.peers.flags[s.peer] + 8ull * s.slot, epoch + (uint64_t)s.delta);
}

/** wait: Wait until this rank's flag slot >= epoch+delta (acquire), then
 * compare the check word. Returns a status code (kStatusOK when satisfied). */
__device__ __forceinline__ uint32_t wait(const Launch& L, const Step& s, uint64_t epoch) {
  int64_t target = (int64_t)epoch + s.delta;
  if (target <= 0) return kStatusOK;  // names a call before the first: done by definition
  uint64_t flag = L.peers.flags[L.rank] + 8ull * s.slot;
  Bound bound(L, waitMask(L, slotSource(s.slot)));
  // Each poll acquires: a flag raised already costs one load, not two.
  while (loadAcquire(flag) < (uint64_t)target) {
    if (uint32_t st = bound.spin()) return st;
  }
  if (s.check == kDoneCheck) return kStatusOK;
  uint64_t check = loadRelaxed(L.peers.checks[L.rank] + 8ull * checkIndex(s.slot, epoch));
  return check == s.check ? kStatusOK : kStatusMismatch;
}

}  // namespace purlin
