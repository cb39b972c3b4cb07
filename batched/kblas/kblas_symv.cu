// Large single-matrix SYMV / HEMV (KBLAS design): out = alpha * A x + beta * y for
// ONE n x n symmetric (Hermitian) matrix of which only one triangle is read.
// Launched by batched/kblas/symv.py as two kernels on one stream:
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
// Both triangles use the same code: a stored block at (R, C) contributes
// B x_C to segment R and B^H x_R to segment C whichever side it is on.
// Rows and columns share one index origin (the alignment shift of kblas.cuh)
// so that diagonal blocks stay square.
#include "common.cuh"
#include "kblas.cuh"

// Launch flags (uniform over a launch).
#define KBLAS_CONJ_A 1     // every stored element is read conjugated (HEMV on a row-major view)
#define KBLAS_READ_Y 2     // beta != 0: y is read; otherwise never touched
#define KBLAS_LOWER 4      // the lower triangle is stored (of the column-major view)
#define KBLAS_HERMITIAN 8  // mirror with conjugation; the diagonal is real

// Shared arrays are raw bytes: complex<T> has a constructor, which __shared__ may not run.

template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_diag_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                       const T* __restrict__ x, long long incx, const T* y, long long incy,
                       T* out, long long inco, T alpha, T beta) {
  constexpr int L = NB / Q, LDS = NB + 1;  // +1: a column and a row of the tile hit distinct banks
  static_assert((NB * LDS + 2 * NB + Q * NB) * sizeof(T) <= 48 * 1024,
                "the diagonal tile must fit the static shared-memory limit");
  __shared__ __align__(16) unsigned char tile_bytes[NB * LDS * sizeof(T)];
  __shared__ __align__(16) unsigned char xs_bytes[NB * sizeof(T)];
  __shared__ __align__(16) unsigned char scratch_bytes[Q * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  T* tile = reinterpret_cast<T*>(tile_bytes);
  T* xs = reinterpret_cast<T*>(xs_bytes);
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const bool lower = flags & KBLAS_LOWER, herm = flags & KBLAS_HERMITIAN;
  const bool conj_a = flags & KBLAS_CONJ_A;
  const bdf::TileRange idx{n, shift};
  const int base = idx.start<NB>(blockIdx.x);
  const bool row_ok = base + tx >= 0 && base + tx < n;

  // tile(r, c) = A(base + r, base + c) inside the stored triangle, else 0 (not read).
  for (int c = ty; c < NB; c += Q) {
    const int j = base + c;
    const bool stored = lower ? tx >= c : tx <= c;
    const bool ok = stored && row_ok && j >= 0 && j < n;
    tile[c * LDS + tx] = ok ? bdf::conj_if(A[(long long)j * lda + base + tx], conj_a) : T(0);
  }
  const int r = threadIdx.x;
  if (r < NB) xs[r] = (base + r >= 0 && base + r < n) ? x[(long long)(base + r) * incx] : T(0);
  __syncthreads();

  // Row tx of the mirrored block times x, over this thread's L columns.
  T s = T(0);
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int c = ty * L + l;
    T e;
    if (c == tx)
      e = herm ? bdf::real_diagonal(tile[c * LDS + tx]) : tile[c * LDS + tx];
    else if (lower ? tx > c : tx < c)
      e = tile[c * LDS + tx];
    else
      e = bdf::conj_if(tile[tx * LDS + c], herm);
    s += e * xs[c];
  }
  bdf::kblas_sum_over_q<T, NB, Q>(s, scratch, red);
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  if (r < NB && base + r >= 0 && base + r < n) o.store(base + r, red[r]);
}

template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_offdiag_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                          const T* __restrict__ x, long long incx, T* out, long long inco,
                          T alpha, int parts) {
  constexpr int L = NB / Q;
  __shared__ __align__(16) unsigned char partial_bytes[2 * Q * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char scratch_bytes[(NB / 32) * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  T* partial = reinterpret_cast<T*>(partial_bytes);
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const bool lower = flags & KBLAS_LOWER, herm = flags & KBLAS_HERMITIAN;
  const bool conj_n = flags & KBLAS_CONJ_A;
  const bool conj_t = herm ? !conj_n : conj_n;
  const bdf::TileRange idx{n, shift};
  const int blocks = idx.count<NB>();
  // Longest block columns first (lower: C = 0 walks blocks-1 tiles; upper: the
  // last column does), so the scheduler fills the tail with short ones.
  const int rank = blockIdx.x / parts, part = blockIdx.x % parts;
  const int C = lower ? rank : blocks - 1 - rank;
  const int first = lower ? C + 1 : 0, last = lower ? blocks : C;
  int lo, hi;
  bdf::split_share(last - first, parts, part, lo, hi);
  if (lo >= hi) return;  // uniform over the block: no barrier is skipped by a part of it

  const int col0 = idx.start<NB>(C);
  T xc[L];  // x over this thread's columns of block column C, for every tile's B x_C
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int j = col0 + ty * L + l;
    xc[l] = (j >= 0 && j < n) ? x[(long long)j * incx] : T(0);
  }
  T acc[L];
#pragma unroll
  for (int l = 0; l < L; ++l) acc[l] = T(0);

  int step = 0;
  auto body = [&](int t, const T (&a)[L], const T (&xv)[1]) {
    T pn = T(0);
#pragma unroll
    for (int l = 0; l < L; ++l) {
      pn += bdf::conj_if(a[l], conj_n) * xc[l];
      acc[l] += bdf::conj_if(a[l], conj_t) * xv[0];
    }
    // Two buffers: the barrier of the next tile orders this tile's reads before
    // the tile after it overwrites the buffer, so one barrier per tile suffices.
    T* buf = partial + (step & 1) * Q * NB;
    buf[ty * NB + tx] = pn;
    __syncthreads();
    if (ty == step % Q) {  // the thread columns take turns at the reduction and its atomics
      T s = buf[tx];
#pragma unroll
      for (int q = 1; q < Q; ++q) s += buf[q * NB + tx];
      const int i = idx.start<NB>(t) + tx;
      if (i >= 0 && i < n) bdf::atomic_add(out + (long long)i * inco, alpha * s);
    }
    ++step;
  };
  if (idx.edge<NB>(C))
    bdf::kblas_walk<T, NB, Q, true, true>(A, lda, idx, idx, C, first + lo, first + hi, x, incx, body);
  else
    bdf::kblas_walk<T, NB, Q, true, false>(A, lda, idx, idx, C, first + lo, first + hi, x, incx, body);

  bdf::kblas_sum_over_rows<T, NB, Q>(acc, scratch, red);
  const int r = threadIdx.x;
  if (r < NB && col0 + r >= 0 && col0 + r < n)
    bdf::atomic_add(out + (long long)(col0 + r) * inco, alpha * red[r]);
}
