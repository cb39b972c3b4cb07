"""BDSQR settings as data, the default chooser and the launch plan (the SVD's GPU side).

A ``BdsqrSetting`` picks the thread mapping of ``factorizations/bdsqr.cu``:

``group = 1``  one thread per matrix (singular values only).  The thread runs the
    scalar QR iteration on d and e kept in shared memory, laid out interleaved
    (element j of the block's slot g at ``base[j * slots + g]``) so that the
    threads of a warp touch consecutive words.  ``slots`` threads per block.
``group = 32`` one warp per matrix (values, or values and vectors).  Lane 0 runs
    the scalar recurrence and records the rotations of a sweep in shared
    memory; the 32 lanes then apply them, each to its own rows of u (u <- u G)
    and its own columns of vt (vt <- G^T vt), streaming along the row/column.
    ``slots`` warps per block.

``maxitr`` is LAPACK's MAXITR (6): a matrix whose inner QR steps exceed
``maxitr * k * k`` stops with info = the number of nonzero superdiagonals.  It
is a kernel argument, not a template one, so any value works with a compiled
(group, slots); tests force non-convergence with ``maxitr=0``.

Shared memory per slot (k the largest bidiagonal order of the launch, R the
real type): values ``2 k`` R (d, e); vectors ``6 k`` R (d, e and the left and
right rotations (c, s) of one sweep) + ``2 k`` int (sign flips, sort swaps) +
4 int (the sweep's descriptor), rounded to 16 bytes.  Blocks stay under 48 KiB
when they can (``slots`` shrinks), and a slot that alone exceeds the device's
opt-in limit is a ValueError: k <= 4,700 (double, vectors) on an H100, far
beyond the issue's 512.  Planning is pure: the CPU tests check it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._launch import grid_for

SOFT_SMEM = 48 * 1024   # above this a kernel must opt in; several blocks per SM below it
MAXITR = 6              # LAPACK xBDSQR's MAXITR
MAX_THREADS = 256       # __launch_bounds__ of bdsqr_kernel


def _align16(nbytes: int) -> int:
    return -(-nbytes // 16) * 16


@dataclass(frozen=True)
class BdsqrSetting:
    """``group`` threads per matrix (1 or 32), at most ``slots`` matrices per block,
    ``maxitr`` (LAPACK's MAXITR: at most maxitr * k^2 inner QR steps)."""

    group: int
    slots: int
    maxitr: int = MAXITR

    @property
    def threads_max(self) -> int:
        return self.group * self.slots

    def slot_bytes(self, k: int, itemsize: int, vectors: bool) -> int:
        """Shared memory of one matrix; the same sum as bdsqr_kernel's layout."""
        k = max(k, 1)
        if not vectors:
            return 2 * k * itemsize
        return _align16(6 * k * itemsize + (2 * k + 4) * 4)

    def template_args(self) -> str:
        return str(self.group)

    def __str__(self) -> str:
        kind = "thread" if self.group == 1 else "warp"
        extra = "" if self.maxitr == MAXITR else f"_maxitr{self.maxitr}"
        return f"bdsqr_{kind}x{self.slots}{extra}"


# Every (group) a launcher may pick is a registered instantiation; slots and maxitr are run-time.
BDSQR_SETTINGS = (
    BdsqrSetting(1, 128), BdsqrSetting(1, 32),    # a thread per matrix (values only)
    BdsqrSetting(32, 4), BdsqrSetting(32, 1),     # a warp per matrix (values, or with vectors)
)
GROUPS = (1, 32)


def choose_bdsqr_setting(k: int, vectors: bool, count: int = 1, multiprocessors: int = 132) -> BdsqrSetting:
    """Default setting for the largest bidiagonal order ``k`` of a launch.

    Vectors need a warp (the lanes apply the rotations).  Values alone: a
    thread per matrix, since the recurrence is scalar; when the batch is too
    small to give every SM a few warps of matrices (fewer than 4 * 32 per SM)
    and k is at least 64, a warp per matrix (its lane 0 iterating) spreads the
    matrices over more SMs and runs them apart (measured below).
    """
    if vectors:
        return BdsqrSetting(32, 4)
    # H100, float64 values: 256 of 128 x 128 12.2 ms a warp a matrix against 17.8 a thread
    # (128 matrices a block: two blocks in all), 1,024 of them 13.2 against 18.1, 256 of
    # 64 x 64 3.3 against 4.8; 8,192 complex 32 x 32 1.4 ms a thread against 3.9.
    if k >= 64 and count < 4 * 32 * multiprocessors:
        return BdsqrSetting(32, 4)
    return BdsqrSetting(1, 128)


# From this order on, the vectors' rotations go four streams and 8-16 pairs at a time
# (bdsqr.cu's WIDE kernels).  H100, BDSQR with vectors against a pair at a time:
# float64 128 x 128, 256 matrices 16.9 ms against 56.1, 96 x 96 (1,024) 11.8 against
# 31.2, 64 x 64 (4,096) 19.3 against 22.7, 48 x 48 (1,024) 2.9 against 4.3, 40 x 40
# (4,096) 7.7 against 7.7; complex64 128 x 128 (256) 12.0 against 41.5, complex128
# 64 x 64 (1,024) 7.0 against 12.8.  Below, many short sweeps of many matrices lose:
# 32,768 of 16 x 16 11.7 ms against 5.1, 8,192 complex128 32 x 32 10.9 against 8.2
# (WIDE takes 252-255 registers, a quarter of the warps).
BDSQR_WIDE_FROM = 48


def bdsqr_wide(k: int, vectors: bool) -> bool:
    return vectors and k >= BDSQR_WIDE_FROM


@dataclass(frozen=True)
class BdsqrPlan:
    grid: int
    block: int
    smem: int
    slots: int


def plan_bdsqr(setting: BdsqrSetting, k_max: int, itemsize: int, count: int, vectors: bool,
               smem_limit: int) -> BdsqrPlan:
    """Grid, block and dynamic shared memory of one launch (pure: testable on the CPU).

    ``itemsize`` is the REAL type's (4 or 8).  Fewer slots than the setting's
    are launched when their shared memory would pass 48 KiB (or when the batch
    is smaller); one slot over the device's limit is a ValueError.
    """
    if vectors and setting.group != 32:
        raise ValueError(f"setting {setting}: vectors need a warp per matrix (group=32)")
    per_slot = setting.slot_bytes(k_max, itemsize, vectors)
    if per_slot > smem_limit:
        raise ValueError(f"setting {setting} needs {per_slot} bytes of shared memory per matrix for "
                         f"k = {k_max} (the device allows {smem_limit})")
    slots = max(1, min(setting.slots, SOFT_SMEM // per_slot, max(count, 1)))
    grid = grid_for(count, slots)
    return BdsqrPlan(grid, slots * setting.group, _align16(slots * per_slot), slots)


def check_bdsqr_setting(setting) -> None:
    if setting is None:
        return
    if not isinstance(setting, BdsqrSetting):
        raise TypeError(f"setting must be a BdsqrSetting or None, got {type(setting).__name__}")
    if setting.group not in GROUPS:
        raise ValueError(f"setting {setting!r}: group must be one of {GROUPS}")
    if not isinstance(setting.slots, int) or not 1 <= setting.slots <= MAX_THREADS // setting.group:
        raise ValueError(f"setting {setting!r}: slots must be an int in [1, {MAX_THREADS // setting.group}]")
    if not isinstance(setting.maxitr, int) or setting.maxitr < 0:
        raise ValueError(f"setting {setting!r}: maxitr must be a non-negative int")


# --- one-sided Jacobi (values and vectors of small real matrices) -------------------------------

MAX_SWEEPS = 30          # LAPACK xGESVJ's NSWEEP
GESVJ_THREADS = 128      # gesvj.cu's block


@dataclass(frozen=True)
class GesvjSetting:
    """One-sided Jacobi SVD (``factorizations/gesvj.cu``; values, or values and
    vectors): ``group`` lanes hold a matrix of at most ``cols`` columns (even;
    the Jacobi's columns are min(m, n)) and ``group * rows_per_lane`` rows
    (max(m, n)) in registers, and with vectors the accumulated cols x cols
    right factor beside it; at most ``max_sweeps`` sweeps (info > 0 past them)."""

    cols: int
    group: int
    rows_per_lane: int
    max_sweeps: int = MAX_SWEEPS

    @property
    def rows_max(self) -> int:
        return self.group * self.rows_per_lane

    def fits(self, k: int, length: int) -> bool:
        """Whether a matrix with min(m, n) = k and max(m, n) = length fits."""
        return k <= self.cols and length <= self.rows_max

    def template_args(self) -> str:
        return f"{self.cols}, {self.group}, {self.rows_per_lane}"

    def __str__(self) -> str:
        extra = "" if self.max_sweeps == MAX_SWEEPS else f"_sweeps{self.max_sweeps}"
        return f"gesvj_c{self.cols}_{self.group}x{self.rows_per_lane}{extra}"


# Registered instantiations (float32 and float64 each).  The chooser takes the first that
# fits, so within a column count the order is the measured preference (H100, 32,768 square
# matrices, bench/svd.py --sweep): 8x8 4x2 before 2x4, 16x16 8x2 before 4x4.
GESVJ_SETTINGS = (
    GesvjSetting(4, 1, 4), GesvjSetting(4, 2, 4), GesvjSetting(4, 4, 4), GesvjSetting(4, 8, 4),
    GesvjSetting(8, 4, 2), GesvjSetting(8, 2, 4), GesvjSetting(8, 4, 4), GesvjSetting(8, 8, 4),
    GesvjSetting(16, 8, 2), GesvjSetting(16, 4, 4), GesvjSetting(16, 8, 4),
    GesvjSetting(32, 16, 2), GesvjSetting(32, 32, 1),
)
GESVJ_DEFAULT_MAX_K = 32   # the chooser's switch to the GEBRD -> BDSQR pipeline (see choose_gesvj_setting)


# (itemsize, cols, group, rows_per_lane) the chooser skips with vectors: ptxas spills them
# (double: 0.5-2.8 KB per thread) and they measured 2-4x slower than the next setting.
_VECTORS_SKIP = {(8, 32, 16, 2), (8, 16, 4, 4), (8, 16, 8, 4), (8, 8, 4, 4)}


def choose_gesvj_setting(k: int, length: int, dtype, limit_k: int = GESVJ_DEFAULT_MAX_K, vectors: bool = False):
    """The registered Jacobi setting for min(m, n) = k, max(m, n) = length and a
    real ``dtype``: the first in GESVJ_SETTINGS that fits (with ``vectors``, that
    ptxas does not spill); None when none fits, for
    complex types, or for k > ``limit_k``.  Measured on the H100 (32,768 square
    matrices, values, against GEBRD -> BDSQR): Jacobi 9-12x faster at 8x8, 2.4x
    (double) and 3.6x (float) at 32x32, 1.5x (float) at 17x17; even (0.96x) in
    double at 17x17, 1.17x at 20x20.  A setting holds at most 32 rows.  With
    ``vectors`` (svd): 20x (8x8) to 4.4x (32x32, double) faster than the pipeline."""
    import numpy as np

    dtype = np.dtype(dtype)
    if dtype.kind != "f" or k > limit_k:
        return None
    for s in GESVJ_SETTINGS:
        if s.fits(k, length) and not (vectors and (dtype.itemsize, s.cols, s.group, s.rows_per_lane) in _VECTORS_SKIP):
            return s
    return None


# --- GEBRD in registers, then dqds (values of small real matrices) ---------------------------

PASSES_PER_VALUE = 30    # dqds transforms allowed per value (info > 0 past them)


@dataclass(frozen=True)
class DqdsSetting:
    """Singular values (only) of small real matrices in two launches
    (``factorizations/svdvals_lanes.cu``): ``group`` lanes hold a matrix of at
    most ``group`` rows (max(m, n)) and ``cols`` columns (min(m, n)) in
    registers and reduce it to bidiagonal form; then a thread per matrix runs
    dqds on the bidiagonal, at most ``passes_per_value * min(m, n)`` transforms."""

    group: int
    cols: int
    passes_per_value: int = PASSES_PER_VALUE

    def fits(self, k: int, length: int) -> bool:
        return k <= self.cols and length <= self.group

    def template_args(self) -> str:
        return f"{self.group}, {self.cols}"

    def __str__(self) -> str:
        extra = "" if self.passes_per_value == PASSES_PER_VALUE else f"_passes{self.passes_per_value}"
        return f"dqds_g{self.group}_c{self.cols}{extra}"


DQDS_SETTINGS = (DqdsSetting(8, 8), DqdsSetting(16, 16), DqdsSetting(32, 32))
DQDS_DEFAULT_MAX_LENGTH = 32   # the chooser's reach (max(m, n))
# The chooser's switch from one-sided Jacobi, measured on the H100 (32,768 random
# matrices, values; Jacobi's time / ours in one process, scratch A/B of session 37, after
# dqds's warp rounds): float square k = 6 0.98, 8 0.93, 9 1.48, 10 1.48, 12 1.26, 14 1.08,
# 16 1.12, 20 1.87, 24 1.66, 28 1.51, 32 1.58; double 6 0.95, 8 0.91, 9 2.56, 10 2.35,
# 12 2.06, 14 1.83, 16 1.75, 20 2.77, 24 2.44, 28 1.78, 32 1.78.  Non-square ones win where
# the rows need no larger group than the columns (16 x 12 1.18 / 2.0, 32 x 24 1.74 / 2.49,
# float / double) and lose where they do (20 x 16 0.62 / 0.78, 24 x 16 0.61 / 0.77, 24 x 12
# 0.75 / 0.96, 32 x 16 0.61 / 0.76): Jacobi's group follows the columns.
DQDS_FROM_K = {4: 9, 8: 9}     # itemsize -> the smallest min(m, n) the chooser gives dqds
DQDS_MAX_ASPECT = 1.5          # ... and max(m, n) <= 1.5 min(m, n)


def choose_dqds_setting(k: int, length: int, dtype, limit: int = DQDS_DEFAULT_MAX_LENGTH):
    """The registered DqdsSetting for min(m, n) = k, max(m, n) = length and a real
    ``dtype`` (the first that fits), or None: complex types, length > ``limit``,
    or where one-sided Jacobi measured faster (k below DQDS_FROM_K, a matrix more
    than DQDS_MAX_ASPECT times as long as wide, or one whose rows need a larger
    setting than a square matrix of its columns would)."""
    import numpy as np

    dtype = np.dtype(dtype)
    if dtype.kind != "f" or length > limit or k < DQDS_FROM_K[dtype.itemsize] or length > DQDS_MAX_ASPECT * k:
        return None
    def first_fit(rows):
        return next((s for s in DQDS_SETTINGS if s.fits(k, rows)), None)

    s = first_fit(length)
    return s if s is not None and s == first_fit(k) else None


def check_svd_setting(setting) -> None:
    """``setting`` of svdvals / svd: None, a BdsqrSetting, a GesvjSetting or a DqdsSetting."""
    if isinstance(setting, DqdsSetting):
        if (setting.group, setting.cols) not in {(s.group, s.cols) for s in DQDS_SETTINGS}:
            raise ValueError(f"setting {setting!r} is not a registered dqds setting (group, cols): "
                             f"{[str(s) for s in DQDS_SETTINGS]}")
        if not isinstance(setting.passes_per_value, int) or setting.passes_per_value < 0:
            raise ValueError(f"setting {setting!r}: passes_per_value must be a non-negative int")
        return
    if isinstance(setting, GesvjSetting):
        if setting not in {GesvjSetting(s.cols, s.group, s.rows_per_lane, setting.max_sweeps)
                           for s in GESVJ_SETTINGS}:
            raise ValueError(f"setting {setting!r} is not a registered one-sided Jacobi setting "
                             f"(cols, group, rows_per_lane): {[str(s) for s in GESVJ_SETTINGS]}")
        if not isinstance(setting.max_sweeps, int) or setting.max_sweeps < 0:
            raise ValueError(f"setting {setting!r}: max_sweeps must be a non-negative int")
        return
    if setting is not None and not isinstance(setting, BdsqrSetting):
        raise TypeError("setting must be a BdsqrSetting, a GesvjSetting, a DqdsSetting or None, "
                        f"got {type(setting).__name__}")
    check_bdsqr_setting(setting)
