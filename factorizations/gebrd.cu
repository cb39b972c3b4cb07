// Batched bidiagonal reduction (GEBRD, LAPACK's compact output) and the
// generation of Q / P^H from its reflectors (ORGBR/UNGBR).  One thread block
// per matrix (grid-stride loop over the batch on gridDim.x), one kernel body for
// the three layouts (accessors of layouts.cuh).
//
// gebrd_kernel<..., STAGE>: the unblocked sweep (LAPACK's xGEBD2) built on
// bdf::larfg / bdf::larf_left / bdf::larf_right (householder.cuh), i.e. per
// step one GEMV-T (column reflector applied from the left) and one GEMV-N (row
// reflector from the right) plus their rank-1 updates.
//   STAGE = true ("big-tile"): the whole m x n matrix is copied into shared
//     memory (leading dimension m), reduced there and copied back: every GEMV
//     of the sweep reads shared memory, the device memory is touched twice.
//   STAGE = false: the same sweep on the matrix in device memory (sizes whose
//     matrix does not fit into shared memory); shared memory holds only the
//     work vectors.
// Shared memory per block (bytes, in this order, each part 16-byte aligned):
//   [matrix: m_max * n_max * sizeof(T), STAGE only] [w: max(m_max, n_max) T]
//   [gemv_work: larf_work_elems<DIM_X, DIM_Y>() T] [vwork: vector_work_bytes(G)]
// The launcher computes the same sum (gebrd_settings.GebrdSetting.smem_bytes).
//
// gebrd_blocked_kernel<..., NB>: LAPACK's blocked xGEBRD for the sizes past the
// big-tile ("classic" design of the seed paper), still one block per matrix with
// a loop over panels inside the kernel; see its comment.
// gebrd_cluster_kernel<..., NB, CL>: the same on a thread-block cluster of CL blocks
// per matrix: few matrices leave most SMs idle with a block each, and one block keeps
// too few bytes of the trailing matrix in flight to go past about 16 GB/s.
#include "common.cuh"
#include "gemm.cuh"
#include "gemv.cuh"
#include "householder.cuh"
#include "labrd.cuh"
#include "layouts.cuh"
#include "vector.cuh"

__host__ __device__ constexpr long long gebrd_align16(long long bytes) { return (bytes + 15) / 16 * 16; }

// Conjugate `len` elements x[j * inc], j in [from, len) (complex only; a no-op for real T).
template <int G, typename T>
__device__ __forceinline__ void gebrd_conj_row(bdf::ThreadGroup<G> g, int from, int len, T* x, long long inc) {
  if constexpr (bdf::is_complex_v<T>)
    for (int j = from + g.rank; j < len; j += G) x[j * inc] = conj(x[j * inc]);
}

// LAPACK's xGEBD2 on one m x n matrix a (leading dimension lda, global or shared).
// Per reflector: larfg (ends without a barrier) -> barrier -> rank 0 stores
// d/e, tau and the temporary 1 -> barrier -> larf (ends after a barrier) ->
// rank 0 restores beta (and the row is conjugated back) -> barrier.
// Invariant at the top of each step: everything written so far is visible to the group.
template <typename T, int DIM_X, int DIM_Y>
__device__ void gebd2(bdf::ThreadGroup<DIM_X * DIM_Y> g, int m, int n, T* a, long long lda,
                      typename bdf::real_of<T>::type* d, typename bdf::real_of<T>::type* e,
                      T* tauq, T* taup, T* w, T* gw, unsigned char* vwork) {
  const bool lead = g.rank == 0;
  auto at = [&](int i, int j) -> T* { return a + i + (long long)j * lda; };
  if (m >= n) {
    for (int i = 0; i < n; ++i) {
      // H(i) annihilates A(i+1:m, i): column reflector, applied as H^H from the left.
      const auto q = bdf::larfg(g, m - i, *at(i, i), at(i + 1 < m ? i + 1 : i, i), 1, vwork);
      g.sync();  // all have read alpha; v written
      if (lead) { d[i] = q.beta; tauq[i] = q.tau; *at(i, i) = T(1); }
      g.sync();
      bdf::larf_left<T, DIM_X, DIM_Y>(g, m - i, n - i - 1, at(i, i), 1, bdf::conj_if(q.tau, true),
                                      at(i, i + 1), lda, w, gw);
      if (lead) *at(i, i) = T(q.beta);
      if (i + 1 < n) {
        // G(i) annihilates A(i, i+2:n): row reflector from the conjugated row (LAPACK's xLACGV).
        gebrd_conj_row(g, 0, n - i - 1, at(i, i + 1), lda);
        g.sync();
        const auto p = bdf::larfg(g, n - i - 1, *at(i, i + 1), at(i, i + 2 < n ? i + 2 : i + 1), lda, vwork);
        g.sync();
        if (lead) { e[i] = p.beta; taup[i] = p.tau; *at(i, i + 1) = T(1); }
        g.sync();
        bdf::larf_right<T, DIM_X, DIM_Y>(g, m - i - 1, n - i - 1, at(i, i + 1), lda, p.tau,
                                         at(i + 1, i + 1), lda, w, gw);
        gebrd_conj_row(g, 1, n - i - 1, at(i, i + 1), lda);
        if (lead) *at(i, i + 1) = T(p.beta);
      } else if (lead) {
        taup[i] = T(0);
      }
      g.sync();
    }
  } else {
    for (int i = 0; i < m; ++i) {
      // G(i) annihilates A(i, i+1:n) (conjugated row), applied from the right.
      gebrd_conj_row(g, 0, n - i, at(i, i), lda);
      g.sync();
      const auto p = bdf::larfg(g, n - i, *at(i, i), at(i, i + 1), lda, vwork);
      g.sync();
      if (lead) { d[i] = p.beta; taup[i] = p.tau; *at(i, i) = T(1); }
      g.sync();
      bdf::larf_right<T, DIM_X, DIM_Y>(g, m - i - 1, n - i, at(i, i), lda, p.tau, at(i + 1, i), lda, w, gw);
      gebrd_conj_row(g, 1, n - i, at(i, i), lda);
      if (lead) *at(i, i) = T(p.beta);
      g.sync();
      if (i + 1 < m) {
        // H(i) annihilates A(i+2:m, i), applied as H^H from the left.
        const auto q = bdf::larfg(g, m - i - 1, *at(i + 1, i), at(i + 2 < m ? i + 2 : i + 1, i), 1, vwork);
        g.sync();
        if (lead) { e[i] = q.beta; tauq[i] = q.tau; *at(i + 1, i) = T(1); }
        g.sync();
        bdf::larf_left<T, DIM_X, DIM_Y>(g, m - i - 1, n - i - 1, at(i + 1, i), 1, bdf::conj_if(q.tau, true),
                                        at(i + 1, i + 1), lda, w, gw);
        if (lead) *at(i + 1, i) = T(q.beta);
      } else if (lead) {
        tauq[i] = T(0);
      }
      g.sync();
    }
  }
}

// One block of DIM_X * DIM_Y threads per matrix.  m_max, n_max: the largest
// dimensions of the launch (they size the shared memory).  d, e: real vectors;
// tauq, taup: vectors of T (all with inc 1).
template <class MatA, class VecR, class VecT, int DIM_X, int DIM_Y, bool STAGE>
__global__ void __launch_bounds__(DIM_X * DIM_Y)
gebrd_kernel(MatA A, VecR D, VecR E, VecT TQ, VecT TP, long long count, int m_max, int n_max) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int GW = bdf::larf_work_elems<DIM_X, DIM_Y>();
  extern __shared__ __align__(16) unsigned char smem[];
  const long long mat_bytes = STAGE ? gebrd_align16((long long)m_max * n_max * sizeof(T)) : 0;
  const long long w_bytes = gebrd_align16((long long)(m_max > n_max ? m_max : n_max) * sizeof(T));
  T* sa = reinterpret_cast<T*>(smem);
  T* w = reinterpret_cast<T*>(smem + mat_bytes);
  T* gw = reinterpret_cast<T*>(smem + mat_bytes + w_bytes);
  unsigned char* vwork = smem + mat_bytes + w_bytes + gebrd_align16((long long)GW * sizeof(T));
  const bdf::ThreadGroup<G> g(threadIdx.x);
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int m = A.rows(b), n = A.cols(b);
    const long long lda = A.ldim(b);
    T* a = A.matrix(b);
    if (STAGE) {
      bdf::for_each_element(g, m, n, [&](int i, int j) { sa[i + j * m] = a[i + j * lda]; });
      g.sync();
      gebd2<T, DIM_X, DIM_Y>(g, m, n, sa, m, D.vector(b), E.vector(b), TQ.vector(b), TP.vector(b),
                                         w, gw, vwork);
      bdf::for_each_element(g, m, n, [&](int i, int j) { a[i + j * lda] = sa[i + j * m]; });
      g.sync();  // sa is refilled for the next matrix
    } else {
      gebd2<T, DIM_X, DIM_Y>(g, m, n, a, lda, D.vector(b), E.vector(b), TQ.vector(b), TP.vector(b),
                                         w, gw, vwork);
    }
  }
}

// Output tile of the trailing update: 2 x 4 outputs per thread (gemm_tile's
// thread mapping), k staged 8 columns at a time.
template <int DIM_X, int DIM_Y> struct GebrdGemmTile {
  static constexpr int M = 2 * DIM_X, N = 4 * DIM_Y, K = 8;
  static constexpr int elems = bdf::gemm_smem_a<M, K>() + bdf::gemm_smem_b<N, K>();
};

// C -= L op(R) on the output tile (i0, j0) of the m2 x n2 block C (L m2 x k, op(R)
// k x n2): bdf::gemm_tile with the subtraction as its store (each output by the
// thread that owns it).  Not inlined: two calls per tile.  Sync: as gemm_tile.
template <typename T, int DIM_X, int DIM_Y>
__device__ __noinline__ void gebrd_update_tile(bdf::ThreadGroup<DIM_X * DIM_Y> g, int m2, int n2, int k, int i0,
                                               int j0, const T* L, long long ldl, const T* R, long long ldr,
                                               int opR, T* C, long long ldc, T* sA, T* sB) {
  using Tile = GebrdGemmTile<DIM_X, DIM_Y>;
  bdf::gemm_tile<T, DIM_X, DIM_Y, Tile::M, Tile::N, Tile::K>(
      g, m2, n2, k, i0, j0, L, ldl, bdf::OP_N, R, ldr, opR, sA, sB,
      [&](int r, int c, T v) { C[r + c * ldc] -= v; });
}

// Blocked GEBRD (LAPACK's xGEBRD with xLABRD panels) on one matrix in device memory:
// while more than NB rows and columns remain, bdf::labrd reduces the next NB of
// them (building X and Y), then the trailing matrix A22 = A(q:, q:), q = p + NB, is
// updated by two GEMMs, A22 -= V Y^H (V = A(q:, p:q), Y = Y(NB:, :)) and
// A22 -= X U^H (X = X(NB:, :), U^H = A(p:q, q:)), tile by tile through
// bdf::gemm_tile (each output tile: both products, the owner thread subtracting
// each from A22), and d / e are put back on the bidiagonal; the last min(m, n) - p
// <= NB rows/columns are reduced by the unblocked gebd2 in place.
// CL > 1: block `rank` of a cluster of CL; the panel is split as labrd.cuh says,
// the update's tiles dealt out round robin, d / e put back and the last columns
// reduced by rank 0.
// Barriers: labrd ends after one (of the cluster); gemm_tile starts and ends each k
// step with one (its stores come after the last); one of the cluster after the tile
// loop (the GEMMs read the unit element that rank 0 then overwrites with e, and the
// next panel and the last columns read every block's tiles), one after the restore.
template <typename T, int DIM_X, int DIM_Y, int NB, int CL = 1>
__device__ void gebrd_blocked(bdf::ThreadGroup<DIM_X * DIM_Y> g, int m, int n, T* a, long long lda,
                              typename bdf::real_of<T>::type* d, typename bdf::real_of<T>::type* e, T* tauq,
                              T* taup, const bdf::LabrdWork<T>& w, T* sA, T* sB, int rank = 0) {
  using Tile = GebrdGemmTile<DIM_X, DIM_Y>;
  const int k = m < n ? m : n;
  auto A = [&](int i, int j) -> T& { return a[i + (long long)j * lda]; };
  int p = 0;
  for (; p + NB < k; p += NB) {
    bdf::labrd<T, DIM_X, DIM_Y, NB, CL>(g, m, n, p, a, lda, d, e, tauq, taup, w, rank);
    const int q = p + NB, m2 = m - q, n2 = n - q;
    const int tiles_m = (m2 + Tile::M - 1) / Tile::M, tiles_n = (n2 + Tile::N - 1) / Tile::N;
    for (int t = rank; t < tiles_m * tiles_n; t += CL) {
      const int i0 = (t % tiles_m) * Tile::M, j0 = (t / tiles_m) * Tile::N;
      gebrd_update_tile<T, DIM_X, DIM_Y>(g, m2, n2, NB, i0, j0, &A(q, p), lda, w.Y + NB, w.ldy, bdf::OP_C,
                                         &A(q, q), lda, sA, sB);
      gebrd_update_tile<T, DIM_X, DIM_Y>(g, m2, n2, NB, i0, j0, w.X + NB, w.ldx, &A(p, q), lda, bdf::OP_N,
                                         &A(q, q), lda, sA, sB);
    }
    bdf::cluster_sync<CL>(g);
    if (rank == 0 && g.rank == 0)
      for (int c = p; c < q; ++c) {
        A(c, c) = T(d[c]);
        if (m >= n) A(c, c + 1) = T(e[c]); else A(c + 1, c) = T(e[c]);
      }
    g.sync();
  }
  if (p < k && rank == 0)
    gebd2<T, DIM_X, DIM_Y>(g, m - p, n - p, &A(p, p), lda, d + p, e + p, tauq + p, taup + p,
                           w.sv + bdf::labrd_pad<T>(), w.gemv_work, w.vwork);
}

// One block of DIM_X * DIM_Y threads per matrix (grid-stride loop), or a cluster of
// CL blocks per matrix (gebrd_cluster_kernel: clusters stride over the batch).  The
// matrix stays in device memory; shared memory per block (bytes, in this order, each
// part 16-byte aligned; gebrd_settings.GebrdSetting.smem_bytes computes the same):
//   [sv: (labrd_pad<T>() + L) T, L = max(m_max, n_max)] [su: n_max T] [t1, t2: 2 NB T]
//   [work: max(larf_work_elems, gemm tiles) T: the GEMV reduction work and the GEMM
//    tiles share it (never live at once)] [vwork: vector_work_bytes(G)]
//   [X: m_max NB T, Y: n_max NB T: only when xy_shared (never with a cluster)].
// Without xy_shared X and Y live in device memory: slot blockIdx.x / CL of `work`,
// (m_max + n_max) NB elements each (the launcher sizes the grid to the slots).
// narrow: LABRD's GEMVs on the panel's columns with a thread a row (LabrdWork::narrow).
template <class MatA, class VecR, class VecT, int DIM_X, int DIM_Y, int NB, int CL>
__device__ __forceinline__ void gebrd_blocked_body(MatA A, VecR D, VecR E, VecT TQ, VecT TP, long long count,
                                                   int m_max, int n_max, typename MatA::value_type* work,
                                                   int xy_shared, int narrow) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int PAD = bdf::labrd_pad<T>();
  constexpr int GW = bdf::larf_work_elems<DIM_X, DIM_Y>();
  constexpr int TW = GebrdGemmTile<DIM_X, DIM_Y>::elems;
  static_assert(NB % GebrdGemmTile<DIM_X, DIM_Y>::K == 0, "the panel width is a multiple of the GEMM k step");
  extern __shared__ __align__(16) unsigned char smem[];
  const int len = m_max > n_max ? m_max : n_max;
  unsigned char* at = smem;
  auto carve = [&](long long bytes) { unsigned char* s = at; at += gebrd_align16(bytes); return s; };
  const int rank = int(blockIdx.x % CL);
  const long long slot = blockIdx.x / CL, slots = gridDim.x / CL;
  bdf::LabrdWork<T> w;
  w.sv = reinterpret_cast<T*>(carve((long long)(PAD + len) * sizeof(T)));
  w.su = reinterpret_cast<T*>(carve((long long)(n_max > 1 ? n_max : 1) * sizeof(T)));
  w.t1 = reinterpret_cast<T*>(carve(2LL * NB * sizeof(T)));
  w.t2 = w.t1 + NB;
  w.gemv_work = reinterpret_cast<T*>(carve((long long)(GW > TW ? GW : TW) * sizeof(T)));
  w.vwork = carve(bdf::vector_work_bytes(G));
  w.ldx = m_max;
  w.ldy = n_max;
  w.narrow = narrow != 0;
  w.X = CL == 1 && xy_shared ? reinterpret_cast<T*>(at) : work + slot * (m_max + n_max) * NB;
  w.Y = w.X + (long long)m_max * NB;
  T* sA = w.gemv_work;
  T* sB = sA + bdf::gemm_smem_a<GebrdGemmTile<DIM_X, DIM_Y>::M, GebrdGemmTile<DIM_X, DIM_Y>::K>();
  const bdf::ThreadGroup<G> g(threadIdx.x);
  for (int r = g.rank; r < PAD; r += G) w.sv[r] = T(0);  // the GEMV-T padding: never written again
  for (long long b = slot; b < count; b += slots) {
    g.sync();  // the zeros, and the previous matrix's last writes to shared memory
    gebrd_blocked<T, DIM_X, DIM_Y, NB, CL>(g, A.rows(b), A.cols(b), A.matrix(b), A.ldim(b), D.vector(b),
                                           E.vector(b), TQ.vector(b), TP.vector(b), w, sA, sB, rank);
  }
}

template <class MatA, class VecR, class VecT, int DIM_X, int DIM_Y, int NB>
__global__ void __launch_bounds__(DIM_X * DIM_Y)
gebrd_blocked_kernel(MatA A, VecR D, VecR E, VecT TQ, VecT TP, long long count, int m_max, int n_max,
                     typename MatA::value_type* work, int xy_shared, int narrow) {
  gebrd_blocked_body<MatA, VecR, VecT, DIM_X, DIM_Y, NB, 1>(A, D, E, TQ, TP, count, m_max, n_max, work,
                                                            xy_shared, narrow);
}

// The grid is a multiple of CL (a whole number of clusters); X and Y in `work`.
template <class MatA, class VecR, class VecT, int DIM_X, int DIM_Y, int NB, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(DIM_X * DIM_Y)
gebrd_cluster_kernel(MatA A, VecR D, VecR E, VecT TQ, VecT TP, long long count, int m_max, int n_max,
                     typename MatA::value_type* work, int narrow) {
  static_assert(CL > 1, "a cluster of one is gebrd_blocked_kernel");
  gebrd_blocked_body<MatA, VecR, VecT, DIM_X, DIM_Y, NB, CL>(A, D, E, TQ, TP, count, m_max, n_max, work, 0,
                                                             narrow);
}

// ORGBR/UNGBR: O = Q (WANT_P false; O is m x cols, reflectors in columns of A, tau = tauq)
// or O = P^H (WANT_P true; O is rows x n, reflectors in rows of A, tau = taup), for the
// m x n output a of GEBRD.  O is set to the identity, then reflector i = k-1 .. 0 is
// applied to the trailing block O(i+s:, i+s:) (shift s = 1 where the reflectors start
// one below/right of the diagonal): Q by H(i) from the left, P^H by G(i)^H from the
// right (ORG2R's backward accumulation; the leading part stays the identity).
// Reflector i is copied into shared memory sv with sv[0] = 1 (conjugated for P, which
// LAPACK stores conjugated), so A is only read.  O is read and written in device memory.
// Shared memory per block: [sv: max(m,n) T][w: max(m,n) T][gemv_work][vwork], 16-aligned parts.
template <class MatA, class MatO, class VecT, int DIM_X, int DIM_Y, bool WANT_P>
__global__ void __launch_bounds__(DIM_X * DIM_Y)
orgbr_kernel(MatA A, MatO O, VecT TAU, long long count, int len_max) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int GW = bdf::larf_work_elems<DIM_X, DIM_Y>();
  extern __shared__ __align__(16) unsigned char smem[];
  const long long v_bytes = gebrd_align16((long long)len_max * sizeof(T));
  T* sv = reinterpret_cast<T*>(smem);
  T* w = reinterpret_cast<T*>(smem + v_bytes);
  T* gw = reinterpret_cast<T*>(smem + 2 * v_bytes);
  const bdf::ThreadGroup<G> g(threadIdx.x);
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int m = A.rows(b), n = A.cols(b);
    const long long lda = A.ldim(b), ldo = O.ldim(b);
    const T* a = A.matrix(b);
    T* o = O.matrix(b);
    const T* tau = TAU.vector(b);
    const int orows = O.rows(b), ocols = O.cols(b);
    bdf::for_each_element(g, orows, ocols, [&](int i, int j) { o[i + j * ldo] = T(i == j ? 1 : 0); });
    // Reflector count and shift: Q has min(m, n) reflectors at shift 0 when m >= n, else
    // m - 1 at shift 1; P has n - 1 at shift 1 when m >= n, else m at shift 0.
    const bool tall = m >= n;
    const int k = WANT_P ? (tall ? n - 1 : m) : (tall ? n : m - 1);
    const int s = WANT_P ? (tall ? 1 : 0) : (tall ? 0 : 1);
    const int len = WANT_P ? n : m;  // length of the space the reflectors act on
    g.sync();
    for (int i = k - 1; i >= 0; --i) {
      const int r0 = i + s, vlen = len - r0;  // reflector i acts on indices [r0, len)
      if (WANT_P) {
        if (r0 >= orows) continue;  // rows of P^H beyond the output are not wanted
        for (int j = g.rank; j < vlen; j += G) sv[j] = j == 0 ? T(1) : bdf::conj_if(a[i + (long long)(r0 + j) * lda], true);
      } else {
        if (r0 >= ocols) continue;
        for (int j = g.rank; j < vlen; j += G) sv[j] = j == 0 ? T(1) : a[r0 + j + (long long)i * lda];
      }
      g.sync();
      if (WANT_P)
        bdf::larf_right<T, DIM_X, DIM_Y>(g, orows - r0, vlen, sv, 1, bdf::conj_if(tau[i], true),
                                         o + r0 + (long long)r0 * ldo, ldo, w, gw);
      else
        bdf::larf_left<T, DIM_X, DIM_Y>(g, vlen, ocols - r0, sv, 1, tau[i], o + r0 + (long long)r0 * ldo, ldo,
                                        w, gw);
      // larf_* end after a barrier: sv may be refilled.
    }
    g.sync();
  }
}
