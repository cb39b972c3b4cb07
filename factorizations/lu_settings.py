"""LU settings as data, the default chooser and the launch plan (pure: testable on the CPU).

A setting becomes template arguments of ``factorizations/lu.cu``:

- ``fused`` (``getrf_fused_kernel<..., NB, G>``): matrices with max(m, n) <= NB sit whole
  in shared memory, one group of G threads each; GESV solves in the same launch.
  Groups of at most 32 threads share a block (up to 256 threads, fewer when their
  shared memory would pass 48 KiB).
- ``blocked`` (``getrf_blocked_kernel<..., NB, G>``): one block of G = 256 threads per
  matrix, the matrix in global memory, panels of NB columns in shared memory (all
  rows of the panel: shared memory grows with m), trailing updates by gemm tiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import check_setting

SOFT_SMEM = 48 * 1024      # keep sub-warp blocks under this: several blocks per SM
FUSED_BLOCK = 256          # lu_fused_block_threads() in lu.cu for groups <= 32
GEMV_UNROLL = 4            # bdf::GEMV_UNROLL (gemv.cuh)
GEMM_BLK = 32              # LU_GEMM_BLK in lu.cu


def _align16(v: int) -> int:
    return -(-v // 16) * 16


def vector_work_bytes(group: int) -> int:  # bdf::vector_work_bytes (vector.cuh)
    return (group // 32) * 48 if group > 32 else 0


def lu_work_bytes(group: int, itemsize: int) -> int:  # bdf::lu_work_bytes (lu.cuh)
    if group <= 32:
        return 0
    return max(group * GEMV_UNROLL * itemsize, vector_work_bytes(group))


@dataclass(frozen=True)
class LuSetting:
    """``design`` 'fused' or 'blocked'; ``nb``: the largest matrix (fused) or the panel
    width (blocked); ``threads`` per matrix."""

    design: str
    nb: int
    threads: int

    @property
    def fused(self) -> bool:
        return self.design == "fused"

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
LU_SETTINGS = FUSED_SETTINGS + BLOCKED_SETTINGS


def panel_ld(m: int) -> int:
    """The blocked panel's leading dimension in shared memory: odd, so that the row
    swaps (stride lds between threads) hit distinct banks."""
    return max(1, m | 1)


def choose_lu_setting(m: int, n: int, itemsize: int, smem_limit: int = 227 * 1024) -> LuSetting:
    """Default setting for the largest m and n of a batch.

    Up to 64 the fused design: the smallest NB that covers the matrix (a thread
    per row: 8 threads for 8 x 8).  Beyond, blocked with the widest panel whose
    shared memory fits (32 columns: one warp per U12 column, a single GEMM k-step).
    First guesses, to be replaced by ``bench/solve.py`` measurements.
    """
    size = max(m, n)
    for s in FUSED_SETTINGS:
        if size <= s.nb and s.fits(m, n, itemsize, smem_limit):
            return s
    for s in reversed(BLOCKED_SETTINGS):
        if s.fits(m, n, itemsize, smem_limit):
            return s
    raise ValueError(f"no LU setting fits matrices of {m} x {n} with {itemsize}-byte elements in "
                     f"{smem_limit} bytes of shared memory (the blocked panel keeps all {m} rows)")


@dataclass(frozen=True)
class LuPlan:
    grid: int
    block: int
    smem: int
    groups: int
    lds: int          # blocked: the panel's leading dimension (0 for fused)


def plan_lu(setting: LuSetting, m_max: int, n_max: int, itemsize: int, count: int, smem_limit: int) -> LuPlan:
    """Grid, block and dynamic shared memory of one GETRF/GESV launch.

    A fused setting too small for the matrices, or a setting whose shared memory
    passes the device's limit, is a ValueError naming both.
    """
    if setting.fused:
        if max(m_max, n_max) > setting.nb:
            raise ValueError(f"setting {setting} takes matrices up to {setting.nb} x {setting.nb}, "
                             f"got {m_max} x {n_max}")
        per_group = setting.group_bytes(itemsize)
        if per_group > smem_limit:
            raise ValueError(f"setting {setting} needs {per_group} bytes of shared memory "
                             f"(the device allows {smem_limit})")
        groups = max(1, min(setting.max_groups_per_block, SOFT_SMEM // per_group))
        grid = max(1, min(-(-count // groups), 2**31 - 1))
        return LuPlan(grid, groups * setting.threads, groups * per_group, groups, 0)
    lds = panel_ld(m_max)
    smem = setting.blocked_bytes(lds, itemsize)
    if smem > smem_limit:
        raise ValueError(f"setting {setting} needs {smem} bytes of shared memory for m = {m_max} "
                         f"(the device allows {smem_limit}); use a narrower panel")
    return LuPlan(max(1, min(count, 2**31 - 1)), setting.threads, smem, 1, lds)


def check_lu_setting(setting) -> None:
    check_setting(setting, LuSetting, LU_SETTINGS)
