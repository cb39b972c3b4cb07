// vector.cuh: BLAS-1 functions for ONE vector, computed by one thread group:
// nrm2, dot/dotc, asum, iamax (reductions) and scal, axpy (element-wise).
//
// Threads:  a ThreadGroup<G>; every thread of the group calls the function with the
//           same arguments.  Element i of a vector is at x[i * incx]; consecutive
//           ranks take consecutive elements, so a warp reads contiguous runs.
// Shared:   a reduction with G > 32 needs `work` of vector_work_bytes(G) bytes
//           (the per-warp partials); otherwise `work` may be null.  Contents
//           undefined on exit.
// Sync:     reductions with G > 32 begin with a barrier (a previous call may still
//           read `work`) and use two more; element-wise functions use none.
// Memory:   inputs read-only; x and y are not read when n is 0.  Reductions return
//           the result to every thread of the group.
// Failure:  none; NaN/Inf propagate (nrm2 as LAPACK's xNRM2, iamax: a NaN counts
//           as the largest value, its first occurrence wins, as numpy.argmax).
#pragma once
#include "common.cuh"

namespace bdf {

template <typename T> struct real_of { using type = T; };
template <typename R> struct real_of<complex<R>> { using type = R; };

// Bytes of `work` a reduction by `group` threads may use: 48 per warp (nrm2's pair of
// partial sums, iamax's (value, index) pair and dot's complex<double> take 16 of them;
// the planners in Python count the same 48).
__host__ __device__ constexpr int vector_work_bytes(int group) { return group > 32 ? (group / 32) * 48 : 0; }

template <typename T> __device__ __forceinline__ T real_part(T a) { return a; }
template <typename R> __device__ __forceinline__ R real_part(complex<R> a) { return a.real(); }
template <typename T> __device__ __forceinline__ T imag_part(T) { return T(0); }
template <typename R> __device__ __forceinline__ R imag_part(complex<R> a) { return a.imag(); }

// |re| + |im|: BLAS's measure in asum and iamax.
template <typename T> __device__ __forceinline__ typename real_of<T>::type abs1(T a) {
  if constexpr (is_complex_v<T>) return fabs(a.real()) + fabs(a.imag());
  else return fabs(a);
}

// Sum of v over the group (the same total in every thread).
template <int G, typename V>
__device__ V group_sum(ThreadGroup<G> g, V v, V* work) {
  v = butterfly_sum<1, (G < 32 ? G : 32)>(v, g.lanes());
  if (G > 32) {
    g.sync();
    if ((g.rank & 31) == 0) work[g.rank / 32] = v;
    g.sync();
    v = work[0];
    for (int w = 1; w < G / 32; ++w) v += work[w];
  }
  return v;
}

// body(load(i)) for i = rank, rank + G, .. < n, U entries a thread at a time: the U
// loads of a chunk issue together, entries past n taking a zero value (V{}), so a
// partial last chunk costs one memory round trip, not one per entry.  (A loop
// unrolled by the compiler ran its remainder an entry at a time: DNRM2 of 10^6
// vectors of 1,000 spent 7 of its 10 round trips there.)  The bodies see the chunk's
// entries in index order.
template <int U, int G, class Load, class Body>
__device__ __forceinline__ void chunked(ThreadGroup<G> g, int n, Load load, Body body) {
  using V = decltype(load(0));
  for (int i0 = g.rank; i0 < n; i0 += U * G) {
    V v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i0 + u * G < n ? load(i0 + u * G) : V{};
#pragma unroll
    for (int u = 0; u < U; ++u) body(v[u]);
  }
}

// The scaling constants of LAPACK's xNRM2 (Anderson, "Algorithm 978: Safe scaling
// in the Level 1 BLAS", 2017; LAPACK la_constants): squares of values in
// [tsml, tbig] neither overflow nor underflow; the others are scaled by ssml/sbig.
template <typename R> struct BlueConstants;
template <> struct BlueConstants<double> {
  static constexpr double tsml = 0x1p-511, tbig = 0x1p486, ssml = 0x1p537, sbig = 0x1p-538;
};
template <> struct BlueConstants<float> {
  static constexpr float tsml = 0x1p-63f, tbig = 0x1p52f, ssml = 0x1p75f, sbig = 0x1p-76f;
};

// The three accumulators of Blue's algorithm for one real entry.
template <typename R> __device__ __forceinline__ void blue_add(R v, R& big, R& med, R& sml) {
  using C = BlueConstants<R>;
  const R ax = fabs(v);
  if (ax > C::tbig) { const R s = ax * C::sbig; big += s * s; }
  else if (ax < C::tsml) { const R s = ax * C::ssml; sml += s * s; }
  else med += ax * ax;  // NaN lands here and propagates
}

// LAPACK's xNRM2 combination of the three sums.
template <typename R> __device__ R blue_combine(R big, R med, R sml) {
  using C = BlueConstants<R>;
  const bool med_counts = med > R(0) || med != med;
  if (big > R(0)) {
    if (med_counts) big += (med * C::sbig) * C::sbig;
    return sqrt(big) / C::sbig;
  }
  if (sml > R(0)) {
    if (!med_counts) return sqrt(sml) / C::ssml;
    const R a = sqrt(med), b = sqrt(sml) / C::ssml;
    const R ymax = b > a ? b : a, ymin = b > a ? a : b;
    const R q = ymin / ymax;
    return ymax * sqrt(R(1) + q * q);
  }
  return sqrt(med);
}

// Two sums reduced together: one exchange (one pair of barriers) instead of two.
template <typename R> struct SumPair {
  R a, b;
  __device__ __forceinline__ SumPair& operator+=(const SumPair& o) {
    a += o.a;
    b += o.b;
    return *this;
  }
};
template <typename R>
__device__ __forceinline__ SumPair<R> shfl_xor(SumPair<R> v, int lane_mask, unsigned mask) {
  return {shfl_xor(v.a, lane_mask, mask), shfl_xor(v.b, lane_mask, mask)};
}

// One entry of nrm2's first pass: the plain sum of squares, and whether the entry lies
// outside [tsml, tbig] (zero and NaN do not: zero adds nothing in any accumulator, NaN
// propagates through the sum).  Branch-free, so that the loop's loads issue ahead.
template <typename R> __device__ __forceinline__ void square_add(R v, R& sum, bool& outside) {
  using C = BlueConstants<R>;
  const R ax = fabs(v);
  sum = fma(v, v, sum);
  outside |= ax > C::tbig || (ax < C::tsml && ax != R(0));
}

// bdf::nrm2: sqrt(sum |x_i|^2), overflow- and underflow-safe like LAPACK's xNRM2.
// The first pass sums the squares as they are; a thread that met an entry outside
// [tsml, tbig] contributes -Inf instead, so one reduction tells the usual case (a
// finite total: exactly Blue's mid-range sum, which cannot overflow or underflow
// there) from the rest: NaN (some entry was NaN, and LAPACK's result is NaN whatever
// else the vector holds) or -Inf.  Only then a second pass runs Blue's three
// accumulators (blue_add) and combines them as LAPACK does.  The first pass loads
// eight entries a thread at a time (chunked; four complex<double>).  Measured on an H100, 10^6 vectors of 1,000
// doubles: one pass with Blue's branches per entry kept one load in flight a thread
// (2.1 TB/s, 0.65x cupy.linalg.norm); branch-free but unrolled by the compiler, whose
// remainder loop ran an entry at a time, 2.4 TB/s; in chunks of eight, 3.1 TB/s.
// CHUNK: entries a thread loads at a time (0: eight, four for complex<double>);
// callers inside larger kernels (larfg) pass 1 to keep their registers.
template <int G, int CHUNK = 0, typename T>
__device__ typename real_of<T>::type nrm2(ThreadGroup<G> g, int n, const T* x, long long incx,
                                          unsigned char* work) {
  using R = typename real_of<T>::type;
  constexpr int U = CHUNK > 0 ? CHUNK : sizeof(T) >= 16 ? 4 : 8;
  R sum = 0;
  bool outside = false;
  auto add = [&](T v) {
    square_add(real_part(v), sum, outside);
    if constexpr (is_complex_v<T>) square_add(imag_part(v), sum, outside);
  };
  constexpr int W = 16 / int(sizeof(T));  // elements of a 16-byte piece
  using Piece = typename RunPiece<W, T>::Piece;
  if (CHUNK == 0 && W > 1 && incx == 1) {
    // A contiguous vector in 16-byte pieces, four a lane at a time (as many bytes in
    // flight as eight single loads of double, four times those of float), the
    // elements before the first 16-byte boundary and after the last one apart.
    const int head = min(n, int((16 - reinterpret_cast<unsigned long long>(x) % 16) % 16 / sizeof(T)));
    const int pieces = (n - head) / W, tail = head + pieces * W;
    if (g.rank < head) add(x[g.rank]);
    const Piece* p = reinterpret_cast<const Piece*>(x + head);
    chunked<4>(g, pieces, [&](int i) { return p[i]; }, [&](const Piece& v) {
#pragma unroll
      for (int e = 0; e < W; ++e) add(v.v[e]);
    });
    for (int i = tail + g.rank; i < n; i += G) add(x[i]);
  } else {
    chunked<U>(g, n, [&](int i) { return x[i * incx]; }, add);
  }
  const R minus_inf = -R(1) / R(0);
  const R total = group_sum(g, outside ? minus_inf : sum, reinterpret_cast<R*>(work));
  if (total == total && total != minus_inf) return sqrt(total);
  if (total != total) return total;  // NaN
  R big = 0, med = 0, sml = 0;
  for (int i = g.rank; i < n; i += G) {
    const T v = x[i * incx];
    blue_add(real_part(v), big, med, sml);
    if constexpr (is_complex_v<T>) blue_add(imag_part(v), big, med, sml);
  }
  auto* w = reinterpret_cast<SumPair<R>*>(work);
  const SumPair<R> mids = group_sum(g, SumPair<R>{med, big}, w);
  const R small = group_sum(g, sml, reinterpret_cast<R*>(work));
  return blue_combine(mids.b, mids.a, small);
}

// bdf::dot: sum op(x_i) y_i with op = conj when `conj` (dotc), identity otherwise.
template <int G, typename T>
__device__ T dot(ThreadGroup<G> g, int n, const T* x, long long incx, const T* y, long long incy,
                 bool conj, unsigned char* work) {
  T acc = T(0);
#pragma unroll 4
  for (int i = g.rank; i < n; i += G) acc += conj_if(x[i * incx], conj) * y[i * incy];
  return group_sum(g, acc, reinterpret_cast<T*>(work));
}

// bdf::asum: sum |re x_i| + |im x_i| (BLAS's measure, not the modulus).
template <int G, typename T>
__device__ typename real_of<T>::type asum(ThreadGroup<G> g, int n, const T* x, long long incx,
                                          unsigned char* work) {
  using R = typename real_of<T>::type;
  R acc = 0;
#pragma unroll 4
  for (int i = g.rank; i < n; i += G) acc += abs1(x[i * incx]);
  return group_sum(g, acc, reinterpret_cast<R*>(work));
}

// Is (va, ia) ahead of (vb, ib) for iamax: NaN first, then larger, then smaller index.
template <typename R> __device__ __forceinline__ bool iamax_ahead(R va, int ia, R vb, int ib) {
  const bool na = va != va, nb = vb != vb;
  if (na != nb) return na;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

// bdf::iamax: the 0-based index of the first largest |re| + |im|; -1 when n is 0.
template <int G, typename T>
__device__ int iamax(ThreadGroup<G> g, int n, const T* x, long long incx, unsigned char* work) {
  using R = typename real_of<T>::type;
  R best = R(-1);
  int at = 0x7fffffff;
  for (int i = g.rank; i < n; i += G) {
    const R v = abs1(x[i * incx]);
    if (iamax_ahead(v, i, best, at)) { best = v; at = i; }
  }
  const unsigned lanes = g.lanes();
#pragma unroll
  for (int d = (G < 32 ? G : 32) / 2; d >= 1; d /= 2) {
    const R ov = __shfl_xor_sync(lanes, best, d);
    const int oi = __shfl_xor_sync(lanes, at, d);
    if (iamax_ahead(ov, oi, best, at)) { best = ov; at = oi; }
  }
  if (G > 32) {
    R* wv = reinterpret_cast<R*>(work);
    int* wi = reinterpret_cast<int*>(work + (G / 32) * sizeof(double));
    g.sync();
    if ((g.rank & 31) == 0) { wv[g.rank / 32] = best; wi[g.rank / 32] = at; }
    g.sync();
    best = wv[0];
    at = wi[0];
    for (int w = 1; w < G / 32; ++w)
      if (iamax_ahead(wv[w], wi[w], best, at)) { best = wv[w]; at = wi[w]; }
  }
  return n > 0 ? at : -1;
}

// bdf::scal: out_i = alpha x_i.  bdf::axpy: out_i = alpha x_i + y_i.  out may be x or y
// (each element is read before it is written, by the same thread).
template <int G, typename T>
__device__ void scal(ThreadGroup<G> g, int n, T alpha, const T* x, long long incx, T* out, long long inco) {
#pragma unroll 4
  for (int i = g.rank; i < n; i += G) out[i * inco] = alpha * x[i * incx];
}

template <int G, typename T>
__device__ void axpy(ThreadGroup<G> g, int n, T alpha, const T* x, long long incx, const T* y,
                     long long incy, T* out, long long inco) {
#pragma unroll 4
  for (int i = g.rank; i < n; i += G) out[i * inco] = alpha * x[i * incx] + y[i * incy];
}

}  // namespace bdf
