// Large single-matrix GEMV (KBLAS design): out = alpha * op(A) x + beta * y for ONE
// column-major m x n matrix.  Launched by batched/kblas/gemv.py.
//
// Grid: segments x parts blocks on gridDim.x.  A segment is NB consecutive
// outputs: a block row of A for the N kernel, a block column for the T kernel.
// The `parts` blocks of a segment (the paper's Y-bar) split its walk into
// contiguous shares of tiles and combine their partial sums through
// kblas_finish_segment (the last block to finish sums them in a fixed order).
#include "common.cuh"
#include "kblas.cuh"

// Shared arrays are raw bytes: complex<T> has a constructor, which __shared__ may not run.

// Launch flags (uniform over a launch).
#define KBLAS_CONJ 1    // op(A) conjugates the elements (trans 'C', or 'N' on a row-major A^H view)
#define KBLAS_READ_Y 2  // beta != 0: y is read; otherwise never touched

// out = alpha * A x + beta * y: block `seg` owns rows [seg*NB - shift, +NB) and walks
// right over its share of the column tiles; the row origin `shift` aligns every
// warp's reads to 128 bytes (see kblas.cuh).
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_gemv_n_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                    const T* __restrict__ x, long long incx, const T* y, long long incy,
                    T* out, long long inco, T alpha, T beta, int flags, int parts,
                    T* work, int* counters) {
  constexpr int L = NB / Q;
  __shared__ __align__(16) unsigned char scratch_bytes[Q * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  __shared__ int flag;
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const bdf::TileRange rows{m, shift}, cols{n, 0};
  const int segs = rows.count<NB>();
  const int seg = blockIdx.x % segs, part = blockIdx.x / segs;
  int t0, t1;
  bdf::split_share(cols.count<NB>(), parts, part, t0, t1);
  const bool conj = flags & KBLAS_CONJ;

  T acc = T(0);
  auto body = [&](int, const T (&a)[L], const T (&xv)[L]) {
#pragma unroll
    for (int l = 0; l < L; ++l) acc += bdf::conj_if(a[l], conj) * xv[l];
  };
  if (rows.edge<NB>(seg))
    bdf::kblas_walk<T, NB, Q, false, true>(A, lda, rows, cols, seg, t0, t1, x, incx, body);
  else
    bdf::kblas_walk<T, NB, Q, false, false>(A, lda, rows, cols, seg, t0, t1, x, incx, body);

  bdf::kblas_sum_over_q<T, NB, Q>(acc, scratch, red);
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_finish_segment<T, NB>(red, seg, rows.start<NB>(seg), m, part, parts, work,
                                   (long long)segs * NB, counters, &flag, o);
}

// out = alpha * A^T x + beta * y (A^H with KBLAS_CONJ): block `seg` owns columns
// [seg*NB, +NB) and walks down its share of the row tiles (row origin `shift`).
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_gemv_t_kernel(const T* __restrict__ A, long long lda, int m, int n, int shift,
                    const T* __restrict__ x, long long incx, const T* y, long long incy,
                    T* out, long long inco, T alpha, T beta, int flags, int parts,
                    T* work, int* counters) {
  constexpr int L = NB / Q;
  __shared__ __align__(16) unsigned char scratch_bytes[(NB / 32) * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  __shared__ int flag;
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const bdf::TileRange rows{m, shift}, cols{n, 0};
  const int segs = cols.count<NB>();
  const int seg = blockIdx.x % segs, part = blockIdx.x / segs;
  int t0, t1;
  bdf::split_share(rows.count<NB>(), parts, part, t0, t1);
  const bool conj = flags & KBLAS_CONJ;

  T acc[L];
#pragma unroll
  for (int l = 0; l < L; ++l) acc[l] = T(0);
  auto body = [&](int, const T (&a)[L], const T (&xv)[1]) {
#pragma unroll
    for (int l = 0; l < L; ++l) acc[l] += bdf::conj_if(a[l], conj) * xv[0];
  };
  if (cols.edge<NB>(seg))
    bdf::kblas_walk<T, NB, Q, true, true>(A, lda, rows, cols, seg, t0, t1, x, incx, body);
  else
    bdf::kblas_walk<T, NB, Q, true, false>(A, lda, rows, cols, seg, t0, t1, x, incx, body);

  bdf::kblas_sum_over_rows<T, NB, Q>(acc, scratch, red);
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_finish_segment<T, NB>(red, seg, cols.start<NB>(seg), n, part, parts, work,
                                   (long long)segs * NB, counters, &flag, o);
}
