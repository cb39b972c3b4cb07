// bulk_copy.cuh: one-instruction copies of a contiguous run from global to shared memory
// (sm_90's cp.async.bulk, done by the SM's copy engine) and the mbarrier that tells when
// the bytes have landed.  Why: a per-lane cp.async or load walks the run 16 bytes at a
// time on the warp's issue slots, so a warp that copies its next matrix while it solves
// the current one pays for both in turn (the staged TRSV of session 67: copies 73 us and
// solve 40 us of DTRSV 32, 119 together); a bulk copy costs the warp one instruction a run.
// Every function is a warp-level building block; the caller owns the mbarrier's phases.
// Below sm_90 none of these is compiled: callers copy by loads (bulk_copy_supported()).
#pragma once
#include "common.cuh"

namespace bdf {

// Can this build issue cp.async.bulk?  (Device code only; the host never calls it.)
__device__ constexpr bool bulk_copy_supported() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return true;
#else
  return false;
#endif
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// An mbarrier (8 bytes of shared memory, 8-byte aligned) expecting `arrivals` arrivals a
// phase, made visible to the copy engine (the async proxy) before any copy names it.
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// One arrival on `bar` that also announces `bytes` more to come from bulk copies: the
// phase completes when every arrival is in and every announced byte has landed.
__device__ __forceinline__ void mbarrier_expect_bytes(unsigned long long* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}

// Wait until the phase of parity `parity` of `bar` has completed (its bytes are then
// visible to the waiting threads).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned addr = shared_address(bar);
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// Order this thread's earlier shared-memory reads and writes before later bulk copies
// into the same bytes (the copy engine is another proxy).
__device__ __forceinline__ void fence_before_bulk_copy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Copy `bytes` (a multiple of 16, > 0) from global `src` to shared `dst` (both 16-byte
// aligned); their landing completes that many of `bar`'s announced bytes.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, unsigned bytes,
                                                    unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
#endif
}

}  // namespace bdf
