// gebd2_lanes.cuh: Householder bidiagonalization (LAPACK xGEBD2's reflectors)
// of ONE small real matrix held in the registers of a group of G lanes.  Two
// uses: the singular values only (KEEP false: the reflectors are applied and
// dropped, only the diagonal d and the superdiagonal e are kept), and GEBRD's
// compact output (KEEP true: each lane's row ends as LAPACK's row of A, with the
// column reflectors' v below the diagonal and the row reflectors' u right of the
// superdiagonal, and the lane holds its step's tauq / taup).
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
//           product and multiply-adds in registers).  Without KEEP, rows at or above j
//           are never read again, so the lanes update them without a mask; with KEEP
//           the right update skips them (their u must survive), and lane j stores its
//           row's u in place of the row.  The group sums of
//           the left update go through shared memory (Gebd2LanesShared: each lane
//           stores its products, lane c adds column c's, all read the sums back);
//           as butterflies they were four shuffles a column and step, two
//           instructions each in double, and the kernel was bound by them.
// Result:   d_j and e_j (the bidiagonal's, upper since l >= k) in lane j's `d` and
//           `e` (e for j < k - 1 only).  Signs are LAPACK's (beta = -sign(alpha) norm);
//           the singular values do not depend on them.  KEEP: lane j's tq = tau of
//           H(j), tp = tau of G(j) (0 for j = k - 1, as LAPACK's last taup), and a[]
//           as above with beta (d_j, e_j) on the diagonal and superdiagonal.
// Numbers:  the caller scales the matrix by a power of two so that its largest entry
//           is in [1/2, 1): sums of squares cannot overflow, and entries below about
//           sqrt(tiny) whose squares underflow are dropped as zero (an absolute error
//           far below eps times the largest singular value).  xLARFG's rescaling loop
//           is therefore not needed.  The reflectors (v, u, tau) do not change under
//           that scaling; d and e scale with the matrix.  Square roots and reciprocals come from the
//           hardware approximations refined by Newton steps (an ulp or two, as good as
//           rounded operations for the reflectors' backward stability).
// Sync:     shuffles and the group's __syncwarp (g.sync(), twice a step); every lane of
//           the group takes part in each.
#pragma once
#include "common.cuh"
#include "bdsqr.cuh"  // BdLimits
#include "refined_approx.cuh"
#include "stage.cuh"

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
template <int G, int NC, bool FULL, bool KEEP, typename R>
__device__ __forceinline__ void gebd2_lanes(ThreadGroup<G> g, R (&a)[NC], int k_run, R& d, R& e, R& tq, R& tp,
                                            Gebd2LanesShared<G, NC, R>& sh) {
  const int k = FULL ? NC : k_run;
  const unsigned mask = g.lanes();
  const int base = int(threadIdx.x & 31u) & ~(G - 1);
  const int i = g.rank;
  constexpr int S = lanes_sums<G, R>();
  d = R(0);
  e = R(0);
  tq = R(0);
  tp = R(0);
#pragma unroll
  for (int j = 0; j < NC; ++j) {
    if (j >= k) break;
    // Left: column j, rows j..l-1.  w_c = sum_i v_i a_ic through the tile.
    const R x = a[j];
    const R s2 = butterfly_sum<1, G>(i > j ? x * x : R(0), mask);
    const LanesReflector<R> hl(shfl_idx(x, base + j, mask), s2);
    if (i == j) d = hl.beta;
    if constexpr (KEEP) {  // LAPACK's storage: beta on the diagonal, v below it
      if (i == j) tq = hl.tau;
      a[j] = i == j ? hl.beta : (i > j ? x * hl.scale : a[j]);
    }
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
    // KEEP: rows at or above j hold their reflectors (no update); lane j's becomes
    // beta and u (the row reflector's vector, stored in place of the row).
    const R yt = KEEP && i <= j ? R(0) : hr.tau * lanes_total(y);
    a[j + 1] = KEEP && i == j ? hr.beta : a[j + 1] - yt;
#pragma unroll
    for (int c = j + 2; c < NC; ++c) a[c] = KEEP && i == j ? r[c] : a[c] - yt * r[c];
    if (KEEP && i == j) tp = hr.tau;
  }
}

// Where lane i's row of matrix b is: M's row i when q <= p, else M's column i (M the
// accessor's p x q column-major matrix b): the group holds M, or M^T for a wide M.
template <typename R> struct Gebd2LanesView {
  const R* mat;
  int rows, cols;
  long long rs, cs;
  template <class MatA> __device__ __forceinline__ Gebd2LanesView(const MatA& A, long long b) {
    mat = A.matrix(b);
    const int p = A.rows(b), q = A.cols(b);
    const long long ld = A.ldim(b);
    const bool on_cols = q <= p;
    rows = on_cols ? p : q;
    cols = on_cols ? q : p;
    rs = on_cols ? 1 : ld;
    cs = on_cols ? ld : 1;
  }
};

// Lane i's row of the stage, entry c at stage[c gebd2_stage_ld(G) + i]: the lanes
// read one c from consecutive words, and the strided copy below writes a run of
// consecutive c to distinct banks (a row of G words would put the run in one bank).
__host__ __device__ constexpr int gebd2_stage_ld(int G) { return G + 1; }

// Whether the group copies the matrix in view together (gebd2_lanes_fetch): when the
// lanes' rows lie across its columns (rs != 1, a C-ordered tall matrix, rows ld
// apart) in groups of 32.  H100, one process, against each lane copying its own row
// (the one way before): float 32 x 24 1088 -> 1002 us, double 2026 -> 1735; in groups
// of 16 no gain (float 16 x 12 650 -> 703, double 1064 -> 1066), and dealt out for
// every matrix the two syncs and the longer loop cost 4-18 % at 8 x 8 and 16 x 16.
template <int G, typename R> __device__ __forceinline__ bool gebd2_lanes_dealt(const Gebd2LanesView<R>& v) {
  return G == 32 && v.rs != 1;
}

// The copy of the matrix in view into the group's stage.  Each lane copies its own
// row (at each c the lanes read consecutive addresses when rs == 1), or, when
// gebd2_lanes_dealt, the group deals the entries out in memory order
// (for_each_element: cs == 1, each instruction reads consecutive addresses) and the
// lanes write each other's slots: the caller then syncs the group before the copy,
// once every lane has read its row of the stage, and after the wait.
template <int G, int NC, typename R>
__device__ __forceinline__ void gebd2_lanes_fetch(ThreadGroup<G> g, const Gebd2LanesView<R>& v, R* stage) {
  constexpr int SLD = gebd2_stage_ld(G);
  const int cols = v.cols < NC ? v.cols : NC;
  if (!gebd2_lanes_dealt<G>(v)) {
    // A rolled loop with a running address: unrolled, the 32 addresses were live beside
    // the matrix (double 32 x 32: 198 registers against 168).
    if (g.rank < v.rows) {
      const R* src = v.mat + g.rank * v.rs;
#pragma unroll 1
      for (int c = 0; c < cols; ++c, src += v.cs) copy_async(stage + c * SLD + g.rank, src);
    }
  } else {
    for_each_element(g, cols, v.rows, [&](int c, int i) { copy_async(stage + c * SLD + i, v.mat + c + i * v.rs); });
  }
  stage_commit();
}

// The lanes design's block: GEBD2_LANES_BLOCK / G groups (gebrd_settings.LANES_THREADS).
constexpr int GEBD2_LANES_BLOCK = 128;

// A group's walk over its matrices b = first, first + step, ... < count of the
// accessor A (each at most G rows and NC columns in view): the next matrix is copied
// by cp.async into the group's stage (NC gebd2_stage_ld(G) entries) while the group
// works on the current one; each is read into registers, scaled by 2^-x (exact) so
// that its largest entry is in [1/2, 1), and bidiagonalized by gebd2_lanes<KEEP>.
// Then done(b, a, d, e, tq, tp, x) with the results (scaled), or bad(b) for a matrix
// with NaN/Inf (not reduced).  Every lane of the group calls both.  (ncu, double 32 x
// 32: a sixth of the time waited on the matrix's loads without the stage; measured,
// the gain came as much with one matrix a group, nothing to overlap: see design.md.)
template <int G, int NC, bool KEEP, class MatA, class Bad, class Done>
__device__ __forceinline__ void gebd2_lanes_batch(ThreadGroup<G> g, const MatA& A, long long first, long long step,
                                                  long long count, typename MatA::value_type* stage,
                                                  Gebd2LanesShared<G, NC, typename MatA::value_type>& sh, Bad bad,
                                                  Done done) {
  using R = typename MatA::value_type;
  static_assert(NC >= 1 && NC <= G && G <= 32, "at most G columns, G <= 32 rows");
  constexpr int SLD = gebd2_stage_ld(G);
  const int i = g.rank;
  // The view is built again for each copy rather than carried through the
  // reduction, where its fields would hold registers.
  if (first < count) gebd2_lanes_fetch<G, NC>(g, Gebd2LanesView<R>(A, first), stage);
  for (long long b = first; b < count; b += step) {
    const Gebd2LanesView<R> v(A, b);
    const int cols = v.cols;
    R a[NC];
    R amax = R(0);
    bool nonfinite = false;
    stage_wait<0>();
    if (gebd2_lanes_dealt<G>(v)) g.sync();  // the group copied the rows together
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const R x = (i < v.rows && c < cols) ? stage[c * SLD + i] : R(0);
      a[c] = x;
      nonfinite = nonfinite || !bd_finite(x);
      amax = bd_max(amax, bd_abs(x));
    }
    if (b + step < count) {
      const Gebd2LanesView<R> next(A, b + step);
      if (gebd2_lanes_dealt<G>(next)) g.sync();  // its copy writes every lane's slots: rows read first
      gebd2_lanes_fetch<G, NC>(g, next, stage);
    }
#pragma unroll
    for (int s = G / 2; s >= 1; s /= 2) amax = bd_max(amax, shfl_xor(amax, s, g.lanes()));
    if (__any_sync(g.lanes(), nonfinite)) {
      bad(b);
      continue;
    }
    const int x = amax > R(0) ? bd_exponent(amax) : 0;
    if (x != 0) {
#pragma unroll
      for (int c = 0; c < NC; ++c) a[c] = bd_ldexp(a[c], -x);
    }
    R d, e, tq, tp;
    if (cols == NC)  // the common case, without column guards (gebd2_lanes' FULL)
      gebd2_lanes<G, NC, true, KEEP>(g, a, cols, d, e, tq, tp, sh);
    else
      gebd2_lanes<G, NC, false, KEEP>(g, a, cols, d, e, tq, tp, sh);
    done(b, a, d, e, tq, tp, x);
  }
}

// A kernel of GEBD2_LANES_BLOCK threads on the accessor's count matrices: each group
// walks (gebd2_lanes_batch) the matrices from its index in the grid, a grid's groups
// apart, with its Gebd2LanesShared (static) and its stage in the kernel's dynamic
// shared memory (NC gebd2_stage_ld(G) entries a group: gebrd_settings.lanes_shared_bytes).
template <int G, int NC, bool KEEP, class MatA, class Bad, class Done>
__device__ __forceinline__ void gebd2_lanes_grid(const MatA& A, long long count, Bad bad, Done done) {
  using R = typename MatA::value_type;
  constexpr int GROUPS = GEBD2_LANES_BLOCK / G;
  __shared__ Gebd2LanesShared<G, NC, R> sh[GROUPS];
  extern __shared__ unsigned char gebd2_lanes_stage[];
  const int grp = int(threadIdx.x / G);
  R* stage = reinterpret_cast<R*>(gebd2_lanes_stage) + grp * (NC * gebd2_stage_ld(G));
  gebd2_lanes_batch<G, NC, KEEP>(ThreadGroup<G>(int(threadIdx.x % G)), A, (long long)blockIdx.x * GROUPS + grp,
                                 (long long)gridDim.x * GROUPS, count, stage, sh[grp], bad, done);
}

}  // namespace bdf
