// Batched Cholesky factorization (POTRF) and fused factor-and-solve (POSV).
//
// Every kernel reads the input A and writes the output C (the same matrices when the
// caller overwrites A: flag POTRF_INPLACE), one kernel body for the three layouts
// (the Mat / Vec accessors of layouts.cuh).  Matrices are column-major views; the
// named triangle of the view is presented to the algorithm as the lower triangle of
// a logical matrix L (`Triangle` below): for a lower view L(i, j) = X(i, j), for an
// upper view L(i, j) = conj(X(j, i)), so one lower algorithm serves A = L L^H and
// A = U^H U, and a row-major user matrix (the transpose of its view) needs no copy.
//
// Four designs (factorizations/cholesky_settings.py):
//   potrf_thread_kernel: one thread per matrix (n <= NB <= 8), the named triangle in its
//     registers (bdf::potrf_regs), POSV's solves there too (bdf::potrs_regs); packed
//     batches stream through shared memory a warp's chunk of 32 matrices at a time
//     (bdf::warp_pipeline).
//   potrf_rows_kernel: a group of L lanes per matrix (n <= NB <= L <= 32), lane i holding
//     row i of the factor in registers and the group's copy of it in shared memory
//     (bdf::potrf_rows / potrs_rows); POSV in the same launch.
//   potrf_fused_kernel: one thread group per matrix; the named triangle in shared
//     memory (n x n, ld n), bdf::potrf_lower_columns, then (POSV, n <= 32) both
//     triangular solves of each right-hand side in shared memory by bdf::trsv_tile.
//   potrf_warps_kernel: one block per matrix (n <= NB = 64 or 128), held in registers
//     (bdf::potrf_warps: lane i of every warp rows i, i + 32, .., warp w the columns w,
//     w + W, ..), entering and leaving through shared memory, where POSV solves (two
//     bdf::trsv_window) in the same launch.
//   potrf_blocked_kernel: one block per matrix, the matrix in global memory (C),
//     right-looking over panels of POTRF_NB columns: diagonal block factored in shared
//     memory, rows below it solved against it (one warp per row, bdf::trsv_tile), the
//     trailing lower triangle updated by potrf_trailing_update (a 32 x 32 tile a warp;
//     tiles above the diagonal skipped, the diagonal tiles store their lower part only).
#include "common.cuh"
#include "gemv.cuh"
#include "layouts.cuh"
#include "potrf.cuh"
#include "trsv.cuh"
#include "vector.cuh"
#include "warp_pipeline.cuh"

// Launch flags (uniform over a launch).
#define POTRF_LOWER 1       // the named triangle is the lower triangle of the stored view
#define POTRF_INPLACE 2     // C is A: nothing to copy
#define POTRF_ZERO_OTHER 4  // write zeros into C's other triangle (else: copy A's, LAPACK leaves it)
#define POTRF_CONJ_SOLVE 8  // POSV: the user's matrix is conj(view) (a complex row-major input,
                            // whose column-major view is A^T = conj(A)): solve with conj(L)

#define POTRF_NB 32             // blocked panel width: one warp's trsv_tile

// Sub-warp groups pack several matrices into one block (the launcher may launch fewer
// than this many threads when the groups' shared memory would not fit).
__host__ __device__ constexpr int potrf_block_threads(int group) { return group > 32 ? group : 256; }

// The named triangle of a stored view as the lower triangle of the logical L (i >= j).
template <typename T> struct Triangle {
  T* x;
  long long ld;
  bool lower;
  __device__ long long at(int i, int j) const { return lower ? i + j * ld : j + i * ld; }
  __device__ T get(int i, int j) const { return bdf::conj_if(x[at(i, j)], !lower); }
  __device__ void set(int i, int j, T v) const { x[at(i, j)] = bdf::conj_if(v, !lower); }
};

// Stored element (r, s) of an n x n view: in the named triangle?
__device__ __forceinline__ bool potrf_named(bool lower, int r, int s) { return lower ? r >= s : r <= s; }

// C's other triangle: zeros, or A's values (unless C is A).  Stored coordinates, so
// consecutive threads touch consecutive addresses.
template <typename T, int G>
__device__ void potrf_other_triangle(bdf::ThreadGroup<G> g, int n, const T* a, long long lda, T* c,
                                     long long ldc, int flags) {
  const bool lower = flags & POTRF_LOWER, zero = flags & POTRF_ZERO_OTHER;
  if (!zero && (flags & POTRF_INPLACE)) return;
  for (int e = g.rank; e < n * n; e += G) {
    const int s = e / n, r = e - s * n;
    if (!potrf_named(lower, r, s)) c[r + s * ldc] = zero ? T(0) : a[r + s * lda];
  }
}

// One group per matrix.  S: the logical L (n x n, ld n) of the group's matrix; y: one
// right-hand side during the solves.  nrhs > 0 (POSV) only when n_max <= min(G, 32):
// each solve is one trsv_tile by the group's first warp (the launcher checks).
// info[b]: 0 or the failing 1-based column; a failing matrix's right-hand sides are
// copied unchanged to X (LAPACK's xPOSV does not solve them).  SOLVE = false (POTRF)
// leaves the solve out of the instantiation: trsv_tile's row of registers would
// otherwise limit the factorization's occupancy too.
template <class Mat, class Vec, int DIM_X, int DIM_Y, bool SOLVE>
__global__ void __launch_bounds__(potrf_block_threads(DIM_X * DIM_Y))
potrf_fused_kernel(Mat A, Mat C, Vec B, long long b_col, Vec X, long long x_col, int nrhs, int* info,
                   int flags, long long count, int n_max) {
  using T = typename Mat::value_type;
  constexpr int G = DIM_X * DIM_Y, W = G < 32 ? G : 32;
  constexpr int WORK = G > 32 ? G * bdf::GEMV_UNROLL : 0;
  extern __shared__ __align__(16) unsigned char smem[];
  const int groups = blockDim.x / G;
  const int group = threadIdx.x / G;
  // per group: the matrix, the GEMV reduction space, one right-hand side (POSV)
  const long long group_bytes =
      ((long long)(n_max * n_max + WORK + (nrhs ? n_max : 0)) * sizeof(T) + 15) / 16 * 16;
  T* S = reinterpret_cast<T*>(smem + group * group_bytes);
  T* work = S + (long long)n_max * n_max;
  T* y = work + WORK;

  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  const bool lower = flags & POTRF_LOWER;
  for (long long b = (long long)blockIdx.x * groups + group; b < count; b += (long long)gridDim.x * groups) {
    const int n = A.rows(b);
    const T* a = A.matrix(b);
    T* c = C.matrix(b);
    const long long lda = A.ldim(b), ldc = C.ldim(b);
    // Load: S(i, j) = L(i, j) for the named triangle only (the other one may hold NaN).
    for (int e = g.rank; e < n * n; e += G) {
      const int s = e / n, r = e - s * n;
      if (potrf_named(lower, r, s)) S[lower ? e : s + r * n] = bdf::conj_if(a[r + s * lda], !lower);
    }
    potrf_other_triangle<T, G>(g, n, a, lda, c, ldc, flags);
    g.sync();  // S complete
    const int fail = bdf::potrf_lower_columns<T, DIM_X, DIM_Y>(g, n, S, n, work);  // ends after a barrier
    for (int e = g.rank; e < n * n; e += G) {
      const int s = e / n, r = e - s * n;
      if (potrf_named(lower, r, s)) c[r + s * ldc] = bdf::conj_if(S[lower ? e : s + r * n], !lower);
    }
    if (g.rank == 0) info[b] = fail;
    for (int k = 0; SOLVE && k < nrhs; ++k) {  // L y = b, then L^H x = y
      const T* bv = B.vector(b) + k * b_col;
      T* xv = X.vector(b) + k * x_col;
      if (fail) {  // uniform over the group
        for (int i = g.rank; i < n; i += G) xv[i * X.inc] = bv[i * B.inc];
        continue;
      }
      for (int i = g.rank; i < n; i += G) y[i] = bv[i * B.inc];
      g.sync();  // y complete (its writers may be other warps of the group)
      if (g.rank < W) {  // view = L L^H; conj(view) = conj(L) L^T
        const bool cj = flags & POTRF_CONJ_SOLVE;
        bdf::trsv_tile<T, W>(g.rank, n, S, n, cj ? bdf::OP_R : bdf::OP_N, true, false, y);
        bdf::trsv_tile<T, W>(g.rank, n, S, n, cj ? bdf::OP_T : bdf::OP_C, false, false, y);
      }
      g.sync();  // y solved
      for (int i = g.rank; i < n; i += G) xv[i * X.inc] = y[i];
      g.sync();  // y is refilled by the next right-hand side
    }
    g.sync();  // S (read by the write-back and the solves) is refilled by the next matrix
  }
}

// The blocked design's trailing update L22 -= L21 L21^H (L21: the m2 x nb panel below the
// diagonal block at column k, final; L22 from row and column base = k + nb) by warps: the
// lower 32 x 32 tiles of L22 in order, warp w taking tiles w, w + WARPS, ..  A lane owns
// one row of its tile in storage order (the tile's row for a lower view, its column for
// an upper one, so that its stores run down a stored column) and sums over the panel's
// columns kk its element of L21 times the other 32 rows' elements, which the lanes put in
// `y` (the warp's 32 elements) one kk at a time and read back by broadcast.  Measured on
// the H100 (SPOTRF 256 x 256, 1,024 matrices; DPOTRF 256 x 256, 512): the whole block on
// one gemm_tile tile at a time behind barriers took 4.2 of SPOTRF's 5.5 ms (0.8 of
// DPOTRF's 2.1), this about 1.3 of 2.6 (32 x 8).  Four columns staged at a time (their loads issued
// together, 16-byte broadcast loads) ran the same in double and 3-18 % slower in float
// (100 registers against 80: two blocks an SM against three).
// Threads:  every thread of the block; `warp`, `lane` its warp and lane.
// Shared:   y, the warp's 32 elements (free: the row solves are done).
// Sync:     __syncwarp around each kk's y; none across warps (tiles are disjoint, L21 is
//           read only).  The caller's barrier follows.
template <typename T, int WARPS>
__device__ void potrf_trailing_update(int warp, int lane, const Triangle<T>& L, int k, int nb, int m2, T* y) {
  const int base = k + nb, t = (m2 + 31) / 32;
  for (int q = warp; q < t * (t + 1) / 2; q += WARPS) {
    int ti = 0;  // q -> (ti, tj), tj <= ti, the lower tiles row by row
    while ((ti + 1) * (ti + 2) / 2 <= q) ++ti;
    const int tj = q - ti * (ti + 1) / 2;
    // storage order: lower, lane l takes logical row own = 32 ti + l against rows 32 tj + e;
    // upper, logical column own = 32 tj + l against rows 32 ti + e (sums conjugated)
    const int own = (L.lower ? 32 * ti : 32 * tj) + lane, other0 = L.lower ? 32 * tj : 32 * ti;
    T acc[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) acc[e] = T(0);
    for (int kk = 0; kk < nb; ++kk) {
      const T u = own < m2 ? L.get(base + own, k + kk) : T(0);
      const T v = other0 + lane < m2 ? L.get(base + other0 + lane, k + kk) : T(0);
      __syncwarp();  // the previous kk's y has been read
      y[lane] = bdf::conj_if(v, true);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 32; ++e) acc[e] += u * y[e];
    }
    // acc[e] = sum_kk L(own, kk) conj(L(other0 + e, kk)): lower, the logical element
    // (own, other0 + e), stored there; upper, the conjugate of (other0 + e, own)'s, whose
    // stored element is that conjugate: either way the stored element takes -= acc[e]
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const int i = L.lower ? own : other0 + e, j = L.lower ? other0 + e : own;
      if (i < m2 && j <= i) L.x[L.at(base + i, base + j)] -= acc[e];
    }
  }
}

// One block of G = DIM_X * DIM_Y threads (whole warps, G > 32) per matrix.
// Shared: the diagonal block (POTRF_NB^2), gemv_n's work, one POTRF_NB vector per warp
// for the panel solves and the trailing update.
// Who writes what: C is written by the block in phases separated by __syncthreads
// (copy -> per panel: diagonal block, panel rows, trailing tiles); within a phase
// every element of C has one writer (potrf_trailing_update: a tile a warp).
template <class Mat, int DIM_X, int DIM_Y>
__global__ void __launch_bounds__(DIM_X * DIM_Y)
potrf_blocked_kernel(Mat A, Mat C, int* info, int flags, long long count) {
  using T = typename Mat::value_type;
  constexpr int G = DIM_X * DIM_Y, NB = POTRF_NB, WARPS = G / 32;
  static_assert(G > 32 && G % 32 == 0, "the blocked design runs whole warps, more than one");
  static_assert(NB == 32, "a panel row is one warp's trsv_tile, a trailing tile a warp's 32 rows");
  constexpr int WORK = G * bdf::GEMV_UNROLL;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sD = reinterpret_cast<T*>(smem);
  T* work = sD + NB * NB;
  T* ys = work + WORK;

  const bdf::ThreadGroup<G> g(threadIdx.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool lower = flags & POTRF_LOWER;
  T* y = ys + warp * NB;
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int n = A.rows(b);
    const T* a = A.matrix(b);
    T* c = C.matrix(b);
    const long long lda = A.ldim(b), ldc = C.ldim(b);
    const Triangle<T> L{c, ldc, lower};
    if (!(flags & POTRF_INPLACE)) {  // C's named triangle = A's
      for (int e = g.rank; e < n * n; e += G) {
        const int s = e / n, r = e - s * n;
        if (potrf_named(lower, r, s)) c[r + s * ldc] = a[r + s * lda];
      }
    }
    potrf_other_triangle<T, G>(g, n, a, lda, c, ldc, flags);
    g.sync();  // C holds the matrix
    int fail = 0;
    for (int k = 0; k < n; k += NB) {
      const int nb = min(NB, n - k);
      for (int e = g.rank; e < nb * nb; e += G) {
        const int j = e / nb, i = e - j * nb;
        if (i >= j) sD[i + j * NB] = L.get(k + i, k + j);
      }
      g.sync();  // sD complete
      fail = bdf::potrf_lower_columns<T, DIM_X, DIM_Y>(g, nb, sD, NB, work);  // ends after a barrier
      for (int e = g.rank; e < nb * nb; e += G) {
        const int j = e / nb, i = e - j * nb;
        if (i >= j) L.set(k + i, k + j, sD[i + j * NB]);
      }
      if (fail) {  // uniform; LAPACK's blocked xPOTRF also leaves the trailing matrix part-updated
        fail += k;
        break;
      }
      // Rows below the diagonal block: x conj(L_D)^T ... i.e. x L_D^H = p, solved as
      // conj(L_D) x^T = p^T (op R on the lower L_D), one warp per row.
      const int m2 = n - k - nb;
      for (int r = warp; r < m2; r += WARPS) {
        if (lane < nb) y[lane] = L.get(k + nb + r, k + lane);
        bdf::trsv_tile<T, 32>(lane, nb, sD, NB, bdf::OP_R, true, false, y);  // syncwarps on entry and exit
        if (lane < nb) L.set(k + nb + r, k + lane, y[lane]);
      }
      g.sync();  // the panel is final in C
      potrf_trailing_update<T, WARPS>(warp, lane, L, k, nb, m2, y);  // L22 -= L21 L21^H
      g.sync();  // the trailing matrix is updated before the next diagonal block is read
    }
    if (g.rank == 0) info[b] = fail;
    g.sync();  // sD and ys are reused by the next matrix
  }
}

// --- warps design ----------------------------------------------------------------------

// Shared memory of potrf_warps_kernel (NB, THREADS): the logical L (NB + 1 by NB
// elements), the multipliers' three slots (3 NB), the right-hand side (NB), trsv_window's
// GEMV work (THREADS * GEMV_UNROLL), three slots of the pivots' reciprocal square roots
// (the riding forward solve's, bdf::potrf_warps), then the three step flags.  The same
// sums as CholeskySetting.warps_bytes in cholesky_settings.py.
template <typename T, int NB, int THREADS> struct PotrfWarpsSmem {
  static __host__ __device__ constexpr int align(int v) { return (v + 15) / 16 * 16; }
  static constexpr int sl = align(NB * (NB + 1) * int(sizeof(T)));
  static constexpr int sx = sl + 3 * NB * int(sizeof(T));
  static constexpr int work = sx + NB * int(sizeof(T));
  static constexpr int sy = align(work + THREADS * bdf::GEMV_UNROLL * int(sizeof(T)));
  static constexpr int sstep = align(sy + 3 * int(sizeof(T)));
  static constexpr int total = align(sstep + 3 * 4);
};

// Item = one matrix, one block of THREADS; the same arguments and flags as
// potrf_fused_kernel.  The named triangle comes into shared memory as the logical L
// (consecutive threads on consecutive stored elements: coalesced in either orientation;
// zeros elsewhere, so NaN in the other triangle never enters), then into registers;
// bdf::potrf_warps factors it and leaves the factor in shared memory, from where C is
// written (the stored orientation again) and, for POSV, each right-hand side is solved
// (L y = b, then L^H x = y: two bdf::trsv_window over n; the first right-hand side's
// L y = b rides through the factorization, potrf_warps' RIDE, so only L^H x = y is left).
// C may alias A (the whole triangle is read before anything is written); X may alias B
// (the first column is read with the matrix, the others before their solves).  A failing
// matrix leaves X = B.
template <class Mat, class Vec, int NB, int THREADS, bool SOLVE>
__global__ void __launch_bounds__(THREADS)
potrf_warps_kernel(Mat A, Mat C, Vec B, long long b_col, Vec X, long long x_col, int nrhs, int* info, int flags,
                   long long count, int /*n_max*/) {
  using T = typename Mat::value_type;
  using SM = PotrfWarpsSmem<T, NB, THREADS>;
  constexpr int W = THREADS / 32, R = NB / 32, CL = NB / W, LD = NB + 1;
  static_assert(THREADS % 32 == 0 && NB % 32 == 0 && NB % W == 0, "whole warps, whole columns per warp");
  extern __shared__ __align__(16) unsigned char smem[];
  T* S = reinterpret_cast<T*>(smem);
  T* sl = reinterpret_cast<T*>(smem + SM::sl);
  T* sx = reinterpret_cast<T*>(smem + SM::sx);
  T* work = reinterpret_cast<T*>(smem + SM::work);
  T* sy = reinterpret_cast<T*>(smem + SM::sy);
  int* sstep = reinterpret_cast<int*>(smem + SM::sstep);
  const bdf::ThreadGroup<THREADS> g(threadIdx.x);
  const int tid = int(threadIdx.x);
  const bool lower = flags & POTRF_LOWER, conj_l = flags & POTRF_CONJ_SOLVE;

  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int n = A.rows(b);
    const T* a_src = A.matrix(b);
    T* c = C.matrix(b);
    const long long lda = A.ldim(b), ldc = C.ldim(b);
    // 1. S(i, j) = L(i, j) from stored element (r, s) of the named triangle, zeros
    //    elsewhere; C's other triangle; the first right-hand side
#pragma unroll 4
    for (int q = tid; q < NB * NB; q += THREADS) {
      const int r = q % NB, s = q / NB;
      const bool named = r < n && s < n && potrf_named(lower, r, s);
      S[(lower ? r + s * LD : s + r * LD)] = named ? bdf::conj_if(a_src[r + s * lda], !lower) : T(0);
    }
    potrf_other_triangle<T, THREADS>(g, n, a_src, lda, c, ldc, flags);
    if (SOLVE && nrhs > 0)
      for (int i = tid; i < n; i += THREADS) sx[i] = B.vector(b)[i * B.inc];
    g.sync();
    T a[CL][R];
    bdf::warps_load<W>(a, S, LD);
    // 2. L L^H (potrf_warps' first barrier comes before anything is written to S)
    const bool ride = SOLVE && nrhs > 0;  // the first right-hand side's forward solve in the factorization
    const int fail = bdf::potrf_warps<NB, W, SOLVE>(n, a, S, LD, sl, sstep, ride ? sx : nullptr, sy, conj_l);  // ends after a barrier
    if (tid == 0) info[b] = fail;
    for (int q = tid; q < n * n; q += THREADS) {  // C's named triangle, stored orientation
      const int r = q % n, s = q / n;
      if (potrf_named(lower, r, s)) c[r + s * ldc] = bdf::conj_if(S[lower ? r + s * LD : s + r * LD], !lower);
    }
    // 3. POSV: view = L L^H, conj(view) = conj(L) L^T (a failed matrix keeps X = B)
    for (int k = 0; SOLVE && k < nrhs; ++k) {
      const T* bv = B.vector(b) + k * b_col;
      T* xv = X.vector(b) + k * x_col;
      if (k > 0 || fail)  // (the first one holds y, or a failed matrix's partial solve)
        for (int i = tid; i < n; i += THREADS) sx[i] = bv[i * B.inc];
      if (!fail) {  // uniform
        g.sync();  // sx complete
        if (k > 0)
          bdf::trsv_window<T, 32, W>(g, S, LD, conj_l ? bdf::OP_R : bdf::OP_N, true, false, 0, n, sx, work);
        bdf::trsv_window<T, 32, W>(g, S, LD, conj_l ? bdf::OP_T : bdf::OP_C, false, false, 0, n, sx, work);
      }
      for (int i = tid; i < n; i += THREADS) xv[i * X.inc] = sx[i];
      g.sync();  // sx is refilled by the next right-hand side
    }
    g.sync();  // S is refilled by the next matrix
  }
}

// --- thread design -------------------------------------------------------------------

// The register array of one matrix's triangle, NB (NB + 1) / 2 elements, holds at most this
// many bytes (CHOLESKY_THREAD_REG_BYTES in cholesky_settings.py): NB = 8 for float32,
// float64 and complex64, NB = 4 for complex128 (8 x 8 would take 144 registers).
constexpr int POTRF_THREAD_REG_BYTES = 512;

// Item = one matrix, one thread; the same arguments and flags as potrf_fused_kernel.
// Each warp takes chunks of 32 consecutive matrices (bdf::warp_pipeline).  When the
// matrices are one packed run (uniform accessor, ld = n, stride = n * n) and the launcher
// gave the shared memory, the warp copies its next chunk (and its one packed right-hand
// side) into shared memory while it works on the current one from registers; a packed C
// (the factor and C's other triangle) and packed solutions leave through the chunk's
// buffers as contiguous runs.  Otherwise every lane reads and writes its own elements.
//
// Only the named triangle of A reaches the registers; C's other triangle gets zeros or A's
// values (unless C is A).  C may alias A and X may alias B: a chunk's inputs are all read
// before any of its outputs is written, and chunks are disjoint.  A failing matrix
// (info > 0) leaves X = B.
template <class Mat, class Vec, int NB, int THREADS, bool SOLVE>
__global__ void __launch_bounds__(THREADS)
potrf_thread_kernel(Mat A, Mat C, Vec B, long long b_col, Vec X, long long x_col, int nrhs, int* info,
                    int flags, long long count, int /*n_max*/) {
  using T = typename Mat::value_type;
  using R = typename bdf::real_of<T>::type;
  static_assert(NB >= 1 && NB <= 8, "the thread design unrolls over at most 8 x 8");
  static_assert(NB * (NB + 1) / 2 * int(sizeof(T)) <= POTRF_THREAD_REG_BYTES, "the triangle would not fit in registers");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  constexpr int WARPS = THREADS / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  const bool lower = flags & POTRF_LOWER, zero = flags & POTRF_ZERO_OTHER, inplace = flags & POTRF_INPLACE;
  const bool conj_l = flags & POTRF_CONJ_SOLVE;
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);

  // The pipeline, uniform over the launch: packed uniform matrices only; C and the one
  // right-hand side go through it when they are packed too.
  bool stage_x;  // (A and C are n x n: C's ld = n is C.ld == C.m)
  const bdf::WarpPipe<T> pipe =
      bdf::packed_warp_pipe<NB, T>(smem, warp, WARPS, A, C, true, SOLVE && nrhs == 1, B, X, stage_x);

  bdf::warp_pipeline(pipe, count, (long long)blockIdx.x * WARPS + warp, (long long)gridDim.x * WARPS, lane,
                     [&](const bdf::WarpTurn<T>& t) {
    const long long b = t.b0 + lane;
    const bool active = b < count;
    const int n = active ? A.rows(b) : 0;
    // stored element (r, s) of the view at v[r * rs + s * cs]: L(i, j) = X(i, j) for a
    // lower view, conj(X(j, i)) for an upper one
    const T* a_src = t.a ? t.a : active ? A.matrix(b) : nullptr;  // (no accessor read past the batch)
    const long long lda = t.a || !active ? n : A.ldim(b);
    const long long ars = lower ? 1 : lda, acs = lower ? lda : 1;

    // 1. the named triangle into registers (from this lane's slot when pipelined)
    T a[NB][NB];
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int i = j; i < NB; ++i) {
        a[i][j] = T(0);
        if (i < n) a[i][j] = bdf::conj_if(a_src[i * ars + j * acs], !lower);
      }
    if (active && !pipe.out_a) {  // C's other triangle, while A is at hand (C may be A)
      T* c = C.matrix(b);
      const long long ldc = C.ldim(b);
      if (zero || !inplace)
        for (int s = 0; s < n; ++s)
          for (int r = 0; r < n; ++r)
            if (!potrf_named(lower, r, s)) c[r + s * ldc] = zero ? T(0) : a_src[r + s * lda];
    }
    t.loaded();

    // 2. the factor in registers; info stored directly, C (column-major view) through the
    //    chunk's A buffer when packed, where A's other triangle already is
    R rdiag[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) rdiag[j] = R(0);
    const int fail = active ? bdf::potrf_regs<NB>(n, a, rdiag) : 0;
    if (active) {
      info[b] = fail;
      T* c = pipe.out_a ? t.a : C.matrix(b);
      const long long ldc = pipe.out_a ? n : C.ldim(b);
      const long long crs = lower ? 1 : ldc, ccs = lower ? ldc : 1;
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int i = j; i < NB; ++i)
          if (i < n) {
            c[i * crs + j * ccs] = bdf::conj_if(a[i][j], !lower);
            if (pipe.out_a && zero && i != j) c[j * crs + i * ccs] = T(0);
          }
    }
    if (pipe.out_a) t.flush_a(C.matrix(t.b0));

    // 3. POSV: each right-hand side in registers (failed: LAPACK's xPOSV leaves X = B)
    if constexpr (SOLVE)
      bdf::warp_pipe_solves<NB>(t, active, n, nrhs, B, b_col, X, x_col, stage_x, fail != 0,
                                [&](T (&x)[NB]) { bdf::potrs_regs<NB>(n, a, rdiag, x, conj_l); });
  });
}

// --- rows design -----------------------------------------------------------------------

constexpr int POTRF_ROWS_BLOCK = 128;

// S = the named triangle of the stored view as L's rows (row-major, ld lds).  Lane r reads
// row r of every stored column (consecutive lanes on consecutive elements: coalesced in
// either orientation), all of them into registers before the first store: a loop that
// stored each element as it arrived waited one memory latency per column.
template <int NB, typename T>
__device__ __forceinline__ void potrf_rows_load(int lane, int n, const T* a, long long lda, bool lower, T* S,
                                                int lds) {
  if (lane >= n) return;
  T v[NB];
#pragma unroll
  for (int s = 0; s < NB; ++s) v[s] = s < n && potrf_named(lower, lane, s) ? a[lane + s * lda] : T(0);
#pragma unroll
  for (int s = 0; s < NB; ++s) {
    if (s >= n) break;
    if (!potrf_named(lower, lane, s)) continue;
    if (lower) S[lane * lds + s] = v[s];
    else S[s * lds + lane] = bdf::conj_if(v[s], true);
  }
}

// C's elements (the stored view, column-major) from the group's S: the named triangle
// from L, the other one zeros or A's values (unless C is A).  Lane r writes row r of every
// stored column; A's values are all loaded before C is written (C may be A, so a load
// after a store could not be moved ahead of it).
template <int NB, typename T>
__device__ __forceinline__ void potrf_rows_store(int lane, int n, const T* S, int lds, const T* a, long long lda,
                                                 T* c, long long ldc, int flags) {
  const bool lower = flags & POTRF_LOWER, zero = flags & POTRF_ZERO_OTHER, inplace = flags & POTRF_INPLACE;
  if (lane >= n) return;
  const int r = lane;
  const bool copy = !zero && !inplace;  // the other triangle comes from A
  T v[NB];
#pragma unroll
  for (int s = 0; s < NB; ++s) v[s] = s < n && copy && !potrf_named(lower, r, s) ? a[r + s * lda] : T(0);
#pragma unroll
  for (int s = 0; s < NB; ++s) {
    if (s >= n) break;
    if (potrf_named(lower, r, s)) c[r + s * ldc] = lower ? S[r * lds + s] : bdf::conj_if(S[s * lds + r], true);
    else if (zero || copy) c[r + s * ldc] = v[s];
  }
}

// Item = one matrix per group of L lanes; the same arguments and flags as
// potrf_fused_kernel.  A warp takes its 32 / L matrices together (a warp-uniform loop:
// every shuffle and __syncwarp has all lanes).  The named triangle reaches S column by
// stored column, lane r reading row r (consecutive lanes on consecutive elements,
// coalesced in either orientation), and C leaves the same way after the solves.  C may
// alias A: the whole triangle is in S before C is written.  X may alias B: each lane reads
// its element of a right-hand side before the group's shuffles and writes after them.
template <class Mat, class Vec, int NB, int L, bool SOLVE>
__global__ void __launch_bounds__(POTRF_ROWS_BLOCK)
potrf_rows_kernel(Mat A, Mat C, Vec B, long long b_col, Vec X, long long x_col, int nrhs, int* info, int flags,
                  long long count, int /*n_max*/) {
  using T = typename Mat::value_type;
  using R = typename bdf::real_of<T>::type;
  static_assert(NB >= 1 && NB <= L && L <= 32 && (L & (L - 1)) == 0, "a power-of-two group of lanes per matrix");
  constexpr int LDS = NB + 1, PER_WARP = 32 / L, WARPS = POTRF_ROWS_BLOCK / 32, GROUPS = POTRF_ROWS_BLOCK / L;
  __shared__ __align__(16) unsigned char raw[GROUPS * NB * LDS * sizeof(T)];
  const int wl = int(threadIdx.x & 31u), lane = wl % L;
  T* S = reinterpret_cast<T*>(raw) + (threadIdx.x / L) * NB * LDS;
  const bool lower = flags & POTRF_LOWER, conj_l = flags & POTRF_CONJ_SOLVE;
  const long long first = ((long long)blockIdx.x * WARPS + threadIdx.x / 32) * PER_WARP;
  for (long long w0 = first; w0 < count; w0 += (long long)gridDim.x * WARPS * PER_WARP) {
    const long long b = w0 + wl / L;
    const bool active = b < count;
    const int n = active ? A.rows(b) : 0;
    const int steps = __reduce_max_sync(0xffffffffu, n);
    const T* a = active ? A.matrix(b) : nullptr;
    const long long lda = active ? A.ldim(b) : 0;
    // the first right-hand side is read with the matrix, so both latencies overlap
    T x = T(0);
    if (SOLVE && nrhs > 0 && lane < n) x = B.vector(b)[lane * B.inc];
    potrf_rows_load<NB>(lane, n, a, lda, lower, S, LDS);
    T row[NB];
    R rdiag;
    const int fail = bdf::potrf_rows<NB, L>(lane, n, steps, row, S, LDS, rdiag);  // syncwarps on entry and exit
    if (active && lane == 0) info[b] = fail;
    for (int rhs = 0; SOLVE && rhs < nrhs; ++rhs) {  // every lane (shuffles); a failed matrix keeps X = B
      if (rhs > 0 && lane < n) x = B.vector(b)[rhs * b_col + lane * B.inc];
      bdf::potrs_rows<NB, L>(lane, fail ? 0 : n, steps, row, S, LDS, rdiag, x, conj_l);
      if (lane < n) X.vector(b)[rhs * x_col + lane * X.inc] = x;
    }
    // C last: the row registers are free by now for the loads of A's other triangle
    if (active) potrf_rows_store<NB>(lane, n, S, LDS, a, lda, C.matrix(b), C.ldim(b), flags);
    __syncwarp();  // S is refilled by the next turn
  }
}

