// labrd.cuh: one panel of the blocked bidiagonal reduction (LAPACK's xLABRD)
// for ONE matrix, computed by one thread group.  bdf::labrd reduces rows and
// columns p .. p+NB-1 of the m x n matrix A (upper bidiagonal when m >= n,
// lower when m < n; the bidiagonal is real also for complex T) and builds the
// panels X ((m - p) x NB) and Y ((n - p) x NB) such that the unreduced part of
// the matrix equals A0 - V Y^H - X U^H, A0 being what is in memory there
// (columns and rows past the panel are never written).  V holds the column
// reflectors H(i) = I - tauq v v^H, U the row reflectors G(i) = I - taup u u^H,
// both as stored in A (U conjugated, as LAPACK stores it), with their unit
// elements stored as 1 on the diagonal / off-diagonal until the caller has done
// the trailing update A22 -= V Y^H + X U^H and put d, e back (as xGEBRD does).
// Per step one column and one row reflector (bdf::larfg), and LAPACK's GEMV
// instances on the panel (the seed paper's table of them): two large ones on
// the unreduced matrix (A0^H v, A0 u), and small ones on V, X, Y, U, all
// through bdf::gemv_n / gemv_t with store epilogues.
//
// Cluster:  CL > 1 splits the panel over the CL blocks of a thread-block cluster (rank 0 .. CL-1, every
//           block calling with the same arguments and its own shared LabrdWork, X and Y
//           common in device memory): the two large GEMVs a step (A0^H v, A0 u), the
//           stores of v, u and of the X and Y columns go by fixed row and column ranges
//           of the panel (LabrdSplit); the small GEMVs, larfg and everything in shared
//           memory are computed by every block alike (same code, same data, same
//           result).  Two cluster barriers a step: after Y's column (v is stored after
//           it: every block has read the column) and after X's (u is stored after it).
//           Each block reads back between barriers only what it stored itself, so
//           the unit elements of u and v are taken as 1 where LAPACK reads them.
//           d, e, tauq, taup are written by rank 0.  CL = 1 is the one-block LABRD.
// Threads:  a ThreadGroup<DIM_X * DIM_Y> (the GEMV thread shape); every thread
//           calls it with the same arguments.
// Shared:   LabrdWork (below): sv (labrd_pad<T>() zeros + max(m, n) elements),
//           su (n elements), t1, t2 (NB each), gemv_work (larf_work_elems<DIM_X,
//           DIM_Y>() elements), vwork (vector_work_bytes(G) bytes); X, Y may be
//           shared or global.  The zeros in front of sv must stay zero (they pad
//           the large GEMV-T to an aligned row); everything else is undefined on exit.
// Sync:     no barrier assumed on entry (the caller's writes to A must be visible
//           to the group, to the cluster when CL > 1); ends after a barrier (a cluster
//           barrier when CL > 1: every block's stores visible to all).
// Memory:   A read and written in global or shared memory, column-major, 64-bit
//           offsets.  Requires p + NB < min(m, n) (a full panel with a non-empty
//           trailing matrix: every step then has both reflectors).
// Failure:  none; NaN/Inf propagate within the matrix as in LAPACK.
#pragma once
#include "common.cuh"
#include "gemv.cuh"
#include "householder.cuh"
#include "vector.cuh"

namespace bdf {

// Elements of padding in front of sv: one 128-byte segment.
template <typename T> __host__ __device__ constexpr int labrd_pad() { return 128 / int(sizeof(T)); }

template <typename T> struct LabrdWork {
  T* sv;                 // labrd_pad<T>() zeros, then the column being reduced (v)
  T* su;                 // the row being reduced (u, unconjugated), n elements
  T* t1;                 // NB elements: small GEMV inputs and outputs
  T* t2;                 // NB elements
  T* gemv_work;          // larf_work_elems<DIM_X, DIM_Y>() elements
  unsigned char* vwork;  // vector_work_bytes(G) bytes (larfg's norm)
  T* X;                  // X(r, c) = X[r + c * ldx], r = row - p
  long long ldx;
  T* Y;                  // Y(r, c) = Y[r + c * ldy], r = column - p
  long long ldy;
  // The GEMV-Ns on the panel's at most NB + 1 columns (V, X, Y times a short vector)
  // with a thread a row (gemv_n<T, G, 1>: every row's loads issued at once, no
  // reduction, no barrier) instead of the DIM_X x DIM_Y shape, whose passes of
  // DIM_X * GEMV_UNROLL rows each wait for their loads and three barriers.
  bool narrow;
};

// Rows s (<= limit) to start a column segment earlier so that its first element
// sits on a 128-byte boundary (the paper's padding of misaligned GEMV reads: the
// extra rows are multiplied by zeros or their results dropped).
template <typename T> __device__ __forceinline__ int labrd_align_shift(const T* at, int limit) {
  const int s = int((reinterpret_cast<unsigned long long>(at) / sizeof(T)) % labrd_pad<T>());
  return s < limit ? s : limit;
}

// The epilogue of every LABRD GEMV: output i (i >= shift) goes to
// y[(i - shift) * inc] as  SET: y = r,  SUB: y -= r,  SCALE: y = alpha (y - r).
// One functor type (not a lambda per call) so that each GEMV below is compiled
// once per kernel instead of once per call site.
enum LabrdMode : int { LABRD_SET = 0, LABRD_SUB = 1, LABRD_SCALE = 2 };
template <typename T> struct LabrdStore {
  T* y;
  long long inc;
  int shift;
  int mode;
  T alpha;
  __device__ __forceinline__ void operator()(int i, T r) const {
    if (i < shift) return;
    T& t = y[(i - shift) * inc];
    t = mode == LABRD_SET ? r : (mode == LABRD_SUB ? t - r : alpha * (t - r));
  }
};
template <typename T> __device__ __forceinline__ LabrdStore<T> labrd_store(T* y, int mode, T alpha = T(0),
                                                                           int shift = 0, long long inc = 1) {
  return LabrdStore<T>{y, inc, shift, mode, alpha};
}

// r = A x (labrd_gemv_n) and r = A^H x (labrd_gemv_t), x contiguous, into `st`.
// Not inlined: LABRD calls each about fifteen times.  Threads, Shared, Sync as gemv.cuh.
template <typename T, int DIM_X, int DIM_Y>
__device__ __noinline__ void labrd_gemv_n(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, const T* A, long long lda,
                                          const T* x, T* work, LabrdStore<T> st) {
  gemv_n<T, DIM_X, DIM_Y>(g, m, n, A, lda, x, 1, false, work, st);
}
template <typename T, int DIM_X, int DIM_Y>
__device__ __noinline__ void labrd_gemv_t(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, const T* A, long long lda,
                                          const T* x, T* work, LabrdStore<T> st) {
  gemv_t<T, DIM_X, DIM_Y>(g, m, n, A, lda, x, 1, true, work, st);
}

// A barrier of the whole cluster of CL blocks (CL = 1: of the group).  Release /
// acquire at cluster scope: the blocks' earlier stores, device memory included, are
// visible to every block of the cluster after it.
template <int CL, int G> __device__ __forceinline__ void cluster_sync(ThreadGroup<G> g) {
  if constexpr (CL == 1) {
    g.sync();
  } else {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  }
}

// The part [lo, hi) of the index range [begin, end) that rank `rank` of `parts` owns:
// equal pieces, the inner boundaries rounded up to multiples of `align` (aligned GEMV
// rows for every rank but the first).  Rank 0 of 1 owns everything.
struct LabrdRange {
  int lo, hi;
};
__device__ __forceinline__ LabrdRange labrd_split(int begin, int end, int rank, int parts, int align) {
  const int chunk = (end - begin + parts - 1) / parts;
  auto edge = [&](int r) {
    if (r <= 0) return begin;
    if (r >= parts) return end;
    const int b = (begin + r * chunk + align - 1) / align * align;
    return b < end ? b : end;
  };
  return LabrdRange{edge(rank), edge(rank + 1)};
}

// The part of `r` from index `from` on: its first index and length (0 when empty).
struct LabrdPart {
  int first, count;
};
__device__ __forceinline__ LabrdPart labrd_from(LabrdRange r, int from) {
  const int first = r.lo > from ? r.lo : from;
  return LabrdPart{first, r.hi > first ? r.hi - first : 0};
}

template <typename T, int DIM_X, int DIM_Y, int NB, int CL = 1>
__device__ void labrd(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, int p, T* a, long long lda,
                      typename real_of<T>::type* d, typename real_of<T>::type* e, T* tauq, T* taup,
                      const LabrdWork<T>& w, int rank = 0) {
  constexpr int G = DIM_X * DIM_Y;
  constexpr int PAD = labrd_pad<T>();
  const bool lead = g.rank == 0;
  const bool first = rank == 0;  // the block that writes d, e, tauq, taup
  auto A = [&](int i, int j) -> T& { return a[i + (long long)j * lda]; };
  T* const col = w.sv + PAD;  // col[-PAD .. -1] are zeros
  T* const su = w.su;
  T* const t1 = w.t1;
  T* const t2 = w.t2;
  T* const X = w.X;
  T* const Y = w.Y;
  const long long ldx = w.ldx, ldy = w.ldy;
  auto Xe = [&](int r, int c) -> T& { return X[r + c * ldx]; };
  auto Ye = [&](int r, int c) -> T& { return Y[r + c * ldy]; };
  // r = M x / r = M^H x for an mm x nn block M, into st.
  auto gn = [&](int mm, int nn, const T* M, long long ld, const T* x, LabrdStore<T> st) {
    labrd_gemv_n<T, DIM_X, DIM_Y>(g, mm, nn, M, ld, x, w.gemv_work, st);
  };
  auto gt = [&](int mm, int nn, const T* M, long long ld, const T* x, LabrdStore<T> st) {
    labrd_gemv_t<T, DIM_X, DIM_Y>(g, mm, nn, M, ld, x, w.gemv_work, st);
  };
  // r = M x for a block M of at most NB + 1 columns (LabrdWork::narrow).
  auto gn_narrow = [&](int mm, int nn, const T* M, long long ld, const T* x, LabrdStore<T> st) {
    if (w.narrow)
      labrd_gemv_n<T, G, 1>(g, mm, nn, M, ld, x, w.gemv_work, st);
    else
      labrd_gemv_n<T, DIM_X, DIM_Y>(g, mm, nn, M, ld, x, w.gemv_work, st);
  };
  // The stores of the steps below never target what the same GEMV reads, and
  // two GEMVs that write one target (or one reads what the other writes) are
  // separated by a barrier.

  // This block's rows (v's and X's stores, A0 u) and columns (u's and Y's stores,
  // A0^H v) of the panel, fixed for the panel so that each block reads back only
  // what it stored itself between cluster barriers; of them, step i's part starts
  // at row / column i + 1: r0 and nr rows, c0 and ncl columns.
  const LabrdRange rows = labrd_split(p + 1, m, rank, CL, PAD);
  const LabrdRange cols = labrd_split(p + 1, n, rank, CL, 1);
  if (m >= n) {
    for (int j = 0; j < NB; ++j) {
      const int i = p + j;
      const int mc = m - i;      // column i, rows i .. m-1
      const int nc = n - i - 1;  // row i, columns i+1 .. n-1
      const auto [r0, nr] = labrd_from(rows, i + 1);
      const auto [c0, ncl] = labrd_from(cols, i + 1);
      // (1) Column i: A0(i:, i) - V(i:, p:i) conj(Y(i, :j)) - X(i:, :j) A(p:i, i)
      //     (A(p:i, i) = conj(U(i, :j)); its last element is u's unit element 1).
      for (int c = g.rank; c < j; c += G) {
        t1[c] = conj_if(Ye(i - p, c), true);
        t2[c] = c == j - 1 ? T(1) : A(p + c, i);
      }
      for (int r = g.rank; r < mc; r += G) col[r] = A(i + r, i);
      g.sync();
      if (j > 0) {
        gn_narrow(mc, j, &A(i, p), lda, t1, labrd_store(col, LABRD_SUB));
        g.sync();
        gn_narrow(mc, j, X + (i - p), ldx, t2, labrd_store(col, LABRD_SUB));
        g.sync();
      }
      const auto q = larfg(g, mc, col[0], col + 1, 1, w.vwork);
      g.sync();  // all have read col[0]; v = col[1:] complete
      if (lead) {
        if (first) { d[i] = q.beta; tauq[i] = q.tau; }
        col[0] = T(1);
      }
      g.sync();  // v in col
      // (2) Y(i+1:, j) = tauq (A0^H v - Y(i+1:, :j) (V^H v) - U (X^H v)), U = A(p:i, i+1:)^H,
      //     this block's columns c0 .. of it.  The large GEMV-T starts s rows early, on an
      //     aligned row (col[-s..-1] = 0).
      T* const ycol = &Ye(c0 - p, j);
      if (j > 0) {
        gt(mc, j, &A(i, p), lda, col, labrd_store(t1, LABRD_SET));
        gt(mc, j, X + (i - p), ldx, col, labrd_store(t2, LABRD_SET));
      }
      if (ncl > 0) {  // (a block of the cluster may own none of the columns left)
        const int s = labrd_align_shift(&A(i, c0), i < PAD - 1 ? i : PAD - 1);
        gt(mc + s, ncl, &A(i - s, c0), lda, col - s, labrd_store(ycol, LABRD_SET));
      }
      g.sync();  // t1, t2 and this block's Y(:, j) complete
      if (j > 0) {
        gn_narrow(ncl, j, Y + (c0 - p), ldy, t1, labrd_store(ycol, LABRD_SUB));
        g.sync();
      }
      gt(j, ncl, &A(p, c0), lda, t2, labrd_store(ycol, LABRD_SCALE, q.tau));  // j = 0: only the scaling
      cluster_sync<CL>(g);  // Y(:, j) complete; every block has read column i
      if (lead && first) A(i, i) = T(1);
      for (int r = r0 + g.rank; r < r0 + nr; r += G) A(r, i) = col[r - i];
      // (3) conj(row i) = conj(A0(i, i+1:)) - Y(i+1:, :j+1) conj(V(i, p:i+1)) - U conj(X(i, :j)),
      //     V(i, i) = 1.
      for (int c = g.rank; c <= j; c += G) t1[c] = c < j ? conj_if(A(i, p + c), true) : T(1);
      for (int c = g.rank; c < j; c += G) t2[c] = conj_if(Xe(i - p, c), true);
      for (int c = g.rank; c < nc; c += G) su[c] = conj_if(A(i, i + 1 + c), true);
      g.sync();
      gn_narrow(nc, j + 1, Y + (i + 1 - p), ldy, t1, labrd_store(su, LABRD_SUB));
      g.sync();
      if (j > 0) {
        gt(j, nc, &A(p, i + 1), lda, t2, labrd_store(su, LABRD_SUB));
        g.sync();
      }
      const auto pr = larfg(g, nc, su[0], su + 1, 1, w.vwork);
      g.sync();
      if (lead) {
        if (first) { e[i] = pr.beta; taup[i] = pr.tau; }
        su[0] = T(1);
      }
      g.sync();  // u in su
      // (4) X(i+1:, j) = taup (A0 u - V(i+1:, p:i+1) (Y^H u) - X(i+1:, :j) (U^H u)), U^H u = A(p:i, i+1:) u,
      //     this block's rows r0 .. of it.  The large GEMV-N starts s rows early, on an
      //     aligned row, and drops those outputs.
      T* const xcol = &Xe(r0 - p, j);
      if (nr > 0) {
        const int s = labrd_align_shift(&A(r0, i + 1), r0 < PAD - 1 ? r0 : PAD - 1);
        gn(nr + s, nc, &A(r0 - s, i + 1), lda, su, labrd_store(xcol, LABRD_SET, T(0), s));
      }
      gt(nc, j + 1, Y + (i + 1 - p), ldy, su, labrd_store(t1, LABRD_SET));
      if (j > 0) gn(j, nc, &A(p, i + 1), lda, su, labrd_store(t2, LABRD_SET));
      g.sync();
      gn_narrow(nr, j + 1, &A(r0, p), lda, t1, labrd_store(xcol, LABRD_SUB));
      g.sync();
      gn_narrow(nr, j, X + (r0 - p), ldx, t2, labrd_store(xcol, LABRD_SCALE, pr.tau));  // j = 0: only the scaling
      cluster_sync<CL>(g);  // X(:, j) complete; every block has read row i
      for (int c = c0 + g.rank; c < c0 + ncl; c += G) A(i, c) = conj_if(su[c - i - 1], true);
    }
    cluster_sync<CL>(g);  // the last u stored
  } else {
    // As above, with the roles of rows and columns exchanged: u is stored after X's
    // column (every block has read row i), v after Y's (every block has read column i).
    for (int j = 0; j < NB; ++j) {
      const int i = p + j;
      const int nc = n - i;      // row i, columns i .. n-1
      const int mc = m - i - 1;  // column i, rows i+1 .. m-1 (also the X column)
      const auto [r0, nr] = labrd_from(rows, i + 1);
      const auto [c0, ncl] = labrd_from(cols, i + 1);
      // (1) conj(row i) = conj(A0(i, i:)) - Y(i:, :j) conj(V(i, p:i)) - U conj(X(i, :j)), U = A(p:i, i:)^H
      //     (V(i, i-1) is v's unit element 1).
      for (int c = g.rank; c < j; c += G) {
        t1[c] = c == j - 1 ? T(1) : conj_if(A(i, p + c), true);
        t2[c] = conj_if(Xe(i - p, c), true);
      }
      for (int c = g.rank; c < nc; c += G) su[c] = conj_if(A(i, i + c), true);
      g.sync();
      if (j > 0) {
        gn_narrow(nc, j, Y + (i - p), ldy, t1, labrd_store(su, LABRD_SUB));
        g.sync();
        gt(j, nc, &A(p, i), lda, t2, labrd_store(su, LABRD_SUB));
        g.sync();
      }
      const auto pr = larfg(g, nc, su[0], su + 1, 1, w.vwork);
      g.sync();
      if (lead) {
        if (first) { d[i] = pr.beta; taup[i] = pr.tau; }
        su[0] = T(1);
      }
      g.sync();  // u in su
      // (2) X(i+1:, j) = taup (A0 u - V(i+1:, p:i) (Y(i:, :j)^H u) - X(i+1:, :j) (A(p:i, i:) u)),
      //     this block's rows r0 .. of it.
      T* const xcol = &Xe(r0 - p, j);
      if (nr > 0) {
        const int s = labrd_align_shift(&A(r0, i), r0 < PAD - 1 ? r0 : PAD - 1);
        gn(nr + s, nc, &A(r0 - s, i), lda, su, labrd_store(xcol, LABRD_SET, T(0), s));
      }
      if (j > 0) {
        gt(nc, j, Y + (i - p), ldy, su, labrd_store(t1, LABRD_SET));
        gn(j, nc, &A(p, i), lda, su, labrd_store(t2, LABRD_SET));
      }
      g.sync();
      if (j > 0) {
        gn_narrow(nr, j, &A(r0, p), lda, t1, labrd_store(xcol, LABRD_SUB));
        g.sync();
      }
      gn_narrow(nr, j, X + (r0 - p), ldx, t2, labrd_store(xcol, LABRD_SCALE, pr.tau));  // j = 0: only the scaling
      cluster_sync<CL>(g);  // X(:, j) complete; every block has read row i
      if (lead && first) A(i, i) = T(1);
      for (int c = c0 + g.rank; c < c0 + ncl; c += G) A(i, c) = conj_if(su[c - i], true);
      // (3) Column i: A0(i+1:, i) - V(i+1:, p:i) conj(Y(i, :j)) - X(i+1:, :j+1) A(p:i+1, i)
      //     (A(i, i) is u's unit element 1).
      for (int c = g.rank; c <= j; c += G) {
        if (c < j) t1[c] = conj_if(Ye(i - p, c), true);
        t2[c] = c == j ? T(1) : A(p + c, i);
      }
      for (int r = g.rank; r < mc; r += G) col[r] = A(i + 1 + r, i);
      g.sync();
      if (j > 0) {
        gn_narrow(mc, j, &A(i + 1, p), lda, t1, labrd_store(col, LABRD_SUB));
        g.sync();
      }
      gn_narrow(mc, j + 1, X + (i + 1 - p), ldx, t2, labrd_store(col, LABRD_SUB));
      g.sync();
      const auto q = larfg(g, mc, col[0], col + 1, 1, w.vwork);
      g.sync();
      if (lead) {
        if (first) { e[i] = q.beta; tauq[i] = q.tau; }
        col[0] = T(1);
      }
      g.sync();  // v in col
      // (4) Y(i+1:, j) = tauq (A0^H v - Y(i+1:, :j) (V^H v) - U (X^H v)), U = A(p:i+1, i+1:)^H,
      //     this block's columns c0 .. of it.
      T* const ycol = &Ye(c0 - p, j);
      if (j > 0) gt(mc, j, &A(i + 1, p), lda, col, labrd_store(t1, LABRD_SET));
      gt(mc, j + 1, X + (i + 1 - p), ldx, col, labrd_store(t2, LABRD_SET));
      if (ncl > 0) {
        const int s = labrd_align_shift(&A(i + 1, c0), i + 1 < PAD - 1 ? i + 1 : PAD - 1);
        gt(mc + s, ncl, &A(i + 1 - s, c0), lda, col - s, labrd_store(ycol, LABRD_SET));
      }
      g.sync();
      if (j > 0) {
        gn_narrow(ncl, j, Y + (c0 - p), ldy, t1, labrd_store(ycol, LABRD_SUB));
        g.sync();
      }
      gt(j + 1, ncl, &A(p, c0), lda, t2, labrd_store(ycol, LABRD_SCALE, q.tau));
      cluster_sync<CL>(g);  // Y(:, j) complete; every block has read column i
      for (int r = r0 + g.rank; r < r0 + nr; r += G) A(r, i) = col[r - i - 1];
    }
    cluster_sync<CL>(g);  // the last v stored
  }
}

}  // namespace bdf
