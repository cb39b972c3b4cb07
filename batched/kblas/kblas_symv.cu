// Large single-matrix SYMV / HEMV (KBLAS design): out = alpha * A x + beta * y for
// ONE n x n symmetric (Hermitian) matrix of which only one triangle is read.
// Launched by batched/kblas/symv.py as one kernel: for a short matrix the strips of
// kblas_symv_strip_kernel (at the end of this file), otherwise kblas_symv_kernel,
// whose blocks take one of two roles:
//
// 1. a diagonal block, one per diagonal NB x NB block: reads the stored triangle of
//    the block into shared memory, mirrors it there and writes out = beta * y +
//    alpha * A_kk x_k for its NB outputs (plain stores: every output index lies in
//    exactly one diagonal block, so this also initialises out for the atomics of
//    the walks);
// 2. a walk, (column C, part p): walks down its share of the off-diagonal tiles
//    B = A(R, C) of block column C inside the stored triangle (R > C for lower,
//    R < C for upper).  Each tile is read once and used twice: out_R += alpha * B x_C
//    (reduced over the block and added with atomics, tile by tile) and out_C +=
//    alpha * B^H x_R (B^T for SYMV), accumulated in registers over the walk and
//    added once at the end.  A walk's first atomic waits until every diagonal
//    block's stores are visible.
//
// The roles' bodies are bdf::kblas_symv_diag and bdf::kblas_symv_offdiag of
// kblas.cuh, shared with the multi-GPU kernel of kblas_mgpu.cu.  Here they run with
// the tile map bdf::SingleTiles (local = global; rows and columns share one index
// origin, the alignment shift of kblas.cuh, so that diagonal blocks stay square) and
// the output policy bdf::KblasOutput (alpha and beta y applied by the diagonal
// blocks' stores, alpha by the walks' atomics into out).
//
// Both triangles use the same code: a stored block at (R, C) contributes
// B x_C to segment R and B^H x_R to segment C whichever side it is on.
#include "common.cuh"
#include "kblas.cuh"

// Launch flags (uniform over a launch).
#define KBLAS_CONJ_A 1     // every stored element is read conjugated (HEMV on a row-major view)
#define KBLAS_READ_Y 2     // beta != 0: y is read; otherwise never touched
#define KBLAS_LOWER 4      // the lower triangle is stored (of the column-major view)
#define KBLAS_HERMITIAN 8  // mirror with conjugation; the diagonal is real
#define KBLAS_VEC 16       // the strips: every column's element -shift 16-byte aligned
#define KBLAS_XVEC 32      // the strips: x contiguous, its element -shift 16-byte aligned

__device__ __forceinline__ bdf::KblasSymvFlags symv_flags(int flags) {
  return {bool(flags & KBLAS_LOWER), bool(flags & KBLAS_HERMITIAN), bool(flags & KBLAS_CONJ_A)};
}

// Counters of kblas_symv_kernel (the launcher's per-stream tickets, zero on entry and
// left zero by the launch's last block).
#define SYMV_TAKEN 0     // roles handed out
#define SYMV_STORED 1    // diagonal blocks whose stores are visible
#define SYMV_FINISHED 2  // blocks done with the counters

// (diagonal blocks) x (parts + 1) blocks, or one where n fits one diagonal block.  A block's role
// is the order in which it arrived (a ticket), not its index: roles 0 .. diagonal - 1
// are the diagonal blocks, the rest the off-diagonal walks.  A walk waits, before its
// first atomic into out, until every diagonal block's stores are visible; it can
// wait only once every diagonal role has been taken by a block already running, and
// those never wait, so the launch finishes whatever order the blocks are scheduled in.
// Why one launch (session 68): the GPU time is the same as the two launches the
// stages had before (diagonal kernel, then walks, on one stream; H100, one process,
// SSYMV/CHEMV/DSYMV/ZHEMV at n = 1024-16384 within 0.3 %), and a call enqueues one
// launch instead of two.
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                  const T* __restrict__ x, long long incx, const T* y, long long incy,
                  T* out, long long inco, T alpha, T beta, int parts, int* counters) {
  __shared__ __align__(16) unsigned char smem[bdf::kblas_symv_bytes<T, NB, Q>()];
  __shared__ int role;
  const bdf::SingleTiles<NB> tiles{n, shift};
  const int diagonal = tiles.count();
  if (threadIdx.x == 0) role = atomicAdd(counters + SYMV_TAKEN, 1);
  __syncthreads();
  const int b = role;
  if (b < diagonal) {
    const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
    bdf::kblas_symv_diag<T, NB, Q>(A, lda, tiles, b, x, incx, o, symv_flags(flags), smem);
    __threadfence();  // this thread's stores are visible device-wide before the count
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(counters + SYMV_STORED, 1);
  } else {
    const bdf::KblasOutput<T> o{out, inco, nullptr, 0, alpha, T(0), false};  // add() only
    const auto wait = [&] {
      if (threadIdx.x == 0) {
        const volatile int* stored = counters + SYMV_STORED;
        while (*stored < diagonal) __nanosleep(64);
        __threadfence();  // the stores counted are seen before this block's atomics
      }
      __syncthreads();
    };
    bdf::kblas_symv_offdiag<T, NB, Q>(A, lda, tiles, b - diagonal, parts, x, incx, o, symv_flags(flags),
                                      smem, wait);
  }
  if (threadIdx.x == 0 && atomicAdd(counters + SYMV_FINISHED, 1) == int(gridDim.x) - 1) {
    counters[SYMV_TAKEN] = 0;  // every block is past its reads of the counters
    counters[SYMV_STORED] = 0;
    counters[SYMV_FINISHED] = 0;
  }
}

// A short matrix in one pass (bdf::kblas_symv_strip): block b stores out at the
// KblasRowsShape<T, P, THREADS>::ROWS indices from b * ROWS - shift, reading its block
// row and block column of the stored triangle; no counters, no atomics.
template <typename T, int P, int THREADS, int U>
__global__ void __launch_bounds__(THREADS)
kblas_symv_strip_kernel(const T* __restrict__ A, long long lda, int n, int shift, int flags,
                        const T* __restrict__ x, long long incx, const T* y, long long incy,
                        T* out, long long inco, T alpha, T beta) {
  using S = bdf::KblasRowsShape<T, P, THREADS>;
  __shared__ alignas(16) unsigned char scratch[(S::WARPS + 1) * S::ROWS * sizeof(T)];
  const bdf::KblasOutput<T> o{out, inco, y, incy, alpha, beta, bool(flags & KBLAS_READ_Y)};
  bdf::kblas_symv_strip<T, P, THREADS, U>(reinterpret_cast<T*>(scratch), A, lda, n, shift, x, incx,
                                          flags & KBLAS_VEC, flags & KBLAS_XVEC, symv_flags(flags), blockIdx.x, o);
}
