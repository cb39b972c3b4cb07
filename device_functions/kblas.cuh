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
// never read.  (The multi-GPU SYMV's local buffers are aligned: origin 0.)
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

// kblas_load_tile: the thread's part of tile t of block column `fixed` for
// kblas_walk (below): a[l] = A(i, j0 + l) and xv = x[i], zeros where masked.
// CHECK_ROWS / CHECK_COLS select the bounds checks at compile time, so interior
// tiles load unchecked.  (A template function rather than a generic lambda:
// NVRTC 13.0 crashes on a generic lambda that reads decltype(parameter)::value.)
template <typename T, int NB, int Q, bool CHECK_ROWS, bool CHECK_COLS>
__device__ __forceinline__ void kblas_load_tile(const T* __restrict__ A, long long lda, TileRange rows,
                                                TileRange cols, int fixed, int t,
                                                const T* __restrict__ x, long long incx,
                                                T (&a)[NB / Q], T& xv) {
  constexpr int L = NB / Q;
  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const int i = rows.template start<NB>(t) + tx;
  const int j0 = cols.template start<NB>(fixed) + ty * L;
  const bool row_ok = !CHECK_ROWS || (i >= 0 && i < rows.len);
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int j = j0 + l;
    const bool ok = row_ok && (!CHECK_COLS || (j >= 0 && j < cols.len));
    a[l] = ok ? A[(long long)j * lda + i] : T(0);
  }
  xv = row_ok ? x[(long long)i * incx] : T(0);
}

// kblas_walk: stream the square tiles [t0, t1) of block column `fixed` (tiles
// moving down the rows; SYMV/HEMV's off-diagonal walk) through registers, double
// buffered: the loads of tile t+1 are issued before tile t is used.  body(t, a,
// xv) receives the thread's L elements a[l] = A(i, j0 + l) of tile t (zeros where
// masked) and xv = x[i] (zero where masked).
// Threads:  the whole NB x Q block, all with the same arguments.
// Shared:   none (body may use its own).
// Sync:     none itself; t0, t1 uniform, so body may hold __syncthreads.
// Memory:   A, x read-only; only elements inside rows [0, rows.len) x cols
//           [0, cols.len) are read.  64-bit offsets.
// Failure:  none; NaN/Inf in the tiles read propagate.
template <typename T, int NB, int Q, bool CHECK_COLS, class Body>
__device__ __forceinline__ void kblas_walk(const T* __restrict__ A, long long lda, TileRange rows,
                                           TileRange cols, int fixed, int t0, int t1,
                                           const T* __restrict__ x, long long incx, Body body) {
  constexpr int L = NB / Q;
  // Rows are checked only on their edge tiles; the columns as the caller says.
  auto load_tile = [&](int t, T (&a)[L], T& xv) {
    if (rows.template edge<NB>(t))
      kblas_load_tile<T, NB, Q, true, CHECK_COLS>(A, lda, rows, cols, fixed, t, x, incx, a, xv);
    else
      kblas_load_tile<T, NB, Q, false, CHECK_COLS>(A, lda, rows, cols, fixed, t, x, incx, a, xv);
  };

  if (t0 >= t1) return;
  T a[L], an[L], xv, xn;
  load_tile(t0, a, xv);
  for (int t = t0; t < t1; ++t) {
    if (t + 1 < t1) load_tile(t + 1, an, xn);
    body(t, a, xv);
#pragma unroll
    for (int l = 0; l < L; ++l) a[l] = an[l];
    xv = xn;
  }
}

// --- GEMV: tall tiles ------------------------------------------------------------------
//
// kblas_walk's square tiles give a warp 32 rows (256 bytes of double) of a column per
// load; walking down, a column is then read in 256-byte pieces far apart in time, and
// the H100 streamed that 6-8 % slower than cuBLAS's GEMV-T (scratch probes: a warp
// reading 1 KiB of a column per step reached cuBLAS's 3.0 TB/s, 256 bytes 2.8-2.9).
// GEMV therefore has a shape of its own (SYMV keeps the square tiles, which it reads
// as A and A^T): of the NB x Q threads, W = NB Q / 32 warps; a tile is R = 32 V rows
// by NB columns, warp w owns its C = NB / W = 32 / Q consecutive columns from w C,
// and lane l the V = min(32 bytes / sizeof(T), Q) consecutive rows l V .. l V + V - 1:
// a warp reads 32 V consecutive elements of each of its columns per tile (1 KiB for
// double).  A thread holds C V <= 32 elements of A per tile.  GEMV-T's segment is a
// block column of NB columns walking down the row tiles; GEMV-N's a row tile of R
// rows walking right over the column tiles.
template <typename T, int NB, int Q> struct KblasTallShape {
  static constexpr int W = NB * Q / 32;
  static constexpr int C = NB / W;
  static constexpr int V = (32 / int(sizeof(T))) < Q ? 32 / int(sizeof(T)) : Q;
  static constexpr int R = 32 * V;
  // Elements per vector load (at most 16 bytes).
  static constexpr int VW = V < 16 / int(sizeof(T)) ? V : (16 / int(sizeof(T)) > 0 ? 16 / int(sizeof(T)) : 1);
  static_assert(NB * Q % 32 == 0 && NB % W == 0, "a warp owns whole columns");
  // GEMV-N sums and stores a row tile with a thread per row (kblas_sum_slices,
  // kblas_finish_segment): e.g. 16 x 4 threads would leave half of R = 128 double rows out.
  static_assert(NB * Q >= R, "a thread for each row of a tile");
};

// N elements p[0 .. N) in one load of N * sizeof(T) bytes (4, 8 or 16); p aligned to it.
template <int BYTES> struct RawBytes;
template <> struct RawBytes<4> { using type = int; };
template <> struct RawBytes<8> { using type = int2; };
template <> struct RawBytes<16> { using type = int4; };
template <typename T, int N> __device__ __forceinline__ void load_vector(const T* __restrict__ p, T* dst) {
  using Raw = typename RawBytes<N * int(sizeof(T))>::type;
  const Raw raw = __ldg(reinterpret_cast<const Raw*>(p));
  memcpy(dst, &raw, sizeof(Raw));
}

// kblas_tall_load: the lane's part of one tall tile, a[c][k] = A(i0 + k, column c)
// for its V rows i0 .. i0 + V - 1 (i0 = tile start + lane V) and the C columns
// starting at element offsets col[c]; zeros for rows outside [0, len) and for
// columns whose bit in `live` is clear, where CHECK (nothing outside is read).
// Without CHECK every element is read: 16 bytes at a time when `vec` (every
// column's element -origin 16-byte aligned and lda * sizeof(T) a multiple of 16).
template <typename T, int NB, int Q, bool CHECK>
__device__ __forceinline__ void kblas_tall_load(const T* __restrict__ A,
                                                const long long (&col)[KblasTallShape<T, NB, Q>::C],
                                                unsigned live, int i0, int len, bool vec,
                                                T (&a)[KblasTallShape<T, NB, Q>::C][KblasTallShape<T, NB, Q>::V]) {
  using S = KblasTallShape<T, NB, Q>;
  constexpr int C = S::C, V = S::V, VW = S::VW;
  if (CHECK) {
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int i = i0 + k;
        a[c][k] = ((live >> c) & 1u) && i >= 0 && i < len ? A[col[c] + i] : T(0);
      }
  } else if (vec) {
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < V; k += VW) load_vector<T, VW>(A + col[c] + i0 + k, &a[c][k]);
  } else {
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) a[c][k] = A[col[c] + i0 + k];
  }
}

// kblas_tall_walk: GEMV-T's walk down a block column.  The thread's partial sums
// acc[c] += sum_k op(A)(i_k, j_c) x[i_k] over the row tiles [t0, t1) (tiles of R rows
// counted from rows.origin) for the warp's columns j_c at element offsets col[c],
// and the lane's rows i_k of each tile.  A column past n is the caller's to clamp
// to a real one (its sum must not be stored).  One register buffer: a tile's loads
// are all issued before its first use, and the other resident blocks overlap
// theirs (double buffering as in kblas_walk held 194 registers in double, two
// blocks an SM, against 146 and three, and measured the same or up to 4.5 %
// slower on the H100).
// Threads:  every thread of the block, each with its warp's columns; t0, t1 uniform.
// Shared:   none.  Sync: none.
// Memory:   A, x read-only, 64-bit offsets; only rows [0, rows.len) are read.
// Failure:  none; NaN/Inf in the elements read propagate.
template <typename T, int NB, int Q>
__device__ __forceinline__ void kblas_tall_walk(const T* __restrict__ A, TileRange rows,
                                                const long long (&col)[KblasTallShape<T, NB, Q>::C],
                                                int t0, int t1, const T* __restrict__ x, long long incx,
                                                bool vec, bool conj, T (&acc)[KblasTallShape<T, NB, Q>::C]) {
  using S = KblasTallShape<T, NB, Q>;
  constexpr int C = S::C, V = S::V, R = S::R;
  const int lane = threadIdx.x % 32;
  for (int t = t0; t < t1; ++t) {
    const int i0 = rows.template start<R>(t) + lane * V;
    T a[C][V], xv[V];
    if (rows.template edge<R>(t)) {
      kblas_tall_load<T, NB, Q, true>(A, col, ~0u, i0, rows.len, vec, a);
#pragma unroll
      for (int k = 0; k < V; ++k) xv[k] = i0 + k >= 0 && i0 + k < rows.len ? x[(long long)(i0 + k) * incx] : T(0);
    } else {
      kblas_tall_load<T, NB, Q, false>(A, col, ~0u, i0, rows.len, vec, a);
#pragma unroll
      for (int k = 0; k < V; ++k) xv[k] = x[(long long)(i0 + k) * incx];
    }
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) acc[c] += conj_if(a[c][k], conj) * xv[k];
  }
}

// kblas_tall_walk_right: GEMV-N's walk along a block row in the same tall tiles.
// The segment is the R rows of row tile `seg` (the lane's V of them from
// i0 = rows.start(seg) + lane V); column tile t holds the NB columns t NB .. t NB +
// NB - 1 (past n masked), warp w the C of them from t NB + w C.  The thread's
// partial sums acc[k] += sum_c op(A)(i_k, j_c) x[j_c] over the column tiles
// [t0, t1).  Rows outside [0, rows.len) and columns past n read nothing and add
// nothing.
// Threads, Shared, Sync, Failure: as kblas_tall_walk.
template <typename T, int NB, int Q, bool CHECK_ROWS>
__device__ __forceinline__ void kblas_tall_walk_right(const T* __restrict__ A, long long lda, TileRange rows,
                                                      int n, int seg, int t0, int t1,
                                                      const T* __restrict__ x, long long incx, bool vec,
                                                      bool conj, T (&acc)[KblasTallShape<T, NB, Q>::V]) {
  using S = KblasTallShape<T, NB, Q>;
  constexpr int C = S::C, V = S::V, R = S::R;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int i0 = rows.template start<R>(seg) + lane * V;
  for (int t = t0; t < t1; ++t) {
    const int j0 = t * NB + warp * C;
    long long col[C];
    T a[C][V], xc[C];
#pragma unroll
    for (int c = 0; c < C; ++c) col[c] = (long long)min(j0 + c, n - 1) * lda;
    if (CHECK_ROWS || j0 + C > n) {
      unsigned live = 0;
#pragma unroll
      for (int c = 0; c < C; ++c) live |= (j0 + c < n ? 1u : 0u) << c;
      kblas_tall_load<T, NB, Q, true>(A, col, live, i0, rows.len, vec, a);
#pragma unroll
      for (int c = 0; c < C; ++c) xc[c] = j0 + c < n ? x[(long long)(j0 + c) * incx] : T(0);
    } else {
      kblas_tall_load<T, NB, Q, false>(A, col, ~0u, i0, rows.len, vec, a);
#pragma unroll
      for (int c = 0; c < C; ++c) xc[c] = x[(long long)(j0 + c) * incx];
    }
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += conj_if(a[c][k], conj) * xc[c];
  }
}

// kblas_sum_slices: red[r] = sum over s < SLICES of scratch[s * LEN + r], r < LEN
// (the slices added in order).
// Threads:  the block, at least LEN threads.
// Shared:   `scratch` (SLICES * LEN elements of T, read), `red` (LEN, written).
// Sync:     starts with a barrier (the callers' stores to scratch are then
//           visible); ends after a barrier, so every thread may read red.
template <typename T, int LEN, int SLICES>
__device__ __forceinline__ void kblas_sum_slices(const T* scratch, T* red) {
  __syncthreads();
  if (threadIdx.x < LEN) {
    T s = scratch[threadIdx.x];
#pragma unroll
    for (int q = 1; q < SLICES; ++q) s += scratch[q * LEN + threadIdx.x];
    red[threadIdx.x] = s;
  }
  __syncthreads();
}

// kblas_sum_over_q: red[r] = sum over ty of v(tx = r, ty) for r < NB.
// Threads:  the NB x Q block; every thread passes its v.
// Shared:   `scratch` with Q * NB elements of T, and `red` with NB; scratch
//           undefined on exit, red holds the sums.
// Sync:     starts with a barrier (scratch may still be read by the caller);
//           ends after a barrier, so every thread may read red.
template <typename T, int NB, int Q>
__device__ __forceinline__ void kblas_sum_over_q(T v, T* scratch, T* red) {
  __syncthreads();
  scratch[threadIdx.x] = v;  // slice ty, row tx: threadIdx.x = ty * NB + tx
  kblas_sum_slices<T, NB, Q>(scratch, red);
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
  kblas_sum_slices<T, NB, W>(scratch, red);
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
  // out[i] += alpha * r, atomically (after a store() to i earlier in stream order).
  __device__ __forceinline__ void add(int i, T r) const { atomic_add(out + (long long)i * inco, alpha * r); }
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

// --- GEMV: one segment's whole work, for the single-matrix kernels and the batched tall setting ---
//
// kblas_gemv_n_segment / kblas_gemv_t_segment: part `part` of `parts` of one
// segment of out = alpha * op(A) x + beta * y for a column-major m x n matrix
// (A: op = A or conj(A) by `conj`; T: op = A^T or A^H), walked in tall tiles
// (KblasTallShape) with row origin `shift`, then combined and stored by
// kblas_finish_segment.  N: segment `seg` is row tile seg (R rows) walking right
// over its share of the NB-column tiles; T: block column seg (NB columns)
// walking down its share of the row tiles.  batched/kblas/kblas_gemv.cu runs one
// matrix with several parts a segment; batched/gemv.cu a batch, one part each.
// Threads:  the whole NB x Q block, with the same arguments.
// Shared:   `sh` (the kernel's __shared__ KblasGemvShared); undefined on exit.
// Sync:     ends after a barrier, so a block may run the next segment at once.
// Memory:   A, x read-only, only inside the matrix; y read only when o.read_y;
//           work / counters as kblas_finish_segment (unused when parts == 1).
// Failure:  none; NaN/Inf in the elements read propagate.
template <typename T, int NB, int Q> struct KblasGemvShared {
  using S = KblasTallShape<T, NB, Q>;
  // N: the warps' row partials (W slices of R) and their sum; T: the NB column sums.
  alignas(16) unsigned char scratch[S::W * S::R * sizeof(T)];
  alignas(16) unsigned char red[(S::R > NB ? S::R : NB) * sizeof(T)];
  int flag;
};

// Whether the tall tiles of a column-major matrix at `A` (row origin `shift`) may
// load 16 bytes at a time: every column's element -shift 16-byte aligned.
template <typename T>
__device__ __forceinline__ bool kblas_vector_loads(const T* A, long long lda, int shift) {
  return (reinterpret_cast<unsigned long long>(A - shift) % 16) == 0 && (lda * (long long)sizeof(T)) % 16 == 0;
}

// The row origin that aligns every warp's reads of A's columns to 128 bytes (0 when
// A is not aligned to its element size, which only a reinterpreted buffer can be).
template <typename T> __device__ __forceinline__ int kblas_row_shift(const T* A) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(A);
  return a % sizeof(T) == 0 ? int((a % 128) / sizeof(T)) : 0;
}

template <typename T, int NB, int Q>
__device__ __forceinline__ void kblas_gemv_n_segment(KblasGemvShared<T, NB, Q>& sh, const T* __restrict__ A,
                                                     long long lda, int m, int n, int shift,
                                                     const T* __restrict__ x, long long incx, bool vec, bool conj,
                                                     int seg, int part, int parts, T* work, int* counters,
                                                     const KblasOutput<T>& o) {
  using S = KblasTallShape<T, NB, Q>;
  constexpr int V = S::V, R = S::R, W = S::W;
  T* scratch = reinterpret_cast<T*>(sh.scratch);
  T* red = reinterpret_cast<T*>(sh.red);
  const TileRange rows{m, shift};
  int t0, t1;
  split_share(TileRange{n, 0}.count<NB>(), parts, part, t0, t1);
  T acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = T(0);
  if (rows.edge<R>(seg))
    kblas_tall_walk_right<T, NB, Q, true>(A, lda, rows, n, seg, t0, t1, x, incx, vec, conj, acc);
  else
    kblas_tall_walk_right<T, NB, Q, false>(A, lda, rows, n, seg, t0, t1, x, incx, vec, conj, acc);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < V; ++k) scratch[warp * R + lane * V + k] = acc[k];
  kblas_sum_slices<T, R, W>(scratch, red);
  kblas_finish_segment<T, R>(red, seg, rows.start<R>(seg), m, part, parts, work,
                             (long long)rows.count<R>() * R, counters, &sh.flag, o);
}

template <typename T, int NB, int Q>
__device__ __forceinline__ void kblas_gemv_t_segment(KblasGemvShared<T, NB, Q>& sh, const T* __restrict__ A,
                                                     long long lda, int m, int n, int shift,
                                                     const T* __restrict__ x, long long incx, bool vec, bool conj,
                                                     int seg, int part, int parts, T* work, int* counters,
                                                     const KblasOutput<T>& o) {
  using S = KblasTallShape<T, NB, Q>;
  constexpr int C = S::C;
  T* red = reinterpret_cast<T*>(sh.red);
  const TileRange rows{m, shift};
  int t0, t1;
  split_share(rows.count<S::R>(), parts, part, t0, t1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col0 = seg * NB + warp * C;
  long long col_offset[C];
#pragma unroll
  for (int c = 0; c < C; ++c) col_offset[c] = (long long)min(col0 + c, n - 1) * lda;  // past n: never stored
  T acc[C];
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = T(0);
  kblas_tall_walk<T, NB, Q>(A, rows, col_offset, t0, t1, x, incx, vec, conj, acc);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const T s = butterfly_sum<1, 32>(acc[c], 0xffffffffu);
    if (lane == 0) red[warp * C + c] = s;
  }
  __syncthreads();
  kblas_finish_segment<T, NB>(red, seg, seg * NB, n, part, parts, work,
                              (long long)TileRange{n, 0}.count<NB>() * NB, counters, &sh.flag, o);
}

// --- GEMV-N in one pass, a block per few rows (short matrices) ---
//
// kblas_gemv_n_rows: block `blk` owns the ROWS = P * VW rows r0 .. r0 + ROWS - 1
// (r0 = blk * ROWS - shift; VW = 16 bytes of elements), and its THREADS / P column
// lanes take the columns in turn: thread t reads the VW rows from r0 + (t % P) VW of
// column lane t / P's columns, one 16-byte load each when `vec` (the launcher's
// KBLAS_VEC: every column's element -shift 16-byte aligned), element by element
// otherwise and on the first and last blocks (masked: nothing outside [0, m) is read),
// U columns in flight a thread.  The column lanes' row sums meet by shuffles within
// a warp and then in shared memory, in a fixed order, and are stored at once: no
// partials and no second pass, which is what the tall tiles' parts cost a short
// matrix (DGEMV N 1024: every tall setting and parts count 6.7-7.2 us on the H200).
// Threads:  the whole block (THREADS a multiple of 32), with the same arguments.
// Shared:   `scratch`, THREADS / 32 * ROWS elements of T; undefined on exit.
// Sync:     one barrier (every thread reaches it).
// Memory:   A, x read-only, 64-bit offsets; y only when o.read_y.
// Failure:  none; NaN/Inf in the elements read propagate.
template <typename T, int P, int THREADS> struct KblasRowsShape {
  static constexpr int VW = int(sizeof(T)) < 16 ? 16 / int(sizeof(T)) : 1;
  static constexpr int ROWS = P * VW;
  static constexpr int LANES = THREADS / P;
  static constexpr int WARPS = THREADS / 32;
  static_assert(32 % P == 0 && THREADS % 32 == 0 && THREADS >= ROWS, "whole pieces a warp, a thread a row");
};

// kblas_rows_accumulate: acc[k] += op(A(i0 + k, j)) x_j over this thread's columns j of
// [jb, je) (jb + t / P, then every LANES), with the loads described above; rows
// outside [0, m) read as zeros where `edge`.
template <typename T, int P, int THREADS, int U>
__device__ __forceinline__ void kblas_rows_accumulate(T (&acc)[KblasRowsShape<T, P, THREADS>::VW],
                                                      const T* __restrict__ A, long long lda, int m, int jb, int je,
                                                      int i0, bool edge, const T* __restrict__ x, long long incx,
                                                      bool vec, bool conj) {
  using S = KblasRowsShape<T, P, THREADS>;
  constexpr int VW = S::VW, LANES = S::LANES;
  const int n = je;
  for (int j0 = jb + int(threadIdx.x) / P; j0 < n; j0 += U * LANES) {  // columns j0, j0 + LANES, ...
    T a[U][VW], xv[U];
    if (vec && !edge && j0 + (U - 1) * LANES < n) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long j = j0 + u * LANES;
        load_vector<T, VW>(A + j * lda + i0, a[u]);
        xv[u] = x[j * incx];
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const long long j = j0 + u * LANES;
        const bool live = j < n;
        xv[u] = live ? x[j * incx] : T(0);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const int i = i0 + k;
          a[u][k] = live && (!edge || (i >= 0 && i < m)) ? A[j * lda + i] : T(0);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < VW; ++k) acc[k] += conj_if(a[u][k], conj) * xv[u];
  }
}

// The column lanes' row sums of acc, met by shuffles within a warp and then in shared
// memory in a fixed order: the row r0 + t sum for thread t < ROWS (others: zero).
// Shared: scratch, WARPS * ROWS elements.  Sync: one barrier.
template <typename T, int P, int THREADS>
__device__ __forceinline__ T kblas_rows_sum(T (&acc)[KblasRowsShape<T, P, THREADS>::VW], T* scratch) {
  using S = KblasRowsShape<T, P, THREADS>;
  constexpr int VW = S::VW, ROWS = S::ROWS;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
#pragma unroll
  for (int k = 0; k < VW; ++k) acc[k] = butterfly_sum<P, 32 / P>(acc[k], 0xffffffffu);
  if (lane < P) {
#pragma unroll
    for (int k = 0; k < VW; ++k) scratch[warp * ROWS + lane * VW + k] = acc[k];
  }
  __syncthreads();
  T s = T(0);
  if (t < ROWS) {
    s = scratch[t];
#pragma unroll
    for (int w = 1; w < S::WARPS; ++w) s += scratch[w * ROWS + t];
  }
  return s;
}

template <typename T, int P, int THREADS, int U>
__device__ __forceinline__ void kblas_gemv_n_rows(T* scratch, const T* __restrict__ A, long long lda, int m, int n,
                                                  int shift, const T* __restrict__ x, long long incx, bool vec,
                                                  bool conj, int blk, const KblasOutput<T>& o) {
  using S = KblasRowsShape<T, P, THREADS>;
  constexpr int VW = S::VW, ROWS = S::ROWS;
  const int t = threadIdx.x;
  const int r0 = blk * ROWS - shift;
  const int i0 = r0 + (t % P) * VW;  // this thread's first row
  const bool edge = r0 < 0 || r0 + ROWS > m;
  T acc[VW];
#pragma unroll
  for (int k = 0; k < VW; ++k) acc[k] = T(0);
  kblas_rows_accumulate<T, P, THREADS, U>(acc, A, lda, m, 0, n, i0, edge, x, incx, vec, conj);
  const T s = kblas_rows_sum<T, P, THREADS>(acc, scratch);
  if (t < ROWS && r0 + t >= 0 && r0 + t < m) o.store(r0 + t, s);
}

// kblas_gemv_t_cols: GEMV-T in one pass, a warp per column: out[col] for column col =
// blk * WARPS + warp of A (warps past n do nothing).  Lane l reads the VW rows from
// l VW - shift (rows counted from the origin -shift, as the tall tiles), then every
// 32 VW rows, U pieces in flight: 16 bytes at a time where the whole step is inside
// [0, m) and `vec` (KBLAS_VEC), x likewise where `xvec` (contiguous and aligned with
// A's rows), element by element otherwise; the warp's sum by butterfly, stored by
// lane 0.  No shared memory, no partials.
// Threads:  any multiple of 32 (WARPS warps); warps are independent.
// Shared:   none.  Sync:  none (a warp past n returns at once).
// Memory:   A, x read-only, 64-bit offsets; only rows [0, m) of the warp's column.
// Failure:  none; NaN/Inf in the elements read propagate.
// kblas_cols_sum: the warp's sum of op(a[i]) x_i over the rows i of [max(lo, 0), hi) of
// one column a, lane l reading VW rows from lo + l VW and every 32 VW rows after (lo
// counted from the aligned origin: a multiple of VW past -shift), U pieces in flight;
// 16 bytes at a time as kblas_gemv_t_cols says.  Every lane gets the sum.
template <typename T, int U>
__device__ __forceinline__ T kblas_cols_sum(const T* __restrict__ a, int lo, int hi, const T* __restrict__ x,
                                            long long incx, bool vec, bool xvec, bool conj) {
  constexpr int VW = int(sizeof(T)) < 16 ? 16 / int(sizeof(T)) : 1, STEP = 32 * VW;
  const int lane = threadIdx.x % 32;
  T acc[VW];
#pragma unroll
  for (int k = 0; k < VW; ++k) acc[k] = T(0);
  for (int i0 = lo + lane * VW; i0 < hi; i0 += U * STEP) {  // this lane's rows i0 + u STEP + k
    T av[U][VW], xv[U][VW];
    if (vec && i0 >= 0 && i0 + (U - 1) * STEP + VW <= hi) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        load_vector<T, VW>(a + i0 + u * STEP, av[u]);
        if (xvec) {
          load_vector<T, VW>(x + i0 + u * STEP, xv[u]);
        } else {
#pragma unroll
          for (int k = 0; k < VW; ++k) xv[u][k] = x[(long long)(i0 + u * STEP + k) * incx];
        }
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const int i = i0 + u * STEP + k;
          const bool live = i >= 0 && i < hi;
          av[u][k] = live ? a[i] : T(0);
          xv[u][k] = live ? x[(long long)i * incx] : T(0);
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < VW; ++k) acc[k] += conj_if(av[u][k], conj) * xv[u][k];
  }
  T sum = acc[0];
#pragma unroll
  for (int k = 1; k < VW; ++k) sum += acc[k];
  return butterfly_sum<1, 32>(sum, 0xffffffffu);
}

template <typename T, int WARPS, int U>
__device__ __forceinline__ void kblas_gemv_t_cols(const T* __restrict__ A, long long lda, int m, int n, int shift,
                                                  const T* __restrict__ x, long long incx, bool vec, bool xvec,
                                                  bool conj, int blk, const KblasOutput<T>& o) {
  const int col = blk * WARPS + threadIdx.x / 32;
  if (col >= n) return;
  const T sum = kblas_cols_sum<T, U>(A + (long long)col * lda, -shift, m, x, incx, vec, xvec, conj);
  if (threadIdx.x % 32 == 0) o.store(col, sum);
}

// --- SYMV / HEMV: one body per stage for the single-GPU and the multi-GPU kernels ---------
//
// A symmetric (Hermitian) matrix of order n, one triangle stored.  The kernel reads
// a column-major LOCAL matrix (leading dimension lda) whose row i is global row i;
// it is cut into tile columns of NB local columns each.  A tile map says where
// they lie in the global matrix:
//   n            the order (a field)
//   valid(i)     whether global index i is a real one (0 <= i < n); others are
//                masked, never read or written
//   origin(c)    global index of the first column of tile column c: its NB columns
//                are the global columns origin(c) .. origin(c) + NB - 1, and its
//                diagonal tile the rows with the same indices (square: rows and
//                columns share one origin)
//   local(c)     local index of that first column
//   row_tile(c)  the row tile (of rows()) that is the diagonal tile of tile column c
//   rows()       the row tiles the off-diagonal walks move over (global rows)
//   cols()       the local column tiles (their length bounds the local columns;
//                cols().edge<NB>(c) picks the checked loads of tile column c)
//   count()      tile columns: the grid of the diagonal stage
// and an output policy where the results go:
//   store(i, v)  the diagonal stage's (A_GG x_G)[i]: initialises i (one GPU, where the
//                off-diagonal stage runs after it), or adds atomically (PartialOutput)
//   add(i, v)    the off-diagonal stage's atomic add of a contribution to index i

// The whole matrix on one GPU (local = global), tiles counted from the alignment
// shift of the matrix's first element (see the top of this file).
template <int NB> struct SingleTiles {
  int n, shift;
  __device__ __forceinline__ bool valid(int i) const { return i >= 0 && i < n; }  // shift masks i < 0
  __device__ __forceinline__ TileRange rows() const { return {n, shift}; }
  __device__ __forceinline__ TileRange cols() const { return {n, shift}; }
  __device__ __forceinline__ int count() const { return TileRange{n, shift}.count<NB>(); }
  __device__ __forceinline__ int origin(int c) const { return TileRange{n, shift}.start<NB>(c); }
  __device__ __forceinline__ int local(int c) const { return origin(c); }
  __device__ __forceinline__ int row_tile(int c) const { return c; }
};

// The local matrix of device `rank` of `ranks` in the 1D block-cyclic column layout
// (batched/kblas/distributed.py): local column j is global column
// ((j / nb) * ranks + rank) * nb + j % nb.  NB divides nb (the launcher checks), so
// a tile column is NB consecutive global columns starting at a multiple of NB.
// Origin 0, no alignment shift: the local buffers have 128-byte aligned columns.
template <int NB> struct CyclicTiles {
  int n, local_cols, nb, ranks, rank;
  __device__ __forceinline__ bool valid(int i) const { return i < n; }  // origin 0: never negative
  __device__ __forceinline__ TileRange rows() const { return {n, 0}; }
  __device__ __forceinline__ TileRange cols() const { return {local_cols, 0}; }
  __device__ __forceinline__ int count() const { return TileRange{local_cols, 0}.count<NB>(); }
  __device__ __forceinline__ int origin(int c) const {
    const int j = c * NB;
    return ((j / nb) * ranks + rank) * nb + j % nb;
  }
  __device__ __forceinline__ int local(int c) const { return c * NB; }
  __device__ __forceinline__ int row_tile(int c) const { return origin(c) / NB; }
};

// A device's partial vector of the multi-GPU SYMV (zeroed by the launcher): no alpha,
// no beta, unit stride; they are applied when the partials are summed.  The diagonal
// tiles' store adds too: one launch runs both stages, so a diagonal tile may land
// before, between or after the off-diagonal tiles' atomics on its rows.
template <typename T> struct PartialOutput {
  T* part;
  __device__ __forceinline__ void store(int i, T r) const { atomic_add(part + i, r); }
  __device__ __forceinline__ void add(int i, T r) const { atomic_add(part + i, r); }
};

// How the stored elements are read (uniform over a launch).
struct KblasSymvFlags {
  bool lower;   // the lower triangle (of the local column-major view) is stored
  bool herm;    // mirror with conjugation; the diagonal is real
  bool conj_a;  // every stored element is read conjugated (HEMV on a row-major view)
};

// Shared memory of the two stages, in bytes: raw bytes because complex<T> has a
// constructor, which __shared__ may not run.  Every piece is a multiple of NB
// elements (NB a multiple of 32), so each stays 16-byte aligned in the buffer.
template <typename T, int NB, int Q> __host__ __device__ constexpr int kblas_symv_diag_bytes() {
  return (NB * (NB + 1) + 2 * NB + Q * NB) * int(sizeof(T));  // tile, x, scratch, red
}
template <typename T, int NB, int Q> __host__ __device__ constexpr int kblas_symv_offdiag_bytes() {
  return (2 * Q * NB + (NB / 32) * NB + NB) * int(sizeof(T));  // partial (two buffers), scratch, red
}
// Both stages in one kernel (a block takes one or the other).
template <typename T, int NB, int Q> __host__ __device__ constexpr int kblas_symv_bytes() {
  return kblas_symv_diag_bytes<T, NB, Q>() > kblas_symv_offdiag_bytes<T, NB, Q>()
             ? kblas_symv_diag_bytes<T, NB, Q>()
             : kblas_symv_offdiag_bytes<T, NB, Q>();
}

// kblas_symv_diag: out.store(i, (A_GG x_G)[i]) for every valid row i of the diagonal
// tile of tile column c, with A_GG mirrored from its stored triangle.
// Threads:  the NB x Q block (NB % 32 == 0), all with the same arguments.
// Shared:   `smem`, kblas_symv_diag_bytes<T, NB, Q>() bytes, 16-byte aligned;
//           undefined on exit.
// Sync:     no barrier assumed on entry; a barrier after the tile is loaded, then
//           kblas_sum_over_q's; ends after a barrier.
// Memory:   A read only inside the stored triangle of the tile, at valid rows and
//           columns; x read at the tile's valid indices (stride incx); one
//           out.store per valid row.  64-bit offsets.
// Failure:  none; NaN/Inf of the stored triangle propagate, the other is never read.
template <typename T, int NB, int Q, class Tiles, class Out>
__device__ __forceinline__ void kblas_symv_diag(const T* __restrict__ A, long long lda, Tiles tiles, int c,
                                                const T* __restrict__ x, long long incx, const Out& out,
                                                KblasSymvFlags f, unsigned char* smem) {
  constexpr int L = NB / Q, LDS = NB + 1;  // +1: a column and a row of the tile hit distinct banks
  static_assert(kblas_symv_diag_bytes<T, NB, Q>() <= 48 * 1024,
                "the diagonal tile must fit the static shared-memory limit");
  static_assert(NB % 32 == 0 && NB % Q == 0, "NB must be a multiple of the warp size and of Q");
  T* tile = reinterpret_cast<T*>(smem);
  T* xs = tile + NB * LDS;
  T* scratch = xs + NB;
  T* red = scratch + Q * NB;

  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const int base = tiles.origin(c);  // global first column = first row of the tile
  const int j0 = tiles.local(c);     // its local column
  const int local_cols = tiles.cols().len;
  const bool row_ok = tiles.valid(base + tx);

  // tile(r, cc) = A(base + r, base + cc) inside the stored triangle, else 0 (not read).
  for (int cc = ty; cc < NB; cc += Q) {
    const bool stored = f.lower ? tx >= cc : tx <= cc;
    const bool ok = stored && row_ok && tiles.valid(base + cc) && j0 + cc < local_cols;
    tile[cc * LDS + tx] = ok ? conj_if(A[(long long)(j0 + cc) * lda + base + tx], f.conj_a) : T(0);
  }
  const int r = threadIdx.x;
  if (r < NB) xs[r] = tiles.valid(base + r) ? x[(long long)(base + r) * incx] : T(0);
  __syncthreads();

  // Row tx of the mirrored tile times x, over this thread's L columns.
  T s = T(0);
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int cc = ty * L + l;
    T e;
    if (cc == tx)
      e = f.herm ? real_diagonal(tile[cc * LDS + tx]) : tile[cc * LDS + tx];
    else if (f.lower ? tx > cc : tx < cc)
      e = tile[cc * LDS + tx];
    else
      e = conj_if(tile[tx * LDS + cc], f.herm);
    s += e * xs[cc];
  }
  kblas_sum_over_q<T, NB, Q>(s, scratch, red);  // ends after a barrier: red readable
  if (r < NB && tiles.valid(base + r)) out.store(base + r, red[r]);
}

// kblas_symv_offdiag: block `block` of count() * parts (tile column c, part p) walks
// its share of the off-diagonal tiles B = A(R, C) of tile column c inside the stored
// triangle (row tiles R > row_tile(c) for lower, R < row_tile(c) for upper).  Each
// tile is read once and used twice: out.add(R's rows, B x_C) reduced over the block,
// tile by tile, and out.add(C's columns, B^H x_R) (B^T for SYMV), accumulated in
// registers over the walk and added once at the end.  Longest walks first (lower:
// tile column 0; upper: the last), so the scheduler fills the tail with short ones.
// Threads:  the NB x Q block, all with the same arguments.
// Shared:   `smem`, kblas_symv_offdiag_bytes<T, NB, Q>() bytes, 16-byte aligned.
// Sync:     one barrier per tile (double-buffered partials), then
//           kblas_sum_over_rows's.  A block with an empty share returns at once,
//           uniformly, before any barrier.
// Memory:   A read only inside the walked tiles, at valid rows and local columns;
//           x at valid global indices (stride incx); out.add only at valid indices.
// Failure:  none; NaN/Inf propagate.
template <typename T, int NB, int Q, class Tiles, class Out>
__device__ __forceinline__ void kblas_symv_offdiag(const T* __restrict__ A, long long lda, Tiles tiles,
                                                   int block, int parts, const T* __restrict__ x,
                                                   long long incx, const Out& out, KblasSymvFlags f,
                                                   unsigned char* smem) {
  constexpr int L = NB / Q;
  T* partial = reinterpret_cast<T*>(smem);
  T* scratch = partial + 2 * Q * NB;
  T* red = scratch + (NB / 32) * NB;

  // Flags and sizes are copied into locals and x_C's mask below is written out (not
  // tiles.valid): otherwise NVVM (CUDA 13.0) keeps the walk's column masks live
  // across it, 118 -> 142 registers for kblas_symv_offdiag_kernel<float, 64, 4>
  // (one block per SM instead of two).  Same arithmetic either way.
  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const int n = tiles.n;
  const bool lower = f.lower, herm = f.herm;
  const bool conj_n = f.conj_a;
  const bool conj_t = herm ? !conj_n : conj_n;
  const TileRange rows = tiles.rows(), cols = tiles.cols();
  const int blocks = tiles.count();
  const int order = block / parts, part = block % parts;
  const int c = lower ? order : blocks - 1 - order;  // longest walks first
  const int G = tiles.row_tile(c);
  const int first = lower ? G + 1 : 0, last = lower ? rows.count<NB>() : G;
  int lo, hi;
  split_share(last - first, parts, part, lo, hi);
  if (lo >= hi) return;  // uniform over the block: no barrier is skipped by a part of it

  const int col0 = tiles.origin(c);
  T xc[L];  // x over this thread's columns of tile column c, for every tile's B x_C
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int j = col0 + ty * L + l;
    xc[l] = (j >= 0 && j < n) ? x[(long long)j * incx] : T(0);
  }
  T acc[L];
#pragma unroll
  for (int l = 0; l < L; ++l) acc[l] = T(0);

  int step = 0;
  auto body = [&](int t, const T (&a)[L], T xv) {
    T pn = T(0);
#pragma unroll
    for (int l = 0; l < L; ++l) {
      pn += conj_if(a[l], conj_n) * xc[l];
      acc[l] += conj_if(a[l], conj_t) * xv;
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
      const int i = rows.start<NB>(t) + tx;
      if (tiles.valid(i)) out.add(i, s);
    }
    ++step;
  };
  // The walk reads A(i, j) at global row i and local column j of tile column c,
  // and x[i] for each row i: rows and x share the global index.
  if (cols.edge<NB>(c))
    kblas_walk<T, NB, Q, true>(A, lda, rows, cols, c, first + lo, first + hi, x, incx, body);
  else
    kblas_walk<T, NB, Q, false>(A, lda, rows, cols, c, first + lo, first + hi, x, incx, body);

  kblas_sum_over_rows<T, NB, Q>(acc, scratch, red);  // starts and ends with a barrier
  const int r = threadIdx.x;
  if (r < NB && tiles.valid(col0 + r)) out.add(col0 + r, red[r]);
}

// --- SYMV / HEMV of a short matrix: strips, one pass, no atomics ------------------------
//
// kblas_symv_strip: block `blk` owns the ROWS = P * VW indices r0 .. r0 + ROWS - 1
// (r0 = blk * ROWS - shift, the one-pass GEMV-N's rows) and stores out there whole:
//   row part     sum over the stored j of row i of A(i, j) x_j (lower: j <= i; upper:
//                j >= i), by kblas_rows_accumulate's column lanes over the columns
//                outside the diagonal block and element by element inside it;
//   column part  sum over the stored r != c of column c of A(r, c)^H x_r (A^T for
//                SYMV; lower: r > c; upper: r < c), a warp a column (kblas_cols_sum)
//                over the rows outside the diagonal block, element by element inside.
// The block reads an L-shaped strip, its block row and its block column of the stored
// triangle: every stored element twice over the launch (n^2 elements in all, as a
// GEMV), none through atomics, no block waiting for another.  Why: at small n a call is
// a chain of latencies, not bytes (kblas_symv_kernel, SSYMV 1024: 10 us for 2 MB; the
// one-pass GEMV-N reads 4 MB in about 5).
// Requires: 0 <= shift < ROWS (the launcher passes the alignment shift modulo ROWS), so
//           only block 0 starts before row 0 and every block ends past it.
// Threads:  THREADS (a multiple of 32, WARPS warps, WARPS >= 1), all with the same arguments.
// Shared:   `scratch`, (WARPS + 1) * ROWS elements of T.  Sync: one barrier, then a second.
// Memory:   A only inside the stored triangle at indices in [0, n); x read-only; out.store
//           once per valid index of the block.  `vec`: the columns' element -shift
//           16-byte aligned (KBLAS_VEC); `xvec`: x contiguous and aligned as A's rows.
// Failure:  none; NaN/Inf of the stored triangle propagate, the other is never read.
template <typename T, int P, int THREADS, int U>
__device__ __forceinline__ void kblas_symv_strip(T* scratch, const T* __restrict__ A, long long lda, int n,
                                                 int shift, const T* __restrict__ x, long long incx, bool vec,
                                                 bool xvec, KblasSymvFlags f, int blk, const KblasOutput<T>& o) {
  using S = KblasRowsShape<T, P, THREADS>;
  constexpr int VW = S::VW, ROWS = S::ROWS, LANES = S::LANES, WARPS = S::WARPS;
  static_assert(LANES >= ROWS, "a column lane for each column of the diagonal block");
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int r0 = blk * ROWS - shift, r1 = r0 + ROWS;
  const int i0 = r0 + (t % P) * VW;  // this thread's first row of the row part
  const bool lower = f.lower, conj_t = f.herm ? !f.conj_a : f.conj_a;
  T* column_sums = scratch + WARPS * ROWS;

  // Row part: the columns outside the diagonal block, then the block's (stored side only).
  T acc[VW];
#pragma unroll
  for (int k = 0; k < VW; ++k) acc[k] = T(0);
  const bool edge = r0 < 0 || r1 > n;
  if (lower)
    kblas_rows_accumulate<T, P, THREADS, U>(acc, A, lda, n, 0, r0 > 0 ? r0 : 0, i0, edge, x, incx, vec, f.conj_a);
  else  // r1 > 0: the origin shift is less than a block
    kblas_rows_accumulate<T, P, THREADS, U>(acc, A, lda, n, r1, n, i0, edge, x, incx, vec, f.conj_a);
  const int jd = r0 + t / P;  // this thread's column of the diagonal block
  if (t / P < ROWS && jd >= 0 && jd < n) {
    const T xj = x[(long long)jd * incx];
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      const int i = i0 + k;
      if (i >= 0 && i < n && (lower ? jd <= i : jd >= i)) {
        const T a = conj_if(A[(long long)jd * lda + i], f.conj_a);
        acc[k] += (i == jd && f.herm ? real_diagonal(a) : a) * xj;
      }
    }
  }

  // Column part: warp w the block's columns r0 + w, r0 + w + WARPS, ..
  for (int cc = warp; cc < ROWS; cc += WARPS) {
    const int c = r0 + cc;
    if (c < 0 || c >= n) continue;  // uniform over the warp
    const T* col = A + (long long)c * lda;
    T s = lower ? kblas_cols_sum<T, U>(col, r1, n, x, incx, vec, xvec, conj_t)
                : kblas_cols_sum<T, U>(col, -shift, r0 > 0 ? r0 : 0, x, incx, vec, xvec, conj_t);
    // inside the diagonal block: rows r0 + lane, strictly on the stored side of c
    const int r = r0 + lane;
    T e = T(0);
    if (lane < ROWS && r >= 0 && r < n && (lower ? r > c : r < c)) e = conj_if(col[r], conj_t) * x[(long long)r * incx];
    s += butterfly_sum<1, 32>(e, 0xffffffffu);
    if (lane == 0) column_sums[cc] = s;
  }

  const T rows = kblas_rows_sum<T, P, THREADS>(acc, scratch);  // its barrier orders column_sums too
  if (t < ROWS && r0 + t >= 0 && r0 + t < n) o.store(r0 + t, rows + column_sums[t]);
}

}  // namespace bdf
