// Test kernels for device_functions/householder.cuh (tests/test_householder.py):
// block b generates a reflector from row b of a (count, n) array and applies it
// to its own m x ncols block, so the GPU results can be compared with the NumPy
// twins in factorizations/_householder.py.  Not used by the library.
#include "householder.cuh"

// One block (G threads) per vector: x (count, n) rows with x[b, 0] = alpha.
// Writes beta into x[b, 0], v(1:) into x[b, 1:], tau into tau[b].
template <typename T, int G>
__global__ void larfg_test_kernel(T* x, int n, T* tau, long long count) {
  __shared__ __align__(16) unsigned char work[bdf::vector_work_bytes(G) + 16];
  bdf::ThreadGroup<G> g(threadIdx.x);
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    T* xb = x + b * n;
    const T alpha = xb[0];
    const auto r = bdf::larfg(g, n, alpha, xb + 1, 1, work);
    g.sync();  // everyone has read alpha before it is overwritten
    if (g.rank == 0) {
      xb[0] = T(r.beta);
      tau[b] = r.tau;
    }
    g.sync();
  }
}

// One block per matrix: c (count, n_cols, m) column-major m x n_cols blocks;
// v (count, len) with v[0] = 1 stored; LEFT: len = m, else len = n_cols.
template <typename T, int DIM_X, int DIM_Y, bool LEFT>
__global__ void larf_test_kernel(T* c, int m, int ncols, const T* v, const T* tau, T* w,
                                 long long count) {
  constexpr int WORK = bdf::larf_work_elems<DIM_X, DIM_Y>() > 0 ? bdf::larf_work_elems<DIM_X, DIM_Y>() : 1;
  __shared__ T gemv_work[WORK];
  bdf::ThreadGroup<DIM_X * DIM_Y> g(threadIdx.x);
  const int len = LEFT ? m : ncols, wlen = LEFT ? ncols : m;
  for (long long b = blockIdx.x; b < count; b += gridDim.x) {
    T* cb = c + b * (long long)m * ncols;
    if (LEFT)
      bdf::larf_left<T, DIM_X, DIM_Y>(g, m, ncols, v + b * len, 1, tau[b], cb, m, w + b * wlen, gemv_work);
    else
      bdf::larf_right<T, DIM_X, DIM_Y>(g, m, ncols, v + b * len, 1, tau[b], cb, m, w + b * wlen, gemv_work);
  }
}
