// Batched BLAS-1 over the last axis: one thread group per vector, a grid-stride loop
// over the vectors (the 1-D looped grid of Polok and Smrz: a block that moves on to
// the next vector beats launching a block per vector).  Sub-warp groups put several
// short vectors into one warp, so lengths that are not multiples of 32 waste few lanes.
#include "common.cuh"
#include "layouts.cuh"
#include "vector.cuh"

// Reductions (vector_reduce_kernel's `op`).
#define VECTOR_NRM2 0
#define VECTOR_ASUM 1
#define VECTOR_IAMAX 2
#define VECTOR_DOT 3
#define VECTOR_DOTC 4

__host__ __device__ constexpr int vector_block_threads(int group) { return group > 32 ? group : 256; }

// Blocks an SM nrm2 is held to (256 threads each): six (40 registers; float took 63
// uncapped), and eight (32 registers, every thread slot of an SM) for 8-lane groups of
// 8-byte types, the one case where more resident warps paid.  H100, 10^6 vectors, eight
// blocks against six (session 71): DNRM2 33 in eights 98.1 us against 106.5, CNRM2 33
// 100.8-105.2 against 107.5; DNRM2 64 in eights and 16/33 in fours level; pairs mixed
// (SNRM2 10 24.5 against 25.5, SNRM2 16 29.0 against 27.5, DNRM2 12 39.6 against 38.1);
// ZNRM2 10 in fours 67.4 against 62.4.  Float in groups of four or eight spills 56 bytes
// at 32 registers.
template <typename T>
__host__ __device__ constexpr int nrm2_min_blocks(int group) {
  return group == 8 && sizeof(T) == 8 ? 8 : 6;
}

// Entries an nrm2 lane loads at a time: 0 (bdf::nrm2's 16-byte pieces where the vector
// is contiguous) unless the group is smaller than the elements before a vector's first
// 16-byte boundary (up to 16 / sizeof(T) - 1: three floats), which the piece path gives
// one lane each; float in groups of two takes entry-wise chunks of eight instead.
template <typename T>
__host__ __device__ constexpr int nrm2_chunk(int group) {
  return group >= 16 / int(sizeof(T)) - 1 ? 0 : 8;
}

// out[b] = reduction of vector b (and y's vector b for the dots): a real for nrm2 and
// asum, a long long for iamax, a T for the dots.  OP is a template argument so that
// each reduction gets the registers of its own loop (nrm2's chunks of eight loads
// took 80 in a kernel shared by every op, and the short dots slowed down with them).
template <typename T, int G, int OP>
__global__ void __launch_bounds__(vector_block_threads(G), OP == VECTOR_NRM2 ? nrm2_min_blocks<T>(G) : 0)
vector_reduce_kernel(bdf::UniformVector<T> x, bdf::UniformVector<T> y, void* out, long long count, int n) {
  constexpr int op = OP;
  using R = typename bdf::real_of<T>::type;
  constexpr int GROUPS = vector_block_threads(G) / G;
  constexpr int WORK = bdf::vector_work_bytes(G) > 0 ? bdf::vector_work_bytes(G) : 16;
  __shared__ __align__(16) unsigned char work[WORK];  // G > 32: one group per block
  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  for (long long b = (long long)blockIdx.x * GROUPS + threadIdx.x / G; b < count;
       b += (long long)gridDim.x * GROUPS) {
    const T* xv = x.vector(b);
    if constexpr (op == VECTOR_NRM2 || op == VECTOR_ASUM) {
      const R r = op == VECTOR_NRM2 ? bdf::nrm2<G, nrm2_chunk<T>(G)>(g, n, xv, x.inc, work)
                                    : bdf::asum(g, n, xv, x.inc, work);
      if (g.rank == 0) static_cast<R*>(out)[b] = r;
    } else if constexpr (op == VECTOR_IAMAX) {
      const int i = bdf::iamax(g, n, xv, x.inc, work);
      if (g.rank == 0) static_cast<long long*>(out)[b] = i;
    } else {
      const T r = bdf::dot(g, n, xv, x.inc, y.vector(b), y.inc, op == VECTOR_DOTC, work);
      if (g.rank == 0) static_cast<T*>(out)[b] = r;
    }
  }
}

// out_b = alpha_b x_b (+ y_b with `axpy`); alpha_b = alphas[b * alpha_stride] when
// alphas is given (one scale per vector), else the scalar alpha.
template <typename T, int G>
__global__ void __launch_bounds__(vector_block_threads(G))
vector_update_kernel(bdf::UniformVector<T> x, bdf::UniformVector<T> y, bdf::UniformVector<T> out, T alpha,
                     const T* alphas, long long alpha_stride, int axpy, long long count, int n) {
  constexpr int GROUPS = vector_block_threads(G) / G;
  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  for (long long b = (long long)blockIdx.x * GROUPS + threadIdx.x / G; b < count;
       b += (long long)gridDim.x * GROUPS) {
    const T a = alphas ? alphas[b * alpha_stride] : alpha;
    if (axpy)
      bdf::axpy(g, n, a, x.vector(b), x.inc, y.vector(b), y.inc, out.vector(b), out.inc);
    else
      bdf::scal(g, n, a, x.vector(b), x.inc, out.vector(b), out.inc);
  }
}
