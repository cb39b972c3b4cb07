"""Cholesky (POTRF / POSV) settings as data, the default chooser and the launch plan.

A setting becomes template arguments of ``factorizations/cholesky.cu``:

``thread`` one thread per matrix (n <= ``nb`` <= 8) holds the named triangle in its
           registers, factors it and, for POSV, solves there too (one launch); blocks of
           DIM_X threads.  Compiled where the triangle's nb (nb + 1) / 2 elements take at
           most THREAD_REG_BYTES (``compiled_for``: nb = 8 for float32, float64 and
           complex64, nb <= 4 for complex128).  Packed batches stream through shared
           memory, a warp's chunk of 32 matrices at a time (``thread_stage_bytes``,
           bdf::warp_pipeline); the grid is then capped at the resident blocks.
``rows``   a group of DIM_X = L lanes per matrix (n <= ``nb`` <= L <= 32): lane i holds row
           i of the factor in registers, the group a copy in shared memory from which
           every lane reads the row each column needs (broadcast loads); POSV in the same
           launch.  Blocks of ROWS_BLOCK threads, 32 / L matrices per warp.  Compiled
           where a row of nb elements takes at most ROWS_REG_BYTES (nb = 32 but for
           complex128).
``warps``  one block of DIM_X threads (W = DIM_X / 32 warps) per matrix (n <= ``nb`` = 64
           or 128) holds it in registers, as LU's warps design: lane i of every warp rows
           i, i + 32, .., warp w the columns w, w + W, .. (bdf::potrf_warps, right-looking,
           one barrier a column with a one-column look-ahead); the matrix enters and the
           factor leaves through shared memory, where POSV solves in the same launch (the
           first right-hand side's L y = b rides through the factorization on a third
           warp, then bdf::trsv_window for L^H x = y).  Compiled where a thread's
           (nb / 32) x (nb / W) elements take at most WARPS_REG_BYTES (no complex128 at
           nb = 128).
``fused``  one thread group of DIM_X x DIM_Y threads per matrix keeps the whole
           named triangle in shared memory (n x n elements), factors it column by
           column (left-looking, one GEMV per column) and, for POSV, solves the
           right-hand sides there too: the whole POSV is one launch.  Groups of at
           most 32 threads share a block (several matrices per block); their
           shared memory grows as n^2, so the design serves small n.
``blocked`` one block of DIM_X x DIM_Y threads per matrix works on the matrix in
           global memory, a panel of ``nb`` (= 32) columns at a time: diagonal
           block factored in shared memory by the fused column routine, the
           rows below it solved against it (bdf::trsv_tile, one warp per row),
           the trailing lower triangle updated a 32 x 32 tile a warp (tiles
           above the diagonal skipped).  Shared memory does not grow with n.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._launch import grid_for
from ..settings import DesignKinds, check_setting, warp_pipe_plan_bytes

GEMV_UNROLL = 4          # bdf::GEMV_UNROLL in device_functions/gemv.cuh
BLOCK_SUBWARP = 256      # potrf_block_threads() in factorizations/cholesky.cu for groups <= 32
SOFT_SMEM = 48 * 1024    # keep blocks under this when possible: several blocks per SM
PANEL = 32               # POTRF_NB in cholesky.cu: the blocked design's panel width (one warp's tile)
SOLVE_MAX = 32           # the fused POSV solves with one bdf::trsv_tile: n <= 32
THREAD_REG_BYTES = 512   # POTRF_THREAD_REG_BYTES in cholesky.cu: the thread design's triangle
ROWS_REG_BYTES = 256     # the rows design's row of nb elements (LU's LU_ROWS_REG_BYTES rule)
ROWS_BLOCK = 128         # POTRF_ROWS_BLOCK in cholesky.cu
WARPS_REG_BYTES = 256    # the warps design's elements per thread (LU's LU_ROWS_REG_BYTES rule)


@dataclass(frozen=True)
class CholeskySetting(DesignKinds):
    """``design`` 'thread', 'rows', 'warps', 'fused' or 'blocked'; DIM_X x DIM_Y threads per
    matrix (the shape of the GEMV that updates each column); for 'thread' DIM_X threads
    per block, one matrix of at most ``nb`` x ``nb`` each; for 'rows' DIM_X lanes per
    matrix of at most ``nb`` x ``nb``; for 'warps' a block of DIM_X threads per matrix
    of at most ``nb`` x ``nb``.  ``fuse_solve`` False: a fused
    setting that leaves POSV's solves to the TRSV kernels (a second and third
    launch) instead of compiling them into the factorization, whose register
    use they raise (double, 32 x 4 threads: 160 registers with the solve, 56
    without); kept to measure which is faster."""

    design: str
    dim_x: int
    dim_y: int = 1
    fuse_solve: bool = True
    nb: int = 0

    @property
    def group_threads(self) -> int:
        return 1 if self.thread else self.dim_x * self.dim_y

    def compiled_for(self, itemsize: int) -> bool:
        """Is this setting instantiated for elements of ``itemsize`` bytes?"""
        if self.rows:
            return self.nb * itemsize <= ROWS_REG_BYTES
        if self.warps:
            r, c = self.warps_piece
            return r * c * itemsize <= WARPS_REG_BYTES
        return not self.thread or self.nb * (self.nb + 1) // 2 * itemsize <= THREAD_REG_BYTES

    @property
    def warps_piece(self) -> tuple[int, int]:
        """Warps design: (R, C), the rows (nb / 32) and columns (nb / W) a thread holds."""
        return (self.nb // 32, self.nb // (self.dim_x // 32)) if self.warps else (0, 0)

    def warps_bytes(self, itemsize: int) -> int:
        """Shared memory of the warps design: PotrfWarpsSmem<T, NB, THREADS>::total in cholesky.cu."""
        nb = self.nb
        sl = _align16(nb * (nb + 1) * itemsize)
        sy = _align16(sl + 4 * nb * itemsize + self.dim_x * GEMV_UNROLL * itemsize)
        sstep = _align16(sy + 3 * itemsize)
        return _align16(sstep + 12)

    def thread_stage_bytes(self, n: int, nrhs: int, itemsize: int, smem_limit: int) -> int:
        """Thread design: the pipeline's shared memory (bdf::warp_pipeline) for packed
        n x n matrices whose factor C leaves through it, with the one right-hand side
        staged when there is one: double-buffered, late or 0 (warp_pipe_plan_bytes)."""
        return warp_pipe_plan_bytes(self.dim_x, n * n, n if nrhs == 1 else 0, True, itemsize, smem_limit)

    @property
    def max_groups_per_block(self) -> int:
        return 1 if self.group_threads > 32 else BLOCK_SUBWARP // self.group_threads

    @property
    def gemv_work(self) -> int:
        """Elements of bdf::gemv_n's reduction space (groups of more than one warp)."""
        return self.group_threads * GEMV_UNROLL if self.group_threads > 32 else 0

    def can_solve(self, n_max: int) -> bool:
        """Can the kernel also solve (POSV in one launch): the thread design always, the
        fused one with one trsv_tile per solve."""
        if self.thread or self.rows or self.warps:
            return n_max <= self.nb
        return self.fused and self.fuse_solve and n_max <= min(self.group_threads, SOLVE_MAX)

    def group_bytes(self, n_max: int, itemsize: int, nrhs: int = 0) -> int:
        """Shared memory of one group; the same sum as the kernels' ``group_bytes``."""
        if self.fused:
            elems = n_max * n_max + self.gemv_work + (n_max if nrhs else 0)
        else:
            warps = self.group_threads // 32
            elems = PANEL * PANEL + self.gemv_work + warps * PANEL
        return -(-(elems * itemsize) // 16) * 16

    def template_args(self) -> str:
        return f"{self.nb}, {self.dim_x}" if self.register else f"{self.dim_x}, {self.dim_y}"

    @property
    def register(self) -> bool:
        """A design that holds the matrix in registers (thread, rows, warps): n <= nb."""
        return self.thread or self.rows or self.warps

    def __str__(self) -> str:
        if self.register:
            return f"potrf_{self.design}{self.nb}x{self.dim_x}"
        return f"potrf{self.dim_x}x{self.dim_y}{self.design}{'' if self.fuse_solve else '_apart'}"


FUSED_SETTINGS = (
    # sub-warp and warp groups: several matrices per block, POSV fused for n <= group size
    CholeskySetting("fused", 4), CholeskySetting("fused", 8), CholeskySetting("fused", 16),
    CholeskySetting("fused", 32),
    # four warps per matrix: n up to what n^2 elements of shared memory allow
    CholeskySetting("fused", 32, 4),
    # the same kernels without the solve compiled in (POSV = factor + TRSV launches)
    CholeskySetting("fused", 16, fuse_solve=False), CholeskySetting("fused", 32, fuse_solve=False),
    CholeskySetting("fused", 32, 4, fuse_solve=False),
)
BLOCKED_SETTINGS = (CholeskySetting("blocked", 32, 4), CholeskySetting("blocked", 32, 8))
THREAD_SETTINGS = tuple(CholeskySetting("thread", 128, nb=nb) for nb in (2, 4, 8))
ROWS_SETTINGS = (CholeskySetting("rows", 16, nb=16), CholeskySetting("rows", 32, nb=32))
WARPS_SETTINGS = tuple(CholeskySetting("warps", t, nb=nb) for nb, t in ((64, 128), (64, 256), (128, 256), (128, 512)))
# Every setting a launcher may pick (each a registered instantiation, compiled in CI).
CHOLESKY_SETTINGS = THREAD_SETTINGS + ROWS_SETTINGS + WARPS_SETTINGS + FUSED_SETTINGS + BLOCKED_SETTINGS


def choose_cholesky_setting(n: int, itemsize: int = 8, smem_limit: int = 227 * 1024) -> CholeskySetting:
    """Default setting for the largest n of a batch (``bench/posv.py``; H100, double, one
    right-hand side: thread 234 us at 8 x 8 against 939 for fused8, rows 395 us at 16
    x 16 and 568 at 32 x 32 against 1079 and 1637 for fused16 and fused32).

    Up to 8 the thread design where it is compiled (one thread per matrix, the
    smallest nb that covers n), then up to 32 the rows design where compiled (a lane
    per row, 16 or 32 lanes).  Otherwise up to 32: the smallest power-of-two lane
    group that covers n (fused: one trsv_tile per solve, several matrices per block).
    Up to 128 the warps design where compiled and fitting (_WARPS_CHOICE: the smallest
    nb that covers n, the threads measured best for the element size).  Otherwise up
    to 64: the fused design with four warps while n^2 elements stay under the 48 KiB
    soft limit (n = 64 in double: 32 KiB).  Beyond: blocked, four warps, eight for
    4-byte elements from n = 256 (H100, POTRF after session 32's trailing update:
    float32 256 2.63 ms with eight against 2.87, 160 2.35 against 1.89; float64 256
    1.96 against 1.77, 192 1.96 against 1.79).
    """
    for s in THREAD_SETTINGS:
        if n <= s.nb and s.compiled_for(itemsize):
            return s
    for s in ROWS_SETTINGS:
        if n <= s.nb and s.compiled_for(itemsize):
            return s
    for s in FUSED_SETTINGS[:4]:
        if n <= s.group_threads:
            return s
    for nb in (64, 128):
        s = CholeskySetting("warps", _WARPS_CHOICE.get((nb, itemsize), 0), nb=nb)
        if n <= nb and s in WARPS_SETTINGS and s.compiled_for(itemsize) and s.warps_bytes(itemsize) <= smem_limit:
            return s
    big = FUSED_SETTINGS[4]
    if n <= 64 and big.group_bytes(n, itemsize) <= min(SOFT_SMEM, smem_limit):
        return big
    return BLOCKED_SETTINGS[1] if itemsize == 4 and n >= 256 else BLOCKED_SETTINGS[0]


# The warps design's threads by (nb, element size), measured on the H100 side by side
# (scratch A/B of every setting, 256 MiB of matrices, one right-hand side): DPOSV 64 x 64
# 1.11 ms with warps64x128 against 1.30 (64x256) and 1.23 (fused 32x4), DPOTRF 0.73 against
# 1.02 and 1.03; DPOSV 128 x 128 1.50 ms with warps128x512 against 1.99 for blocked 32x8;
# SPOTRF 128 x 128 1.34 ms with warps128x256 against 1.91 (128x512), SPOSV 1.61 and 1.59;
# at 40 x 40 (double, factor only) warps64x128 and fused 32x4 within 3 %.  complex64 at
# 128 has only 512 threads compiled, complex128 only warps64x256 (not timed).
_WARPS_CHOICE = {(64, 4): 128, (64, 8): 128, (64, 16): 256, (128, 4): 256, (128, 8): 512}


def _align16(v: int) -> int:
    return -(-v // 16) * 16


@dataclass(frozen=True)
class CholeskyPlan:
    grid: int
    block: int
    smem: int
    groups: int


def plan_cholesky(setting: CholeskySetting, n_max: int, itemsize: int, count: int, smem_limit: int,
                  nrhs: int = 0, packed: bool = True) -> CholeskyPlan:
    """Grid, block and dynamic shared memory of one launch (pure: testable on the CPU).

    A thread setting too small for n_max or not compiled for the element size is a
    ValueError; its shared memory (the pipeline, only for a ``packed`` uniform batch)
    is optional, and its grid covers every chunk of 32 matrices once (the launcher
    caps it at the resident blocks when the pipeline runs).

    Sub-warp groups share a block; fewer of them are launched when their shared
    memory would pass 48 KiB.  A fused setting whose one group exceeds the
    device's limit, or a solve the fused kernel cannot do, is a ValueError.
    """
    if setting.register:
        _check_register_setting(setting, n_max, itemsize)
    if setting.warps:
        smem = setting.warps_bytes(itemsize)
        if smem > smem_limit:
            raise ValueError(f"setting {setting} needs {smem} bytes of shared memory (the device allows {smem_limit})")
        return CholeskyPlan(grid_for(count, 1), setting.dim_x, smem, 1)
    if setting.rows:
        groups = ROWS_BLOCK // setting.dim_x
        return CholeskyPlan(grid_for(count, groups), ROWS_BLOCK, 0, groups)
    if setting.thread:
        smem = setting.thread_stage_bytes(n_max, nrhs, itemsize, smem_limit) if packed else 0
        return CholeskyPlan(grid_for(count, setting.dim_x), setting.dim_x, smem, setting.dim_x)
    if nrhs and not setting.can_solve(n_max):
        raise ValueError(f"setting {setting} cannot solve in the same launch for n = {n_max} "
                         f"(the fused solve needs n <= min(group threads, {SOLVE_MAX}))")
    per_group = setting.group_bytes(n_max, itemsize, nrhs)
    if per_group > smem_limit:
        raise ValueError(f"setting {setting} needs {per_group} bytes of shared memory for n = {n_max} "
                         f"(the device allows {smem_limit}); use a blocked setting")
    groups = max(1, min(setting.max_groups_per_block, SOFT_SMEM // per_group))
    return CholeskyPlan(grid_for(count, groups), groups * setting.group_threads, groups * per_group, groups)


def _check_register_setting(setting: CholeskySetting, n_max: int, itemsize: int) -> None:
    """A thread, rows or warps setting takes matrices up to nb and runs where it is compiled."""
    nb = setting.nb
    if n_max > nb:
        raise ValueError(f"setting {setting} takes matrices up to {nb} x {nb}, got n = {n_max}")
    if not setting.compiled_for(itemsize):
        if setting.rows:
            held, budget, instead = f"a row of {nb} of them", ROWS_REG_BYTES, "a fused setting"
        elif setting.warps:
            r, c = setting.warps_piece
            held, budget = f"a thread's {r} x {c} of them", WARPS_REG_BYTES
            instead = "a setting with more threads or a blocked one"
        else:
            held, budget = f"the triangle of an {nb} x {nb} matrix", THREAD_REG_BYTES
            instead = "a smaller thread setting or a fused one"
        raise ValueError(f"setting {setting} is not compiled for {itemsize}-byte elements ({held} passes the "
                         f"register budget of {budget} bytes); use {instead}")


def check_cholesky_setting(setting) -> None:
    check_setting(setting, CholeskySetting, CHOLESKY_SETTINGS)
