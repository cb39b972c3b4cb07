// common.cuh: scalar types, conjugation, warp shuffles and thread groups shared
// by every device function in this folder.
#pragma once
#include <cupy/complex.cuh>

namespace bdf {

// Matrix operations, as the launchers pass them: op(X) is X, X^T, X^H or
// conj(X).  OP_R (conjugate without transpose) appears when a row-major
// operand is read as the transpose of a column-major one under 'C'.
enum Op : int { OP_N = 0, OP_T = 1, OP_C = 2, OP_R = 3 };
__host__ __device__ constexpr bool op_transposes(int op) { return op == OP_T || op == OP_C; }
__host__ __device__ constexpr bool op_conjugates(int op) { return op == OP_C || op == OP_R; }

// Is T one of CuPy's complex types?
template <typename T> constexpr bool is_complex_v = false;
template <typename R> constexpr bool is_complex_v<complex<R>> = true;

template <typename T> __device__ __forceinline__ T conj_if(T a, bool) { return a; }
template <typename R>
__device__ __forceinline__ complex<R> conj_if(complex<R> a, bool c) { return c ? conj(a) : a; }

// c ? a : b, component by component for complex: a conditional between two complex
// lvalues may select an address, which moves register arrays to local memory.
template <typename T> __device__ __forceinline__ T select(bool c, T a, T b) { return c ? a : b; }
template <typename R> __device__ __forceinline__ complex<R> select(bool c, complex<R> a, complex<R> b) {
  return complex<R>(c ? a.real() : b.real(), c ? a.imag() : b.imag());
}

// The warps designs' register layout (LU's getf2_warps, Cholesky's potrf_warps): a block of
// W warps holds a matrix of NB = 32 R rows, a[c][r] = element (i + 32 r, w + W c) for lane
// i of warp w, loaded here from its column-major copy S (leading dimension lds) in shared
// memory, which the caller has made visible (a barrier).
template <int W, typename T, int C, int R>
__device__ __forceinline__ void warps_load(T (&a)[C][R], const T* S, int lds) {
  const int lane = int(threadIdx.x & 31u), w = int(threadIdx.x / 32);
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int r = 0; r < R; ++r) a[c][r] = S[lane + 32 * r + (w + W * c) * lds];
}

// x / z; for complex z by Smith's algorithm: no |z|^2 (which overflows) and no
// 1 / z (subnormal, so short of digits, for |z| > 2^126 in single precision).
template <typename T> __device__ __forceinline__ T safe_divide(T x, T z) { return x / z; }
template <typename R> __device__ __forceinline__ complex<R> safe_divide(complex<R> x, complex<R> z) {
  const R a = z.real(), b = z.imag(), xr = x.real(), xi = x.imag();
  if (fabs(b) <= fabs(a)) {
    const R r = b / a, d = a + b * r;
    return complex<R>((xr + xi * r) / d, (xi - xr * r) / d);
  }
  const R r = a / b, d = b + a * r;
  return complex<R>((xr * r + xi) / d, (xi * r - xr) / d);
}

template <typename T> __device__ __forceinline__ T shfl_xor(T v, int lane_mask, unsigned mask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
template <typename R>
__device__ __forceinline__ complex<R> shfl_xor(complex<R> v, int lane_mask, unsigned mask) {
  return complex<R>(__shfl_xor_sync(mask, v.real(), lane_mask),
                    __shfl_xor_sync(mask, v.imag(), lane_mask));
}
// v of lane `src` of the warp.
template <typename T> __device__ __forceinline__ T shfl_idx(T v, int src, unsigned mask) {
  return __shfl_sync(mask, v, src);
}
template <typename R> __device__ __forceinline__ complex<R> shfl_idx(complex<R> v, int src, unsigned mask) {
  return complex<R>(__shfl_sync(mask, v.real(), src), __shfl_sync(mask, v.imag(), src));
}

// N consecutive elements of T (a run: one thread's packed matrix or vector) between
// memory and a register array, in vector accesses of min(16, N sizeof(T)) bytes (the
// run's address must be aligned to that; N sizeof(T) is a power of two times it).  The
// indices are compile-time constants after unrolling, so r stays in registers.
template <int N, typename T> struct RunPiece {
  static constexpr int BYTES = N * int(sizeof(T)) < 16 ? N * int(sizeof(T)) : 16;
  static constexpr int W = BYTES / int(sizeof(T));  // elements per access
  static_assert(W >= 1 && N % W == 0, "whole pieces");
  struct alignas(BYTES) Piece { T v[W]; };
};
template <int N, typename T> __device__ __forceinline__ void load_run(T (&r)[N], const T* p) {
  using P = RunPiece<N, T>;
#pragma unroll
  for (int k = 0; k < N / P::W; ++k) {
    const typename P::Piece q = reinterpret_cast<const typename P::Piece*>(p)[k];
#pragma unroll
    for (int e = 0; e < P::W; ++e) r[k * P::W + e] = q.v[e];
  }
}
template <int N, typename T> __device__ __forceinline__ void store_run(T* p, const T (&r)[N]) {
  using P = RunPiece<N, T>;
#pragma unroll
  for (int k = 0; k < N / P::W; ++k) {
    typename P::Piece q;
#pragma unroll
    for (int e = 0; e < P::W; ++e) q.v[e] = r[k * P::W + e];
    reinterpret_cast<typename P::Piece*>(p)[k] = q;
  }
}
// Is p aligned for load_run / store_run of N elements?
template <int N, typename T> __device__ __forceinline__ bool run_aligned(const void* p) {
  return reinterpret_cast<unsigned long long>(p) % RunPiece<N, T>::BYTES == 0;
}
// N elements of T at p, inc apart: load_run / store_run when `run` (the caller has
// checked inc = 1 and run_aligned), else element by element.
template <int N, typename T>
__device__ __forceinline__ void load_strided(T (&r)[N], const T* p, long long inc, bool run) {
  if (run) {
    load_run<N>(r, p);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = p[i * inc];
}
template <int N, typename T>
__device__ __forceinline__ void store_strided(T* p, long long inc, const T (&r)[N], bool run) {
  if (run) {
    store_run<N>(p, r);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) p[i * inc] = r[i];
}

// SIZE consecutive threads of a 1-D block that work on one matrix.
// SIZE <= 32: a power of two inside one warp; barriers are __syncwarp on its lanes,
//             so several groups (and several matrices) share a block.
// SIZE > 32:  the group is the whole block; barriers are __syncthreads.
template <int SIZE> struct ThreadGroup {
  static_assert(SIZE > 32 || (SIZE & (SIZE - 1)) == 0, "a sub-warp group must be a power of two");
  static constexpr int size = SIZE;
  int rank;  // 0 .. SIZE-1
  __device__ explicit ThreadGroup(int r) : rank(r) {}
  __device__ __forceinline__ unsigned lanes() const {
    if constexpr (SIZE >= 32) {
      return 0xffffffffu;
    } else {
      const unsigned lane = threadIdx.x & 31u;
      return ((1u << SIZE) - 1u) << (lane & ~unsigned(SIZE - 1));
    }
  }
  __device__ __forceinline__ void sync() const {
    if (SIZE > 32) __syncthreads(); else __syncwarp(lanes());
  }
};

// f(i, j) for each element of an m x n block that `g`'s rank owns when the
// elements are dealt out in column-major order, element i + j m to rank
// (i + j m) % G: the order of `for (e = rank; e < m n; e += G)`, with one division
// at the start instead of one per element.
template <int G, class F>
__device__ __forceinline__ void for_each_element(ThreadGroup<G> g, int m, int n, F f) {
  if (m <= 0) return;
  const int dj = G / m, di = G - dj * m;
  int j = g.rank / m, i = g.rank - j * m;
  while (j < n) {
    f(i, j);
    i += di;
    j += dj;
    if (i >= m) {
      i -= m;
      ++j;
    }
  }
}

// Sum of v over the lanes rank % STRIDE_SPAN ... of a group: a butterfly over
// lane distances FIRST, 2*FIRST, ..., FIRST*(COUNT/2) (COUNT a power of two,
// FIRST*COUNT <= 32).  Every lane ends with the sum.
template <int FIRST, int COUNT, typename T>
__device__ __forceinline__ T butterfly_sum(T v, unsigned mask) {
#pragma unroll
  for (int d = FIRST * (COUNT / 2); d >= FIRST; d /= 2) v += shfl_xor(v, d, mask);
  return v;
}

// One stage of warp_transpose32 at lane distance H (then H / 2, ..): lanes l and l ^ H
// swap the entries whose index differs from the lane in bit H.  A template recursion,
// so that every index into v is a constant (a loop over the stages, h /= 2, was left
// rolled in a first version, v[k + h] indexed at run time and v put on the stack).
template <int H, typename T> __device__ __forceinline__ void transpose_stage(T (&v)[32], int lane) {
  if constexpr (H >= 1) {
    const bool high = lane & H;
#pragma unroll
    for (int k = 0; k < 32; ++k) {
      if (k & H) continue;
      const T recv = shfl_xor(high ? v[k] : v[k + H], H, 0xffffffffu);
      v[k] = high ? recv : v[k];
      v[k + H] = high ? v[k + H] : recv;
    }
    transpose_stage<H / 2, T>(v, lane);
  }
}

// Transpose a 32 x 32 tile held a row a lane (v[c] = M(lane, c)) into a column a lane
// (v[r] = M(r, lane)), and back: 5 stages of 16 exchanges.  The pipelined TRSV's
// diagonal tile for a transposing op: loaded coalesced a column a lane, solved a row a lane.
template <typename T> __device__ __forceinline__ void warp_transpose32(T (&v)[32], int lane) {
  transpose_stage<16, T>(v, lane);
}

}  // namespace bdf
