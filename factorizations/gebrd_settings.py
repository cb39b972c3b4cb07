"""GEBRD / ORGBR settings as data, the default chooser and the launch plan.

A ``GebrdSetting`` becomes the template arguments of ``factorizations/gebrd.cu``:
DIM_X x DIM_Y threads per matrix (the thread shape of the GEMVs inside
``bdf::larf_left`` (GEMV-T) and ``bdf::larf_right`` (GEMV-N)) and ``stage``:
True for the big-tile design (the whole matrix in shared memory for the sweep),
False for the sweep on the matrix in device memory.  One thread block per
matrix in both.  Planning is pure: the CPU tests check it.
"""

from __future__ import annotations

from dataclasses import dataclass

GEMV_UNROLL = 4        # bdf::GEMV_UNROLL (device_functions/gemv.cuh)
SOFT_SMEM = 48 * 1024  # above this a kernel must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize)


def _align16(nbytes: int) -> int:
    return -(-nbytes // 16) * 16


@dataclass(frozen=True)
class GebrdSetting:
    """DIM_X x DIM_Y threads per matrix; ``stage`` keeps the matrix in shared memory."""

    dim_x: int
    dim_y: int
    stage: bool = True

    @property
    def threads(self) -> int:
        return self.dim_x * self.dim_y

    def gemv_work_elems(self) -> int:  # bdf::larf_work_elems<DIM_X, DIM_Y>()
        return self.threads * GEMV_UNROLL if self.threads > 32 and self.dim_y > 1 else 0

    def vector_work_bytes(self) -> int:  # bdf::vector_work_bytes(G)
        return (self.threads // 32) * 48 if self.threads > 32 else 0

    def smem_bytes(self, m_max: int, n_max: int, itemsize: int) -> int:
        """Dynamic shared memory of gebrd_kernel: the same sum as the kernel's layout."""
        mat = _align16(m_max * n_max * itemsize) if self.stage else 0
        return (mat + _align16(max(m_max, n_max, 1) * itemsize) + _align16(self.gemv_work_elems() * itemsize)
                + self.vector_work_bytes())

    def orgbr_smem_bytes(self, len_max: int, itemsize: int) -> int:
        """Dynamic shared memory of orgbr_kernel (sv, w, gemv work, vector work)."""
        return (2 * _align16(max(len_max, 1) * itemsize) + _align16(self.gemv_work_elems() * itemsize)
                + self.vector_work_bytes())

    def template_args(self) -> str:
        return f"{self.dim_x}, {self.dim_y}"

    def __str__(self) -> str:
        return f"gebrd{self.dim_x}x{self.dim_y}{'staged' if self.stage else 'global'}"


# Every setting a launcher may pick (each a registered instantiation, compiled in CI).
_SHAPES = ((8, 4), (16, 4), (32, 4), (32, 8))
GEBRD_SETTINGS = tuple(GebrdSetting(x, y, s) for s in (True, False) for x, y in _SHAPES)


def _threads_for(dim: int) -> tuple[int, int]:
    """Thread shape for the largest dimension: about one thread per row of the
    GEMV up to 128 threads, eight warps beyond."""
    if dim <= 16:
        return 8, 4
    if dim <= 48:
        return 16, 4
    if dim <= 128:
        return 32, 4
    return 32, 8


def choose_gebrd_setting(m: int, n: int, itemsize: int, smem_limit: int = 227 * 1024) -> GebrdSetting:
    """Default setting for the largest (m, n) of a batch.

    The big-tile (staged) design whenever the matrix fits into the device's
    opt-in shared memory (227 KiB on H100: square up to n = 166 in float64,
    117 in complex128): each of the 2 min(m, n) GEMVs of the sweep then reads
    shared memory.  Larger matrices run the same sweep from device memory.
    First guesses from the paper (big-tile below n = 128) and the shared-memory
    limit; ``bench/gebrd.py --sweep`` times every setting per size.
    TODO(#6): the classic blocked design (LABRD panel + GEMM trailing update)
    for the sizes past the shared-memory limit.
    """
    x, y = _threads_for(max(m, n))
    staged = GebrdSetting(x, y, True)
    if staged.smem_bytes(m, n, itemsize) <= smem_limit:
        return staged
    return GebrdSetting(x, y, False)


@dataclass(frozen=True)
class GebrdPlan:
    grid: int
    block: int
    smem: int


def plan_gebrd(setting: GebrdSetting, m_max: int, n_max: int, itemsize: int, count: int,
               smem_limit: int) -> GebrdPlan:
    """Grid, block and shared memory of one gebrd_kernel launch (pure).

    One block per matrix, at most 2^31 - 1 blocks (grid-stride loop beyond).
    A staged setting whose matrix does not fit is a ValueError before launch.
    """
    smem = setting.smem_bytes(m_max, n_max, itemsize)
    if smem > smem_limit:
        raise ValueError(f"setting {setting} needs {smem} bytes of shared memory for a {m_max} x {n_max} "
                         f"matrix (the device allows {smem_limit}); use a setting with stage=False")
    return GebrdPlan(max(1, min(count, 2**31 - 1)), setting.threads, smem)


def plan_orgbr(setting: GebrdSetting, len_max: int, itemsize: int, count: int, smem_limit: int) -> GebrdPlan:
    smem = setting.orgbr_smem_bytes(len_max, itemsize)
    if smem > smem_limit:
        raise ValueError(f"orgbr needs {smem} bytes of shared memory for length {len_max} "
                         f"(the device allows {smem_limit})")
    return GebrdPlan(max(1, min(count, 2**31 - 1)), setting.threads, smem)


def choose_orgbr_setting(m: int, n: int) -> GebrdSetting:
    """ORGBR reads and writes the output in device memory (stage is ignored)."""
    x, y = _threads_for(max(m, n))
    return GebrdSetting(x, y, False)


def check_gebrd_setting(setting) -> None:
    if setting is None:
        return
    if not isinstance(setting, GebrdSetting):
        raise TypeError(f"setting must be a GebrdSetting or None, got {type(setting).__name__}")
    if setting not in GEBRD_SETTINGS:
        raise ValueError(f"setting {setting!r} is not one of the compiled settings: "
                         f"{', '.join(map(repr, GEBRD_SETTINGS))}")
