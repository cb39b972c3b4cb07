// refined_approx.cuh: 1 / y and sqrt(w) from the hardware approximations (MUFU) refined
// by Newton steps: two in double, one in float, which leaves them within an ulp or two
// of the rounded results.  For normal numbers only: the approximations flush a subnormal
// argument to zero (the callers test or guarantee normal inputs).  Used where IEEE
// division and square root cost too much on a dependency chain (gebd2_lanes' reflectors,
// lasq's transform).
#pragma once

namespace bdf {

__device__ __forceinline__ float rcp_refined(float y) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return fmaf(r, fmaf(-y, r, 1.0f), r);
}
__device__ __forceinline__ double rcp_refined(double y) {
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(y));
  r = fma(r, fma(-y, r, 1.0), r);
  return fma(r, fma(-y, r, 1.0), r);
}
__device__ __forceinline__ float sqrt_refined(float w) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(w));
  const float s = w * y;
  return fmaf(0.5f * y, fmaf(-s, s, w), s);
}
__device__ __forceinline__ double sqrt_refined(double w) {
  double y;
  asm("rsqrt.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(w));
  y = y * fma(-0.5 * w, y * y, 1.5);
  y = y * fma(-0.5 * w, y * y, 1.5);
  const double s = w * y;
  return fma(0.5 * y, fma(-s, s, w), s);
}

}  // namespace bdf
