// Batched Householder QR (GEQRF), least squares (GELS) and Q generation (ORGQR).
// One kernel body per design for the three layouts (the MatA accessors of
// layouts.cuh); the settings are template parameters (qr_settings.py).
//
//   qr_unblocked_kernel<MatA, DIM_X, DIM_Y, SHARED>
//     SHARED (the fused design): one thread group per matrix (several sub-warp
//       groups per block), the matrix and its right-hand sides copied into the
//       group's shared memory, bdf::geqr2 (B := Q^H B alongside), the triangular
//       solve, results written back once.
//     !SHARED (the global design): the same steps in place in global memory.
//   qr_blocked_kernel<MatA, DIM_X, DIM_Y, NB>: one block per matrix, panels of NB
//       columns staged in shared memory and factored by bdf::geqr2, T formed by
//       bdf::larft, trailing columns and B updated as C -= V (T^H (V^H C)) with
//       bdf::gemm_tile; then the triangular solve in global memory.
//   orgqr_kernel<MatA, DIM_X, DIM_Y>: bdf::org2r in place in global memory.
//
// Both factor kernels work IN PLACE on QR (the launcher copies A into it first,
// column-major) and on Bw (m x nrhs, the right-hand sides; on exit Q^H B, the
// solution in rows 0..n-1, as LAPACK's xGELS leaves B).  nrhs == 0 is GEQRF:
// Bw and info are never touched.  GELS needs m >= n (the launcher checks).
#include "common.cuh"
#include "gemm.cuh"
#include "gemv.cuh"
#include "geqr2.cuh"
#include "householder.cuh"
#include "layouts.cuh"
#include "trsv.cuh"
#include "vector.cuh"

#define QR_NT 32  // trailing columns per update tile (qr_settings.NT)
#define QR_BK 32  // inner tile of Y = V^H C (qr_settings.BK)
#define QR_BM 32  // row tile of C -= V Z (qr_settings.BM)

// Sub-warp groups pack several matrices into one block (the launcher may launch
// fewer when their shared memory would not fit).
__host__ __device__ constexpr int qr_block_threads(int group) { return group > 32 ? group : 256; }

__host__ __device__ constexpr long long qr_align16(long long bytes) { return (bytes + 15) / 16 * 16; }

// Solve R X = X for the n x n upper triangle R (ldr) and nrhs columns of X (ldx),
// unless R has an exactly zero diagonal entry: then X is left as it is and the
// 1-based column is returned (LAPACK's xTRTRS, which xGELS calls).  Each column is
// one bdf::trsv_window (tiles of min(G, 32) unknowns, last tile first).
// Sync: R and X visible on entry; ends after a barrier.  flag: one int (G > 32).
template <typename T, int DIM_X, int DIM_Y>
__device__ int qr_solve(bdf::ThreadGroup<DIM_X * DIM_Y> g, int n, const T* R, long long ldr, T* X,
                        long long ldx, int nrhs, T* gemv_work, int* flag) {
  const int zero = bdf::first_zero_diagonal(g, n, R, ldr, flag);
  if (zero) return zero;  // uniform over the group
  for (int c = 0; c < nrhs; ++c)
    bdf::trsv_window<T, DIM_X, DIM_Y>(g, R, ldr, bdf::OP_N, false, false, 0, n, X + (long long)c * ldx, gemv_work);
  return 0;
}

template <class MatA, int DIM_X, int DIM_Y, bool SHARED>
__global__ void __launch_bounds__(qr_block_threads(DIM_X * DIM_Y))
qr_unblocked_kernel(MatA QR, MatA Bw, bdf::UniformVector<typename MatA::value_type> Tau, int* info,
                    long long count, int nrhs, long long s_a, long long s_b, int wlen, long long group_bytes) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int GW = bdf::larf_work_elems<DIM_X, DIM_Y>();
  extern __shared__ __align__(16) unsigned char smem[];
  const int groups = blockDim.x / G;
  const int group = threadIdx.x / G;
  // Per group (qr_settings.QrSetting.unblocked_layout): matrix s_a, B s_b, w wlen,
  // GEMV reduction GW (elements of T), then larfg's bytes and the flag.
  unsigned char* base = smem + group * group_bytes;
  T* sa = reinterpret_cast<T*>(base);
  T* sb = sa + s_a;
  T* w = sb + s_b;
  T* gw = GW ? w + wlen : nullptr;
  unsigned char* vwork = base + qr_align16((s_a + s_b + wlen + GW) * (long long)sizeof(T));
  int* flag = reinterpret_cast<int*>(vwork + bdf::vector_work_bytes(G));
  const bdf::ThreadGroup<G> g(threadIdx.x % G);

  for (long long b = (long long)blockIdx.x * groups + group; b < count; b += (long long)gridDim.x * groups) {
    const int m = QR.rows(b), n = QR.cols(b);
    T* qa = QR.matrix(b);
    const long long lda_g = QR.ldim(b);
    T* qb = nrhs ? Bw.matrix(b) : nullptr;
    const long long ldb_g = nrhs ? Bw.ldim(b) : 1;
    T* a = qa;
    T* bm = qb;
    long long lda = lda_g, ldb = ldb_g;
    if (SHARED) {  // each element copied by one thread; visible after the barrier below
      lda = ldb = m > 0 ? m : 1;
      a = sa;
      bm = sb;
      for (int e = g.rank; e < m * n; e += G) {
        const int j = e / m, i = e - j * m;
        sa[i + j * lda] = qa[i + j * lda_g];
      }
      for (int e = g.rank; e < m * nrhs; e += G) {
        const int j = e / m, i = e - j * m;
        sb[i + j * ldb] = qb[i + j * ldb_g];
      }
    }
    g.sync();
    bdf::geqr2<T, DIM_X, DIM_Y>(g, m, n, a, lda, bm, nrhs, ldb, Tau.vector(b), w, gw, vwork);
    if (nrhs) {
      const int zero = qr_solve<T, DIM_X, DIM_Y>(g, n, a, lda, bm, ldb, nrhs, gw, flag);
      if (g.rank == 0) info[b] = zero;
    }
    if (SHARED) {
      for (int e = g.rank; e < m * n; e += G) {
        const int j = e / m, i = e - j * m;
        qa[i + j * lda_g] = sa[i + j * lda];
      }
      for (int e = g.rank; e < m * nrhs; e += G) {
        const int j = e / m, i = e - j * m;
        qb[i + j * ldb_g] = sb[i + j * ldb];
      }
    }
    g.sync();  // the group's shared memory is refilled by its next matrix
  }
}

// C (mp x ncols, ldc) := (I - V T V^H)^H C = C - V (T^H (V^H C)) for the panel's
// V (mp x nb, ldp, unit diagonal and zeros above stored) and T (nb x nb, ld NB),
// a tile of QR_NT columns at a time.  Ends after a barrier.
template <typename T, int DIM_X, int DIM_Y, int NB>
__device__ void qr_apply_block(bdf::ThreadGroup<DIM_X * DIM_Y> g, int mp, int nb, const T* V, long long ldp,
                               const T* Tm, T* C, long long ldc, int ncols, T* Y, T* Z, T* sA, T* sB) {
  constexpr int G = DIM_X * DIM_Y;
  for (int c0 = 0; c0 < ncols; c0 += QR_NT) {
    const int nt = min(QR_NT, ncols - c0);
    T* Ct = C + (long long)c0 * ldc;
    // Y = V^H Ct (nb x nt): one gemm tile.
    bdf::gemm_tile<T, DIM_X, DIM_Y, NB, QR_NT, QR_BK>(g, nb, nt, mp, 0, 0, V, ldp, bdf::OP_C, Ct, ldc, bdf::OP_N,
                                                      sA, sB, [&](int i, int j, T r) { Y[i + j * NB] = r; });
    g.sync();  // Y complete
    // Z = T^H Y (T upper: Z(i, j) = sum_{l <= i} conj(T(l, i)) Y(l, j)).
    for (int e = g.rank; e < nb * nt; e += G) {
      const int i = e % nb, j = e / nb;
      T s = T(0);
      for (int l = 0; l <= i; ++l) s += bdf::conj_if(Tm[l + i * NB], true) * Y[l + j * NB];
      Z[i + j * NB] = s;
    }
    g.sync();  // Z complete
    // Ct -= V Z, row tiles of QR_BM; each element of Ct stored by the thread that owns it.
    for (int i0 = 0; i0 < mp; i0 += QR_BM)
      bdf::gemm_tile<T, DIM_X, DIM_Y, QR_BM, QR_NT, NB>(g, mp, nt, nb, i0, 0, V, ldp, bdf::OP_N, Z, NB, bdf::OP_N,
                                                        sA, sB, [&](int i, int j, T r) {
                                                          Ct[i + (long long)j * ldc] -= r;
                                                        });
    g.sync();  // Ct written (global memory, visible to the block after the barrier)
  }
}

template <class MatA, int DIM_X, int DIM_Y, int NB>
__global__ void __launch_bounds__(DIM_X * DIM_Y)
qr_blocked_kernel(MatA QR, MatA Bw, bdf::UniformVector<typename MatA::value_type> Tau, int* info,
                  long long count, int nrhs, int ldp) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  static_assert(NB <= G, "larft gives one thread per row of T");
  constexpr int GW = bdf::larf_work_elems<DIM_X, DIM_Y>();
  constexpr int ZN = NB > QR_NT ? NB : QR_NT;
  constexpr int SA = QR_BK * (NB + 1) > NB * (QR_BM + 1) ? QR_BK * (NB + 1) : NB * (QR_BM + 1);
  constexpr int SB = QR_BK * (QR_NT + 1) > NB * (QR_NT + 1) ? QR_BK * (QR_NT + 1) : NB * (QR_NT + 1);
  extern __shared__ __align__(16) unsigned char smem[];
  // Carve-up (qr_settings.QrSetting.blocked_bytes): panel, T, Y, Z, gemm tiles, tau, w, GEMV work.
  T* P = reinterpret_cast<T*>(smem);
  T* Tm = P + (long long)ldp * NB;
  T* Y = Tm + NB * NB;
  T* Z = Y + NB * QR_NT;
  T* sA = Z + NB * ZN;
  T* sB = sA + SA;
  T* taus = sB + SB;
  T* w = taus + NB;
  T* gw = GW ? w + NB : nullptr;
  unsigned char* vwork =
      smem + qr_align16(((long long)ldp * NB + NB * NB + NB * QR_NT + NB * ZN + SA + SB + 2 * NB + GW) *
                        (long long)sizeof(T));
  int* flag = reinterpret_cast<int*>(vwork + bdf::vector_work_bytes(G));
  const bdf::ThreadGroup<G> g(threadIdx.x);

  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int m = QR.rows(b), n = QR.cols(b), k = min(m, n);
    T* a = QR.matrix(b);
    const long long lda = QR.ldim(b);
    T* bm = nrhs ? Bw.matrix(b) : nullptr;
    const long long ldb = nrhs ? Bw.ldim(b) : 1;
    T* tau = Tau.vector(b);
    for (int j0 = 0; j0 < k; j0 += NB) {
      const int nb = min(NB, k - j0), mp = m - j0;
      T* a0 = a + j0 + (long long)j0 * lda;
      for (int e = g.rank; e < mp * nb; e += G) {
        const int c = e / mp, i = e - c * mp;
        P[i + (long long)c * ldp] = a0[i + (long long)c * lda];
      }
      g.sync();
      bdf::geqr2<T, DIM_X, DIM_Y>(g, mp, nb, P, ldp, static_cast<T*>(nullptr), 0, 1, taus, w, gw, vwork);
      // The factored panel back to QR; P becomes V (unit diagonal, zeros above).
      for (int e = g.rank; e < mp * nb; e += G) {
        const int c = e / mp, i = e - c * mp;
        T* p = P + i + (long long)c * ldp;
        a0[i + (long long)c * lda] = *p;
        if (i <= c) *p = i == c ? T(1) : T(0);
      }
      for (int c = g.rank; c < nb; c += G) tau[j0 + c] = taus[c];
      g.sync();
      const int nc = n - j0 - nb;
      if (nc > 0 || nrhs > 0) {
        bdf::larft(g, mp, nb, P, ldp, taus, Tm, NB, Z);
        if (nc > 0)
          qr_apply_block<T, DIM_X, DIM_Y, NB>(g, mp, nb, P, ldp, Tm, a0 + (long long)nb * lda, lda, nc, Y, Z,
                                              sA, sB);
        if (nrhs > 0)
          qr_apply_block<T, DIM_X, DIM_Y, NB>(g, mp, nb, P, ldp, Tm, bm + j0, ldb, nrhs, Y, Z, sA, sB);
      }
    }
    g.sync();  // QR and B complete in global memory
    if (nrhs) {
      const int zero = qr_solve<T, DIM_X, DIM_Y>(g, n, a, lda, bm, ldb, nrhs, gw, flag);
      if (g.rank == 0) info[b] = zero;
    }
    g.sync();  // shared memory reused by the next matrix
  }
}

// Q (m x ncol per matrix, in place): on entry columns 0..k_b-1 hold the reflectors
// (the launcher copied them from GEQRF's output), k_b = ks ? ks[b] : k_uniform.
template <class MatA, int DIM_X, int DIM_Y>
__global__ void __launch_bounds__(DIM_X * DIM_Y)
orgqr_kernel(MatA Q, bdf::UniformVector<typename MatA::value_type> Tau, const long long* ks, long long k_uniform,
             long long count, int wlen) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int GW = bdf::larf_work_elems<DIM_X, DIM_Y>();
  extern __shared__ __align__(16) unsigned char smem[];
  T* w = reinterpret_cast<T*>(smem);
  T* gw = GW ? w + wlen : nullptr;
  const bdf::ThreadGroup<G> g(threadIdx.x);
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    const int k = int(ks ? ks[b] : k_uniform);
    bdf::org2r<T, DIM_X, DIM_Y>(g, Q.rows(b), Q.cols(b), k, Q.matrix(b), Q.ldim(b), Tau.vector(b), w, gw);
  }
}
