// trsv.cuh: triangular solves for ONE matrix: the diagonal-tile solve, the blocked
// solve of a window of unknowns by a thread group, and the zero-pivot scan.  The
// off-diagonal updates are GEMVs: bdf::trsv_update calls bdf::gemv_n / bdf::gemv_t
// (gemv.cuh) with an epilogue x_i -= r, so there is no second copy of GEMV here.
//
// Matrices are column-major views (element (i, j) at A[i + j * lda]); `op` is one
// of bdf::Op applied to that view (OP_R: conjugate without transpose, which is how
// 'C' on a row-major matrix arrives).  Solve order: forward when op(A) is lower
// triangular (lower view with N/R, upper view with T/C), backward otherwise.
#pragma once
#include "common.cuh"
#include "gemv.cuh"
#include "vector.cuh"

namespace bdf {

// __shfl_sync over `width` lanes (a power of two <= 32), complex split in halves.
template <typename T> __device__ __forceinline__ T shfl_from(T v, int src, unsigned mask, int width) {
  return __shfl_sync(mask, v, src, width);
}
template <typename R>
__device__ __forceinline__ complex<R> shfl_from(complex<R> v, int src, unsigned mask, int width) {
  return complex<R>(__shfl_sync(mask, v.real(), src, width), __shfl_sync(mask, v.imag(), src, width));
}

// LAPACK's sfmin (dlamch('S')): the smallest normal number; 1 / sfmin does not overflow.
template <typename R> struct SafeMin;
template <> struct SafeMin<float> { static constexpr float value = 1.17549435e-38f; };
template <> struct SafeMin<double> { static constexpr double value = 2.2250738585072014e-308; };

template <typename T> __device__ __forceinline__ typename real_of<T>::type modulus(T a) {
  if constexpr (is_complex_v<T>) return abs(a);
  else return fabs(a);
}

// LAPACK's scaling of a column by its pivot: by the reciprocal unless that would
// overflow (|pivot| < sfmin); here also unless it would be subnormal and short of
// digits (|pivot| > 1 / sfmin).  Otherwise divide (safe_divide).  r is 0 exactly when
// the rule divides, so (piv, r) carries the whole decision (the rows design stores r).
template <typename T> struct PivotScale {
  T piv, r;
  bool recip;
  PivotScale() = default;
  __device__ __forceinline__ explicit PivotScale(T p) : piv(p) {
    using R = typename real_of<T>::type;
    const R a = modulus(p);
    recip = a >= SafeMin<R>::value && a <= R(1) / SafeMin<R>::value;
    r = recip ? T(1) / p : T(0);
  }
  __device__ __forceinline__ PivotScale(T p, T r_) : piv(p), r(r_), recip(r_ != T(0)) {}
  __device__ __forceinline__ T operator()(T l) const { return recip ? l * r : safe_divide(l, piv); }
};

// v[k] for k > after (every k with after = -1), and *also unless null, divided by the
// pivot p as PivotScale does, with one branch on the rule around the loop, not one per
// element: a row of a triangular factor divided by its diagonal before a solve's chain
// (trsv_tile_regs, the LU rows design's rows_scale_u).
template <typename T, int N>
__device__ __forceinline__ void pivot_scale_row(const PivotScale<T>& p, T (&v)[N], int after, T* also = nullptr) {
  if (p.recip) {
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k > after) v[k] *= p.r;
    if (also) *also *= p.r;
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k > after) v[k] = safe_divide(v[k], p.piv);
    if (also) *also = safe_divide(*also, p.piv);
  }
}

// Does op(A) (A the stored view, lower or upper) have to be solved first row first?
__host__ __device__ constexpr bool trsv_forward(bool lower, int op) { return lower != op_transposes(op); }

// Element (i, j) of op(A) for the stored view A.
template <typename T>
__device__ __forceinline__ T op_element(const T* A, long long lda, int op, int i, int j) {
  const T a = op_transposes(op) ? A[j + (long long)i * lda] : A[i + (long long)j * lda];
  return conj_if(a, op_conjugates(op));
}

// bdf::trsv_tile_regs: solve op(A) y = y for one nb x nb triangular tile, nb <= W <= 32,
// each lane holding its own unknown in a register.
// Threads:  W lanes of one warp (a ThreadGroup<W> when W < 32, or the first warp of a
//           larger group), all of them calling it with the same arguments; lane l owns
//           the l-th unknown in solve order: yi is y[row] for row = l (forward) or
//           nb - 1 - l (backward), read by the caller (0 for l >= nb), and is that
//           unknown on return.
// Shared:   none.  Sync: only the W lanes' shuffles.
// Memory:   A read-only (global or shared), only its stored triangle and, unless
//           `unit`, the diagonal; each lane first loads its whole row of op(A) into
//           registers (W of them), so the sequential chain below waits on no load.
// Division: each lane divides its row of the tile and its unknown by its diagonal entry
//           before the chain (by the reciprocal where LAPACK's pivot rule allows it,
//           PivotScale: sfmin <= |d| <= 1 / sfmin, else by safe_divide), so that a step of
//           the chain is one shuffle and one multiply-add.  With the division on the
//           chain (lane s dividing x_s at its turn) a step took about 185 cycles on the
//           H100 and the warps designs' solves of 128 unknowns a third of the kernel.
// Failure:  none: a zero diagonal divides by zero (callers scan for it first, see
//           first_zero_diagonal); NaN/Inf propagate as in LAPACK.
template <typename T, int W> struct TrsvTileRow {
  T m[W];  // m[s]: op(A)(row, row of the s-th unknown) for s < lane, divided by the diagonal; else 0
  PivotScale<T> pivot;  // the row's diagonal entry (1 for `unit` and lanes >= nb)
};

// bdf::trsv_tile_load / bdf::trsv_tile_chain: the two halves of trsv_tile_regs, for a
// caller that loads its tile before its unknown is complete (the pipelined TRSV design
// loads the diagonal tile while it waits for the other tiles' updates).  The load
// divides the row by its diagonal, and yi with it when the caller passes it (`ready`,
// one branch on the rule for both: trsv_tile_regs, whose single tile ran 11 % slower
// for double 32 x 32 with yi divided apart); the chain divides yi unless `ready` did,
// and solves.
// The end of a row's load: the pivot rule of its diagonal entry d, and the row (and yi
// when `ready`) divided by it; nothing for a unit diagonal (r.pivot is then not used).
// trsv_tile_load's, and the pipelined TRSV's for a row it loads another way.
template <typename T, int W>
__device__ __forceinline__ void trsv_tile_divide(TrsvTileRow<T, W>& r, T d, bool unit, T* ready = nullptr) {
  if (!unit) {
    r.pivot = PivotScale<T>(d);
    pivot_scale_row(r.pivot, r.m, -1, ready);
  }
}

// Rows of op(A) in 16-byte pieces: for a transposing op a lane's row is a stored column,
// contiguous, and each of the W scalar loads below has the warp touch a line a lane.  In
// pieces of V = 16 / sizeof(T) elements a lane loads about lane / V times, so the L1
// passes over the tile's lines V times less often (session 40, H200: the 32-lane tile of
// C-ordered 'N' ran float 32 x 32 in 87 us against 157, double 81 against 110).  Needs
// every row 16-byte aligned (the caller's `rows16`) and nb a multiple of V.  Piece k holds
// the unknowns s = V k .. V k + V - 1 in solve order: from the row's start going forward,
// from its end (column nb - 1 - s) going backward, so each element's register is fixed at
// compile time for any such nb.  Only pieces with some s < lane are read; the diagonal is
// read apart (its register would be a run-time index).  Measured slower for the 8- and
// 16-lane tiles (double 8 x 8 122 us against 92: their rows are adjacent, the scalar loads
// already share lines), so only W = 32 takes it.
template <typename T, int W, bool FORWARD>
__device__ __forceinline__ void trsv_tile_load_pieces(int lane, int nb, const T* rowp, bool cj,
                                                      TrsvTileRow<T, W>& r) {
  constexpr int V = 16 / int(sizeof(T));
  struct alignas(16) Piece { T v[V]; };
  const Piece* first = reinterpret_cast<const Piece*>(FORWARD ? rowp : rowp + nb - V);
#pragma unroll
  for (int k = 0; k < W / V; ++k) {
    Piece q;
#pragma unroll
    for (int e = 0; e < V; ++e) q.v[e] = T(0);
    if (V * k < lane) q = first[FORWARD ? k : -k];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int s = V * k + e;  // forward: element e of the piece; backward: element V - 1 - e
      r.m[s] = s < lane ? conj_if(q.v[FORWARD ? e : V - 1 - e], cj) : T(0);
    }
  }
}

// PIECES compiles trsv_tile_load_pieces' path (W = 32, T narrower than 16 bytes), taken
// when `rows16` says every row of op(A) starts at a 16-byte boundary.
template <typename T, int W, bool PIECES = false>
__device__ __forceinline__ void trsv_tile_load(int lane, int nb, const T* A, long long lda, int op, bool forward,
                                               bool unit, TrsvTileRow<T, W>& r, T* ready = nullptr,
                                               bool rows16 = false) {
  const int row = forward ? lane : nb - 1 - lane;  // the row of op(A) this lane owns
  const bool mine = lane < nb;
  if constexpr (PIECES && W == 32 && sizeof(T) < 16) {
    constexpr int V = 16 / int(sizeof(T));
    if (rows16 && op_transposes(op) && nb % V == 0) {
      const T* rowp = A + (long long)row * lda;
      const bool cj = op_conjugates(op);
      const int reader = mine ? lane : 0;  // lanes past nb read nothing and hold zeros
      if (forward) trsv_tile_load_pieces<T, W, true>(reader, nb, rowp, cj, r);
      else trsv_tile_load_pieces<T, W, false>(reader, nb, rowp, cj, r);
      trsv_tile_divide(r, unit || !mine ? T(1) : conj_if(rowp[row], cj), unit, ready);
      return;
    }
  }
  // op(A)(row, col) = conj?(rowp[col * cs]); the s-th unknown's column is s (forward) or
  // nb - 1 - s, so its element is at p + s * step: one pointer and one stride, not an
  // address per element (which took 122 registers for W = 8 in double, 255 for W = 32).
  const bool cj = op_conjugates(op);
  const long long cs = op_transposes(op) ? 1 : lda;
  const T* rowp = A + (op_transposes(op) ? (long long)row * lda : (long long)row);
  const long long step = forward ? cs : -cs;
  const T* p = forward ? rowp : rowp + (long long)(nb - 1) * cs;
  T d = T(1);
#pragma unroll
  for (int s = 0; s < W; ++s) {
    r.m[s] = T(0);
    if (mine && s < lane) r.m[s] = conj_if(p[s * step], cj);
  }
  if (mine && !unit) d = conj_if(rowp[(long long)row * cs], cj);
  trsv_tile_divide(r, d, unit, ready);
}

template <typename T, int W>
__device__ __forceinline__ void trsv_tile_chain(int lane, int nb, bool unit, const TrsvTileRow<T, W>& r, T& yi,
                                                bool divided = false) {
  const unsigned mask = ThreadGroup<W>(lane).lanes();
  if (!unit && !divided) yi = r.pivot(yi);
  // lane s holds x_s when its turn comes: one shuffle and one multiply-add a step
#pragma unroll
  for (int s = 0; s < W; ++s) {
    if (s >= nb) break;  // uniform over the lanes
    const T ys = shfl_from(yi, s, mask, W);
    if (lane > s) yi -= r.m[s] * ys;
  }
}

template <typename T, int W, bool PIECES = false>
__device__ __forceinline__ void trsv_tile_regs(int lane, int nb, const T* A, long long lda, int op, bool forward,
                                               bool unit, T& yi, bool rows16 = false) {
  static_assert(W >= 1 && W <= 32 && (W & (W - 1)) == 0, "a tile is solved by a power-of-two lane group");
  TrsvTileRow<T, W> r;
  trsv_tile_load<T, W, PIECES>(lane, nb, A, lda, op, forward, unit, r, &yi, rows16);
  trsv_tile_chain<T, W>(lane, nb, unit, r, yi, true);
}

// bdf::trsv_tile: trsv_tile_regs on y in memory (shared or global).
// Threads:  as trsv_tile_regs.
// Sync:     no barrier assumed on entry: y is read after a __syncwarp of the W lanes;
//           ends after a __syncwarp, y written.  The caller's other warps must wait at
//           a barrier of their own before reading y.
template <typename T, int W>
__device__ void trsv_tile(int lane, int nb, const T* A, long long lda, int op, bool forward, bool unit, T* y) {
  const unsigned mask = ThreadGroup<W>(lane).lanes();
  const int row = forward ? lane : nb - 1 - lane;
  __syncwarp(mask);
  T yi = lane < nb ? y[row] : T(0);
  trsv_tile_regs<T, W>(lane, nb, A, lda, op, forward, unit, yi);
  if (lane < nb) y[row] = yi;
  __syncwarp(mask);
}

// bdf::trsv_update: x[R0:R0+rlen] -= op(A)[R0:R0+rlen, C0:C0+clen] xc (one GEMV: gemv_t when
// op transposes, else gemv_n), xc read from shared memory (never through the read-only
// path from the vector being written) and x at xr with stride incr.
// bdf::trsv_window: solve the unknowns [lo, lo + len) (rows of op(A)) held in sx[0, len),
// every update from outside the window already applied: tiles of W = min(G, 32) in solve
// order, each updated by the window's unknowns solved before it (trsv_update) and then
// solved by bdf::trsv_tile on the first W threads.  The blocked TRSV design of
// factorizations/trsv.cu, and the solves of the fused and warps factorizations (LU's
// getrs_tile, QR's R solve, Cholesky's POSV) with lo = 0, len = n.
// Threads:  a ThreadGroup<DIM_X * DIM_Y> (gemv.cuh's shape rules); every thread calls them.
// Shared:   sx (and xc): shared memory, or global memory only this group touches; `work`
//           as gemv_n needs it (null for G <= 32).
// Sync:     the caller makes sx visible to the group first; each ends after a barrier.
// Memory:   A read-only: the stored triangle tiles op(A) needs, and the diagonal unless unit.
// Failure:  none: a zero diagonal gives Inf/NaN (callers scan or check info first).
// Neither is inlined: they depend on the type and the group's shape but not on a
// kernel's layout, so the three layouts' kernels share one compiled copy, and a call per
// tile costs nothing next to the loads it waits for.
template <typename T, int DIM_X, int DIM_Y>
__device__ __noinline__ void trsv_update(ThreadGroup<DIM_X * DIM_Y> g, const T* a, long long lda, int op, int R0,
                                         int rlen, int C0, int clen, const T* xc, T* xr, long long incr, T* work) {
  auto store = [=](int i, T r) { xr[i * incr] -= r; };
  if (op_transposes(op))
    gemv_t<T, DIM_X, DIM_Y>(g, clen, rlen, a + C0 + (long long)R0 * lda, lda, xc, 1, op_conjugates(op), work, store);
  else
    gemv_n<T, DIM_X, DIM_Y>(g, rlen, clen, a + R0 + (long long)C0 * lda, lda, xc, 1, op_conjugates(op), work, store);
  g.sync();
}

template <typename T, int DIM_X, int DIM_Y>
__device__ __noinline__ void trsv_window(ThreadGroup<DIM_X * DIM_Y> g, const T* a, long long lda, int op,
                                         bool forward, bool unit, int lo, int len, T* sx, T* work) {
  constexpr int G = DIM_X * DIM_Y, W = G < 32 ? G : 32;
  for (int done = 0; done < len; done += W) {
    const int nb = min(W, len - done);
    const int r0 = forward ? lo + done : lo + len - done - nb;  // first row of the tile
    const int s0 = forward ? lo : r0 + nb;                        // solved unknowns [s0, s0 + done)
    if (done)
      trsv_update<T, DIM_X, DIM_Y>(g, a, lda, op, r0, nb, s0, done, sx + (s0 - lo), sx + (r0 - lo), 1, work);
    if (g.rank < W) trsv_tile<T, W>(g.rank, nb, a + r0 + (long long)r0 * lda, lda, op, forward, unit, sx + (r0 - lo));
    g.sync();
  }
}

// bdf::first_zero_diagonal: LAPACK's singularity check (xTRTRS): the 1-based index
// of the first exactly zero diagonal entry of the n x n matrix A, 0 if none.
// Threads:  every thread of the group calls it; all get the result.
// Shared:   a group of more than 32 threads passes `flag` (one int); else null.
// Sync:     no barrier assumed on entry; ends after a barrier when it used `flag`.
// Memory:   reads the n diagonal entries only.  NaN is not zero.
// Failure:  none.
template <int G, typename T>
__device__ int first_zero_diagonal(ThreadGroup<G> g, int n, const T* A, long long lda, int* flag) {
  constexpr int NONE = 0x7fffffff;
  int found = NONE;
  for (int i = g.rank; i < n; i += G) {
    if (A[i + (long long)i * lda] == T(0)) {
      found = i;
      break;  // later entries of this thread are larger indices
    }
  }
  const unsigned lanes = g.lanes();
#pragma unroll
  for (int d = (G < 32 ? G : 32) / 2; d >= 1; d /= 2) found = min(found, __shfl_xor_sync(lanes, found, d));
  if (G > 32) {
    if (g.rank == 0) *flag = NONE;
    g.sync();
    if ((g.rank & 31) == 0 && found != NONE) atomicMin(flag, found);
    g.sync();
    found = *flag;
    g.sync();  // everyone has read it before a later call resets it
  }
  return found == NONE ? 0 : found + 1;
}

// bdf::trsv_thread: solve op(A) x = x for ONE n x n triangular matrix, n <= NB, by one
// thread, x in its registers (the thread design of factorizations/trsv.cu).
// Threads:  one; no shuffles, no shared memory.  Sync: none.
// Memory:   A read-only, only its stored triangle (the diagonal too unless `unit`; in
//           pieces it comes with its piece, unused), a column of the stored view at a
//           time in solve order.  PIECES: n == NB and every
//           column starts at a 16-byte boundary (the caller's rows16): each column's
//           triangle in 16-byte pieces (a thread's loads walk its own matrix, a line at a
//           time, so a piece's neighbours come from L1); otherwise element by element,
//           the NB x NB tile padded past n with the identity (x past n is 0 and stays 0),
//           so that every register index is a compile-time constant in either solve order.
// Order:    the stored view's column c in solve order s (c = s forward, NB - 1 - s
//           backward).  Not transposed, x_c is divided and column c subtracted from the
//           later unknowns (BLAS's xTRSV 'N'); transposed, column c is row c of op(A),
//           whose dot product with the earlier unknowns is taken in their solve order
//           before the division (xTRSV 'T').  The division by the diagonal is PivotScale's.
// Returns:  LAPACK's info (the 1-based index of the first exactly zero diagonal entry, 0
//           if none or `unit`); a zero diagonal gives Inf/NaN in x as in BLAS (the caller
//           restores B for xTRTRS).
template <typename T, int NB, bool LOWER, bool TRANS, bool PIECES>
__device__ __forceinline__ int trsv_thread(int n, const T* a, long long lda, bool cj, bool unit, T (&x)[NB]) {
  constexpr bool FORWARD = LOWER != TRANS;
  constexpr int V = 16 / int(sizeof(T));  // elements a 16-byte piece
  int zero = NB;  // the first zero diagonal entry's index, NB for none
#pragma unroll
  for (int s = 0; s < NB; ++s) {
    const int c = FORWARD ? s : NB - 1 - s;
    // the stored triangle's rows of column c (every loop below runs over all NB with this
    // test, not over [r_lo, r_hi]: with those bounds ptxas left the 8-byte types' NB = 16
    // pieces in a 128-byte stack frame)
    const int r_lo = LOWER ? c : 0, r_hi = LOWER ? NB - 1 : c;
    T col[NB];
    if constexpr (PIECES) {
      struct alignas(16) Piece { T v[V]; };
      const Piece* p = reinterpret_cast<const Piece*>(a + (long long)c * lda);
#pragma unroll
      for (int k = 0; k < NB / V; ++k) {
        if (k < r_lo / V || k > r_hi / V) continue;
        const Piece q = p[k];
#pragma unroll
        for (int e = 0; e < V; ++e) col[V * k + e] = q.v[e];
      }
    } else {
      const T* colp = a + (long long)c * lda;
#pragma unroll
      for (int r = 0; r < NB; ++r)
        if (r >= r_lo && r <= r_hi) col[r] = (r < n && c < n && !(unit && r == c)) ? colp[r] : T(r == c ? 1 : 0);
    }
#pragma unroll
    for (int r = 0; r < NB; ++r)
      if (r >= r_lo && r <= r_hi) col[r] = conj_if(col[r], cj);
    if (!unit && col[c] == T(0) && c < zero) zero = c;
    if constexpr (!TRANS) {
      if (!unit) x[c] = PivotScale<T>(col[c])(x[c]);
#pragma unroll
      for (int r = 0; r < NB; ++r)
        if (r != c && r >= r_lo && r <= r_hi) x[r] -= col[r] * x[c];
    } else {
      // the earlier unknowns in their solve order: rows 0 .. c - 1 (upper), NB - 1 .. c + 1 (lower)
#pragma unroll
      for (int t = 0; t < NB; ++t) {
        const int r = LOWER ? NB - 1 - t : t;
        if (r != c && r >= r_lo && r <= r_hi) x[c] -= col[r] * x[r];
      }
      if (!unit) x[c] = PivotScale<T>(col[c])(x[c]);
    }
  }
  return zero < n ? zero + 1 : 0;
}

}  // namespace bdf
