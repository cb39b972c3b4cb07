"""QR settings as data, the default chooser and the launch plan (pure: testable on the CPU).

A :class:`QrSetting` becomes template arguments of ``factorizations/qr.cu``:

``design='fused'``
    One thread group (DIM_X x DIM_Y threads: a sub-warp group, a warp or a
    block) per matrix; the whole matrix, and for GELS its right-hand sides,
    copied into shared memory; the unblocked GEQR2 sweep (``bdf::geqr2``) and,
    for GELS, the triangular solve there; results written back once.  Shared
    memory grows with m * (n + nrhs), so the size is limited by the device.
``design='blocked'``
    One block per matrix, the matrix in global memory; a loop over panels of
    ``nb`` columns: the panel staged in shared memory and factored by GEQR2,
    the block reflector T formed (xLARFT) and the trailing columns (and the
    right-hand sides) updated by C -= V (T^H (V^H C)) through ``bdf::gemm_tile``.
    Shared memory is m * nb plus fixed tiles, so m is limited (about 880
    rows in complex128 on an H100) but n is not.
``design='global'``
    The unblocked sweep run in place in global memory, one block per matrix;
    no size limit (only w and the reduction space in shared memory).  The
    fallback when neither of the others fits; slow for large sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._launch import grid_for
from ..settings import check_setting

GEMV_UNROLL = 4          # bdf::GEMV_UNROLL in device_functions/gemv.cuh
BLOCK_SUBWARP = 256      # qr_block_threads() in factorizations/qr.cu for groups <= 32
SOFT_SMEM = 48 * 1024    # keep blocks under this when possible: several blocks per SM
NT = 32                  # QR_NT in qr.cu: columns of the trailing matrix per update tile
BK = 32                  # QR_BK: inner tile of Y = V^H C
BM = 32                  # QR_BM: row tile of C -= V Z


def _align16(nbytes: int) -> int:
    return -(-nbytes // 16) * 16


@dataclass(frozen=True)
class QrSetting:
    """design 'fused' | 'blocked' | 'global'; DIM_X x DIM_Y threads per matrix; nb: panel width (blocked)."""

    design: str
    dim_x: int
    dim_y: int
    nb: int = 0

    @property
    def group_threads(self) -> int:
        return self.dim_x * self.dim_y

    @property
    def max_groups_per_block(self) -> int:
        if self.design != "fused" or self.group_threads > 32:
            return 1
        return BLOCK_SUBWARP // self.group_threads

    @property
    def larf_work(self) -> int:
        """Elements of T for bdf::larf_work_elems<DIM_X, DIM_Y>() (also gemv_n's reduction space)."""
        g = self.group_threads
        return g * GEMV_UNROLL if g > 32 and self.dim_y > 1 else 0

    @property
    def vector_work_bytes(self) -> int:
        """bdf::vector_work_bytes(G): per-warp partial sums of larfg's nrm2."""
        g = self.group_threads
        return (g // 32) * 48 if g > 32 else 0

    def unblocked_layout(self, m_max: int, n_max: int, nrhs: int, itemsize: int):
        """(s_a, s_b, wlen, group_bytes): the same sums as qr_unblocked_kernel's carve-up.

        Per group, in this order: the matrix (s_a elements, fused only), the
        right-hand sides (s_b, fused only), w (wlen: the widest larf_left),
        the GEMV reduction space, then (16-byte aligned) larfg's reduction
        bytes and one int flag (the zero-pivot scan)."""
        fused = self.design == "fused"
        s_a = m_max * n_max if fused else 0
        s_b = m_max * nrhs if fused else 0
        wlen = max(n_max, nrhs, 1)
        t_bytes = _align16((s_a + s_b + wlen + self.larf_work) * itemsize)
        return s_a, s_b, wlen, t_bytes + self.vector_work_bytes + 16

    def blocked_bytes(self, m_max: int, itemsize: int) -> int:
        """Shared memory of qr_blocked_kernel: the same sum as its carve-up."""
        nb = self.nb
        elems = (m_max * nb + nb * nb + nb * NT + nb * max(nb, NT)
                 + max(BK * (nb + 1), nb * (BM + 1)) + max(BK * (NT + 1), nb * (NT + 1))
                 + nb + nb + self.larf_work)
        return _align16(elems * itemsize) + self.vector_work_bytes + 16

    def template_args(self) -> str:
        if self.design == "blocked":
            return f"{self.dim_x}, {self.dim_y}, {self.nb}"
        return f"{self.dim_x}, {self.dim_y}, {'true' if self.design == 'fused' else 'false'}"

    def __str__(self) -> str:
        extra = f"nb{self.nb}" if self.design == "blocked" else ""
        return f"qr{self.design}{self.dim_x}x{self.dim_y}{extra}"


# Every setting a launcher may pick (each a registered instantiation, compiled in CI).
FUSED_SETTINGS = (QrSetting("fused", 8, 1), QrSetting("fused", 16, 1), QrSetting("fused", 32, 1),
                  QrSetting("fused", 32, 4))
BLOCKED_SETTINGS = (QrSetting("blocked", 32, 8, nb=32),)
GLOBAL_SETTINGS = (QrSetting("global", 32, 4),)
QR_SETTINGS = FUSED_SETTINGS + BLOCKED_SETTINGS + GLOBAL_SETTINGS

# ORGQR (Q generated in place in global memory, one block per matrix): DIM_X x DIM_Y.
ORGQR_DIMS = ((32, 1), (32, 4))


def choose_qr_setting(m: int, n: int, nrhs: int = 0, itemsize: int = 8,
                      smem_limit: int = 227 * 1024) -> QrSetting:
    """Default setting for the largest m, n (and right-hand sides) of a batch.

    Fused while the matrix (and B) fit in shared memory: the smallest lane
    group covering max(m, n) up to 32 (several matrices per block), four
    warps beyond, as long as one group stays under 48 KiB (or, for n <= 64,
    under the device limit: the sweep dominates and one matrix per block
    still fills the SM with the batch).  Then the blocked design while its
    panel fits, else the global fallback.  First guesses, to be replaced by
    ``bench/qr.py --sweep`` measurements.
    """
    size = max(m, n)
    for s in FUSED_SETTINGS[:3]:
        if size <= s.group_threads and s.unblocked_layout(m, n, nrhs, itemsize)[3] <= SOFT_SMEM:
            return s
    fused = FUSED_SETTINGS[3]
    need = fused.unblocked_layout(m, n, nrhs, itemsize)[3]
    if need <= SOFT_SMEM or (n <= 64 and need <= smem_limit):
        return fused
    blocked = BLOCKED_SETTINGS[0]
    if blocked.blocked_bytes(m, itemsize) <= smem_limit:
        return blocked
    return GLOBAL_SETTINGS[0]


@dataclass(frozen=True)
class QrPlan:
    grid: int
    block: int
    smem: int
    groups: int
    s_a: int = 0
    s_b: int = 0
    wlen: int = 1
    group_bytes: int = 0
    ldp: int = 0


def plan_qr(setting: QrSetting, m_max: int, n_max: int, nrhs: int, itemsize: int, count: int,
            smem_limit: int) -> QrPlan:
    """Grid, block and dynamic shared memory of one GEQRF/GELS launch.

    A setting whose shared memory exceeds the device's limit is a ValueError
    naming the sizes (force another design or leave ``setting`` None)."""
    if setting.design == "blocked":
        smem = setting.blocked_bytes(m_max, itemsize)
        if smem > smem_limit:
            raise ValueError(f"setting {setting} needs {smem} bytes of shared memory for m = {m_max} "
                             f"(the device allows {smem_limit}); use the global design")
        return QrPlan(grid_for(count, 1), setting.group_threads, smem, 1, ldp=max(m_max, 1))
    s_a, s_b, wlen, per_group = setting.unblocked_layout(m_max, n_max, nrhs, itemsize)
    if per_group > smem_limit:
        raise ValueError(f"setting {setting} needs {per_group} bytes of shared memory for an "
                         f"{m_max} x {n_max} matrix with {nrhs} right-hand sides (the device allows "
                         f"{smem_limit}); use the blocked or global design")
    groups = max(1, min(setting.max_groups_per_block, SOFT_SMEM // per_group))
    grid = grid_for(count, groups)
    return QrPlan(grid, groups * setting.group_threads, groups * per_group, groups, s_a, s_b, wlen, per_group)


def orgqr_dims(m: int) -> tuple[int, int]:
    """ORGQR's thread shape: one warp up to 64 rows, four warps beyond."""
    return ORGQR_DIMS[0] if m <= 64 else ORGQR_DIMS[1]


def orgqr_smem(dims, ncol_max: int, itemsize: int) -> int:
    """w (ncol_max elements) and the GEMV reduction space: orgqr_kernel's carve-up."""
    dx, dy = dims
    g = dx * dy
    work = g * GEMV_UNROLL if g > 32 and dy > 1 else 0
    return _align16((max(ncol_max, 1) + work) * itemsize)


def check_qr_setting(setting) -> None:
    check_setting(setting, QrSetting, QR_SETTINGS)
