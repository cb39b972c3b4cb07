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
#pragma once
#include "common.cuh"
#include "gemv.cuh"
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

}  // namespace bdf
