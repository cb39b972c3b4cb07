// householder.cuh: elementary reflectors H = I - tau v v^H for ONE vector or
// matrix, computed by one thread group: generation (LAPACK's xLARFG) and
// application to a block from the left or the right (xLARF).  QR, GEBRD and
// ORGBR build on these; the products inside the application are the GEMV
// device functions of gemv.cuh, so there is no second GEMV loop here.
//
// Threads:  a ThreadGroup<G> (larfg) or ThreadGroup<DIM_X * DIM_Y> (larf_*, the
//           GEMV's thread shape); every thread of the group calls the function
//           with the same arguments.  Element i of a vector is at x[i * incx];
//           consecutive ranks take consecutive elements.
// Shared:   larfg: `work` of vector_work_bytes(G) bytes (null for G <= 32).
//           larf_*: `w` (n elements for larf_left, m for larf_right) and
//           `gemv_work` of larf_work_elems<DIM_X, DIM_Y>() elements of T (null
//           when that is 0).  Both may be shared or global; undefined on exit.
// Sync:     see each function; larf_* end after a barrier, larfg does not.
// Memory:   vectors and matrices in global or shared memory, column-major
//           (element (i, j) at C[i + j * ldc]); 64-bit strides.  v must not
//           overlap C or w.
// Failure:  none; NaN/Inf propagate as in LAPACK (no check_finite).
#pragma once
#include "common.cuh"
#include "gemv.cuh"
#include "vector.cuh"

namespace bdf {

// LAPACK's safmin = dlamch('S') / dlamch('E') (smallest normal over the unit
// roundoff eps/2): below it 1/beta would overflow after the division by eps.
template <typename R> struct LarfgConstants;
template <> struct LarfgConstants<double> { static constexpr double safmin = 0x1p-969, rsafmn = 0x1p969; };
template <> struct LarfgConstants<float> { static constexpr float safmin = 0x1p-102f, rsafmn = 0x1p102f; };

// sqrt(a^2 + b^2 + c^2) without overflow or harmful underflow (LAPACK's xLAPY3):
// the largest magnitude is factored out; 0 when all are 0, Inf when one is.
template <typename R> __device__ __forceinline__ R lapy3(R a, R b, R c) {
  const R x = fabs(a), y = fabs(b), z = fabs(c);
  const R w = fmax(fmax(x, y), z);
  if (w == R(0) || isinf(w)) return x + y + z;  // also carries a NaN when w is 0
  const R p = x / w, q = y / w, r = z / w;
  return w * sqrt(p * p + q * q + r * r);
}

template <typename T> struct LarfgResult {
  T tau;                          // the reflector's scalar
  typename real_of<T>::type beta;  // the new first element (real)
};

// bdf::larfg: LAPACK xLARFG for real and complex T.  Finds H = I - tau v v^H,
// v = [1; v(1:n-1)], such that H^H [alpha; x] = [beta; 0] with beta REAL, and
// overwrites x (n - 1 elements) with v(1:n-1).  n is the order of H.
//   tau = 0 (H = I, beta = Re alpha, x untouched) when n <= 0, or when x = 0 and
//   alpha is real.  Otherwise beta = -sign(Re alpha) * |[alpha; x]|,
//   tau = (beta - alpha) / beta, v(1:) = x / (alpha - beta); when |beta| < safmin,
//   x, alpha and beta are scaled up by 1/safmin (at most 20 times) before, and
//   beta back after, as LAPACK does.
// Threads:  ThreadGroup<G>, every thread passes the same alpha (the caller reads it
//           from memory after a barrier); element i of x is scaled by rank i % G.
// Shared:   `work` of vector_work_bytes(G) bytes (for nrm2); null when G <= 32.
// Sync:     on entry x must be visible to the whole group; the reductions use
//           barriers (G > 32) or warp shuffles; NO barrier at the end: x(i) was
//           written by rank i % G, so sync the group before others read it.
// Memory:   reads and writes x only; does NOT write alpha's location: the caller
//           stores the returned beta there (LAPACK returns it in ALPHA).
//           tau and beta are returned to every thread of the group, bitwise equal
//           (the butterfly sums are symmetric), so branches on them are uniform.
// Failure:  none; NaN/Inf in [alpha; x] give NaN tau / beta as LAPACK.
template <int G, typename T>
__device__ LarfgResult<T> larfg(ThreadGroup<G> g, int n, T alpha, T* x, long long incx,
                                unsigned char* work) {
  using R = typename real_of<T>::type;
  using K = LarfgConstants<R>;
  LarfgResult<T> out{T(0), real_part(alpha)};
  if (n <= 0) return out;
  R alphr = real_part(alpha), alphi = imag_part(alpha);
  R xnorm = nrm2<G, 1>(g, n - 1, x, incx, work);
  if (xnorm == R(0) && alphi == R(0)) return out;
  R beta = -copysign(lapy3(alphr, alphi, xnorm), alphr);
  int knt = 0;
  if (fabs(beta) < K::safmin) {
    // [alpha; x] is tiny: scale it up until beta is a safe divisor; xnorm is
    // recomputed from the scaled x because the old one may have lost digits.
    do {
      ++knt;
      scal(g, n - 1, T(K::rsafmn), x, incx, x, incx);
      beta *= K::rsafmn;
      alphr *= K::rsafmn;
      alphi *= K::rsafmn;
    } while (fabs(beta) < K::safmin && knt < 20);
    // The thread that scaled x(i) is the one nrm2 reads it with: no barrier needed.
    xnorm = nrm2<G, 1>(g, n - 1, x, incx, work);
    beta = -copysign(lapy3(alphr, alphi, xnorm), alphr);
  }
  T denom;
  if constexpr (is_complex_v<T>) {
    out.tau = T((beta - alphr) / beta, -alphi / beta);
    denom = T(alphr - beta, alphi);
  } else {
    out.tau = (beta - alphr) / beta;
    denom = alphr - beta;
  }
  // v = x / (alpha - beta), divided element by element rather than scaled by the
  // reciprocal (LAPACK's xLADIV then xSCAL): see safe_divide.
  for (int i = g.rank; i < n - 1; i += G) x[i * incx] = safe_divide(x[i * incx], denom);
  for (int j = 0; j < knt; ++j) beta *= K::safmin;
  out.beta = beta;
  return out;
}

// Elements of `gemv_work` the larf functions need for a DIM_X x DIM_Y group
// (gemv_n's cross-warp reduction in larf_right).
template <int DIM_X, int DIM_Y> __host__ __device__ constexpr int larf_work_elems() {
  return (DIM_X * DIM_Y > 32 && DIM_Y > 1) ? DIM_X * DIM_Y * GEMV_UNROLL : 0;
}

// bdf::larf_left: C := (I - tau v v^H) C for an m x n block C; v has m elements
// INCLUDING its first (the caller makes v[0] = 1, e.g. by storing 1 there or by
// copying v into shared memory).  Pass conj(tau) to apply H^H, as LAPACK's
// xLARF callers do.  Computes w = C^H v (bdf::gemv_t, store into w), then the
// rank-1 update C -= tau v w^H.
// Threads:  ThreadGroup<DIM_X * DIM_Y>; the GEMV's thread shape.
// Shared:   w: n elements; gemv_work: larf_work_elems<DIM_X, DIM_Y>() elements.
// Sync:     on entry C and v must be visible to the group and nobody reads w; one
//           barrier between the product and the update; ends after a barrier
//           (C updated and visible to the group, w free).  tau == 0: C untouched,
//           one barrier.
// Memory:   C read and written; v read-only.  Nothing is read when m or n is 0.
template <typename T, int DIM_X, int DIM_Y>
__device__ void larf_left(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, const T* v, long long incv,
                          T tau, T* C, long long ldc, T* w, T* gemv_work) {
  if (tau == T(0) || m <= 0 || n <= 0) {
    g.sync();
    return;
  }
  gemv_t<T, DIM_X, DIM_Y>(g, m, n, C, ldc, v, incv, true, gemv_work,
                          [&](int j, T r) { w[j] = r; });
  g.sync();  // w complete
  for_each_element(g, m, n, [&](int i, int j) { C[i + j * ldc] -= tau * v[i * incv] * conj_if(w[j], true); });
  g.sync();
}

// bdf::larf_right: C := C (I - tau v v^H) for an m x n block C; v has n elements
// including its first (= 1, set by the caller).  Computes w = C v (bdf::gemv_n,
// store into w), then C -= tau w v^H.
// Threads, Shared (w: m elements), Sync, Memory: as larf_left.
template <typename T, int DIM_X, int DIM_Y>
__device__ void larf_right(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, const T* v, long long incv,
                           T tau, T* C, long long ldc, T* w, T* gemv_work) {
  if (tau == T(0) || m <= 0 || n <= 0) {
    g.sync();
    return;
  }
  gemv_n<T, DIM_X, DIM_Y>(g, m, n, C, ldc, v, incv, false, gemv_work,
                          [&](int i, T r) { w[i] = r; });
  g.sync();  // w complete
  for_each_element(g, m, n, [&](int i, int j) { C[i + j * ldc] -= tau * w[i] * conj_if(v[j * incv], true); });
  g.sync();
}

}  // namespace bdf
