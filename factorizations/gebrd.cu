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
#include "common.cuh"
#include "gemv.cuh"
#include "householder.cuh"
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
      for (int e = g.rank; e < m * n; e += G) {
        const int j = e / m, i = e - j * m;
        sa[e] = a[i + j * lda];
      }
      g.sync();
      gebd2<T, DIM_X, DIM_Y>(g, m, n, sa, m, D.vector(b), E.vector(b), TQ.vector(b), TP.vector(b),
                                         w, gw, vwork);
      for (int e = g.rank; e < m * n; e += G) {
        const int j = e / m, i = e - j * m;
        a[i + j * lda] = sa[e];
      }
      g.sync();  // sa is refilled for the next matrix
    } else {
      gebd2<T, DIM_X, DIM_Y>(g, m, n, a, lda, D.vector(b), E.vector(b), TQ.vector(b), TP.vector(b),
                                         w, gw, vwork);
    }
  }
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
    for (int e = g.rank; e < orows * ocols; e += G) {
      const int j = e / orows, i = e - j * orows;
      o[i + j * ldo] = T(i == j ? 1 : 0);
    }
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
