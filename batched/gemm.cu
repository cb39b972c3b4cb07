// Batched GEMM: out_b = alpha * op(A_b) op(B_b) + beta * C_b for every product b.
// One kernel body for the three layouts (the accessors of layouts.cuh).
#include "common.cuh"
#include "gemm.cuh"
#include "layouts.cuh"

#define GEMM_READ_C 1        // beta != 0: C is read; otherwise never touched
#define GEMM_SKIP_PRODUCT 2  // alpha == 0 or k == 0: A and B are never read

// Sub-warp groups pack several products into one 128-thread block.
__host__ __device__ constexpr int gemm_block_threads(int group) { return group > 32 ? group : 128; }

// READ_C: beta * C is added (the launch's GEMM_READ_C).  The tensor-core tiles
// take it as a template argument (a store per element with no branch); the
// CUDA-core tiles, as -1, test the runtime flag.
template <typename T, int READ_C = -1> struct GemmStore {
  T alpha, beta;
  const T* c; long long ldc;
  T* out; long long ldo;
  bool read_c;
  __device__ void operator()(int i, int j, T r) const {
    T v = alpha * r;
    if (READ_C == 1 || (READ_C < 0 && read_c)) v += beta * c[i + j * ldc];
    out[i + j * ldo] = v;
  }
  // The complex tensor-core tile hands over an element's two parts.
  template <typename R> __device__ void operator()(int i, int j, R re, R im) const { (*this)(i, j, T(re, im)); }
};

// Work item = (product b, tile ti, tile tj); op(A_b) is m x k, op(B_b) k x n,
// out_b m x n (sizes from the accessors: A gives m and k, B gives n).
// MMA = 4, 8 or 16: float64 and complex128 products run on FP64 tensor cores
// (gemm_tile_mma with the m16n8k<MMA> shape, on the warps of the group; only those
// two dtypes are registered with it).  For complex128 the real BLK_M x BLK_N tile
// is a BLK_M x BLK_N / 2 complex one (GemmSetting.tile_n).  MMA = 0 runs gemm_tile.  STAGES: the tensor-core
// pipeline's buffers (0: gemm_mma_stages' default); MIN_BLOCKS: blocks an SM
// must hold, which caps the registers (0: no cap; 1 would let ptxas take up
// to 255, 28 more for the 32 x 32 tile).  Shared memory is dynamic: the
// launcher passes GemmSetting.smem_bytes, GROUPS * PER_GROUP elements.
template <class MatA, class MatB, class MatC, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K,
          int MMA, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__(gemm_block_threads(DIM_X * DIM_Y), MIN_BLOCKS)
gemm_kernel(MatA A, MatB B, MatC C, MatC out, int opA, int opB,
            typename MatA::value_type alpha, typename MatA::value_type beta, int flags,
            long long count, int tiles_m, int tiles_n) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int GROUPS = gemm_block_threads(G) / G;
  constexpr bool CPLX = bdf::is_complex_v<T> && sizeof(T) == 16;
  constexpr bool TENSOR = MMA != 0 && (bdf::is_double<T>::value || CPLX);
  constexpr int TILE_N = TENSOR && CPLX ? BLK_N / 2 : BLK_N;  // output columns of a tile
  constexpr int SA = bdf::gemm_smem_a<BLK_M, BLK_K>(), SB = bdf::gemm_smem_b<BLK_N, BLK_K>();
  // Elements of T a group owns (the tensor-core pipeline's doubles, two a complex element).
  constexpr int PER_GROUP =
      TENSOR ? (bdf::gemm_mma_smem<BLK_M, BLK_N, BLK_K, STAGES, CPLX>() + CPLX) / (CPLX ? 2 : 1) : SA + SB;
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  const int group = threadIdx.x / G;
  T* sA = reinterpret_cast<T*>(smem_bytes) + group * PER_GROUP;
  T* sB = sA + SA;
  double* s_mma = reinterpret_cast<double*>(sA);

  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  const bool read_c = flags & GEMM_READ_C;
  const long long tiles = (long long)tiles_m * tiles_n, items = count * tiles;
  for (long long item = (long long)blockIdx.x * GROUPS + group; item < items;
       item += (long long)gridDim.x * GROUPS) {
    const long long b = tiles == 1 ? item : item / tiles;  // skip the 64-bit division for big-tile
    const int t = int(item - b * tiles);
    const int i0 = (t % tiles_m) * BLK_M, j0 = (t / tiles_m) * TILE_N;
    const int m = out.rows(b), n = out.cols(b);
    if (i0 >= m || j0 >= n) continue;  // uniform over the group
    const int k = bdf::op_transposes(opA) ? A.rows(b) : A.cols(b);
    // C's accessor is empty (null arrays) when it is not read: touch it only under read_c.
    const GemmStore<T> store{alpha, beta, read_c ? C.matrix(b) : nullptr, read_c ? C.ldim(b) : 0,
                             out.matrix(b), out.ldim(b), read_c};
    if (flags & GEMM_SKIP_PRODUCT) {
      for (int e = g.rank; e < BLK_M * TILE_N; e += G) {
        const int i = i0 + e % BLK_M, j = j0 + e / BLK_M;
        if (i < m && j < n) store(i, j, T(0));
      }
      continue;
    }
    if constexpr (TENSOR) {
      static_assert(G % 32 == 0, "tensor-core tiles need whole warps");
      constexpr int WM = bdf::mma_warps_m(G / 32), WN = G / 32 / WM;
      // Tiles of 64 x 64 and more store without a branch per element (READ_C a
      // template argument: gemm_tile_mma's straight-line stores); smaller ones keep
      // one copy of the tile (two cost the 32 x 32 tile 56 bytes of spill).
      if constexpr (BLK_M * BLK_N >= 64 * 64) {
        const GemmStore<T, 0> plain{alpha, beta, nullptr, 0, store.out, store.ldo, false};
        const GemmStore<T, 1> with_c{alpha, beta, store.c, store.ldc, store.out, store.ldo, true};
        if (read_c)
          bdf::gemm_tile_mma<WM, WN, BLK_M, BLK_N, BLK_K, MMA, STAGES>(
              g, m, n, k, i0, j0, A.matrix(b), A.ldim(b), opA, B.matrix(b), B.ldim(b), opB, s_mma, with_c);
        else
          bdf::gemm_tile_mma<WM, WN, BLK_M, BLK_N, BLK_K, MMA, STAGES>(
              g, m, n, k, i0, j0, A.matrix(b), A.ldim(b), opA, B.matrix(b), B.ldim(b), opB, s_mma, plain);
      } else {
        bdf::gemm_tile_mma<WM, WN, BLK_M, BLK_N, BLK_K, MMA, STAGES>(
            g, m, n, k, i0, j0, A.matrix(b), A.ldim(b), opA, B.matrix(b), B.ldim(b), opB, s_mma, store);
      }
    } else {
      bdf::gemm_tile<T, DIM_X, DIM_Y, BLK_M, BLK_N, BLK_K>(
          g, m, n, k, i0, j0, A.matrix(b), A.ldim(b), opA, B.matrix(b), B.ldim(b), opB, sA, sB, store);
    }
  }
}
