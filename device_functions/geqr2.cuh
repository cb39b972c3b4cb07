// geqr2.cuh: unblocked Householder QR of ONE matrix (LAPACK's xGEQR2, with the
// reflectors also applied to a block of right-hand sides), the block reflector
// of a panel (xLARFT, forward, columnwise) and the generation of Q (xORG2R).
// Each step is bdf::larfg / bdf::larf_left of householder.cuh: no second copy of
// the reflector arithmetic.
//
// Threads:  a ThreadGroup<DIM_X * DIM_Y> (the GEMV shape of larf_left); every
//           thread calls with the same arguments.
// Shared:   caller passes w (the widest larf_left: max(n, nb) elements for
//           geqr2, n for org2r), gemv_work (larf_work_elems<DIM_X, DIM_Y>()
//           elements, null when 0) and, for geqr2, vwork
//           (vector_work_bytes(G) bytes, null when G <= 32).  Undefined on exit.
// Sync:     matrices visible to the group on entry; every function ends after
//           a barrier (results visible to the whole group).
// Memory:   matrices column-major (element (i, j) at A[i + j * lda]), shared or
//           global, 64-bit leading dimensions.  tau written by rank 0 only.
// Failure:  none; NaN/Inf stay in their matrix (tau = 0 steps touch nothing).
#pragma once
#include "common.cuh"
#include "householder.cuh"

namespace bdf {

// bdf::geqr2: A (m x n) := its compact QR (R on and above the diagonal, v(1:) of
// reflector j below it), tau[j] for j < min(m, n), and B (m x nb, ldb) := Q^H B.
// H(j)^H is applied as LAPACK's xGEQR2 does: A(j, j) temporarily 1 so that
// column j is v, larf_left with conj(tau).
template <typename T, int DIM_X, int DIM_Y>
__device__ void geqr2(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, T* A, long long lda, T* B, int nb,
                      long long ldb, T* tau, T* w, T* gemv_work, unsigned char* vwork) {
  const int k = min(m, n);
  for (int j = 0; j < k; ++j) {
    T* ajj = A + j + (long long)j * lda;
    const T alpha = *ajj;  // visible: entry condition, or the barrier ending the previous step
    const LarfgResult<T> r = larfg(g, m - j, alpha, ajj + 1, 1, vwork);
    g.sync();  // v(1:) written by every rank; every rank has read alpha
    if (g.rank == 0) {
      *ajj = T(1);
      tau[j] = r.tau;
    }
    g.sync();  // v(0) = 1 visible
    const T ct = conj_if(r.tau, true);
    larf_left<T, DIM_X, DIM_Y>(g, m - j, n - j - 1, ajj, 1, ct, ajj + lda, lda, w, gemv_work);
    if (nb > 0) larf_left<T, DIM_X, DIM_Y>(g, m - j, nb, ajj, 1, ct, B + j, ldb, w, gemv_work);
    if (g.rank == 0) *ajj = T(r.beta);
    g.sync();  // beta in place before anyone reads the diagonal (next step or caller)
  }
}

// bdf::larft: the nb x nb upper triangular T (ldt) of H(0) ... H(nb-1) = I - V T V^H
// (xLARFT, forward, columnwise) for V (m x nb, ldv) with its unit diagonal and
// zeros above it STORED explicitly.  gram: nb x nb scratch (ldt), must not
// overlap T or V.  Needs nb <= G.
// Sync:     two barriers plus one per column; ends after a barrier.
template <int G, typename T>
__device__ void larft(ThreadGroup<G> g, int m, int nb, const T* V, long long ldv, const T* tau, T* Tm,
                      int ldt, T* gram) {
  // gram(l, i) = V(:, l)^H V(:, i) for l < i; rows below i only (V(r, i) = 0 for r < i).
  for (int e = g.rank; e < nb * nb; e += G) {
    const int l = e % nb, i = e / nb;
    if (l < i) {
      T s = T(0);
      for (int r = i; r < m; ++r) s += conj_if(V[r + (long long)l * ldv], true) * V[r + (long long)i * ldv];
      gram[l + i * ldt] = s;
    }
    Tm[l + i * ldt] = l == i ? tau[i] : T(0);
  }
  g.sync();
  // Column i: T(0:i, i) = -tau_i T(0:i, 0:i) gram(0:i, i); reads columns < i only.
  for (int i = 1; i < nb; ++i) {
    if (g.rank < i) {
      const int l = g.rank;
      T s = T(0);
      for (int p = l; p < i; ++p) s += Tm[l + p * ldt] * gram[p + i * ldt];
      Tm[l + i * ldt] = -tau[i] * s;
    }
    g.sync();
  }
}

// bdf::org2r: Q (m x n, ldq, n <= m) := the first n columns of H(0) ... H(k-1)
// (xORG2R / xUNG2R), k <= n.  On entry columns 0..k-1 hold the reflectors below
// the diagonal (on and above it: anything); columns k..n-1: anything.  tau: k
// elements, read by every thread.
template <typename T, int DIM_X, int DIM_Y>
__device__ void org2r(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, int k, T* Q, long long ldq, const T* tau,
                      T* w, T* gemv_work) {
  constexpr int G = DIM_X * DIM_Y;
  const long long rest = (long long)m * (n - k);
  for (long long e = g.rank; e < rest; e += G) {  // columns k..n-1 of the identity
    const int j = k + int(e / m), i = int(e % m);
    Q[i + j * ldq] = i == j ? T(1) : T(0);
  }
  g.sync();
  for (int i = k - 1; i >= 0; --i) {
    T* qii = Q + i + (long long)i * ldq;
    const T t = tau[i];
    if (i < n - 1) {
      if (g.rank == 0) *qii = T(1);
      g.sync();
      larf_left<T, DIM_X, DIM_Y>(g, m - i, n - i - 1, qii, 1, t, qii + ldq, ldq, w, gemv_work);
    }
    // Column i: zeros above, 1 - tau on the diagonal, -tau v below (each element by one thread).
    for (int r = g.rank; r < m; r += G) {
      T* q = Q + r + (long long)i * ldq;
      *q = r < i ? T(0) : (r == i ? T(1) - t : -t * *q);
    }
    g.sync();
  }
}

}  // namespace bdf
