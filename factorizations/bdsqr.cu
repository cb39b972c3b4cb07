// Batched bidiagonal SVD (xBDSQR): one matrix per thread (GROUP == 1, values only)
// or per warp (GROUP == 32, values and optionally vectors), a grid-stride loop over
// the batch on gridDim.x, no host round trip between iterations.
//
// Shared memory (dynamic, per block; the same sums as svd_settings.BdsqrSetting.slot_bytes):
//   GROUP == 1:  d and e of every slot interleaved: d_j of slot g at R[j * slots + g],
//                e_j at R[(k + j) * slots + g] (a warp's threads touch consecutive words).
//   GROUP == 32: per slot (one warp), contiguous, slot_bytes apart:
//                R d[k], e[k]                      (values only: nothing else)
//                R lc[k], ls[k], rc[k], rs[k]      (VECT: one sweep's left / right rotations)
//                int flip[k], swaps[k], ctrl[4]    (VECT: signs, sort, the sweep descriptor)
// Who writes what (VECT): lane 0 alone runs the scalar recurrence on d, e and writes
// the records and ctrl; after a __syncwarp every lane reads them and updates its own
// rows of u (rows lane, lane + 32, ...) and its own columns of vt; a second __syncwarp
// ends the reads before lane 0 writes the next sweep's records.
//
// Operands: d, e read through UniformVector accessors (any batch stride and increment;
// never written); s written contiguous (count, k); u (count, r, k) stored with element
// (i, j) of matrix b at u + b * u_stride + i + j * u_ld (column-major: lanes own rows,
// coalesced), vt (count, k, c) with element (i, j) at vt + b * vt_stride + i * vt_ld + j
// (row-major: lanes own columns, coalesced).  u and vt are updated in place (the
// launcher passes fresh copies); u_rows == 0 / vt_cols == 0 skips one side.
#include "common.cuh"
#include "layouts.cuh"
#include "bdsqr.cuh"

// A sweep's rotations on the lane's streams of one side: rows lane, lane + 32, .. of u
// (or columns of vt) of `len`, entry p of stream i at x[i + p * inc].  WIDE: four
// streams at once, 8-16 pairs' entries loaded ahead (long sweeps: H100, 256 matrices
// of 128 x 128 float64, BDSQR with vectors 16.9 ms against 56.1); otherwise a pair at
// a time (short sweeps of many matrices, where WIDE's 255 registers cost more warps
// than its loads in flight gain: 32,768 of 16 x 16, 11.7 ms against 5.1).
template <bool WIDE, typename TU, typename R>
__device__ __forceinline__ void rotate_lanes(TU* x, int len, long long inc, int lane, int lo, int hi, bool fwd,
                                             const R* c, const R* s) {
  constexpr int NS = WIDE ? 4 : 1, CH = WIDE ? (sizeof(TU) > 8 ? 8 : 16) : 1;
  for (int i = lane; i < len; i += 32 * NS)
    bdf::bdsqr_rotate_streams<NS, CH>(x + i, 32, min(NS, (len - i + 31) / 32), inc, lo, hi, fwd, c, s);
}

template <typename R, typename TU, int GROUP, bool VECT, bool WIDE>
__global__ void __launch_bounds__(256)
bdsqr_kernel(bdf::UniformVector<R> D, bdf::UniformVector<R> E, R* s_out, TU* u, long long u_stride,
             long long u_ld, int u_rows, TU* vt, long long vt_stride, long long vt_ld, int vt_cols, int* info,
             int k, int lower, int maxitr, long long count) {
  static_assert(GROUP == 1 || GROUP == 32, "a thread or a warp per matrix");
  static_assert(!VECT || GROUP == 32, "vectors need a warp per matrix");
  static_assert(VECT || !WIDE, "WIDE applies rotations to vectors");
  extern __shared__ __align__(16) unsigned char smem[];
  const int slots = blockDim.x / GROUP;
  const int g = threadIdx.x / GROUP;
  const int lane = threadIdx.x % GROUP;
  const int kk = k > 0 ? k : 1;
  const long long slot_bytes =
      VECT ? ((long long)6 * kk * sizeof(R) + (2LL * kk + 4) * sizeof(int) + 15) / 16 * 16
           : (long long)2 * kk * sizeof(R);
  R* base = GROUP == 1 ? reinterpret_cast<R*>(smem) + g : reinterpret_cast<R*>(smem + g * slot_bytes);
  const int stride = GROUP == 1 ? slots : 1;
  const bdf::Strided<R> d{base, stride};
  const bdf::Strided<R> e{base + (long long)kk * stride, stride};
  R* lc = base + 2 * kk;  // VECT only (GROUP == 32, stride 1)
  R* ls = lc + kk;
  R* rc = ls + kk;
  R* rs = rc + kk;
  int* flip = reinterpret_cast<int*>(rs + kk);
  int* swaps = flip + kk;
  int* ctrl = swaps + kk;

  for (long long b = (long long)blockIdx.x * slots + g; b < count; b += (long long)gridDim.x * slots) {
    const R* din = D.vector(b);
    const R* ein = E.vector(b);
    for (int j = lane; j < k; j += GROUP) d[j] = din[j * D.inc];
    for (int j = lane; j + 1 < k; j += GROUP) e[j] = ein[j * E.inc];
    if (GROUP > 1) __syncwarp();
    R* sb = s_out + b * k;

    if constexpr (!VECT) {
      if (lane == 0) {
        bdf::BdsqrState<R> st;
        int inf = 0;
        if (!bdf::bdsqr_begin(d, e, k, maxitr, st)) {  // NaN/Inf: NaN values, info = k
          for (int j = 0; j < k; ++j) d[j] = bdf::bd_nan<R>();
          inf = k;
        } else {
          if (k > 1) {
            if (lower) bdf::bdsqr_lower_to_upper<false>(d, e, k, (R*)nullptr, (R*)nullptr);
            bdf::bdsqr_threshold(d, e, maxitr, st);
            int lo, hi;
            while (bdf::bdsqr_step<false>(d, e, st, (R*)nullptr, (R*)nullptr, (R*)nullptr, (R*)nullptr, lo, hi,
                                          inf) != bdf::BDSQR_DONE) {
            }
          }
          bdf::bdsqr_finish<false, R>(d, k, st.exponent, nullptr, nullptr);
        }
        info[b] = inf;
      }
      if (GROUP > 1) __syncwarp();
      for (int j = lane; j < k; j += GROUP) sb[j] = d[j];
      if (GROUP > 1) __syncwarp();  // d is refilled by the next matrix
    } else {
      TU* ub = u_rows > 0 ? u + b * u_stride : nullptr;
      TU* vb = vt_cols > 0 ? vt + b * vt_stride : nullptr;
      bdf::BdsqrState<R> st;
      int inf = 0;
      if (lane == 0) {
        const bool finite = bdf::bdsqr_begin(d, e, k, maxitr, st);
        ctrl[3] = finite;
        if (finite && lower && k > 1) bdf::bdsqr_lower_to_upper<true>(d, e, k, lc, ls);
        if (finite && k > 1) bdf::bdsqr_threshold(d, e, maxitr, st);
      }
      __syncwarp();
      if (!ctrl[3]) {  // NaN/Inf in this matrix: NaN values and vectors, info = k (uniform over the warp)
        const TU nan = TU(bdf::bd_nan<R>());
        for (int j = lane; j < k; j += 32) sb[j] = bdf::bd_nan<R>();
        for (int i = lane; i < u_rows; i += 32)
          for (int j = 0; j < k; ++j) ub[i + j * u_ld] = nan;
        for (int j = lane; j < vt_cols; j += 32)
          for (int i = 0; i < k; ++i) vb[i * vt_ld + j] = nan;
        if (lane == 0) info[b] = k;
        __syncwarp();
        continue;
      }
      if (lower && k > 1) rotate_lanes<WIDE>(ub, u_rows, u_ld, lane, 0, k - 1, true, lc, ls);
      __syncwarp();  // the lower-to-upper records are read before lane 0 overwrites lc, ls
      for (;;) {
        if (lane == 0) {
          int lo = 0, hi = 0;
          const int action = k > 1 ? bdf::bdsqr_step<true>(d, e, st, lc, ls, rc, rs, lo, hi, inf) : bdf::BDSQR_DONE;
          ctrl[0] = action;
          ctrl[1] = lo;
          ctrl[2] = hi;
        }
        __syncwarp();
        const int action = ctrl[0], lo = ctrl[1], hi = ctrl[2];
        if (action == bdf::BDSQR_DONE) break;
        const bool fwd = action == bdf::BDSQR_SWEEP_DOWN;
        rotate_lanes<WIDE>(ub, u_rows, u_ld, lane, lo, hi, fwd, lc, ls);
        rotate_lanes<WIDE>(vb, vt_cols, vt_ld, lane, lo, hi, fwd, rc, rs);
        __syncwarp();  // records read; lane 0 may write the next sweep's
      }
      if (lane == 0) {
        bdf::bdsqr_finish<true, R>(d, k, st.exponent, flip, swaps);
        info[b] = inf;
      }
      __syncwarp();
      for (int j = lane; j < vt_cols; j += 32) {
        TU* x = vb + j;
        for (int i = 0; i < k; ++i)
          if (flip[i]) x[i * vt_ld] = -x[i * vt_ld];
        for (int i = 0; i + 1 < k; ++i) {
          const int t = swaps[i];
          if (t != i) {
            const TU tmp = x[i * vt_ld];
            x[i * vt_ld] = x[t * vt_ld];
            x[t * vt_ld] = tmp;
          }
        }
      }
      for (int r = lane; r < u_rows; r += 32) {
        TU* x = ub + r;
        for (int i = 0; i + 1 < k; ++i) {
          const int t = swaps[i];
          if (t != i) {
            const TU tmp = x[i * u_ld];
            x[i * u_ld] = x[t * u_ld];
            x[t * u_ld] = tmp;
          }
        }
      }
      for (int j = lane; j < k; j += 32) sb[j] = d[j];
      __syncwarp();  // d, flip, swaps are rewritten by the next matrix
    }
  }
}
