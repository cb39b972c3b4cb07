"""Settings of the large-matrix kernels as data, and the default chooser.

A :class:`KblasSetting` is the paper's tuning triple (nb, Q-bar, Y-bar):
``nb`` x ``q`` threads per block, each holding ``nb / q`` elements of a tile
per register buffer (two buffers: double buffering), and ``parts`` blocks
sharing one block row (GEMV-N) or block column (GEMV-T, SYMV/HEMV).  ``nb``
and ``q`` are template arguments (every registered pair is compiled in CI);
``parts`` is a launch argument, 0 meaning "chosen from the size and the GPU".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..settings import tall_tile_rows

ROUTINES = ("gemv", "symv")  # hemv runs the symv kernels with a flag
STATIC_SHARED_LIMIT = 48 * 1024
REGISTERS_PER_SM = 65536


@dataclass(frozen=True)
class KblasSetting:
    """``nb`` x ``q`` threads per block; ``parts`` blocks per block row/column (0: auto)."""

    nb: int
    q: int
    parts: int = 0

    @property
    def threads(self) -> int:
        return self.nb * self.q

    @property
    def per_thread(self) -> int:
        """Elements of a tile each thread holds per register buffer (the paper's L)."""
        return self.nb // self.q

    def template_args(self) -> str:
        return f"{self.nb}, {self.q}"

    def fits(self, routine: str, dtype) -> bool:
        """Registers and shared memory within the hardware limits for ``dtype``.

        SYMV's square-tile walk keeps a tile buffer pair, x over its columns and
        the column sums: about 4 L elements in registers, which must leave room
        for addresses under the launch bound's register budget (no spills).
        GEMV's tall tiles hold at most 32 elements of A a thread (kblas.cuh);
        the same rule is applied to them, which turns away all but 32 x 4 for
        complex128 (ptxas, session 21: of the GEMV settings that fit, only
        complex64 64 x 8 N spills, 8 bytes).  SYMV's diagonal kernel holds an
        nb x (nb + 1) tile in static shared memory.
        """
        item = np.dtype(dtype).itemsize
        budget = min(255, REGISTERS_PER_SM // self.threads)
        registers = 4 * self.per_thread * item // 4  # 4 L elements of 4-byte registers
        if registers > budget - 40:
            return False
        if routine == "symv":
            smem = (self.nb * (self.nb + 1) + 2 * self.nb + self.q * self.nb) * item
            if smem > STATIC_SHARED_LIMIT:
                return False
        return self.nb % 32 == 0 and self.nb % self.q == 0 and self.threads <= 1024

    def tall_rows(self, dtype) -> int:
        """Rows of GEMV's tall tile (kblas.cuh, KblasTallShape)."""
        return tall_tile_rows(np.dtype(dtype).itemsize, self.q)

    def tall_tile_bytes(self, dtype) -> int:
        """Bytes of A in one of GEMV's tall tiles (tall_rows x nb)."""
        return self.tall_rows(dtype) * self.nb * np.dtype(dtype).itemsize

    def with_parts(self, parts: int) -> "KblasSetting":
        return KblasSetting(self.nb, self.q, parts)

    def __str__(self) -> str:
        return f"kblas{self.nb}x{self.q}" + (f"p{self.parts}" if self.parts else "")


# Every (nb, q) a launcher may pick; each is a registered instantiation for the
# dtypes it fits.
KBLAS_SETTINGS = (
    KblasSetting(32, 2),   # L = 16, 64 threads: small n, many blocks
    KblasSetting(32, 4),   # L = 8: the one that fits complex128
    KblasSetting(64, 4),   # L = 16, 256 threads
    KblasSetting(64, 8),   # L = 8, 512 threads
)

# Tiles per block the chooser aims for (SYMV): enough that a block's fixed costs
# (its reduction, the atomics) are small against its reads, few enough that the
# grid has many blocks and the last wave is short; and at least _BLOCKS_PER_SM
# blocks an SM.
# The multi-GPU kernel (kblas_mgpu.cu) on a device's block-cyclic share: 64 (H200
# probe, DSYMV over two GPUs: 16 parts at n = 32768 and 32 at 65536, i.e. 64 tiles a
# block, beat the 16-tile 64 and 128 by 1.6 % and 2.9 %; 256 parts lost 28 % and 9 %).
# Single-GPU SYMV/HEMV by element type (session 40, H200, one process, 32 x 4 at n = 4096
# to 30000, against the 16 tiles a block measured on the H100 in session 21): ZHEMV
# 1.05-1.07x with 64 (12288: 318 us against 335, 30000: 1.82 ms against 1.93), CHEMV
# 1.03-1.07x from 8192 with 64, DSYMV 1.00-1.04x with 32 (8192 75 us against 78; 64 lost
# 2 % there), SSYMV best with 16 (32 and 64 lost 1-6 % at 16385 and 30000).  And eight
# blocks an SM at least: at 4096 the walks are short and 8 parts beat 5 by 10 %.
_SYMV_TILES_PER_BLOCK = {("f", 4): 16, ("f", 8): 32, ("c", 8): 64, ("c", 16): 64}
_TILES_PER_BLOCK = {"symv": 16, "symv_mgpu": 64}
_BLOCKS_PER_SM = {"symv": 8, "symv_mgpu": 4}
# GEMV in tall tiles (H100 sweeps of settings x parts, session 21, n = 1024-16384).
# Both: a block's share at most _GEMV_BLOCK_BYTES of A (16 tall tiles of 32 KiB in
# the default settings).  N: at least one wave of about two blocks an SM, each a
# long block row (DGEMV N 16384 p2 1.017x cuBLAS, 8192 p4 1.032, 4096 p8 0.993,
# where 8 tiles a block gave 0.997, 1.001 and 0.913).  Session 27 (H100, every
# parts from 2 to 64 at n = 8192-30000, two allocations each): one wave alone left
# the long rows of 10001-30000 at 0.95-0.99x cuBLAS (DGEMV N 12001 p3 0.95x,
# 24576 p1 0.98x; SGEMV N 12001 p3 0.91x), 16 tiles a block gave 1.00-1.05x
# (12001 p24 1.04x, 20001 p40 1.05x; SGEMV 12001 p12 1.05x) and more parts
# than that the same within 1 %.  T (double 32 x 4: 146 registers, three blocks
# an SM): at least 256 threads an SM; parts from 4 up measured within 1 %.
_GEMV_BLOCK_BYTES = 512 * 1024
_GEMV_N_BLOCKS_PER_SM = 2
_GEMV_T_THREADS_PER_SM = 256


@dataclass(frozen=True)
class KblasRowsSetting:
    """GEMV-N in one pass (``kblas_gemv_n_rows_kernel``, kblas.cuh's ``kblas_gemv_n_rows``):
    a block of ROWS_THREADS threads owns the rows of ``pieces`` 16-byte pieces of every
    column (4 pieces: 8 rows of float64) and reads every column's piece of them,
    ``unroll`` columns in flight a thread; no partial sums, no second pass.  For
    op(A) = A on the column-major view only (trans 'N' on a column-major A, 'T'/'C' on
    a row-major one).  Also the shape of SYMV/HEMV's strips (choose_symv_strip)."""

    unroll: int
    pieces: int = 4
    transposes: ClassVar[bool] = False  # the op of the column-major view it runs

    def rows(self, dtype) -> int:
        """Rows a block owns: ``pieces`` 16-byte pieces (one element each for 16-byte types)."""
        return self.pieces * max(1, 16 // np.dtype(dtype).itemsize)

    def template_args(self) -> str:
        return f"{self.pieces}, {ROWS_THREADS}, {self.unroll}"

    def __str__(self) -> str:
        return f"kblas_rows_p{self.pieces}_u{self.unroll}"


ROWS_THREADS = 256
# two pieces (8 in flight): SYMV's strips at small n, twice the blocks of four pieces
KBLAS_ROWS_SETTINGS = tuple(KblasRowsSetting(u, p) for p in (4, 8) for u in (8, 16)) + (KblasRowsSetting(8, 2),)
# Where the one-pass design runs by default: the setting by A's bytes (up to the first
# bound that holds A; beyond the last, the tall tiles).  Session 41, H200, one process:
# the kernel launched beside the tall-tile default and cuBLAS, GPU time, operands rotated
# out of L2.  float64: four pieces and 16 columns in flight to 32 MB (DGEMV N 1024 5.48 us
# against 7.01, cuBLAS 5.36; 1000 5.6 against 6.9; 2048 11.9 against 12.4), eight pieces
# (128-byte column pieces) to 134 MB (2560 16.1 against 18.2, 3072 21.2 against 23.5,
# 3584 27.3 against 29.4, 4096 33.3 against 35.7), level at 210 MB (5120) and 8192.
# complex128 with 8 in flight: four pieces at 1024 (7.5 against 9.3), eight to 105 MB
# (1536 12.0 against 13.1, 2048 18.9 against 20.3, 2560 27.7 against 30.0).  complex64 with
# 16: four pieces to 8 MB (1000/1024 5.6 against 7.4), eight at 32 MB (2048 11.5 against
# 12.5; at 72 MB eight pieces with 8 in flight won and 16 lost).  float32 not by default:
# 1024 ran 4.6 us against 5.4, but 1000 and 2047 5-17 % slower (63-128 blocks).  And only
# with a grid of at least half the SMs and columns for at least half an unroll of every
# column lane (shorter rows of columns take the checked loads throughout).
_MIB = 2**20
_ROWS_BY_BYTES = {
    np.dtype(np.float64): ((40 * _MIB, KblasRowsSetting(16, 4)), (160 * _MIB, KblasRowsSetting(16, 8))),
    np.dtype(np.complex128): ((20 * _MIB, KblasRowsSetting(8, 4)), (128 * _MIB, KblasRowsSetting(8, 8))),
    np.dtype(np.complex64): ((10 * _MIB, KblasRowsSetting(16, 4)), (40 * _MIB, KblasRowsSetting(16, 8))),
}


def _by_bytes(table: dict, dtype, m: int, n: int):
    """The setting ``table`` gives an m x n A of ``dtype`` (the first bound on A's bytes
    that holds it), or None."""
    dtype = np.dtype(dtype)
    nbytes = m * n * dtype.itemsize
    return next((s for bound, s in table.get(dtype, ()) if nbytes <= bound), None)


def choose_gemv_rows(dtype, m: int, n: int, shift: int, sms: int = 132):
    """The KblasRowsSetting for GEMV-N on an m x n column-major view (row origin
    ``shift``), or None for the tall tiles (see _ROWS_BY_BYTES)."""
    s = _by_bytes(_ROWS_BY_BYTES, dtype, m, n)
    if s is None:
        return None
    blocks = -(-(m + shift) // s.rows(dtype))
    if 2 * blocks < sms or 2 * n * s.pieces < s.unroll * ROWS_THREADS:
        return None
    return s


@dataclass(frozen=True)
class KblasColsSetting:
    """GEMV-T in one pass (``kblas_gemv_t_cols_kernel``, kblas.cuh's ``kblas_gemv_t_cols``):
    a warp per column, ``warps`` warps a block, each lane reading 16 bytes of rows at a
    time with ``unroll`` pieces in flight; no partial sums, no second pass.  For a
    transposing op on the column-major view ('T'/'C' on a column-major A, 'N' on a
    row-major one)."""

    unroll: int
    warps: int = 8
    transposes: ClassVar[bool] = True

    def template_args(self) -> str:
        return f"{self.warps}, {self.unroll}"

    def __str__(self) -> str:
        return f"kblas_cols_w{self.warps}_u{self.unroll}"


KBLAS_COLS_SETTINGS = (KblasColsSetting(4, 8), KblasColsSetting(8, 4), KblasColsSetting(16, 8))
# Where it runs by default, by A's bytes as for the rows (session 41, H200, one process,
# a scratch copy launched beside the tall-tile default and cuBLAS, GPU time, operands out
# of L2): float64 16 pieces in flight, 8 warps at 8 MB (DGEMV T 1024 5.46 us against
# 6.98, cuBLAS 12.0), 8 and 4 warps to 72 MB (2048 11.76 against 13.01, cuBLAS 11.74; 3072
# 21.1 against 22.6), 4 and 8 warps at 128 MB (4096 35.2 against 36.1), level at 512 MB;
# float32 4 and 8 warps to 64 MB (1024 4.8 against 5.6, 2048 8.05 against 9.28, 3072 12.4
# against 14.2, 4096 19.7 against 20.7), level at 256 MB.  Complex types not measured.
_COLS_BY_BYTES = {
    np.dtype(np.float64): ((10 * _MIB, KblasColsSetting(16, 8)), (80 * _MIB, KblasColsSetting(8, 4)),
                           (140 * _MIB, KblasColsSetting(4, 8))),
    np.dtype(np.float32): ((70 * _MIB, KblasColsSetting(4, 8)),),
}


def choose_gemv_cols(dtype, m: int, n: int, sms: int = 132):
    """The KblasColsSetting for GEMV-T on an m x n column-major view, or None for the
    tall tiles (see _COLS_BY_BYTES; a grid of at least half the SMs)."""
    s = _by_bytes(_COLS_BY_BYTES, dtype, m, n)
    if s is None or 2 * -(-n // s.warps) < sms:
        return None
    return s


_ONE_PASS_OPS = {False: "op(A) = A on the column-major view only ('N' on a column-major A, 'T' or 'C' on a "
                        "row-major one)",
                 True: "a transposing op of the column-major view only ('T' or 'C' on a column-major A, 'N' "
                       "on a row-major one)"}


def check_one_pass_op(setting, transposing: bool) -> None:
    """A forced one-pass setting (KblasRowsSetting, KblasColsSetting) on a view whose op
    does (``transposing``) or does not transpose: ValueError unless it runs that op."""
    if isinstance(setting, (KblasRowsSetting, KblasColsSetting)) and setting.transposes != transposing:
        raise ValueError(f"setting {setting} runs {_ONE_PASS_OPS[setting.transposes]}")


def choose_kblas_setting(routine: str, dtype, n: int, sms: int = 132) -> KblasSetting:
    """(nb, q) for ``routine`` on an order-``n`` problem, without ``parts``.

    Measured on the H100 (session 21: ``bench/kblas.py --sweep`` and a sweep of
    every setting x parts for GEMV, n = 1024-30000): 32 x 4 first or within
    1 % for GEMV in 8- and 16-byte types and for SYMV/HEMV in every type (DSYMV
    12288 214 us against 232 for 64 x 8, the default until then: 1.84x cuBLAS's
    default kernel instead of 1.69x); 64 x 4 for float32 GEMV.  64 x 8 holds
    86 registers in double, one 512-thread block an SM.
    """
    if routine == "gemv" and np.dtype(dtype) == np.float32:
        return KblasSetting(64, 4)
    return KblasSetting(32, 4)


def choose_parts(routine: str, segments: int, walk: int, sms: int, dtype=None) -> int:
    """SYMV/HEMV's blocks per segment: the longest walk cut into shares of about
    _TILES_PER_BLOCK tiles (single GPU: by ``dtype``, _SYMV_TILES_PER_BLOCK), and at
    least _BLOCKS_PER_SM blocks per SM in all."""
    if walk <= 1:
        return 1
    tiles = _TILES_PER_BLOCK[routine]
    if routine == "symv" and dtype is not None:
        dt = np.dtype(dtype)
        tiles = _SYMV_TILES_PER_BLOCK.get((dt.kind, dt.itemsize), tiles)
    by_work = -(-walk // tiles)
    by_fill = -(-_BLOCKS_PER_SM[routine] * sms // max(segments, 1))
    return max(1, min(walk, max(by_work, by_fill)))


def choose_gemv_parts(setting: KblasSetting, dtype, trans: bool, segments: int, walk: int, sms: int) -> int:
    """GEMV's blocks per segment (tall tiles; see the constants above): shares of at
    most _GEMV_BLOCK_BYTES of A; N, at least one wave of _GEMV_N_BLOCKS_PER_SM blocks
    an SM; T, at least _GEMV_T_THREADS_PER_SM threads an SM."""
    if walk <= 1:
        return 1
    segments = max(segments, 1)
    by_work = -(-walk // max(1, _GEMV_BLOCK_BYTES // setting.tall_tile_bytes(dtype)))
    if trans:
        by_fill = -(-max(1, _GEMV_T_THREADS_PER_SM // setting.threads) * sms // segments)
    else:
        by_fill = round(_GEMV_N_BLOCKS_PER_SM * sms / segments)
    return max(1, min(walk, max(by_work, by_fill)))


def check_kblas_setting(setting, routine: str, dtype) -> None:
    """Named errors for a forced ``setting=`` before anything is launched."""
    if setting is None:
        return
    kinds = ((KblasRowsSetting, KBLAS_ROWS_SETTINGS), (KblasColsSetting, KBLAS_COLS_SETTINGS))
    for kind, compiled in kinds if routine == "gemv" else kinds[:1]:  # SYMV's strips are the rows' shape
        if isinstance(setting, kind):
            if setting not in compiled:
                raise ValueError(f"setting {setting} is not one of the compiled settings: "
                                 f"{', '.join(map(str, compiled))}")
            return
    if not isinstance(setting, KblasSetting):
        others = ", KblasRowsSetting, KblasColsSetting" if routine == "gemv" else ", KblasRowsSetting"
        raise TypeError(f"setting must be a KblasSetting{others} or None, got {type(setting).__name__}")
    base = KblasSetting(setting.nb, setting.q)
    if base not in KBLAS_SETTINGS:
        raise ValueError(f"setting {setting} is not one of the compiled settings: "
                         f"{', '.join(map(str, KBLAS_SETTINGS))}")
    if not base.fits(routine, dtype):
        raise ValueError(f"setting {setting} does not fit {np.dtype(dtype)} for {routine} "
                         "(registers or shared memory)")
    if not isinstance(setting.parts, (int, np.integer)) or setting.parts < 0:
        raise ValueError(f"setting.parts must be a non-negative integer, got {setting.parts!r}")


# SYMV/HEMV of a short matrix in strips (kblas_symv_strip_kernel: a block a ROWS-wide
# block row and block column of the stored triangle, every element read twice, no
# atomics), with the rows' shape (KblasRowsSetting) as its setting.  Session 68 (H100,
# one process, bench/kblas.py's operands, every rows setting against the walks at n =
# 1024-8192, `scratch/symv_fused/strip_ab.py`): four pieces and 8 columns in flight
# first (16 in flight: 164-186 registers, one block an SM, 5-50 % slower), eight pieces
# for complex128 (one element a piece: 2048 19.2 us against 22.6).  Strips against the
# walks: SSYMV 1024 8.3 us against 10.0 (cuBLAS 10.7), 2048 11.3 / 12.9, 4096 21.7 /
# 22.9, 6144 46-55 / 39.5; CHEMV 1024 7.7 / 11.1, 2048 13.1 / 16.5, 3072 23.1 / 23.7,
# 4096 38.4 / 34.0; DSYMV 2048 13.2 / 15.8, 3072 25.8 / 23.3; ZHEMV 2048 19.2 / 23.3,
# 3072 40.9 / 42.0.  So: strips while the whole matrix is at most 64 MiB (they read
# n^2 elements against the walks' n^2 / 2).  Two pieces (twice the blocks; H200, the
# same script): SSYMV 1024 7.1 us against four pieces' 8.0, DSYMV 1024 7.3 / 7.6, CHEMV
# 1024 7.4 / 7.5, but 2048 and up 1-50 % slower, and complex128 1024 12.7 / 8.5: two
# pieces for 4- and 8-byte elements to 8 MiB.
SYMV_STRIP_MAX_BYTES = 64 * 2**20
_SYMV_STRIP_SMALL_BYTES = 8 * 2**20


def choose_symv_strip(dtype, n: int):
    """The KblasRowsSetting of SYMV/HEMV's strips for order n, or None for the walks."""
    item = np.dtype(dtype).itemsize
    nbytes = n * n * item
    if nbytes > SYMV_STRIP_MAX_BYTES:
        return None
    if item == 16:
        return KblasRowsSetting(8, 8)  # one element a piece
    return KblasRowsSetting(8, 2 if nbytes <= _SYMV_STRIP_SMALL_BYTES else 4)
