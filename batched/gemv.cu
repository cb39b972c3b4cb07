// Batched GEMV: out_b = alpha * op(A_b) x_b + beta * y_b for every matrix b of a batch.
// One kernel body for the three layouts (the MatA / Vec accessors of layouts.cuh).
#include "common.cuh"
#include "gemv.cuh"
#include "kblas.cuh"
#include "layouts.cuh"
#include "stage.cuh"

// Launch flags (uniform over a launch).
#define GEMV_CONJ 1          // op(A) conjugates
#define GEMV_READ_Y 2        // beta != 0: y is read; otherwise never touched
#define GEMV_SKIP_PRODUCT 4  // alpha == 0: A and x are never read

// Sub-warp groups pack several matrices into one 256-thread block; for a
// variable-size batch into one warp: a block keeps its registers until its
// slowest group is done, and members of 1 to 4,096 elements left most of a
// 256-thread block's groups idle for most of its life (the same warps an SM,
// 32 blocks of one warp, each free as soon as its own members are).
// GemvSetting.block_threads / gemv.py's _block_threads on the host.
template <class MatA> __host__ __device__ constexpr int gemv_block_threads(int group) {
  return group > 32 ? group : bdf::is_variable_matrix<MatA>::value ? 32 : 256;
}
// Blocks of sub-warp groups an SM must hold at once, which caps their registers.
// Real pointer and variable batches: 1,024 threads (64 registers); uncapped, their
// per-matrix address and shape loads took 75-80 registers, 3 blocks an SM (H100,
// 8 x 8 float64 pointer batch: 129 against 147 us).  0 (ptxas's own choice)
// otherwise: stacked matrices take 40-64 registers, which their tuning table
// was measured with, and complex ones would spill under the cap.
template <class MatA> __host__ __device__ constexpr int gemv_min_blocks(int group) {
  using T = typename MatA::value_type;
  return group > 32 || bdf::is_uniform_matrix<MatA>::value || bdf::is_complex_v<T>
             ? 0
             : 1024 / gemv_block_threads<MatA>(group);
}

template <typename T> struct GemvStore {
  T alpha, beta;
  const T* y; long long incy;
  T* out; long long inco;
  bool read_y;
  __device__ void operator()(int i, T r) const {
    T v = alpha * r;
    if (read_y) v += beta * y[i * incy];
    out[i * inco] = v;
  }
};

// Work item = (matrix b, output tile t): TILE outputs of one matrix (TILE == 0:
// the whole output, the big-tile setting).  tiles = tiles per matrix for the
// largest output length of the batch.
template <class MatA, class Vec, int DIM_X, int DIM_Y, int TILE, bool TRANS>
__global__ void __launch_bounds__(gemv_block_threads<MatA>(DIM_X * DIM_Y), gemv_min_blocks<MatA>(DIM_X * DIM_Y))
gemv_kernel(MatA A, Vec x, Vec y, Vec out, typename MatA::value_type alpha,
            typename MatA::value_type beta, int flags, long long count, int tiles) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  constexpr int GROUPS = gemv_block_threads<MatA>(G) / G;
  constexpr int WORK = G > 32 ? G * bdf::GEMV_UNROLL : 1;
  __shared__ __align__(16) unsigned char work_bytes[WORK * sizeof(T)];
  T* work = reinterpret_cast<T*>(work_bytes);

  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  const bool conj = flags & GEMV_CONJ, read_y = flags & GEMV_READ_Y;
  const long long items = count * tiles;
  for (long long item = (long long)blockIdx.x * GROUPS + threadIdx.x / G; item < items;
       item += (long long)gridDim.x * GROUPS) {
    // 64-bit division costs more than a tiny matrix's whole product: skip it for big-tile.
    const long long b = tiles == 1 ? item : item / tiles;
    const int t = int(item - b * tiles);
    const int m = A.rows(b), n = A.cols(b);
    const int len = TRANS ? n : m;
    const int start = TILE ? t * TILE : 0;
    if (start >= len) continue;  // uniform over the group (one group per block when G > 32)
    const int stop = TILE ? min(len, start + TILE) : len;
    T* o = out.vector(b) + start * out.inc;
    const T* yb = read_y ? y.vector(b) + start * y.inc : nullptr;
    if (flags & GEMV_SKIP_PRODUCT) {
      for (int i = g.rank; i < stop - start; i += G) o[i * out.inc] = read_y ? beta * yb[i * y.inc] : T(0);
      continue;
    }
    const GemvStore<T> store{alpha, beta, yb, y.inc, o, out.inc, read_y};
    const T* a = A.matrix(b);
    const long long lda = A.ldim(b);
    if (TRANS)
      bdf::gemv_t<T, DIM_X, DIM_Y>(g, m, stop - start, a + start * lda, lda, x.vector(b), x.inc,
                                   conj, work, store);
    else
      bdf::gemv_n<T, DIM_X, DIM_Y>(g, stop - start, n, a + start, lda, x.vector(b), x.inc,
                                   conj, work, store);
  }
}

// Staged big-tile GEMV for small matrices: each group of G <= 32 threads copies
// its whole matrix and vector into shared memory with cp.async while it
// multiplies the previous pair (two buffers of `capacity` elements per group),
// then runs gemv_n / gemv_t on shared memory.  The copy is one contiguous run
// for packed matrices, so a warp's loads coalesce whatever the orientation, and
// all of a matrix is in flight at once.  The launcher sizes the grid to the
// resident blocks and blockDim.x (a multiple of G, at most 256) to the shared
// memory, so each group loops over many matrices.
template <class MatA, class Vec, int DIM_X, int DIM_Y, bool TRANS>
__global__ void __launch_bounds__(256)
gemv_staged_kernel(MatA A, Vec x, Vec y, Vec out, typename MatA::value_type alpha,
                   typename MatA::value_type beta, int flags, long long count, int capacity) {
  using T = typename MatA::value_type;
  constexpr int G = DIM_X * DIM_Y;
  static_assert(G <= 32, "staged groups are sub-warp or one warp");
  extern __shared__ __align__(16) unsigned char stage_bytes[];
  const int groups = blockDim.x / G;
  T* buffers = reinterpret_cast<T*>(stage_bytes) + (threadIdx.x / G) * 2ll * capacity;

  const bdf::ThreadGroup<G> g(threadIdx.x % G);
  const bool conj = flags & GEMV_CONJ, read_y = flags & GEMV_READ_Y;
  const bool skip = flags & GEMV_SKIP_PRODUCT;  // alpha == 0 or empty inner dimension: nothing to copy
  const long long step = (long long)gridDim.x * groups;
  auto stage = [&](long long b, T* s) {
    if (skip) return;
    const int m = A.rows(b), n = A.cols(b);
    bdf::stage_matrix<T, G>(g, m, n, A.matrix(b), A.ldim(b), s);
    bdf::stage_vector<T, G>(g, TRANS ? m : n, x.vector(b), x.inc, s + m * n);
  };
  long long b = (long long)blockIdx.x * groups + threadIdx.x / G;
  if (b < count) stage(b, buffers);
  bdf::stage_commit();
  for (int cur = 0; b < count; b += step, cur ^= 1) {
    if (b + step < count) stage(b + step, buffers + (cur ^ 1) * capacity);
    bdf::stage_commit();
    bdf::stage_wait<1>();  // this thread's copies of matrix b have landed
    g.sync();              // ... and everyone else's
    const T* s = buffers + cur * capacity;
    const int m = A.rows(b), n = A.cols(b);
    const GemvStore<T> store{alpha, beta, read_y ? y.vector(b) : nullptr, y.inc,
                             out.vector(b), out.inc, read_y};
    if (skip) {
      for (int i = g.rank; i < (TRANS ? n : m); i += G) store(i, T(0));
    } else if (TRANS) {
      bdf::gemv_t<T, DIM_X, DIM_Y>(g, m, n, s, m, s + m * n, 1, conj, nullptr, store);
    } else {
      bdf::gemv_n<T, DIM_X, DIM_Y>(g, m, n, s, m, s + m * n, 1, conj, nullptr, store);
    }
    g.sync();  // the next iteration copies into the buffer just read
  }
}

// Tall-tile GEMV for large matrices (128 and more rows or columns): the KBLAS
// single-matrix kernels' segments (kblas.cuh, kblas_gemv_n_segment /
// kblas_gemv_t_segment), one block a segment.  A warp reads 32 V consecutive
// elements of each of its columns per tile (1 KiB for double; a big-tile group
// reads 256 bytes), 16 bytes a lane where the matrix is aligned for it; each
// matrix gets its own 128-byte row origin.  Work item = (matrix b, segment t):
// `tiles` segments per matrix for the largest matrix (and origin) of the batch;
// a matrix with fewer skips the rest.
template <class MatA, class Vec, int NB, int Q, bool TRANS>
__global__ void __launch_bounds__(NB * Q)
gemv_tall_kernel(MatA A, Vec x, Vec y, Vec out, typename MatA::value_type alpha,
                 typename MatA::value_type beta, int flags, long long count, int tiles) {
  using T = typename MatA::value_type;
  constexpr int R = bdf::KblasTallShape<T, NB, Q>::R;
  __shared__ bdf::KblasGemvShared<T, NB, Q> sh;
  const bool conj = flags & GEMV_CONJ, read_y = flags & GEMV_READ_Y;
  const long long items = count * tiles;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const long long b = item / tiles;
    const int seg = int(item - b * tiles);
    const int m = A.rows(b), n = A.cols(b);
    const T* a = A.matrix(b);
    const long long lda = A.ldim(b);
    const int shift = bdf::kblas_row_shift(a);
    const int segs = TRANS ? bdf::TileRange{n, 0}.count<NB>() : bdf::TileRange{m, shift}.count<R>();
    if (seg >= segs) continue;  // uniform over the block
    const bdf::KblasOutput<T> o{out.vector(b), out.inc, read_y ? y.vector(b) : nullptr, y.inc, alpha, beta, read_y};
    if (flags & GEMV_SKIP_PRODUCT) {  // alpha == 0 or an empty inner dimension: A and x unread
      const int first = TRANS ? seg * NB : bdf::TileRange{m, shift}.start<R>(seg);
      const int len = TRANS ? n : m;
      for (int r = threadIdx.x; r < (TRANS ? NB : R); r += blockDim.x)
        if (first + r >= 0 && first + r < len) o.store(first + r, T(0));
      continue;
    }
    const bool vec = bdf::kblas_vector_loads(a, lda, shift);
    if (TRANS)
      bdf::kblas_gemv_t_segment<T, NB, Q>(sh, a, lda, m, n, shift, x.vector(b), x.inc, vec, conj, seg, 0, 1,
                                          nullptr, nullptr, o);
    else
      bdf::kblas_gemv_n_segment<T, NB, Q>(sh, a, lda, m, n, shift, x.vector(b), x.inc, vec, conj, seg, 0, 1,
                                          nullptr, nullptr, o);
  }
}

// Packed GEMV for column-major matrices whose columns are whole 16-byte pieces
// (bdf::gemv_packed): a warp a matrix, eight warps a block, a grid-stride loop over the
// batch; stacked (uniform) or pointer-array batches.  The launcher checks the layout
// (lda == m == PPC * 16 / sizeof(T), every matrix 16-byte aligned) and sends anything
// else to the big-tile twin.
template <class MatA, class Vec, int PPC, bool TRANS>
__global__ void __launch_bounds__(256)
gemv_packed_kernel(MatA A, Vec x, Vec y, Vec out, typename MatA::value_type alpha,
                   typename MatA::value_type beta, int flags, long long count) {
  using T = typename MatA::value_type;
  const bool conj = flags & GEMV_CONJ, read_y = flags & GEMV_READ_Y;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x / 32;
  for (long long b = (long long)blockIdx.x * warps + threadIdx.x / 32; b < count;
       b += (long long)gridDim.x * warps) {
    const int n = A.cols(b), len = TRANS ? n : A.rows(b);
    const GemvStore<T> store{alpha, beta, read_y ? y.vector(b) : nullptr, y.inc, out.vector(b), out.inc, read_y};
    if (flags & GEMV_SKIP_PRODUCT) {  // alpha == 0: A and x unread
      for (int i = lane; i < len; i += 32) store(i, T(0));
      continue;
    }
    bdf::gemv_packed<T, PPC, TRANS>(lane, n, A.matrix(b), x.vector(b), x.inc, conj, store);
  }
}
