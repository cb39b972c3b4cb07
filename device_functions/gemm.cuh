// gemm.cuh: one BLK_M x BLK_N tile of op(A) op(B) for ONE matrix product,
// computed by one thread group through tiles staged in shared memory.
//
// Threads:  a ThreadGroup<DIM_X * DIM_Y>; thread (tx, ty) owns the outputs
//           (tx + p * DIM_X, ty + q * DIM_Y), p < BLK_M / DIM_X, q < BLK_N / DIM_Y.
// Shared:   caller passes sA with gemm_smem_a<BLK_M, BLK_K>() and sB with
//           gemm_smem_b<BLK_N, BLK_K>() elements of T (one group's worth);
//           contents undefined on exit.
// Sync:     no barrier assumed on entry; two barriers per BLK_K step; ends after a barrier.
// Memory:   A, B read-only (column-major, leading dimensions lda, ldb), only inside
//           op(A) m x k and op(B) k x n; out-of-range tile elements are zero in
//           shared memory, never loaded.  store(i, j, r) is called once per
//           output (i < m, j < n), by the thread that owns it.
// Failure:  none; NaN/Inf propagate as in BLAS.
#pragma once
#include "common.cuh"

namespace bdf {

// One padding element per row keeps the transposed tile loads free of bank conflicts.
template <int BLK_M, int BLK_K> __host__ __device__ constexpr int gemm_smem_a() { return BLK_K * (BLK_M + 1); }
template <int BLK_N, int BLK_K> __host__ __device__ constexpr int gemm_smem_b() { return BLK_K * (BLK_N + 1); }

// Stage op(X)(r, c) for r < R_TILE, c < C_TILE (origin r0, c0; extent rows x cols)
// into s[c * (R_TILE + 1) + r].  Consecutive threads take consecutive addresses
// of X: along r when op keeps X's orientation, along c when op transposes it.
template <int R_TILE, int C_TILE, int GROUP, typename T>
__device__ __forceinline__ void gemm_stage(int rank, const T* __restrict__ X, long long ldx, int op,
                                           int r0, int c0, int rows, int cols, T* s) {
  const bool trans = op_transposes(op), cj = op_conjugates(op);
#pragma unroll
  for (int e0 = 0; e0 < R_TILE * C_TILE; e0 += GROUP) {
    const int e = e0 + rank;
    if (R_TILE * C_TILE % GROUP != 0 && e >= R_TILE * C_TILE) break;
    const int r = trans ? e / C_TILE : e % R_TILE;
    const int c = trans ? e % C_TILE : e / R_TILE;
    const int gr = r0 + r, gc = c0 + c;
    T v = T(0);
    if (gr < rows && gc < cols)
      v = conj_if(trans ? X[gc + gr * ldx] : X[gr + gc * ldx], cj);
    s[c * (R_TILE + 1) + r] = v;
  }
}

// Tile (i0, j0) of op(A) op(B), with op(A) m x k and op(B) k x n.
template <typename T, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K, class Store>
__device__ void gemm_tile(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, int k, int i0, int j0,
                          const T* __restrict__ A, long long lda, int opA,
                          const T* __restrict__ B, long long ldb, int opB,
                          T* sA, T* sB, Store store) {
  static_assert(BLK_M % DIM_X == 0 && BLK_N % DIM_Y == 0, "tile must split evenly over threads");
  constexpr int G = DIM_X * DIM_Y, P = BLK_M / DIM_X, Qn = BLK_N / DIM_Y;
  const int tx = g.rank % DIM_X, ty = g.rank / DIM_X;
  T acc[P][Qn];
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int q = 0; q < Qn; ++q) acc[p][q] = T(0);

  for (int kk = 0; kk < k; kk += BLK_K) {
    g.sync();  // the previous step's tiles are no longer read
    // sA[kc * (BLK_M + 1) + i] = op(A)(i0 + i, kk + kc)
    gemm_stage<BLK_M, BLK_K, G>(g.rank, A, lda, opA, i0, kk, m, k, sA);
    // sB[kr * (BLK_N + 1) + j] = op(B)(kk + kr, j0 + j): op(B)^T staged like A
    // (opB ^ 1 swaps N<->T and C<->R).
    gemm_stage<BLK_N, BLK_K, G>(g.rank, B, ldb, opB ^ 1, j0, kk, n, k, sB);
    g.sync();
#pragma unroll 4
    for (int kc = 0; kc < BLK_K; ++kc) {
      T a[P], b[Qn];
#pragma unroll
      for (int p = 0; p < P; ++p) a[p] = sA[kc * (BLK_M + 1) + tx + p * DIM_X];
#pragma unroll
      for (int q = 0; q < Qn; ++q) b[q] = sB[kc * (BLK_N + 1) + ty + q * DIM_Y];
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int q = 0; q < Qn; ++q) acc[p][q] += a[p] * b[q];
    }
  }
  g.sync();
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int q = 0; q < Qn; ++q) {
      const int i = i0 + tx + p * DIM_X, j = j0 + ty + q * DIM_Y;
      if (i < m && j < n) store(i, j, acc[p][q]);
    }
}

// The warp grid of gemm_tile_mma for a group of W warps: 2 x W/2 (1 x 1 for one warp).
__host__ __device__ constexpr int mma_warps_m(int warps) { return warps >= 2 ? 2 : 1; }

template <class T> struct is_double { static constexpr bool value = false; };
template <> struct is_double<double> { static constexpr bool value = true; };

// gemm_tile_mma: gemm_tile for T = double on FP64 tensor cores (sm_80+:
// mma.sync m8n8k4).  The output tile is a grid of 8x8 mma tiles; the group's
// W = G / 32 warps form a WARPS_M x WARPS_N grid over it, each warp owning
// (BLK_M / 8 / WARPS_M) x (BLK_N / 8 / WARPS_N) mma tiles in registers.  The
// operand tiles are staged exactly as gemm_tile stages them, so the two
// differ only in the inner product.
// Fragments of mma.m8n8k4.f64 (PTX ISA), with g = lane / 4, t = lane % 4:
//   A (8x4): a = A(g, t);  B (4x8): b = B(t, g);  C (8x8): c[h] = C(g, 2t + h).
// Threads:  a ThreadGroup<G>, G a multiple of 32 (whole warps).
// Shared, Sync, Memory, Failure: as gemm_tile.
template <int WARPS_M, int WARPS_N, int BLK_M, int BLK_N, int BLK_K, class Store>
__device__ void gemm_tile_mma(ThreadGroup<32 * WARPS_M * WARPS_N> g, int m, int n, int k, int i0, int j0,
                              const double* __restrict__ A, long long lda, int opA,
                              const double* __restrict__ B, long long ldb, int opB,
                              double* sA, double* sB, Store store) {
  constexpr int G = 32 * WARPS_M * WARPS_N;
  const int rank = g.rank;
  constexpr int TM = BLK_M / 8 / WARPS_M, TN = BLK_N / 8 / WARPS_N;  // mma tiles per warp
  static_assert(BLK_M % (8 * WARPS_M) == 0 && BLK_N % (8 * WARPS_N) == 0 && BLK_K % 4 == 0,
                "the tile must split into 8x8x4 mma steps over the warps");
  const int lane = rank % 32, warp = rank / 32;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int gq = lane / 4, tq = lane % 4;
  double acc[TM][TN][2];
#pragma unroll
  for (int a = 0; a < TM; ++a)
#pragma unroll
    for (int b = 0; b < TN; ++b) acc[a][b][0] = acc[a][b][1] = 0.0;

  for (int kk = 0; kk < k; kk += BLK_K) {
    g.sync();  // the previous step's tiles are no longer read
    gemm_stage<BLK_M, BLK_K, G>(rank, A, lda, opA, i0, kk, m, k, sA);
    gemm_stage<BLK_N, BLK_K, G>(rank, B, ldb, opB ^ 1, j0, kk, n, k, sB);
    g.sync();
#pragma unroll
    for (int k4 = 0; k4 < BLK_K; k4 += 4) {
      double a[TM], b[TN];
#pragma unroll
      for (int ta = 0; ta < TM; ++ta) a[ta] = sA[(k4 + tq) * (BLK_M + 1) + (wm * TM + ta) * 8 + gq];
#pragma unroll
      for (int tb = 0; tb < TN; ++tb) b[tb] = sB[(k4 + tq) * (BLK_N + 1) + (wn * TN + tb) * 8 + gq];
#pragma unroll
      for (int ta = 0; ta < TM; ++ta)
#pragma unroll
        for (int tb = 0; tb < TN; ++tb)
          asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                       : "+d"(acc[ta][tb][0]), "+d"(acc[ta][tb][1])
                       : "d"(a[ta]), "d"(b[tb]));
    }
  }
  g.sync();
#pragma unroll
  for (int ta = 0; ta < TM; ++ta)
#pragma unroll
    for (int tb = 0; tb < TN; ++tb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = i0 + (wm * TM + ta) * 8 + gq, j = j0 + (wn * TN + tb) * 8 + 2 * tq + h;
        if (i < m && j < n) store(i, j, acc[ta][tb][h]);
      }
}

}  // namespace bdf
