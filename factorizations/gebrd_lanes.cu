// Batched GEBRD (LAPACK's compact output) of small real matrices held in registers:
// a group of G lanes per matrix, a row a lane (device_functions/gebd2_lanes.cuh with
// KEEP: the same reduction as svdvals' bidiagonal, the reflectors kept).
//
// gebrd_lanes_kernel: A through a matrix accessor (matrix b column-major, p x q,
//   max(p, q) <= G, min(p, q) <= NC), reduced in place.  The group holds the matrix, or
//   its transpose when it is wide (p < q): LAPACK's lower bidiagonal reduction of a
//   wide A is the upper one of A^T with the two kinds of reflector swapped (G(i) of A
//   is H(i) of A^T), so the same code serves both, writing taup where it would write
//   tauq.  Each matrix is scaled by 2^-x (exact; gebd2_lanes_batch) and d, e are
//   scaled back when written (the reflectors do not change).  Lane i writes its row:
//   d_i and e_i on the diagonal and next to it, the reflectors' vectors elsewhere (in
//   a column-major A each c is one coalesced store of the group's lanes), and d_i,
//   e_i, tauq_i, taup_i to the vectors.  A matrix with NaN/Inf: every output of it
//   NaN (a, d, e, tauq, taup), the others untouched.  128 threads a block, a
//   grid-stride loop; dynamic shared memory: the groups' stages (NC (G + 1) entries
//   each), static: their Gebd2LanesShared.
#include "common.cuh"
#include "layouts.cuh"
#include "gebd2_lanes.cuh"

template <class MatA, class VecR, class VecT, int G, int NC>
__global__ void __launch_bounds__(bdf::GEBD2_LANES_BLOCK)
gebrd_lanes_kernel(MatA A, VecR D, VecR E, VecT TQ, VecT TP, long long count) {
  using R = typename MatA::value_type;
  static_assert(!bdf::is_complex_v<R>, "gebd2_lanes reduces real matrices");
  const int i = int(threadIdx.x % G);
  bdf::gebd2_lanes_grid<G, NC, true>(
      A, count,
      [&](long long b) {
        const bdf::Gebd2LanesView<R> v(A, b);
        const R nan = bdf::bd_nan<R>();
        R* row = A.matrix(b) + i * v.rs;
        if (i < v.rows)
          for (int c = 0; c < v.cols; ++c) row[c * v.cs] = nan;
        if (i < v.cols) D.vector(b)[i] = TQ.vector(b)[i] = TP.vector(b)[i] = nan;
        if (i + 1 < v.cols) E.vector(b)[i] = nan;
      },
      [&](long long b, const R (&a)[NC], R d, R e, R tq, R tp, int x) {
        const bdf::Gebd2LanesView<R> v(A, b);
        const bool wide = A.rows(b) < A.cols(b);
        d = bdf::bd_ldexp(d, x);
        e = bdf::bd_ldexp(e, x);
        if (i < v.rows) {
          R* row = A.matrix(b) + i * v.rs;
#pragma unroll
          for (int c = 0; c < NC; ++c)
            if (c < v.cols) row[c * v.cs] = c == i ? d : (c == i + 1 ? e : a[c]);
        }
        if (i < v.cols) {
          D.vector(b)[i] = d;
          (wide ? TP : TQ).vector(b)[i] = tq;
          (wide ? TQ : TP).vector(b)[i] = tp;
        }
        if (i + 1 < v.cols) E.vector(b)[i] = e;
      });
}
