// bdsqr.cuh: the scalar bidiagonal QR iteration of ONE matrix (Demmel-Kahan, in
// LAPACK xBDSQR's organisation), split into resumable steps so that a warp can
// apply each sweep's rotations to the vectors between steps.
//
// The algorithm and its thresholds are described in factorizations/bdsqr.py;
// this file and that module's NumPy backend are the same algorithm (the NumPy
// one vectorized over matrices), step for step.
//
// Threads:  every function here except bdf::bdsqr_rotate_streams runs on ONE thread
//           (the scalar recurrence); bdsqr_rotate_streams is called by each lane
//           for its own rows of u / columns of vt.
// Shared:   d and e are passed as bdf::Strided views (shared memory, any element
//           stride, so one thread per matrix can interleave matrices); the
//           rotation records lc, ls, rc, rs (k entries each, indexed by the
//           pair's first position) and flip/swaps (k ints) are caller's memory.
// Sync:     none inside; the caller orders the record writes (one thread) and
//           the reads (all lanes) with its own barriers.
// Memory:   d, e overwritten; nothing else read or written.
// Failure:  non-finite d/e -> bdsqr_begin returns false (the caller makes the
//           values NaN); too many iterations -> bdsqr_step returns BDSQR_DONE
//           with info = the number of nonzero superdiagonals (LAPACK).
//           Never divides by zero on finite input; always terminates
//           (at most maxitr * k^2 inner steps).
#pragma once
#include "common.cuh"

namespace bdf {

template <typename R> struct Strided {
  R* p;
  int stride;
  __device__ R& operator[](int j) const { return p[(long long)j * stride]; }
};

__device__ __forceinline__ float bd_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double bd_abs(double x) { return fabs(x); }
__device__ __forceinline__ float bd_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double bd_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float bd_hypot(float a, float b) { return hypotf(a, b); }
__device__ __forceinline__ double bd_hypot(double a, double b) { return hypot(a, b); }
__device__ __forceinline__ float bd_ldexp(float x, int e) { return ldexpf(x, e); }
__device__ __forceinline__ double bd_ldexp(double x, int e) { return ldexp(x, e); }
__device__ __forceinline__ int bd_exponent(float x) { int e; frexpf(x, &e); return e; }
__device__ __forceinline__ int bd_exponent(double x) { int e; frexp(x, &e); return e; }
__device__ __forceinline__ bool bd_finite(float x) { return isfinite(x); }
__device__ __forceinline__ bool bd_finite(double x) { return isfinite(x); }
template <typename R> __device__ __forceinline__ R bd_min(R a, R b) { return a < b ? a : b; }
template <typename R> __device__ __forceinline__ R bd_max(R a, R b) { return a > b ? a : b; }

template <typename R> __device__ __forceinline__ R bd_nan();
template <> __device__ __forceinline__ float bd_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double bd_nan<double>() { return __longlong_as_double(0x7ff8000000000000LL); }

template <typename R> struct BdLimits;
template <> struct BdLimits<float> {
  static constexpr float unit_roundoff = 5.9604644775390625e-8f;  // 2^-24
  static constexpr float tiny = 1.17549435e-38f;                  // FLT_MIN
};
template <> struct BdLimits<double> {
  static constexpr double unit_roundoff = 1.1102230246251565e-16;  // 2^-53
  static constexpr double tiny = 2.2250738585072014e-308;          // DBL_MIN
};

// (c, s, r) with [c s; -s c] [f; g] = [r; 0], r = hypot(f, g) >= 0; (1, 0, 0) for f = g = 0.
template <typename R> __device__ __forceinline__ void bd_lartg(R f, R g, R& c, R& s, R& r) {
  r = bd_hypot(f, g);
  if (r == R(0)) {
    c = R(1);
    s = R(0);
  } else {
    c = f / r;
    s = g / r;
  }
}

// Smaller singular value of [[f, g], [0, h]] without overflow, from
// s_max + s_min = hypot(|f| + |h|, g), s_max - s_min = hypot(|f| - |h|, g), s_min s_max = |f h|.
template <typename R> __device__ R bd_sv2_min(R f, R g, R h) {
  const R fa = bd_abs(f), ga = bd_abs(g), ha = bd_abs(h);
  const R lo = bd_min(fa, ha), hi = bd_max(fa, ha);
  if (lo == R(0)) return R(0);
  const R p = R(1) + lo / hi, q = (hi - lo) / hi;
  if (ga < hi) {
    const R r = ga / hi, r2 = r * r;
    return lo * R(2) / (bd_sqrt(p * p + r2) + bd_sqrt(q * q + r2));
  }
  const R w = hi / ga;
  if (w == R(0)) return (lo * hi) / ga;
  return R(2) * lo * w / (bd_sqrt(R(1) + (p * w) * (p * w)) + bd_sqrt(R(1) + (q * w) * (q * w)));
}

enum BdsqrAction : int { BDSQR_DONE = 0, BDSQR_SWEEP_DOWN = 1, BDSQR_SWEEP_UP = 2 };

template <typename R> struct BdsqrState {
  int k, m, oldll, oldm, idir;
  int exponent;  // d, e were scaled by 2^-exponent (max entry in [1/2, 1)); bdsqr_finish undoes it
  long long iter, maxit;
  R tol, thresh, eps;
};

// Check d, e (finite), scale them exactly by a power of two so that the largest
// entry is in [1/2, 1) (the absolute threshold's floor maxitr k^2 tiny and the
// rotations then never meet underflow or overflow), and set the tolerances.
// False for NaN/Inf anywhere (d, e then unscaled).
template <typename R, class V> __device__ bool bdsqr_begin(V d, V e, int k, int maxitr, BdsqrState<R>& st) {
  bool finite = true;
  R big = R(0);
  for (int j = 0; j < k; ++j) {
    finite = finite && bd_finite(d[j]);
    big = bd_max(big, bd_abs(d[j]));
  }
  for (int j = 0; j + 1 < k; ++j) {
    finite = finite && bd_finite(e[j]);
    big = bd_max(big, bd_abs(e[j]));
  }
  st.exponent = finite && big > R(0) ? bd_exponent(big) : 0;
  if (st.exponent != 0) {
    for (int j = 0; j < k; ++j) d[j] = bd_ldexp(d[j], -st.exponent);
    for (int j = 0; j + 1 < k; ++j) e[j] = bd_ldexp(e[j], -st.exponent);
  }
  const double eps = BdLimits<R>::unit_roundoff;
  const double tolmul = fmax(10.0, fmin(100.0, pow(eps, -0.125)));
  st.k = k;
  st.m = k - 1;
  st.oldll = -1;
  st.oldm = -1;
  st.idir = 0;
  st.iter = 0;
  st.maxit = (long long)maxitr * k * k;
  st.tol = R(tolmul * eps);
  st.eps = R(eps);
  st.thresh = R(0);
  return finite;
}

// Rotate a lower bidiagonal to upper from the left; the rotation of the pair
// (i, i+1) is recorded at lc[i], ls[i] when RECORD (it goes to u's columns).
template <bool RECORD, typename R, class V> __device__ void bdsqr_lower_to_upper(V d, V e, int k, R* lc, R* ls) {
  for (int i = 0; i + 1 < k; ++i) {
    R c, s, r;
    bd_lartg(d[i], e[i], c, s, r);
    d[i] = r;
    e[i] = s * d[i + 1];
    d[i + 1] = c * d[i + 1];
    if (RECORD) {
      lc[i] = c;
      ls[i] = s;
    }
  }
}

// The absolute threshold from the estimate of the smallest singular value.
template <typename R, class V> __device__ void bdsqr_threshold(V d, V e, int maxitr, BdsqrState<R>& st) {
  const int k = st.k;
  R mu = bd_abs(d[0]), sminoa = mu;
  for (int i = 1; i < k; ++i) {
    if (mu != R(0)) mu = bd_abs(d[i]) * (mu / (mu + bd_abs(e[i - 1])));
    sminoa = bd_min(sminoa, mu);
  }
  sminoa = sminoa / bd_sqrt(R(k));
  st.thresh = bd_max(st.tol * sminoa, R(maxitr) * (R(k) * (R(k) * BdLimits<R>::tiny)));
}

// One QR sweep over [ll, m].  Records (RECORD) the left rotation of the pair p at
// lc[p], ls[p] and the right one at rc[p], rs[p], in the convention
// x_p <- c x_p + s x_{p+1}, x_{p+1} <- -s x_p + c x_{p+1}.
template <bool RECORD, typename R, class V>
__device__ void bdsqr_sweep(V d, V e, int ll, int m, bool down, R shift, R* lc, R* ls, R* rc, R* rs) {
  if (shift == R(0)) {  // Demmel-Kahan's zero-shift sweep
    R cs = R(1), oldcs = R(1), oldsn = R(0);
    if (down) {
      for (int i = ll; i < m; ++i) {
        R sn, r, dn;
        bd_lartg(d[i] * cs, e[i], cs, sn, r);
        if (i > ll) e[i - 1] = oldsn * r;
        bd_lartg(oldcs * r, d[i + 1] * sn, oldcs, oldsn, dn);
        d[i] = dn;
        if (RECORD) {
          lc[i] = oldcs; ls[i] = oldsn;
          rc[i] = cs; rs[i] = sn;
        }
      }
      const R h = d[m] * cs;
      d[m] = h * oldcs;
      e[m - 1] = h * oldsn;
    } else {
      for (int i = m; i > ll; --i) {
        R sn, r, dn;
        bd_lartg(d[i] * cs, e[i - 1], cs, sn, r);
        if (i < m) e[i] = oldsn * r;
        bd_lartg(oldcs * r, d[i - 1] * sn, oldcs, oldsn, dn);
        d[i] = dn;
        if (RECORD) {
          lc[i - 1] = cs; ls[i - 1] = -sn;
          rc[i - 1] = oldcs; rs[i - 1] = -oldsn;
        }
      }
      const R h = d[ll] * cs;
      d[ll] = h * oldcs;
      e[ll] = h * oldsn;
    }
    return;
  }
  // the shifted sweep, started from (d_start^2 - shift^2) / d_start and the next superdiagonal
  const int start = down ? ll : m;
  const R ds = d[start];
  R f = (bd_abs(ds) - shift) * ((ds >= R(0) ? R(1) : R(-1)) + shift / ds);
  R g = down ? e[ll] : e[m - 1];
  for (int t = 0; t < m - ll; ++t) {
    const int i = down ? ll + t : m - t;
    const int nb = down ? i + 1 : i - 1;  // the other diagonal of the pair
    const int ei = down ? i : i - 1;      // the superdiagonal between them
    R cr, sr, cl, sl, r;
    bd_lartg(f, g, cr, sr, r);
    if (t > 0) e[down ? i - 1 : i] = r;
    const R di = d[i];
    R en = e[ei], dnb = d[nb];
    const R f1 = cr * di + sr * en;
    en = cr * en - sr * di;
    const R g1 = sr * dnb;
    dnb = cr * dnb;
    bd_lartg(f1, g1, cl, sl, r);
    d[i] = r;
    e[ei] = en;
    d[nb] = cl * dnb - sl * en;
    f = cl * en + sl * dnb;
    if (down ? (i < m - 1) : (i > ll + 1)) {
      const int nxt = down ? i + 1 : i - 2;  // the next superdiagonal out
      const R en2 = e[nxt];
      g = sl * en2;
      e[nxt] = cl * en2;
    }
    if (RECORD) {
      const int p = down ? i : i - 1;
      if (down) {
        lc[p] = cl; ls[p] = sl;
        rc[p] = cr; rs[p] = sr;
      } else {
        lc[p] = cr; ls[p] = -sr;
        rc[p] = cl; rs[p] = -sl;
      }
    }
  }
  e[down ? m - 1 : ll] = f;
}

// Run the main loop until the next sweep (returns its direction, with the
// block in [lo, hi]: pairs lo .. hi-1 rotated) or the end (BDSQR_DONE, info set).
template <bool RECORD, typename R, class V>
__device__ int bdsqr_step(V d, V e, BdsqrState<R>& st, R* lc, R* ls, R* rc, R* rs, int& lo, int& hi, int& info) {
  const int k = st.k;
  const R tol = st.tol;
  for (;;) {
    const int m = st.m;
    if (m <= 0) {
      info = 0;
      return BDSQR_DONE;
    }
    if (st.iter > st.maxit) {
      int nonzero = 0;
      for (int j = 0; j + 1 < k; ++j) nonzero += e[j] != R(0);
      info = nonzero;
      return BDSQR_DONE;
    }
    // split at the lowest negligible superdiagonal above m (absolute threshold)
    int ll = 0;
    for (int j = m - 1; j >= 0; --j) {
      if (bd_abs(e[j]) <= st.thresh) {
        e[j] = R(0);
        ll = j + 1;
        break;
      }
    }
    if (ll == m) {  // d[m] converged
      st.m = m - 1;
      continue;
    }
    const R dll = bd_abs(d[ll]), dmm = bd_abs(d[m]);
    if (ll > st.oldm || m < st.oldll) st.idir = dll >= dmm ? 1 : 2;  // a new block
    const bool down = st.idir == 1;
    // relative convergence test at the far end
    if (down) {
      if (bd_abs(e[m - 1]) <= tol * dmm) {
        e[m - 1] = R(0);
        continue;
      }
    } else if (bd_abs(e[ll]) <= tol * dll) {
      e[ll] = R(0);
      continue;
    }
    // the mu recurrence from the near end: the first relatively negligible e
    R mu = down ? dll : dmm, sminl = mu;
    bool hit = false;
    for (int t = 0; t < m - ll; ++t) {
      const int j = down ? ll + t : m - 1 - t;
      const R ej = bd_abs(e[j]);
      if (ej <= tol * mu) {
        e[j] = R(0);
        hit = true;
        break;
      }
      mu = bd_abs(d[down ? j + 1 : j]) * (mu / (mu + ej));
      sminl = bd_min(sminl, mu);
    }
    if (hit) continue;
    st.oldll = ll;
    st.oldm = m;
    // the shift: zero when it would spoil relative accuracy or is negligible
    R smax = R(0);
    for (int j = ll; j <= m; ++j) smax = bd_max(smax, bd_abs(d[j]));
    for (int j = ll; j < m; ++j) smax = bd_max(smax, bd_abs(e[j]));
    R shift = R(0);
    const R ratio = sminl / (smax == R(0) ? R(1) : smax);
    if (!(R(k) * tol * ratio <= bd_max(st.eps, R(0.01) * tol))) {
      const int i1 = down ? m - 1 : ll;
      shift = bd_sv2_min(d[i1], e[i1], d[i1 + 1]);
      const R sll = down ? dll : dmm;
      if (sll > R(0)) {
        const R q = shift / sll;
        if (q * q < st.eps) shift = R(0);
      }
    }
    st.iter += m - ll;
    bdsqr_sweep<RECORD>(d, e, ll, m, down, shift, lc, ls, rc, rs);
    const int far = down ? m - 1 : ll;
    if (bd_abs(e[far]) <= st.thresh) e[far] = R(0);
    lo = ll;
    hi = m;
    return down ? BDSQR_SWEEP_DOWN : BDSQR_SWEEP_UP;
  }
}

// Undo bdsqr_begin's scaling, make the values non-negative (flip[i] = 1 where
// d[i] was negative: vt's row i changes sign) and sort them descending by
// selection: swaps[i] = the index exchanged with i at step i (i itself for
// none), applied in order i = 0 .. k-2.
template <bool RECORD, typename R, class V>
__device__ void bdsqr_finish(V d, int k, int exponent, int* flip, int* swaps) {
  for (int i = 0; i < k; ++i) {
    const R v = d[i];
    if (RECORD) flip[i] = v < R(0);
    d[i] = bd_ldexp(bd_abs(v), exponent);
  }
  for (int i = 0; i + 1 < k; ++i) {
    int j = i;
    R best = d[i];
    for (int t = i + 1; t < k; ++t) {
      if (d[t] > best) {
        best = d[t];
        j = t;
      }
    }
    if (j != i) {
      d[j] = d[i];
      d[i] = best;
    }
    if (RECORD) swaps[i] = j;
  }
}

// cp * x + sp * y as fma(cp, x, sp * y) (per component for complex x, y): one rounding
// of its own, whatever way the compiler unrolls the callers below (left to itself it
// contracts a * b + c * d either way round, which changed the last bits between the
// WIDE and the pair-at-a-time kernels of bdsqr.cu).
template <typename R> __device__ __forceinline__ R bd_rot_sum(R cp, R x, R sp, R y) { return fma(cp, x, sp * y); }
template <typename R>
__device__ __forceinline__ complex<R> bd_rot_sum(R cp, complex<R> x, R sp, complex<R> y) {
  return complex<R>(fma(cp, x.real(), sp * y.real()), fma(cp, x.imag(), sp * y.imag()));
}

// Apply the recorded rotations of pairs lo .. hi-1 (in sweep order: increasing
// for `forward`, else decreasing) to `ns` <= NS streams at once: rows of u or
// columns of vt, stream t's entry p at x[t * sstride + p * inc].  Each entry is
// read and written once (a value carried from pair to pair).  The entries of CH
// pairs of every stream are loaded before any of them is used: each load waited
// for its own memory latency when a stream took a pair at a time (the compiler
// may not move a load above the previous store through the same pointer with a
// run-time stride), and a sweep of a 128 x 128 matrix's u and vt waited for
// about 1,000 of them in a row (H100: svd 128 x 128 float64, 256 matrices,
// BDSQR with vectors 56.7 ms against 17.8 for the values).  Each entry's arithmetic
// is fixed (bd_rot_sum), so the results are the same to the bit for any NS and CH.
template <int NS, int CH, typename T, typename R>
__device__ void bdsqr_rotate_streams(T* x, long long sstride, int ns, long long inc, int lo, int hi,
                                     bool forward, const R* c, const R* s) {
  T carry[NS], v[NS][CH];
  if (forward) {
#pragma unroll
    for (int t = 0; t < NS; ++t)
      if (t < ns) carry[t] = x[t * sstride + lo * inc];
    for (int p = lo; p < hi; p += CH) {  // pairs p .. p + CH - 1: entries p + 1 .. p + CH
#pragma unroll
      for (int t = 0; t < NS; ++t)
#pragma unroll
        for (int q = 0; q < CH; ++q)
          if (t < ns && p + q < hi) v[t][q] = x[t * sstride + (long long)(p + 1 + q) * inc];
#pragma unroll
      for (int q = 0; q < CH; ++q) {
        if (p + q >= hi) break;  // uniform over the lanes
        const R cp = c[p + q], sp = s[p + q];
#pragma unroll
        for (int t = 0; t < NS; ++t)
          if (t < ns) {
            x[t * sstride + (long long)(p + q) * inc] = bd_rot_sum(cp, carry[t], sp, v[t][q]);
            carry[t] = bd_rot_sum(cp, v[t][q], -sp, carry[t]);
          }
      }
    }
#pragma unroll
    for (int t = 0; t < NS; ++t)
      if (t < ns) x[t * sstride + (long long)hi * inc] = carry[t];
  } else {
#pragma unroll
    for (int t = 0; t < NS; ++t)
      if (t < ns) carry[t] = x[t * sstride + (long long)hi * inc];
    for (int p = hi - 1; p >= lo; p -= CH) {  // pairs p .. p - CH + 1: entries p .. p - CH + 1
#pragma unroll
      for (int t = 0; t < NS; ++t)
#pragma unroll
        for (int q = 0; q < CH; ++q)
          if (t < ns && p - q >= lo) v[t][q] = x[t * sstride + (long long)(p - q) * inc];
#pragma unroll
      for (int q = 0; q < CH; ++q) {
        if (p - q < lo) break;  // uniform over the lanes
        const R cp = c[p - q], sp = s[p - q];
#pragma unroll
        for (int t = 0; t < NS; ++t)
          if (t < ns) {
            x[t * sstride + (long long)(p - q + 1) * inc] = bd_rot_sum(cp, carry[t], -sp, v[t][q]);
            carry[t] = bd_rot_sum(cp, v[t][q], sp, carry[t]);
          }
      }
    }
#pragma unroll
    for (int t = 0; t < NS; ++t)
      if (t < ns) x[t * sstride + (long long)lo * inc] = carry[t];
  }
}

}  // namespace bdf
