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
#include "stage.cuh"

constexpr int GEBD2_LANES_THREADS = 128;

// Where lane i's row of matrix b is: M's row i when q <= p, else M's column i.
template <typename R> struct Gebd2LanesView {
  const R* mat;
  int rows, cols;
  long long rs, cs;
  template <class MatA> __device__ __forceinline__ Gebd2LanesView(const MatA& A, long long b) {
    mat = A.matrix(b);
    const int p = A.rows(b), q = A.cols(b);
    const long long ld = A.ldim(b);
    const bool on_cols = q <= p;
    rows = on_cols ? p : q;
    cols = on_cols ? q : p;
    rs = on_cols ? 1 : ld;
    cs = on_cols ? ld : 1;
  }
};

// Lane i's row of the stage, entry c at stage[c gebd2_stage_ld(G) + i]: the lanes
// read one c from consecutive words, and the strided copy below writes a run of
// consecutive c to distinct banks (a row of G words would put the run in one bank).
__host__ __device__ constexpr int gebd2_stage_ld(int G) { return G + 1; }

// Whether the group copies the matrix in view together (gebd2_lanes_fetch): when the
// lanes' rows lie across its columns (rs != 1, a C-ordered tall matrix, rows ld
// apart) in groups of 32.  H100, one process, against each lane copying its own row
// (the one way before): float 32 x 24 1088 -> 1002 us, double 2026 -> 1735; in groups
// of 16 no gain (float 16 x 12 650 -> 703, double 1064 -> 1066), and dealt out for
// every matrix the two syncs and the longer loop cost 4-18 % at 8 x 8 and 16 x 16.
template <int G, typename R> __device__ __forceinline__ bool gebd2_lanes_dealt(const Gebd2LanesView<R>& v) {
  return G == 32 && v.rs != 1;
}

// The copy of the matrix in view into the group's stage.  Each lane copies its own
// row (at each c the lanes read consecutive addresses when rs == 1), or, when
// gebd2_lanes_dealt, the group deals the entries out in memory order
// (for_each_element: cs == 1, each instruction reads consecutive addresses) and the
// lanes write each other's slots: the caller then syncs the group before the copy,
// once every lane has read its row of the stage, and after the wait.
template <int G, int NC, typename R>
__device__ __forceinline__ void gebd2_lanes_fetch(bdf::ThreadGroup<G> g, const Gebd2LanesView<R>& v, R* stage) {
  constexpr int SLD = gebd2_stage_ld(G);
  const int cols = v.cols < NC ? v.cols : NC;
  if (!gebd2_lanes_dealt<G>(v)) {
    // A rolled loop with a running address: unrolled, the 32 addresses were live beside
    // the matrix (double 32 x 32: 198 registers against 168).
    if (g.rank < v.rows) {
      const R* src = v.mat + g.rank * v.rs;
#pragma unroll 1
      for (int c = 0; c < cols; ++c, src += v.cs) bdf::copy_async(stage + c * SLD + g.rank, src);
    }
  } else {
    bdf::for_each_element(g, cols, v.rows,
                          [&](int c, int i) { bdf::copy_async(stage + c * SLD + i, v.mat + c + i * v.rs); });
  }
  bdf::stage_commit();
}

template <class MatA, int G, int NC>
__global__ void __launch_bounds__(GEBD2_LANES_THREADS)
gebd2_lanes_kernel(MatA A, typename MatA::value_type* d_out, typename MatA::value_type* e_out, long long k_ld,
                   int* scale, long long count) {
  using R = typename MatA::value_type;
  static_assert(NC >= 1 && NC <= G && G <= 32, "at most G columns, G <= 32 rows");
  constexpr int GROUPS = GEBD2_LANES_THREADS / G;
  __shared__ bdf::Gebd2LanesShared<G, NC, R> sh[GROUPS];
  extern __shared__ unsigned char gebd2_lanes_stage[];
  const bdf::ThreadGroup<G> g(int(threadIdx.x % G));
  const int grp = int(threadIdx.x / G);
  const int i = g.rank;
  constexpr int SLD = gebd2_stage_ld(G);
  R* stage = reinterpret_cast<R*>(gebd2_lanes_stage) + grp * (NC * SLD);
  const long long step = (long long)gridDim.x * GROUPS;
  long long b = (long long)blockIdx.x * GROUPS + grp;
  // The view is built again for each copy rather than carried through the
  // reduction, where its fields would hold registers.
  if (b < count) gebd2_lanes_fetch<G, NC>(g, Gebd2LanesView<R>(A, b), stage);
  for (; b < count; b += step) {
    const Gebd2LanesView<R> v(A, b);
    const int cols = v.cols;
    R a[NC];
    R amax = R(0);
    bool bad = false;
    bdf::stage_wait<0>();
    if (gebd2_lanes_dealt<G>(v)) g.sync();  // the group copied the rows together
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const R x = (i < v.rows && c < cols) ? stage[c * SLD + i] : R(0);
      a[c] = x;
      bad = bad || !bdf::bd_finite(x);
      amax = bdf::bd_max(amax, bdf::bd_abs(x));
    }
    if (b + step < count) {
      const Gebd2LanesView<R> next(A, b + step);
      if (gebd2_lanes_dealt<G>(next)) g.sync();  // its copy writes every lane's slots: rows read first
      gebd2_lanes_fetch<G, NC>(g, next, stage);
    }
#pragma unroll
    for (int s = G / 2; s >= 1; s /= 2) amax = bdf::bd_max(amax, bdf::shfl_xor(amax, s, g.lanes()));
    bad = __any_sync(g.lanes(), bad);
    R* db = d_out + b * k_ld;
    R* eb = e_out + b * k_ld;
    if (bad) {
      if (i < cols) db[i] = bdf::bd_nan<R>();
      if (i == 0) scale[b] = 0;
      continue;
    }
    const int x = amax > R(0) ? bdf::bd_exponent(amax) : 0;
    if (x != 0) {
#pragma unroll
      for (int c = 0; c < NC; ++c) a[c] = bdf::bd_ldexp(a[c], -x);
    }
    R d, e;
    if (cols == NC)  // the common case, without column guards (gebd2_lanes' FULL)
      bdf::gebd2_lanes<G, NC, true>(g, a, cols, d, e, sh[grp]);
    else
      bdf::gebd2_lanes<G, NC, false>(g, a, cols, d, e, sh[grp]);
    if (i < cols) db[i] = d;
    if (i + 1 < cols) eb[i] = e;
    if (i == 0) scale[b] = x;
  }
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
