// Multi-GPU SYMV / HEMV (KBLAS design): the share of ONE device in
// out = A x for an n x n symmetric (Hermitian) matrix stored in the 1D
// block-cyclic column layout (batched/kblas/distributed.py), only one triangle
// read.  Launched by batched/kblas/mgpu.py on each device's own stream; the
// per-device partial vectors are summed (and scaled by alpha, plus beta y)
// afterwards on the device of x.
//
// Why a kernel of its own: a device's local matrix holds every ranks-th block
// column of A (width nb), and those panels are not symmetric, so the
// single-GPU SYMV cannot run on them.  Every stored tile B = A(R, C)
// of the named triangle belongs to exactly one device (the owner of its block
// column); that device reads it once and applies it twice: part_R += B x_C and
// part_C += B^H x_R (B^T for SYMV).  Diagonal tiles are mirrored in shared
// memory.  Summing the partials of all devices gives A x.
//
// Index spaces.  The local matrix of device `rank` (of `ranks`) is column-major
// with leading dimension lda, n rows (global row = local row) and local_cols
// columns; local column j is global column
//     ((j / nb) * ranks + rank) * nb + j % nb.
// NB divides nb (checked by the launcher), so a local tile column c (local
// columns c*NB ..) is NB consecutive global columns starting at a multiple of
// NB: it is global tile column G = global(c*NB) / NB, and its diagonal tile is
// global row tile G.  Row tiles have origin 0 (the local buffers are allocated
// with 128-byte aligned columns, so no alignment shift is needed).
//
// 1. kblas_symv_mgpu_diag_kernel: one block per local tile column: stores
//    part[G*NB + r] = (A_GG x_G)[r] (plain stores; each global row index lies in
//    at most one diagonal tile of this device, and part was zeroed before).
// 2. kblas_symv_mgpu_offdiag_kernel, after (1) on the same stream: block
//    (tile column c, part p) walks its share of the row tiles of the stored
//    triangle (R > G lower, R < G upper), adding B x_C to part_R with atomics
//    tile by tile and B^H x_R, accumulated over the walk, to part_C once.
#include "common.cuh"
#include "kblas.cuh"

// Launch flags (uniform over a launch).
#define KBLAS_MGPU_LOWER 1      // the lower triangle is stored
#define KBLAS_MGPU_HERMITIAN 2  // mirror with conjugation; the diagonal is real

// Shared arrays are raw bytes: complex<T> has a constructor, which __shared__ may not run.

// Global index of the first column of local tile column c.
template <int NB>
__device__ __forceinline__ int mgpu_tile_origin(int c, int nb, int ranks, int rank) {
  const int j = c * NB;
  return ((j / nb) * ranks + rank) * nb + j % nb;
}

template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_mgpu_diag_kernel(const T* __restrict__ A, long long lda, int n, int local_cols, int nb,
                            int ranks, int rank, int flags, const T* __restrict__ x, T* part) {
  constexpr int L = NB / Q, LDS = NB + 1;  // +1: a column and a row of the tile hit distinct banks
  static_assert((NB * LDS + 2 * NB + Q * NB) * sizeof(T) <= 48 * 1024,
                "the diagonal tile must fit the static shared-memory limit");
  __shared__ __align__(16) unsigned char tile_bytes[NB * LDS * sizeof(T)];
  __shared__ __align__(16) unsigned char xs_bytes[NB * sizeof(T)];
  __shared__ __align__(16) unsigned char scratch_bytes[Q * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  T* tile = reinterpret_cast<T*>(tile_bytes);
  T* xs = reinterpret_cast<T*>(xs_bytes);
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const bool lower = flags & KBLAS_MGPU_LOWER, herm = flags & KBLAS_MGPU_HERMITIAN;
  const int c = blockIdx.x;                 // local tile column
  const int j0 = c * NB;                    // its first local column
  const int g0 = mgpu_tile_origin<NB>(c, nb, ranks, rank);  // its first global column = row
  // Local column j0 + cc exists iff global column g0 + cc < n (the last local
  // tile is cut exactly where the global matrix ends), and row g0 + tx < n.
  const bool row_ok = g0 + tx < n;

  // tile(r, cc) = A(g0 + r, g0 + cc) inside the stored triangle, else 0 (not read).
  for (int cc = ty; cc < NB; cc += Q) {
    const bool stored = lower ? tx >= cc : tx <= cc;
    const bool ok = stored && row_ok && g0 + cc < n && j0 + cc < local_cols;
    tile[cc * LDS + tx] = ok ? A[(long long)(j0 + cc) * lda + g0 + tx] : T(0);
  }
  const int r = threadIdx.x;
  if (r < NB) xs[r] = g0 + r < n ? x[g0 + r] : T(0);
  __syncthreads();

  // Row tx of the mirrored tile times x, over this thread's L columns.
  T s = T(0);
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int cc = ty * L + l;
    T e;
    if (cc == tx)
      e = herm ? bdf::real_diagonal(tile[cc * LDS + tx]) : tile[cc * LDS + tx];
    else if (lower ? tx > cc : tx < cc)
      e = tile[cc * LDS + tx];
    else
      e = bdf::conj_if(tile[tx * LDS + cc], herm);
    s += e * xs[cc];
  }
  bdf::kblas_sum_over_q<T, NB, Q>(s, scratch, red);  // ends after a barrier: red readable
  if (r < NB && g0 + r < n) part[g0 + r] = red[r];
}

template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_mgpu_offdiag_kernel(const T* __restrict__ A, long long lda, int n, int local_cols, int nb,
                               int ranks, int rank, int flags, const T* __restrict__ x, T* part,
                               int parts) {
  constexpr int L = NB / Q;
  __shared__ __align__(16) unsigned char partial_bytes[2 * Q * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char scratch_bytes[(NB / 32) * NB * sizeof(T)];
  __shared__ __align__(16) unsigned char red_bytes[NB * sizeof(T)];
  T* partial = reinterpret_cast<T*>(partial_bytes);
  T* scratch = reinterpret_cast<T*>(scratch_bytes);
  T* red = reinterpret_cast<T*>(red_bytes);

  const int tx = threadIdx.x % NB, ty = threadIdx.x / NB;
  const bool lower = flags & KBLAS_MGPU_LOWER, herm = flags & KBLAS_MGPU_HERMITIAN;
  const bdf::TileRange rows{n, 0}, cols{local_cols, 0};
  const int tiles = cols.count<NB>(), row_tiles = rows.count<NB>();
  // Longest walks first (lower: local tile 0 has the most tiles below it;
  // upper: the last one has the most above), so short ones fill the tail.
  const int rank_in_order = blockIdx.x / parts, p = blockIdx.x % parts;
  const int c = lower ? rank_in_order : tiles - 1 - rank_in_order;
  const int g0 = mgpu_tile_origin<NB>(c, nb, ranks, rank);
  const int G = g0 / NB;  // global tile column = row tile of the diagonal tile
  const int first = lower ? G + 1 : 0, last = lower ? row_tiles : G;
  int lo, hi;
  bdf::split_share(last - first, parts, p, lo, hi);
  if (lo >= hi) return;  // uniform over the block: no barrier is skipped by a part of it

  T xc[L];  // x over this thread's columns of tile column c, for every tile's B x_C
#pragma unroll
  for (int l = 0; l < L; ++l) {
    const int g = g0 + ty * L + l;
    xc[l] = g < n ? x[g] : T(0);
  }
  T acc[L];
#pragma unroll
  for (int l = 0; l < L; ++l) acc[l] = T(0);

  int step = 0;
  auto body = [&](int t, const T (&a)[L], const T (&xv)[1]) {
    T pn = T(0);
#pragma unroll
    for (int l = 0; l < L; ++l) {
      pn += a[l] * xc[l];
      acc[l] += bdf::conj_if(a[l], herm) * xv[0];
    }
    // Two buffers: the barrier of the next tile orders this tile's reads before
    // the tile after it overwrites the buffer, so one barrier per tile suffices.
    T* buf = partial + (step & 1) * Q * NB;
    buf[ty * NB + tx] = pn;
    __syncthreads();
    if (ty == step % Q) {  // the thread columns take turns at the reduction and its atomics
      T s = buf[tx];
#pragma unroll
      for (int q = 1; q < Q; ++q) s += buf[q * NB + tx];
      const int i = t * NB + tx;
      if (i < n) bdf::atomic_add(part + i, s);
    }
    ++step;
  };
  // The walk reads A(i, j) at local column j of tile column c and global row i,
  // and x[i] for each row i: rows and x share the global index.
  if (cols.edge<NB>(c))
    bdf::kblas_walk<T, NB, Q, true, true>(A, lda, rows, cols, c, first + lo, first + hi, x, 1, body);
  else
    bdf::kblas_walk<T, NB, Q, true, false>(A, lda, rows, cols, c, first + lo, first + hi, x, 1, body);

  bdf::kblas_sum_over_rows<T, NB, Q>(acc, scratch, red);  // starts and ends with a barrier
  const int r = threadIdx.x;
  if (r < NB && g0 + r < n) bdf::atomic_add(part + g0 + r, red[r]);
}
