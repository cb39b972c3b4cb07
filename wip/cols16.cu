// Prototype (scratch): GESV of packed row-major 16 x 16 matrices, a group of L lanes
// per matrix, lane k owning the column pieces k, k + L, .. (W columns a piece).  The
// owner of column j finds the pivot in its registers (no cross-lane search), the
// multipliers go to the group by shuffles, b rides replicated on every lane, the back
// solve sums partial products over the group.
template <typename T> struct alignas(16) P16 { T v[16 / sizeof(T)]; };

template <typename T> __device__ __forceinline__ T shfl(T v, int src) { return __shfl_sync(0xffffffffu, v, src); }

template <typename T, int L, int MINB>
__global__ void __launch_bounds__(128, MINB)
gesv16_cols(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ X, int* __restrict__ info,
            long long count) {
  constexpr int N = 16, W = 16 / int(sizeof(T)), C = N / L, PIECES = C / W;
  static_assert(C % W == 0, "whole pieces a lane");
  const int lane = threadIdx.x & 31, k = lane % L, base = lane - k;
  const T sfmin = sizeof(T) == 4 ? T(1.17549435e-38f) : T(2.2250738585072014e-308);
  for (long long w0 = ((long long)blockIdx.x * 128 + (threadIdx.x & ~31)) / L; w0 < count;
       w0 += (long long)gridDim.x * (128 / L)) {
    const long long b = w0 + lane / L;
    const bool active = b < count;
    T a[N][C];
    T y[N];
    if (active) {
      const T* src = A + b * (N * N);
#pragma unroll
      for (int r = 0; r < N; ++r)
#pragma unroll
        for (int q = 0; q < PIECES; ++q) {
          const P16<T> p = *reinterpret_cast<const P16<T>*>(src + r * N + q * L * W + k * W);
#pragma unroll
          for (int e = 0; e < W; ++e) a[r][q * W + e] = p.v[e];
        }
#pragma unroll
      for (int q = 0; q < N / W; ++q) {
        const P16<T> p = *reinterpret_cast<const P16<T>*>(B + b * N + q * W);
#pragma unroll
        for (int e = 0; e < W; ++e) y[q * W + e] = p.v[e];
      }
    } else {
#pragma unroll
      for (int r = 0; r < N; ++r) {
        y[r] = T(0);
#pragma unroll
        for (int c = 0; c < C; ++c) a[r][c] = T(r == c);
      }
    }
    int fail = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int o = (j / W) % L, cj = (j / (L * W)) * W + j % W;  // owner, its local column
      int p = j;
      if (k == o) {
        T best = fabs(a[j][cj]);
#pragma unroll
        for (int r = j + 1; r < N; ++r) {
          const T v = fabs(a[r][cj]);
          const bool take = v > best || (v != v && best == best);
          best = take ? v : best;
          p = take ? r : p;
        }
      }
      p = __shfl_sync(0xffffffffu, p, base + o);
      if (p != j) {
#pragma unroll
        for (int r = j + 1; r < N; ++r) {
          const bool s = r == p;
#pragma unroll
          for (int c = 0; c < C; ++c) {
            const T hi = a[j][c], lo = a[r][c];
            a[j][c] = s ? lo : hi;
            a[r][c] = s ? hi : lo;
          }
          const T hy = y[j], ly = y[r];
          y[j] = s ? ly : hy;
          y[r] = s ? hy : ly;
        }
      }
      T l[N];
      if (k == o) {
        const T pv = a[j][cj];
        if (pv == T(0)) {
          if (fail == 0) fail = j + 1;
#pragma unroll
          for (int r = j + 1; r < N; ++r) l[r] = T(0);
        } else if (fabs(pv) >= sfmin) {
          const T inv = T(1) / pv;
#pragma unroll
          for (int r = j + 1; r < N; ++r) l[r] = a[r][cj] * inv;
        } else {
#pragma unroll
          for (int r = j + 1; r < N; ++r) l[r] = a[r][cj] / pv;
        }
#pragma unroll
        for (int r = j + 1; r < N; ++r) a[r][cj] = l[r];
      }
#pragma unroll
      for (int r = j + 1; r < N; ++r) l[r] = shfl(l[r], base + o);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int gcol = (c / W) * (L * W) + k * W + c % W;
        if (gcol > j) {
#pragma unroll
          for (int r = j + 1; r < N; ++r) a[r][c] -= l[r] * a[j][c];
        }
      }
#pragma unroll
      for (int r = j + 1; r < N; ++r) y[r] -= l[r] * y[j];
    }
    // (the prototype's info: nonzero when any owner saw a zero pivot)
#pragma unroll
    for (int d = 1; d < L; d *= 2) fail |= __shfl_xor_sync(0xffffffffu, fail, d);
    // back solve: U x = y, partial sums of my columns
    T s[N], x[N];
#pragma unroll
    for (int r = 0; r < N; ++r) s[r] = T(0);
#pragma unroll
    for (int i = N - 1; i >= 0; --i) {
      T tot = s[i];
#pragma unroll
      for (int d = 1; d < L; d *= 2) tot += __shfl_xor_sync(0xffffffffu, tot, d);
      const int o = (i / W) % L, ci = (i / (L * W)) * W + i % W;
      T xi = T(0);
      if (k == o) xi = (y[i] - tot) / a[i][ci];
      xi = shfl(xi, base + o);
      x[i] = xi;
      if (k == o) {
#pragma unroll
        for (int r = 0; r < i; ++r) s[r] += a[r][ci] * xi;
      }
    }
    if (active) {
      if (fail) {
#pragma unroll
        for (int q = 0; q < N / W; ++q) {
          const P16<T> p = *reinterpret_cast<const P16<T>*>(B + b * N + q * W);
          *reinterpret_cast<P16<T>*>(X + b * N + q * W) = p;
        }
      } else {
#pragma unroll
        for (int q = 0; q < N / W; ++q) {
          if (q % L != k) continue;
          P16<T> p;
#pragma unroll
          for (int e = 0; e < W; ++e) p.v[e] = x[q * W + e];
          *reinterpret_cast<P16<T>*>(X + b * N + q * W) = p;
        }
      }
      if (k == 0) info[b] = fail;
    }
  }
}

template __global__ void gesv16_cols<float, 2, 2>(const float*, const float*, float*, int*, long long);
template __global__ void gesv16_cols<float, 4, 3>(const float*, const float*, float*, int*, long long);
template __global__ void gesv16_cols<double, 4, 2>(const double*, const double*, double*, int*, long long);
template __global__ void gesv16_cols<double, 8, 3>(const double*, const double*, double*, int*, long long);
template __global__ void gesv16_cols<double, 8, 2>(const double*, const double*, double*, int*, long long);
template __global__ void gesv16_cols<float, 4, 4>(const float*, const float*, float*, int*, long long);
