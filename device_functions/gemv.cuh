// gemv.cuh: matrix-vector products for ONE matrix, computed by one thread group.
//
// Both functions hand each result to an epilogue `store(i, r)` instead of
// writing y themselves, so BLAS's y = alpha*r + beta*y (batched GEMV), x -= r
// (TRSV's off-diagonal update) and LABRD's updates reuse the same loops.
//
// Threads:  a ThreadGroup<DIM_X * DIM_Y>; thread (tx, ty) = (rank % DIM_X, rank / DIM_X).
//           DIM_X, DIM_Y powers of two, DIM_X <= 32. Every thread of the group calls it.
// Shared:   gemv_n with a group of more than 32 threads needs `work` with
//           DIM_X * DIM_Y * GEMV_UNROLL elements of T; otherwise `work` may be null.
//           Contents undefined on exit.
// Sync:     no barrier assumed on entry; ends after a barrier when it used `work`.
// Memory:   A (column-major, element (i, j) at A[i + j * lda]) and x are read-only,
//           global or shared; A and x are not read when m or n is 0.
//           store(i, r) is called exactly once per output index, by one thread.
// Failure:  none; NaN/Inf propagate as in BLAS.
#pragma once
#include "common.cuh"

namespace bdf {

// Output rows (N) or columns (T) each thread accumulates per pass: independent
// loads in flight per thread, which is what keeps a memory-bound GEMV busy.
constexpr int GEMV_UNROLL = 4;
// The reduction loops are unrolled 8 deep on top, so that a thread that owns a
// single output (tiny matrices) still has 8 loads in flight.

// r_i = sum_j op(A)(i, j) x_j for i < m; op(A) = A, or conj(A) when `conj`.
template <typename T, int DIM_X, int DIM_Y, class Store>
__device__ void gemv_n(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, const T* __restrict__ A,
                       long long lda, const T* __restrict__ x, long long incx, bool conj,
                       T* work, Store store) {
  constexpr int Q = GEMV_UNROLL;
  const int tx = g.rank % DIM_X, ty = g.rank / DIM_X;
  const unsigned lanes = g.lanes();
  for (int ib = 0; ib < m; ib += DIM_X * Q) {
    T acc[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) acc[q] = T(0);
#pragma unroll 8
    for (int j = ty; j < n; j += DIM_Y) {
      const T xj = x[j * incx];
      const T* col = A + j * lda;
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int i = ib + tx + q * DIM_X;
        if (i < m) acc[q] += conj_if(col[i], conj) * xj;
      }
    }
    if (DIM_Y == 1) {
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int i = ib + tx + q * DIM_X;
        if (i < m) store(i, acc[q]);
      }
    } else if (DIM_X * DIM_Y <= 32) {  // the column partials of a row sit in one warp
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        acc[q] = butterfly_sum<DIM_X, DIM_Y>(acc[q], lanes);
        const int i = ib + tx + q * DIM_X;
        if (ty == 0 && i < m) store(i, acc[q]);
      }
    } else {  // partials of a row span warps: reduce through shared memory
      g.sync();  // a previous pass may still read `work`
#pragma unroll
      for (int q = 0; q < Q; ++q) work[(q * DIM_Y + ty) * DIM_X + tx] = acc[q];
      g.sync();
      for (int s = g.rank; s < Q * DIM_X; s += DIM_X * DIM_Y) {
        const int q = s / DIM_X, t = s % DIM_X, i = ib + t + q * DIM_X;
        if (i < m) {
          T r = T(0);
          for (int y = 0; y < DIM_Y; ++y) r += work[(q * DIM_Y + y) * DIM_X + t];
          store(i, r);
        }
      }
      g.sync();
    }
  }
}

// r_j = sum_i op(A)(i, j) x_i for j < n; op(A)(i, j) = A(i, j), or conj when `conj`
// (i.e. r = A^T x or A^H x).  Rows are spread over tx so that a warp reads
// contiguous runs of each column; the column sums are reduced across tx in-warp.
template <typename T, int DIM_X, int DIM_Y, class Store>
__device__ void gemv_t(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, const T* __restrict__ A,
                       long long lda, const T* __restrict__ x, long long incx, bool conj,
                       T* /*work*/, Store store) {
  constexpr int Q = GEMV_UNROLL;
  const int tx = g.rank % DIM_X, ty = g.rank / DIM_X;
  const unsigned lanes = g.lanes();
  for (int jb = 0; jb < n; jb += DIM_Y * Q) {
    T acc[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) acc[q] = T(0);
#pragma unroll 8
    for (int i = tx; i < m; i += DIM_X) {
      const T xi = x[i * incx];
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int j = jb + ty + q * DIM_Y;
        if (j < n) acc[q] += conj_if(A[i + j * lda], conj) * xi;
      }
    }
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      acc[q] = butterfly_sum<1, DIM_X>(acc[q], lanes);
      const int j = jb + ty + q * DIM_Y;
      if (tx == 0 && j < n) store(j, acc[q]);
    }
  }
}

// Sums of v[0 .. KC) each over the PPC lanes of the lane's group (groups of PPC
// consecutive lanes, KC and PPC powers of two): recursive halving, so a lane sends
// KC / 2 + KC / 4 + ... values instead of KC log2(PPC).  On return v[0 .. KC / min(KC,
// PPC)) hold the sums of the values first, first + 1, ... (the return value), complete
// in the lanes whose rank in the group is a multiple of PPC / min(KC, PPC).  Every lane
// of the warp calls it.  group_scatter_split: min(KC, PPC).
template <int KC, int PPC> __host__ __device__ constexpr int group_scatter_split() { return KC < PPC ? KC : PPC; }
template <int KC, int PPC, typename T>
__device__ __forceinline__ int group_sum_scatter(T (&v)[KC], int lane) {
  constexpr int SPLIT = group_scatter_split<KC, PPC>();
  int first = 0;
#pragma unroll
  for (int t = 1; t < SPLIT; t *= 2) {  // halvings: t = 1, 2, .. SPLIT / 2
    const int half = KC / (2 * t), d = PPC / (2 * t);
    const bool upper = lane & d;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const T send = upper ? v[i] : v[i + half];
      const T keep = upper ? v[i + half] : v[i];
      v[i] = keep + shfl_xor(send, d, 0xffffffffu);
    }
    if (upper) first += half;
  }
#pragma unroll
  for (int d = PPC / SPLIT / 2; d >= 1; d /= 2)  // the lanes left with the same values
#pragma unroll
    for (int i = 0; i < KC / SPLIT; ++i) v[i] += shfl_xor(v[i], d, 0xffffffffu);
  return first;
}

// bdf::gemv_packed: r = op(A) x for ONE packed column-major matrix (lda == m), read by
// one warp in 16-byte pieces, op = N (r_i = sum_j A(i, j) x_j) or, with TRANS, T / C.
// A column is PPC whole pieces (m = PPC * W, W = 16 / sizeof(T) elements a piece; PPC a
// power of two, 1..32), so every load instruction of the warp covers 512 consecutive
// bytes of the matrix: lane l always reads piece l % PPC of a column, of the columns
// l / PPC + k * (32 / PPC).  Why: gemv_n / gemv_t load an element a thread, 4-16
// bytes: a 32 x 32 float32 matrix takes 32 load instructions a warp there against 8
// here, and the view-'T' float32 32 x 32 batch ran at 82 % of the copy bandwidth.
// T: each lane keeps the W elements of x of its piece's rows; the KC column sums of a
// round of loads are split over the PPC lanes that read them (group_sum_scatter: a
// butterfly a column spent 5 x 4 shuffles a column of complex128 32 x 32).  N: each
// lane accumulates its piece's W rows over its columns; a row's sum is a butterfly
// over the 32 / PPC lanes that share the piece.  KC pieces a lane are loaded before
// any is used.
// Threads:  one whole warp (`lane` 0..31), every lane calls it.
// Shared:   none.  Sync: none (shuffles over the full warp).
// Memory:   A 16-byte aligned, column-major with lda = m; x read with increment incx
//           (T: its first m elements; N: its first n).  store(i, r) exactly once per
//           output index (T: n of them; N: m), by one lane.
// Failure:  none; NaN/Inf propagate as in BLAS.
template <typename T, int PPC, bool TRANS, class Store>
__device__ __forceinline__ void gemv_packed(int lane, int n, const T* __restrict__ A, const T* __restrict__ x,
                                            long long incx, bool conj, Store store) {
  constexpr int W = 16 / int(sizeof(T));
  constexpr int CPL = 32 / PPC;  // columns one warp load covers
  constexpr int KC = 8;          // pieces a lane has in flight
  constexpr int M = PPC * W;
  static_assert(W >= 1 && 16 % int(sizeof(T)) == 0, "whole elements in a 16-byte piece");
  static_assert(PPC >= 1 && PPC <= 32 && (PPC & (PPC - 1)) == 0, "a power of two of pieces a column");
  const int rp = lane % PPC, co = lane / PPC;
  const T* a0 = A + co * M + rp * W;
  T acc[W], xr[W];
#pragma unroll
  for (int e = 0; e < W; ++e) {
    acc[e] = T(0);
    if (TRANS) xr[e] = x[(rp * W + e) * incx];
  }
  for (int j0 = 0; j0 < n; j0 += KC * CPL) {
    T a[KC][W], xj[KC];
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      const int j = j0 + k * CPL + co;
      if (j < n) {
        load_run<W>(a[k], a0 + (long long)(j0 + k * CPL) * M);
        if (!TRANS) xj[k] = x[j * incx];
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e) a[k][e] = T(0);
        xj[k] = T(0);
      }
    }
    if constexpr (TRANS) {
      T s[KC];
#pragma unroll
      for (int k = 0; k < KC; ++k) {
        s[k] = T(0);
#pragma unroll
        for (int e = 0; e < W; ++e) s[k] += conj_if(a[k][e], conj) * xr[e];
      }
      constexpr int SPLIT = group_scatter_split<KC, PPC>();
      const int first = group_sum_scatter<KC, PPC>(s, lane);
      if (rp % (PPC / SPLIT) == 0) {
#pragma unroll
        for (int i = 0; i < KC / SPLIT; ++i) {
          const int j = j0 + (first + i) * CPL + co;
          if (j < n) store(j, s[i]);
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < KC; ++k)
#pragma unroll
        for (int e = 0; e < W; ++e) acc[e] += conj_if(a[k][e], conj) * xj[k];
    }
  }
  if constexpr (!TRANS) {
#pragma unroll
    for (int e = 0; e < W; ++e) {
      acc[e] = butterfly_sum<PPC, CPL>(acc[e], 0xffffffffu);
      if (co == 0) store(rp * W + e, acc[e]);
    }
  }
}

}  // namespace bdf
