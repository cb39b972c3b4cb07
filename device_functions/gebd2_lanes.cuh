// gebd2_lanes.cuh: Householder bidiagonalization (LAPACK xGEBD2's reflectors)
// of ONE small real matrix held in the registers of a group of G lanes, for its
// singular values only: the reflectors are applied and dropped, only the
// diagonal d and the superdiagonal e are kept.
//
// Threads:  a ThreadGroup<G> (G a power of two <= 32; 32 / G groups share a warp).
//           Lane `rank` holds row `rank` of an l x k matrix, l >= k, l <= G, k <= NC:
//           a[c] is column c.  Rows and columns past the matrix are zero.
// Step j:   the left reflector of column j (rows j..l-1) is built from a group sum of
//           squares and the diagonal entry shuffled from lane j; its v_i is lane i's
//           own number, so applying it to column c > j is one group sum
//           (w_c = sum_i v_i a_ic, a butterfly) and a multiply-add a lane.  The right
//           reflector of row j (columns j+1..k-1) lives in lane j's registers: the
//           row is shuffled to every lane, each builds the same reflector (no
//           reduction: the whole row is in hand) and applies it to its own row (a dot
//           product and multiply-adds in registers).  Rows at or above j are never
//           read again, so the lanes update them without a mask.  The group sums of
//           the left update go through shared memory (Gebd2LanesShared: each lane
//           stores its products, lane c adds column c's, all read the sums back);
//           as butterflies they were four shuffles a column and step, two
//           instructions each in double, and the kernel was bound by them.
// Result:   d_j and e_j (the bidiagonal's, upper since l >= k) in lane j's `d` and
//           `e` (e for j < k - 1 only).  Signs are LAPACK's (beta = -sign(alpha) norm);
//           the singular values do not depend on them.
// Numbers:  the caller scales the matrix by a power of two so that its largest entry
//           is in [1/2, 1): sums of squares cannot overflow, and entries below about
//           sqrt(tiny) whose squares underflow are dropped as zero (an absolute error
//           far below eps times the largest singular value).  xLARFG's rescaling loop
//           is therefore not needed.  Square roots and reciprocals come from the
//           hardware approximations refined by Newton steps (an ulp or two, as good as
//           rounded operations for the reflectors' backward stability).
// Sync:     shuffles and the group's __syncwarp (g.sync(), twice a step); every lane of
//           the group takes part in each.
#pragma once
#include "common.cuh"
#include "bdsqr.cuh"  // BdLimits
#include "refined_approx.cuh"

namespace bdf {

// Per group: the products v_i a_ic of a left reflector, a column per row of `tile`
// (lane i writes tile[c][i], lane c sums tile[c][.]; the row padded by two), and the
// sums w_c (times tau) that every lane reads back.  (Reading the row and the sums 16
// bytes at a time measured slower: 1.8 against 1.2 ms at 32 x 32 in double, 180
// registers against 164.)
template <int G, int NC, typename R> struct Gebd2LanesShared {
  R tile[NC][G + 2];
  R w[NC];
};

// The reflector H = I - tau v v^T with H [alpha; x] = [beta; 0], v = [1; x * scale],
// from alpha and the sum of squares s2 of x.  H = I (tau = 0, scale = 0) when s2 = 0,
// and also when alpha^2 + s2 is below the smallest normal number: x is then below
// sqrt(tiny) and is dropped (see Numbers).
template <typename R> struct LanesReflector {
  R beta, tau, scale;
  __device__ __forceinline__ LanesReflector(R alpha, R s2) {
    const R w = alpha * alpha + s2;
    if (s2 == R(0) || !(w >= BdLimits<R>::tiny)) {
      beta = alpha;
      tau = R(0);
      scale = R(0);
    } else {
      const R norm = sqrt_refined(w);
      beta = alpha >= R(0) ? -norm : norm;
      // one reciprocal for both: |beta (alpha - beta)| is in [w, 2 w], a normal number
      const R gap = alpha - beta, rp = rcp_refined(beta * gap);
      tau = -(gap * gap) * rp;  // (beta - alpha) / beta
      scale = beta * rp;        // 1 / (alpha - beta)
    }
  }
};

// The step's sums over columns or rows (the left reflector's column sums, the right
// one's sum of squares and each row's dot product) in S partial sums, by index modulo
// S, added at the end.  S = 4 for float at 32 x 32 (ptxas then holds the kernel in 96
// registers instead of 121, and the H100 ran GEBRD 10 % faster); elsewhere one sum
// measured as fast or faster (double 32 x 32 929 against 946 us, float 16 x 16 80
// against 84).
template <int G, typename R> __host__ __device__ constexpr int lanes_sums() {
  return G == 32 && sizeof(R) == 4 ? 4 : 1;
}
template <typename R, int S> __device__ __forceinline__ R lanes_total(const R (&s)[S]) {
  if constexpr (S == 4) return (s[0] + s[1]) + (s[2] + s[3]);
  else return s[0];
}

// FULL: k == NC, known at compile time (no guard on a column index: the unrolled steps
// are one basic block each, which the compiler schedules across columns).
template <int G, int NC, bool FULL, typename R>
__device__ __forceinline__ void gebd2_lanes(ThreadGroup<G> g, R (&a)[NC], int k_run, R& d, R& e,
                                            Gebd2LanesShared<G, NC, R>& sh) {
  const int k = FULL ? NC : k_run;
  const unsigned mask = g.lanes();
  const int base = int(threadIdx.x & 31u) & ~(G - 1);
  const int i = g.rank;
  constexpr int S = lanes_sums<G, R>();
  d = R(0);
  e = R(0);
#pragma unroll
  for (int j = 0; j < NC; ++j) {
    if (j >= k) break;
    // Left: column j, rows j..l-1.  w_c = sum_i v_i a_ic through the tile.
    const R x = a[j];
    const R s2 = butterfly_sum<1, G>(i > j ? x * x : R(0), mask);
    const LanesReflector<R> hl(shfl_idx(x, base + j, mask), s2);
    if (i == j) d = hl.beta;
    if (j + 1 >= k) break;
    const R v = i == j ? R(1) : (i > j ? x * hl.scale : R(0));
#pragma unroll
    for (int c = j + 1; c < NC; ++c)
      if (c < k) sh.tile[c][i] = v * a[c];
    g.sync();
    if (i > j && i < k) {
      R w[S] = {};
#pragma unroll
      for (int r = j; r < G; ++r) w[r % S] += sh.tile[i][r];
      sh.w[i] = hl.tau * lanes_total(w);
    }
    g.sync();
#pragma unroll
    for (int c = j + 1; c < NC; ++c)
      if (c < k) a[c] -= sh.w[c] * v;
    // Right: row j (lane j), columns j+1..k-1.
    R r[NC];
    R t2[S] = {};
#pragma unroll
    for (int c = j + 1; c < NC; ++c) {
      r[c] = c < k ? shfl_idx(a[c], base + j, mask) : R(0);
      if (c > j + 1) t2[c % S] += r[c] * r[c];
    }
    const LanesReflector<R> hr(r[j + 1], lanes_total(t2));
    if (i == j) e = hr.beta;
    R y[S] = {};
    y[(j + 1) % S] = a[j + 1];
#pragma unroll
    for (int c = j + 2; c < NC; ++c) {
      r[c] *= hr.scale;
      y[c % S] += a[c] * r[c];
    }
    const R yt = hr.tau * lanes_total(y);
    a[j + 1] -= yt;
#pragma unroll
    for (int c = j + 2; c < NC; ++c) a[c] -= yt * r[c];
  }
}

}  // namespace bdf
