/**
 * @file status.cuh
 * @brief The status word a failed block leaves for the host (atom/cuda status.go).
 *
 * Layout: code << 56 | worker << 48 | step << 32 | slot. Zero means no
 * failure. A block that fails writes it once and returns; every other wait
 * sees a non-zero status and returns too, so one failure stops the launch
 * and every later launch of the rank (its state is no longer consistent).
 */
#pragma once
#include <stdint.h>

namespace purlin {

enum StatusCode : uint32_t {
  kStatusOK = 0,
  kStatusTimeout = 1,   // errs.ErrTimeout
  kStatusAborted = 2,   // errs.ErrAborted
  kStatusMismatch = 3,  // errs.ErrMismatch: a check word differed
  kStatusStopped = 4,   // another block failed first: stop without a status of our own
  kStatusBadRef = 5,    // errs.ErrInternal: a Ref outside the launch's spaces
};

__device__ __forceinline__ uint64_t statusWord(uint32_t code, uint32_t worker, uint32_t step,
                                               uint32_t slot) {
  return (uint64_t)code << 56 | (uint64_t)(worker & 0xff) << 48 | (uint64_t)(step & 0xffff) << 32 |
         slot;
}

/** report stores the first failure; later ones (other blocks) may overwrite it
 * with their own, which is as good: the host only needs one. */
__device__ __forceinline__ void report(uint64_t statusAddr, uint64_t word) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(statusAddr), "l"(word) : "memory");
}

}  // namespace purlin
