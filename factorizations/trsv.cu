// Batched triangular solve: X_b = op(A_b)^{-1} B_b, one thread group per (matrix, column of B).
// One kernel body for the three layouts (the MatA / Vec accessors of layouts.cuh) and
// the two designs of MAGMA's batched TRSV:
//   WINDOW == 0 (one-level blocked): the whole x sits in shared memory; each diagonal
//     tile of W unknowns first receives the GEMV update from every unknown solved
//     before it (left-looking), then is solved by bdf::trsv_tile.
//   WINDOW > 0 (recursive): shared memory holds at most WINDOW unknowns, so it stays
//     small for any n; x lives in the output vector.  Windows are solved in order
//     like the blocked design; after window w the recursion's one pending update is
//     applied: the 2^t windows ending at w+1 (t = trailing zeros of w+1) update the
//     next 2^t, as the halving recursion would (left half solved, right half
//     updated by one large GEMV).
// The off-diagonal updates are bdf::gemv_n / bdf::gemv_t with the epilogue x_i -= r.
// A matrix of at most 32 unknowns solved by a group of W >= n lanes takes
// trsv_tile_kernel instead: the tile in registers (bdf::trsv_tile_regs), no shared
// memory, no barrier, b read straight into each lane's unknown.
// The pipelined design (trsv_pipeline_kernel) gives each 32-unknown tile its own warp,
// so that the loads of a tile's row of op(A) wait on nothing but the issue slot.
// The staged design (trsv_staged_kernel, at the end) solves from shared memory that the
// copy engine fills ahead of the warp.
#include "bulk_copy.cuh"
#include "common.cuh"
#include "gemv.cuh"
#include "layouts.cuh"
#include "trsv.cuh"

// Launch flags (uniform over a launch); op(A) is bits 4..5 (bdf::Op).
#define TRSV_LOWER 1  // the stored view is lower triangular
#define TRSV_UNIT 2   // unit diagonal: the diagonal is never read
#define TRSV_CHECK 4  // scan for a zero diagonal: info[b], and X = B for such a matrix (LAPACK)
#define TRSV_ROWS16 8  // every stored column of every matrix starts at a 16-byte boundary
#define TRSV_VECS16 64  // every item's b and x are contiguous (inc 1) from a 16-byte boundary

// Sub-warp groups pack several matrices into one block (the launcher may launch fewer
// than this many threads when the groups' shared memory would not fit).
__host__ __device__ constexpr int trsv_block_threads(int group) { return group > 32 ? group : 256; }

// Rows [lo, lo + len) of the unknowns at solve positions [p0, p1).
__device__ __forceinline__ void trsv_rows(bool forward, int n, int p0, int p1, int& lo, int& len) {
  lo = forward ? p0 : n - p1;
  len = p1 - p0;
}

// Work item = (matrix b, right-hand side c) of a launch: its matrix and its columns of B
// and X.  Both kernels below take items the same way.
template <class MatA, class Vec> struct TrsvItem {
  using T = typename MatA::value_type;
  long long b;
  int c, n;
  const T* a;
  long long lda;
  const T* bv;
  T* xv;
};
template <class MatA, class Vec>
__device__ __forceinline__ TrsvItem<MatA, Vec> trsv_item(const MatA& A, const Vec& B, long long b_col, const Vec& X,
                                                         long long x_col, long long item, int nrhs) {
  const long long b = nrhs == 1 ? item : item / nrhs;
  const int c = int(item - b * nrhs);
  return {b, c, A.rows(b), A.matrix(b), A.ldim(b), B.vector(b) + c * b_col, X.vector(b) + c * x_col};
}

// Work item = (matrix b, right-hand side c).  xlen: the unknowns a group's shared
// memory holds (the largest n for the blocked design, WINDOW for the recursive one).
template <class MatA, class Vec, int DIM_X, int DIM_Y, int WINDOW>
__global__ void __launch_bounds__(trsv_block_threads(DIM_X * DIM_Y))
trsv_kernel(MatA A, Vec B, long long b_col, Vec X, long long x_col, int* info, int flags,
            long long count, int nrhs, int xlen) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int WORK = G > 32 ? G * bdf::GEMV_UNROLL : 0;
  extern __shared__ __align__(16) unsigned char smem[];
  const int groups = blockDim.x / G;
  const int group = threadIdx.x / G;
  // per group: xlen unknowns, the GEMV reduction space, one int for the zero-pivot scan
  const long long group_bytes = ((long long)(xlen + WORK) * sizeof(T) + sizeof(int) + 15) / 16 * 16;
  T* sx = reinterpret_cast<T*>(smem + group * group_bytes);
  T* work = sx + xlen;
  int* flag = reinterpret_cast<int*>(work + WORK);

  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  const bool lower = flags & TRSV_LOWER, unit = flags & TRSV_UNIT, check = flags & TRSV_CHECK;
  const int op = (flags >> 4) & 3;
  const bool forward = bdf::trsv_forward(lower, op);
  const long long items = count * nrhs;
  for (long long item = (long long)blockIdx.x * groups + group; item < items;
       item += (long long)gridDim.x * groups) {
    const auto [b, c, n, a, lda, bv, xv] = trsv_item(A, B, b_col, X, x_col, item, nrhs);
    if (check) {
      const int zero = unit ? 0 : bdf::first_zero_diagonal(g, n, a, lda, flag);
      if (c == 0 && g.rank == 0) info[b] = zero;
      if (zero) {  // LAPACK's xTRTRS leaves B as it was: X = B
        for (int i = g.rank; i < n; i += G) xv[i * X.inc] = bv[i * B.inc];
        continue;  // uniform over the group
      }
    }
    if (WINDOW == 0) {
      for (int i = g.rank; i < n; i += G) sx[i] = bv[i * B.inc];
      g.sync();
      bdf::trsv_window<T, DIM_X, DIM_Y>(g, a, lda, op, forward, unit, 0, n, sx, work);
      for (int i = g.rank; i < n; i += G) xv[i * X.inc] = sx[i];
      g.sync();  // sx is refilled by the next item
      continue;
    }
    for (int i = g.rank; i < n; i += G) xv[i * X.inc] = bv[i * B.inc];
    g.sync();
    const int windows = (n + WINDOW - 1) / WINDOW;
    for (int w = 0; w < windows; ++w) {
      int lo, len;
      trsv_rows(forward, n, w * WINDOW, min(n, (w + 1) * WINDOW), lo, len);
      for (int i = g.rank; i < len; i += G) sx[i] = xv[(lo + i) * X.inc];
      g.sync();
      bdf::trsv_window<T, DIM_X, DIM_Y>(g, a, lda, op, forward, unit, lo, len, sx, work);
      for (int i = g.rank; i < len; i += G) xv[(lo + i) * X.inc] = sx[i];
      g.sync();
      // The recursion's update after window w: windows [w + 1 - 2^t, w + 1) -> [w + 1, w + 1 + 2^t).
      const int span = (w + 1) & -(w + 1);
      const int right_end = min(n, (w + 1 + span) * WINDOW);
      if ((w + 1) * WINDOW >= right_end) continue;
      int r_lo, r_len, c_lo, c_len;
      trsv_rows(forward, n, (w + 1) * WINDOW, right_end, r_lo, r_len);
      trsv_rows(forward, n, (w + 1 - span) * WINDOW, (w + 1) * WINDOW, c_lo, c_len);
      // The solved unknowns pass through shared memory a window at a time.
      for (int k0 = 0; k0 < c_len; k0 += WINDOW) {
        const int kl = min(WINDOW, c_len - k0);
        for (int i = g.rank; i < kl; i += G) sx[i] = xv[(c_lo + k0 + i) * X.inc];
        g.sync();
        bdf::trsv_update<T, DIM_X, DIM_Y>(g, a, lda, op, r_lo, r_len, c_lo + k0, kl, sx, xv + r_lo * X.inc, X.inc,
                                     work);
      }
    }
  }
}

// Single-tile design: n <= W for every matrix of the launch, one group of W lanes per
// work item (matrix b, right-hand side c); the same arguments as trsv_kernel (xlen is
// not used).  Groups never wait on each other: the lane masks are the group's.
template <class MatA, class Vec, int W>
__global__ void __launch_bounds__(256)
trsv_tile_kernel(MatA A, Vec B, long long b_col, Vec X, long long x_col, int* info, int flags, long long count,
                 int nrhs, int /*xlen*/) {
  using T = typename MatA::value_type;
  const int groups = blockDim.x / W;
  const bdf::ThreadGroup<W> g(threadIdx.x % W);
  const bool lower = flags & TRSV_LOWER, unit = flags & TRSV_UNIT, check = flags & TRSV_CHECK;
  const int op = (flags >> 4) & 3;
  const bool forward = bdf::trsv_forward(lower, op);
  const long long items = count * nrhs;
  for (long long item = (long long)blockIdx.x * groups + threadIdx.x / W; item < items;
       item += (long long)gridDim.x * groups) {
    const auto [b, c, n, a, lda, bv, xv] = trsv_item(A, B, b_col, X, x_col, item, nrhs);
    const int row = forward ? g.rank : n - 1 - g.rank;
    T yi = g.rank < n ? bv[row * B.inc] : T(0);
    if (check) {
      const int zero = unit ? 0 : bdf::first_zero_diagonal(g, n, a, lda, nullptr);
      if (c == 0 && g.rank == 0) info[b] = zero;
      if (zero) {  // LAPACK's xTRTRS leaves B as it was: X = B
        if (g.rank < n) xv[row * X.inc] = yi;
        continue;  // uniform over the group
      }
    }
    // the 16-byte pieces' path is compiled for the uniform layout, the only one flagged
    bdf::trsv_tile_regs<T, W, bdf::is_uniform_matrix<MatA>::value>(g.rank, n, a, lda, op, forward, unit, yi,
                                                                    flags & TRSV_ROWS16);
    if (g.rank < n) xv[row * X.inc] = yi;
  }
}

// Thread design (TrsvSetting(1, 1, thread=True)): one thread per work item (matrix b,
// right-hand side c), n <= NB for every matrix of the launch, solved by bdf::trsv_thread
// in registers; the same arguments as trsv_kernel (xlen is not used).  Why: the sub-warp
// tiles of 8 or 16 lanes spend a shuffle, a multiply-add and a predicate per unknown and
// lane and keep one group's loads in flight a row at a time; a thread that owns its matrix
// needs only the multiply-adds, and with 16-byte pieces (the uniform layout with aligned
// columns and n == NB: TRSV_ROWS16; b and x too with TRSV_VECS16) it reads its triangle in
// a few loads that walk its own lines.  A zero diagonal with TRSV_CHECK: info and X = B
// (LAPACK's xTRTRS).
// b (n elements from bv, step inc) into x, zeros past n; in 16-byte pieces when `vecs`
// (n == NB, contiguous, aligned).
template <int NB, typename T>
__device__ __forceinline__ void trsv_thread_load_b(T (&x)[NB], const T* bv, long long inc, int n, bool vecs) {
  if (vecs) {
    bdf::load_run<NB>(x, bv);
  } else {
#pragma unroll
    for (int i = 0; i < NB; ++i) x[i] = i < n ? bv[i * inc] : T(0);
  }
}

template <class MatA, class Vec, int NB>
__global__ void __launch_bounds__(128)
trsv_thread_kernel(MatA A, Vec B, long long b_col, Vec X, long long x_col, int* info, int flags, long long count,
                   int nrhs, int /*xlen*/) {
  using T = typename MatA::value_type;
  static_assert(NB >= 1 && NB <= 16, "the thread design unrolls over at most 16 x 16");
  constexpr bool UNIFORM = bdf::is_uniform_matrix<MatA>::value;
  const bool lower = flags & TRSV_LOWER, unit = flags & TRSV_UNIT, check = flags & TRSV_CHECK;
  const int op = (flags >> 4) & 3;
  const bool trans = bdf::op_transposes(op), cj = bdf::op_conjugates(op);
  const long long items = count * nrhs;
  for (long long item = (long long)blockIdx.x * blockDim.x + threadIdx.x; item < items;
       item += (long long)gridDim.x * blockDim.x) {
    const auto [b, c, n, a, lda, bv, xv] = trsv_item(A, B, b_col, X, x_col, item, nrhs);
    // the pieces' path is compiled for the uniform layout only, the only one flagged
    const bool pieces = UNIFORM && (flags & TRSV_ROWS16) && n == NB;
    const bool vecs = pieces && (flags & TRSV_VECS16);
    T x[NB];
    trsv_thread_load_b(x, bv, B.inc, n, vecs);
    int zero;
#define TRSV_THREAD_SOLVE(P) \
    (lower ? (trans ? bdf::trsv_thread<T, NB, true, true, P>(n, a, lda, cj, unit, x) \
                    : bdf::trsv_thread<T, NB, true, false, P>(n, a, lda, cj, unit, x)) \
           : (trans ? bdf::trsv_thread<T, NB, false, true, P>(n, a, lda, cj, unit, x) \
                    : bdf::trsv_thread<T, NB, false, false, P>(n, a, lda, cj, unit, x)))
    if constexpr (UNIFORM) zero = pieces ? TRSV_THREAD_SOLVE(true) : TRSV_THREAD_SOLVE(false);
    else zero = TRSV_THREAD_SOLVE(false);
#undef TRSV_THREAD_SOLVE
    if (check) {
      if (c == 0) info[b] = zero;
      if (zero) trsv_thread_load_b(x, bv, B.inc, n, vecs);  // LAPACK's xTRTRS leaves B as it was: X = B
    }
    if (vecs) {
      bdf::store_run<NB>(xv, x);
    } else {
#pragma unroll
      for (int i = 0; i < NB; ++i)
        if (i < n) xv[i * X.inc] = x[i];
    }
  }
}

// Pipelined design (TrsvSetting(32, W, pipelined=True)): one block of W warps per work
// item.  The tiles of 32 unknowns in solve order are dealt to the warps in rounds of W
// (tile r0 + w to warp w); in a round every warp
//   1. loads its diagonal tile's rows (bdf::trsv_tile_load) and its unknowns from B,
//   2. subtracts op(A)(its rows, s) x_s for every solved unknown s, CH columns at a time,
//      each chunk's loads issued before the wait for the tile that solves its x's (named
//      barrier 1 + k - r0 for tile k of the round; earlier rounds' x's are all there),
//   3. solves its tile (bdf::trsv_tile_chain), publishes it in sx and signals its barrier.
// Why: with one warp per matrix (the 8 x 4 design) a 256-unknown double matrix keeps
// one warp's loads in flight, and the batch of 512 such matrices 4 warps an SM; here the
// rows' loads of every tile of the matrix are in flight while the chain of diagonal
// solves runs, and only the multiply-adds of one chunk wait for it.
// Barriers: both sides bar.sync (a producer has nothing left to do in its round, and
// racecheck orders the shared accesses by barriers every participant syncs on); the
// count is the producer and the warps of the round's later tiles.  A round ends with
// __syncthreads, so barrier ids are reused only once every participant has passed.
template <typename T, int CH, int RT>
__device__ __forceinline__ void trsv_pipeline_tile(int lane, int t, int r0, int last, int n, const T* a,
                                                   long long lda, int op, bool forward, bool unit, const T* bv,
                                                   long long incb, T* xv, long long incx, T* sx) {
  const int p0 = 32 * t, nb = min(32, n - p0);  // solve positions [p0, p0 + nb)
  const int r_lo = forward ? p0 : n - p0 - nb;  // the tile's first row (of the stored view)
  const bool mine = lane < nb;
  const int row = forward ? p0 + lane : n - 1 - p0 - lane;
  const bool cj = bdf::op_conjugates(op);
  // a transposing op: op(A)(row, col) = a[col + row lda], the tile's rows from q, rstep apart
  const long long rstep = forward ? lda : -lda;
  const T* q = a + (long long)(forward ? p0 : n - 1 - p0) * lda;
  bdf::TrsvTileRow<T, 32> diag;
  if (bdf::op_transposes(op) && !bdf::is_complex_v<T>) {  // complex: registers (a 304-byte stack for complex64)
    // A transposing op's rows are stored columns: a lane reading its row touched a line a
    // lane per load.  Instead lane j loads column j of the tile (coalesced; only the
    // stored triangle, strictly below the diagonal in solve order) and the warp
    // transposes it (warp_transpose32); the diagonal entry is one load a lane.
    T v[32];
    const T* qd = q + (forward ? p0 + lane : n - 1 - p0 - lane);  // column p0 + lane of the tile
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = i < nb && lane < i ? bdf::conj_if(qd[i * rstep], cj) : T(0);
    bdf::warp_transpose32(v, lane);
#pragma unroll
    for (int s = 0; s < 32; ++s) diag.m[s] = v[s];
    bdf::trsv_tile_divide(diag, mine && !unit ? bdf::conj_if(a[row + (long long)row * lda], cj) : T(1), unit);
  } else {
    bdf::trsv_tile_load<T, 32>(lane, nb, a + r_lo + (long long)r_lo * lda, lda, op, forward, unit, diag);
  }
  T yi = mine ? bv[row * incb] : T(0);
  auto wait_for = [&](int k) {  // tile k of this round: wait for its x's
    if (k >= r0) asm volatile("bar.sync %0, %1;" ::"r"(1 + k - r0), "r"(32 * (last - k + 1)) : "memory");
  };
  if (bdf::op_transposes(op)) {
    // Lane j owns column j of each solved tile: op(A)(row_i, col_j) = a[col_j + row_i lda]
    // is coalesced over the lanes (a lane walking its own row read a line a lane per load:
    // 0.9 TB/s for float 256 against 2.3 for the other op).  Each lane multiplies its
    // column by its x_j, then the warp reduce-scatters the RT row sums of a chunk
    // (bdf::group_sum_scatter: 31 shuffles for 32 rows, against 32 x 5 for butterflies).
    for (int k = 0; k < t; ++k) {
      const int col = forward ? 32 * k + lane : n - 1 - 32 * k - lane;
      T xj = T(0);
#pragma unroll
      for (int h = 0; h < 32; h += RT) {
        T v[RT];
#pragma unroll
        for (int i = 0; i < RT; ++i) v[i] = h + i < nb ? bdf::conj_if(q[col + (h + i) * rstep], cj) : T(0);
        if (h == 0) {
          wait_for(k);
          xj = sx[32 * k + lane];
        }
#pragma unroll
        for (int i = 0; i < RT; ++i) v[i] *= xj;
        // lane l: row h + first's sum (first = l for RT = 32, l / 2 for RT = 16)
        const int first = bdf::group_sum_scatter<RT, 32>(v, lane);
        const T r = RT == 32 ? v[0] : bdf::shfl_from(v[0], (2 * (lane - h)) & 31, 0xffffffffu, 32);
        if (RT == 32 ? h + first == lane : lane >= h && lane < h + RT) yi -= r;
      }
    }
  } else {
    // Lane i owns row i: op(A)(row, column of the unknown at solve position s) =
    // conj?(p[s * step]), coalesced over the lanes; x_s read by broadcast.
    const long long cs = lda;
    const int own = mine ? row : r_lo;  // a lane past nb reads a row of the tile: in bounds, unused
    const long long step = forward ? cs : -cs;
    const T* p = a + own + (forward ? 0 : (long long)(n - 1) * cs);
    T acc0 = T(0), acc1 = T(0);
    for (int s0 = 0; s0 < p0; s0 += CH) {
      T v[CH];
#pragma unroll
      for (int j = 0; j < CH; ++j) v[j] = bdf::conj_if(p[(s0 + j) * step], cj);
      if (s0 % 32 == 0) wait_for(s0 / 32);
#pragma unroll
      for (int j = 0; j < CH; j += 2) {
        acc0 += v[j] * sx[s0 + j];
        acc1 += v[j + 1] * sx[s0 + j + 1];
      }
    }
    yi -= acc0 + acc1;
  }
  bdf::trsv_tile_chain<T, 32>(lane, nb, unit, diag, yi);
  if (mine) {
    sx[p0 + lane] = yi;
    xv[row * incx] = yi;
  }
  if (t < last) asm volatile("bar.sync %0, %1;" ::"r"(1 + t - r0), "r"(32 * (last - t + 1)) : "memory");
}

// The same arguments as trsv_kernel; xlen = the largest n of the launch (sx holds a
// whole solution).  One work item per block at a time.
// Real types: at most 170 registers (12 warps an SM's worth: 6 blocks of 2 warps, 3 of
// 4, 1 of 8).  Left to itself ptxas took 168 or 195 for double as the rest of the
// function changed, and at 195 four-warp blocks fit 2 an SM instead of 3 (DTRSV LN 128:
// 104 us against 76).  Complex types spilled under the cap (1.5 KB a thread for
// complex128): no cap.
template <class MatA> __host__ __device__ constexpr int trsv_pipeline_min_blocks(int warps) {
  return bdf::is_complex_v<typename MatA::value_type> ? 1 : 12 / warps;
}

template <class MatA, class Vec, int W>
__global__ void __launch_bounds__(32 * W, trsv_pipeline_min_blocks<MatA>(W))
trsv_pipeline_kernel(MatA A, Vec B, long long b_col, Vec X, long long x_col, int* info, int flags,
                     long long count, int nrhs, int xlen) {
  static_assert(W >= 2 && W <= 16, "named barriers 1 .. W - 1 (of 15)");
  using T = typename MatA::value_type;
  // Elements a lane loads ahead of a wait: a whole row (CH, lane per row) or column (RT,
  // lane per column) of a tile, half of one for 16-byte types (registers).
  constexpr int CH = sizeof(T) > 8 ? 16 : 32, RT = CH;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sx = reinterpret_cast<T*>(smem);  // the solution in solve order
  int* flag = reinterpret_cast<int*>(sx + xlen);
  const bdf::ThreadGroup<32 * W> g(threadIdx.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool unit = flags & TRSV_UNIT, check = flags & TRSV_CHECK;
  const int op = (flags >> 4) & 3;
  const bool forward = bdf::trsv_forward(flags & TRSV_LOWER, op);
  const long long items = count * nrhs;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const auto [b, c, n, a, lda, bv, xv] = trsv_item(A, B, b_col, X, x_col, item, nrhs);
    if (check) {
      const int zero = unit ? 0 : bdf::first_zero_diagonal(g, n, a, lda, flag);
      if (c == 0 && g.rank == 0) info[b] = zero;
      if (zero) {  // LAPACK's xTRTRS leaves B as it was: X = B
        for (int i = g.rank; i < n; i += 32 * W) xv[i * X.inc] = bv[i * B.inc];
        continue;  // uniform over the block
      }
    }
    const int tiles = (n + 31) / 32;
    for (int r0 = 0; r0 < tiles; r0 += W) {
      const int t = r0 + warp, last = min(tiles, r0 + W) - 1;
      if (t <= last)
        trsv_pipeline_tile<T, CH, RT>(lane, t, r0, last, n, a, lda, op, forward, unit, bv, B.inc, xv, X.inc, sx);
      __syncthreads();  // the round's unknowns are in sx and its barriers are complete
    }
  }
}

// Staged design (TrsvSetting(32, 1, staged=True)): one warp per work item, the grid cut to
// the warps the GPU holds at once, each warp walking its items with two buffers in shared
// memory: while it solves item k from one, the stored triangle of item k + 1 lands in the
// other, copied by the SM's copy engine (bdf::bulk_copy_to_shared, a run a stored column,
// in whole 16-byte pieces), so the warp's issue slots go to the solve alone.  Why: the
// one-warp designs read their rows of op(A) straight from global memory and keep one
// matrix's loads in flight a warp; C-ordered 'N' (a transposing op) ran at 0.58-0.73 of
// what reading the triangles in place allows on the H100 (tools/targets.py).  A per-lane
// copy staged ahead (session 67) cost the warp as many issue slots as the solve.
// From the buffer the warp solves tile by tile (32 unknowns in solve order): the solved
// unknowns' products from the buffer (a lane's row of op(A): a stored column read in
// 16-byte pieces, or a stored row read across the lanes) and x from sx, then the diagonal
// tile by bdf::trsv_tile_regs.  The buffer's columns are ld = trsv_staged_ld apart, an odd
// number of 16-byte units, so a warp's 16-byte reads of 32 columns meet no bank conflict.
// Without sm_90, or for a batch whose columns are not 16-byte aligned or whose n is not a
// whole number of pieces (the pointer and variable layouts always), the warp copies by
// loads instead (the same buffers, no overlap).  n <= TRSV_STAGED_MAX (the tiles' b in
// registers); xlen = the largest n of the launch, which sets the buffers' size.

#define TRSV_STAGED_MAX 64

// Elements between a staged buffer's columns: n x item bytes rounded up to an odd number
// of 16-byte units (settings.py's staged_ld is the host's copy of this formula).
__host__ __device__ constexpr int trsv_staged_ld(int n, int item) {
  return ((n * item + 15) / 16 | 1) * 16 / item;
}
// Shared memory of one warp: two mbarriers (16 bytes), two buffers of n columns, and sx.
__host__ __device__ constexpr long long trsv_staged_buffer_bytes(int n, int item) {
  return (long long)n * trsv_staged_ld(n, item) * item;
}
__host__ __device__ constexpr long long trsv_staged_warp_bytes(int n, int item) {
  return 16 + 2 * trsv_staged_buffer_bytes(n, item) + ((long long)n * item + 15) / 16 * 16;
}

template <class MatA, class Vec>
__global__ void __launch_bounds__(128)
trsv_staged_kernel(MatA A, Vec B, long long b_col, Vec X, long long x_col, int* info, int flags, long long count,
                   int nrhs, int xlen) {
  using T = typename MatA::value_type;
  constexpr int ITEM = int(sizeof(T)), V = 16 / ITEM, NT = TRSV_STAGED_MAX / 32;
  struct alignas(16) Piece { T v[V]; };
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x % 32, warps_here = blockDim.x / 32;
  const int ld = trsv_staged_ld(xlen, ITEM);
  const long long buffer_bytes = trsv_staged_buffer_bytes(xlen, ITEM);
  unsigned char* own = smem + (threadIdx.x / 32) * trsv_staged_warp_bytes(xlen, ITEM);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(own);
  T* sx = reinterpret_cast<T*>(own + 16 + 2 * buffer_bytes);
  const bool lower = flags & TRSV_LOWER, unit = flags & TRSV_UNIT, check = flags & TRSV_CHECK;
  const int op = (flags >> 4) & 3;
  const bool forward = bdf::trsv_forward(lower, op), trans = bdf::op_transposes(op), cj = bdf::op_conjugates(op);
  // whole 16-byte pieces of every column: aligned columns and n a multiple of V (uniform n)
  const bool bulk = bdf::bulk_copy_supported() && bdf::is_uniform_matrix<MatA>::value && (flags & TRSV_ROWS16) &&
                    xlen % V == 0;
  const long long items = count * nrhs, stride = (long long)gridDim.x * warps_here;
  const long long first = (long long)blockIdx.x * warps_here + threadIdx.x / 32;
  if (first >= items) return;  // the whole warp
  if (bulk && lane == 0) {
    bdf::mbarrier_init(&bars[0], 1);
    bdf::mbarrier_init(&bars[1], 1);
  }
  __syncwarp();
  auto buffer = [&](long long k) { return reinterpret_cast<T*>(own + 16 + (k & 1) * buffer_bytes); };
  // The stored triangle of `item`'s matrix into buf: column j's rows [j, n) of a lower
  // view, [0, j] of an upper one (the bulk copies widen them to whole pieces).
  auto stage = [&](long long item, T* buf, unsigned long long* bar) {
    const auto it = trsv_item(A, B, b_col, X, x_col, item, nrhs);
    if (bulk) {
      unsigned mine = 0;
      int r0[NT], r1[NT];
#pragma unroll
      for (int h = 0; h < NT; ++h) {
        const int j = lane + 32 * h;
        r0[h] = lower ? j / V * V : 0;
        r1[h] = lower ? it.n : min(it.n, (j / V + 1) * V);
        if (j < it.n) mine += unsigned(r1[h] - r0[h]) * ITEM;
      }
      unsigned total = mine;
#pragma unroll
      for (int d = 16; d >= 1; d /= 2) total += __shfl_xor_sync(0xffffffffu, total, d);
      if (lane == 0) bdf::mbarrier_expect_bytes(bar, total);
      __syncwarp();
#pragma unroll
      for (int h = 0; h < NT; ++h) {
        const int j = lane + 32 * h;
        if (j < it.n)
          bdf::bulk_copy_to_shared(buf + (long long)j * ld + r0[h], it.a + (long long)j * it.lda + r0[h],
                                   unsigned(r1[h] - r0[h]) * ITEM, bar);
      }
    } else {
      for (int j = 0; j < it.n; ++j) {
        const int lo = lower ? j : 0, hi = lower ? it.n : j + 1;
        for (int r = lo + lane; r < hi; r += 32) buf[(long long)j * ld + r] = it.a[r + (long long)j * it.lda];
      }
    }
  };
  // b of `item` in solve order: y[t] of lane l is the unknown at position 32 t + l.
  auto load_b = [&](long long item, T (&y)[NT]) {
    const auto it = trsv_item(A, B, b_col, X, x_col, item, nrhs);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int p = 32 * t + lane;
      y[t] = p < it.n ? it.bv[(forward ? p : it.n - 1 - p) * B.inc] : T(0);
    }
  };
#pragma unroll 1
  for (int k0 = 0; k0 < 2; ++k0)
    if (first + k0 * stride < items) stage(first + k0 * stride, buffer(k0), &bars[k0]);
  T y_next[NT];
  load_b(first, y_next);
  long long k = 0;
  for (long long item = first; item < items; item += stride, ++k) {
    const auto [b, c, n, a, lda, bv, xv] = trsv_item(A, B, b_col, X, x_col, item, nrhs);
    T* buf = buffer(k);
    T y[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) y[t] = y_next[t];
    if (item + stride < items) load_b(item + stride, y_next);  // in flight during this solve
    if (bulk) bdf::mbarrier_wait(&bars[k & 1], unsigned(k >> 1) & 1u);
    __syncwarp();
    // the staged diagonal (every column's run holds its diagonal entry)
    const int zero = check && !unit ? bdf::first_zero_diagonal(bdf::ThreadGroup<32>(lane), n, buf, ld, nullptr) : 0;
    if (check && c == 0 && lane == 0) info[b] = zero;
    const int tiles = (n + 31) / 32;
    static_assert(NT == 2, "a tile's b is y[0] or y[1]");
#pragma unroll 1
    for (int t = 0; t < tiles; ++t) {  // rolled: one copy of the tile's solve
      const int p0 = 32 * t, nb = min(32, n - p0);
      const bool mine = lane < nb;
      const int row = forward ? p0 + lane : n - 1 - p0 - lane;
      T yi = bdf::select(t == 0, y[0], y[1]);
      if (zero) {  // LAPACK's xTRTRS leaves B as it was: X = B
        if (mine) xv[row * X.inc] = yi;
        continue;
      }
      if (t > 0) {  // the solved unknowns' products: columns [lo, lo + p0) of op(A)
        const int lo = forward ? 0 : n - p0;
        const int r = mine ? row : (forward ? p0 : n - 1 - p0);  // a lane past nb reads a real row, unused
        T acc0 = T(0), acc1 = T(0);
        if (trans && n % V == 0) {  // row r of op(A) is stored column r: 16-byte pieces
          const Piece* rp = reinterpret_cast<const Piece*>(buf + (long long)r * ld + lo);
          for (int q = 0; q < p0 / V; ++q) {
            const Piece v = rp[q];
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const T prod = bdf::conj_if(v.v[e], cj) * sx[lo + V * q + e];
              if (e % 2 == 0) acc0 += prod;
              else acc1 += prod;
            }
          }
        } else {
          const long long step = trans ? 1 : ld;
          const T* rp = buf + (trans ? (long long)r * ld : r) + lo * step;
          for (int s = 0; s < p0; s += 2) {
            acc0 += bdf::conj_if(rp[s * step], cj) * sx[lo + s];
            acc1 += bdf::conj_if(rp[(s + 1) * step], cj) * sx[lo + s + 1];
          }
        }
        yi -= acc0 + acc1;
      }
      const int r_lo = forward ? p0 : n - p0 - nb;  // the tile's first row
      // the tile's rows start on 16-byte boundaries of the buffer when n is whole pieces
      bdf::trsv_tile_regs<T, 32, true>(lane, nb, buf + r_lo + (long long)r_lo * ld, ld, op, forward, unit, yi,
                                       n % V == 0);
      if (mine) {
        sx[row] = yi;
        xv[row * X.inc] = yi;
      }
      __syncwarp();
    }
    if (item + 2 * stride < items) {  // the next-but-one item into the buffer just read
      __syncwarp();
      if (bulk) bdf::fence_before_bulk_copy();
      stage(item + 2 * stride, buf, &bars[k & 1]);
    }
  }
}
