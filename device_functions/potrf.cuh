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

}  // namespace bdf
