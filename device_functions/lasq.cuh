// lasq.cuh: the singular values of ONE real bidiagonal by the dqds algorithm
// (Fernando and Parlett's differential quotient-difference with shifts, the
// algorithm of LAPACK's xLASQ1-xLASQ6, in a smaller organisation of our own), run
// by one thread; lasq_values is called by every thread of `warp` (a mask) together,
// each on its own bidiagonal (see the rounds before it).
//
// The qd array: q_i = d_i^2 (i < n), e_i = e_i^2 (i < n - 1) of the bidiagonal; it
// represents a positive definite tridiagonal whose eigenvalues are the squared
// singular values.  A dqds transform with shift tau (all quantities stay
// non-negative, so every eigenvalue keeps high relative accuracy) maps it to the
// array of the matrix minus tau; sigma accumulates the shifts.
//
// Storage:  two copies of the array (ping-pong: a transform reads copy p and writes
//           1 - p, so a shift that proves too large costs nothing to undo), entry i
//           of copy p at z[(4 i + 2 p) s] (q) and z[(4 i + 2 p + 1) s] (e), with s = 32
//           (the arrays of a warp's threads interleaved in shared memory, the threads
//           on consecutive words: LasqArray).  On return the eigenvalues
//           (squared singular values, any order) are the q's of copy 0.
// Blocks:   an e_i <= 0 splits the array: the blocks are independent.  The bottom
//           block [i0, n0] is worked on; a split found inside it stores -sigma in
//           that e (the shift of the part above, which is resumed from there once
//           the part below is done: the marker gives it its sigma back).  Splits are
//           looked for only while copy 0 is current, and a new block starts from
//           copy 0, so the data of the blocks above is always in copy 0.
// Deflation: the bottom value when e_{n0-1} <= tol^2 (sigma + q_n0); the bottom two
//           (the 2 x 2's eigenvalues from its trace and determinant) when
//           e_{n0-2} is negligible likewise, or the block has two rows.
//           tol = 100 eps, as xLASQ2.
// Shifts:   tau must stay below the block's smallest eigenvalue lambda (else a d < 0:
//           the transform is discarded).  When only the last d went negative, tau + d
//           <= lambda (d_n0(tau) = 1 / sum_j w_j / (lambda_j - tau), w_j >= 0 summing to
//           1, so |d_n0| >= tau - lambda once tau passes lambda alone): that is the next
//           try.  An earlier negative d_j gives the same bound for the leading block
//           that ends at j, which may still be above lambda: the next try is the
//           smaller of tau + d_j and tau / 2, or tau / 4 when tau + d_j <= 0 (a zero
//           shift there stalls clusters).  After four failures tau = 0, which cannot
//           fail.  When the previous transform's smallest
//           d was its last one, tau = q_n0 (1 - a) / (1 + a) with a = e_{n0-1} /
//           q_{n0-1} (1 + e_{n0-2} / q_{n0-2} (1 + ...)), the chain cut once its
//           terms are small: the Rayleigh-quotient-and-residual bound has sqrt(a)
//           where this has a, and converged more slowly (75 against 69 transforms a
//           16 x 16 random matrix, failures counted; it failed 1.8 times against 7.8);
//           a >= 1/2 or an interior minimum: tau = dmin / 4.  Since session 69 the
//           bottom pair's eigenvalue (lasq_shift) caps that value and replaces it
//           where larger.  (Our rule, not
//           xLASQ4's case analysis; measured on random, graded, clustered and
//           rank-deficient bidiagonals of order 8-32: 2.5-5 transforms a value, the
//           errors within 0.6 n eps s_1.)
// Limits:   at most max_passes transforms; if they run out, the values not yet
//           deflated get q + sigma and the count of them is returned (0 otherwise).
#pragma once
#include "bdsqr.cuh"  // BdLimits, bd_sqrt, bd_min
#include "refined_approx.cuh"

namespace bdf {

// x / y for the transform's t = q_{i+1} / qh: the reciprocal's approximation and Newton
// steps (two in double, one in float: within an ulp or two, which dqds's relative
// error analysis takes as it takes a rounded division); IEEE division when y is not
// a normal number (the approximation flushes it to zero).
template <typename R> __device__ __forceinline__ R lasq_divide(R x, R y) {
  if (!(y >= BdLimits<R>::tiny)) return x / y;
  return x * rcp_refined(y);
}

// The threads' arrays, interleaved a warp at a time: entry j of lane l's array at
// z[j * 32] from its own start (the warp's arrays side by side, so that the lanes of a
// warp touch consecutive words).  The stride is a constant whatever the block's size:
// the transform's addresses are then a pointer and immediate offsets (with the block's
// size as the stride, each step spent five integer instructions recomputing them).
template <typename R> struct LasqArray {
  static constexpr int s = 32;
  R* z;
  __device__ __forceinline__ R& q(int p, int i) const { return z[(4 * i + 2 * p) * s]; }
  __device__ __forceinline__ R& e(int p, int i) const { return z[(4 * i + 2 * p + 1) * s]; }
};

// The loop's minima and maxima: bd_min / bd_max, but the IEEE fminf / fmaxf (one FMNMX
// against a compare and a select) in the fast loop for float, whose operands are never
// NaN when its results are kept (a NaN comes only after a qh below tiny: see below).
// (For double, fmin's NaN handling costs more than bd_min's compare and two selects.)
template <bool CAREFUL, typename R> __device__ __forceinline__ R lasq_min(R a, R b) {
  if constexpr (!CAREFUL && sizeof(R) == 4) return fminf(a, b);
  else return bd_min(a, b);
}
template <bool CAREFUL, typename R> __device__ __forceinline__ R lasq_max(R a, R b) {
  if constexpr (!CAREFUL && sizeof(R) == 4) return fmaxf(a, b);
  else return bd_max(a, b);
}

// The loop of lasq_transform (see there).  CAREFUL = false: t by the reciprocal's
// approximation alone, and qh_low the smallest qh met (a qh below tiny makes that t
// wrong: the caller then runs the loop again, CAREFUL, from the same copy p);
// CAREFUL: lasq_divide.
template <bool CAREFUL, typename R>
__device__ __forceinline__ bool lasq_transform_loop(LasqArray<R> z, int p, int i0, int n0, R tau, R& dmin, R& dn,
                                                    bool& last, R& emin, R& qmax, R& qh_low) {
  // The entry i of a copy and entry i + 1 are 4 s apart; the reads run one entry ahead
  // of the writes (the copies never overlap), off the chain through d.
  constexpr int s = LasqArray<R>::s, step = 4 * s;
  qh_low = R(1e30);
  const R* src = &z.q(p, i0);
  R* dst = &z.q(1 - p, i0);
  R d = src[0] - tau;
  last = false;  // d_i0 is not the bottom row's d: i0 < n0
  dn = d;
  if (!(d >= R(0))) return false;
  R low = d, e_low = R(1e30), q_high = R(0), qh_min = qh_low;  // the arrays' entries are at most about n
  // i0 < n0: the caller transforms blocks of two rows or more (one row is deflated)
  R e_i = src[s], q_next = src[step];
  for (int i = i0; i < n0; ++i) {
    // e_i = 0 splits the array: the part below starts afresh from q_{i+1} (the limit
    // of d t as d / qh -> 1, and the only way when d = 0 too).
    const R qh = d + e_i;
    const bool split = e_i == R(0);
    const R q_i1 = q_next;  // q_{i+1}; the registers are refilled with entry i + 1's below
    R t;
    if constexpr (CAREFUL) {
      t = lasq_divide(q_i1, qh);
    } else {
      t = q_i1 * rcp_refined(qh);
      qh_min = lasq_min<false>(qh_min, qh);
    }
    const R e_new = split ? R(0) : e_i * t;
    if (i + 1 < n0) {
      e_i = src[step + s];
      q_next = src[2 * step];
      e_low = lasq_min<CAREFUL>(e_low, e_new);
    }
    dst[0] = qh;
    dst[s] = e_new;
    src += step;
    dst += step;
    d = (split ? q_i1 : d * t) - tau;
    if (!(d >= R(0))) {
      dn = d;
      last = i + 1 == n0;
      qh_low = qh_min;
      return false;
    }
    low = lasq_min<CAREFUL>(low, d);
    q_high = lasq_max<CAREFUL>(q_high, qh);
  }
  dst[0] = d;
  dmin = low;
  dn = d;
  emin = e_low;
  qmax = q_high;
  qh_low = qh_min;
  return true;
}

// One dqds transform of rows [i0, n0], i0 < n0, from copy p to copy 1 - p.  False (copy 1 - p
// partly written, copy p intact) as soon as a d goes negative (or NaN); then dn is that
// d and `last` says whether it was the final one, d_n0.  True: dmin, dn, the smallest
// new e above the bottom row (emin: the bottom one is the deflation test's) and the
// largest new q (qmax).  The division t = q_{i+1} / qh is the reciprocal's
// approximation, with the IEEE division where qh is not a normal number (lasq_divide);
// that case is rare (a d and an e both below tiny), so the loop runs without its test
// and is run again with it when a qh below tiny was met: the same values either way,
// two instructions fewer a step.
template <typename R>
__device__ __forceinline__ bool lasq_transform(LasqArray<R> z, int p, int i0, int n0, R tau, R& dmin, R& dn,
                                               bool& last, R& emin, R& qmax) {
  R qh_low;
  bool ok = lasq_transform_loop<false>(z, p, i0, n0, tau, dmin, dn, last, emin, qmax, qh_low);
  if (!(qh_low >= BdLimits<R>::tiny)) ok = lasq_transform_loop<true>(z, p, i0, n0, tau, dmin, dn, last, emin, qmax, qh_low);
  return ok;
}

// The shift for the next transform of [i0, n0] in copy p (see Shifts above); dmin < 0
// when there was no transform since the last deflation.
template <typename R>
__device__ __forceinline__ R lasq_shift(LasqArray<R> z, int p, int i0, int n0, R dmin, R dn) {
  if (dmin >= R(0) && dmin < dn * R(0.999999)) return R(0.25) * dmin;
  const R fallback = R(0.25) * bd_max(dmin, R(0));
  // The entries from the bottom up by a pointer (q_i at at[0], e_i at at[s]).
  constexpr int s = LasqArray<R>::s, step = 4 * s;
  const R* at = &z.q(p, n0 - 1);
  const R q_bottom = at[step];
  if (at[s] > at[0]) return fallback;
  // The ratios e / q <= 1 by the reciprocal's approximation alone: a q below tiny
  // makes one Inf or NaN (its e is at most q), and then a fails the test below and the
  // fallback is taken (an estimate, not a bound: any shift is safe to try).
  const R q1 = at[0], e1 = at[s];
  const R b1 = e1 * rcp_refined(q1);
  R b = b1, a = b1;
  // rows n0 - 2 down to max(n0 - 8, i0)
  for (int left = n0 - 1 - (n0 - 8 > i0 ? n0 - 8 : i0); left > 0; --left) {
    at -= step;
    if (at[s] > at[0]) break;
    b *= at[s] * rcp_refined(at[0]);
    a += b;
    if (R(100) * b < a) break;
  }
  if (!(a < R(0.5))) return fallback;
  const R rule = q_bottom * (R(1) - a) * rcp_refined(R(1) + a);  // 1 + a in [1, 1.5)
  // The bottom pair's smaller eigenvalue (the 2 x 2 of rows n0 - 1, n0, the deflation's
  // formula: r q_n0 with r = q_{n0-1} / big) is at least lambda (interlacing), less a
  // margin of 32 (n0 - i0 + 1) ulps: the rule's value is never taken above it (where a
  // pair is close, lambda = q_n0 (1 - c a), c = 1 + q_n0 / (q_{n0-1} - q_n0), past the
  // rule's c = 2).  Where the pair is apart, its value less the coupling above it (4 (a -
  // b1) q_{n0-1} r) is the shift when larger: first order in a where the rule is off by
  // a q_n0.  Here q_{n0-1} > 0 (a < 1/2), so big > 0.
  const R h = q1 - q_bottom + e1;
  const R big = R(0.5) * (q1 + e1 + q_bottom + bd_sqrt(h * h + R(4) * e1 * q_bottom));
  const R r = q1 * rcp_refined(big);
  const R pair = r * q_bottom * (R(1) - R(64 * (n0 - i0 + 1)) * BdLimits<R>::unit_roundoff);
  return bd_max(pair - R(4) * (a - b1) * q1 * r, bd_min(rule, pair));
}

// The threads of `warp` (the mask of those in the call) run in rounds: each round
// every thread that is not finished takes one step of its own sequence (a new block
// and the deflations at its bottom, then a shift and one transform; or the next try
// after a failed one), and the warp meets again before the next round.  Left to
// themselves, threads that deflated or failed drifted out of step with the others,
// and the warp ran the transform loop once for each such group.
template <typename R> __device__ int lasq_values(LasqArray<R> z, int n, int max_passes, unsigned warp) {
  constexpr R tol = R(100) * R(2) * BdLimits<R>::unit_roundoff;
  constexpr R tol2 = tol * tol;
  int p = 0, passes = 0, n0 = n - 1, i0 = 0, fails = 0, left = 0;
  R sigma = R(0), dmin = R(-1), dn = R(0), tau = R(0);
  bool fresh = true;   // n0 is the bottom of a block not started yet
  bool retry = false;  // the last transform failed: try again with tau
  while (__any_sync(warp, n0 >= 0)) {
    if (n0 < 0) continue;
    if (retry && passes >= max_passes) retry = false;  // out of passes: the test below ends it
    // Deflations and new blocks until a transform is due (or the values are all found).
    while (!retry && n0 >= 0) {
      if (fresh) {
        p = 0;
        i0 = n0;
        while (i0 > 0 && z.e(0, i0 - 1) > R(0)) --i0;
        dmin = R(-1);
        fresh = false;
      }
      if (n0 == i0 || z.e(p, n0 - 1) <= tol2 * (sigma + z.q(p, n0))) {
        z.q(0, n0) = z.q(p, n0) + sigma;
        --n0;
        dmin = R(-1);
      } else if (n0 == i0 + 1 || z.e(p, n0 - 2) <= tol2 * (sigma + z.q(p, n0 - 1))) {
        const R q1 = z.q(p, n0 - 1), e1 = z.e(p, n0 - 1), q2 = z.q(p, n0);
        const R h = q1 - q2 + e1;
        const R big = R(0.5) * (q1 + e1 + q2 + bd_sqrt(h * h + R(4) * e1 * q2));
        const R small = big > R(0) ? (q1 / big) * q2 : R(0);
        z.q(0, n0 - 1) = big + sigma;
        z.q(0, n0) = small + sigma;
        n0 -= 2;
        dmin = R(-1);
      }
      if (n0 < i0) {  // the block is done; the next one's shift is in the marker below it
        fresh = true;
        if (n0 >= 0) sigma = -z.e(0, n0);
        continue;
      }
      if (n0 == i0) continue;  // one row: deflated next time round
      if (passes >= max_passes) {
        for (int i = i0; i <= n0; ++i) z.q(0, i) = z.q(p, i) + sigma;
        left = n0 + 1;
        // the blocks above: their own sigma sits in the marker below each
        for (int i = i0 - 1; i >= 0; --i) {
          if (z.e(0, i) <= R(0)) sigma = -z.e(0, i);
          z.q(0, i) += sigma;
        }
        n0 = -1;
        break;
      }
      tau = lasq_shift(z, p, i0, n0, dmin, dn);
      fails = 0;
      break;
    }
    if (n0 < 0) continue;
    ++passes;
    bool last;
    R dfail, emin, qmax;  // the transform's smallest e and largest q: no split unless emin is small
    retry = !lasq_transform(z, p, i0, n0, tau, dmin, dfail, last, emin, qmax);
    if (retry) {
      const R bound = tau + dfail;
      tau = fails >= 3 ? R(0) : last ? bd_max(bound, R(0)) : bound > R(0) ? bd_min(bound, R(0.5) * tau) : R(0.25) * tau;
      ++fails;
      continue;
    }
    dn = dfail;
    p = 1 - p;
    sigma += tau;
    // Every split gets its marker (a zero e is one too, and needs this sigma); the scan
    // is skipped when even the smallest new e above the bottom row (that one is the
    // deflation test's) is above the test with the largest new q.
    if (p == 0 && emin <= tol2 * (sigma + qmax)) {
      int top = i0;
      for (int i = n0 - 2; i >= i0; --i) {
        if (z.e(0, i) <= tol2 * (sigma + z.q(0, i + 1))) {
          z.e(0, i) = -sigma;
          if (top == i0) top = i + 1;
        }
      }
      i0 = top;
    }
  }
  return left;
}

}  // namespace bdf
