"""GEBRD / ORGBR settings as data, the default chooser and the launch plan.

A ``GebrdSetting`` becomes the template arguments of ``factorizations/gebrd.cu``:
DIM_X x DIM_Y threads per matrix (the thread shape of the GEMVs inside
``bdf::larf_left`` (GEMV-T) and ``bdf::larf_right`` (GEMV-N), and of LABRD's
GEMVs), ``stage`` and ``nb``, three designs with one thread block per matrix,
and of ``factorizations/gebrd_lanes.cu`` (``lanes``), a fourth with a group of
lanes per matrix:

* staged (``stage=True``, ``nb=0``): big-tile, the unblocked sweep (xGEBD2) on
  the whole matrix copied into shared memory;
* blocked (``stage=False``, ``nb > 0``): LAPACK's blocked xGEBRD, LABRD panels
  of nb rows and columns (``device_functions/labrd.cuh``) and the trailing
  update by GEMM, the matrix in device memory, the panel's vectors and (when
  they fit) X and Y in shared memory; the last min(m, n) mod nb (or fewer than
  nb + 1) rows and columns by the unblocked sweep in device memory.
* global (``stage=False``, ``nb=0``): the unblocked sweep in device memory.  No
  longer registered: a blocked setting on a matrix with min(m, n) <= nb runs
  exactly this sweep (no panel), so the blocked kernel covers it.
* blocked on a cluster (``cluster`` = 2, 4 or 8): the blocked design on a
  thread-block cluster of that many blocks a matrix (``gebrd_cluster_kernel``):
  each LABRD step's two large GEMVs and the trailing update split over the
  cluster's SMs, for batches too small to fill the GPU a block a matrix.
* lanes (``lanes=True``, real types, max(m, n) <= dim_x): a group of dim_x lanes
  per matrix instead of a block, the matrix a row a lane in registers
  (``factorizations/gebrd_lanes.cu`` over ``device_functions/gebd2_lanes.cuh``,
  the bidiagonalization of svdvals with the reflectors kept), 128 threads a
  block.

Planning is pure: the CPU tests check it.  The NumPy backend follows the same
choice (blocked settings run the blocked algorithm with the same nb).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._launch import grid_for
from ..settings import check_setting

GEMV_UNROLL = 4        # bdf::GEMV_UNROLL (device_functions/gemv.cuh)
GEMM_K = 8             # GebrdGemmTile::K (gebrd.cu): the trailing update's k step
SOFT_SMEM = 48 * 1024  # above this a kernel must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize)


# The lanes design's block (bdf::GEBD2_LANES_BLOCK, gebd2_lanes.cuh): 128 / group matrices at once.
LANES_THREADS = 128


def _align16(nbytes: int) -> int:
    return -(-nbytes // 16) * 16


def lanes_shared_bytes(group: int, cols: int, itemsize: int) -> tuple[int, int]:
    """(dynamic, static) shared bytes of a block of the lanes design (gebd2_lanes.cuh's
    gebd2_lanes_grid, for gebrd_lanes_kernel and svdvals' gebd2_lanes_kernel): each
    group's stage for its next matrix (cols (group + 1) entries: gebd2_stage_ld) and
    its Gebd2LanesShared (tile cols x (group + 2), w cols)."""
    groups = LANES_THREADS // group
    return groups * cols * (group + 1) * itemsize, groups * cols * (group + 3) * itemsize


@dataclass(frozen=True)
class GebrdSetting:
    """DIM_X x DIM_Y threads per matrix; ``stage`` keeps the matrix in shared memory;
    ``nb`` > 0 selects the blocked design with panels of nb (stage must be False)."""

    dim_x: int
    dim_y: int
    stage: bool = True
    nb: int = 0
    lanes: bool = False  # dim_x lanes a matrix (dim_y 1, stage False, nb 0)
    cluster: int = 1     # blocked: blocks a matrix (a thread-block cluster when > 1)

    @property
    def blocked(self) -> bool:
        return self.nb > 0

    def fits(self, m: int, n: int, dtype) -> bool:
        """Whether this setting can reduce m x n matrices of ``dtype`` (the lanes design:
        real types, max(m, n) <= its group; the others: any; the staged design's shared
        memory is checked by plan_gebrd)."""
        return not self.lanes or (np.dtype(dtype).kind == "f" and max(m, n) <= self.dim_x)

    @property
    def threads(self) -> int:
        return self.dim_x * self.dim_y

    def gemv_work_elems(self) -> int:  # bdf::larf_work_elems<DIM_X, DIM_Y>()
        return self.threads * GEMV_UNROLL if self.threads > 32 and self.dim_y > 1 else 0

    def vector_work_bytes(self) -> int:  # bdf::vector_work_bytes(G)
        return (self.threads // 32) * 48 if self.threads > 32 else 0

    def gemm_tile_elems(self) -> int:  # GebrdGemmTile<DIM_X, DIM_Y>::elems (gebrd.cu)
        return GEMM_K * (2 * self.dim_x + 1) + GEMM_K * (4 * self.dim_y + 1)

    def xy_bytes(self, m_max: int, n_max: int, itemsize: int) -> int:
        """X and Y of the blocked design ((m_max + n_max) nb elements)."""
        return _align16((m_max + n_max) * self.nb * itemsize)

    def smem_bytes(self, m_max: int, n_max: int, itemsize: int, xy_shared: bool = True) -> int:
        """Dynamic shared memory of gebrd_kernel / gebrd_blocked_kernel: the same sum
        as the kernel's layout (blocked: without X and Y when ``xy_shared`` is False)."""
        if self.blocked:
            length = max(m_max, n_max, 1)
            pad = 128 // itemsize  # bdf::labrd_pad<T>()
            return (_align16((pad + length) * itemsize) + _align16(max(n_max, 1) * itemsize)
                    + _align16(2 * self.nb * itemsize)
                    + _align16(max(self.gemv_work_elems(), self.gemm_tile_elems()) * itemsize)
                    + self.vector_work_bytes() + (self.xy_bytes(m_max, n_max, itemsize) if xy_shared else 0))
        mat = _align16(m_max * n_max * itemsize) if self.stage else 0
        return (mat + _align16(max(m_max, n_max, 1) * itemsize) + _align16(self.gemv_work_elems() * itemsize)
                + self.vector_work_bytes())

    def lanes_smem_bytes(self, itemsize: int) -> tuple[int, int]:
        """(dynamic, static) shared bytes of gebrd_lanes_kernel (lanes_shared_bytes)."""
        return lanes_shared_bytes(self.dim_x, self.dim_x, itemsize)

    def orgbr_smem_bytes(self, len_max: int, itemsize: int) -> int:
        """Dynamic shared memory of orgbr_kernel (sv, w, gemv work, vector work)."""
        return (2 * _align16(max(len_max, 1) * itemsize) + _align16(self.gemv_work_elems() * itemsize)
                + self.vector_work_bytes())

    def template_args(self) -> str:
        if self.lanes:  # G, NC of gebrd_lanes_kernel: square groups
            return f"{self.dim_x}, {self.dim_x}"
        return f"{self.dim_x}, {self.dim_y}"

    def __str__(self) -> str:
        if self.lanes:
            return f"gebrd{self.dim_x}lanes"
        design = f"blocked{self.nb}" if self.blocked else ("staged" if self.stage else "global")
        if self.cluster > 1:
            design += f"cluster{self.cluster}"
        return f"gebrd{self.dim_x}x{self.dim_y}{design}"


# Every setting a launcher may pick (each a registered instantiation for 3 layouts
# x 4 dtypes, compiled in CI).  The four device-memory unblocked settings were
# dropped: the blocked design took over the sizes past the shared-memory limit,
# and a blocked setting runs the same unblocked sweep in device memory on the
# matrices too narrow for a panel.  Blocked: 256 threads, nb = 16 (the paper's
# best for GEBRD) and nb = 32 for the comparison (a blocked instantiation takes
# 4-8 s to compile, about five times a staged one).
_SHAPES = ((8, 4), (16, 4), (32, 4), (32, 8))
STAGED_SETTINGS = tuple(GebrdSetting(x, y, True) for x, y in (*_SHAPES, (32, 16)))
BLOCKED_SETTINGS = (GebrdSetting(32, 8, False, 16), GebrdSetting(32, 8, False, 32))
# The lanes design's groups (those of svdvals' DqdsSetting): 8, 16 or 32 rows a matrix.
LANES_SETTINGS = tuple(GebrdSetting(g, 1, False, 0, True) for g in (8, 16, 32))
# Whether the chooser gives real matrices up to 32 x 32 the lanes design: on since its
# first device run (H100, 2026-12-07: GPU tests passed, memcheck and racecheck clean;
# bench/gebrd.py --lanes against the staged sweep it replaces, forced side by side:
# float64 16 x 16 239 us against 991, 32 x 32 537 against 917, 8 x 8 162 against 1521,
# 32 x 16 642 against 645 (level); float32 16 x 16 244 against 1494, 32 x 32 590 against
# 1425, 16 x 32 763 against 1146).
LANES_BY_DEFAULT = True
# The blocked design with panels of 16 on clusters of 2, 4 and 8 blocks a matrix
# (H100: 132 SMs, one 256-thread block each at LABRD's 253 registers; the cluster
# size so that count x cluster fills them: 64 matrices 2, 32 4, 16 8).
CLUSTER_SETTINGS = tuple(GebrdSetting(32, 8, False, 16, False, c) for c in (2, 4, 8))
# Whether the chooser takes a cluster setting (cluster_setting_for) for batches that
# leave SMs idle: on since its first device run (H100, 2026-12-07, bench/gebrd.py
# --cluster, one block a matrix against clusters, all forced): float64 512 x 512 (32
# matrices) 46.5 ms one block, 33.3 on clusters of 2, 43.4 of 4, 69.7 of 8; 1024 x 512
# (16) 88.7, 54.4 / 36.9 / 49.6; 512 x 256 (64) 16.8, 13.2 (2) / 30.9 (4); 256 x 256
# (128) 10.1, 15.1 (2); float32 512 x 512 (64) 39.8, 30.0 (2) / 73.0 (4); 1024 x 512 (32)
# 77.5, 50.2 / 59.2 / 83.6; 512 x 256 (128) 13.5, 18.8 (2).
CLUSTER_BY_DEFAULT = True
# The fewest rows (columns) of the longer side a cluster's block keeps (cluster_setting_for).
CLUSTER_MIN_SPLIT = 256
GEBRD_SETTINGS = (*STAGED_SETTINGS, *BLOCKED_SETTINGS, *CLUSTER_SETTINGS, *LANES_SETTINGS)
# The blocked design's GEMV-Ns on the panel's <= nb + 1 columns (about twelve a step: V,
# X, Y times a short vector) with a thread a row instead of the 32 x 8 shape, whose
# passes of 128 rows each wait for their loads and three barriers: counted at 512 x 512
# float64 (session 16's 85 us a step = about 21 us fixed + 1.4 MB at 22 GB/s), the fixed
# part is about six such GEMVs of four passes.  A kernel argument, not a setting (no
# more instantiations).  On since its first device run (H100, 2026-12-07, bench/gebrd.py
# --cluster's "narrow" rows, one run): float64 1024 x 512 one block 84.1 ms against 88.7,
# on clusters of 8 46.9 against 49.6, 512 x 512 45.6 against 46.5, 512 x 256 16.3 against
# 16.8; float32 1024 x 512 73.7 against 77.5 (clusters of 4: 54.9 against 59.2), 512 x
# 256 13.0 against 13.5; level on clusters of 2 (13.30 / 13.23, 30.09 / 30.03), 2 %
# slower at 256 x 256 (10.25 / 10.07, 14.05 / 13.72) and 512 x 512 on clusters of 4.
# Session 64 (H100, scratch/ab_gebrd: one block, two rounds in one process): float64 256 x
# 256 10.35 ms against 10.17 without, float32 14.15 against 13.80, float64 256 x 128 6.06
# against 5.98; 512 x 256 16.02 against 16.66, 512 x 512 45.6 against 46.6, float32 512 x
# 256 13.09 against 13.63.  So by size: from NARROW_GEMV_FROM rows or columns on.  None:
# that rule; True / False force either shape (bench/gebrd.py's A/B, tests, sanitize).
NARROW_GEMV = None
NARROW_GEMV_FROM = 512


def narrow_gemv_for(m: int, n: int) -> bool:
    """Do the blocked design's panel GEMVs take a thread a row for an m x n batch (its
    largest matrix)?  NARROW_GEMV when set, else from NARROW_GEMV_FROM on."""
    return max(m, n) >= NARROW_GEMV_FROM if NARROW_GEMV is None else bool(NARROW_GEMV)


# ORGBR's thread shapes (orgbr_kernel has no stage or nb).
ORGBR_SETTINGS = tuple(GebrdSetting(x, y, False) for x, y in _SHAPES)

# The panel width 16 is the paper's best for GEBRD, and measured so here (every
# setting timed on the H100, as bench/gebrd.py --sweep does: on square matrices
# nb = 16 beat 32 by 5-9 % in float64 from 192 to 512; in float32 the two were
# within 1 % at 192 and nb = 16 won by 2-6 % beyond).
DEFAULT_BLOCKED = GebrdSetting(32, 8, False, 16)


def _threads_for(dim: int) -> tuple[int, int]:
    """ORGBR's thread shape for the largest dimension: about one thread per row
    of the GEMV up to 128 threads, eight warps beyond."""
    if dim <= 16:
        return 8, 4
    if dim <= 48:
        return 16, 4
    if dim <= 128:
        return 32, 4
    return 32, 8


def _staged_shape(dim: int, itemsize: int) -> tuple[int, int]:
    """The big-tile thread shape for the largest dimension, as measured on the H100
    (every setting timed on 64 MiB of float64 / float32 matrices, as
    bench/gebrd.py --sweep does; session 16): the sweep is bound by its
    barriers' latency, so small matrices want small blocks, more of them per SM: 8 x 4 up to 32 (1.4x faster than
    16 x 4 there), 16 x 4 up to 64; past that one or two blocks fit per SM and
    larger blocks win: 32 x 8 (float32 32 x 4 up to 96), and 32 x 16 past 128
    (1.04x at 160 in float64, 1.13-1.2x at 192, 256 x 128 and 320 x 160 in
    float32).  32 x 32 was slower everywhere (not registered)."""
    if dim <= 32:
        return 8, 4
    if dim <= 64:
        return 16, 4
    if dim <= 96 and itemsize == 4:
        return 32, 4
    if dim <= 128:
        return 32, 8
    return 32, 16


def lanes_setting_for(m: int, n: int, dtype):
    """The lanes setting for m x n matrices of ``dtype``: the smallest group (8, 16, 32)
    that holds max(m, n) rows, for real types; None otherwise."""
    return next((s for s in LANES_SETTINGS if s.fits(m, n, dtype)), None)


def choose_gebrd_setting(m: int, n: int, dtype, smem_limit: int = 227 * 1024, count: int = 0,
                         sm_count: int = 132) -> GebrdSetting:
    """Default setting for the largest (m, n) of a batch of ``count`` matrices of ``dtype``.

    * lanes for real matrices up to 32 x 32 (:func:`lanes_setting_for`) once
      ``LANES_BY_DEFAULT`` is on (measured: see there);
    * big-tile (staged) while the matrix fits into the device's opt-in shared
      memory (227 KiB on H100: square up to n = 166 in float64, 117 in
      complex128, 238 in float32), tall and wide too: on the H100 it beats
      the blocked design wherever it fits (2.0x at 128 and 160 in float64,
      1.9x at 192 in float32), so there is no switch-over by size as in the
      paper (K40c, 128);
      the thread shape by :func:`_staged_shape`, or one with half the threads
      where that one's GEMV work does not fit beside the matrix;
    * blocked (LABRD panels of 16 + GEMM trailing update, 256 threads) beyond;
      on narrow matrices (min(m, n) <= 16) too long for shared memory that is
      the unblocked sweep in device memory (no panel); once
      ``CLUSTER_BY_DEFAULT`` is on (measured: see there), on a cluster of 2-8 blocks a
      matrix (:func:`cluster_setting_for`) when the batch leaves SMs idle.
    """
    dtype = np.dtype(dtype)
    itemsize = dtype.itemsize
    lanes = lanes_setting_for(m, n, dtype)
    if lanes is not None and LANES_BY_DEFAULT:
        return lanes
    x, y = _staged_shape(max(m, n), itemsize)
    for s in sorted(STAGED_SETTINGS, key=lambda s: -s.threads):
        # Half the threads at most: smaller blocks lose to the blocked design there
        # (8 x 4 and 16 x 4 at 160 took 1.9x and 1.1x its time).
        if x * y // 2 <= s.threads <= x * y and s.smem_bytes(m, n, itemsize) <= smem_limit:
            return s
    cluster = cluster_setting_for(m, n, count, sm_count)
    return cluster if cluster is not None and CLUSTER_BY_DEFAULT else DEFAULT_BLOCKED


def cluster_setting_for(m: int, n: int, count: int, sm_count: int = 132):
    """The cluster setting for ``count`` m x n matrices in the blocked design: the
    largest cluster (8, 4, 2 blocks) with count x cluster <= sm_count that leaves each
    block at least CLUSTER_MIN_SPLIT rows (columns) of the longer side, for matrices
    with a panel to split (min(m, n) > nb); None when a block a matrix already fills
    half the SMs or more, or the matrices are narrow or short.  Why the split's floor:
    measured on the H100 (CLUSTER_BY_DEFAULT's rows), clusters whose blocks kept 128
    rows lost to clusters of half the size (float64 512 x 512: 43.4 ms on 4 against
    33.3 on 2; 1024 x 512: 49.6 on 8 against 36.9 on 4), two barriers a step against
    less streaming per block."""
    if count <= 0 or min(m, n) <= DEFAULT_BLOCKED.nb:
        return None
    longest = max(m, n)
    return next((s for s in reversed(CLUSTER_SETTINGS)
                 if count * s.cluster <= sm_count and longest >= s.cluster * CLUSTER_MIN_SPLIT), None)


@dataclass(frozen=True)
class GebrdPlan:
    grid: int
    block: int
    smem: int
    xy_shared: bool = False  # blocked: X and Y in shared memory
    work_elems: int = 0      # blocked without xy_shared: device workspace (elements of T)


def plan_gebrd(setting: GebrdSetting, m_max: int, n_max: int, itemsize: int, count: int,
               smem_limit: int, sm_count: int = 132, resident: int = 0) -> GebrdPlan:
    """Grid, block and shared memory of one gebrd_kernel launch (pure).

    Lanes: 128 threads, 128 / group matrices a block at once, the grid at most the
    ``resident`` blocks when given (each group then walks several matrices, the
    next one's copy in flight while it reduces the current one, as svdvals'),
    ``smem`` the dynamic part (the stages).
    Otherwise one block per matrix, at most 2^31 - 1 blocks (grid-stride loop beyond).
    A staged setting whose matrix does not fit is a ValueError before launch.
    Blocked: X and Y go into shared memory when the whole layout fits the
    limit; otherwise into a device workspace of one (m_max + n_max) nb slot per
    block, the grid then capped at the blocks the device holds at once by their
    thread count (sm_count * 2048 / threads) so the workspace stays small.
    On a cluster: X and Y in the workspace, a slot per cluster, the grid a whole
    number of clusters, at most sm_count / cluster of them (one block an SM).
    """
    if setting.lanes:
        grid = grid_for(count, LANES_THREADS // setting.dim_x)
        return GebrdPlan(min(grid, resident) if resident else grid, LANES_THREADS,
                         setting.lanes_smem_bytes(itemsize)[0])
    if setting.blocked:
        smem = setting.smem_bytes(m_max, n_max, itemsize, xy_shared=False)
        if setting.cluster == 1:
            if min(m_max, n_max) <= setting.nb:  # no matrix has a panel: X and Y are never used
                return GebrdPlan(grid_for(count, 1), setting.threads, smem, False, 0)
            with_xy = setting.smem_bytes(m_max, n_max, itemsize, xy_shared=True)
            if with_xy <= smem_limit:
                return GebrdPlan(grid_for(count, 1), setting.threads, with_xy, True, 0)
        if smem > smem_limit:
            raise ValueError(f"setting {setting} needs {smem} bytes of shared memory for a {m_max} x {n_max} "
                             f"matrix (the device allows {smem_limit})")
        if setting.cluster > 1:  # a workspace slot per cluster
            clusters = max(1, min(count, sm_count // setting.cluster))
            return GebrdPlan(clusters * setting.cluster, setting.threads, smem, False,
                             clusters * (m_max + n_max) * setting.nb)
        grid = max(1, min(count, sm_count * max(1, 2048 // setting.threads)))
        return GebrdPlan(grid, setting.threads, smem, False, grid * (m_max + n_max) * setting.nb)
    smem = setting.smem_bytes(m_max, n_max, itemsize)
    if smem > smem_limit:
        raise ValueError(f"setting {setting} needs {smem} bytes of shared memory for a {m_max} x {n_max} "
                         f"matrix (the device allows {smem_limit}); use a setting with stage=False")
    return GebrdPlan(grid_for(count, 1), setting.threads, smem)


def plan_orgbr(setting: GebrdSetting, len_max: int, itemsize: int, count: int, smem_limit: int) -> GebrdPlan:
    smem = setting.orgbr_smem_bytes(len_max, itemsize)
    if smem > smem_limit:
        raise ValueError(f"orgbr needs {smem} bytes of shared memory for length {len_max} "
                         f"(the device allows {smem_limit})")
    return GebrdPlan(grid_for(count, 1), setting.threads, smem)


def choose_orgbr_setting(m: int, n: int) -> GebrdSetting:
    """ORGBR reads and writes the output in device memory (stage is ignored)."""
    x, y = _threads_for(max(m, n))
    return GebrdSetting(x, y, False)


def check_gebrd_setting(setting) -> None:
    check_setting(setting, GebrdSetting, GEBRD_SETTINGS)


def check_gebrd_fits(setting, m_max: int, n_max: int, dtype) -> None:
    """A forced lanes setting on complex matrices or ones longer than its group: a
    ValueError before any work (both backends)."""
    if setting is not None and not setting.fits(m_max, n_max, dtype):
        raise ValueError(f"setting {setting} reduces real matrices of at most {setting.dim_x} rows and "
                         f"columns, got {m_max} x {n_max} {np.dtype(dtype).name}")
