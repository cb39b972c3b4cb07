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

// Shared arrays are raw bytes: complex<T> has a constructor, which __shared__ may not run.

// Launch flags (uniform over a launch).
#define KBLAS_CONJ 1    // op(A) conjugates the elements (trans 'C', or 'N' on a row-major A^H view)
#define KBLAS_READ_Y 2  // beta != 0: y is read; otherwise never touched
#define KBLAS_VEC 4     // the tall tiles' interior may load 16 bytes at a time (kblas.cuh)

// out = alpha * A x + beta * y: block `seg` owns the R rows of row tile `seg` (tall
// tiles, kblas.cuh: rows [seg*R - shift, +R), lane l the V of them from l*V) and walks
// right over its share of the NB-column tiles; the row origin `shift` aligns every
// warp's reads to 128 bytes (see kblas.cuh).  The warps' partial row sums meet in
// shared memory.
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_gemv_n_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                    const T* __restrict__ x, long long incx, const T* y, long long incy,
                    T* out, long long inco, T alpha, T beta, int flags, int parts,
                    T* work, int* counters) {
  using S = bdf::KblasTallShape<T, NB, Q>;
  constexpr int V = S::V, R = S::R, W = S::W;
  __shared__ __align__(16) unsigned char scratch_bytes[W * R * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[R * sizeof(T)];
  __shared__ int flag;
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const bdf::TileRange rows{m, shift};
  const int segs = rows.count<R>();
  const int seg = blockIdx.x % segs, part = blockIdx.x / segs;
  int t0, t1;
  bdf::split_share(bdf::TileRange{n, 0}.count<NB>(), parts, part, t0, t1);
  const bool vec = flags & KBLAS_VEC, conj = flags & KBLAS_CONJ;

  T acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = T(0);
  if (rows.edge<R>(seg))
    bdf::kblas_tall_walk_right<T, NB, Q, true>(A, lda, rows, n, seg, t0, t1, x, incx, vec, conj, acc);
  else
    bdf::kblas_tall_walk_right<T, NB, Q, false>(A, lda, rows, n, seg, t0, t1, x, incx, vec, conj, acc);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < V; ++k) scratch[warp * R + lane * V + k] = acc[k];
  bdf::kblas_sum_slices<T, R, W>(scratch, red);
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_finish_segment<T, R>(red, seg, rows.start<R>(seg), m, part, parts, work,
                                  (long long)segs * R, counters, &flag, o);
}

// out = alpha * A^T x + beta * y (A^H with KBLAS_CONJ): block `seg` owns columns
// [seg*NB, +NB), warp w the C of them from seg*NB + w*C, and walks down its share of
// the tall row tiles (R rows each, row origin `shift`; kblas.cuh, KblasTallShape).
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_gemv_t_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                    const T* __restrict__ x, long long incx, const T* y, long long incy,
                    T* out, long long inco, T alpha, T beta, int flags, int parts,
                    T* work, int* counters) {
  using S = bdf::KblasTallShape<T, NB, Q>;
  constexpr int C = S::C;
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  __shared__ int flag;
  T* red = reinterpret_cast<T*>(red_bytes);

  const bdf::TileRange rows{m, shift};
  const int segs = bdf::TileRange{n, 0}.count<NB>();
  const int seg = blockIdx.x % segs, part = blockIdx.x / segs;
  int t0, t1;
  bdf::split_share(rows.count<S::R>(), parts, part, t0, t1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col0 = seg * NB + warp * C;
  long long col_offset[C];
#pragma unroll
  for (int c = 0; c < C; ++c) col_offset[c] = (long long)min(col0 + c, n - 1) * lda;  // past n: never stored

  T acc[C];
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = T(0);
  bdf::kblas_tall_walk<T, NB, Q>(A, rows, col_offset, t0, t1, x, incx, flags & KBLAS_VEC,
                                 flags & KBLAS_CONJ, acc);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const T s = bdf::butterfly_sum<1, 32>(acc[c], 0xffffffffu);
    if (lane == 0) red[warp * C + c] = s;
  }
  __syncthreads();
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_finish_segment<T, NB>(red, seg, seg * NB, n, part, parts, work, (long long)segs * NB,
                                   counters, &flag, o);
}
