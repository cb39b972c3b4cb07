// lu.cuh: LU with partial pivoting of ONE matrix held in shared memory, and the
// solve with its factors.  The batched GETRF/GESV kernels (factorizations/lu.cu)
// call these on a whole small matrix (fused design) or on one panel of a larger
// one (blocked design).  Pivot search is bdf::iamax, the triangular solves are
// bdf::trsv_tile plus bdf::gemv_n updates: no second copy of either here.
// getf2_regs / getrs_regs are the same algorithms for ONE thread holding a whole
// matrix of at most NB x NB in registers (thread design): the same pivot order
// (bdf::iamax_ahead), reciprocal rule and operation order, without any barrier.
//
// Matrices are column-major in shared memory: element (i, j) at s[i + j * lds].
// In registers: element (i, j) at a[i][j], every index a compile-time constant
// after unrolling (a runtime index would move the array to local memory).
#pragma once
#include "common.cuh"
#include "gemv.cuh"
#include "stage.cuh"
#include "trsv.cuh"
#include "vector.cuh"

namespace bdf {

// Bytes of `work` getf2_tile and getrs_tile need for a group of G threads (0 for G <= 32):
// iamax's per-warp pairs and gemv_n's G * GEMV_UNROLL partial sums.
template <typename T> __host__ __device__ constexpr int lu_work_bytes(int group) {
  return group > 32 ? (group * GEMV_UNROLL * int(sizeof(T)) > vector_work_bytes(group)
                           ? group * GEMV_UNROLL * int(sizeof(T)) : vector_work_bytes(group))
                    : 0;
}

// bdf::getf2_tile: P A = L U of the m x n matrix in shared memory (LAPACK xGETF2,
// right-looking, one column at a time), in place: L below the diagonal (unit
// diagonal not stored), U on and above it.
// Threads:  a ThreadGroup<G>; every thread calls it with the same arguments.  Thread t
//           owns rows t, t + G, ... in the scale and rank-1 update (a row's update
//           needs only its own multiplier, so scale and update need no barrier between).
// Shared:   s (m x n, leading dimension lds) and spiv (min(m, n) ints) owned by the
//           caller; `work` of lu_work_bytes<T>(G) bytes (null for G <= 32).
// Sync:     begins with a barrier (the caller's writes to s are then visible); three
//           barriers per column (after the pivot search, after the row swap, after the
//           update); ends after a barrier.
// Memory:   s read and written; spiv[j] = the 0-based row swapped with row j (LAPACK's
//           ipiv - 1), written by rank 0.
// Pivots:   bdf::iamax on |re| + |im| (BLAS's IxAMAX: the first largest; NaN counts as
//           the largest, so a NaN column pivots on its first NaN).
// Failure:  returns, to every thread, LAPACK's info: the 1-based column of the first
//           exactly zero pivot, 0 if none.  A zero pivot's column is zero below the
//           diagonal already; it is neither scaled nor used for an update (a finite
//           matrix would not change; nothing is divided by zero), and the
//           factorization goes on with the next column, as LAPACK's does.
template <int G, typename T>
__device__ int getf2_tile(ThreadGroup<G> g, int m, int n, T* s, int lds, int* spiv, unsigned char* work) {
  const int kmax = m < n ? m : n;
  int info = 0;
  g.sync();
  for (int j = 0; j < kmax; ++j) {
    T* col = s + j + (long long)j * lds;
    const int p = j + iamax<G>(g, m - j, col, 1, work);
    g.sync();  // every thread is done reading column j before rows j and p move
    if (g.rank == 0) spiv[j] = p;
    if (p != j) {
      for (int c = g.rank; c < n; c += G) {
        const T t = s[j + (long long)c * lds];
        s[j + (long long)c * lds] = s[p + (long long)c * lds];
        s[p + (long long)c * lds] = t;
      }
    }
    g.sync();  // row j (the pivot row) is in place
    const T piv = *col;
    if (piv == T(0)) {
      if (info == 0) info = j + 1;  // uniform: every thread read the same pivot
      continue;                     // no barrier needed: nothing was written since the last one
    }
    const PivotScale<T> scale(piv);
    for (int i = j + 1 + g.rank; i < m; i += G) {
      const T l = scale(s[i + (long long)j * lds]);
      s[i + (long long)j * lds] = l;
      for (int c = j + 1; c < n; ++c) s[i + (long long)c * lds] -= l * s[j + (long long)c * lds];
    }
    g.sync();  // column j + 1 is updated before its pivot search
  }
  return info;
}

// bdf::getrs_tile: x = U^{-1} L^{-1} x for the n x n factors of getf2_tile in shared
// memory (the row interchanges are applied by the caller before).
// Threads:  a ThreadGroup<G>; every thread calls it.  Two bdf::trsv_window solves (tiles
//           of min(G, 32) unknowns, GEMV updates of DIM_X = min(G, 32) x DIM_Y = G / DIM_X).
// Shared:   lu (ld ldlu) read-only; x (n elements, shared) overwritten; `work` of
//           lu_work_bytes<T>(G) bytes, as T (null for G <= 32).
// Sync:     no barrier assumed on entry; ends after a barrier.
// Memory:   reads the strict lower triangle and the upper triangle of lu.
// Failure:  none: a zero diagonal entry of U gives Inf/NaN (callers with info > 0 skip it).
// forward = false: x holds y = L^{-1} P b already (a right-hand side that rode through
// the factorization as one more column): U x = y alone.
template <typename T, int G>
__device__ void getrs_tile(ThreadGroup<G> g, int n, const T* lu, int ldlu, T* x, T* work, bool forward = true) {
  constexpr int DX = G < 32 ? G : 32, DY = G / DX;
  g.sync();                                                                                // x is filled
  if (forward) trsv_window<T, DX, DY>(g, lu, ldlu, OP_N, true, true, 0, n, x, work);  // L y = x, unit lower
  trsv_window<T, DX, DY>(g, lu, ldlu, OP_N, false, false, 0, n, x, work);              // U x = y
}

// Exchange element j of a register vector with element p (j <= p < limit), element i
// being at(i): each later element is compared with p, so the vector is never indexed
// at run time (loops over NB, unrolled).
template <int NB, class At> __device__ __forceinline__ void swap_selected(int j, int p, int limit, At at) {
  const auto xj = at(j);
  auto moved = xj;
#pragma unroll
  for (int i = j + 1; i < NB; ++i) {
    if (i >= limit) break;
    const bool here = p == i;
    const auto xi = at(i);
    moved = select(here, xi, moved);
    at(i) = select(here, xj, xi);
  }
  at(j) = moved;
}

// bdf::getf2_regs: P A = L U of the m x n matrix a (m, n <= NB) in the registers of
// one thread, in place, exactly as getf2_tile: column j's pivot is the first largest
// |re| + |im| of rows j .. m-1 (iamax_ahead: NaN first), rows j and p swap across the
// n columns, the column is scaled by the reciprocal pivot when sfmin <= |pivot| <=
// 1 / sfmin (else divided, safe_divide), and the trailing matrix gets the rank-1
// update with the same expressions.  Rows >= m and columns >= n are neither read
// nor written (an m x n matrix in a larger instantiation, as LAPACK sees it).
// Threads:  one thread, alone; NB a compile-time bound, m and n at run time.  Loops
//           run over NB, unrolled, and stop at kmax, m or n (uniform branches when
//           the threads of a warp hold matrices of one shape).
// Shared:   none.
// Sync:     none.
// Memory:   a[i][j] read and written for i < m, j < n; ipiv[j] = the 0-based row
//           swapped with row j (LAPACK's ipiv - 1) for j < min(m, n), the rest
//           untouched.  The row swap selects row p by comparing p with each
//           candidate row (a register array is never indexed at run time): about
//           2 n (m - j) selects for column j, of the order of its update's FMAs,
//           skipped when p == j.
// Failure:  returns LAPACK's info (the 1-based column of the first exactly zero
//           pivot, 0 if none); a zero pivot's column is neither scaled nor used,
//           and the factorization goes on, as getf2_tile.
template <int NB, typename T>
__device__ __forceinline__ int getf2_regs(int m, int n, T (&a)[NB][NB], int (&ipiv)[NB]) {
  using R = typename real_of<T>::type;
  const int kmax = m < n ? m : n;
  int info = 0;
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= kmax) break;
    // pivot search: iamax over rows j .. m-1, the running best starting at row j
    R best = abs1(a[j][j]);
    int p = j;
#pragma unroll
    for (int i = j + 1; i < NB; ++i) {
      if (i >= m) break;
      const R v = abs1(a[i][j]);
      if (iamax_ahead(v, i, best, p)) {
        best = v;
        p = i;
      }
    }
    ipiv[j] = p;
    // rows j and p swap across the n columns: row p is one of rows j + 1 .. m - 1.  As
    // LAPACK, nothing moves when p == j: a warp whose matrices need no interchange
    // here (diagonally dominant ones, for instance) skips the selects.
    if (p != j) {
#pragma unroll
      for (int c = 0; c < NB; ++c) {
        if (c >= n) break;
        swap_selected<NB>(j, p, m, [&](int i) -> T& { return a[i][c]; });
      }
    }
    const T piv = a[j][j];
    if (piv == T(0)) {
      if (info == 0) info = j + 1;
      continue;  // the column is zero below the diagonal: nothing to scale or update
    }
    const PivotScale<T> scale(piv);
#pragma unroll
    for (int i = j + 1; i < NB; ++i) {
      if (i >= m) break;
      const T l = scale(a[i][j]);
      a[i][j] = l;
#pragma unroll
      for (int c = j + 1; c < NB; ++c) {
        if (c >= n) break;
        a[i][c] -= l * a[j][c];
      }
    }
  }
  return info;
}

// bdf::getrs_regs: x = U^{-1} L^{-1} P x for the n x n factors of getf2_regs (n <= NB)
// in the registers of one thread: the interchanges ipiv[0], ipiv[1], ... in order
// (LAPACK's xLASWP), the unit lower solve forward, the upper solve backward, each
// column-oriented in trsv_tile's order (x_j = x_j / u_jj by safe_divide, then x_i -= a_ij
// x_j for the rows after it in solve order; trsv_tile divides each row by its diagonal
// first instead).
// Threads:  one thread, alone; loops over NB unrolled, stopping at n.
// Shared:   none.
// Sync:     none.
// Memory:   a and ipiv (0-based, each in [j, n)) read-only; x[0 .. n) overwritten,
//           the rest untouched.
// Failure:  none: a zero diagonal entry of U gives Inf/NaN (callers with info > 0 skip it).
template <int NB, typename T>
__device__ __forceinline__ void getrs_regs(int n, const T (&a)[NB][NB], const int (&ipiv)[NB], T (&x)[NB]) {
  // P x: interchange j <-> ipiv[j], selected among the rows after j (none when equal)
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= n) break;
    if (ipiv[j] != j) swap_selected<NB>(j, ipiv[j], n, [&](int i) -> T& { return x[i]; });
  }
  // L y = x, unit lower, forward
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= n) break;
#pragma unroll
    for (int i = j + 1; i < NB; ++i) {
      if (i >= n) break;
      x[i] -= a[i][j] * x[j];
    }
  }
  // U x = y, backward
#pragma unroll
  for (int j = NB - 1; j >= 0; --j) {
    if (j >= n) continue;
    x[j] = safe_divide(x[j], a[j][j]);
#pragma unroll
    for (int i = 0; i < j; ++i) x[i] -= a[i][j] * x[j];
  }
}

// --- rows design: R rows per lane ---------------------------------------------------
//
// getf2_rows / getrs_rows are getf2_tile / getrs_tile for a matrix held by a group of L
// lanes, R = NB / L rows each: lane i holds rows i, i + L, ..., i + (R - 1) L (a[r][c] =
// element (i + r L, c)).  R > 1 shares each step's fixed work (the pivot reductions,
// the broadcast of the pivot row, the barrier) among R rows and gives the update R
// independent rows: at NB = 16 (float64) a group of 16 lanes spent about 90
// instructions per step on that fixed work against 8 FMAs.  During the factorization
// rows do not move: each row keeps `pos`, its position in LAPACK's swapped order (P A),
// so an interchange changes two integers; at the end the rows are put in that order
// through shared memory.  The pivot search is a few warp reductions (rows_pivot) over
// each lane's best candidate; the pivot row is stored once, by its lane, as row j of U
// in the group's shared array, and the other lanes read it by broadcast loads of 16
// bytes (a shuffle moves 4 bytes: two per double and element, which bounded the first
// version of this design).  The pivot order, the reciprocal rule and the operation order
// are those of getf2_tile.
//
// Every lane of the warp calls them with warp-uniform `steps` and `cols` (the largest
// min(m, n) and n among the warp's groups, so that every shuffle has all 32 lanes; a
// group's own m and n decide what its lanes do).  Groups are aligned: lanes
// [k L, (k + 1) L) of a warp.

// 16 bytes of T, the unit of the rows design's shared-memory traffic (LDS.128 / STS.128).
template <typename T> struct alignas(16) Pack16 {
  static constexpr int W = 16 / int(sizeof(T));
  T v[W];
};

// Element c0 (a multiple of W) on of a register row as one 16-byte piece, to and from
// shared memory (c0 a constant of an unrolled loop: the row is never indexed at run time).
template <int NB, typename T> __device__ __forceinline__ void put_piece(T* dst, const T (&a)[NB], int c0) {
  Pack16<T> p;
#pragma unroll
  for (int e = 0; e < Pack16<T>::W; ++e) p.v[e] = a[c0 + e];
  *reinterpret_cast<Pack16<T>*>(dst) = p;
}
template <typename T> __device__ __forceinline__ Pack16<T> get_piece(const T* src) {
  return *reinterpret_cast<const Pack16<T>*>(src);
}

// Leading dimension of the rows design's U (NB rows): a whole number of 16-byte pieces,
// one piece more than the row so that lanes reading different rows spread over the banks.
// The elements past the row hold the step's pivot reciprocal and, where there are two
// (every type but complex128), the pivot row's element of b (getf2_rows' with_b).
template <typename T> __host__ __device__ constexpr int rows_ldu(int nb) {
  return (nb + Pack16<T>::W - 1) / Pack16<T>::W * Pack16<T>::W + Pack16<T>::W;
}

// A pivot candidate's |re| + |im| as a key whose integer order is bdf::iamax's (a
// non-negative float's bits order as its values do; NaN made the largest): the double's
// bits plus 2^32, or the float's bits plus 1 in the high word, so that every candidate's
// high word is at least 1 and a non-candidate's key (0) never wins.
template <typename R> __device__ __forceinline__ unsigned long long pivot_key(bool cand, R v) {
  unsigned long long key;  // selects, not a branch on cand
  if constexpr (sizeof(R) == 8) {
    const unsigned long long bits =
        v != v ? 0x7ff8000000000000ull : static_cast<unsigned long long>(__double_as_longlong(double(v)));
    key = bits + (1ull << 32);
  } else {
    key = (unsigned long long)((v != v ? 0x7fc00000u : __float_as_uint(float(v))) + 1u) << 32;
  }
  return cand ? key : 0ull;
}

// Maximum / minimum of v over each group of L lanes of a warp, by one full-warp REDUX per
// group (the other groups' lanes give the neutral value): every lane of the warp calls
// it.  A group's own mask would send __reduce_*_sync down the compiler's divergent
// (collective) path, once per group: ncu found that path in about a quarter of the rows
// design's instructions at L = 16.
template <int L, bool MAX> __device__ __forceinline__ unsigned group_reduce(unsigned v) {
  constexpr unsigned NEUTRAL = MAX ? 0u : 0xffffffffu;
  const int g = int(threadIdx.x & 31u) / L;
  unsigned out = NEUTRAL;
#pragma unroll
  for (int q = 0; q < 32 / L; ++q) {
    const unsigned w = g == q ? v : NEUTRAL;
    unsigned t;
    if constexpr (MAX) t = __reduce_max_sync(0xffffffffu, w);
    else t = __reduce_min_sync(0xffffffffu, w);
    if (g == q) out = t;
  }
  return out;
}

// The pivot of one step of getf2_rows: the smallest position among the largest keys of
// the group (bdf::iamax's rule: NaN first, then larger, then the smaller position), by
// integer maxima of the key's words and a minimum of the positions that reach both:
// three reductions for a double, two for a float (its low word is 0).  (Measured on the
// H100: the same or faster than a ballot that skips the last two when one lane holds
// the maximum of the high words.)  Every lane of the warp calls it.
template <int L, typename R> __device__ __forceinline__ int rows_pivot(unsigned long long key, int pos) {
  const unsigned hi = unsigned(key >> 32), lo = unsigned(key);
  const unsigned top_hi = group_reduce<L, true>(hi);
  const bool on_hi = hi == top_hi;
  const unsigned top_lo = sizeof(R) == 8 ? group_reduce<L, true>(on_hi ? lo : 0u) : 0u;
  return int(group_reduce<L, false>(on_hi && lo == top_lo ? unsigned(pos) : 0xffffffffu));
}

// One step's pivot search over a group of L lanes, R rows a lane (the rows, warps and
// panels designs): cand[r] says whether row r may take the pivot, v[r] is its element of
// the step's column; key receives each row's pivot key (0 for a non-candidate).  The
// lane's best candidate is the largest key, the smaller position among equal keys
// (bdf::iamax's order); its PivotScale is computed while the group's reductions run, so
// that the pivot's reciprocal comes with its row and no lane waits for a division after
// the pivot is known.  The reductions come first in the code: a warp reduction cannot
// be moved across the division's branch (ncu, panels design: REDUX issued after the
// reciprocal's Newton steps, the two latencies in series).  `at` is the group's pivot
// position (rows_pivot).  Every lane of the warp calls it.
//
// EXACT = false (a solve that returns X alone, where no pivot is seen): one 32-bit key
// a row, the magnitude's leading bits above the position (threshold_pivot_key), and one
// reduction instead of three (two for a float): the pivot is the first row, in P A's
// order, whose |re| + |im| has the largest leading bits, so within a factor 1 + 2^-14 of
// the column's largest (partial pivoting with a threshold of 0.99994; the growth bound
// and the backward error are GEPP's).  Positions below PIVOT_POS_LIMIT.
template <typename T> struct PivotChoice {
  unsigned long long best;  // the lane's best key
  int best_pos, at;         // its position; the group's pivot position
  T best_v;                 // its value
  PivotScale<T> own;        // the scaling by best_v
};

constexpr int PIVOT_POS_BITS = 7, PIVOT_POS_LIMIT = 1 << PIVOT_POS_BITS;

// The EXACT = false key: 0 for a non-candidate; else |v|'s bits (a double's high word,
// NaN made the largest) less their PIVOT_POS_BITS - 1 lowest bits, plus 1, above the
// position's complement, so that the integer maximum is the largest leading bits and
// among equal ones the smaller position.  (|v|'s word < 2^31 and NaN's canonical word
// keeps the sum below 2^32.)
template <typename R> __device__ __forceinline__ unsigned threshold_pivot_key(bool cand, R v, int pos) {
  unsigned bits;
  if constexpr (sizeof(R) == 8) bits = v != v ? 0x7ff80000u : unsigned(__double2hiint(double(v)));
  else bits = v != v ? 0x7fc00000u : __float_as_uint(float(v));
  const unsigned key = ((bits >> (PIVOT_POS_BITS - 1)) + 1u) << PIVOT_POS_BITS | unsigned(PIVOT_POS_LIMIT - 1 - pos);
  return cand ? key : 0u;
}

template <int L, int R, typename T, bool EXACT = true>
__device__ __forceinline__ PivotChoice<T> choose_pivot(const bool (&cand)[R], const int (&pos)[R], const T (&v)[R],
                                                       unsigned long long (&key)[R]) {
  using Real = typename real_of<T>::type;
  PivotChoice<T> c;
  if constexpr (EXACT) {
#pragma unroll
    for (int r = 0; r < R; ++r) key[r] = pivot_key<Real>(cand[r], abs1(v[r]));
    c.best = key[0];
    c.best_pos = pos[0];
    c.best_v = v[0];
#pragma unroll
    for (int r = 1; r < R; ++r) {
      const bool better = key[r] > c.best || (key[r] == c.best && pos[r] < c.best_pos);
      c.best = better ? key[r] : c.best;
      c.best_pos = better ? pos[r] : c.best_pos;
      c.best_v = select(better, v[r], c.best_v);
    }
    c.at = rows_pivot<L, Real>(c.best, c.best_pos);
    c.own = PivotScale<T>(c.best_v);  // after the reductions in the code (see above)
  } else {
    unsigned k[R], best = 0u;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      k[r] = threshold_pivot_key<Real>(cand[r], abs1(v[r]), pos[r]);
      key[r] = k[r];
      best = max(best, k[r]);
    }
    c.best_v = v[0];
#pragma unroll
    for (int r = 1; r < R; ++r) c.best_v = select(k[r] == best, v[r], c.best_v);
    c.best = best;
    c.best_pos = PIVOT_POS_LIMIT - 1 - int(best & unsigned(PIVOT_POS_LIMIT - 1));
    const unsigned top = group_reduce<L, true>(best);
    c.own = PivotScale<T>(c.best_v);  // after the reduction in the code (see above)
    c.at = top != 0u ? PIVOT_POS_LIMIT - 1 - int(top & unsigned(PIVOT_POS_LIMIT - 1)) : -1;
  }
  return c;
}

// The lane's rows i < m (lane + r L) from U (rows of rows_ldu<T>(NB)) into its registers.
template <int NB, int L, typename T, int R = NB / L>
__device__ __forceinline__ void rows_from_u(int lane, int m, const T* U, T (&a)[R][NB]) {
  using P = Pack16<T>;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * L;
    if (row < m) {
#pragma unroll
      for (int c0 = 0; c0 < NB; c0 += P::W) {
        const P u = get_piece(U + row * rows_ldu<T>(NB) + c0);
#pragma unroll
        for (int e = 0; e < P::W; ++e) a[r][c0 + e] = u.v[e];
      }
    }
  }
}

// bdf::load_rows_staged: the m x n matrix (m, n <= NB; n a multiple of Pack16<T>::W) whose
// row i is the n elements at src + i ld (src and ld's bytes multiples of 16) into the
// lanes' rows as getf2_rows takes them: the group's lanes copy consecutive 16-byte pieces
// into their place in U (rows of rows_ldu<T>(NB)) by cp.async (coalesced, and no
// registers held: staged through registers, the pieces spilled beside the rows) and read
// their R rows back.  (A lane reading its own row from global memory touched a sector
// per lane and load: ncu, DGESV 32 x 32, L1 63 % busy and an eighth of the stall samples
// waiting for the matrix.)
// Threads:  the whole warp (groups of L lanes; m = 0 for a group without a matrix).
// Shared:   U, the group's NB rows.
// Sync:     __syncwarp before the copies (the previous matrix's reads of U) and after.
// Memory:   rows past m keep their registers; columns past n take what U held (never
//           used: no pivot, solve or store reads them).
template <int NB, int L, typename T, int R = NB / L>
__device__ __forceinline__ void load_rows_staged(int lane, int m, int n, const T* src, long long ld, T* U,
                                                 T (&a)[R][NB]) {
  using P = Pack16<T>;
  constexpr int W = P::W, PPR = NB / W, LDU = rows_ldu<T>(NB), STEP = L / PPR, PER_LANE = NB / STEP;
  static_assert(NB % W == 0 && L % PPR == 0, "whole pieces a row, whole rows a copy of the group");
  const int row0 = lane / PPR, c0 = lane % PPR * W;  // a lane's pieces: rows row0 + i STEP, column c0
  const bool mine = c0 < n;
  __syncwarp();  // the previous matrix's U has been read
  const T* p = src + row0 * ld + c0;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    if (mine && row0 + i * STEP < m) copy_async_zfill<16>(U + (row0 + i * STEP) * LDU + c0, p, 16);
    p += STEP * ld;
  }
  stage_commit();
  stage_wait<0>();
  __syncwarp();
  rows_from_u<NB, L>(lane, m, U, a);
}

// bdf::getf2_rows: P A = L U of the m x n matrix (m <= NB, n <= NB) in the lanes' a, in
// place.  On exit row i of P A's factors (L to the left of the diagonal, U from it on)
// is where row i of A was (lane i % L, a[i / L]), and orig[r] is the row of A it came
// from; my_piv[r]: row i < min(m, n) gets the 0-based row swapped with i at step i
// (LAPACK's ipiv - 1).  Returns LAPACK's info to every lane of the group.
// With `with_b` (GESV: m == n; uniform over the warp; not for complex128) bv holds b's elements at the lane's
// rows on entry and (L^{-1} P b)_i at row i on exit: b rides along as one more column, its
// pivot element stored with the pivot row (U's element NB + 1), so the forward solve
// costs one multiply-add a step instead of a chain of shuffles after the factorization
// (getrs's column order: the same operations as getrs_rows_lower).  EXACT = false: the
// threshold pivots of choose_pivot (X alone is wanted: my_piv is then not LAPACK's).
// ORDER = false (X alone, m == n, with_b: getrf_rows_body's DIRECT): L is not kept and
// the rows are not put in P A's order; on exit the lane's a[r] holds row i = lane + r L
// of U from its diagonal's 16-byte piece on (the rest is stale), bv[r] = (L^{-1} P b)_i,
// and U keeps row i at row i with the pivot's reciprocal past it (rows_scale_u's
// STORED_RCP), so the shared-memory round trip of the order and the reciprocals of
// rows_scale_u are saved.
// Threads:  the whole warp (see above); `lane` the rank in the group (0..L-1).
// Shared:   U, the group's NB rows of rows_ldu<T>(NB) elements, 16-byte aligned: row j
//           of U from step j on with the pivot's reciprocal past its NB elements (0 if
//           the rule divides), then every row of the factors in P A's order (the int
//           past row r's NB elements: the row of A it came from).
// Sync:     __syncwarp on entry, after each pivot row is stored, and twice as the rows
//           are put in order.
// Memory:   registers and U.  Each step updates every row with the multiplier 0 where
//           it must not change (rows already in U, the pivot row, rows past m): their
//           registers may take 0 * Inf = NaN, and the rows of U are read back from U at
//           the end.  A step with a zero pivot updates nothing.
// Failure:  a zero pivot's column is neither scaled nor used, as getf2_tile.
template <int NB, int L, typename T, int R = NB / L, bool EXACT = true, bool ORDER = true>
__device__ __forceinline__ int getf2_rows(int lane, int m, int n, int steps, T (&a)[R][NB], int (&orig)[R],
                                          int (&my_piv)[R], T* U, bool with_b, T (&bv)[R]) {
  using P = Pack16<T>;
  using Real = typename real_of<T>::type;
  constexpr int W = P::W, LDU = rows_ldu<T>(NB);
  static_assert(NB % W == 0 && R * L == NB, "rows of whole 16-byte pieces, R rows per lane");
  static_assert(EXACT || NB <= PIVOT_POS_LIMIT, "positions within the threshold key");
  with_b = with_b && LDU >= NB + 2;  // room for b's element past the reciprocal
  const int kmin = m < n ? m : n;
  int info = 0, pos[R];  // pos: the position of each row in P A
#pragma unroll
  for (int r = 0; r < R; ++r) pos[r] = my_piv[r] = lane + r * L;
  __syncwarp();  // the previous matrix's rows have been read
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= steps) break;  // warp-uniform
    const bool live = j < kmin;
    // the lane's best candidate (positions j .. m-1), then the group's
    unsigned long long key[R];
    T col[R];
    bool cand[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      col[r] = a[r][j];
      cand[r] = live && lane + r * L < m && pos[r] >= j;
    }
    const PivotChoice<T> choice = choose_pivot<L, R, T, EXACT>(cand, pos, col, key);
    const int at = choice.at;
    bool src[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      src[r] = key[r] != 0ull && pos[r] == at;
      if (src[r]) {  // the pivot row, from the 16-byte piece holding element j on, is row j of U
#pragma unroll
        for (int c0 = j / W * W; c0 < NB; c0 += W) put_piece(U + j * LDU + c0, a[r], c0);
        U[j * LDU + NB] = choice.own.r;  // 0 where the rule divides
        if (with_b) U[j * LDU + NB + 1] = bv[r];
      }
    }
    if (live) {  // the interchange of positions j and at
      if (lane == j % L) my_piv[j / L] = at;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (pos[r] == j) pos[r] = at;
        else if (src[r]) pos[r] = j;
      }
    }
    __syncwarp();  // row j of U is visible to the group
    const T piv = live ? U[j * LDU + j] : T(0), rcp = live ? U[j * LDU + NB] : T(0);
    const bool go = live && piv != T(0);  // group-uniform
    if (live && !go && info == 0) info = j + 1;
    if (go) {
      T l[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {  // PivotScale(piv, rcp), the division apart (rare: rcp = 0)
        const bool upd = lane + r * L < m && pos[r] > j;
        T v = a[r][j] * rcp;
        if (rcp == T(0)) v = safe_divide(a[r][j], piv);
        l[r] = upd ? v : T(0);
        if constexpr (ORDER) a[r][j] = upd ? v : a[r][j];  // (!ORDER: L is not kept)
      }
      if (with_b) {  // rows that must not change may take 0 * Inf: their b comes back from U
        const T bj = U[j * LDU + NB + 1];
#pragma unroll
        for (int r = 0; r < R; ++r) bv[r] -= l[r] * bj;
      }
#pragma unroll
      for (int c0 = (j + 1) / W * W; c0 < NB; c0 += W) {
        const P u = get_piece(U + j * LDU + c0);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < W; ++e)
            if (c0 + e > j) a[r][c0 + e] -= l[r] * u.v[e];
      }
    }
  }
  if constexpr (!ORDER) {  // row i of U is U's row i: from its diagonal's piece on, and y_i
    __syncwarp();
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = lane + r * L;
      orig[r] = row;
      if (row < kmin) {
#pragma unroll
        for (int c0 = 0; c0 < NB; c0 += W) {
          if (c0 + W <= row) continue;
          const P u = get_piece(U + row * LDU + c0);
#pragma unroll
          for (int e = 0; e < W; ++e) a[r][c0 + e] = u.v[e];
        }
        if (with_b) bv[r] = U[row * LDU + NB + 1];
      }
    }
    return info;
  }
  // every row to its position: U's part from U (positions past min(m, n) have none),
  // the whole row back into U at its position, and the rows at the lane's own
  // positions read from there
  __syncwarp();  // the last step's reciprocal has been read: the ints below take its place
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * L;
    orig[r] = row;
    if (row < m) {
#pragma unroll
      for (int c0 = 0; c0 < NB; c0 += W) {
        const P u = get_piece(U + pos[r] * LDU + c0);
#pragma unroll
        for (int e = 0; e < W; ++e)
          a[r][c0 + e] = select(c0 + e >= pos[r] && pos[r] < kmin, u.v[e], a[r][c0 + e]);
        put_piece(U + pos[r] * LDU + c0, a[r], c0);
      }
      *reinterpret_cast<int*>(U + pos[r] * LDU + NB) = row;  // (b's element NB + 1 stays)
    }
  }
  __syncwarp();
  rows_from_u<NB, L>(lane, m, U, a);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * L;
    if (row < m) {
      orig[r] = *reinterpret_cast<const int*>(U + row * LDU + NB);
      if (with_b) bv[r] = U[row * LDU + NB + 1];
    }
  }
  return info;
}

// bdf::rows_scale_u: each of the lane's rows i < n of U (the factors of getf2_rows)
// divided by its diagonal entry past the diagonal (L, left of it, untouched), and that
// entry's PivotScale in s[r] (a reciprocal unless |U_ii| is outside [sfmin, 1 / sfmin],
// then a division), so that a step of getrs_rows_upper's chain is one shuffle and one
// multiply-add: with the division on the chain (the owner scaling x_k at its turn, a
// branch on the rule) a step took about 20 instructions, and the solve a fifth of DGESV
// 16 x 16 and 32 x 32 (ncu).  Once per matrix, before the solves.  STORED_RCP: U as
// getf2_rows<.., ORDER = false> left it, the pivot's reciprocal (0: the rule divides) past
// row i's NB elements: the same scales, not computed again.
// Threads, Shared: as getrs_rows_upper (U as getf2_rows left it, read at the rows' diagonals).
template <int NB, int L, typename T, int R = NB / L, bool STORED_RCP = false>
__device__ __forceinline__ void rows_scale_u(int lane, int n, T (&a)[R][NB], const T* U,
                                             PivotScale<T> (&s)[R]) {
  constexpr int LDU = rows_ldu<T>(NB);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * L;
    if constexpr (STORED_RCP)
      s[r] = row < n ? PivotScale<T>(U[row * LDU + row], U[row * LDU + NB]) : PivotScale<T>(T(1));
    else s[r] = PivotScale<T>(row < n ? U[row * LDU + row] : T(1));
    if (row < n) pivot_scale_row(s[r], a[r], row);
  }
}

// bdf::getrs_rows: x = U^{-1} L^{-1} (P b) for the n x n factors of getf2_rows, row i of
// them and (P b)_i in lane i % L's a[i / L] and x[i / L], ending with x_i: the forward
// chain (getrs_rows_lower; not where getf2_rows' with_b left L^{-1} P b in x), then the
// backward one (getrs_rows_upper), in the column order of getrs_tile.  getrs_rows_upper,
// SCALED: U as rows_scale_u left it, s its diagonal's scales, x divided by U_ii before the
// chain (as trsv_tile_regs); else x_k divided at its turn by the pivot rule (PivotScale of
// U's diagonal, read from U; s unused).
// Threads, Shared, Sync: as getf2_rows (`cols` the warp's largest n; U as getf2_rows left
//           it); a group with n = 0 takes part in the shuffles and leaves x as it is.
// Failure:  none: a zero diagonal entry of U gives Inf/NaN (callers with info > 0 skip it).
template <int NB, int L, typename T, int R = NB / L>
__device__ __forceinline__ void getrs_rows_lower(int lane, int n, int cols, const T (&a)[R][NB], T (&x)[R]) {
  constexpr unsigned ALL = 0xffffffffu;
#pragma unroll
  for (int k = 0; k < NB; ++k) {  // unit lower, forward
    if (k >= cols) break;  // warp-uniform
    const T xk = shfl_from(x[k / L], k % L, ALL, L);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = lane + r * L;
      if (row < n && k < n && row > k) x[r] -= a[r][k] * xk;
    }
  }
}

template <int NB, int L, bool SCALED, typename T, int R = NB / L>
__device__ __forceinline__ void getrs_rows_upper(int lane, int n, int cols, const T (&a)[R][NB], const T* U,
                                                 const PivotScale<T> (&s)[R], T (&x)[R]) {
  constexpr unsigned ALL = 0xffffffffu;
  T diag[R], rcp[R];  // !SCALED: U's diagonal at the lane's rows (1 past n) and its reciprocal
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = lane + r * L;
    if constexpr (SCALED) {
      if (row < n) x[r] = s[r](x[r]);
    } else {
      diag[r] = row < n ? U[row * rows_ldu<T>(NB) + row] : T(1);
      rcp[r] = PivotScale<T>(diag[r]).r;
    }
  }
#pragma unroll
  for (int k = NB - 1; k >= 0; --k) {  // upper, backward
    if (k >= cols) continue;  // warp-uniform
    if constexpr (!SCALED) {
      if (lane == k % L && k < n) x[k / L] = PivotScale<T>(diag[k / L], rcp[k / L])(x[k / L]);
    }
    const T xk = shfl_from(x[k / L], k % L, ALL, L);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = lane + r * L;
      if (row < n && k < n && row < k) x[r] -= a[r][k] * xk;
    }
  }
}

// --- warps design: one block per matrix, rows over lanes, columns over warps -----------
//
// getf2_warps is getf2_rows for a matrix too large for one warp's registers (NB = 64,
// 128): a block of W warps holds it, lane i of every warp the rows i, i + 32, .. (R =
// NB / 32 of them) and warp w the columns w, w + W, .. (C = NB / W), so a thread holds
// R C elements (a[c][r]: element (i + 32 r, w + W c); a[c] is the thread's piece of a
// column).  Rows do not move (pos, as getf2_rows); the pivot search of step j is
// rows_pivot over the 32 lanes of the warp owning column j, which scales the column and
// publishes the multipliers (sl) and the pivot's position and flag (sstep) for every
// warp; each warp's lane holding the pivot row stores its slice of that row as row j of
// U (in the warps' order: warp w's columns at w C ..), which the warp's lanes then read by
// broadcast loads.  One barrier a step: the owner of column j + 1 (the next warp) updates
// that column first and publishes step j + 1's pivot before the rest of its update (a
// look-ahead of one column), sl and sstep alternating between two slots.  Unrolled over
// the C local columns (a runtime loop over the W warps inside), a column index into a is
// always a compile-time constant, and columns left of the step are skipped at compile
// time.  The pivot order, the reciprocal rule and the operation order are those of
// getf2_tile.
//
// Measured on the H100 (ncu, 128 x 128 float64, 512 threads): the step costs about 2,000
// cycles, half of the warps' time waiting at the barrier for the owner's chain (about 150
// dependent instructions: the pivot keys of its R rows, three reductions, the broadcast,
// the scaling).  Two other layouts measured no faster: a panel of C columns per warp
// factored alone (a barrier a panel: its single warp's chain of about 400 instructions a
// step, 2,300 cycles), and a grid of NB / 32 warps a panel (a row a lane, two named
// barriers of the group a step: DGETRF 128 2.70 ms against 2.33).
//
// Threads:  the whole block of 32 W threads, every thread with the same m, n.
// Shared:   U (NB rows of NB elements, then the factors: NB + 1 by NB elements), sl
//           (2 NB), sstep (4 ints), spiv (min(m, n) ints), sorig (m ints).
// Sync:     __syncthreads once a step and three times at the end.
// Memory:   registers, U and the small arrays; on exit U holds P A = L U column-major
//           with leading dimension NB + 1 (the m x n part), spiv LAPACK's ipiv - 1 and
//           sorig[i] the row of A that row i of P A came from.
// Failure:  LAPACK's info, returned to every thread; a zero pivot's column is neither
//           scaled nor used, as getf2_tile.
// Exact pivots only: choose_pivot's threshold pivots for X alone, through a uniform branch
// a step, ran DGESV 64 1.6 % slower (H100, 1.124 ms against 1.106).
template <int NB, int W, typename T, int R = NB / 32, int C = NB / W>
__device__ __forceinline__ int getf2_warps(int m, int n, T (&a)[C][R], T* U, T* sl, int* sstep, int* spiv,
                                           int* sorig) {
  using P = Pack16<T>;
  using Real = typename real_of<T>::type;
  constexpr int PW = P::W;
  constexpr unsigned ALL = 0xffffffffu;
  static_assert(R * 32 == NB && C * W == NB && C % PW == 0, "whole rows per lane, whole 16-byte pieces per warp");
  const int lane = int(threadIdx.x & 31u), w = int(threadIdx.x / 32);
  const int kmin = m < n ? m : n;
  int info = 0, pos[R];  // pos: the position of each row in P A
#pragma unroll
  for (int r = 0; r < R; ++r) pos[r] = lane + 32 * r;

  // Step s's pivot in the owner warp's column piece v: search, scale, publish.
  auto pivot_step = [&](int s, T (&v)[R]) {
    unsigned long long key[R];
    bool cand[R];
#pragma unroll
    for (int r = 0; r < R; ++r) cand[r] = lane + 32 * r < m && pos[r] >= s;
    const PivotChoice<T> choice = choose_pivot<32>(cand, pos, v, key);
    const int at = choice.at;
    const int src = __ffs(__ballot_sync(ALL, choice.best != 0ull && choice.best_pos == at)) - 1;
    const T piv = shfl_from(choice.best_v, src, ALL, 32), rcp = shfl_from(choice.own.r, src, ALL, 32);
    const bool go = piv != T(0);
    T x[R];  // the multipliers; the rule's division (rcp = 0: uniform, rare) apart, not a
             // branch a row
#pragma unroll
    for (int r = 0; r < R; ++r) x[r] = v[r] * rcp;
    if (rcp == T(0)) {
#pragma unroll
      for (int r = 0; r < R; ++r) x[r] = safe_divide(v[r], piv);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {  // rows whose position after the interchange is past s
      const int p = pos[r] == s ? at : pos[r] == at ? s : pos[r];
      const bool upd = go && lane + 32 * r < m && p > s;
      sl[(s & 1) * NB + lane + 32 * r] = select(upd, x[r], T(0));
      v[r] = select(upd, x[r], v[r]);
    }
    if (lane == 0) {
      sstep[2 * (s & 1)] = at;
      sstep[2 * (s & 1) + 1] = go;
      spiv[s] = at;
    }
  };

  if (kmin > 0 && w == 0) pivot_step(0, a[0]);
#pragma unroll
  for (int jc = 0; jc < C; ++jc) {
    if (jc * W >= kmin) break;  // uniform
    for (int w0 = 0; w0 < W; ++w0) {
      const int j = w0 + jc * W;  // this step's column: local column jc of warp w0
      if (j >= kmin) break;       // uniform
      __syncthreads();            // step j's pivot is published; step j - 1's reads of its slot are done
      const int at = sstep[2 * (j & 1)];
      const bool go = sstep[2 * (j & 1) + 1] != 0;
      if (!go && info == 0) info = j + 1;
      T l[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        l[r] = sl[(j & 1) * NB + lane + 32 * r];
        const bool src = lane + 32 * r < m && pos[r] == at;
        if (src) {  // this warp's slice of the pivot row is row j of U
#pragma unroll
          for (int c0 = 0; c0 < C; c0 += PW) {
            P piece;
#pragma unroll
            for (int e = 0; e < PW; ++e) piece.v[e] = a[c0 + e][r];
            *reinterpret_cast<P*>(U + j * NB + w * C + c0) = piece;
          }
        }
        pos[r] = pos[r] == j ? at : src ? j : pos[r];
      }
      __syncwarp();  // the slice is visible to the warp
      // the next step's column: local jc of warp w0 + 1, or local jc + 1 of warp 0
      const bool wrap = w0 + 1 == W;
      const bool ahead = j + 1 < kmin && w == (wrap ? 0 : w0 + 1);
      // (c a constant after unrolling: a is never indexed at run time)
      auto update = [&](int c) {
        const T u = U[j * NB + w * C + c];
#pragma unroll
        for (int r = 0; r < R; ++r) a[c][r] -= l[r] * u;
      };
      if (ahead) {
        if (!wrap) {
          if (go) update(jc);
          pivot_step(j + 1, a[jc]);
        } else if (jc + 1 < C) {
          const int nc = jc + 1 < C ? jc + 1 : jc;
          if (go) update(nc);
          pivot_step(j + 1, a[nc]);
        }
      }
      if (go) {
#pragma unroll
        for (int c = jc; c < C; ++c) {
          if (c == jc && w <= w0) continue;                  // columns up to j
          if (ahead && c == (wrap ? jc + 1 : jc)) continue;  // done ahead
          update(c);
        }
      }
    }
  }
  // every row to its place: the pivot rows from U (their registers may have taken
  // 0 * Inf since), then all of them into U column-major at their positions
  __syncthreads();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (lane + 32 * r < m && pos[r] < kmin) {
#pragma unroll
      for (int c0 = 0; c0 < C; c0 += PW) {
        const P piece = get_piece(U + pos[r] * NB + w * C + c0);
#pragma unroll
        for (int e = 0; e < PW; ++e) a[c0 + e][r] = piece.v[e];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = lane + 32 * r;
    if (row < m) {
#pragma unroll
      for (int c = 0; c < C; ++c)
        if (w + W * c < n) U[pos[r] + (w + W * c) * (NB + 1)] = a[c][r];
      if (w == 0) sorig[pos[r]] = row;
    }
  }
  __syncthreads();
  return info;
}


// --- panels design: the matrix in shared memory, one panel warp, W - 1 update warps -------
//
// getf2_panels is LAPACK's blocked right-looking xGETRF for a matrix of up to NB x NB
// held by one block in shared memory, with a look-ahead of one panel.  Warp 0 factors
// the panel of PB columns at k in its registers (lane i the rows k + i, k + i + 32, ..:
// the pivot search of getf2_warps, the pivot row to the warp through two small slots of
// shared memory, no block barrier); the rows keep their registers and their positions
// move (pos), so the panel is stored back with every row at its final position, and the
// rows that moved are published as a list of moves (at most 2 PB).  After one barrier the
// W - 1 update warps apply the panel to the other columns: the moves (LAPACK's xLASWP;
// every column but the panel's), U12 = L11^{-1} A12 (a lane a column) and A22 -= L21 U12
// (lanes over rows, L21 in registers).  The next panel's columns: in float32 warp 0's
// own (OWN_LOOKAHEAD: it applies the panel to them itself, the same apply_panel, one
// warp); in float64 and complex64 the update warps' first, signalled to warp 0 by named
// barrier 1.  Warp 0 then factors the next panel while the update warps apply the panel
// to the rest.  Why: in getf2_warps every step waits at a block barrier for one warp's
// chain; here the block meets once a panel.
// Measured on the H100 (session 19, ncu at 128 x 128 float64, 256 threads): the panel
// warp is the critical path, about 260 instructions and 1,500-2,000 cycles a step (its
// dependent chain: keys, three reductions, the pivot row's trip through shared memory),
// the update warps a quarter of their time at the panel barrier; DGESV 128 2.12 ms against
// warps' 2.28, SGESV 128 1.85 (three blocks an SM) against 2.02; the default for float32
// and float64 from 65 to 128.  Until session 65 the update warps took the next panel's
// columns first and signalled warp 0 by a named barrier (ncu, DGESV 128: warp 0 waited
// there 16 % of its time); warp 0's own look-ahead with the pivot step's reductions first
// and its pivot row stored once (choose_pivot, factor_panel), H100, one process: DGESV 128
// 1.629 -> 1.601 ms, SGESV 128 1.371 -> 1.274, CGESV 128 2.312 -> 2.304, DGESV 96 2.097 ->
// 2.052, SGETRF 128 1.418 -> 1.322, but DGETRF 128 1.629 -> 1.684 and CGETRF 128 2.359 ->
// 2.378; the look-ahead alone: float32 faster (SGESV 128 1.319), float64 and complex64
// slower (DGESV 128 1.700, CGESV 2.334); so since session 66 float32 alone (DGESV 128
// 1.603 -> 1.587 ms, CGESV 128 2.305 -> 2.267, float32 level).  The pivot order, the
// reciprocal rule and the treatment of a zero pivot (its column neither scaled nor
// used: the update warps drop its terms by the panel's mask) are getf2_tile's; the
// trailing updates are the blocked algorithm's (PB terms a pass), as LAPACK's xGETRF.
// EXACT = false (getrf_panels_direct_kernel: X alone, no pivot returned): choose_pivot's
// threshold pivots (one reduction a step).  keep_l = false (X alone with one right-hand side
// riding as column n - 1: L is never read again): the interchanges of later panels skip L's
// columns, whose rows are left out of order.  Measured on the H100 (session 65, one
// process): DGESV 128 1.684 -> 1.626 ms, SGESV 128 1.435 -> 1.357, CGESV 128 2.462 ->
// 2.287, DGESV 96 2.165 -> 2.089.  A kernel of its own, not a branch: the threshold key
// behind a branch a step cost DGETRF 128 2.9 %, the panel's code twice behind a branch a
// panel 1.9 %.
//
// Threads:  the whole block of 32 W threads (W >= 2), every thread with the same m, n.
// Shared:   S, the matrix column-major with leading dimension NB + 1 (rows and columns
//           past m and n are never read); sl, getf2_warps' 2 NB elements (the pivot
//           row's two slots, then the info word and the moves of two panels: 2 PB + 2 +
//           69 ints fit from NB = 64 on); spiv (min(m, n) ints), sorig (m ints).
// Sync:     __syncthreads once a panel and once at the end (__syncwarp within warps);
//           without OWN_LOOKAHEAD named barrier 1 (every thread) between the update
//           warps' next-panel columns and the next panel.
// Memory:   on exit S holds P A = L U (m x n part), spiv LAPACK's ipiv - 1 and sorig[i]
//           the row of A that row i of P A came from, as getf2_warps.
// Failure:  LAPACK's info, returned to every thread.
template <int NB, int W, int PB, bool EXACT = true, typename T, int R = NB / 32>
__device__ __forceinline__ int getf2_panels(int m, int n, T* S, T* sl, int* spiv, int* sorig, bool keep_l = true) {
  using Real = typename real_of<T>::type;
  constexpr int LD = NB + 1, U = W - 1, MOVES = 2 * PB, SLOT = 2 + 2 * MOVES;
  // float32: warp 0 applies each panel to the next panel's columns itself; float64 and
  // complex64 (slower so: a warp's 64 more FMAs a panel) keep the update warps' named barrier
  constexpr bool OWN_LOOKAHEAD = sizeof(T) == 4;
  constexpr unsigned ALL = 0xffffffffu;
  static_assert(R * 32 == NB && W >= 2 && MOVES <= 32, "whole rows a lane, a panel warp and update warps");
  static_assert(EXACT || NB <= PIVOT_POS_LIMIT, "positions within the threshold key");
  static_assert(2 * (PB + 1) * sizeof(T) + (1 + 2 * SLOT) * sizeof(int) <= 2 * NB * sizeof(T), "sl's room");
  const int lane = int(threadIdx.x & 31u), w = int(threadIdx.x / 32);
  const int kmin = m < n ? m : n, panels = (kmin + PB - 1) / PB;
  int* sint = reinterpret_cast<int*>(sl + 2 * (PB + 1));  // [0] info, then two slots of moves
  auto moves_of = [&](int p) { return sint + 1 + (p & 1) * SLOT; };  // count, zero-pivot mask, dst[], src[]

  if (w > 0)
    for (int i = int(threadIdx.x) - 32; i < m; i += 32 * U) sorig[i] = i;
  if (threadIdx.x == 0) sint[0] = 0;
  int info = 0;  // the panel warp's

  // The panel at k (kb <= PB columns) in warp 0's registers, factored and stored.
  auto factor_panel = [&](int p, int k, int kb) {
    T a[R][PB];
    int pos[R];
    bool valid[R];
#pragma unroll
    for (int q = 0; q < R; ++q) {
      const int i = k + lane + 32 * q;
      valid[q] = i < m;
      pos[q] = i;
#pragma unroll
      for (int c = 0; c < PB; ++c) a[q][c] = valid[q] && c < kb ? S[i + (k + c) * LD] : T(0);
    }
    unsigned go_mask = 0;
#pragma unroll
    for (int t = 0; t < PB; ++t) {
      if (t >= kb) break;  // uniform
      const int j = k + t;
      unsigned long long key[R];
      T v[R];
      bool cand[R];
#pragma unroll
      for (int q = 0; q < R; ++q) {
        v[q] = a[q][t];
        cand[q] = valid[q] && pos[q] >= j;
      }
      const PivotChoice<T> choice = choose_pivot<32, R, T, EXACT>(cand, pos, v, key);
      const int at = choice.at;
      // the pivot row from column t on, and its reciprocal, to the warp (two slots: a
      // lane writing step t + 1's has passed the barrier every lane reaches after
      // reading step t - 1's)
      // (the lane's row by selects and one store: a store a row put the shared window's
      // address, S2R SR_CgaCtaId, into each of R predicated blocks on the chain)
      T* row = sl + (t & 1) * (PB + 1);
      T prow[PB];
      bool own = false;
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const bool here = key[q] != 0ull && pos[q] == at;
        own = own || here;
#pragma unroll
        for (int c = t; c < PB; ++c) prow[c] = q == 0 ? a[0][c] : select(here, a[q][c], prow[c]);
      }
      if (own) {
#pragma unroll
        for (int c = t; c < PB; ++c) row[c] = prow[c];
        row[PB] = choice.own.r;  // 0 where the rule divides
      }
      __syncwarp();
      const T piv = row[t], rcp = row[PB];
      T u[PB];
#pragma unroll
      for (int c = t + 1; c < PB; ++c) u[c] = row[c];
      const bool go = piv != T(0);  // uniform
      T x[R];  // the multipliers; the rule's division (rcp = 0: uniform, rare) apart, so
               // that each row's update below is a few predicated instructions, not a branch
#pragma unroll
      for (int q = 0; q < R; ++q) x[q] = a[q][t] * rcp;
      if (rcp == T(0)) {
#pragma unroll
        for (int q = 0; q < R; ++q) x[q] = safe_divide(a[q][t], piv);
      }
#pragma unroll
      for (int q = 0; q < R; ++q) {
        pos[q] = pos[q] == j ? at : pos[q] == at ? j : pos[q];
        if (go && valid[q] && pos[q] > j) {
          a[q][t] = x[q];
#pragma unroll
          for (int c = t + 1; c < PB; ++c) a[q][c] -= x[q] * u[c];
        }
      }
      if (lane == 0) spiv[j] = at;
      if (!go && info == 0) info = j + 1;
      go_mask |= unsigned(go) << t;
    }
    // every row at its position; the rows that moved, as (destination, source) pairs
    int* mv = moves_of(p);
    int moved_before = 0;
#pragma unroll
    for (int q = 0; q < R; ++q) {
      if (valid[q]) {
#pragma unroll
        for (int c = 0; c < PB; ++c)
          if (c < kb) S[pos[q] + (k + c) * LD] = a[q][c];
      }
      const bool moved = valid[q] && pos[q] != k + lane + 32 * q;
      const unsigned mask = __ballot_sync(ALL, moved);
      if (moved) {
        const int e = moved_before + __popc(mask & ((1u << lane) - 1u));
        mv[2 + e] = pos[q];
        mv[2 + MOVES + e] = k + lane + 32 * q;
      }
      moved_before += __popc(mask);
    }
    if (lane == 0) {
      mv[0] = moved_before;
      mv[1] = int(go_mask);
      sint[0] = info;
    }
  };

  // The share of warp `rank` of `nw` (an update warp: w - 1 of U; warp 0's look-ahead: 0
  // of 1) of columns c0 <= j < c1, those with (j - base) % nw == rank, for the panel at k
  // (kb columns, moves mv): the rows interchanged; with `full` also U12 solved and A22
  // updated.
  auto apply_panel = [&](int k, int kb, const int* mv, int base, int c0, int c1, bool full, int rank, int nw) {
    const int count = mv[0];
    const unsigned go_mask = unsigned(mv[1]);
    const int first = c0 + ((base + rank - c0) % nw + nw) % nw;
    if (first >= c1) return;  // uniform over the warp
    for (int j = first + nw * lane; j < c1; j += 32 * nw) {  // a lane a column
      T* col = S + j * LD;
      T v[MOVES];
#pragma unroll
      for (int e = 0; e < MOVES; ++e)
        if (e < count) v[e] = col[mv[2 + MOVES + e]];
#pragma unroll
      for (int e = 0; e < MOVES; ++e)
        if (e < count) col[mv[2 + e]] = v[e];
      if (full) {  // U12 = L11^{-1} A12, the unit lower L11 of the panel
        T x[PB];
#pragma unroll
        for (int t = 0; t < PB; ++t) x[t] = t < kb ? col[k + t] : T(0);
#pragma unroll
        for (int t = 0; t < PB; ++t) {
          if (t >= kb || !(go_mask >> t & 1u)) continue;
#pragma unroll
          for (int s = t + 1; s < PB; ++s)
            if (s < kb) x[s] -= S[k + s + (k + t) * LD] * x[t];
        }
#pragma unroll
        for (int t = 1; t < PB; ++t)
          if (t < kb) col[k + t] = x[t];
      }
    }
    if (!full) return;
    __syncwarp();  // the warp's U12 columns are visible to its lanes
    const int k2 = k + kb;
    T l[R][PB];  // L21: the lane's rows k2 + lane + 32 q
#pragma unroll
    for (int q = 0; q < R; ++q)
#pragma unroll
      for (int t = 0; t < PB; ++t)
        l[q][t] = k2 + lane + 32 * q < m && t < kb ? S[k2 + lane + 32 * q + (k + t) * LD] : T(0);
    for (int j = first; j < c1; j += nw) {
      T* col = S + j * LD;
      T u[PB];  // a zero pivot's row of U12 takes no part
#pragma unroll
      for (int t = 0; t < PB; ++t) u[t] = t < kb && (go_mask >> t & 1u) ? col[k + t] : T(0);
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const int i = k2 + lane + 32 * q;
        if (i < m) {
          T acc = col[i];
#pragma unroll
          for (int t = 0; t < PB; ++t) acc -= l[q][t] * u[t];
          col[i] = acc;
        }
      }
    }
  };

  for (int p = 0; p < panels; ++p) {
    const int k = p * PB, kb = min(PB, kmin - k), k2 = k + kb, kb2 = max(0, min(PB, kmin - k2));
    if (w == 0) {
      if (OWN_LOOKAHEAD && p > 0) {  // panel p - 1 applied to panel p's columns by this warp
        apply_panel(k - PB, PB, moves_of(p - 1), k, k, k2, true, 0, 1);
        __syncwarp();  // the columns are stored before factor_panel reads them
      } else if (p > 0) {
        asm volatile("bar.sync 1, %0;" ::"r"(32 * W) : "memory");  // panel p's columns are up to date
      }
      factor_panel(p, k, kb);
    }
    __syncthreads();  // panel p, its pivots and moves are published
    if (w > 0) {
      const int* mv = moves_of(p);
      if (!OWN_LOOKAHEAD) {
        apply_panel(k, kb, mv, k2, k2, k2 + kb2, true, w - 1, U);  // the next panel's columns first
        // bar.sync, not bar.arrive: warp 0 is already waiting here, so the update warps lose
        // only their spread over the next panel's few columns, and a barrier that every
        // thread syncs on orders the accesses around it for compute-sanitizer's racecheck too
        if (p + 1 < panels) asm volatile("bar.sync 1, %0;" ::"r"(32 * W) : "memory");
      }
      apply_panel(k, kb, mv, k2, k2 + kb2, n, true, w - 1, U);  // the trailing columns past panel p + 1
      if (keep_l) apply_panel(k, kb, mv, k2, 0, k, false, w - 1, U);  // L's columns left of the panel
      if (w == 1) {                                                   // the rows' origins
        const int count = mv[0];
        const int from = lane < count ? sorig[mv[2 + MOVES + lane]] : 0;
        __syncwarp();
        if (lane < count) sorig[mv[2 + lane]] = from;
      }
    }
  }
  __syncthreads();
  return sint[0];
}

// --- cols design: column pieces per lane -----------------------------------------------
//
// getf2_cols / getrs_cols are getf2_regs / getrs_regs for a matrix held by a group of L
// lanes of a warp: lane k holds, in every row, the column pieces k, k + L, .. of W
// columns each, a[r][c] = element (r, cols_col<L, W>(k, c)).  The owner of column j
// finds its pivot among its own registers (no cross-lane search), scales the column, and
// the multipliers reach the group by one shuffle each; every lane updates its own
// columns.  Why: in the rows design a step's fixed work (the pivot search's three warp
// reductions, the pivot row through shared memory) outweighed a lane's 8-16 FMAs; here
// a lane's C = NB / L columns give each shuffled multiplier C FMAs.  One right-hand side
// may ride through the factorization (with_b): y, replicated on every lane of the group,
// ends as L^{-1} P b.  The pivot order (iamax_ahead), the reciprocal rule (PivotScale)
// and the update's expressions are getf2_regs'.
//
// Every lane of the warp calls them with warp-uniform `steps` (the largest min(m, n) of
// the warp's groups: every shuffle has all 32 lanes); a group's own m and n decide what
// its lanes do.  Groups are aligned: lanes [g L, (g + 1) L) of a warp.

// The 0-based pivots of up to 16 steps, 4 bits each in one 64-bit word: two registers,
// not 16 (the cols design's lane holds 128 of its 255 in the matrix); j a compile-time
// constant after unrolling.
struct Pivots16 {
  unsigned long long bits = 0xfedcba9876543210ull;  // no interchange
  __device__ __forceinline__ int operator[](int j) const { return int(bits >> (4 * j)) & 15; }
  __device__ __forceinline__ void set(int j, int p) {
    bits = (bits & ~(15ull << (4 * j))) | ((unsigned long long)p << (4 * j));
  }
};

// The matrix column of lane k's local column c.
template <int L, int W> __host__ __device__ constexpr int cols_col(int k, int c) {
  return (c / W) * (L * W) + k * W + c % W;
}

// Threads:  L lanes (a power of two) per matrix, W a divisor of NB / L; k = the lane's
//           rank in its group, base = the group's first lane in the warp.
// Memory:   a[r][c] (r < m, column < n) read and written: U on and above the diagonal,
//           L's multipliers below; ipiv[j] = the 0-based row swapped with row j, for
//           j < steps, on every lane (j past the matrix's own min(m, n): j); y[0 .. m) (with_b).
// Failure:  returns, to every lane of the group, LAPACK's info (the 1-based column of
//           the first exactly zero pivot); such a column is neither scaled nor used.
template <int NB, int L, int W, typename T>
__device__ __forceinline__ int getf2_cols(int k, int base, int m, int n, int steps, T (&a)[NB][NB / L],
                                          Pivots16& ipiv, T (&y)[NB], bool with_b) {
  using R = typename real_of<T>::type;
  constexpr int C = NB / L;
  constexpr unsigned ALL = 0xffffffffu;
  static_assert(C % W == 0 && (L & (L - 1)) == 0 && L <= 32 && NB <= 16,
                "whole pieces a lane, a power-of-two group, pivots of 4 bits");
  const int kmin = m < n ? m : n;
  int info = 0;
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    if (j >= steps) break;
    const int owner = (j / W) % L, cj = (j / (L * W)) * W + j % W;  // compile-time after unrolling
    const bool live = j < kmin;
    // 1. the owner's pivot search: rows j .. m-1 of its column cj
    int p = j;
    bool zero = false;
    if (k == owner && live) {
      // iamax_ahead for a scan in row order (the candidate's index is the larger): ahead
      // when larger, or NaN after a number
      R best = abs1(a[j][cj]);
#pragma unroll
      for (int i = j + 1; i < NB; ++i) {
        const R v = abs1(a[i][cj]);
        const bool take = v > best || (v != v && best == best);
        if (i < m && take) {
          best = v;
          p = i;
        }
      }
      zero = best == R(0);  // the pivot |a_pj| (NaN is not zero)
    }
    const int word = __shfl_sync(ALL, p | (zero ? 0x10000 : 0), base + owner);
    p = word & 0xffff;
    zero = word >> 16;
    ipiv.set(j, p);
    // 2. rows j and p swap across every column of the group (and y), as getf2_regs (p < m):
    //    one test a row for the whole row (swap_selected a column would repeat it C + 1
    //    times; ptxas kept the predicates in registers)
    if (live && p != j) {
#pragma unroll
      for (int i = j + 1; i < NB; ++i) {
        const bool here = p == i;
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const T hi = a[j][c], lo = a[i][c];
          a[j][c] = select(here, lo, hi);
          a[i][c] = select(here, hi, lo);
        }
        if (with_b) {
          const T hi = y[j], lo = y[i];
          y[j] = select(here, lo, hi);
          y[i] = select(here, hi, lo);
        }
      }
    }
    if (live && zero && info == 0) info = j + 1;
    // 3. the owner scales its column (one branch on the reciprocal rule, not one a row);
    //    the multipliers go to the group.  Steps 3 and 4 run over all NB rows and every
    //    column right of j without bounds tests (a test a row was most of the
    //    instructions): rows >= m and columns >= n are padding (zero when loaded), never
    //    a pivot, never stored, and never read into a row or column of the matrix.
    //    (in place in the owner's column; every lane's own local column cj goes into the
    //    shuffle, and the owner's value comes out: no register array set up for it)
    if (k == owner && live && !zero) {
      const PivotScale<T> scale(a[j][cj]);
      if (scale.recip) {
#pragma unroll
        for (int i = j + 1; i < NB; ++i) a[i][cj] *= scale.r;
      } else {
#pragma unroll
        for (int i = j + 1; i < NB; ++i) a[i][cj] = safe_divide(a[i][cj], scale.piv);
      }
    }
    T l[NB];
#pragma unroll
    for (int i = j + 1; i < NB; ++i) l[i] = shfl_idx(a[i][cj], base + owner, ALL);
    // 4. the trailing update of this lane's columns right of j (a zero pivot: none)
    if (live && !zero) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        if (cols_col<L, W>(k, c) <= j) continue;
#pragma unroll
        for (int i = j + 1; i < NB; ++i) a[i][c] -= l[i] * a[j][c];
      }
      if (with_b) {
#pragma unroll
        for (int i = j + 1; i < NB; ++i) y[i] -= l[i] * y[j];
      }
    }
  }
  return info;
}

// Sum of v over the L lanes of a group (a butterfly: every lane ends with the sum).
template <int L, typename T> __device__ __forceinline__ T group_sum(T v) {
#pragma unroll
  for (int d = 1; d < L; d *= 2) v += shfl_xor(v, d, 0xffffffffu);
  return v;
}

// bdf::getrs_cols: x = U^{-1} L^{-1} P x (forward: all three) or x = U^{-1} x (not
// forward: x already L^{-1} P b, getf2_cols' y) for the n x n factors of getf2_cols,
// x replicated on the group's lanes (every lane ends with all of it).  Row by row: each
// lane sums its own columns' products, the group adds them (group_sum); the backward
// step's x_i comes from the owner of column i (its diagonal), by one shuffle.  Every lane
// of the warp calls it (n: the group's own; `steps`: the warp's largest n).
template <int NB, int L, int W, typename T>
__device__ __forceinline__ void getrs_cols(int k, int base, int n, int steps, const T (&a)[NB][NB / L],
                                           const Pivots16& ipiv, T (&x)[NB], bool forward) {
  constexpr unsigned ALL = 0xffffffffu;
  T s[NB];
  if (forward) {
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      if (j >= n) break;
      if (ipiv[j] != j) swap_selected<NB>(j, ipiv[j], n, [&](int i) -> T& { return x[i]; });
    }
#pragma unroll
    for (int i = 0; i < NB; ++i) s[i] = T(0);
#pragma unroll
    for (int i = 0; i < NB; ++i) {  // y_i = x_i - sum_{j < i} l_ij y_j
      if (i >= steps) break;
      x[i] -= group_sum<L>(s[i]);
      const int owner = (i / W) % L, ci = (i / (L * W)) * W + i % W;
      if (k == owner) {
#pragma unroll
        for (int r = i + 1; r < NB; ++r) s[r] += a[r][ci] * x[i];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < NB; ++i) s[i] = T(0);
#pragma unroll
  for (int i = NB - 1; i >= 0; --i) {  // x_i = (y_i - sum_{j > i} u_ij x_j) / u_ii
    if (i >= steps) continue;
    const int owner = (i / W) % L, ci = (i / (L * W)) * W + i % W;
    const T rest = x[i] - group_sum<L>(s[i]);
    T xi = T(0);
    if (k == owner && i < n) xi = safe_divide(rest, a[i][ci]);
    xi = shfl_idx(xi, base + owner, ALL);
    if (i < n) x[i] = xi;
    if (k == owner && i < n) {
#pragma unroll
      for (int r = 0; r < i; ++r) s[r] += a[r][ci] * xi;
    }
  }
}

}  // namespace bdf
