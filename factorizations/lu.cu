// Batched LU with partial pivoting (GETRF), the fused factor-and-solve (GESV) and
// the row interchanges of GETRS (LASWP).  One kernel body per design for the three
// batch layouts (the MatA / Vec / IVec accessors of layouts.cuh).
//
// Fused design (getrf_fused_kernel, max(m, n) <= NB, NB <= 64): one thread group of
//   G threads per matrix (G <= 32: several groups share a block; G = 64: the block).
//   The whole matrix is loaded into shared memory (NB + 1 leading dimension: odd, so
//   the row swaps' strided accesses hit distinct banks), factored by bdf::getf2_tile,
//   written back; with nrhs > 0 every right-hand side is then permuted into shared
//   memory and solved by bdf::getrs_tile: GESV in one launch, A read once.
// Blocked design (getrf_blocked_kernel, any n whose panel fits): one block of G threads
//   per matrix, the matrix in global memory (the output, already holding A), a loop
//   over panels of NB columns: the panel (all rows below k0) is loaded into shared
//   memory and factored by bdf::getf2_tile; its interchanges are applied to the
//   columns left and right of it; U12 = L11^{-1} A12 is solved one column per warp by
//   bdf::trsv_tile with L11 in shared memory; A22 -= L21 U12 by bdf::gemm_tile tiles
//   with L21 read from shared memory.
// Thread design (getrf_thread_kernel, max(m, n) <= NB <= 8): one thread per matrix,
//   the whole matrix in its registers, factored by bdf::getf2_regs and, with nrhs > 0,
//   each right-hand side permuted and solved by bdf::getrs_regs: GESV in one launch
//   with no barrier and no shuffle.  A warp takes chunks of 32 consecutive matrices;
//   when they are one packed run in memory (uniform accessor, ld = rows, stride =
//   rows * cols: checked at run time), the warp copies its next chunks into shared
//   memory (cp.async, coalesced) while it factors the current one, each lane reads its
//   own matrix from there, and the factors and X go back the same way; otherwise
//   every thread reads and writes its own elements directly.  Its direct kernel
//   (getrf_direct_kernel, uniform layout) is for packed NB x NB matrices at a 16-byte
//   aligned address: no pipeline, each thread loads its matrix in 16-byte pieces.
// Rows design (getrf_rows_kernel, max(m, n) <= NB <= 32): a group of L lanes per matrix,
//   lane i holding rows i, i + L, .. in registers (bdf::getf2_rows), the pivot rows
//   broadcast through shared memory; for real types its direct kernel
//   (getrf_rows_direct_kernel) solves packed NB x NB batches for X alone, m = n = NB at
//   compile time.
// Cols design (getrf_cols_kernel, max(m, n) <= NB = 16, real 4-byte elements): a group
//   of L lanes per matrix, each holding column pieces of every row in registers
//   (bdf::getf2_cols: the owner of a column searches its pivot alone and shuffles the
//   multipliers); its direct kernel (getrf_cols_direct_kernel) solves packed NB x NB
//   batches at a 16-byte aligned address for X alone, with m = n = NB at compile time.
// Warps design (getrf_warps_kernel, max(m, n) <= NB = 64 or 128): one block per matrix,
//   held in registers (bdf::getf2_warps: lane i of every warp rows i, i + 32, .., warp w
//   the columns w, w + W, ..), entering and leaving through shared memory, where GESV
//   solves by bdf::getrs_tile in the same launch.
// Panels design (getrf_panels_kernel, max(m, n) <= NB = 96 or 128): the warps design's block,
//   the matrix factored where it lies in shared memory (bdf::getf2_panels: a panel warp
//   and update warps), the first right-hand side riding as column n; its direct kernel
//   (getrf_panels_direct_kernel, uniform layout) solves for X alone (threshold pivots,
//   L not kept in order with one right-hand side).
// LASWP (laswp_kernel): a thread per (matrix, right-hand side) applies the pivots
//   in order (or in reverse order) to its column.
#include "common.cuh"
#include "gemm.cuh"
#include "layouts.cuh"
#include "lu.cuh"
#include "stage.cuh"
#include "trsv.cuh"
#include "vector.cuh"
#include "warp_pipeline.cuh"

// Launch flags of the fused kernel.
#define LU_A_TRANS 1   // A's accessor is the transposed (column-major) view of the user's matrix
#define LU_WRITE_LU 2  // store the factors (solve() needs only X)
#define LU_WRITE_PIV 4 // store ipiv (1-based)

__host__ __device__ constexpr int lu_fused_block_threads(int group) { return group > 32 ? group : 256; }

// Bytes of one fused group's shared memory: the NB x NB matrix (ld NB + 1), x (NB), the
// reduction work, and the pivots and the permutation (NB ints each).  The same sum as
// LuSetting.group_bytes in lu_settings.py.
template <typename T, int NB, int G> __host__ __device__ constexpr int lu_fused_group_bytes() {
  return ((NB + 1) * NB * int(sizeof(T)) + NB * int(sizeof(T)) + bdf::lu_work_bytes<T>(G) + 2 * NB * 4 + 15) / 16 *
         16;
}

// The outputs of a factorization held in shared memory by a group of G threads (fused
// and warps designs): info, the pivots (spiv, 0-based; stored 1-based), the factors (s,
// column-major, leading dimension lds) into LU, and with nrhs > 0 (m == n) each
// right-hand side x = U^{-1} L^{-1} (P b) by bdf::getrs_tile, row i of P b being row
// perm[i] of b; `first` (or null) holds the first column of B, read earlier.  `rode` (or
// null): the first right-hand side rode through the factorization as column n of s, which
// holds L^{-1} P b, so only U x = y is left for it.  A singular matrix leaves X = B, as
// LAPACK's xGESV.  X may alias B: each column is read whole before it is written.  Ends
// after a barrier.
template <int G, class MatA, class Vec, class IVec, typename T>
__device__ void lu_tile_outputs(bdf::ThreadGroup<G> g, long long b, int m, int n, int fail, const T* s, int lds,
                                const int* spiv, const int* perm, const T* first, MatA LU, IVec piv, int* info,
                                Vec B, long long b_col, Vec X, long long x_col, int nrhs, int flags, T* sx,
                                T* work, const T* rode = nullptr) {
  const int kmin = m < n ? m : n;
  if (g.rank == 0) info[b] = fail;
  if (flags & LU_WRITE_PIV) {
    int* p = piv.vector(b);
    for (int j = g.rank; j < kmin; j += G) p[j * piv.inc] = spiv[j] + 1;
  }
  if (flags & LU_WRITE_LU) {  // the output is column-major
    T* lu = LU.matrix(b);
    const long long ldl = LU.ldim(b);
    for (int e = g.rank; e < m * n; e += G) {
      const int j = e / m, i = e - j * m;
      lu[i + j * ldl] = s[i + j * lds];
    }
  }
  for (int c = 0; c < nrhs; ++c) {
    const T* bv = B.vector(b) + c * b_col;
    const bool stored = first != nullptr && c == 0;
    T* xv = X.vector(b) + c * x_col;
    if (fail) {  // LAPACK's xGESV does not solve: X = B
      for (int i = g.rank; i < n; i += G) xv[i * X.inc] = stored ? first[i] : bv[i * B.inc];
      continue;  // uniform over the group
    }
    const bool ridden = rode != nullptr && c == 0;
    for (int i = g.rank; i < n; i += G)
      sx[i] = ridden ? rode[i] : stored ? first[perm[i]] : bv[(long long)perm[i] * B.inc];
    bdf::getrs_tile<T, G>(g, n, s, lds, sx, work, !ridden);  // begins and ends with a barrier
    for (int i = g.rank; i < n; i += G) xv[i * X.inc] = sx[i];
  }
  g.sync();  // s, sx and the caller's arrays are refilled by the next matrix
}

// Item = one matrix.  LU may alias A (overwrite_a: each group reads its whole matrix
// into shared memory before writing any of it); X may alias B (overwrite_b: each column
// is read completely before it is written).
// Blocks that must fit an SM's registers (ptxas's budget, __launch_bounds__): for one group
// (G > 32) as many as its shared memory admits, at most 10; two blocks of sub-warp groups.
// Without it ptxas took 128 registers for NB = G = 64 in float (10 blocks ran with 96) and
// 127-159 for the sub-warp groups once getrs_tile's solve became trsv_window.
template <typename T, int NB, int G> __host__ __device__ constexpr int lu_fused_min_blocks() {
  constexpr int by_smem = 227 * 1024 / lu_fused_group_bytes<T, NB, G>();
  return G <= 32 ? 2 : by_smem < 1 ? 1 : by_smem > 10 ? 10 : by_smem;
}

template <class MatA, class Vec, class IVec, int NB, int G>
__global__ void __launch_bounds__(lu_fused_block_threads(G), (lu_fused_min_blocks<typename MatA::value_type, NB, G>()))
getrf_fused_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                   int nrhs, int flags, long long count) {
  using T = typename MatA::value_type;
  constexpr int LD = NB + 1;
  constexpr int GROUP_BYTES = lu_fused_group_bytes<T, NB, G>();
  extern __shared__ __align__(16) unsigned char smem[];
  const int groups = blockDim.x / G;
  const int group = threadIdx.x / G;
  // per group: s (LD * NB), sx (NB), work, spiv (NB), sperm (NB)
  T* s = reinterpret_cast<T*>(smem + (long long)group * GROUP_BYTES);
  T* sx = s + LD * NB;
  unsigned char* work = reinterpret_cast<unsigned char*>(sx + NB);
  int* spiv = reinterpret_cast<int*>(work + bdf::lu_work_bytes<T>(G));
  int* sperm = spiv + NB;
  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  const bool a_trans = flags & LU_A_TRANS;

  for (long long b = (long long)blockIdx.x * groups + group; b < count; b += (long long)gridDim.x * groups) {
    // the user's m x n matrix; the accessor holds its view (transposed when a_trans)
    const int m = a_trans ? A.cols(b) : A.rows(b);
    const int n = a_trans ? A.rows(b) : A.cols(b);
    const T* a = A.matrix(b);
    const long long lda = A.ldim(b);
    const int total = m * n;
    if (a_trans) {  // consecutive threads read consecutive elements of a row-major matrix
      for (int e = g.rank; e < total; e += G) {
        const int i = e / n, j = e - i * n;
        s[i + j * LD] = a[j + i * lda];
      }
    } else {
      for (int e = g.rank; e < total; e += G) {
        const int j = e / m, i = e - j * m;
        s[i + j * LD] = a[i + j * lda];
      }
    }
    const int fail = bdf::getf2_tile<G>(g, m, n, s, LD, spiv, work);  // begins and ends with a barrier
    if (nrhs > 0) {  // GESV: the launcher guarantees m == n
      if (g.rank == 0) {  // P as a permutation: row i of P B is row sperm[i] of B
        for (int i = 0; i < n; ++i) sperm[i] = i;
        for (int j = 0; j < n; ++j) {
          const int t = sperm[j];
          sperm[j] = sperm[spiv[j]];
          sperm[spiv[j]] = t;
        }
      }
      g.sync();
    }
    lu_tile_outputs(g, b, m, n, fail, s, LD, spiv, sperm, static_cast<const T*>(nullptr), LU, piv, info, B, b_col,
                    X, x_col, nrhs, flags, sx, reinterpret_cast<T*>(work));  // ends with a barrier
  }
}

// --- thread design -------------------------------------------------------------------

// The register array of one matrix may hold at most this many bytes: 64 doubles, 128 of
// a thread's 255 registers, leaving room for the row swap's temporaries, x (NB
// elements), the pivots and addresses without spilling.  NB = 8 fits float, double and
// complex64; complex128 takes NB = 4 (an 8 x 8 complex128 matrix alone would need 256
// registers).  The same rule as LU_THREAD_REG_BYTES in lu_settings.py (fits() and the
// registered instantiations).
constexpr int LU_THREAD_REG_BYTES = 512;

// Blocks of 128 threads an SM should hold (__launch_bounds__'s minimum, a register cap):
// the pipeline's waits and the factorization's dependent chains are hidden by other
// warps, and without a cap ptxas gives a 2 x 2 or 4 x 4 matrix 110-150 registers.
// Measured with ptxas (sm_90): these caps spill nothing (complex128 at 4 x 4, 256
// bytes, keeps its 184 registers: a cap of 3 blocks spills).
__host__ __device__ constexpr int lu_thread_min_blocks(int matrix_bytes) {
  return matrix_bytes <= 32 ? 5 : matrix_bytes <= 128 ? 4 : 1;
}

// f(i, j) for every element of the leading m x n block of an NB x NB register matrix,
// column by column, the loops unrolled over NB (so a[i][j] stays in registers).
template <int NB, class F>
__device__ __forceinline__ void lu_thread_each(int m, int n, F f) {
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= n) break;
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      if (i >= m) break;
      f(i, j);
    }
  }
}

// a[i][j] = element (i, j) of the m x n matrix at src, column-major with leading
// dimension ld, or row-major (trans: the accessor's view is the transpose); the
// registers outside m x n are left as they are.
template <int NB, typename T>
__device__ __forceinline__ void lu_thread_load(T (&a)[NB][NB], const T* src, long long ld, int m, int n, bool trans) {
  const long long rs = trans ? ld : 1, cs = trans ? 1 : ld;
  lu_thread_each<NB>(m, n, [&](int i, int j) { a[i][j] = src[i * rs + j * cs]; });
}

// Element (i, j) of a, i < m, j < n, to dst[i + j * ld] (the factors are column-major).
template <int NB, typename T>
__device__ __forceinline__ void lu_thread_store(const T (&a)[NB][NB], T* dst, long long ld, int m, int n) {
  lu_thread_each<NB>(m, n, [&](int i, int j) { dst[i + j * ld] = a[i][j]; });
}

// Item = one matrix, one thread; the same arguments and flags as getrf_fused_kernel.
// Each warp takes chunks of 32 consecutive matrices (bdf::warp_pipeline).  When the
// matrices are one packed run (uniform accessor, ld = rows, stride = rows * cols,
// checked at run time) and the launcher gave the shared memory, the warp copies its next
// chunk of matrices (and of the one packed right-hand side) into shared memory while it
// factors the current one from registers; packed factors and solutions leave through the
// chunk's buffers as contiguous runs; pivots and info are stored directly.  Otherwise
// every lane reads and writes its own elements directly.
//
// LU may alias A and X may alias B: a chunk's inputs are all read (into registers or
// shared memory) before any of its outputs is written, and chunks are disjoint.  A
// singular matrix (info > 0) leaves X = B.
template <class MatA, class Vec, class IVec, int NB, int THREADS>
__global__ void __launch_bounds__(THREADS, lu_thread_min_blocks(NB * NB * sizeof(typename MatA::value_type)))
getrf_thread_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                    int nrhs, int flags, long long count) {
  using T = typename MatA::value_type;
  static_assert(NB >= 1 && NB <= 8, "the thread design unrolls over at most 8 x 8");
  static_assert(NB * NB * int(sizeof(T)) <= LU_THREAD_REG_BYTES, "the matrix would not fit in registers");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  constexpr int WARPS = THREADS / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  const bool a_trans = flags & LU_A_TRANS;
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x / 32);

  // The pipeline, uniform over the launch: packed uniform matrices only (their view is
  // n x m when a_trans); the factors and the one right-hand side go through it when
  // they are packed too.
  bool stage_x;
  const bdf::WarpPipe<T> pipe =
      bdf::packed_warp_pipe<NB, T>(smem, warp, WARPS, A, LU, flags & LU_WRITE_LU, nrhs == 1, B, X, stage_x);

  bdf::warp_pipeline(pipe, count, (long long)blockIdx.x * WARPS + warp, (long long)gridDim.x * WARPS, lane,
                     [&](const bdf::WarpTurn<T>& t) {
    const long long b = t.b0 + lane;
    const bool active = b < count;
    // the user's m x n matrix; the accessor holds its view (transposed when a_trans)
    int m = 0, n = 0;
    if (active) {
      m = a_trans ? A.cols(b) : A.rows(b);
      n = a_trans ? A.rows(b) : A.cols(b);
    }
    const int kmin = m < n ? m : n;

    // 1. the matrix into registers (from this lane's slot when pipelined)
    T a[NB][NB];
#pragma unroll
    for (int i = 0; i < NB; ++i)
#pragma unroll
      for (int j = 0; j < NB; ++j) a[i][j] = T(0);
    if (active) lu_thread_load<NB>(a, t.a ? t.a : A.matrix(b), A.ldim(b), m, n, a_trans);
    t.loaded();

    // 2. P A = L U in registers; info and pivots stored directly, the factors
    //    (column-major) through the chunk's A buffer when packed
    int ipiv[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) ipiv[j] = j;
    const int fail = active ? bdf::getf2_regs<NB>(m, n, a, ipiv) : 0;
    const bool out_a = pipe.out_a;
    if (active) {
      info[b] = fail;
      if (flags & LU_WRITE_PIV) {
        int* p = piv.vector(b);
#pragma unroll
        for (int j = 0; j < NB; ++j) {
          if (j >= kmin) break;
          p[j * piv.inc] = ipiv[j] + 1;
        }
      }
      if (flags & LU_WRITE_LU) lu_thread_store<NB>(a, out_a ? t.a : LU.matrix(b), out_a ? m : LU.ldim(b), m, n);
    }
    if (out_a) t.flush_a(LU.matrix(t.b0));

    // 3. GESV (the launcher guarantees m == n): each right-hand side in registers
    //    (singular: LAPACK's xGESV leaves X = B)
    bdf::warp_pipe_solves<NB>(t, active, n, nrhs, B, b_col, X, x_col, stage_x, fail != 0,
                              [&](T (&x)[NB]) { bdf::getrs_regs<NB>(n, a, ipiv, x); });
  });
}

// --- thread design, direct -------------------------------------------------------------

// The thread design for the commonest batch: packed NB x NB matrices (the uniform
// accessor with m = n = NB, ld = NB, stride = NB^2 and a 16-byte aligned base; the
// launcher checks).  Each thread loads its own matrix as one run of 16-byte loads and
// factors and solves it in registers as getrf_thread_kernel does, without the warp
// pipeline.  Why: ncu (H100, SGESV 2 x 2 in getrf_thread_kernel) counted 700 warp
// instructions for each chunk of 32 matrices, mostly the pipeline's bookkeeping (its
// copy loops' run-time divisions and 64-bit addresses), at 94 registers and 31 %
// occupancy.  Here a warp's loads of 16-byte pieces touch the same sectors as the
// pipeline's copies (consecutive lanes hold consecutive runs; a sector read by one
// load serves the lane's next pieces from L1), and the few registers leave room for
// the warps whose loads keep the bytes in flight.  The factors, pivots, right-hand
// side and solution go by vector accesses too where they are packed runs (checked
// here, uniform over the launch), else element by element through the accessors.
//
// Blocks of THREADS = 128 an SM should hold (__launch_bounds__'s minimum, a register
// cap), by the bytes of one matrix.
__host__ __device__ constexpr int lu_direct_min_blocks(int matrix_bytes) {
  return matrix_bytes <= 16 ? 12 : matrix_bytes <= 32 ? 10 : matrix_bytes <= 128 ? 6 : matrix_bytes <= 256 ? 3 : 2;
}

// Item = one matrix, one thread; the same arguments and flags as getrf_thread_kernel.
// LU may alias A and X may alias B: a thread reads all of its matrix (and b) before it
// writes any of its outputs, and threads' matrices are disjoint.  A singular matrix
// (info > 0) leaves X = B.
template <class MatA, class Vec, class IVec, int NB, int THREADS>
__global__ void __launch_bounds__(THREADS, lu_direct_min_blocks(NB * NB * sizeof(typename MatA::value_type)))
getrf_direct_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                    int nrhs, int flags, long long count) {
  using T = typename MatA::value_type;
  constexpr int LEN = NB * NB;
  static_assert(bdf::is_uniform_matrix<MatA>::value, "packed uniform batches only");
  static_assert(NB >= 2 && NB <= 8 && LEN * int(sizeof(T)) <= LU_THREAD_REG_BYTES, "the thread design's sizes");
  const bool a_trans = flags & LU_A_TRANS;
  const bool lu_runs = LU.ld == NB && LU.stride == LEN && bdf::run_aligned<LEN, T>(LU.base);
  const bool piv_runs = piv.inc == 1 && piv.stride == NB && bdf::run_aligned<NB, int>(piv.base);
  const bool b_runs = nrhs == 1 && B.inc == 1 && B.stride == NB && bdf::run_aligned<NB, T>(B.base);
  const bool x_runs = nrhs == 1 && X.inc == 1 && X.stride == NB && bdf::run_aligned<NB, T>(X.base);
  for (long long b = (long long)blockIdx.x * THREADS + threadIdx.x; b < count;
       b += (long long)gridDim.x * THREADS) {
    // 1. the matrix: the user's element (i, j) is run element i + j NB (column-major)
    //    or j + i NB (a_trans: the accessor views a row-major matrix)
    T a[NB][NB];
    {
      T r[LEN];
      bdf::load_run<LEN>(r, A.matrix(b));
#pragma unroll
      for (int i = 0; i < NB; ++i)
#pragma unroll
        for (int j = 0; j < NB; ++j) a[i][j] = bdf::select(a_trans, r[j + i * NB], r[i + j * NB]);
    }
    // 2. P A = L U in registers
    int ipiv[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) ipiv[j] = j;
    const int fail = bdf::getf2_regs<NB>(NB, NB, a, ipiv);
    info[b] = fail;
    if (flags & LU_WRITE_PIV) {
      int p[NB];
#pragma unroll
      for (int j = 0; j < NB; ++j) p[j] = ipiv[j] + 1;
      bdf::store_strided<NB>(piv.vector(b), piv.inc, p, piv_runs);
    }
    if (flags & LU_WRITE_LU) {  // column-major factors
      T* dst = LU.matrix(b);
      if (lu_runs) {
        T r[LEN];
#pragma unroll
        for (int i = 0; i < NB; ++i)
#pragma unroll
          for (int j = 0; j < NB; ++j) r[i + j * NB] = a[i][j];
        bdf::store_run<LEN>(dst, r);
      } else {
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int i = 0; i < NB; ++i) dst[i + j * LU.ld] = a[i][j];
      }
    }
    // 3. GESV: each right-hand side in registers (singular: LAPACK's xGESV leaves X = B)
    for (int rhs = 0; rhs < nrhs; ++rhs) {
      T x[NB];
      bdf::load_strided<NB>(x, B.vector(b) + rhs * b_col, B.inc, b_runs);
      if (!fail) bdf::getrs_regs<NB>(NB, a, ipiv, x);
      bdf::store_strided<NB>(X.vector(b) + rhs * x_col, X.inc, x, x_runs);
    }
  }
}

// --- rows design -----------------------------------------------------------------------

// Rows design (getrf_rows_kernel, max(m, n) <= NB = L R, L <= 32): a group of L lanes
// per matrix, lane i holding rows i, i + L, .. (R of them) in registers
// (bdf::getf2_rows / getrs_rows), 32 / L matrices per warp, LU_ROWS_BLOCK threads per
// block; each group's U rows in static shared memory (the pivot rows' broadcast), no
// barrier beyond __syncwarp.
constexpr int LU_ROWS_BLOCK = 128;

// Blocks of LU_ROWS_BLOCK threads an SM should hold (__launch_bounds__'s minimum, a
// register cap) for `lane_bytes` of a lane's rows: each step is a chain of dependent
// instructions (reduction, broadcast, scale) that only other warps hide.  Up to 128
// bytes: 6 blocks (80 registers), more 4 (128).
__host__ __device__ constexpr int lu_rows_min_blocks(int lane_bytes) { return lane_bytes <= 128 ? 6 : 4; }
// The direct kernel (below) holds seven blocks up to 128 bytes (72 registers, about 24
// bytes spilled): measured on the H100 (GESV X alone, bench/solve.py's batches), DGESV
// 16 x 16 240 us against 245 at six blocks and 245 at eight (64 registers), SGESV 32 x 32
// 325 against 341 and 322; double 32 x 32 spills kilobytes at seven.
__host__ __device__ constexpr int lu_rows_direct_min_blocks(int lane_bytes) { return lane_bytes <= 128 ? 7 : 4; }

// Item = one matrix per group; the same arguments and flags as getrf_fused_kernel.  A warp
// takes its 32 / L matrices together (a warp-uniform loop: every shuffle has all lanes).
// LU may alias A (every lane has read its rows before the group writes); X may alias B
// (the group's lanes read their elements of b before the solve's shuffles, which need
// every lane's, and write x after them).
// DIRECT (getrf_rows_direct_kernel), as the cols design's: the launcher has checked that A
// is one packed run of NB x NB matrices at a 16-byte aligned address (either
// orientation), that X alone is wanted and nrhs = 1, so m = n = NB are compile-time
// constants, the bounds tests fold away and the factors' and pivots' stores and the
// further right-hand sides are not compiled (a group past the batch factors the
// identity and stores nothing).  Measured on the H100 (bench/solve.py's batches, one
// process, the general kernel forced for the other side): DGESV 16 x 16 245 us against
// 273, 32 x 32 324 against 353, SGESV 32 x 32 341 against 400 (before the seven blocks
// of lu_rows_direct_min_blocks), the same X to the bit.  Since session 64 it pivots by
// choose_pivot's threshold keys (no pivot is returned: one warp reduction a step instead
// of three) and leaves the rows out of P A's order (getf2_rows' ORDER: U's rows are read
// where the factorization stored them): DGESV 16 x 16 239.5 -> 201 us, 32 x 32 322.5 ->
// 293.7, SGESV 32 x 32 324 -> 305.7 (H100, one process); X up to rounding (near-ties may
// pivot apart).
template <bool DIRECT, class MatA, class Vec, class IVec, int NB, int L>
__device__ __forceinline__ void getrf_rows_body(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X,
                                                long long x_col, int nrhs, int flags, long long count) {
  using T = typename MatA::value_type;
  constexpr int R = NB / L;  // rows per lane
  static_assert(R >= 1 && R * L == NB && L <= 32 && (L & (L - 1)) == 0, "a power-of-two group of lanes, R rows each");
  constexpr int PER_WARP = 32 / L, WARPS = LU_ROWS_BLOCK / 32, GROUPS = LU_ROWS_BLOCK / L;
  using P16 = bdf::Pack16<T>;
  // A group's NB rows of U and one 16-byte piece more: the rows alone fill a multiple of
  // 128 bytes at NB = 16 and 32, which put the same element of every group of a warp in
  // the same banks (ncu, DGESV 16 x 16: the pivot rows' broadcast loads 2-way conflicted,
  // 27 % of the shared wavefronts excessive)
  constexpr int U_ELEMS = NB * bdf::rows_ldu<T>(NB) + P16::W;
  constexpr unsigned ALL = 0xffffffffu;
  __shared__ __align__(16) unsigned char raw[GROUPS * U_ELEMS * sizeof(T)];
  T* U = reinterpret_cast<T*>(raw) + (threadIdx.x / L) * U_ELEMS;
  const int wl = int(threadIdx.x & 31u), lane = wl % L;
  const bool a_trans = flags & LU_A_TRANS;
  const long long first = ((long long)blockIdx.x * WARPS + threadIdx.x / 32) * PER_WARP;
  for (long long w0 = first; w0 < count; w0 += (long long)gridDim.x * WARPS * PER_WARP) {
    const long long b = w0 + wl / L;
    const bool active = b < count;
    // the user's m x n matrix; the accessor holds its view (transposed when a_trans)
    int m = DIRECT ? NB : 0, n = DIRECT ? NB : 0;
    if (!DIRECT && active) {
      m = a_trans ? A.cols(b) : A.rows(b);
      n = a_trans ? A.rows(b) : A.cols(b);
    }
    const int kmin = m < n ? m : n;
    const int steps = DIRECT ? NB : __reduce_max_sync(ALL, kmin), cols = DIRECT ? NB : __reduce_max_sync(ALL, n);
    if (DIRECT) nrhs = 1;
    T a[R][NB], b0[R];  // the lane's rows and their elements of the first right-hand side
#pragma unroll
    for (int r = 0; r < R; ++r) {
      b0[r] = T(0);
#pragma unroll
      for (int c = 0; c < NB; ++c) a[r][c] = T(DIRECT && !active && lane + r * L == c);
    }
    // Real types (REAL): the user's rows contiguous (a C-ordered batch) in whole 16-byte
    // pieces go through U (bdf::load_rows_staged: coalesced copies), b rides through the
    // factorization (getf2_rows' with_b) and U's rows are divided by their diagonal before
    // the solves (rows_scale_u).  For complex types ptxas spilled hundreds of bytes to
    // kilobytes under the register cap with those, and CGESV 16 x 16 and 32 x 32 ran 12-14 %
    // slower (H100): they load, solve and divide as before.
    constexpr bool REAL = !bdf::is_complex_v<T>;
    bool staged = false;
    if constexpr (REAL) {
      const T* src = active ? A.matrix(b) : nullptr;
      const long long ld = active ? A.ldim(b) : 0;
      staged = __all_sync(ALL, !active || (a_trans && n % P16::W == 0 &&
                                           reinterpret_cast<unsigned long long>(src) % 16 == 0 &&
                                           ld * (long long)sizeof(T) % 16 == 0));
      if (staged) bdf::load_rows_staged<NB, L>(lane, active ? m : 0, n, src, ld, U, a);
    }
    if (!staged && active) {  // consecutive lanes read consecutive elements of a column-major matrix
      const T* src = A.matrix(b);
      const long long ld = A.ldim(b), rs = a_trans ? ld : 1, cs = a_trans ? 1 : ld;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = lane + r * L;
        if (row < m) {
          // Columns past n read column 0 again: the loads need no predicate (ncu: 32
          // predicated loads with 64-bit offsets cost 1,100 instructions a matrix), and
          // those columns are never used (no pivot, no solve, no store reads them).
          const T* p0 = src + row * rs;
          const T* p = p0;
#pragma unroll
          for (int c = 0; c < NB; ++c) {
            a[r][c] = *(c < n ? p : p0);
            p += cs;
          }
        }
        // b with the matrix, so that both latencies overlap (here, not after the loop:
        // there ptxas spilled more for complex types)
        if (nrhs > 0 && row < n) b0[r] = B.vector(b)[row * B.inc];
      }
    }
    // The staged matrices' b.  REAL: b rides through the factorization as one more
    // column, L^{-1} P b at the end; complex: the solve needs (P b)_i, known only after the
    // factorization, shuffled from the lane that read it.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = lane + r * L;
      if (staged && active && nrhs > 0 && row < n) b0[r] = B.vector(b)[row * B.inc];
    }
    int orig[R], my_piv[R];
    // DIRECT (X alone, m = n = NB, real: b rides along): choose_pivot's threshold pivots (one
    // reduction a step) and the rows left out of P A's order (getf2_rows' ORDER)
    constexpr bool X_ALONE = DIRECT && REAL;
    const int fail = bdf::getf2_rows<NB, L, T, R, !DIRECT, !X_ALONE>(lane, m, n, steps, a, orig, my_piv, U,
                                                                     REAL && nrhs > 0, b0);
    if (active && lane == 0) info[b] = fail;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (DIRECT) break;
      const int row = lane + r * L;
      if ((flags & LU_WRITE_PIV) && row < kmin) piv.vector(b)[row * piv.inc] = my_piv[r] + 1;
      if ((flags & LU_WRITE_LU) && row < m) {  // row `row` of the column-major factors
        T* dst = LU.matrix(b) + row;
        const long long ldl = LU.ldim(b);
#pragma unroll
        for (int c = 0; c < NB; ++c) {
          if (c >= n) break;
          *dst = a[r][c];
          dst += ldl;
        }
      }
    }
    if (nrhs == 0) continue;
    // GESV (the launcher guarantees m == n): one right-hand side at a time, row i taking
    // (P b)_i, the element of b at its row's origin, and ending with x_i (REAL: the first
    // from the factorization's L^{-1} P b).  Every lane takes part (the shuffles); a
    // singular matrix solves nothing (n = 0 there): LAPACK's xGESV leaves X = B, so its
    // rows take b_i itself (REAL: read again; X, which may alias B, is written after every
    // read of the lane's own rows).
    bdf::PivotScale<T> scale[R];  // REAL: U's diagonal scales (complex: getrs_rows_upper reads them itself)
    if constexpr (REAL) bdf::rows_scale_u<NB, L, T, R, X_ALONE>(lane, fail ? 0 : n, a, U, scale);
    for (int c = 0; c < nrhs; ++c) {
      T x[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = lane + r * L, from = fail ? row : orig[r];  // orig = row past m
        if (c == 0 && !REAL) {  // from b0: lane from % L holds it as b0[from / L]
          x[r] = T(0);
#pragma unroll
          for (int q = 0; q < R; ++q) {
            const T v = bdf::shfl_from(b0[q], from % L, ALL, L);
            if (from / L == q) x[r] = v;
          }
        } else if (REAL && c == 0 && !fail) {
          x[r] = b0[r];
        } else {
          x[r] = active && row < n ? B.vector(b)[c * b_col + from * B.inc] : T(0);
        }
      }
      if (c > 0 || !REAL) bdf::getrs_rows_lower<NB, L>(lane, fail ? 0 : n, cols, a, x);
      bdf::getrs_rows_upper<NB, L, REAL>(lane, fail ? 0 : n, cols, a, U, scale, x);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = lane + r * L;
        if (active && row < n) X.vector(b)[c * x_col + row * X.inc] = x[r];
      }
    }
  }
}

template <class MatA, class Vec, class IVec, int NB, int L>
__global__ void __launch_bounds__(LU_ROWS_BLOCK, lu_rows_min_blocks(NB / L * NB * sizeof(typename MatA::value_type)))
getrf_rows_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                  int nrhs, int flags, long long count) {
  getrf_rows_body<false, MatA, Vec, IVec, NB, L>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags, count);
}

template <class MatA, class Vec, class IVec, int NB, int L>
__global__ void __launch_bounds__(LU_ROWS_BLOCK, lu_rows_direct_min_blocks(NB / L * NB * sizeof(typename MatA::value_type)))
getrf_rows_direct_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                         int nrhs, int flags, long long count) {
  getrf_rows_body<true, MatA, Vec, IVec, NB, L>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags, count);
}

// --- cols design -----------------------------------------------------------------------

// Cols design (getrf_cols_kernel, max(m, n) <= NB, real elements of 4 bytes): a group of
// L lanes per matrix, lane k holding the column pieces k, k + L, .. (W = 16 / sizeof(T)
// columns each) of every row in registers (bdf::getf2_cols / getrs_cols), 32 / L
// matrices per warp, LU_COLS_BLOCK threads per block; no shared memory, no barrier.
// The first right-hand side rides through the factorization, replicated on the group's
// lanes.  Blocks an SM should hold: 5 of 64 threads, three warps a scheduler (168
// registers; a lane's columns alone are 128 for float32 16 x 16 with L = 2, so ptxas
// spills about 300 bytes).  Why: the design waits on its dependent chains (pivot search,
// shuffle, scale, shuffle, update), which only more warps hide; measured on the H100
// (bench/solve.py's SGESV 16 batch), three warps a scheduler with the spills ran 189 us
// (random matrices 243), two without (210 registers) 204 (252).
constexpr int LU_COLS_BLOCK = 64, LU_COLS_MIN_BLOCKS = 5;

// One matrix per group; the same arguments and flags as getrf_fused_kernel.  A warp takes
// its 32 / L matrices together (a warp-uniform loop: every shuffle has all lanes).  LU
// may alias A (a lane reads and writes only its own columns of the column-major factors:
// in place, A is column-major); X may alias B (every lane reads b before the solve's
// shuffles and writes its pieces of x after them; a singular matrix writes b back).
// DIRECT (getrf_cols_direct_kernel): the launcher has checked that A is one packed run of
// NB x NB matrices at a 16-byte aligned address (either orientation), that X alone is
// wanted and nrhs = 1, so m = n = NB are compile-time constants, every bounds test folds
// away and the paths for other shapes and outputs are not compiled: the same getf2_cols
// and getrs_cols in less code (a lane past the batch factors the identity and stores
// nothing).  Why: measured with ncu on the H100, the general kernel's code (12.9k
// instructions) stalled on instruction fetch 2.6 times as often as an 8.9k prototype;
// this one is 9.3k (SGESV 16 on the H100: 303 us with every path of the general kernel,
// 240 without the factors', 209 with one right-hand side fixed).
template <bool DIRECT, class MatA, class Vec, class IVec, int NB, int L>
__device__ __forceinline__ void getrf_cols_body(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X,
                                                long long x_col, int nrhs, int flags, long long count) {
  using T = typename MatA::value_type;
  constexpr int C = NB / L, W = 16 / int(sizeof(T));  // a lane's columns; columns (or rows) a 16-byte piece
  static_assert(!bdf::is_complex_v<T> && C % W == 0 && NB % W == 0, "real elements, whole pieces a lane");
  constexpr int PER_WARP = 32 / L, WARPS = LU_COLS_BLOCK / 32;
  constexpr unsigned ALL = 0xffffffffu;
  using P16 = bdf::Pack16<T>;
  const int wl = int(threadIdx.x & 31u), k = wl % L, base = wl - k;
  const bool a_trans = flags & LU_A_TRANS;
  const long long first = ((long long)blockIdx.x * WARPS + threadIdx.x / 32) * PER_WARP;
  for (long long w0 = first; w0 < count; w0 += (long long)gridDim.x * WARPS * PER_WARP) {
    const long long b = w0 + wl / L;
    const bool active = b < count;
    int m = DIRECT ? NB : 0, n = DIRECT ? NB : 0;  // the user's m x n matrix (the accessor: transposed when a_trans)
    if (!DIRECT && active) {
      m = a_trans ? A.cols(b) : A.rows(b);
      n = a_trans ? A.rows(b) : A.cols(b);
    }
    const int kmin = m < n ? m : n;
    const int steps = DIRECT ? NB : __reduce_max_sync(ALL, kmin), ncols = DIRECT ? NB : __reduce_max_sync(ALL, n);
    // 1. the lane's columns (zero outside the m x n matrix; DIRECT past the batch: the
    //    identity) and b, replicated
    T a[NB][C], y[NB];
    // y[0 .. n) = b at bv (y zero beyond): 16-byte pieces when b is a packed aligned run
    auto load_b = [&](const T* bv) {
      if (B.inc == 1 && n == NB && bdf::run_aligned<NB, T>(bv)) {
        bdf::load_run<NB>(y, bv);
        return;
      }
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        if (i >= n) break;
        y[i] = bv[i * B.inc];
      }
    };
#pragma unroll
    for (int r = 0; r < NB; ++r) {
      y[r] = T(0);
#pragma unroll
      for (int c = 0; c < C; ++c) a[r][c] = T(DIRECT && r == bdf::cols_col<L, W>(k, c));
    }
    if (active) {
      const T* src = A.matrix(b);
      const long long ld = DIRECT ? NB : A.ldim(b);
      const bool aligned =
          DIRECT || (reinterpret_cast<unsigned long long>(src) % 16 == 0 && ld * (long long)sizeof(T) % 16 == 0);
      if (aligned && a_trans && n == NB) {  // the user's rows: pieces of W columns
        // rows past m read row 0 again and are zeroed: no branch between the loads, all
        // of them in flight together
        const T* row = src + bdf::cols_col<L, W>(k, 0);
#pragma unroll
        for (int r = 0; r < NB; ++r) {
          const T* at = r < m ? row : src + bdf::cols_col<L, W>(k, 0);
#pragma unroll
          for (int q = 0; q < C / W; ++q) {
            const P16 v = bdf::get_piece(at + q * L * W);
#pragma unroll
            for (int e = 0; e < W; ++e) a[r][q * W + e] = r < m ? v.v[e] : T(0);
          }
          row += ld;
        }
      } else if (aligned && !a_trans && m == NB) {  // the user's columns: pieces of W rows
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const int col = bdf::cols_col<L, W>(k, c);
          if (col >= n) continue;
#pragma unroll
          for (int q = 0; q < NB / W; ++q) {
            const P16 v = bdf::get_piece(src + col * ld + q * W);
#pragma unroll
            for (int e = 0; e < W; ++e) a[q * W + e][c] = v.v[e];
          }
        }
      } else {
        const long long rs = a_trans ? ld : 1, cs = a_trans ? 1 : ld;
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const int col = bdf::cols_col<L, W>(k, c);
          if (col >= n) continue;
#pragma unroll
          for (int r = 0; r < NB; ++r) {
            if (r >= m) break;
            a[r][c] = src[r * rs + col * cs];
          }
        }
      }
      if (DIRECT || nrhs > 0) load_b(B.vector(b));
    }
    // 2. P A = L U, the first right-hand side riding: y = L^{-1} P b
    bdf::Pivots16 ipiv;
    const int fail = bdf::getf2_cols<NB, L, W>(k, base, m, n, steps, a, ipiv, y, DIRECT || nrhs > 0);
    if (active && k == 0) {
      info[b] = fail;
      if (!DIRECT && (flags & LU_WRITE_PIV)) {
        int* pv = piv.vector(b);
#pragma unroll
        for (int j = 0; j < NB; ++j) {
          if (j >= kmin) break;
          pv[j * piv.inc] = ipiv[j] + 1;
        }
      }
    }
    if (!DIRECT && active && (flags & LU_WRITE_LU)) {  // the lane's columns of the column-major factors
      T* dst = LU.matrix(b);
      const long long ldl = LU.ldim(b);
      const bool vec = m == NB && reinterpret_cast<unsigned long long>(dst) % 16 == 0 &&
                       ldl * (long long)sizeof(T) % 16 == 0;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int col = bdf::cols_col<L, W>(k, c);
        if (col >= n) continue;
        if (vec) {
#pragma unroll
          for (int q = 0; q < NB / W; ++q) {
            P16 v;
#pragma unroll
            for (int e = 0; e < W; ++e) v.v[e] = a[q * W + e][c];
            *reinterpret_cast<P16*>(dst + col * ldl + q * W) = v;
          }
        } else {
#pragma unroll
          for (int r = 0; r < NB; ++r) {
            if (r >= m) break;
            dst[col * ldl + r] = a[r][c];
          }
        }
      }
    }
    // 3. GESV (the launcher guarantees m == n): each right-hand side replicated on the
    //    group's lanes, each lane storing its pieces (i / W) % L == k, 16 bytes each when
    //    x and b allow; a singular matrix stores b (LAPACK's xGESV leaves X = B)
    for (int rhs = 0; rhs < (DIRECT ? 1 : nrhs); ++rhs) {
      const T* bv = active ? B.vector(b) + rhs * b_col : nullptr;
      if (!DIRECT && rhs > 0) {
#pragma unroll
        for (int i = 0; i < NB; ++i) y[i] = T(0);
        if (active) load_b(bv);
      }
      if (!__all_sync(ALL, fail != 0 || !active)) bdf::getrs_cols<NB, L, W>(k, base, fail ? 0 : n, ncols, a, ipiv, y, !DIRECT && rhs > 0);
      __syncwarp(ALL);  // every lane's reads of b are done before any lane writes x (X may alias B)
      if (!active) continue;
      T* xv = X.vector(b) + rhs * x_col;
      const bool pieces = n == NB && X.inc == 1 && bdf::run_aligned<NB, T>(xv) &&
                          (!fail || (B.inc == 1 && bdf::run_aligned<NB, T>(bv)));
      if (pieces) {
#pragma unroll
        for (int q = 0; q < NB / W; ++q) {
          if (q % L != k) continue;
          if (fail)
            *reinterpret_cast<P16*>(xv + q * W) = bdf::get_piece(bv + q * W);
          else
            bdf::put_piece(xv + q * W, y, q * W);
        }
        continue;
      }
#pragma unroll
      for (int i = 0; i < NB; ++i) {
        if (i >= n) break;
        if ((i / W) % L != k) continue;
        xv[i * X.inc] = fail ? bv[i * B.inc] : y[i];
      }
    }
  }
}

template <class MatA, class Vec, class IVec, int NB, int L>
__global__ void __launch_bounds__(LU_COLS_BLOCK, LU_COLS_MIN_BLOCKS)
getrf_cols_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                  int nrhs, int flags, long long count) {
  getrf_cols_body<false, MatA, Vec, IVec, NB, L>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags, count);
}

template <class MatA, class Vec, class IVec, int NB, int L>
__global__ void __launch_bounds__(LU_COLS_BLOCK, LU_COLS_MIN_BLOCKS)
getrf_cols_direct_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                         int nrhs, int flags, long long count) {
  getrf_cols_body<true, MatA, Vec, IVec, NB, L>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags, count);
}

// --- warps design ----------------------------------------------------------------------

// Shared memory of getrf_warps_kernel (NB, THREADS): the matrix (U, then the factors:
// NB + 1 by NB elements), the first right-hand side (NB: column NB of the matrix, where
// the panels design's right-hand side rides when n = NB), the multipliers' two slots (2
// NB) and the solve's vector (NB), getrs_tile's work, then the ints: the step's pivot and
// flag (two slots), spiv and sorig (NB each).  The same sums as LuSetting.warps_bytes in
// lu_settings.py.
template <typename T, int NB, int THREADS> struct WarpsSmem {
  static __host__ __device__ constexpr int align(int v) { return (v + 15) / 16 * 16; }
  static constexpr int sb = NB * (NB + 1) * int(sizeof(T));
  static_assert(sb % 16 == 0, "the right-hand side is column NB of the matrix");
  static constexpr int sl = sb + NB * int(sizeof(T));
  static constexpr int sx = sl + 2 * NB * int(sizeof(T));
  static constexpr int work = align(sx + NB * int(sizeof(T)));
  static constexpr int sstep = align(work + bdf::lu_work_bytes<T>(THREADS));
  static constexpr int spiv = sstep + 4 * 4;
  static constexpr int sorig = spiv + NB * 4;
  static constexpr int total = align(sorig + NB * 4);
};

// Warps design (getrf_warps_kernel, max(m, n) <= NB = 64 or 128): one block of THREADS
// per matrix, factored in registers by bdf::getf2_warps (lane i of every warp holding
// rows i, i + 32, .., warp w the columns w, w + W, ..).  The matrix comes in through
// shared memory (coalesced in either orientation), the factors leave from it, and with
// nrhs > 0 each right-hand side is permuted into shared memory and solved by
// bdf::getrs_tile: GESV in one launch, as fused.  Same arguments and flags as
// getrf_fused_kernel; LU may alias A (the whole matrix is read before any of it is
// written), X may alias B (the first column is read with the matrix, the others before
// their solve).  The panels design (getrf_panels_kernel) is the same kernel with the
// matrix factored where it lies in shared memory by bdf::getf2_panels (a panel warp
// and update warps, panels of LU_PANEL_COLS columns).  Four columns: measured on the
// H100 (session 20, scratch copies of this file side by side, GESV X only, 256 MB of A)
// against 2, 3, 6, 8, 12 and 16: DGESV 128 1.89 ms (2: 2.12, 3: 1.93, 6: 1.96, 8: 2.15,
// 12: 2.23, 16: 3.48), SGESV 128 1.59 (2: 1.77, 3: 1.62, 6: 1.72, 8: 1.86, 12: 3.46),
// DGESV 72 3.40 (8: 3.61), SGESV 72 2.66 (8: 3.14).  Not profiled; ptxas gives float32
// (80 registers for three blocks an SM) 48 bytes of spills against eight columns' 268.
constexpr int LU_PANEL_COLS = 4;

template <bool PANELS, bool X_ALONE, class MatA, class Vec, class IVec, int NB, int THREADS>
__device__ __forceinline__ void getrf_block_body(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col,
                                                 Vec X, long long x_col, int nrhs, int flags, long long count) {
  using T = typename MatA::value_type;
  using SM = WarpsSmem<T, NB, THREADS>;
  constexpr int W = THREADS / 32, R = NB / 32, C = NB / W, LD = NB + 1;
  static_assert(THREADS % 32 == 0 && NB % W == 0, "whole warps, whole columns per warp");
  extern __shared__ __align__(16) unsigned char smem[];
  T* S = reinterpret_cast<T*>(smem);
  T* sl = reinterpret_cast<T*>(smem + SM::sl);
  T* sb = reinterpret_cast<T*>(smem + SM::sb);
  T* sx = reinterpret_cast<T*>(smem + SM::sx);
  unsigned char* work = smem + SM::work;
  int* sstep = reinterpret_cast<int*>(smem + SM::sstep);
  int* spiv = reinterpret_cast<int*>(smem + SM::spiv);
  int* sorig = reinterpret_cast<int*>(smem + SM::sorig);
  const bdf::ThreadGroup<THREADS> g(threadIdx.x);
  const int tid = int(threadIdx.x);
  const bool a_trans = flags & LU_A_TRANS;

  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    // the user's m x n matrix; the accessor holds its view (transposed when a_trans)
    const int m = a_trans ? A.cols(b) : A.rows(b);
    const int n = a_trans ? A.rows(b) : A.cols(b);
    // 1. A into S column-major (consecutive threads read consecutive elements in the
    //    user's orientation; zeros outside m x n) by cp.async, every element of a thread
    //    in flight at once (a loop of loads and stores kept four: the load was
    //    latency-bound; H100, session 64, one process: DGESV 128 1.89 -> 1.78 ms, DGETRF
    //    128 1.72 -> 1.59, DGESV 64 1.11 -> 1.00).  The first right-hand side: the panels
    //    design's rides through the factorization as column n of S (sb is column NB), the
    //    warps design's waits in sb.
    const T* src = A.matrix(b);
    const long long lda = A.ldim(b);
#pragma unroll 4
    for (int q = tid; q < NB * NB; q += THREADS) {
      const int fast = q % NB, slow = q / NB;
      const int i = a_trans ? slow : fast, j = a_trans ? fast : slow;
      const bool in = i < m && j < n;
      bdf::copy_async_zfill<int(sizeof(T))>(S + i + j * LD, in ? src + fast + slow * lda : src,
                                            in ? int(sizeof(T)) : 0);
    }
    bdf::stage_commit();
    const bool ride = PANELS && nrhs > 0;  // (m == n: GESV)
    T* first = ride ? S + n * LD : sb;
    if (nrhs > 0 && !ride)
      for (int i = tid; i < n; i += THREADS) first[i] = B.vector(b)[i * B.inc];
    bdf::stage_wait<0>();
    if (ride) {
      g.sync();  // column n's zeros (n < NB) are in place before b takes it
      for (int i = tid; i < n; i += THREADS) first[i] = B.vector(b)[i * B.inc];
    }
    g.sync();
    // 2. P A = L U (getf2_warps' first barrier comes before anything is written to S)
    int fail;
    if constexpr (PANELS) {
      // X alone (the direct kernel: no factors, no pivots stored) takes threshold pivots;
      // with only the riding right-hand side L is not kept in order
      fail = bdf::getf2_panels<NB, W, LU_PANEL_COLS, !X_ALONE>(m, ride ? n + 1 : n, S, sl, spiv, sorig,
                                                               !X_ALONE || nrhs > 1);
    } else {
      T a[C][R];
      bdf::warps_load<W>(a, S, LD);
      fail = bdf::getf2_warps<NB, W>(m, n, a, S, sl, sstep, spiv, sorig);
    }
    // 3. info, pivots, factors and GESV (the launcher guarantees m == n): b_i at row sorig[i]
    lu_tile_outputs(g, b, m, n, fail, S, LD, spiv, sorig, ride ? static_cast<const T*>(nullptr) : first, LU, piv,
                    info, B, b_col, X, x_col, nrhs, flags, sx, reinterpret_cast<T*>(work),
                    ride ? static_cast<const T*>(first) : nullptr);  // ends with a barrier
  }
}

template <class MatA, class Vec, class IVec, int NB, int THREADS>
__global__ void __launch_bounds__(THREADS)
getrf_warps_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                   int nrhs, int flags, long long count) {
  getrf_block_body<false, false, MatA, Vec, IVec, NB, THREADS>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags,
                                                               count);
}

// Blocks of the panels design an SM should hold: as many as the shared memory takes (228
// KiB an SM, 1 KiB of it reserved a block), so that registers never decide: float32 at
// 128 x 128 with 256 threads, 3 blocks (at most 85 registers a thread), each block's
// chain of panel steps hiding the others'; float64, one.
template <typename T, int NB, int THREADS> __host__ __device__ constexpr int lu_panels_min_blocks() {
  const int per_block = WarpsSmem<T, NB, THREADS>::total + 1024, by_smem = 228 * 1024 / per_block;
  return by_smem < 1 ? 1 : by_smem > 65536 / (THREADS * 64) ? 65536 / (THREADS * 64) : by_smem;
}

template <class MatA, class Vec, class IVec, int NB, int THREADS>
__global__ void __launch_bounds__(THREADS, lu_panels_min_blocks<typename MatA::value_type, NB, THREADS>())
getrf_panels_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                    int nrhs, int flags, long long count) {
  getrf_block_body<true, false, MatA, Vec, IVec, NB, THREADS>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags,
                                                              count);
}

// X alone (solve(): the launcher passes neither LU_WRITE_LU nor LU_WRITE_PIV, nrhs >= 1),
// any uniform batch the panels design takes.
template <class MatA, class Vec, class IVec, int NB, int THREADS>
__global__ void __launch_bounds__(THREADS, lu_panels_min_blocks<typename MatA::value_type, NB, THREADS>())
getrf_panels_direct_kernel(MatA A, MatA LU, IVec piv, int* info, Vec B, long long b_col, Vec X, long long x_col,
                           int nrhs, int flags, long long count) {
  getrf_block_body<true, true, MatA, Vec, IVec, NB, THREADS>(A, LU, piv, info, B, b_col, X, x_col, nrhs, flags,
                                                             count);
}

// Blocked design: gemm tiles of the trailing update (16 x 16 threads, 32 x 32 outputs).
constexpr int LU_GEMM_DX = 16, LU_GEMM_DY = 16, LU_GEMM_BLK = 32;

// The shared-memory layout of getrf_blocked_kernel for panel leading dimension lds:
// gemm_tile's sA and sB, the staged U12 block (NB x LU_GEMM_BLK), the panel (lds x NB),
// the reduction work and the panel's pivots.  The same sums as LuSetting.blocked_bytes
// in lu_settings.py.
template <typename T, int NB> struct BlockedSmem {
  static __host__ __device__ constexpr long long align(long long v) { return (v + 15) / 16 * 16; }
  static __host__ __device__ constexpr long long gemm_elems() {
    return bdf::gemm_smem_a<LU_GEMM_BLK, NB>() + bdf::gemm_smem_b<LU_GEMM_BLK, NB>();
  }
  static __host__ __device__ constexpr long long u12() { return align(gemm_elems() * sizeof(T)); }
  static __host__ __device__ constexpr long long panel(int /*lds*/) {
    return u12() + align((long long)NB * LU_GEMM_BLK * sizeof(T));
  }
  static __host__ __device__ constexpr long long work(int lds) {
    return panel(lds) + align((long long)lds * NB * sizeof(T));
  }
  static __host__ __device__ constexpr long long pivots(int lds, int group) {
    return work(lds) + align(bdf::lu_work_bytes<T>(group));
  }
  static __host__ __device__ constexpr long long total(int lds, int group) {
    return pivots(lds, group) + align(NB * 4);
  }
};

// LU holds A on entry (the launcher copied it) and the factors on exit.  lds >= the
// largest m of the batch: the panel's leading dimension in shared memory.
template <class MatA, class IVec, int NB, int G>
__global__ void __launch_bounds__(G)
getrf_blocked_kernel(MatA LU, IVec piv, int* info, int lds, long long count) {
  using T = typename MatA::value_type;
  using SM = BlockedSmem<T, NB>;
  static_assert(G >= 64 && G % 32 == 0 && G == LU_GEMM_DX * LU_GEMM_DY, "one block per matrix, whole warps");
  static_assert(NB <= 32, "U12 is solved by one warp per column (bdf::trsv_tile, at most 32 rows)");
  extern __shared__ __align__(16) unsigned char smem[];
  T* sA = reinterpret_cast<T*>(smem);
  T* sB = sA + bdf::gemm_smem_a<LU_GEMM_BLK, NB>();
  T* sU = reinterpret_cast<T*>(smem + SM::u12());
  T* s = reinterpret_cast<T*>(smem + SM::panel(lds));
  unsigned char* work = smem + SM::work(lds);
  int* spiv = reinterpret_cast<int*>(smem + SM::pivots(lds, G));
  const bdf::ThreadGroup<G> g(threadIdx.x);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int m = LU.rows(b), n = LU.cols(b);
    const int kmin = m < n ? m : n;
    T* a = LU.matrix(b);
    const long long lda = LU.ldim(b);
    int* pv = piv.vector(b);
    int fail = 0;
    for (int k0 = 0; k0 < kmin; k0 += NB) {
      const int jb = min(NB, kmin - k0), mp = m - k0;
      T* panel = a + k0 + (long long)k0 * lda;
      // 1. the panel, rows k0.. of columns k0 .. k0 + jb, into shared memory and factored
      for (int e = g.rank; e < mp * jb; e += G) {
        const int j = e / mp, i = e - j * mp;
        s[i + (long long)j * lds] = panel[i + j * lda];
      }
      const int pf = bdf::getf2_tile<G>(g, mp, jb, s, lds, spiv, work);  // begins and ends with a barrier
      if (pf && !fail) fail = k0 + pf;
      for (int e = g.rank; e < mp * jb; e += G) {
        const int j = e / mp, i = e - j * mp;
        panel[i + j * lda] = s[i + (long long)j * lds];
      }
      for (int j = g.rank; j < jb; j += G) pv[(k0 + j) * piv.inc] = k0 + spiv[j] + 1;
      // 2. the panel's interchanges on the other columns (LAPACK's two xLASWP calls);
      //    a thread per column, its swaps in order
      for (int c = g.rank; c < n - jb; c += G) {
        T* col = a + (long long)(c < k0 ? c : c + jb) * lda + k0;
        for (int j = 0; j < jb; ++j) {
          const int p = spiv[j];
          if (p != j) {
            const T t = col[j];
            col[j] = col[p];
            col[p] = t;
          }
        }
      }
      g.sync();  // A12's rows are final, the panel is written back
      const int n2 = n - k0 - jb, m2 = mp - jb;
      if (n2 <= 0) continue;  // uniform: no barrier needed before the next panel load (only the panel was written)
      // 3. U12 = L11^{-1} A12: one warp per column, L11 from shared memory
      for (int c = warp; c < n2; c += G / 32)
        bdf::trsv_tile<T, 32>(lane, jb, s, lds, bdf::OP_N, true, true, panel + (long long)(jb + c) * lda);
      g.sync();  // U12 is written
      // 4. A22 -= L21 U12 by gemm tiles, a block column of U12 at a time staged in shared
      //    memory: gemm_tile reads its operands through const __restrict__ pointers (the
      //    read-only cache path), which must never see this matrix, written in this kernel.
      //    Both operands come from shared memory (L21 from the panel); each output element
      //    is written by its owner only.
      if (m2 > 0) {
        T* a22 = panel + jb + (long long)jb * lda;
        const T* u12 = panel + (long long)jb * lda;
        for (int j0 = 0; j0 < n2; j0 += LU_GEMM_BLK) {
          const int bn = min(LU_GEMM_BLK, n2 - j0);
          g.sync();  // the previous block column's tiles no longer read sU
          for (int e = g.rank; e < jb * bn; e += G) {
            const int j = e / jb, kk = e - j * jb;
            sU[kk + j * NB] = u12[kk + (long long)(j0 + j) * lda];
          }
          // (gemm_tile begins with a barrier: sU is complete before it is staged)
          T* out = a22 + (long long)j0 * lda;
          for (int i0 = 0; i0 < m2; i0 += LU_GEMM_BLK)
            bdf::gemm_tile<T, LU_GEMM_DX, LU_GEMM_DY, LU_GEMM_BLK, LU_GEMM_BLK, NB>(
                g, m2, bn, jb, i0, 0, s + jb, lds, bdf::OP_N, sU, NB, bdf::OP_N, sA, sB,
                [=](int i, int j, T r) { out[i + j * lda] -= r; });
        }
        g.sync();  // A22 is updated before the next panel is loaded
      }
    }
    if (g.rank == 0) info[b] = fail;
    g.sync();  // shared memory is reused by the next matrix
  }
}

// X <- P X (reverse == 0: interchanges 0, 1, ... as LAPACK's xLASWP with incx = 1) or
// P^T X (reverse: the last first).  piv holds 1-based (base = 1) or 0-based (base = 0)
// rows; a pivot outside [0, n) is ignored (never an out-of-bounds access).  n and the
// pivot count come from the factors' accessor (square: rows == cols).
template <class MatA, class Vec, class IVec>
__global__ void laswp_kernel(MatA LU, Vec X, long long x_col, IVec piv, int base, int reverse, long long count,
                             int nrhs) {
  using T = typename MatA::value_type;
  const long long items = count * nrhs;
  for (long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x; item < items;
       item += (long long)gridDim.x * blockDim.x) {
    const long long b = item / nrhs;
    const int c = int(item - b * nrhs);
    const int n = LU.rows(b);
    T* x = X.vector(b) + c * x_col;
    const int* p = piv.vector(b);
    for (int s = 0; s < n; ++s) {
      const int i = reverse ? n - 1 - s : s;
      const int q = p[i * piv.inc] - base;
      if (q != i && q >= 0 && q < n) {
        const T t = x[i * X.inc];
        x[i * X.inc] = x[(long long)q * X.inc];
        x[(long long)q * X.inc] = t;
      }
    }
  }
}
