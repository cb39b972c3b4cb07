// Large single-matrix GEMV (KBLAS design): out = alpha * op(A) x + beta * y for ONE
// column-major m x n matrix.  Launched by batched/kblas/gemv.py.
//
// Grid: segments x parts blocks on gridDim.x.  A segment is consecutive outputs: a
// row tile of R rows for the N kernel, a block column of NB for the T kernel (tall
// tiles of R x NB, kblas.cuh).
// The `parts` blocks of a segment (the paper's Y-bar) split its walk into
// contiguous shares of tiles and combine their partial sums through
// kblas_finish_segment (the last block to finish sums them in a fixed order).
#include "common.cuh"
#include "kblas.cuh"

// Launch flags (uniform over a launch).
#define KBLAS_CONJ 1    // op(A) conjugates the elements (trans 'C', or 'N' on a row-major A^H view)
#define KBLAS_READ_Y 2  // beta != 0: y is read; otherwise never touched
#define KBLAS_VEC 4     // the tall tiles' interior may load 16 bytes at a time (kblas.cuh)
#define KBLAS_XVEC 8    // x contiguous and 16-byte aligned with A's rows (kblas_gemv_t_cols_kernel)

// out = alpha * A x + beta * y: block `seg` owns the R rows of row tile `seg` (tall
// tiles, kblas.cuh: rows [seg*R - shift, +R), lane l the V of them from l*V) and walks
// right over its share of the NB-column tiles; the row origin `shift` aligns every
// warp's reads to 128 bytes (see kblas.cuh).  The warps' partial row sums meet in
// shared memory (kblas_gemv_n_segment).
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_gemv_n_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                    const T* __restrict__ x, long long incx, const T* y, long long incy,
                    T* out, long long inco, T alpha, T beta, int flags, int parts,
                    T* work, int* counters) {
  __shared__ bdf::KblasGemvShared<T, NB, Q> sh;
  const int segs = bdf::TileRange{m, shift}.count<bdf::KblasTallShape<T, NB, Q>::R>();
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_gemv_n_segment<T, NB, Q>(sh, A, lda, m, n, shift, x, incx, flags & KBLAS_VEC, flags & KBLAS_CONJ,
                                      blockIdx.x % segs, blockIdx.x / segs, parts, work, counters, o);
}

// out = alpha * A^T x + beta * y (A^H with KBLAS_CONJ): block `seg` owns columns
// [seg*NB, +NB), warp w the C of them from seg*NB + w*C, and walks down its share of
// the tall row tiles (R rows each, row origin `shift`; kblas_gemv_t_segment).
// A segment's parts are consecutive blocks, so the resident blocks read every share of
// the rows of fewer block columns.  Numbered the other way round (part-major, as the
// N kernel is), the resident blocks all read the same rows of many columns, addresses
// lda apart, and a power-of-two lda ran slower: H200, one process, two allocations
// each, DGEMV T 16384 512 -> 479 us (0.94 -> 1.01x cuBLAS), 10001 198 -> 191, offsets
// 1/17/1000 in a 16384 matrix 7 % faster, SGEMV T 8192 68 -> 65; 12288 0.6 % (double)
// and 2 % (float) slower.  The sums and their order are the same either way.
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_gemv_t_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                    const T* __restrict__ x, long long incx, const T* y, long long incy,
                    T* out, long long inco, T alpha, T beta, int flags, int parts,
                    T* work, int* counters) {
  __shared__ bdf::KblasGemvShared<T, NB, Q> sh;
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_gemv_t_segment<T, NB, Q>(sh, A, lda, m, n, shift, x, incx, flags & KBLAS_VEC, flags & KBLAS_CONJ,
                                      blockIdx.x / parts, blockIdx.x % parts, parts, work, counters, o);
}

// out = alpha * A x + beta * y in one pass for a short matrix: block b owns the
// KblasRowsShape<T, P, THREADS>::ROWS rows from b * ROWS - shift and reads every
// column's piece of them (kblas_gemv_n_rows); parts, work and counters are unused
// (the same arguments as the other kernels, for one launcher).
template <typename T, int P, int THREADS, int U>
__global__ void __launch_bounds__(THREADS)
kblas_gemv_n_rows_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                         const T* __restrict__ x, long long incx, const T* y, long long incy,
                         T* out, long long inco, T alpha, T beta, int flags, int parts,
                         T* work, int* counters) {
  using S = bdf::KblasRowsShape<T, P, THREADS>;
  __shared__ alignas(16) unsigned char scratch[S::WARPS * S::ROWS * sizeof(T)];
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_gemv_n_rows<T, P, THREADS, U>(reinterpret_cast<T*>(scratch), A, lda, m, n, shift, x, incx,
                                           flags & KBLAS_VEC, flags & KBLAS_CONJ, blockIdx.x, o);
}

// out = alpha * A^T x + beta * y (A^H with KBLAS_CONJ) in one pass, a warp per column
// (kblas_gemv_t_cols): block b the WARPS columns from b * WARPS; parts, work and counters
// unused, as in the kernel above.
template <typename T, int WARPS, int U>
__global__ void __launch_bounds__(32 * WARPS)
kblas_gemv_t_cols_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                         const T* __restrict__ x, long long incx, const T* y, long long incy,
                         T* out, long long inco, T alpha, T beta, int flags, int parts,
                         T* work, int* counters) {
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_gemv_t_cols<T, WARPS, U>(A, lda, m, n, shift, x, incx, flags & KBLAS_VEC, flags & KBLAS_XVEC,
                                      flags & KBLAS_CONJ, blockIdx.x, o);
}
