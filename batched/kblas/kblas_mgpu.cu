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
// The algorithm is the single-GPU one (kblas_symv.cu): the kernel calls
// bdf::kblas_symv_diag and bdf::kblas_symv_offdiag of kblas.cuh, here with the
// tile map bdf::CyclicTiles and the output policy bdf::PartialOutput, which adds
// atomically into `part` (no alpha or beta).
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
// One kernel, kblas_symv_mgpu_kernel, with (local tile columns) x (parts + 1)
// blocks: the first tiles * parts blocks (tile column c, part p) walk their share
// of the row tiles of the stored triangle (R > G lower, R < G upper), adding
// B x_C to part_R with atomics tile by tile and B^H x_R, accumulated over the
// walk, to part_C once; the last `tiles` blocks each add one diagonal tile's
// A_GG x_G.  part is zeroed before the launch, so every contribution is an
// atomic add and the two kinds of block may finish in any order.
//
// Why one launch: on two H200s at n = 16384 a device's share of DSYMV is about
// 130 us, and the diagonal kernel that used to run first (plain stores, then
// the off-diagonal kernel on the same stream) sat on the critical path with its
// own ramp and tail; here the light diagonal blocks come last and fill the
// off-diagonal walks' tail.
#include "common.cuh"
#include "kblas.cuh"

// Launch flags (uniform over a launch).
#define KBLAS_MGPU_LOWER 1      // the lower triangle is stored
#define KBLAS_MGPU_HERMITIAN 2  // mirror with conjugation; the diagonal is real

// The stored elements are never read conjugated: the local matrices are column-major.
__device__ __forceinline__ bdf::KblasSymvFlags mgpu_flags(int flags) {
  return {bool(flags & KBLAS_MGPU_LOWER), bool(flags & KBLAS_MGPU_HERMITIAN), false};
}

// Blocks per SM the kernel is held to (0: ptxas's own choice).  The cyclic tile
// map costs ptxas registers that the single-GPU kernel does not spend: the double
// 32 x 4 off-diagonal stage took 108 against the single-GPU one's 94 (session 40), four blocks an SM
// instead of five, and on an H200 (probe, n = 32768 and 65536 on one rank, where the
// map is the identity) its kernels ran 5 % slower than the single-GPU ones.  Held to
// five blocks it takes 96 (4 bytes spilled, outside the walk).  The other settings
// keep their own: float 32 x 4 (76 against 64) spills at eight blocks and was not
// measured; the complex ones use as many registers as the single-GPU kernel.
template <typename T, int NB, int Q> struct MgpuSymvMinBlocks { static constexpr int value = 0; };
template <> struct MgpuSymvMinBlocks<double, 32, 4> { static constexpr int value = 5; };

// (local tile columns) x (parts + 1) blocks; part zeroed before the launch.  The
// branch is uniform over a block, so each stage's barriers are reached by all of it.
template <typename T, int NB, int Q>
__global__ void __launch_bounds__(NB * Q, (MgpuSymvMinBlocks<T, NB, Q>::value))
kblas_symv_mgpu_kernel(const T* __restrict__ A, long long lda, int n, int local_cols, int nb, int ranks,
                       int rank, int flags, const T* __restrict__ x, T* part, int parts) {
  __shared__ __align__(16) unsigned char smem[bdf::kblas_symv_bytes<T, NB, Q>()];
  const bdf::CyclicTiles<NB> tiles{n, local_cols, nb, ranks, rank};
  const int walks = tiles.count() * parts;
  if (int(blockIdx.x) < walks)
    bdf::kblas_symv_offdiag<T, NB, Q>(A, lda, tiles, blockIdx.x, parts, x, 1, bdf::PartialOutput<T>{part},
                                      mgpu_flags(flags), smem);
  else
    bdf::kblas_symv_diag<T, NB, Q>(A, lda, tiles, blockIdx.x - walks, x, 1, bdf::PartialOutput<T>{part},
                                   mgpu_flags(flags), smem);
}
