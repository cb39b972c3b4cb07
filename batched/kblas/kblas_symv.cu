// Large single-matrix SYMV / HEMV (KBLAS design): out = alpha * A x + beta * y for
// ONE n x n symmetric (Hermitian) matrix of which only one triangle is read.
// Launched by batched/kblas/symv.py as two kernels on one stream, or, for a short
// matrix, as the strips of kblas_symv_strip_kernel (at the end of this file):
//
// 1. kblas_symv_diag_kernel, one block per diagonal NB x NB block: reads the
//    stored triangle of the block into shared memory, mirrors it there and
//    writes out = beta * y + alpha * A_kk x_k for its NB outputs (plain stores:
//    every output index lies in exactly one diagonal block, so this also
//    initialises out for the atomics of the second kernel).
// 2. kblas_symv_offdiag_kernel: block (column C, part p) walks down its share of
//    the off-diagonal tiles B = A(R, C) of block column C inside the stored
//    triangle (R > C for lower, R < C for upper).  Each tile is read once and
//    used twice: out_R += alpha * B x_C (reduced over the block and added with
//    atomics, tile by tile) and out_C += alpha * B^H x_R (B^T for SYMV),
//    accumulated in registers over the walk and added once at the end.
//
// Both stages are thin wrappers: the bodies are bdf::kblas_symv_diag and
// bdf::kblas_symv_offdiag of kblas.cuh, shared with the multi-GPU kernels of
// kblas_mgpu.cu.  Here they run with the tile map bdf::SingleTiles (local =
// global; rows and columns share one index origin, the alignment shift of
// kblas.cuh, so that diagonal blocks stay square) and the output policy
// bdf::KblasOutput (alpha and beta y applied by the diagonal stage's stores,
// alpha by the off-diagonal stage's atomics into out).
//
// Both triangles use the same code: a stored block at (R, C) contributes
// B x_C to segment R and B^H x_R to segment C whichever side it is on.
#include "common.cuh"
#include "kblas.cuh"

// Launch flags (uniform over a launch).
#define KBLAS_CONJ_A 1     // every stored element is read conjugated (HEMV on a row-major view)
#define KBLAS_READ_Y 2     // beta != 0: y is read; otherwise never touched
#define KBLAS_LOWER 4      // the lower triangle is stored (of the column-major view)
#define KBLAS_HERMITIAN 8  // mirror with conjugation; the diagonal is real
#define KBLAS_VEC 16       // the strips: every column's element -shift 16-byte aligned
#define KBLAS_XVEC 32      // the strips: x contiguous, its element -shift 16-byte aligned

__device__ __forceinline__ bdf::KblasSymvFlags symv_flags(int flags) {
  return {bool(flags & KBLAS_LOWER), bool(flags & KBLAS_HERMITIAN), bool(flags & KBLAS_CONJ_A)};
}

template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_diag_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                       const T* __restrict__ x, long long incx, const T* y, long long incy,
                       T* out, long long inco, T alpha, T beta) {
  __shared__ __align__(16) unsigned char smem[bdf::kblas_symv_diag_bytes<T, NB, Q>()];
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_symv_diag<T, NB, Q>(A, lda, bdf::SingleTiles<NB>{n, shift}, blockIdx.x, x, incx, o,
                                 symv_flags(flags), smem);
}

// Launched after kblas_symv_diag_kernel on the same stream (out initialised), with
// (diagonal blocks) x parts blocks.
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_offdiag_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                          const T* __restrict__ x, long long incx, T* out, long long inco,
                          T alpha, int parts) {
  __shared__ __align__(16) unsigned char smem[bdf::kblas_symv_offdiag_bytes<T, NB, Q>()];
  const bdf::KblasOutput<T> o{out, inco, nullptr, 0, alpha, T(0), false};  // add() only
  bdf::kblas_symv_offdiag<T, NB, Q>(A, lda, bdf::SingleTiles<NB>{n, shift}, blockIdx.x, parts, x, incx,
                                    o, symv_flags(flags), smem);
}

// A short matrix in one pass (bdf::kblas_symv_strip): block b stores out at the
// KblasRowsShape<T, P, THREADS>::ROWS indices from b * ROWS - shift, reading its block
// row and block column of the stored triangle; no counters, no atomics.
template <typename T, int P, int THREADS, int U>
__global__ void __launch_bounds__(THREADS)
kblas_symv_strip_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                        const T* __restrict__ x, long long incx, const T* y, long long incy,
                        T* out, long long inco, T alpha, T beta) {
  using S = bdf::KblasRowsShape<T, P, THREADS>;
  __shared__ alignas(16) unsigned char scratch[(S::WARPS + 1) * S::ROWS * sizeof(T)];
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_symv_strip<T, P, THREADS, U>(reinterpret_cast<T*>(scratch), A, lda, n, shift, x, incx,
                                          flags & KBLAS_VEC, flags & KBLAS_XVEC, symv_flags(flags), blockIdx.x, o);
}
