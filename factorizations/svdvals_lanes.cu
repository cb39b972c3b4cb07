// Singular values of many small real matrices in two launches: the bidiagonal of
// each matrix from a group of lanes that holds it in registers
// (device_functions/gebd2_lanes.cuh), then the bidiagonal's values by dqds on a
// thread per matrix (device_functions/lasq.cuh).
//
// gebd2_lanes_kernel: A through a matrix accessor (matrix b column-major M, p x q,
//   leading dimension ld; a C-ordered user array arrives as its transpose, which has
//   the same values).  The group holds M when q <= p and M^T otherwise (rows over
//   the lanes, max(p, q) <= G rows, min(p, q) <= NC columns), scales it by 2^-x
//   (exact) so that its largest entry is in [1/2, 1), and writes the bidiagonal:
//   d at d_out + b * k_ld (k = min(p, q) entries), e at e_out + b * k_ld (k - 1), and
//   x at scale[b].  NaN/Inf in the matrix: d all NaN.  A grid-stride loop, each
//   group on its own matrices (no barrier between groups); the group's next matrix
//   is copied by cp.async into dynamic shared memory (NC (G + 1) entries a group)
//   while the group works on the current one.  (ncu, double 32 x 32: a sixth of the
//   time waited on the matrix's loads.  Measured, the gain came as much with one
//   matrix a group, nothing to overlap: see design.md.)
// lasq_kernel: thread b takes d, e and scale[b] (all of order k), runs dqds in
//   dynamic shared memory (4 k entries a thread, a warp's interleaved), and writes the k
//   values, descending, times 2^x, at s + b * s_ld; info[b] = 0, the count of values
//   that did not converge in max_passes transforms, or k for NaN/Inf (values NaN).
#include "common.cuh"
#include "layouts.cuh"
#include "gebd2_lanes.cuh"
#include "lasq.cuh"

template <class MatA, int G, int NC>
__global__ void __launch_bounds__(bdf::GEBD2_LANES_BLOCK)
gebd2_lanes_kernel(MatA A, typename MatA::value_type* d_out, typename MatA::value_type* e_out, long long k_ld,
                   int* scale, long long count) {
  using R = typename MatA::value_type;
  const int i = int(threadIdx.x % G);
  auto k_of = [&](long long b) { return A.rows(b) < A.cols(b) ? A.rows(b) : A.cols(b); };
  bdf::gebd2_lanes_grid<G, NC, false>(
      A, count,
      [&](long long b) {
        if (i < k_of(b)) d_out[b * k_ld + i] = bdf::bd_nan<R>();
        if (i == 0) scale[b] = 0;
      },
      [&](long long b, const R (&)[NC], R d, R e, R, R, int x) {
        const int k = k_of(b);
        if (i < k) d_out[b * k_ld + i] = d;
        if (i + 1 < k) e_out[b * k_ld + i] = e;
        if (i == 0) scale[b] = x;
      });
}

template <typename R>
__global__ void __launch_bounds__(128)
lasq_kernel(const R* d_in, const R* e_in, long long k_ld, const int* scale, long long count, int k, R* s_out,
            long long s_ld, int* info, int max_passes) {
  extern __shared__ unsigned char lasq_smem[];
  const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = b < count;
  // each warp's k-entry arrays (4 k values a thread) interleaved: LasqArray's layout
  const bdf::LasqArray<R> z{reinterpret_cast<R*>(lasq_smem) + (threadIdx.x / 32) * (4 * k * 32) + threadIdx.x % 32};
  const R* db = d_in + b * k_ld;
  const R* eb = e_in + b * k_ld;
  R* sb = s_out + b * s_ld;
  bool bad = false;
  for (int j = 0; live && j < k; ++j) {
    const R dj = db[j], ej = j + 1 < k ? eb[j] : R(0);
    bad = bad || !bdf::bd_finite(dj) || !bdf::bd_finite(ej);
    z.q(0, j) = dj * dj;
    z.e(0, j) = ej * ej;
  }
  // the threads that run dqds (blocks are whole warps)
  const unsigned warp = __ballot_sync(0xffffffffu, live && !bad);
  if (!live) return;
  if (bad) {
    for (int j = 0; j < k; ++j) sb[j] = bdf::bd_nan<R>();
    info[b] = k;
    return;
  }
  info[b] = bdf::lasq_values(z, k, max_passes, warp);
  // Descending.  dqds deflates the values in order as a rule (the array's rows end up
  // descending), so the rank count a value is taken only when they did not.
  const int x = scale[b];
  bool in_order = true;
  for (int j = 0; j + 1 < k; ++j) in_order = in_order && !(z.q(0, j + 1) > z.q(0, j));
  for (int j = 0; j < k; ++j) {
    const R vj = z.q(0, j);
    int pos = j;
    if (!in_order) {  // value j goes after the larger ones and the equal ones before it
      pos = 0;
      for (int t = 0; t < k; ++t) {
        const R vt = z.q(0, t);
        pos += (vt > vj || (vt == vj && t < j)) ? 1 : 0;
      }
    }
    sb[pos] = bdf::bd_ldexp(bdf::bd_sqrt(bdf::bd_max(vj, R(0))), x);
  }
}
