/**
 * @file packets.cuh
 * @brief 16-byte packets: 8 payload bytes and an 8-byte flag word, written in
 * one 16-byte store, so data and its signal arrive together (no Notify).
 *
 * Flag word: uint32(check) << 32 | uint32(epoch + delta). A reader spins on
 * the whole packet until the low half equals uint32(epoch + delta); a high
 * half that then differs from uint32(check) means the ranks disagree.
 */
#pragma once
#include <stdint.h>

#include "flags.cuh"

namespace purlin {

__device__ __forceinline__ uint64_t packetFlag(uint64_t check, uint64_t epoch, int64_t delta) {
  return (uint64_t)(uint32_t)check << 32 | (uint64_t)(uint32_t)(epoch + (uint64_t)delta);
}

/** storePacket: one 16-byte volatile store of {payload, flag}. */
__device__ __forceinline__ void storePacket(uint64_t addr, uint64_t payload, uint64_t flag) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(addr), "l"(payload), "l"(flag)
               : "memory");
}

/** loadPacket: wait (bounded) for the packet at addr carrying flag's epoch
 * half; returns a status, and the payload in *payload. A packet's writer is
 * not known here: any other rank gone ends the wait. */
__device__ __forceinline__ uint32_t loadPacket(const Launch& L, uint64_t addr, uint64_t flag,
                                               uint64_t* payload) {
  Bound bound(L, kAbortAll | (kAllRanks & ~(1u << L.rank)));
  for (;;) {
    uint64_t data, got;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(data), "=l"(got)
                 : "l"(addr)
                 : "memory");
    if ((uint32_t)got == (uint32_t)flag) {
      *payload = data;
      return (got >> 32) == (flag >> 32) ? kStatusOK : kStatusMismatch;
    }
    if (uint32_t st = bound.spin()) return st;
  }
}

}  // namespace purlin
