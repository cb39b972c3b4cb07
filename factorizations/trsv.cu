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
#include "common.cuh"
#include "gemv.cuh"
#include "layouts.cuh"
#include "trsv.cuh"

// Launch flags (uniform over a launch); op(A) is bits 4..5 (bdf::Op).
#define TRSV_LOWER 1  // the stored view is lower triangular
#define TRSV_UNIT 2   // unit diagonal: the diagonal is never read
#define TRSV_CHECK 4  // scan for a zero diagonal: info[b], and X = B for such a matrix (LAPACK)

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
    bdf::trsv_tile_regs<T, W>(g.rank, n, a, lda, op, forward, unit, yi);
    if (g.rank < n) xv[row * X.inc] = yi;
  }
}
