// Multi-GPU SYMV / HEMV (KBLAS design): the share of ONE device in
// out = A x for an n x n symmetric (Hermitian) matrix stored in the 1D
// block-cyclic column layout (batched/kblas/distributed.py), only one triangle
// read.  Launched by batched/kblas/mgpu.py on each device's own stream; the
// per-device partial vectors are summed (and scaled by alpha, plus beta y)
// afterwards on the device of x.
//
// Why kernels of their own: a device's local matrix holds every ranks-th block
// column of A (width nb), and those panels are not symmetric, so the
// single-GPU SYMV cannot run on them as a matrix.  Every stored tile B = A(R, C)
// of the named triangle belongs to exactly one device (the owner of its block
// column); that device reads it once and applies it twice: part_R += B x_C and
// part_C += B^H x_R (B^T for SYMV).  Diagonal tiles are mirrored in shared
// memory.  Summing the partials of all devices gives A x.
//
// The algorithm is the single-GPU one (kblas_symv.cu): both stages are thin
// wrappers around bdf::kblas_symv_diag and bdf::kblas_symv_offdiag of
// kblas.cuh, here with the tile map bdf::CyclicTiles and the output policy
// bdf::PartialOutput (plain stores and atomics into `part`, no alpha or beta).
//
// Index spaces (bdf::CyclicTiles).  The local matrix of device `rank` (of
// `ranks`) is column-major with leading dimension lda, n rows (global row =
// local row) and local_cols columns; local column j is global column
//     ((j / nb) * ranks + rank) * nb + j % nb.
// NB divides nb (checked by the launcher), so a local tile column c (local
// columns c*NB ..) is NB consecutive global columns starting at a multiple of
// NB: it is global tile column G = global(c*NB) / NB, and its diagonal tile is
// global row tile G.  Row tiles have origin 0 (the local buffers are allocated
// with 128-byte aligned columns, so no alignment shift is needed).  x is
// contiguous and indexed globally.
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

// The stored elements are never read conjugated: the local matrices are column-major.
__device__ __forceinline__ bdf::KblasSymvFlags mgpu_flags(int flags) {
  return {bool(flags & KBLAS_MGPU_LOWER), bool(flags & KBLAS_MGPU_HERMITIAN), false};
}

template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q)
kblas_symv_mgpu_diag_kernel(const T* __restrict__ A, long long lda, int n, int local_cols, int nb,
                            int ranks, int rank, int flags, const T* __restrict__ x, T* part) {
  __shared__ __align__(16) unsigned char smem[bdf::kblas_symv_diag_bytes<T, NB, Q>()];
  const bdf::CyclicTiles<NB> tiles{n, local_cols, nb, ranks, rank};
  bdf::kblas_symv_diag<T, NB, Q>(A, lda, tiles, blockIdx.x, x, 1, bdf::PartialOutput<T>{part},
                                 mgpu_flags(flags), smem);
}

// Blocks per SM the off-diagonal kernel is held to (0: ptxas's own choice).  The
// cyclic tile map costs ptxas registers that the single-GPU kernel does not spend:
// double 32 x 4 took 108 against kblas_symv_offdiag_kernel's 94, four blocks an SM
// instead of five, and on an H200 (probe, n = 32768 and 65536 on one rank, where the
// map is the identity) its kernels ran 5 % slower than the single-GPU ones.  Held to
// five blocks it takes 96 (4 bytes spilled, outside the walk).  The other settings
// keep their own: float 32 x 4 (76 against 64) spills at eight blocks and was not
// measured; the complex ones use as many registers as the single-GPU kernel.
template <typename T, int NB, int Q> struct MgpuOffdiagMinBlocks { static constexpr int value = 0; };
template <> struct MgpuOffdiagMinBlocks<double, 32, 4> { static constexpr int value = 5; };

// Launched after kblas_symv_mgpu_diag_kernel on the same stream, with
// (local tile columns) x parts blocks.
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q, (MgpuOffdiagMinBlocks<T, NB, Q>::value))
kblas_symv_mgpu_offdiag_kernel(const T* __restrict__ A, long long lda, int n, int local_cols, int nb,
                               int ranks, int rank, int flags, const T* __restrict__ x, T* part,
                               int parts) {
  __shared__ __align__(16) unsigned char smem[bdf::kblas_symv_offdiag_bytes<T, NB, Q>()];
  const bdf::CyclicTiles<NB> tiles{n, local_cols, nb, ranks, rank};
  bdf::kblas_symv_offdiag<T, NB, Q>(A, lda, tiles, blockIdx.x, parts, x, 1, bdf::PartialOutput<T>{part},
                                    mgpu_flags(flags), smem);
}
