// refined_approx.cuh: 1 / y and sqrt(w) from the hardware approximations (MUFU) refined
// by Newton steps: two in double, one in float, which leaves them within an ulp or two
// of the rounded results.  For normal numbers only: the approximations flush a subnormal
// argument to zero (the callers test or guarantee normal inputs).  Used where IEEE
// division and square root cost too much on a dependency chain (gebd2_lanes' reflectors,
// lasq's transform); the approximations and single steps also serve gesvj's rotations,
// which take fewer steps.
#pragma once

namespace bdf {

// The hardware approximations themselves.
__device__ __forceinline__ float rcp_approx(float y) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return r;
}
__device__ __forceinline__ double rcp_approx(double y) {
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(y));
  return r;
}
__device__ __forceinline__ float rsqrt_approx(float w) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(w));
  return y;
}
__device__ __forceinline__ double rsqrt_approx(double w) {
  double y;
  asm("rsqrt.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(w));
  return y;
}

// One Newton step: for 1 / y from r, for 1 / sqrt(w) from y, and for sqrt(w) from
// y ~ 1 / sqrt(w) (s = w y corrected by y (w - s^2) / 2).
template <typename R> __device__ __forceinline__ R rcp_step(R y, R r) { return fma(r, fma(-y, r, R(1)), r); }
template <typename R> __device__ __forceinline__ R rsqrt_step(R w, R y) {
  return y * fma(R(-0.5) * w, y * y, R(1.5));
}
template <typename R> __device__ __forceinline__ R sqrt_from_rsqrt(R w, R y) {
  const R s = w * y;
  return fma(R(0.5) * y, fma(-s, s, w), s);
}

template <typename R> __device__ __forceinline__ R rcp_refined(R y) {
  const R r = rcp_step(y, rcp_approx(y));
  return sizeof(R) == 8 ? rcp_step(y, r) : r;
}
template <typename R> __device__ __forceinline__ R sqrt_refined(R w) {
  R y = rsqrt_approx(w);
  if (sizeof(R) == 8) {
    y = rsqrt_step(w, y);
    y = rsqrt_step(w, y);
  }
  return sqrt_from_rsqrt(w, y);
}

}  // namespace bdf
