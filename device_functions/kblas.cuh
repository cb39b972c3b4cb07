// kblas.cuh: the pieces of the large single-matrix GEMV/SYMV/HEMV kernels
// (batched/kblas/*.cu), after KBLAS (Abdelfattah, Keyes, Ltaief, TOMS 2016).
//
// A thread block of NB x Q threads works on NB x NB tiles of ONE column-major
// matrix.  Thread (tx, ty) = (threadIdx.x % NB, threadIdx.x / NB) owns row tx
// of a tile and its L = NB / Q consecutive columns ty*L .. ty*L + L - 1, so a
// warp (32 consecutive tx, one ty) reads 32 consecutive elements of a column.
//
// Index spaces.  Tiles are counted from an origin: moving tile t covers the
// indices [t*NB - origin, (t+1)*NB - origin).  The launchers set the row origin
// to the misalignment of the matrix's first element (in elements, modulo 128
// bytes), so that every warp of every tile reads an aligned 128-byte run even
// for a submatrix view A[i:, j:] at any offset (the paper's GEMV-OFFSET
// interface, without the extra arguments): rows before index 0 are masked,
// never read.
//
// Edge tiles (first tile with a non-zero origin, last tile of an irregular
// size) load through the checked path: masked elements become zeros in the
// registers (002's "virtual zero padding"), and nothing outside the matrix is
// read.  Interior tiles take the unchecked path; the walkers pick per tile.
#pragma once
#include "common.cuh"

namespace bdf {

// A load that bypasses L1: partials written by other blocks of the same
// kernel (after their __threadfence) are read from L2, never from a stale L1 line.
template <typename T> __device__ __forceinline__ T load_cg(const T* p) { return __ldcg(p); }
template <typename R> __device__ __forceinline__ complex<R> load_cg(const complex<R>* p) {
  const R* q = reinterpret_cast<const R*>(p);
  return complex<R>(__ldcg(q), __ldcg(q + 1));
}

// Device-scope atomic accumulation; complex as two real atomics (double
// atomicAdd exists from sm_60).
template <typename T> __device__ __forceinline__ void atomic_add(T* p, T v) { atomicAdd(p, v); }
template <typename R> __device__ __forceinline__ void atomic_add(complex<R>* p, complex<R> v) {
  R* q = reinterpret_cast<R*>(p);
  atomicAdd(q, v.real());
  atomicAdd(q + 1, v.imag());
}

// The diagonal of a Hermitian matrix is real: its imaginary part is never read (BLAS).
template <typename T> __device__ __forceinline__ T real_diagonal(T a) { return a; }
template <typename R> __device__ __forceinline__ complex<R> real_diagonal(complex<R> a) {
  return complex<R>(a.real(), R(0));
}

// The tiles a tile index counts from `origin` and whether tile t needs checks.
struct TileRange {
  int len;     // valid indices 0 .. len-1
  int origin;  // tile t starts at t*NB - origin
  template <int NB> __device__ __forceinline__ int start(int t) const { return t * NB - origin; }
  template <int NB> __device__ __forceinline__ bool edge(int t) const {
    const int s = start<NB>(t);
    return s < 0 || s + NB > len;
  }
  template <int NB> __device__ __forceinline__ int count() const { return (len + origin + NB - 1) / NB; }
};

// The contiguous share [lo, hi) of `work` tiles of part `p` of `parts`: the
// first work % parts shares get one more (the paper's w and s).
__device__ __forceinline__ void split_share(int work, int parts, int p, int& lo, int& hi) {
  const int base = work / parts, extra = work % parts;
  lo = p * base + min(p, extra);
  hi = lo + base + (p < extra ? 1 : 0);
}

// kblas_load_tile: the thread's part of tile t for kblas_walk (below): a[l] =
// A(i, j0 + l) and the x entries, zeros where masked.  CHECK_ROWS / CHECK_COLS
// select the bounds checks at compile time, so interior tiles load unchecked.
// (A template function rather than a generic lambda: NVRTC 13.0 crashes on a
// generic lambda that reads decltype(parameter)::value.)
template <typename T, int NB, int Q, bool VERTICAL, bool CHECK_ROWS, bool CHECK_COLS>
__device__ __forceinline__ void kblas_load_tile(const T* __restrict__ A, long long lda, TileRange rows,
                                                TileRange cols, int fixed, int t,
                                                const T* __restrict__ x, long long incx,
                                                T (&a)[NB / Q], T (&xv)[VERTICAL ? 1 : NB / Q]) {
  constexpr int L = NB / Q;
  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const int i = (VERTICAL ? rows.template start<NB>(t) : rows.template start<NB>(fixed)) + tx;
  const int j0 = (VERTICAL ? cols.template start<NB>(fixed) : cols.template start<NB>(t)) + ty * L;
  const bool row_ok = !CHECK_ROWS || (i >= 0 && i < rows.len);
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int j = j0 + l;
    const bool ok = row_ok && (!CHECK_COLS || (j >= 0 && j < cols.len));
    a[l] = ok ? A[(long long)j * lda + i] : T(0);
  }
  if (VERTICAL) {
    xv[0] = row_ok ? x[(long long)i * incx] : T(0);
  } else {
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int j = j0 + l;
      xv[l] = (!CHECK_COLS || (j >= 0 && j < cols.len)) ? x[(long long)j * incx] : T(0);
    }
  }
}

// kblas_walk: stream the tiles [t0, t1) of one block row (VERTICAL = false:
// tiles move right along the columns) or one block column (VERTICAL = true:
// tiles move down the rows) through registers, double buffered: the loads of
// tile t+1 are issued before tile t is used.  body(t, a, xv) receives the
// thread's L elements a[l] = A(i, j0 + l) of tile t (zeros where masked) and
// the entries of the moving vector x it needs: xv[l] = x[j0 + l] (rows walk)
// or xv[0] = x[i] (columns walk), zeros where masked.
// Threads:  the whole NB x Q block, all with the same arguments.
// Shared:   none (body may use its own).
// Sync:     none itself; t0, t1 uniform, so body may hold __syncthreads.
// Memory:   A, x read-only; only elements inside rows [0, rows.len) x cols
//           [0, cols.len) are read.  64-bit offsets.
// Failure:  none; NaN/Inf in the tiles read propagate.
template <typename T, int NB, int Q, bool VERTICAL, bool CHECK_FIXED, class Body>
__device__ __forceinline__ void kblas_walk(const T* __restrict__ A, long long lda, TileRange rows,
                                           TileRange cols, int fixed, int t0, int t1,
                                           const T* __restrict__ x, long long incx, Body body) {
  constexpr int L = NB / Q;
  constexpr int XN = VERTICAL ? 1 : L;
  const TileRange moving = VERTICAL ? rows : cols;
  // The moving dimension is checked only on its edge tiles; the fixed one as the caller says.
  auto load_tile = [&](int t, T (&a)[L], T (&xv)[XN]) {
    if (moving.template edge<NB>(t)) {
      if (VERTICAL)
        kblas_load_tile<T, NB, Q, VERTICAL, true, CHECK_FIXED>(A, lda, rows, cols, fixed, t, x, incx, a, xv);
      else
        kblas_load_tile<T, NB, Q, VERTICAL, CHECK_FIXED, true>(A, lda, rows, cols, fixed, t, x, incx, a, xv);
    } else {
      if (VERTICAL)
        kblas_load_tile<T, NB, Q, VERTICAL, false, CHECK_FIXED>(A, lda, rows, cols, fixed, t, x, incx, a, xv);
      else
        kblas_load_tile<T, NB, Q, VERTICAL, CHECK_FIXED, false>(A, lda, rows, cols, fixed, t, x, incx, a, xv);
    }
  };

  if (t0 >= t1) return;
  T a[L], xv[XN], an[L], xn[XN];
  load_tile(t0, a, xv);
  for (int t = t0; t < t1; ++t) {
    if (t + 1 < t1) load_tile(t + 1, an, xn);
    body(t, a, xv);
#pragma unroll
    for (int l = 0; l < L; ++l) a[l] = an[l];
#pragma unroll
    for (int l = 0; l < XN; ++l) xv[l] = xn[l];
  }
}

// kblas_sum_over_q: red[r] = sum over ty of v(tx = r, ty) for r < NB.
// Threads:  the NB x Q block; every thread passes its v.
// Shared:   `scratch` with Q * NB elements of T, and `red` with NB; scratch
//           undefined on exit, red holds the sums.
// Sync:     starts with a barrier (scratch may still be read by the caller);
//           ends after a barrier, so every thread may read red.
template <typename T, int NB, int Q>
__device__ __forceinline__ void kblas_sum_over_q(T v, T* scratch, T* red) {
  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  __syncthreads();
  scratch[ty * NB + tx] = v;
  __syncthreads();
  if (threadIdx.x < NB) {
    T s = scratch[threadIdx.x];
#pragma unroll
    for (int q = 1; q < Q; ++q) s += scratch[q * NB + threadIdx.x];
    red[threadIdx.x] = s;
  }
  __syncthreads();
}

// kblas_sum_over_rows: red[c] = sum over tx of acc[l] of thread (tx, ty) with
// c = ty*L + l: the column sums of a walk down a block column.
// Threads:  the NB x Q block (NB a multiple of 32, so a warp has one ty).
// Shared:   `scratch` with (NB / 32) * NB elements of T, `red` with NB.
// Sync:     starts with a barrier; ends after a barrier.
template <typename T, int NB, int Q>
__device__ __forceinline__ void kblas_sum_over_rows(T (&acc)[NB / Q], T* scratch, T* red) {
  constexpr int L = NB / Q, W = NB / 32;
  static_assert(NB % 32 == 0, "NB must be a multiple of the warp size");
  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  __syncthreads();
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const T s = butterfly_sum<1, 32>(acc[l], 0xffffffffu);
    if (tx % 32 == 0) scratch[(tx / 32) * NB + ty * L + l] = s;
  }
  __syncthreads();
  if (threadIdx.x < NB) {
    T s = scratch[threadIdx.x];
#pragma unroll
    for (int w = 1; w < W; ++w) s += scratch[w * NB + threadIdx.x];
    red[threadIdx.x] = s;
  }
  __syncthreads();
}

// Where a segment of the output goes: out[i] = alpha * r_i + beta * y[i].
template <typename T> struct KblasOutput {
  T* out; long long inco;
  const T* y; long long incy;
  T alpha, beta;
  bool read_y;  // beta != 0; y never touched otherwise
  __device__ __forceinline__ void store(int i, T r) const {
    T v = alpha * r;
    if (read_y) v += beta * y[(long long)i * incy];
    out[(long long)i * inco] = v;
  }
};

// kblas_finish_segment: the NB results red[0 .. NB) of segment `seg` (output
// indices first .. first + NB - 1, those in [0, len) are real) computed by
// part `part` of `parts` blocks.  One part: stored at once.  Several: each
// writes its partials to work[part][seg*NB ..], and the last to arrive (a
// ticket on counters[seg]) sums all parts in order 0 .. parts-1 and stores:
// a deterministic second pass inside the same launch, no pre-scaled output,
// and y read only there.  The last block resets its counter to 0 for the
// next launch on the stream.
// Threads:  the whole block, with the same arguments.
// Shared:   red (NB elements, read), `flag` one int.
// Sync:     ends after a barrier (red may be rewritten afterwards).
// Memory:   work: parts x (segments * NB) elements of T, no initial value;
//           counters: one int per segment, 0 on entry, 0 again after the launch.
template <typename T, int NB>
__device__ void kblas_finish_segment(const T* red, int seg, int first, int len, int part, int parts,
                                     T* work, long long ldw, int* counters, int* flag,
                                     const KblasOutput<T>& o) {
  const int r = threadIdx.x;
  if (parts == 1) {
    if (r < NB && first + r >= 0 && first + r < len) o.store(first + r, red[r]);
    __syncthreads();
    return;
  }
  if (r < NB) work[part * ldw + (long long)seg * NB + r] = red[r];
  __threadfence();  // the partials are visible device-wide before the ticket
  __syncthreads();
  if (r == 0) {
    const int ticket = atomicAdd(counters + seg, 1);
    *flag = ticket == parts - 1;
    if (*flag) counters[seg] = 0;
  }
  __syncthreads();
  if (*flag && r < NB && first + r >= 0 && first + r < len) {
    T s = T(0);
    for (int p = 0; p < parts; ++p) s += load_cg(work + p * ldw + (long long)seg * NB + r);
    o.store(first + r, s);
  }
  __syncthreads();
}

}  // namespace bdf
