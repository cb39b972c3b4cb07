// potrf.cuh: the Cholesky factorization of ONE small Hermitian positive definite
// matrix whose lower triangle a thread group holds in shared memory.
//
// bdf::potrf_lower_columns: S = L L^H in place (lower triangle), left-looking: column
// j first receives the update from every column before it as one GEMV,
//   S(j:n, j) -= L(j:n, 0:j) conj(L(j, 0:j))^T      (bdf::gemv_n, epilogue s -= conj(r)),
// then is scaled by the square root of its pivot.  Left-looking writes each column
// once (n^2 / 2 stores in all, against n^3 / 6 for the right-looking rank-1
// updates) and its update is exactly the GEMV of gemv.cuh, which spreads the
// rows below the diagonal over DIM_X lanes and the inner dimension over DIM_Y.
//
// Threads:  a ThreadGroup<DIM_X * DIM_Y> (gemv.cuh's shape rules); every thread of the
//           group calls it with the same arguments.
// Shared:   S (element (i, j) at S[i + j * lds]) in shared memory, or memory only this
//           group reads and writes; a group of more than 32 threads passes `work` with
//           DIM_X * DIM_Y * GEMV_UNROLL elements of T (gemv_n's), otherwise null.
// Sync:     no barrier assumed on entry (the caller makes S visible to the group first);
//           three barriers per column; ends after a barrier, S written.
// Memory:   reads and writes only the lower triangle of the leading n x n block of S.
//           The imaginary parts of the diagonal are never used (LAPACK's xPOTRF reads
//           the real part only); the diagonal of L is written real.
// Failure:  returns 0, or the 1-based column k whose pivot (the real part of S(k-1, k-1)
//           after its update) is not positive or is NaN (LAPACK's `ajj <= 0 or
//           isnan(ajj)`).  Then columns < k - 1 hold L, S(k-1, k-1) holds the failed
//           pivot (real), S(k:n, k-1) its updated, unscaled values, and the columns
//           after it are untouched.  Nothing is divided by a non-positive pivot.
//
// bdf::potrf_regs / potrs_regs: the same factorization, and the solve with its factor, for
// ONE thread holding the lower triangle of a matrix of at most NB x NB in registers
// (the thread design of factorizations/cholesky.cu): element (i, j), i >= j, at a[i][j],
// every index a compile-time constant after unrolling; no barrier.
//
// bdf::potrf_rows / potrs_rows: the same again for a matrix held one row per lane by a
// group of L lanes (the rows design): see below.
//
// bdf::potrf_warps: the factorization of a matrix too large for one warp (NB = 64, 128)
// held in the registers of a block of warps (the warps design): see below.
#pragma once
#include "common.cuh"
#include "gemv.cuh"
#include "trsv.cuh"
#include "vector.cuh"

namespace bdf {

template <typename T, int DIM_X, int DIM_Y>
__device__ int potrf_lower_columns(ThreadGroup<DIM_X * DIM_Y> g, int n, T* S, long long lds, T* work) {
  using R = typename real_of<T>::type;
  constexpr int G = DIM_X * DIM_Y;
  for (int j = 0; j < n; ++j) {
    T* col = S + j * lds;
    if (j > 0) {
      // r_i = sum_k conj(L(j + i, k)) L(j, k): the conjugate of the update of S(j + i, j).
      // Reads columns 0 .. j-1 only; writes column j only.
      gemv_n<T, DIM_X, DIM_Y>(g, n - j, j, S + j, lds, S + j, lds, true, work,
                              [=](int i, T r) { col[j + i] -= conj_if(r, true); });
    }
    g.sync();  // column j updated by its owners
    const R d = real_part(col[j]);
    g.sync();  // every thread has read the pivot before it is overwritten
    if (!(d > R(0))) {  // the same value in every thread: a uniform exit
      if (g.rank == 0) col[j] = T(d);
      g.sync();
      return j + 1;
    }
    const R ljj = sqrt(d);
    for (int i = j + g.rank; i < n; i += G) col[i] = (i == j) ? T(ljj) : col[i] / ljj;
    g.sync();  // column j final before the next column's GEMV reads it
  }
  return 0;
}

// bdf::potrf_regs: L L^H of the n x n matrix (n <= NB) whose lower triangle the thread
// holds in a (a[i][j], i >= j; the rest is never read), in place, in potrf_lower_columns'
// order: column j first receives the update of every column before it (k ascending),
// then is scaled by the reciprocal of its pivot's square root (LAPACK's xPOTF2 scales by
// 1 / ajj).  rdiag[j] = 1 / L(j, j) for potrs_regs.
// Failure:  as potrf_lower_columns: returns 0 or the 1-based failing column k; then a
//           holds L in columns < k - 1, the real failed pivot at (k-1, k-1), the updated
//           column below it unscaled, and the columns after it untouched.
template <int NB, typename T>
__device__ __forceinline__ int potrf_regs(int n, T (&a)[NB][NB], typename real_of<T>::type (&rdiag)[NB]) {
  using R = typename real_of<T>::type;
  int info = 0;
  // No early exit from the unrolled loop: with one, ptxas kept the diagonal in local
  // memory (its value differs by exit path); a failed column only switches the rest off.
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j < n && info == 0) {
#pragma unroll
      for (int k = 0; k < j; ++k) {
        const T ljk = conj_if(a[j][k], true);
#pragma unroll
        for (int i = j; i < NB; ++i)
          if (i < n) a[i][j] -= a[i][k] * ljk;
      }
      const R d = real_part(a[j][j]);
      if (d > R(0)) {
        const R l = sqrt(d), r = R(1) / l;
        rdiag[j] = r;
        a[j][j] = T(l);
#pragma unroll
        for (int i = j + 1; i < NB; ++i)
          if (i < n) a[i][j] = a[i][j] * r;
      } else {  // not positive, or NaN
        a[j][j] = T(d);
        info = j + 1;
      }
    }
  }
  return info;
}

// bdf::potrs_regs: x = (L L^H)^{-1} x for the factor of potrf_regs (conj_l: with conj(L),
// x = (conj(L) L^T)^{-1} x), both substitutions column-oriented (each solved unknown
// updates the ones after it: independent multiply-adds), dividing by the diagonal through
// rdiag.  A zero or NaN diagonal gives Inf / NaN (callers skip matrices with info > 0).
template <int NB, typename T>
__device__ __forceinline__ void potrs_regs(int n, const T (&a)[NB][NB], const typename real_of<T>::type (&rdiag)[NB],
                                           T (&x)[NB], bool conj_l) {
#pragma unroll
  for (int k = 0; k < NB; ++k) {  // L y = x (or conj(L) y = x)
    if (k >= n) break;
    x[k] = x[k] * rdiag[k];
#pragma unroll
    for (int i = k + 1; i < NB; ++i)
      if (i < n) x[i] -= conj_if(a[i][k], conj_l) * x[k];
  }
#pragma unroll
  for (int k = NB - 1; k >= 0; --k) {  // L^H x = y (or L^T x = y)
    if (k >= n) continue;
    x[k] = x[k] * rdiag[k];
#pragma unroll
    for (int i = 0; i < k; ++i) x[i] -= conj_if(a[k][i], !conj_l) * x[k];
  }
}

// bdf::potrf_rows / potrs_rows: the factorization and the solve for an n x n matrix
// (n <= NB <= L <= 32) held one row per lane by a group of L lanes: lane i keeps row i of
// L in a[k] (k <= i), and the group's shared array S (row-major, L(i, k) at S[i * lds + k])
// mirrors it.  Column j needs row j of L in every lane: the lanes read it from S by
// broadcast loads (each finished element is stored once, by its own lane, as it is
// computed), where the rows design of LU moves its pivot row by shuffles.
// Threads:  the whole warp calls them with a warp-uniform `steps` (the largest n among the
//           warp's groups); groups are aligned (lanes [g L, (g + 1) L)); `lane` = rank in
//           the group.  Only the pivots and the solved unknowns travel by shuffles.
// Shared:   S, the group's NB rows of lds >= NB elements.
// Sync:     __syncwarp on entry (S filled by the caller) and after every column; ends
//           after one.

// bdf::potrf_rows: on entry S holds the named triangle as the lower triangle of L
// (S[i * lds + k] = A(i, k), k <= i < n); on exit S holds what potrf_lower_columns leaves
// (the factor, or at a failure the failed column unscaled with its real pivot and the
// columns after it untouched), a holds the lane's row of it, rdiag = 1 / L(lane, lane).
// Returns the group's info (0 or the 1-based failing column) to all of its lanes.
template <int NB, int L, typename T>
__device__ __forceinline__ int potrf_rows(int lane, int n, int steps, T (&a)[NB], T* S, int lds,
                                          typename real_of<T>::type& rdiag) {
  using R = typename real_of<T>::type;
  constexpr unsigned ALL = 0xffffffffu;
  const bool valid = lane < n;
  int info = 0;
  rdiag = R(0);
  __syncwarp();
#pragma unroll
  for (int k = 0; k < NB; ++k) a[k] = valid && k <= lane ? S[lane * lds + k] : T(0);
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= steps) break;  // warp-uniform
    const bool live = j < n && info == 0;  // group-uniform
    const bool mine = live && valid && lane >= j;
    T s = a[j];
    if (mine) {  // s = A(lane, j) - L(lane, 0:j) L(j, 0:j)^H, row j of L read from S (broadcast)
      const T* row = S + j * lds;
#pragma unroll
      for (int k = 0; k < j; ++k) s -= a[k] * conj_if(row[k], true);
    }
    const R d = shfl_from(R(real_part(s)), j, ALL, L);  // lane j's pivot, to the whole group
    if (mine) {
      if (d > R(0)) {
        const R l = sqrt(d), r = R(1) / l;
        if (lane == j) rdiag = r;
        a[j] = lane == j ? T(l) : s * r;
      } else {  // not positive, or NaN: the column stays unscaled, its pivot real
        a[j] = lane == j ? T(d) : s;
      }
      S[lane * lds + j] = a[j];
    }
    if (live && !(d > R(0))) info = j + 1;
    __syncwarp();  // column j is in S before row j + 1 is read
  }
  return info;
}

// bdf::potrs_rows: x = (L L^H)^{-1} x (conj_l: (conj(L) L^T)^{-1} x) with the factor of
// potrf_rows; lane i holds x_i.  Forward column by column (each y_k reaches the group by
// one shuffle and updates the rows below it from their own registers); backward the
// same with L^H, whose column k is row k of L, read from S by each lane at its own
// column.  Dividing by the diagonal through rdiag.  n = 0 changes nothing (a failed
// matrix keeps x = b); every lane of the warp calls it.
template <int NB, int L, typename T>
__device__ __forceinline__ void potrs_rows(int lane, int n, int steps, const T (&a)[NB], const T* S, int lds,
                                           typename real_of<T>::type rdiag, T& x, bool conj_l) {
  constexpr unsigned ALL = 0xffffffffu;
  const bool valid = lane < n;
#pragma unroll
  for (int k = 0; k < NB; ++k) {  // L y = x
    if (k >= steps) break;
    T yk = x * rdiag;
    if (lane == k && k < n) x = yk;
    yk = shfl_from(yk, k, ALL, L);
    if (valid && lane > k && k < n) x -= conj_if(a[k], conj_l) * yk;
  }
#pragma unroll
  for (int k = NB - 1; k >= 0; --k) {  // L^H x = y
    if (k >= steps) continue;
    T xk = x * rdiag;
    if (lane == k && k < n) x = xk;
    xk = shfl_from(xk, k, ALL, L);
    if (valid && lane < k && k < n) x -= conj_if(S[k * lds + lane], !conj_l) * xk;
  }
}


// --- warps design: one block per matrix, rows over lanes, columns over warps -----------

// bdf::potrf_warps: L L^H of the n x n matrix (n <= NB) held by a block of W warps as LU's
// getf2_warps holds it: lane i of every warp the rows i, i + 32, .. (R = NB / 32 of them),
// warp w the columns w, w + W, .. (C = NB / W), a[c][r] = L(i + 32 r, w + W c) of the
// logical lower triangle (the caller loads the named triangle there, zeros elsewhere).
// Right-looking, one column a step: the owner of column j takes its pivot d = L(j, j)
// (one shuffle), scales the column by r = rsqrt(d) (the diagonal d r) and publishes the
// multipliers (rows > j, zeros elsewhere) in sl and the outcome in sstep; after one
// __syncthreads every warp updates its columns k > j: L(i, k) -= l_i conj(l_k), both
// factors read from sl.  The owner of column j + 1 updates that column and publishes
// step j + 1 at once (a look-ahead of one column) and defers its other updates of step j
// to step j + 1, when it applies both steps' (three slots of sl and sstep in turn), so
// that the chain from one step's barrier to the next is the pivot's alone, not the pivot
// and an update.  Unrolled over the C local columns (a runtime loop over the W warps
// inside), a column index into a is always a compile-time constant, and row slots above
// a column (32 (r + 1) <= W c) are skipped at compile time.  The summation order is the
// right-looking one (equal to the left-looking designs' up to rounding).
// With RIDE and a right-hand side b (POSV: `sb` non-null, b in shared memory), the forward
// solve L y = b (conj(L) y = b with conj_b) rides along as one more column: in step j a
// third warp, neither column j's owner (two steps' updates) nor column j + 1's (the
// chain to the next barrier), takes y_j = b_j / L(j, j) (the pivot's reciprocal square
// root, which the owner publishes in sy's slot j % 3) and subtracts l_i y_j from b's rows
// below j (l: step j's multipliers, which every warp loads), so that sb holds y when the
// factorization ends and only L^H x = y is left: one multiply-add a row and step, off the
// pivot chain, instead of a tile-by-tile solve by one warp while the block waits.  The
// order of the operations is the right-looking one (the tile solve's column order up to
// rounding).  W >= 3.
// Threads:  the whole block of 32 W threads, every thread with the same n.
// Shared:   S, the logical L the caller loaded (column-major, leading dimension lds >=
//           NB), read by nobody during the steps and overwritten at the end; sl (3 NB
//           elements), sstep (3 ints); with b: sb (n elements, visible to the block on
//           entry), sy (3 elements).
// Sync:     __syncthreads once a step and once at the end (and the rider's __syncwarp).
// Memory:   on exit S holds what potrf_lower_columns leaves in the lower triangle: the
//           factor, or at a failure in column k - 1 the columns before it, the failed
//           column updated and unscaled with its real pivot, and the columns after it
//           as the caller loaded them (the registers' further updates are not stored).
//           The strict upper triangle of S is not written.
// Failure:  returns 0 or the 1-based failing column to every thread; nothing after a
//           failed pivot is updated (sb then holds a partial solve: the caller reloads b).
template <typename R> __device__ __forceinline__ R reciprocal_sqrt(R x) {
  if constexpr (sizeof(R) == 4) return rsqrtf(x);
  else return rsqrt(x);
}

template <int NB, int W, bool RIDE, typename T, int R = NB / 32, int C = NB / W>
__device__ __forceinline__ int potrf_warps(int n, T (&a)[C][R], T* S, int lds, T* sl, int* sstep,
                                           T* sb = nullptr, T* sy = nullptr, bool conj_b = false) {
  using Re = typename real_of<T>::type;
  constexpr unsigned ALL = 0xffffffffu;
  static_assert(R * 32 == NB && C * W == NB, "whole rows per lane, whole columns per warp");
  static_assert(!RIDE || W >= 3, "the rider is a third warp");
  const int lane = int(threadIdx.x & 31u), w = int(threadIdx.x / 32);

  // Step s in the owner warp's column piece v: the pivot, the scaled column, published
  // (with b, also the pivot's reciprocal square root, for the rider).
  auto pivot_step = [&](int s, T (&v)[R]) {
    T dv = v[0];
#pragma unroll
    for (int r = 1; r < R; ++r) dv = select(s / 32 == r, v[r], dv);
    const Re d = shfl_from(Re(real_part(dv)), s & 31, ALL, 32);
    const bool go = d > Re(0);  // false for NaN too (LAPACK's ajj <= 0 or isnan(ajj))
    const Re dd = go ? d : Re(1), rcp = reciprocal_sqrt(dd), l = dd * rcp;
    T* dst = sl + (s % 3) * NB;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = lane + 32 * r;
      const T x = v[r] * rcp;
      dst[row] = select(go && row > s, x, T(0));
      if (row == s) v[r] = go ? T(l) : T(d);
      else if (go && row > s) v[r] = x;
    }
    if (lane == 0) {
      sstep[s % 3] = go;
      if (RIDE) sy[s % 3] = T(rcp);
    }
  };

  int info = 0;
  T lprev[R];  // the look-ahead owner's multipliers of the step whose other updates it deferred
  if (n > 0 && w == 0) pivot_step(0, a[0]);
#pragma unroll
  for (int jc = 0; jc < C; ++jc) {
    if (jc * W >= n || info) break;  // uniform
    for (int w0 = 0; w0 < W; ++w0) {
      const int j = w0 + jc * W;  // this step's column: local column jc of warp w0
      if (j >= n) break;          // uniform
      __syncthreads();            // step j is published; slot j % 3 (step j - 3, read through j - 2) is free
      if (!sstep[j % 3]) {        // uniform: the failed column stays as its owner left it
        info = j + 1;
        break;
      }
      const T* lj = sl + (j % 3) * NB;
      T l[R];
#pragma unroll
      for (int r = 0; r < R; ++r) l[r] = lj[lane + 32 * r];
      // column c -= m conj(m at the column's row) (c a constant after unrolling: a is never
      // indexed at run time; rows above the column skipped at compile time)
      auto update = [&](int c, const T (&m)[R], const T* src) {
        const T u = conj_if(src[w + W * c], true);
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (32 * (r + 1) > W * c) a[c][r] -= m[r] * u;
      };
      // the next step's column: local jc of warp w0 + 1, or local jc + 1 of warp 0
      const bool wrap = w0 + 1 == W;
      const bool ahead = j + 1 < n && w == (wrap ? 0 : w0 + 1);
      if (ahead) {  // column j + 1 and its pivot now; this warp's other updates of step j in step j + 1
        if (!wrap) {
          update(jc, l, lj);
          pivot_step(j + 1, a[jc]);
        } else if (jc + 1 < C) {
          const int nc = jc + 1 < C ? jc + 1 : jc;  // jc + 1; the clamp keeps a[] in range in the unrolled last jc
          update(nc, l, lj);
          pivot_step(j + 1, a[nc]);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) lprev[r] = l[r];
        continue;
      }
      if (RIDE && sb && w == (w0 + 2) % W) {  // the rider of step j: y_j, then b's rows below j
        const T yj = sb[j] * sy[j % 3];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int row = lane + 32 * r;
          if (row > j && row < n) sb[row] -= conj_if(l[r], conj_b) * yj;
        }
        __syncwarp();  // every lane has read b_j
        if (lane == 0) sb[j] = yj;
      }
      // this step's owner published it ahead during step j - 1 and deferred that step's
      // other updates: both now, in order (its columns after j are the same for both)
      const bool deferred = j > 0 && w == w0;
      const T* lp = sl + ((j + 2) % 3) * NB;  // step j - 1's slot
#pragma unroll
      for (int c = jc; c < C; ++c) {
        if (c == jc && w <= w0) continue;  // columns up to j
        if (deferred) update(c, lprev, lp);
        update(c, l, lj);
      }
    }
  }
  // the lower triangle of the columns factored (through the failed one) into S
  const int last = info ? info - 1 : n - 1;
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = lane + 32 * r, col = w + W * c;
      if (32 * (r + 1) > W * c && col <= last && row >= col && row < n) S[row + col * lds] = a[c][r];
    }
  __syncthreads();
  return info;
}

}  // namespace bdf

