// gesvj.cuh: one-sided Jacobi (Hestenes) SVD of ONE small real matrix held in
// the registers of a group of G lanes (LAPACK xGESVJ's rotation and convergence
// test, without its preconditioning or blocking).
//
// The columns of the matrix are made orthogonal by plane rotations from the
// right; once no pair (p, q) has |a_p . a_q| > tol |a_p| |a_q|, the column
// norms are the singular values.  A sweep visits every pair once, in the
// round-robin ("circle") order: NC - 1 rounds of NC / 2 disjoint pairs, so the
// pairs of a round are independent and a lane updates its rows for all of them.
//
// Threads:  a ThreadGroup<G> (G a power of two <= 32; 32 / G groups share a warp).
//           Lane `rank` holds rows rank + G r (r < RP) of the NC (padded) columns
//           in registers: a[r][j]; with vectors also rows rank + G r (r < RV) of the
//           accumulated right factor W (NC x NC, identity at the start): v[r][j].
//           Rows and columns past the matrix are zero, and stay zero (a zero
//           column is never rotated).
// Shared:   GesvjShared<R, NC, THREADS, GROUPS>, one per block; a group uses its own
//           column (threadIdx.x for the partial sums, the group's index otherwise).
// Rotations: "fast" (scaled) ones: column j is d_j times the registers' column, so a
//           rotation costs two multiply-adds per row (x -= tp y, y += tq x) and the
//           c's go into d_p, d_q (kept in shared memory with 1 / d); each sweep ends
//           by multiplying the d's back into the registers.
// Code:     the NC - 1 rounds of a sweep are unrolled U at a time (U the largest
//           divisor of NC - 1 up to 7): the pairs of a round are then compile-time
//           register positions, and after U rounds the registers of columns 0..NC-2
//           shift U places (so the position of a column moves, not its data in
//           memory).  A fully unrolled sweep of 16 columns was 16k instructions.
// Sync:     the group's __syncwarp only (g.sync()); groups run independently.
// Numbers:  the caller scales the matrix by a power of two so that its largest
//           entry is in [1/2, 1) (sums of squares then neither overflow nor lose
//           anything that matters: see gesvj_rotation).  Relative to that scale,
//           a column whose squared norm is below GesvjLimits::floor is never
//           rotated: it perturbs the singular values by less than its norm,
//           1e-9 (float) or 1e-75 (double), far below eps * s_1.
#pragma once
#include "common.cuh"
#include "bdsqr.cuh"
#include "refined_approx.cuh"

namespace bdf {

template <typename R> struct GesvjLimits;
template <> struct GesvjLimits<float> {
  static constexpr float floor = 1.0e-18f;   // floor^2 > FLT_MIN: tol * sqrt(app * aqq) is a normal number
  static constexpr float flat = 4096.0f;     // |zeta| past this: sqrt(1 + zeta^2) == |zeta|
};
template <> struct GesvjLimits<double> {
  static constexpr double floor = 1.0e-150;  // floor^2 > DBL_MIN
  static constexpr double flat = 134217728.0;  // 2^27
};

// Pair k of round rho in the circle order over NC (even) columns: column NC - 1
// meets rho; the others pair up symmetrically around rho.  Every pair once per
// NC - 1 rounds, each round a perfect matching.
__host__ __device__ constexpr int gesvj_pair_p(int nc, int rho, int k) { return k == 0 ? nc - 1 : (rho + k) % (nc - 1); }
__host__ __device__ constexpr int gesvj_pair_q(int nc, int rho, int k) {
  return k == 0 ? rho : (rho - k + nc - 1) % (nc - 1);
}

// Rounds unrolled per step of a sweep: the largest divisor of NC - 1 up to 7.
__host__ __device__ constexpr int gesvj_unroll(int nc) {
  int u = 1;
  for (int d = 1; d <= 7 && d <= nc - 1; ++d)
    if ((nc - 1) % d == 0) u = d;
  return u;
}

// A pair's update of the registers' columns: x <- x - tp y, y <- y + tq x.
template <typename R> struct alignas(2 * sizeof(R)) GesvjRotation { R tp, tq; };

// Per block: partial sums of every lane (padded rows: the lanes of a group hit
// distinct banks); per group the squared column norms, the column scales d and
// 1 / d, and a round's rotations.
template <typename R, int NC, int THREADS, int GROUPS> struct GesvjShared {
  R part[NC][THREADS + 1];
  R norm[NC][GROUPS + 1];
  R scale[NC][GROUPS + 1];
  R inv_scale[NC][GROUPS + 1];
  GesvjRotation<R> rot[NC / 2][GROUPS];
  int pos[NC][GROUPS + 1];  // each column's place in the descending order
};

// Hardware approximations (MUFU, refined_approx.cuh) for the parts of a rotation that
// need not be exact: the test's 1 / sqrt and the angle t (any t gives an orthogonal
// rotation as long as c = 1 / sqrt(1 + t^2) matches it; an approximate t only leaves a
// smaller remainder of a_p . a_q for the next sweep).  Double: one Newton step each
// (about 2^-40); c: exact to rounding (two Newton steps in double, one in float, from
// w = 1 + t^2 in [1, 2]).  Inputs are normal numbers here.
template <typename R> __device__ __forceinline__ R gesvj_rcp(R x) {
  const R r = rcp_approx(x);
  return sizeof(R) == 8 ? rcp_step(x, r) : r;
}
template <typename R> __device__ __forceinline__ R gesvj_sqrt(R w) {  // sqrt(w), w >= 1
  const R y = rsqrt_approx(w);
  return sizeof(R) == 8 ? sqrt_from_rsqrt(w, y) : w * y;
}
template <typename R> __device__ __forceinline__ R gesvj_cosine(R w) {  // 1 / sqrt(w), w in [1, 2], to rounding
  R y = rsqrt_step(w, rsqrt_approx(w));
  if (sizeof(R) == 8) y = rsqrt_step(w, y);
  return y;
}

// The rotation of the pair (p, q) from app = |a_p|^2, aqq = |a_q|^2, apq = a_p . a_q:
// [a_p, a_q] <- [c a_p - s a_q, s a_p + c a_q] makes them orthogonal (t = s / c is
// the smaller root of t^2 + 2 zeta t - 1 = 0, zeta = (aqq - app) / (2 apq)), and
// the squared norms become app - t apq and aqq + t apq.  False (c = 1, t = 0)
// when the pair already passes the test or either column is below the floor.
// With both norms above the floor, tol sqrt(app aqq) is a normal number, t
// never underflows to zero and the update it makes to a_p is at least tol
// relative to a_p: a rotation that is made always changes the matrix.
// Branch-free (the lanes of a group decide different pairs): a pair that is not
// rotated computes a t it does not use.
template <typename R>
__device__ __forceinline__ bool gesvj_rotation(R app, R aqq, R apq, R tol, R& c, R& t) {
  using K = GesvjLimits<R>;
  const bool above = app >= K::floor && aqq >= K::floor;
  const R rp = rsqrt_approx(bd_max(app, K::floor)), rq = rsqrt_approx(bd_max(aqq, K::floor));
  const bool rotate = above && bd_abs(apq) * rp * rq > tol;
  // |zeta| <= 2 * 32^2 / (2 tol floor): no overflow, and t >= 1 / (4 |zeta|) is a normal number
  const R zeta = (aqq - app) * gesvj_rcp(R(2) * apq), z = bd_abs(zeta);
  const R root = z > K::flat ? z : gesvj_sqrt(R(1) + zeta * zeta);  // sqrt(1 + zeta^2)
  t = rotate ? copysign(gesvj_rcp(z + root), zeta) : R(0);
  c = gesvj_cosine(R(1) + t * t);
  return rotate;
}

// This lane's share of column p . column q (its rows).
template <int RP, int NC, typename R> __device__ __forceinline__ R gesvj_lane_dot(const R (&a)[RP][NC], int p, int q) {
  R v = R(0);
#pragma unroll
  for (int r = 0; r < RP; ++r) v = fma(a[r][p], a[r][q], v);
  return v;
}

// The group's sum of row k of the partial sums (its lanes from first_lane on).
template <int G, typename R, class Shared>
__device__ __forceinline__ R gesvj_group_sum(const Shared& sh, int k, int first_lane) {
  R v = R(0);
#pragma unroll
  for (int l = 0; l < G; ++l) v += sh.part[k][first_lane + l];
  return v;
}

// Squared norms of the NC columns into sh.norm[.][grp] (every lane's partial sums
// through sh.part), and the column scales reset to one.  Ends after a g.sync():
// the norms are visible to the group.
template <int G, int NC, int RP, typename R, class Shared>
__device__ __forceinline__ void gesvj_column_norms(ThreadGroup<G> g, int grp, const R (&a)[RP][NC], Shared& sh) {
  const int tid = threadIdx.x, base = tid - g.rank;
#pragma unroll
  for (int j = 0; j < NC; ++j) sh.part[j][tid] = gesvj_lane_dot(a, j, j);
  g.sync();
#pragma unroll
  for (int t = 0; t < (NC + G - 1) / G; ++t) {
    const int j = g.rank + G * t;
    if (j < NC) {
      sh.norm[j][grp] = gesvj_group_sum<G, R>(sh, j, base);
      sh.scale[j][grp] = R(1);
      sh.inv_scale[j][grp] = R(1);
    }
  }
  g.sync();
}

// x <- x - tp y, y <- y + tq x on the columns p, q of every row of x.
template <int ROWS, int NC, typename R>
__device__ __forceinline__ void gesvj_apply(R (&x)[ROWS][NC], int p, int q, GesvjRotation<R> rot) {
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const R a = x[r][p], b = x[r][q];
    x[r][p] = fma(-rot.tp, b, a);
    x[r][q] = fma(rot.tq, a, b);
  }
}

// The registers of columns 0..NC-2 move U positions down (cyclically): after it, position
// pos holds what position pos + U held.
template <int U, int ROWS, int NC, typename R> __device__ __forceinline__ void gesvj_shift(R (&x)[ROWS][NC]) {
  R moved[ROWS][NC - 1];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int pos = 0; pos < NC - 1; ++pos) moved[r][pos] = x[r][(pos + U) % (NC - 1)];
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
#pragma unroll
    for (int pos = 0; pos < NC - 1; ++pos) x[r][pos] = moved[r][pos];
}

// One round in register positions: pair k of round RR (compile-time) is the
// columns of round rho (run time) = RR + (rounds done before this unrolled step).
template <int RR, bool VECT, int G, int NC, int RP, int RV, typename R, class Shared>
__device__ __forceinline__ int gesvj_round(ThreadGroup<G> g, int grp, int rho, R (&a)[RP][NC], R (&v)[RV][NC],
                                           Shared& sh, R tol) {
  constexpr int P = NC / 2;
  const int tid = threadIdx.x, base = tid - g.rank;
  int made = 0;
  // this lane's share of every pair's dot product
#pragma unroll
  for (int k = 0; k < P; ++k) sh.part[k][tid] = gesvj_lane_dot(a, gesvj_pair_p(NC, RR, k), gesvj_pair_q(NC, RR, k));
  g.sync();
  // lane rank decides the pairs rank, rank + G, ... (in column numbers)
#pragma unroll
  for (int u = 0; u < (P + G - 1) / G; ++u) {
    const int k = g.rank + G * u;
    if (k < P) {
      const int p = gesvj_pair_p(NC, rho, k), q = gesvj_pair_q(NC, rho, k);
      const R dot = gesvj_group_sum<G, R>(sh, k, base);
      const R dp = sh.scale[p][grp], dq = sh.scale[q][grp];
      const R apq = dot * dp * dq, app = sh.norm[p][grp], aqq = sh.norm[q][grp];
      GesvjRotation<R> rot{R(0), R(0)};
      R c, t;
      if (gesvj_rotation(app, aqq, apq, tol, c, t)) {
        ++made;
        const R ip = sh.inv_scale[p][grp], iq = sh.inv_scale[q][grp], inv_c = (R(1) + t * t) * c;
        rot.tp = t * dq * ip;
        rot.tq = t * dp * iq;
        // new d and 1 / d; a Newton step keeps d (1 / d) = 1 to rounding over a sweep's
        // rotations (the rotation is orthogonal only as far as tp tq = t^2 d_p d_q ip iq holds)
        const R np = c * dp, nq = c * dq;
        R jp = inv_c * ip, jq = inv_c * iq;
        jp = fma(jp, fma(-np, jp, R(1)), jp);
        jq = fma(jq, fma(-nq, jq, R(1)), jq);
        sh.scale[p][grp] = np;
        sh.scale[q][grp] = nq;
        sh.inv_scale[p][grp] = jp;
        sh.inv_scale[q][grp] = jq;
        sh.norm[p][grp] = bd_max(app - t * apq, R(0));
        sh.norm[q][grp] = bd_max(aqq + t * apq, R(0));
      }
      sh.rot[k][grp] = rot;
    }
  }
  g.sync();
  // every lane updates its rows of every pair
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int p = gesvj_pair_p(NC, RR, k), q = gesvj_pair_q(NC, RR, k);
    const GesvjRotation<R> rot = sh.rot[k][grp];
    gesvj_apply(a, p, q, rot);
    if (VECT) gesvj_apply(v, p, q, rot);
  }
  return made;
}

template <int RR, int U, bool VECT, int G, int NC, int RP, int RV, typename R, class Shared>
__device__ __forceinline__ int gesvj_rounds(ThreadGroup<G> g, int grp, int rho0, R (&a)[RP][NC], R (&v)[RV][NC],
                                            Shared& sh, R tol) {
  if constexpr (RR == U) {
    return 0;
  } else {
    const int made = gesvj_round<RR, VECT>(g, grp, rho0 + RR, a, v, sh, tol);
    return made + gesvj_rounds<RR + 1, U, VECT>(g, grp, rho0, a, v, sh, tol);
  }
}

// One sweep (NC - 1 rounds) over the group's matrix, starting from exact squared
// norms and unit scales (gesvj_column_norms), which it keeps updated; ends with
// the scales multiplied into the registers (the caller recomputes the norms).
// VECT: every rotation also goes to v (rows of the accumulated right factor W).
// Returns the number of rotations made (the same on every lane of the group).
template <bool VECT, int G, int NC, int RP, int RV, typename R, class Shared>
__device__ __forceinline__ int gesvj_sweep(ThreadGroup<G> g, int grp, R (&a)[RP][NC], R (&v)[RV][NC], Shared& sh,
                                           R tol) {
  constexpr int U = gesvj_unroll(NC);
  int made = 0;
#pragma unroll 1
  for (int rho0 = 0; rho0 < NC - 1; rho0 += U) {
    made += gesvj_rounds<0, U, VECT>(g, grp, rho0, a, v, sh, tol);
    if constexpr (U < NC - 1) {
      gesvj_shift<U>(a);
      if (VECT) gesvj_shift<U>(v);
    }
  }
  // the last round's scales are visible (its second g.sync)
#pragma unroll
  for (int j = 0; j < NC; ++j) {
    const R dj = sh.scale[j][grp];
#pragma unroll
    for (int r = 0; r < RP; ++r) a[r][j] *= dj;
    if (VECT)
#pragma unroll
      for (int r = 0; r < RV; ++r) v[r][j] *= dj;
  }
  return butterfly_sum<1, G>(made, g.lanes());
}

// Orthonormal completion: columns good..cols-1 of the l x cols matrix X (element
// (i, j) at x[i * rs + j * cs], in device memory; columns 0..good-1 orthonormal,
// written and visible to the group) become unit vectors orthogonal to all before
// them: for each, the first e_c whose part orthogonal to the earlier columns
// (Gram-Schmidt, twice) has squared norm above 1 / (2 l) (one always has: those
// parts' squares sum to l - j >= 1 over c), normalized.  The columns of the
// Jacobi's left factor whose norms fell below the floor (exact zeros) need it.
template <int G, int RP, typename R>
__device__ void gesvj_complete(ThreadGroup<G> g, R* x, long long rs, long long cs, int l, int good, int cols) {
  for (int j = good; j < cols; ++j) {
    for (int c = 0; c < l; ++c) {
      R y[RP];
#pragma unroll
      for (int r = 0; r < RP; ++r) y[r] = g.rank + G * r == c ? R(1) : R(0);
      for (int pass = 0; pass < 2; ++pass) {
        for (int jj = 0; jj < j; ++jj) {
          R dot = R(0);
#pragma unroll
          for (int r = 0; r < RP; ++r) {
            const int i = g.rank + G * r;
            if (i < l) dot = fma(x[i * rs + jj * cs], y[r], dot);
          }
          dot = butterfly_sum<1, G>(dot, g.lanes());
#pragma unroll
          for (int r = 0; r < RP; ++r) {
            const int i = g.rank + G * r;
            if (i < l) y[r] = fma(-dot, x[i * rs + jj * cs], y[r]);
          }
        }
      }
      R nrm = R(0);
#pragma unroll
      for (int r = 0; r < RP; ++r) nrm = fma(y[r], y[r], nrm);
      nrm = butterfly_sum<1, G>(nrm, g.lanes());
      if (nrm > R(1) / R(2 * l)) {
        const R f = R(1) / bd_sqrt(nrm);
#pragma unroll
        for (int r = 0; r < RP; ++r) {
          const int i = g.rank + G * r;
          if (i < l) x[i * rs + j * cs] = y[r] * f;
        }
        break;
      }
    }
    g.sync();  // column j is read for the next
  }
}

}  // namespace bdf
