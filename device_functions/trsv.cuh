// trsv.cuh: triangular solves for ONE matrix: the diagonal-tile solve and the
// zero-pivot scan.  The off-diagonal updates of a blocked or recursive TRSV are
// GEMVs: the drivers call bdf::gemv_n / bdf::gemv_t (gemv.cuh) with an epilogue
// x_i -= r, so there is no second copy of GEMV here.
//
// Matrices are column-major views (element (i, j) at A[i + j * lda]); `op` is one
// of bdf::Op applied to that view (OP_R: conjugate without transpose, which is how
// 'C' on a row-major matrix arrives).  Solve order: forward when op(A) is lower
// triangular (lower view with N/R, upper view with T/C), backward otherwise.
#pragma once
#include "common.cuh"

namespace bdf {

// __shfl_sync over `width` lanes (a power of two <= 32), complex split in halves.
template <typename T> __device__ __forceinline__ T shfl_from(T v, int src, unsigned mask, int width) {
  return __shfl_sync(mask, v, src, width);
}
template <typename R>
__device__ __forceinline__ complex<R> shfl_from(complex<R> v, int src, unsigned mask, int width) {
  return complex<R>(__shfl_sync(mask, v.real(), src, width), __shfl_sync(mask, v.imag(), src, width));
}

// Does op(A) (A the stored view, lower or upper) have to be solved first row first?
__host__ __device__ constexpr bool trsv_forward(bool lower, int op) { return lower != op_transposes(op); }

// Element (i, j) of op(A) for the stored view A.
template <typename T>
__device__ __forceinline__ T op_element(const T* A, long long lda, int op, int i, int j) {
  const T a = op_transposes(op) ? A[j + (long long)i * lda] : A[i + (long long)j * lda];
  return conj_if(a, op_conjugates(op));
}

// bdf::trsv_tile_regs: solve op(A) y = y for one nb x nb triangular tile, nb <= W <= 32,
// each lane holding its own unknown in a register.
// Threads:  W lanes of one warp (a ThreadGroup<W> when W < 32, or the first warp of a
//           larger group), all of them calling it with the same arguments; lane l owns
//           the l-th unknown in solve order: yi is y[row] for row = l (forward) or
//           nb - 1 - l (backward), read by the caller (0 for l >= nb), and is that
//           unknown on return.
// Shared:   none.  Sync: only the W lanes' shuffles.
// Memory:   A read-only (global or shared), only its stored triangle and, unless
//           `unit`, the diagonal; each lane first loads its whole row of op(A) into
//           registers (W of them), so the sequential chain below waits on no load.
// Failure:  none: a zero diagonal divides by zero (callers scan for it first, see
//           first_zero_diagonal); NaN/Inf propagate as in LAPACK.
template <typename T, int W>
__device__ __forceinline__ void trsv_tile_regs(int lane, int nb, const T* A, long long lda, int op, bool forward,
                                               bool unit, T& yi) {
  static_assert(W >= 1 && W <= 32 && (W & (W - 1)) == 0, "a tile is solved by a power-of-two lane group");
  const unsigned mask = ThreadGroup<W>(lane).lanes();
  const int row = forward ? lane : nb - 1 - lane;  // the row of op(A) this lane owns
  const bool mine = lane < nb;
  // op(A)(row, col) = conj?(rowp[col * cs]); the s-th unknown's column is s (forward) or
  // nb - 1 - s, so its element is at p + s * step: one pointer and one stride, not an
  // address per element (which took 122 registers for W = 8 in double, 255 for W = 32).
  const bool cj = op_conjugates(op);
  const long long cs = op_transposes(op) ? 1 : lda;
  const T* rowp = A + (op_transposes(op) ? (long long)row * lda : (long long)row);
  const long long step = forward ? cs : -cs;
  const T* p = forward ? rowp : rowp + (long long)(nb - 1) * cs;
  T m[W];  // m[s]: op(A)(row, row of the s-th unknown), for the unknowns solved before this one
  T d = T(1);
#pragma unroll
  for (int s = 0; s < W; ++s) {
    m[s] = T(0);
    if (mine && s < lane) m[s] = conj_if(p[s * step], cj);
  }
  if (mine && !unit) d = conj_if(rowp[(long long)row * cs], cj);
#pragma unroll
  for (int s = 0; s < W; ++s) {
    if (s < nb) {  // uniform over the lanes
      if (lane == s && !unit) yi = safe_divide(yi, d);
      const T ys = shfl_from(yi, s, mask, W);
      if (lane > s) yi -= m[s] * ys;
    }
  }
}

// bdf::trsv_tile: trsv_tile_regs on y in memory (shared or global).
// Threads:  as trsv_tile_regs.
// Sync:     no barrier assumed on entry: y is read after a __syncwarp of the W lanes;
//           ends after a __syncwarp, y written.  The caller's other warps must wait at
//           a barrier of their own before reading y.
template <typename T, int W>
__device__ void trsv_tile(int lane, int nb, const T* A, long long lda, int op, bool forward, bool unit, T* y) {
  const unsigned mask = ThreadGroup<W>(lane).lanes();
  const int row = forward ? lane : nb - 1 - lane;
  __syncwarp(mask);
  T yi = lane < nb ? y[row] : T(0);
  trsv_tile_regs<T, W>(lane, nb, A, lda, op, forward, unit, yi);
  if (lane < nb) y[row] = yi;
  __syncwarp(mask);
}

// bdf::first_zero_diagonal: LAPACK's singularity check (xTRTRS): the 1-based index
// of the first exactly zero diagonal entry of the n x n matrix A, 0 if none.
// Threads:  every thread of the group calls it; all get the result.
// Shared:   a group of more than 32 threads passes `flag` (one int); else null.
// Sync:     no barrier assumed on entry; ends after a barrier when it used `flag`.
// Memory:   reads the n diagonal entries only.  NaN is not zero.
// Failure:  none.
template <int G, typename T>
__device__ int first_zero_diagonal(ThreadGroup<G> g, int n, const T* A, long long lda, int* flag) {
  constexpr int NONE = 0x7fffffff;
  int found = NONE;
  for (int i = g.rank; i < n; i += G) {
    if (A[i + (long long)i * lda] == T(0)) {
      found = i;
      break;  // later entries of this thread are larger indices
    }
  }
  const unsigned lanes = g.lanes();
#pragma unroll
  for (int d = (G < 32 ? G : 32) / 2; d >= 1; d /= 2) found = min(found, __shfl_xor_sync(lanes, found, d));
  if (G > 32) {
    if (g.rank == 0) *flag = NONE;
    g.sync();
    if ((g.rank & 31) == 0 && found != NONE) atomicMin(flag, found);
    g.sync();
    found = *flag;
    g.sync();  // everyone has read it before a later call resets it
  }
  return found == NONE ? 0 : found + 1;
}

}  // namespace bdf
