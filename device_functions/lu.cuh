// lu.cuh: LU with partial pivoting of ONE matrix held in shared memory, and the
// solve with its factors.  The batched GETRF/GESV kernels (factorizations/lu.cu)
// call these on a whole small matrix (fused design) or on one panel of a larger
// one (blocked design).  Pivot search is bdf::iamax, the triangular solves are
// bdf::trsv_tile plus bdf::gemv_n updates: no second copy of either here.
// getf2_regs / getrs_regs are the same algorithms for ONE thread holding a whole
// matrix of at most NB x NB in registers (thread design): the same pivot order
// (bdf::iamax_ahead), reciprocal rule and operation order, without any barrier.
//
// Matrices are column-major in shared memory: element (i, j) at s[i + j * lds].
// In registers: element (i, j) at a[i][j], every index a compile-time constant
// after unrolling (a runtime index would move the array to local memory).
#pragma once
#include "common.cuh"
#include "gemv.cuh"
#include "trsv.cuh"
#include "vector.cuh"

namespace bdf {

// LAPACK's sfmin (dlamch('S')): the smallest normal number; 1 / sfmin does not overflow.
template <typename R> struct SafeMin;
template <> struct SafeMin<float> { static constexpr float value = 1.17549435e-38f; };
template <> struct SafeMin<double> { static constexpr double value = 2.2250738585072014e-308; };

template <typename T> __device__ __forceinline__ typename real_of<T>::type modulus(T a) {
  if constexpr (is_complex_v<T>) return abs(a);
  else return fabs(a);
}

// LAPACK's scaling of a column by its pivot: by the reciprocal unless that would
// overflow (|pivot| < sfmin); here also unless it would be subnormal and short of
// digits (|pivot| > 1 / sfmin).  Otherwise divide (safe_divide).
template <typename T> struct PivotScale {
  T piv, r;
  bool recip;
  __device__ __forceinline__ explicit PivotScale(T p) : piv(p) {
    using R = typename real_of<T>::type;
    const R a = modulus(p);
    recip = a >= SafeMin<R>::value && a <= R(1) / SafeMin<R>::value;
    r = recip ? T(1) / p : T(0);
  }
  __device__ __forceinline__ T operator()(T l) const { return recip ? l * r : safe_divide(l, piv); }
};

// Bytes of `work` getf2_tile and getrs_tile need for a group of G threads (0 for G <= 32):
// iamax's per-warp pairs and gemv_n's G * GEMV_UNROLL partial sums.
template <typename T> __host__ __device__ constexpr int lu_work_bytes(int group) {
  return group > 32 ? (group * GEMV_UNROLL * int(sizeof(T)) > vector_work_bytes(group)
                           ? group * GEMV_UNROLL * int(sizeof(T)) : vector_work_bytes(group))
                    : 0;
}

// bdf::getf2_tile: P A = L U of the m x n matrix in shared memory (LAPACK xGETF2,
// right-looking, one column at a time), in place: L below the diagonal (unit
// diagonal not stored), U on and above it.
// Threads:  a ThreadGroup<G>; every thread calls it with the same arguments.  Thread t
//           owns rows t, t + G, ... in the scale and rank-1 update (a row's update
//           needs only its own multiplier, so scale and update need no barrier between).
// Shared:   s (m x n, leading dimension lds) and spiv (min(m, n) ints) owned by the
//           caller; `work` of lu_work_bytes<T>(G) bytes (null for G <= 32).
// Sync:     begins with a barrier (the caller's writes to s are then visible); three
//           barriers per column (after the pivot search, after the row swap, after the
//           update); ends after a barrier.
// Memory:   s read and written; spiv[j] = the 0-based row swapped with row j (LAPACK's
//           ipiv - 1), written by rank 0.
// Pivots:   bdf::iamax on |re| + |im| (BLAS's IxAMAX: the first largest; NaN counts as
//           the largest, so a NaN column pivots on its first NaN).
// Failure:  returns, to every thread, LAPACK's info: the 1-based column of the first
//           exactly zero pivot, 0 if none.  A zero pivot's column is zero below the
//           diagonal already; it is neither scaled nor used for an update (a finite
//           matrix would not change; nothing is divided by zero), and the
//           factorization goes on with the next column, as LAPACK's does.
template <int G, typename T>
__device__ int getf2_tile(ThreadGroup<G> g, int m, int n, T* s, int lds, int* spiv, unsigned char* work) {
  const int kmax = m < n ? m : n;
  int info = 0;
  g.sync();
  for (int j = 0; j < kmax; ++j) {
    T* col = s + j + (long long)j * lds;
    const int p = j + iamax<G>(g, m - j, col, 1, work);
    g.sync();  // every thread is done reading column j before rows j and p move
    if (g.rank == 0) spiv[j] = p;
    if (p != j) {
      for (int c = g.rank; c < n; c += G) {
        const T t = s[j + (long long)c * lds];
        s[j + (long long)c * lds] = s[p + (long long)c * lds];
        s[p + (long long)c * lds] = t;
      }
    }
    g.sync();  // row j (the pivot row) is in place
    const T piv = *col;
    if (piv == T(0)) {
      if (info == 0) info = j + 1;  // uniform: every thread read the same pivot
      continue;                     // no barrier needed: nothing was written since the last one
    }
    const PivotScale<T> scale(piv);
    for (int i = j + 1 + g.rank; i < m; i += G) {
      const T l = scale(s[i + (long long)j * lds]);
      s[i + (long long)j * lds] = l;
      for (int c = j + 1; c < n; ++c) s[i + (long long)c * lds] -= l * s[j + (long long)c * lds];
    }
    g.sync();  // column j + 1 is updated before its pivot search
  }
  return info;
}

// bdf::getrs_tile: x = U^{-1} L^{-1} x for the n x n factors of getf2_tile in shared
// memory (the row interchanges are applied by the caller before).
// Threads:  a ThreadGroup<G>; every thread calls it.  Tiles of W = min(G, 32) unknowns:
//           each is solved by bdf::trsv_tile on the first W threads after a gemv_n
//           update (DIM_X = min(G, 32), DIM_Y = G / DIM_X) from the unknowns solved
//           before it (left-looking, as factorizations/trsv.cu's blocked design).
// Shared:   lu (ld ldlu) read-only; x (n elements, shared) overwritten; `work` of
//           lu_work_bytes<T>(G) bytes, as T (null for G <= 32).
// Sync:     no barrier assumed on entry; ends after a barrier.
// Memory:   reads the strict lower triangle and the upper triangle of lu.
// Failure:  none: a zero diagonal entry of U gives Inf/NaN (callers with info > 0 skip it).
template <typename T, int G>
__device__ void getrs_tile(ThreadGroup<G> g, int n, const T* lu, int ldlu, T* x, T* work) {
  constexpr int W = G < 32 ? G : 32;
  constexpr int DX = G < 32 ? G : 32, DY = G / DX;
  g.sync();  // x is filled
  // L y = x, unit lower, forward
  for (int r0 = 0; r0 < n; r0 += W) {
    const int nb = min(W, n - r0);
    if (r0 > 0) {
      T* xr = x + r0;
      gemv_n<T, DX, DY>(g, nb, r0, lu + r0, ldlu, x, 1, false, work, [=](int i, T v) { xr[i] -= v; });
      g.sync();
    }
    if (g.rank < W) trsv_tile<T, W>(g.rank, nb, lu + r0 + (long long)r0 * ldlu, ldlu, OP_N, true, true, x + r0);
    g.sync();
  }
  // U x = y, backward
  for (int done = 0; done < n; done += W) {
    const int nb = min(W, n - done);
    const int r0 = n - done - nb;
    if (done > 0) {
      T* xr = x + r0;
      gemv_n<T, DX, DY>(g, nb, done, lu + r0 + (long long)(r0 + nb) * ldlu, ldlu, x + r0 + nb, 1, false, work,
                        [=](int i, T v) { xr[i] -= v; });
      g.sync();
    }
    if (g.rank < W) trsv_tile<T, W>(g.rank, nb, lu + r0 + (long long)r0 * ldlu, ldlu, OP_N, false, false, x + r0);
    g.sync();
  }
}

// c ? a : b, component by component for complex: a conditional between two complex
// lvalues may select an address, which moves register arrays to local memory.
template <typename T> __device__ __forceinline__ T select(bool c, T a, T b) { return c ? a : b; }
template <typename R> __device__ __forceinline__ complex<R> select(bool c, complex<R> a, complex<R> b) {
  return complex<R>(c ? a.real() : b.real(), c ? a.imag() : b.imag());
}

// Exchange element j of a register vector with element p (j <= p < limit), element i
// being at(i): each later element is compared with p, so the vector is never indexed
// at run time (loops over NB, unrolled).
template <int NB, class At> __device__ __forceinline__ void swap_selected(int j, int p, int limit, At at) {
  const auto xj = at(j);
  auto moved = xj;
#pragma unroll
  for (int i = j + 1; i < NB; ++i) {
    if (i >= limit) break;
    const bool here = p == i;
    const auto xi = at(i);
    moved = select(here, xi, moved);
    at(i) = select(here, xj, xi);
  }
  at(j) = moved;
}

// bdf::getf2_regs: P A = L U of the m x n matrix a (m, n <= NB) in the registers of
// one thread, in place, exactly as getf2_tile: column j's pivot is the first largest
// |re| + |im| of rows j .. m-1 (iamax_ahead: NaN first), rows j and p swap across the
// n columns, the column is scaled by the reciprocal pivot when sfmin <= |pivot| <=
// 1 / sfmin (else divided, safe_divide), and the trailing matrix gets the rank-1
// update with the same expressions.  Rows >= m and columns >= n are neither read
// nor written (an m x n matrix in a larger instantiation, as LAPACK sees it).
// Threads:  one thread, alone; NB a compile-time bound, m and n at run time.  Loops
//           run over NB, unrolled, and stop at kmax, m or n (uniform branches when
//           the threads of a warp hold matrices of one shape).
// Shared:   none.
// Sync:     none.
// Memory:   a[i][j] read and written for i < m, j < n; ipiv[j] = the 0-based row
//           swapped with row j (LAPACK's ipiv - 1) for j < min(m, n), the rest
//           untouched.  The row swap selects row p by comparing p with each
//           candidate row (a register array is never indexed at run time): about
//           2 n (m - j) selects for column j, of the order of its update's FMAs,
//           skipped when p == j.
// Failure:  returns LAPACK's info (the 1-based column of the first exactly zero
//           pivot, 0 if none); a zero pivot's column is neither scaled nor used,
//           and the factorization goes on, as getf2_tile.
template <int NB, typename T>
__device__ __forceinline__ int getf2_regs(int m, int n, T (&a)[NB][NB], int (&ipiv)[NB]) {
  using R = typename real_of<T>::type;
  const int kmax = m < n ? m : n;
  int info = 0;
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= kmax) break;
    // pivot search: iamax over rows j .. m-1, the running best starting at row j
    R best = abs1(a[j][j]);
    int p = j;
#pragma unroll
    for (int i = j + 1; i < NB; ++i) {
      if (i >= m) break;
      const R v = abs1(a[i][j]);
      if (iamax_ahead(v, i, best, p)) {
        best = v;
        p = i;
      }
    }
    ipiv[j] = p;
    // rows j and p swap across the n columns: row p is one of rows j + 1 .. m - 1.  As
    // LAPACK, nothing moves when p == j: a warp whose matrices need no interchange
    // here (diagonally dominant ones, for instance) skips the selects.
    if (p != j) {
#pragma unroll
      for (int c = 0; c < NB; ++c) {
        if (c >= n) break;
        swap_selected<NB>(j, p, m, [&](int i) -> T& { return a[i][c]; });
      }
    }
    const T piv = a[j][j];
    if (piv == T(0)) {
      if (info == 0) info = j + 1;
      continue;  // the column is zero below the diagonal: nothing to scale or update
    }
    const PivotScale<T> scale(piv);
#pragma unroll
    for (int i = j + 1; i < NB; ++i) {
      if (i >= m) break;
      const T l = scale(a[i][j]);
      a[i][j] = l;
#pragma unroll
      for (int c = j + 1; c < NB; ++c) {
        if (c >= n) break;
        a[i][c] -= l * a[j][c];
      }
    }
  }
  return info;
}

// bdf::getrs_regs: x = U^{-1} L^{-1} P x for the n x n factors of getf2_regs (n <= NB)
// in the registers of one thread: the interchanges ipiv[0], ipiv[1], ... in order
// (LAPACK's xLASWP), the unit lower solve forward, the upper solve backward, each
// column-oriented as trsv_tile (x_j = x_j / u_jj by safe_divide, then x_i -= a_ij x_j
// for the rows after it in solve order): the same operations as getrs_tile for n <= 32.
// Threads:  one thread, alone; loops over NB unrolled, stopping at n.
// Shared:   none.
// Sync:     none.
// Memory:   a and ipiv (0-based, each in [j, n)) read-only; x[0 .. n) overwritten,
//           the rest untouched.
// Failure:  none: a zero diagonal entry of U gives Inf/NaN (callers with info > 0 skip it).
template <int NB, typename T>
__device__ __forceinline__ void getrs_regs(int n, const T (&a)[NB][NB], const int (&ipiv)[NB], T (&x)[NB]) {
  // P x: interchange j <-> ipiv[j], selected among the rows after j (none when equal)
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= n) break;
    if (ipiv[j] != j) swap_selected<NB>(j, ipiv[j], n, [&](int i) -> T& { return x[i]; });
  }
  // L y = x, unit lower, forward
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= n) break;
#pragma unroll
    for (int i = j + 1; i < NB; ++i) {
      if (i >= n) break;
      x[i] -= a[i][j] * x[j];
    }
  }
  // U x = y, backward
#pragma unroll
  for (int j = NB - 1; j >= 0; --j) {
    if (j >= n) continue;
    x[j] = safe_divide(x[j], a[j][j]);
#pragma unroll
    for (int i = 0; i < j; ++i) x[i] -= a[i][j] * x[j];
  }
}

// --- rows design: one row per lane ---------------------------------------------------
//
// getf2_rows / getrs_rows are getf2_tile / getrs_tile for a matrix held one row per lane
// by a group of L lanes (lane i: row i, a[c] = element (i, c), c < NB), with no shared
// memory and no barrier: the pivot search is a shuffle reduction, the pivot row reaches
// the other lanes by shuffles, and rows never move: each lane keeps `pos`, the position
// its row has in LAPACK's swapped order (P A), so an interchange changes two integers.
// The pivot order, the reciprocal rule and the operation order are those of getf2_tile.
//
// Every lane of the warp calls them with warp-uniform `steps` and `cols` (the largest
// min(m, n) and n among the warp's groups, so that every shuffle has all 32 lanes; a
// group's own m and n decide what its lanes do).  Groups are aligned: lanes
// [k L, (k + 1) L) of a warp.

// The lane (0..31 in the warp) whose `pos` is `at` among the group's lanes `gmask`, for
// rows that `hold` one; the calling lane itself when none does (its group is idle).
__device__ __forceinline__ int rows_lane_at(bool hold, int pos, int at, unsigned gmask) {
  const unsigned hit = __ballot_sync(0xffffffffu, hold && pos == at) & gmask;
  return hit ? __ffs(hit) - 1 : int(threadIdx.x & 31u);
}

// bdf::getf2_rows: P A = L U of the m x n matrix (m <= L, n <= NB) in the lanes' a, in
// place (lane i's row ends at position pos in P A: L to the left of the diagonal, U from
// it on).  my_piv: lane j (j < min(m, n)) gets the 0-based position swapped with j at
// step j (LAPACK's ipiv - 1).  Returns LAPACK's info to every lane of the group.
// Threads:  the whole warp (see above); `lane` the rank in the group (0..L-1).
// Shared:   none.  Sync: none beyond the shuffles.
// Memory:   registers only.
// Failure:  a zero pivot's column is neither scaled nor used, as getf2_tile.
template <int NB, int L, typename T>
__device__ __forceinline__ int getf2_rows(int lane, int m, int n, int steps, int cols, T (&a)[NB], int& pos,
                                          int& my_piv) {
  using R = typename real_of<T>::type;
  constexpr unsigned ALL = 0xffffffffu;
  const unsigned gmask = ThreadGroup<L>(lane).lanes();
  const int kmin = m < n ? m : n;
  const bool valid = lane < m;
  int info = 0;
  pos = lane;
  my_piv = lane;
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= steps) break;  // warp-uniform
    const bool live = j < kmin;
    // pivot search (bdf::iamax's rule): the first largest |re| + |im| in positions j..m-1
    const bool cand = live && valid && pos >= j;
    R best = cand ? abs1(a[j]) : R(-1);
    int at = cand ? pos : 0x7fffffff;
#pragma unroll
    for (int d = L / 2; d >= 1; d /= 2) {
      const R ov = __shfl_xor_sync(ALL, best, d);
      const int oi = __shfl_xor_sync(ALL, at, d);
      if (iamax_ahead(ov, oi, best, at)) {
        best = ov;
        at = oi;
      }
    }
    const int src = rows_lane_at(cand, pos, at, gmask);  // the pivot row's lane
    const T piv = shfl_from(a[j], src, ALL, 32);
    if (live) {  // the interchange of positions j and at
      if (lane == j) my_piv = at;
      if (pos == j) pos = at;
      else if (int(threadIdx.x & 31u) == src) pos = j;
    }
    const bool go = live && piv != T(0);
    if (live && !go && info == 0) info = j + 1;
    const bool upd = go && valid && pos > j;
    T l = T(0);
    if (upd) {
      l = PivotScale<T>(piv)(a[j]);
      a[j] = l;
    }
#pragma unroll
    for (int c = j + 1; c < NB; ++c) {
      if (c >= cols) break;  // warp-uniform
      const T u = shfl_from(a[c], src, ALL, 32);
      if (upd) a[c] -= l * u;
    }
  }
  return info;
}

// bdf::getrs_rows: x = U^{-1} L^{-1} P b for the n x n factors of getf2_rows; lane i
// holds b_i (the user's row order: P is already in `pos`) and ends with the unknown
// at position pos.  The same operations as getrs_tile (trsv_tile's column order and
// safe_divide by the diagonal).
// Threads, Shared, Sync: as getf2_rows (`cols` the warp's largest n); a group with n = 0
//           takes part in the shuffles and leaves x as it is.
// Failure:  none: a zero diagonal entry of U gives Inf/NaN (callers with info > 0 skip it).
template <int NB, int L, typename T>
__device__ __forceinline__ void getrs_rows(int lane, int n, int cols, const T (&a)[NB], int pos, T& x) {
  constexpr unsigned ALL = 0xffffffffu;
  const unsigned gmask = ThreadGroup<L>(lane).lanes();
  const bool valid = lane < n;
#pragma unroll
  for (int k = 0; k < NB; ++k) {  // unit lower, forward
    if (k >= cols) break;
    const int src = rows_lane_at(valid, pos, k, gmask);
    const T xk = shfl_from(x, src, ALL, 32);
    if (valid && k < n && pos > k) x -= a[k] * xk;
  }
#pragma unroll
  for (int k = NB - 1; k >= 0; --k) {  // upper, backward
    if (k >= cols) continue;
    const int src = rows_lane_at(valid, pos, k, gmask);
    if (valid && pos == k) x = safe_divide(x, a[k]);
    const T xk = shfl_from(x, src, ALL, 32);
    if (valid && k < n && pos < k) x -= a[k] * xk;
  }
}

}  // namespace bdf
