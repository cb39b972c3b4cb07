"""LU settings as data, the default chooser and the launch plan (pure: testable on the CPU).

A setting becomes template arguments of ``factorizations/lu.cu``:

- ``fused`` (``getrf_fused_kernel<..., NB, G>``): matrices with max(m, n) <= NB sit whole
  in shared memory, one group of G threads each; GESV solves in the same launch.
  Groups of at most 32 threads share a block (up to 256 threads, fewer when their
  shared memory would pass 48 KiB).
- ``blocked`` (``getrf_blocked_kernel<..., NB, G>``): one block of G = 256 threads per
  matrix, the matrix in global memory, panels of NB columns in shared memory (all
  rows of the panel: shared memory grows with m), trailing updates by gemm tiles.
- ``thread`` (``getrf_thread_kernel<..., NB, THREADS>``): max(m, n) <= NB <= 8, one
  thread per matrix with the whole matrix in registers, blocks of THREADS threads;
  GESV solves in the same launch, as fused.  Instantiated only where the matrix's
  register array holds at most LU_THREAD_REG_BYTES (``compiled_for``): NB = 8 for
  float32, float64 and complex64, NB = 4 for every dtype.  Shared memory
  (``thread_stage_bytes``) lets each warp copy its next 32 matrices while it factors
  the current ones, when they are one packed run; the grid is then capped at the
  blocks the GPU holds at once (the launcher knows the kernel's registers).  Packed
  NB x NB matrices at a 16-byte aligned address take the setting's direct kernel
  (``getrf_direct_kernel``: 16-byte loads a thread, no pipeline) unless the factors are
  stored and a matrix passes 32 bytes (lu.py's ``_takes_direct``).
- ``rows`` (``getrf_rows_kernel<..., NB, L>``): max(m, n) <= NB = R L, a group of L = threads
  lanes per matrix, lane i holding rows i, i + L, .. (R of them) in registers (32 / L
  matrices per warp, blocks of ROWS_BLOCK threads); the pivot search is three (float:
  two) full-warp reductions per group of the warp, and each pivot row is stored once as
  a row of U in the group's static shared memory and read by broadcast loads; no
  barrier beyond __syncwarp.  GESV solves in the same launch, as fused.  NB x L = 8 x 8,
  16 x 16, 32 x 32 (one row per lane), 16 x 8, 16 x 4, 32 x 16 (two or four), each
  compiled where its R rows fit LU_ROWS_REG_BYTES (``compiled_for``).  For real types,
  packed NB x NB matrices at a 16-byte aligned address, X alone and one right-hand side
  take its direct kernel (``getrf_rows_direct_kernel``: m = n = NB at compile time).
- ``cols`` (``getrf_cols_kernel<..., NB, L>``): max(m, n) <= NB, real 4-byte elements, a
  group of L = threads lanes per matrix, lane k holding the column pieces k, k + L, .. (four
  columns each) of every row in registers (bdf::getf2_cols), 32 / L matrices per warp,
  blocks of COLS_BLOCK threads: the owner of a column finds its pivot in its own registers
  and shuffles the multipliers to the group; the first right-hand side rides through the
  factorization.  Compiled where a lane's NB x NB / L elements fit LU_COLS_REG_BYTES: 16 x 2
  for float32 only.  Packed NB x NB matrices at a 16-byte aligned address take its direct
  kernel (``getrf_cols_direct_kernel``: m = n = NB at compile time, no bounds tests, X
  alone with one right-hand side); the chooser takes the design only for those
  (``direct_solve``).
- ``warps`` (``getrf_warps_kernel<..., NB, THREADS>``): max(m, n) <= NB = 64 or 128, one
  block of THREADS per matrix held in registers: lane i of every warp the rows i, i + 32,
  .., warp w of the W = THREADS / 32 the columns w, w + W, .. (R = NB / 32 rows by C =
  NB / W columns a thread, compiled where they fit LU_ROWS_REG_BYTES).  One barrier a
  step (the next column's owner searches its pivot ahead); the matrix enters and the
  factors leave through shared memory (NB + 1 by NB), where GESV solves in the same
  launch.
- ``panels`` (``getrf_panels_kernel<..., NB, THREADS>``): the warps design's kernel with
  the matrix factored where it lies in shared memory (bdf::getf2_panels: blocked
  right-looking LU, warp 0 factoring a panel of 4 columns in its registers while the
  other warps apply the previous one; one barrier a panel).  Compiled where the matrix
  fits shared memory (every dtype but complex128 at NB = 128).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._launch import grid_for
from ..settings import DesignKinds, check_setting, warp_pipe_plan_bytes

SOFT_SMEM = 48 * 1024      # keep sub-warp blocks under this: several blocks per SM
FUSED_BLOCK = 256          # lu_fused_block_threads() in lu.cu for groups <= 32
ROWS_BLOCK = 128           # LU_ROWS_BLOCK in lu.cu
COLS_BLOCK = 64            # LU_COLS_BLOCK in lu.cu
GEMV_UNROLL = 4            # bdf::GEMV_UNROLL (gemv.cuh)
GEMM_BLK = 32              # LU_GEMM_BLK in lu.cu
# LU_THREAD_REG_BYTES in lu.cu: the thread design's register array of one matrix (NB x NB
# elements) holds at most 64 doubles' worth (128 of a thread's 255 registers), so that x,
# the pivots and the addresses fit beside it without spilling: NB = 8 for 4- and 8-byte
# elements (float32, float64, complex64), NB = 4 for complex128 (8 x 8 would be 256 registers).
LU_THREAD_REG_BYTES = 512
# The rows design's register array of a lane's R rows (R NB elements) holds at most 32
# doubles' worth (ptxas, sm_90: complex128 with NB = 32 needs 255 registers and spills 360
# bytes; within the budget every instantiation takes at most 128 registers and 40 bytes
# of spill).
LU_ROWS_REG_BYTES = 256
# The cols design's lane holds NB x NB / L elements: at most 128 floats (512 bytes; float32
# 16 x 16 with two lanes needs 202-239 registers in all, capped at 168 by lu.cu's
# LU_COLS_MIN_BLOCKS with 300-550 bytes of spill).
LU_COLS_REG_BYTES = 512
# The panels design's matrix lives in shared memory: compiled where WarpsSmem fits the
# H100's 227 KiB a block (complex128 at NB = 128 would need 280 KiB).
PANELS_SMEM_BYTES = 227 * 1024


def _align16(v: int) -> int:
    return -(-v // 16) * 16


def vector_work_bytes(group: int) -> int:  # bdf::vector_work_bytes (vector.cuh)
    return (group // 32) * 48 if group > 32 else 0


def lu_work_bytes(group: int, itemsize: int) -> int:  # bdf::lu_work_bytes (lu.cuh)
    if group <= 32:
        return 0
    return max(group * GEMV_UNROLL * itemsize, vector_work_bytes(group))


@dataclass(frozen=True)
class LuSetting(DesignKinds):
    """``design`` 'fused', 'blocked', 'thread', 'rows', 'cols', 'warps' or 'panels'; ``nb``:
    the largest matrix (fused, thread, rows, cols, warps, panels) or the panel width
    (blocked); ``threads`` per matrix (fused, blocked, warps, panels; rows and cols: the
    lanes of a group) or
    per block (thread: one thread per matrix)."""

    design: str
    nb: int
    threads: int

    @property
    def solves_in_launch(self) -> bool:
        """Fused, thread, rows and warps: GESV in the factorization's launch, A read in place
        (any strides, either orientation), max(m, n) <= nb."""
        return not self.blocked

    def compiled_for(self, itemsize: int) -> bool:
        """Is the setting instantiated for elements of ``itemsize`` bytes?  Every fused
        and blocked one is; a thread setting where its NB x NB matrix fits the register
        budget (LU_THREAD_REG_BYTES), a rows setting where its row of NB does
        (LU_ROWS_REG_BYTES)."""
        if self.thread:
            return self.nb * self.nb * itemsize <= LU_THREAD_REG_BYTES
        if self.warps:
            r, c = self.warps_piece
            return r * c * itemsize <= LU_ROWS_REG_BYTES
        if self.panels:
            return self.warps_bytes(itemsize) <= PANELS_SMEM_BYTES
        if self.cols:
            return self.nb * self.nb // self.threads * itemsize <= LU_COLS_REG_BYTES
        return not self.rows or self.rows_per_lane * self.nb * itemsize <= LU_ROWS_REG_BYTES

    @property
    def warps_piece(self) -> tuple[int, int]:
        """Warps design: (R, C), the rows (NB / 32: i, i + 32, ..) and columns (NB / W: w,
        w + W, ..) of the matrix a thread holds."""
        return (self.nb // 32, self.nb // (self.threads // 32)) if self.warps else (0, 0)

    def warps_bytes(self, itemsize: int) -> int:
        """Shared memory of the warps and panels designs: WarpsSmem<T, NB, THREADS>::total
        in lu.cu."""
        nb = self.nb
        sl = _align16(nb * (nb + 1) * itemsize)
        work = _align16(sl + 4 * nb * itemsize)
        sstep = _align16(work + lu_work_bytes(self.threads, itemsize))
        return _align16(sstep + 16 + 2 * nb * 4)

    @property
    def rows_per_lane(self) -> int:
        """Rows design: R = NB / L rows of the matrix in each lane's registers."""
        return self.nb // self.threads if self.rows else 0

    def thread_stage_bytes(self, m: int, n: int, nrhs: int, itemsize: int, write_lu: bool = False,
                           smem_limit: int = 227 * 1024) -> int:
        """Thread design: the pipeline's shared memory (bdf::warp_pipeline) for packed
        m x n matrices, ``nrhs`` right-hand sides (staged only when there is one) and
        the factors stored through it or not: double-buffered, late or 0 (off) by
        warp_pipe_plan_bytes."""
        return warp_pipe_plan_bytes(self.threads, m * n, n if nrhs == 1 else 0, write_lu, itemsize, smem_limit)

    @property
    def max_groups_per_block(self) -> int:
        return FUSED_BLOCK // self.threads if self.fused and self.threads <= 32 else 1

    def group_bytes(self, itemsize: int) -> int:
        """Shared memory of one fused group: lu_fused_group_bytes() in lu.cu."""
        nb = self.nb
        return _align16((nb + 1) * nb * itemsize + nb * itemsize + lu_work_bytes(self.threads, itemsize) + 2 * nb * 4)

    def blocked_bytes(self, lds: int, itemsize: int) -> int:
        """Shared memory of the blocked kernel: BlockedSmem::total() in lu.cu."""
        gemm = _align16(2 * self.nb * (GEMM_BLK + 1) * itemsize)
        u12 = _align16(self.nb * GEMM_BLK * itemsize)
        panel = _align16(lds * self.nb * itemsize)
        work = _align16(lu_work_bytes(self.threads, itemsize))
        return gemm + u12 + panel + work + _align16(self.nb * 4)

    def fits(self, m: int, n: int, itemsize: int, smem_limit: int) -> bool:
        if self.thread or self.rows or self.cols:  # shared memory optional (thread: staging), static or none
            return max(m, n) <= self.nb and self.compiled_for(itemsize)
        if self.warps or self.panels:
            return max(m, n) <= self.nb and self.compiled_for(itemsize) and self.warps_bytes(itemsize) <= smem_limit
        if self.fused:
            return max(m, n) <= self.nb and self.group_bytes(itemsize) <= smem_limit
        return self.blocked_bytes(panel_ld(m), itemsize) <= smem_limit

    def template_args(self) -> str:
        return f"{self.nb}, {self.threads}"

    def __str__(self) -> str:
        return f"lu_{self.design}{self.nb}x{self.threads}"


# Every setting a launcher may pick (each a registered instantiation, compiled in CI).
FUSED_SETTINGS = (LuSetting("fused", 4, 4), LuSetting("fused", 8, 8), LuSetting("fused", 16, 16),
                  LuSetting("fused", 32, 32), LuSetting("fused", 64, 64))
BLOCKED_SETTINGS = (LuSetting("blocked", 8, 256), LuSetting("blocked", 16, 256), LuSetting("blocked", 32, 256))
THREAD_SETTINGS = (LuSetting("thread", 2, 128), LuSetting("thread", 4, 128), LuSetting("thread", 8, 128))
ROWS_SETTINGS = (LuSetting("rows", 8, 8), LuSetting("rows", 16, 16), LuSetting("rows", 32, 32),
                 LuSetting("rows", 16, 8), LuSetting("rows", 16, 4), LuSetting("rows", 32, 16))
COLS_SETTINGS = (LuSetting("cols", 16, 2),)
WARPS_SETTINGS = (LuSetting("warps", 64, 128), LuSetting("warps", 64, 256), LuSetting("warps", 128, 256),
                  LuSetting("warps", 128, 512))
PANELS96 = LuSetting("panels", 96, 256)    # the default to n = 96 (two float64 blocks an SM)
PANELS128 = LuSetting("panels", 128, 256)  # the default from 97 to 128
PANELS_SETTINGS = (PANELS128, LuSetting("panels", 128, 512), PANELS96)
LU_SETTINGS = (FUSED_SETTINGS + BLOCKED_SETTINGS + THREAD_SETTINGS + ROWS_SETTINGS + COLS_SETTINGS + WARPS_SETTINGS
               + PANELS_SETTINGS)


def panel_ld(m: int) -> int:
    """The blocked panel's leading dimension in shared memory: odd, so that the row
    swaps (stride lds between threads) hit distinct banks."""
    return max(1, m | 1)


def choose_lu_setting(m: int, n: int, itemsize: int, smem_limit: int = 227 * 1024, *,
                      direct_solve: bool = False,
                      is_complex: bool = False) -> LuSetting:
    """Default setting for the largest m and n of a batch.

    Up to 8 the thread design where it is compiled (one thread per matrix in
    registers); float32 16 x 16 the cols design for a ``direct_solve`` (one packed run
    of matrices at a 16-byte aligned address, X alone wanted, one right-hand side: its
    direct kernel, the note after _ROWS_CHOICE); then up to 32 the rows design for
    elements of at most 8 bytes (a row per lane; two for float32 from 17 to 24:
    _ROWS_CHOICE), then up to 64 the fused design (the smallest NB that covers the
    matrix; float64 from 45 the warps design: _WARPS64_FROM), up to 128 the panels
    design for elements of at most 8 bytes (a block per matrix in shared memory,
    blocked; NB = 96 up to 96, 128 above: the notes before _WARPS64_FROM); beyond,
    blocked with the widest panel whose shared memory fits (32 columns: one warp per
    U12 column, a single GEMM k-step).  Measured on an H100
    (``bench/solve.py``, GESV with one right-hand side and GETRF, 256 MB of
    operands, diagonally dominant matrices):
    the thread design is 2.6-4x faster than the fused one up to 4 x 4 and 1.4x
    (float64) to 3.3x (float32) at 8 x 8; session 8 gave it a per-warp pipeline
    (DGESV 290 / 171 / 208 us at 2 / 4 / 8).  Session 10: the rows design's pivot
    rows through shared memory (and its pivot search by integer reductions) made
    it the fastest from 9 to 32: DGESV 16 x 16 434 us (fused 652), 32 x 32 477 us
    (fused32 908, the old shuffle rows32 912); GETRF alone from 5 to 8 now also
    runs faster in the thread design (its 'late' pipeline since session 9: 345-361
    us against 504-572 for rows8 at 8 x 8, float64).  Session 11 (full-warp pivot
    reductions, unpredicated loads): DGESV 16 x 16 351 us, 32 x 32 456 us, SGESV
    16 x 16 422 us (16 x 8), 32 x 32 629 us.
    """
    size = max(m, n)
    for s in THREAD_SETTINGS:
        if s.fits(m, n, itemsize, smem_limit):
            return s
    if itemsize == 4 and not is_complex and direct_solve and m == n == COLS_SETTINGS[0].nb:
        return COLS_SETTINGS[0]
    if itemsize <= 8:
        for up_to, nb, lanes in _ROWS_CHOICE[itemsize]:
            if size <= up_to:
                return LuSetting("rows", nb, lanes)
    if size > 64 and itemsize <= 8:
        for s in (PANELS96, PANELS128):   # NB = 96 up to 96 (the note before _WARPS64_FROM)
            if s.fits(m, n, itemsize, smem_limit):
                return s
    if not is_complex and itemsize in _WARPS64_FROM and _WARPS64_FROM[itemsize] <= size <= 64:
        s = LuSetting("warps", 64, 128)
        if s.fits(m, n, itemsize, smem_limit):
            return s
    for s in FUSED_SETTINGS:
        if size <= s.nb and s.fits(m, n, itemsize, smem_limit):
            return s
    for s in reversed(BLOCKED_SETTINGS):
        if s.fits(m, n, itemsize, smem_limit):
            return s
    raise ValueError(f"no LU setting fits matrices of {m} x {n} with {itemsize}-byte elements in "
                     f"{smem_limit} bytes of shared memory (the blocked panel keeps all {m} rows)")


# The rows setting (NB, L) by element size: the first entry (up to, NB, L) that covers the matrix
# (measured on the H100, scratch A/B of every rows setting, GESV and GETRF): float32
# gained from two rows per lane up to session 13 (16 x 8: SGESV 16 x 16 518 us against 555
# for 16 x 16); since session 14's staged copy and fused forward solve a row per lane is
# faster at 16 (SGESV 16 x 16 339 us against 359 for 16 x 8, one process) and 32 x 16
# stays up to 24 (601 against 589 for 32 x 32: within the spread); float64 and complex64
# do not gain (16 x 8: DGESV 16 x 16 290 us against 267; complex64 760-960 us against 590-790).
_ROWS_CHOICE = {4: ((16, 16, 16), (24, 32, 16), (32, 32, 32)), 8: ((16, 16, 16), (32, 32, 32))}

# float32 16 x 16 in one packed run at a 16-byte aligned address, X alone wanted with one
# right-hand side (``direct_solve``: what the cols design's direct kernel takes): the cols
# design.  Measured on the H100 (bench/solve.py's batches): its direct kernel ran SGESV 16
# in 189 us against rows16x16's 337 (diagonally dominant), 243 against 340 with an
# interchange at most steps (random matrices); the general kernel (any layout, m, n <=
# 16) ran level with rows16x16 on the dominant batch (344 us) and slower on the random
# one (525), so other batches keep the rows design.  float64 with four lanes (254
# registers, two blocks an SM) ran level with rows16x16 (265 against 267 us), eight lanes
# slower (324), and a cp.async prefetch of the warp's next matrices into shared memory
# gained nothing in either precision (the design is bound by its dependent chains, not
# by its loads' latency): not registered.

# The warps setting's threads (NB = 128) by element size, from 65 to 128 (measured on the
# H100, scratch A/B of every setting side by side, GESV X only and GETRF, 256 MB of A):
# SGESV 128 x 128 2.31 ms (128 x 256; 3.94 with 512 threads, blocked 5.50), 96 x 96 3.07
# (blocked 6.11); DGESV 128 x 128 2.81 ms (blocked 3.26), 96 x 96 on a par with blocked
# (3.77 against 3.72 ms; DGETRF 3.22 against 3.45).  bench/solve.py: DGESV 128 2.64 ms
# (blocked 3.13), SGESV 128 2.20 (5.35), DGETRF 128 2.20 (2.91).  From 33 to 64 fused stays: DGESV
# 48 x 48 1.73 ms against 2.07 (warps 64 x 128), 64 x 64 1.65 against 1.66; SGESV 64 x 64
# 1.74 against 1.79.
# (Until session 20 the chooser took warps128x256 for 4-byte and warps128x512 for 8-byte
# elements here; they stay compiled, forced by setting=.)
# The panels design (256 threads) measured faster than warps from 65 to 128 on the H100 in
# session 19 (scratch A/B, GESV X only and GETRF, 256 MB of A, diagonally dominant): DGESV
# 128 2.12 ms against 2.28 (cupy.linalg.solve 2.39), 96 2.63 against 3.03, 72 3.60 against
# 4.26; SGESV 128 1.85 against 2.02 (cupy 2.99: 1.61x), 96 2.32 against 2.67, 72 3.13 against
# 3.77; DGETRF 128 1.94 against 2.04, SGETRF 128 1.67 against 2.04 (512 threads: slower, DGESV
# 128 2.36, SGESV 128 2.93).  Session 19's version signalled the next panel with bar.arrive,
# and compute-sanitizer's racecheck reported hazards in getf2_panels; with bar.sync
# (session 20) racecheck is clean and panels128x256 is the default for float32 and float64
# from 65 to 128.  complex64 keeps the warps design (not measured with panels).  Four-column
# panels since (LU_PANEL_COLS in lu.cu): DGESV 128 1.89 ms, SGESV 128 1.59 (bench/solve.py:
# 1.26x and 1.89x cupy).  complex64 too (same A/B, GESV X only): CGESV 128 2.70 ms against
# warps' 3.11, 96 3.30 against 4.23, 72 4.47 against 5.99 (cupy.linalg.solve: 2.44, 2.22, 2.48,
# faster still: a missed target of no issue, left for later).  Fewer update warps are
# slower in float64 (session 20, 128 threads, not registered: DGESV 128 2.81 ms against 2.15,
# 96 3.16 against 2.65; SGESV 128 1.88 against 1.86), so the update warps' throughput is
# part of the critical path too, not the panel warp's chain alone.
# NB = 96 (panels96x256) from 65 to 96, session 66 (scratch/ab_lu/ab10.py, H100, one
# process, GESV X alone and GETRF): a float64 or complex64 matrix at NB = 128 fills 128 KB of
# shared memory, one block an SM; at NB = 96 74.5 KB, two.  DGESV 72 2.80 -> 1.40 ms (cupy
# 2.15), 96 2.05 -> 1.06 (cupy 2.07); CGESV 72 3.62 -> 1.91, 96 2.72 -> 1.50; SGESV 72 2.13
# -> 1.67, 96 1.60 -> 1.27 (float32's blocks at NB = 128 were held to two an SM by registers,
# so its gain is the smaller tile's shorter loops); DGETRF 96 2.11 -> 1.09.

# Below 65, warps64x128 by element size from the given size on, real types only (measured on the
# H100 in session 14, scratch sweep of the fused and warps settings side by side, GESV X only,
# 256 MB of A; the tile solve of session 13 made the warps design's GESV faster): DGESV 64 1.11
# ms against fused 1.40, 56 1.28 against 1.46, 48 1.49 against 1.57, 40 1.84 against 1.77, 34
# 2.28 against 1.99; SGESV 64 1.61 against 1.63 (a tie: fused stays), 56 1.89 against 1.75;
# CGESV 64 1.95 against 1.56 (fused).
_WARPS64_FROM = {8: 45}


@dataclass(frozen=True)
class LuPlan:
    grid: int
    block: int
    smem: int
    groups: int       # matrices per block per turn (fused groups; thread: the block's threads)
    lds: int          # blocked: the panel's leading dimension (0 for fused and thread)


def plan_lu(setting: LuSetting, m_max: int, n_max: int, itemsize: int, count: int, smem_limit: int,
            nrhs: int = 0, write_lu: bool = True) -> LuPlan:
    """Grid, block and dynamic shared memory of one GETRF/GESV launch (``nrhs``
    right-hand sides solved in it, the factors stored or not).

    A fused or thread setting too small for the matrices, a thread setting not
    compiled for the element size, or a setting whose shared memory passes the
    device's limit, is a ValueError naming both.  The thread design's shared memory
    (its pipeline) is optional: 0 when it passes the limit.  Its grid covers every
    chunk of 32 matrices once; the launcher caps it at the resident blocks.
    """
    if setting.solves_in_launch and max(m_max, n_max) > setting.nb:
        raise ValueError(f"setting {setting} takes matrices up to {setting.nb} x {setting.nb}, "
                         f"got {m_max} x {n_max}")
    if setting.thread:
        if not setting.compiled_for(itemsize):
            raise ValueError(f"setting {setting} is not compiled for {itemsize}-byte elements (its {setting.nb} x "
                             f"{setting.nb} matrix of them passes the register budget of {LU_THREAD_REG_BYTES} "
                             f"bytes); use a smaller thread setting or a fused one")
        smem = setting.thread_stage_bytes(m_max, n_max, nrhs, itemsize, write_lu, smem_limit)
        return LuPlan(grid_for(count, setting.threads), setting.threads, smem, setting.threads, 0)
    if setting.rows or setting.cols:
        if not setting.compiled_for(itemsize):
            what, budget = (f"a row of {setting.nb} of them", LU_ROWS_REG_BYTES) if setting.rows else \
                (f"a lane's {setting.nb} x {setting.nb // setting.threads} of them", LU_COLS_REG_BYTES)
            raise ValueError(f"setting {setting} is not compiled for {itemsize}-byte elements ({what} passes "
                             f"the register budget of {budget} bytes); use a rows setting or a fused one")
        block = COLS_BLOCK if setting.cols else ROWS_BLOCK
        groups = block // setting.threads
        return LuPlan(grid_for(count, groups), block, 0, groups, 0)
    if setting.warps or setting.panels:
        if not setting.compiled_for(itemsize):
            why = (f"a thread's {setting.warps_piece[0]} x {setting.warps_piece[1]} elements pass the register "
                   f"budget of {LU_ROWS_REG_BYTES} bytes" if setting.warps else
                   f"its matrix passes {PANELS_SMEM_BYTES} bytes of shared memory")
            raise ValueError(f"setting {setting} is not compiled for {itemsize}-byte elements ({why}); use a "
                             f"setting with more threads or a blocked one")
        smem = setting.warps_bytes(itemsize)
        if smem > smem_limit:
            raise ValueError(f"setting {setting} needs {smem} bytes of shared memory (the device allows {smem_limit})")
        return LuPlan(grid_for(count, 1), setting.threads, smem, 1, 0)
    if setting.fused:
        per_group = setting.group_bytes(itemsize)
        if per_group > smem_limit:
            raise ValueError(f"setting {setting} needs {per_group} bytes of shared memory "
                             f"(the device allows {smem_limit})")
        groups = max(1, min(setting.max_groups_per_block, SOFT_SMEM // per_group))
        return LuPlan(grid_for(count, groups), groups * setting.threads, groups * per_group, groups, 0)
    lds = panel_ld(m_max)
    smem = setting.blocked_bytes(lds, itemsize)
    if smem > smem_limit:
        raise ValueError(f"setting {setting} needs {smem} bytes of shared memory for m = {m_max} "
                         f"(the device allows {smem_limit}); use a narrower panel")
    return LuPlan(grid_for(count, 1), setting.threads, smem, 1, lds)


def check_lu_setting(setting) -> None:
    check_setting(setting, LuSetting, LU_SETTINGS)
