// Batched singular values by one-sided Jacobi (device_functions/gesvj.cuh): a
// group of G lanes per matrix, the matrix in registers, for min(m, n) <= NC and
// max(m, n) <= G * RP; real types.  A grid-stride loop over the batch, each
// group on its own matrices (no barrier between groups).
//
// Operands: A through a matrix accessor: matrix b is column-major M (p x q,
//   leading dimension ld); a C-ordered user array arrives as its transpose, which
//   has the same singular values.  The Jacobi orthogonalizes the columns of M when
//   q <= p and the columns of M^T (M's rows) otherwise: min(p, q) columns of
//   max(p, q) rows, read in place (nothing is copied or written back).
//   s: matrix b's min(p, q) values, descending, at s + b * s_ld.
//   info[b]: 0; min(p, q) for NaN/Inf in the matrix (its values NaN); or, when
//   max_sweeps sweeps did not converge, the rotations of the last one.
// VECT: J (the l x k matrix whose columns were orthogonalized) = Ut diag(s) W^T;
//   Ut (l x k, orthonormal columns, in the order of s) goes to element (i, j) at
//   ut + b * ut_stride + i * ut_rs + j * ut_cs and W (k x k) likewise to w; the
//   launcher picks the strides that make them U and Vh (or Vh and U).  Columns of
//   J that end below the floor (exact zeros) get an orthonormal completion
//   (gesvj_complete).  NaN/Inf: Ut and W all NaN.
// Scaling: each matrix is multiplied by 2^-e (exact) so that its largest entry is in
//   [1/2, 1) and the values by 2^e at the end, as xGESVD scales into a safe range.
#include "common.cuh"
#include "layouts.cuh"
#include "gesvj.cuh"

constexpr int GESVJ_THREADS = 128;

// Blocks per SM that ptxas must make room for (a register cap): float values with at
// most 32 matrix elements per lane fit 5 blocks (96 registers) without spilling; the
// rest need their registers.
#define GESVJ_FLOAT_MIN_BLOCKS 5
template <typename R, int NC, int RP, bool VECT> __host__ __device__ constexpr int gesvj_min_blocks() {
  return sizeof(R) == 4 && !VECT && NC * RP <= 32 ? GESVJ_FLOAT_MIN_BLOCKS : 1;
}

template <class MatA, int NC, int G, int RP, bool VECT>
__global__ void __launch_bounds__(GESVJ_THREADS, (gesvj_min_blocks<typename MatA::value_type, NC, RP, VECT>()))
gesvj_kernel(MatA A, typename MatA::value_type* s_out, long long s_ld, int* info, long long count, int max_sweeps,
             typename MatA::value_type* ut, long long ut_stride, long long ut_rs, long long ut_cs,
             typename MatA::value_type* w, long long w_stride, long long w_rs, long long w_cs) {
  using R = typename MatA::value_type;
  static_assert(NC % 2 == 0 && NC >= 2 && NC <= 32, "an even number of columns, at most 32");
  constexpr int GROUPS = GESVJ_THREADS / G;
  constexpr int RV = VECT ? (NC + G - 1) / G : 1;  // rows of W per lane
  __shared__ bdf::GesvjShared<R, NC, GESVJ_THREADS, GROUPS> sh;
  const bdf::ThreadGroup<G> g(int(threadIdx.x % G));
  const int grp = int(threadIdx.x / G);

  for (long long b = (long long)blockIdx.x * GROUPS + grp; b < count; b += (long long)gridDim.x * GROUPS) {
    const R* mat = A.matrix(b);
    const int p = A.rows(b), q = A.cols(b);
    const long long ld = A.ldim(b);
    const bool on_cols = q <= p;
    const int rows = on_cols ? p : q, cols = on_cols ? q : p;
    const long long rs = on_cols ? 1 : ld, cs = on_cols ? ld : 1;
    R* utb = VECT ? ut + b * ut_stride : nullptr;
    R* wb = VECT ? w + b * w_stride : nullptr;

    R a[RP][NC];
    R amax = R(0);
    bool bad = false;
#pragma unroll
    for (int r = 0; r < RP; ++r) {
      const int i = g.rank + G * r;
#pragma unroll
      for (int j = 0; j < NC; ++j) {
        const R x = (i < rows && j < cols) ? mat[i * rs + j * cs] : R(0);
        a[r][j] = x;
        bad = bad || !bdf::bd_finite(x);
        amax = bdf::bd_max(amax, bdf::bd_abs(x));
      }
    }
#pragma unroll
    for (int d = G / 2; d >= 1; d /= 2) amax = bdf::bd_max(amax, bdf::shfl_xor(amax, d, g.lanes()));
    bad = __any_sync(g.lanes(), bad);
    R* sb = s_out + b * s_ld;
    if (bad) {
      const R nan = bdf::bd_nan<R>();
      for (int j = g.rank; j < cols; j += G) sb[j] = nan;
      if (VECT) {
        for (int i = g.rank; i < rows; i += G)
          for (int j = 0; j < cols; ++j) utb[i * ut_rs + j * ut_cs] = nan;
        for (int i = g.rank; i < cols; i += G)
          for (int j = 0; j < cols; ++j) wb[i * w_rs + j * w_cs] = nan;
      }
      if (g.rank == 0) info[b] = cols;
      continue;
    }
    const int e = amax > R(0) ? bdf::bd_exponent(amax) : 0;
    if (e != 0) {
#pragma unroll
      for (int r = 0; r < RP; ++r)
#pragma unroll
        for (int j = 0; j < NC; ++j) a[r][j] = bdf::bd_ldexp(a[r][j], -e);
    }
    R v[RV][NC];
#pragma unroll
    for (int r = 0; r < RV; ++r)
#pragma unroll
      for (int j = 0; j < NC; ++j) v[r][j] = g.rank + G * r == j ? R(1) : R(0);

    const R tol = bdf::bd_sqrt(R(rows)) * bdf::BdLimits<R>::unit_roundoff;
    bdf::gesvj_column_norms(g, grp, a, sh);
    int made = 1;
    for (int sweep = 0; made != 0 && sweep < max_sweeps; ++sweep) {
      made = bdf::gesvj_sweep<VECT>(g, grp, a, v, sh, tol);
      bdf::gesvj_column_norms(g, grp, a, sh);  // exact norms again: the next sweep's start, or the values
    }

    // Descending order: column j goes to the number of columns before it (larger, or equal at a lower index).
#pragma unroll
    for (int t = 0; t < (NC + G - 1) / G; ++t) {
      const int j = g.rank + G * t;
      if (j < cols) {
        const R nj = sh.norm[j][grp];
        int pos = 0;
        for (int i = 0; i < cols; ++i) {
          const R ni = sh.norm[i][grp];
          pos += (ni > nj || (ni == nj && i < j)) ? 1 : 0;
        }
        sb[pos] = bdf::bd_ldexp(bdf::bd_sqrt(nj), e);
        sh.pos[j][grp] = pos;
      }
    }
    if (g.rank == 0) info[b] = made;
    if constexpr (VECT) {
      g.sync();  // positions
      int good = 0;
#pragma unroll
      for (int j = 0; j < NC; ++j) {
        if (j < cols) {
          const R nj = sh.norm[j][grp];
          const int pj = sh.pos[j][grp];
          const bool zero = !(nj >= bdf::GesvjLimits<R>::floor);
          good += zero ? 0 : 1;
          const R f = zero ? R(0) : R(1) / bdf::bd_sqrt(nj);
#pragma unroll
          for (int r = 0; r < RP; ++r) {
            const int i = g.rank + G * r;
            if (i < rows) utb[i * ut_rs + pj * ut_cs] = a[r][j] * f;
          }
#pragma unroll
          for (int r = 0; r < RV; ++r) {
            const int i = g.rank + G * r;
            if (i < cols) wb[i * w_rs + pj * w_cs] = v[r][j];
          }
        }
      }
      if (good < cols) {
        g.sync();  // the orthonormal columns are written
        bdf::gesvj_complete<G, RP>(g, utb, ut_rs, ut_cs, rows, good, cols);
      }
    }
  }
}
