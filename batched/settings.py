"""Settings of the batched kernels as data, and the default choosers.

A setting becomes template arguments.  Big-tile: one thread group owns a whole
matrix (its output fits one tile); classic: several groups share a matrix,
each owning a tile of the output, for more parallelism on few large matrices.
``setting=`` on every routine forces one, so both can be benchmarked.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def tall_tile_rows(itemsize: int, q: int) -> int:
    """R, the rows of a GEMV tall tile for the setting's Q (KblasTallShape in
    kblas.cuh): 32 lanes of V = min(32 bytes / itemsize, q) consecutive rows each.
    The batched tall setting and batched.kblas's GEMV share it."""
    return 32 * min(32 // itemsize, q)


def _pow2_at_least(v: int, lo: int, hi: int) -> int:
    p = lo
    while p < v and p < hi:
        p *= 2
    return p


@dataclass(frozen=True)
class GemvSetting:
    """DIM_X x DIM_Y threads per matrix (or tile); ``tile`` outputs per group, 0 = big-tile.

    ``staged``: big-tile with the matrix and vector copied into shared memory
    first (cp.async, two buffers per group), for small matrices; groups of at
    most 32 threads, and the launcher picks the block size from the shared
    memory a matrix needs (``stage_groups_per_block``).

    ``packed``: a warp a matrix reading it in 16-byte pieces (``gemv_packed`` in
    gemv.cuh), for stacked column-major matrices whose columns are a power of two
    (at most 32) of whole pieces, 16-byte aligned (:func:`packed_pieces`); other
    batches run its big-tile twin (``dim_x`` x ``dim_y`` = 32 x 1).

    ``tall``: large matrices in the KBLAS kernels' tall tiles
    (``device_functions/kblas.cuh``), ``dim_x`` = nb columns a tile and
    ``dim_y`` = Q: a block of nb * Q threads per segment of a matrix (a row
    tile of R = 32 V rows for the view's 'N', nb columns for 'T'), each warp
    reading 32 V consecutive elements of a column per tile.
    """

    dim_x: int
    dim_y: int
    tile: int = 0
    staged: bool = False
    tall: bool = False
    packed: bool = False

    @property
    def big_tile(self) -> bool:
        return self.tile == 0

    @property
    def group_threads(self) -> int:
        return self.dim_x * self.dim_y

    @property
    def block_threads(self) -> int:  # gemv_block_threads() in batched/gemv.cu
        return self.group_threads if self.group_threads > 32 or self.tall else 256

    def tall_rows(self, itemsize: int) -> int:
        """R, the rows of a tall tile (KblasTallShape in kblas.cuh)."""
        return tall_tile_rows(itemsize, self.dim_y)

    def tall_segments(self, outputs: int, trans: bool, itemsize: int, aligned: bool) -> int:
        """Blocks a tall setting gives a matrix of ``outputs`` results: its block
        columns ('T') or row tiles ('N'); the rows start at the 128-byte row
        origin of the matrix's address, which only ``aligned`` (every matrix at a
        multiple of 128 bytes) makes 0 for sure."""
        if trans:
            return -(-outputs // self.dim_x)
        origin = 0 if aligned else 128 // itemsize - 1
        return -(-(outputs + origin) // self.tall_rows(itemsize))

    @property
    def groups_per_block(self) -> int:
        return self.block_threads // self.group_threads

    def tiles(self, outputs: int) -> int:
        return 1 if self.tile == 0 else max(1, -(-outputs // self.tile))

    def unstaged(self) -> "GemvSetting":
        """The big-tile setting with the same threads (registered for every staged or
        packed one)."""
        return GemvSetting(self.dim_x, self.dim_y)

    @staticmethod
    def stage_bytes(capacity: int, itemsize: int) -> int:
        """Shared memory of one staged group: two buffers of ``capacity`` elements."""
        return 2 * capacity * itemsize

    def stage_groups_per_block(self, capacity: int, itemsize: int) -> int:
        """Groups per staged block: up to 256 threads within 48 KiB of shared memory
        (no opt-in attribute needed; several small blocks fill an SM as well as one big)."""
        per_group = max(1, self.stage_bytes(capacity, itemsize))
        return max(1, min(256 // self.group_threads, STAGE_BLOCK_BYTES // per_group))

    def template_args(self) -> str:
        if self.staged or self.tall:
            return f"{self.dim_x}, {self.dim_y}"
        return f"{self.dim_x}, {self.dim_y}, {self.tile}"

    def __str__(self) -> str:
        kind = ("staged" if self.staged else "tall" if self.tall else "packed" if self.packed
                else "big" if self.big_tile else f"tile{self.tile}")
        return f"gemv{self.dim_x}x{self.dim_y}{kind}"


PACKED_PIECES = (1, 2, 4, 8, 16, 32)  # gemv_packed_kernel's PPC instantiations


def packed_pieces(rows: int, ld: int, itemsize: int, base: int, stride: int, count: int) -> int:
    """PPC, the 16-byte pieces a column of gemv_packed's matrices (column-major, ``rows``
    of the view, leading dimension ``ld``, first at address ``base``, ``stride``
    elements apart): one of PACKED_PIECES when the batch can be read that way, else 0."""
    if 16 % itemsize or rows <= 0 or ld != rows or rows * itemsize % 16:
        return 0
    ppc = rows * itemsize // 16
    if ppc not in PACKED_PIECES or base % 16 or (count > 1 and stride * itemsize % 16):
        return 0
    return ppc


# Shared memory of one staged GEMV block (the static limit, so no opt-in is needed);
# a matrix whose two buffers exceed it is not staged.
STAGE_BLOCK_BYTES = 48 * 1024


# The dtypes with FP64 tensor-core GEMM tiles (gemm_tile_mma).
MMA_DTYPES = ("float64", "complex128")


@dataclass(frozen=True)
class GemmSetting:
    """DIM_X x DIM_Y threads compute a BLK_M x BLK_N output tile in BLK_K steps.

    ``mma`` = 4, 8 or 16: FP64 tensor cores (mma.sync m16n8k4, m16n8k8 or
    m16n8k16; the group's warps split the tile, operands staged by cp.async
    into 2-4 buffers).  float64 and complex128 run it (complex128: the real tile's
    column pairs are the (re, im) of a BLK_M x BLK_N / 2 complex tile, :meth:`tile_n`);
    other dtypes run :meth:`for_dtype`'s CUDA-core twin.  ``mma`` = 0: CUDA cores, every dtype.  ``stages``: the tensor-core
    pipeline's buffers (0: as many as 48 KiB holds, 2-4); ``min_blocks``: blocks an
    SM must hold at once (``__launch_bounds__``: caps the registers; 0: no cap).
    """

    dim_x: int
    dim_y: int
    blk_m: int
    blk_n: int
    blk_k: int
    mma: int = 0
    stages: int = 0
    min_blocks: int = 0

    @property
    def group_threads(self) -> int:
        return self.dim_x * self.dim_y

    @property
    def block_threads(self) -> int:  # gemm_block_threads() in batched/gemm.cu
        return self.group_threads if self.group_threads > 32 else 128

    @property
    def groups_per_block(self) -> int:
        return self.block_threads // self.group_threads

    def big_tile(self, m: int, n: int) -> bool:
        return m <= self.blk_m and n <= self.blk_n

    def tile_n(self, dtype) -> int:
        """Output columns of a tile: blk_n, half of it for complex128 on tensor cores."""
        return self.blk_n // 2 if self.mma and str(dtype) == "complex128" else self.blk_n

    def smem_bytes(self, itemsize: int) -> int:
        """The block's dynamic shared memory (GROUPS * PER_GROUP elements of T in gemm.cu)."""
        if self.mma:  # gemm_mma_smem() in gemm.cuh: its buffers of doubles
            cplx = itemsize == 16
            return self.groups_per_block * self.mma_stages_for(cplx) * self.mma_stage_elements_for(cplx) * 8
        per_group = self.blk_k * (self.blk_m + 1) + self.blk_k * (self.blk_n + 1)
        return self.groups_per_block * per_group * itemsize

    def mma_stage_elements_for(self, cplx: bool = False) -> int:
        """Doubles of one pipeline buffer (gemm_mma_operand_a() + gemm_mma_operand_b())."""
        def operand(r, k, pad=4):
            return max(k * (r + pad), r * (k + pad))
        if cplx:
            return operand(2 * self.blk_m, self.blk_k // 2, 8) + operand(self.blk_n, self.blk_k // 2)
        return operand(self.blk_m, self.blk_k) + operand(self.blk_n, self.blk_k)

    def mma_stages_for(self, cplx: bool = False) -> int:
        """Buffers of the cp.async pipeline (gemm_mma_stages()): ``stages``, else as many
        as 48 KiB holds, 2-4."""
        return self.stages or max(2, min(4, 48 * 1024 // (8 * self.mma_stage_elements_for(cplx))))

    def dtypes(self, supported) -> tuple:
        """The dtypes this setting is compiled for (tensor-core settings: float64, complex128)."""
        return MMA_DTYPES if self.mma else tuple(supported)

    def for_dtype(self, dtype) -> "GemmSetting":
        """The setting that runs for ``dtype``: itself, or for a tensor-core setting
        and another dtype the CUDA-core setting of the nearest tile."""
        if not self.mma or str(dtype) in MMA_DTYPES:
            return self
        simt = [s for s in GEMM_SETTINGS if not s.mma]
        return next((s for s in simt if s.blk_m >= self.blk_m), simt[-1])

    def template_args(self) -> str:
        return (f"{self.dim_x}, {self.dim_y}, {self.blk_m}, {self.blk_n}, {self.blk_k}, {self.mma}, "
                f"{self.stages}, {self.min_blocks}")

    def __str__(self) -> str:
        return (f"gemm{self.dim_x}x{self.dim_y}_{self.blk_m}x{self.blk_n}x{self.blk_k}"
                + (f"mma{self.mma}" if self.mma else "") + (f"s{self.stages}" if self.stages else "")
                + (f"b{self.min_blocks}" if self.min_blocks else ""))


PACKED_SETTING = GemvSetting(32, 1, packed=True)

# Every setting a launcher may pick; each is a registered instantiation, so CI
# compiles all of them.  Sub-warp groups (<= 32 threads) put several matrices in
# one block.
GEMV_SETTINGS = (
    GemvSetting(1, 32), GemvSetting(2, 16), GemvSetting(4, 8), GemvSetting(8, 4),
    GemvSetting(16, 2), GemvSetting(32, 1),
    GemvSetting(4, 4), GemvSetting(8, 2),
    # One output per thread, no reduction: several tiny matrices per warp.
    GemvSetting(4, 1), GemvSetting(8, 1), GemvSetting(16, 1),
    GemvSetting(1, 4), GemvSetting(1, 8), GemvSetting(1, 16),
    GemvSetting(32, 4),            # big-tile, 128 threads per matrix
    GemvSetting(32, 8, tile=32),   # classic: 32 outputs per 256-thread block
    GemvSetting(32, 8, tile=64),
    # Staged through shared memory: lanes along the (view) rows, as wide as the rows.
    GemvSetting(4, 1, staged=True), GemvSetting(8, 1, staged=True),
    GemvSetting(4, 8, staged=True), GemvSetting(8, 4, staged=True),
    GemvSetting(16, 2, staged=True), GemvSetting(32, 1, staged=True),
    # A warp a packed matrix, 16-byte loads.
    PACKED_SETTING,
    # Large matrices: KBLAS tall tiles, a block per segment.
    GemvSetting(32, 4, tall=True), GemvSetting(64, 4, tall=True), GemvSetting(64, 2, tall=True),
)

# The settings the GEMM chooser names (all registered below).
_GEMM_BIG_TILES = (GemmSetting(4, 4, 4, 4, 4), GemmSetting(8, 4, 8, 8, 8), GemmSetting(16, 8, 16, 16, 16),
                   GemmSetting(16, 16, 32, 32, 16))
# Fewer threads a matrix, more outputs a thread (session 26, scratch A/B on an H100, 256
# MB of operands, C-ordered, medians of two rounds, against the big tiles above): a
# memory-bound batch needs many matrices in flight an SM, and a thread that owns 2 x 2
# or 2 x 4 outputs keeps more loads in flight for its warp.  DGEMM 4 105.8 us against
# 121.9 (2 x 2 outputs, four threads a matrix), 8 94.0 against 98.4 (2 x 4, eight
# threads; the tensor-core 16 x 8 tile 98.4); SGEMM 4 131.8 against 227.8, 8 118.7
# against 164.9, 16 111.1 against 178.3 (2 x 4, 32 threads); CGEMM 4 123.2 against
# 139.5, 8 111.8 against 120.8, 16 125.1 against 145.0 (4 x 4, 16 threads).  ZGEMM
# keeps the big tiles (4: 105.4 against 106.8; 8: 99.8 against 119.7; 16: 106.1 against
# 117.4, cupy 103.9).
_GEMM_2X2_4 = GemmSetting(2, 2, 4, 4, 4)
_GEMM_4X2_8 = GemmSetting(4, 2, 8, 8, 8)
_GEMM_8X4_16 = GemmSetting(8, 4, 16, 16, 16)
_GEMM_4X4_16 = GemmSetting(4, 4, 16, 16, 16)
# 16 outputs a thread (half a shared load per FMA) and the whole k = 32 staged at once:
# one load wait a matrix instead of two (H100, 32x32x32 float32: 135-137 us against 157
# with k-steps of 16; cupy.matmul 116).
_GEMM_FLOAT32_32 = GemmSetting(8, 8, 32, 32, 32)
_GEMM_CLASSIC = GemmSetting(16, 16, 64, 64, 16)
# FP64 tensor cores (float64; complex128 below), mma.sync m16n8kK with K = mma, 4 warps as
# 2 x 2 over the tile.  Measured on an H100 against 64x64x8 (4 pipeline
# buffers), 8 warps, 128x64 and 128x128 tiles, and the m16n8k4 / m16n8k16
# shapes: 64x64x16 with m16n8k8 on 4 warps was fastest (or within 1 %) from
# 64 to 512.
#
# Below 64 the batch is memory bound, and what counts is how many matrices an
# SM loads at once (session 26, the same A/B, against cupy.matmul in the process):
# - 9-16: one warp a 16x16 tile, four matrices a block, k in one buffer:
#   DGEMM 16 92.4 us against 114.7 for the CUDA-core 16x8 threads (cupy 161;
#   the copy floor of the bytes is 89.7 us).  (A one-warp 16x8 tile at 8, capped at
#   64 registers: 98.4 us, behind _GEMM_4X2_8.)
# - 17-32: the 32x32 tile with two buffers instead of four (20 KiB a block
#   against 40, all of k = 32 in flight either way) and 94 registers (five
#   blocks an SM; the four-buffer kernel took 167, three blocks): DGEMM 32
#   92.2 us against 93.9 (cupy 92.1).  32x32x32 tiles ran level (92.2, 36
#   bytes spilled), six or eight blocks an SM slower (268-270 us against 267
#   at 768 MB).
# - 64x64 stays with the buffers 48 KiB holds (two): three buffers (61 KiB),
#   four (82 KiB, two blocks an SM), five, 64x64x32 tiles, 8 warps (64x64,
#   128x64, 64x128; 2-4 buffers, 2-3 blocks an SM) all ran level or slower at
#   64, 128 and 256 (DGEMM 128: 105.3 us, best other 105.6; cupy 98.3); its
#   straight-line stores (gemm_tile_mma) then gave 101.6.
_GEMM_TENSOR_16 = GemmSetting(32, 1, 16, 16, 16, mma=8, stages=2)
_GEMM_TENSOR_32 = GemmSetting(32, 4, 32, 32, 16, mma=8, stages=2, min_blocks=5)
_GEMM_TENSOR = GemmSetting(32, 4, 64, 64, 16, mma=8)
# complex128 on the same tensor-core tiles (a real tile's column pairs are one complex
# column: gemm_tile_mma), session 34, scratch A/B on an H100 against cupy.matmul in the
# process, C-ordered, 256 MB of operands (256: 86 products, 512: 22), medians of two
# rounds; the CUDA-core tiles before it took 0.30-0.74x cupy from 32 to 256.
# - 9-16: _GEMM_TENSOR_16 (a 16 x 8 complex tile a warp): 92.6 us against cupy 104.0
#   (the 16 x 16 CUDA-core tile 106.1).
# - 17-32: a 32 x 32 complex tile, four warps, two buffers (one tile a product): 94.3 us
#   against 92.8 (_GEMM_TENSOR_32's 32 x 16 tile 97.9, two warps 94.9, CUDA cores 126).
# - past 32: a 64 x 32 complex tile, its registers capped for three blocks an SM (208
#   uncapped, 168 and 24 bytes of spill capped): 64 102.0 us against 106.3 (uncapped
#   119.4; a 64 x 64 complex tile 105.5, with eight warps slower), 128 149.2 against
#   143.3, 256 264.4 against 232.4, 512 513.2 against 425.2 (the 64 x 64 tile 509.6).
# Up to 8 the CUDA-core 4 x 2 / 8 x 4 tiles stay (8: 99.7 us, tensor cores 101.0, cupy 183.9).
# Three buffers (with and without the cap) and four, tried the same day with straight-line
# stores in place, ran level or slower for both dtypes at 64-512 (DGEMM 128 101.2-103.7 us
# against 101.5; ZGEMM 256 261.6-281.1 against 259.9).
_GEMM_TENSOR_Z32 = GemmSetting(32, 4, 32, 64, 16, mma=8, stages=2)
_GEMM_TENSOR_Z = GemmSetting(32, 4, 64, 64, 16, mma=8, min_blocks=3)

# CUDA-core settings ordered by tile (the largest last: for_dtype takes the first that
# covers a tensor-core tile), then tensor cores.
GEMM_SETTINGS = (_GEMM_BIG_TILES[0], _GEMM_2X2_4, _GEMM_BIG_TILES[1], _GEMM_4X2_8, _GEMM_BIG_TILES[2], _GEMM_8X4_16,
                 _GEMM_4X4_16, _GEMM_BIG_TILES[3], _GEMM_FLOAT32_32, _GEMM_CLASSIC,
                 _GEMM_TENSOR_16, _GEMM_TENSOR_32, _GEMM_TENSOR, _GEMM_TENSOR_Z32, _GEMM_TENSOR_Z)

# The chooser's tiles up to 32 by dtype: (largest side, setting), the first that covers
# the output (the notes above); a dtype or size not listed takes the big tiles.
_GEMM_SMALL = {
    "float64": ((4, _GEMM_2X2_4), (8, _GEMM_4X2_8), (16, _GEMM_TENSOR_16), (32, _GEMM_TENSOR_32)),
    "float32": ((4, _GEMM_2X2_4), (8, _GEMM_4X2_8), (16, _GEMM_8X4_16), (32, _GEMM_FLOAT32_32)),
    "complex64": ((4, _GEMM_2X2_4), (8, _GEMM_4X2_8), (16, _GEMM_4X4_16)),
    "complex128": ((16, _GEMM_TENSOR_16), (32, _GEMM_TENSOR_Z32)),
}


def stage_fits(capacity: int, itemsize: int) -> bool:
    """Whether a staged group's two buffers of ``capacity`` elements fit one block."""
    return GemvSetting.stage_bytes(capacity, itemsize) <= STAGE_BLOCK_BYTES


def _load_gemv_table() -> dict:
    """{(layout, dtype, trans): [(rows, cols, setting), ...]} from tuning/gemv_sm_90.json
    (an entry without a layout is the uniform layout's)."""
    by_name = {str(s): s for s in GEMV_SETTINGS}
    doc = json.loads((Path(__file__).with_name("tuning") / "gemv_sm_90.json").read_text())
    found: dict = {}
    for e in doc["entries"]:
        key = (e.get("layout", "uniform"), e["dtype"], e["trans"])
        found.setdefault(key, []).append((e["rows"], e["cols"], by_name[e["setting"]]))
    return found


# The fastest setting per measured shape, from bench/gemv.py --sweep on an H100
# (tools/tune_gemv.py writes it); other GPUs use it until they are tuned.
GEMV_TABLE = _load_gemv_table()


# A batch with this many elements is in the measured regime even with few matrices.
TABLE_MIN_ELEMENTS = 1 << 22
TALL_MIN_SIDE = 64


def _nearest(entries, rows: int, cols: int):
    """(distance, setting) of the entry nearest in log2 of rows and columns."""
    r, c = math.log2(max(rows, 1)), math.log2(max(cols, 1))
    return min(((abs(r - math.log2(er)) + abs(c - math.log2(ec)), s) for er, ec, s in entries),
               key=lambda found: found[0])


def table_gemv_setting(dtype: str, trans: bool, rows: int, cols: int, layout: str = "uniform"):
    """The measured best setting of the nearest shape: the layout's and dtype's own
    entries when one lies within a factor of two in each dimension, else the
    uniform layout's for the dtype, else float64's.  A variable-size batch is
    looked up at its typical member (``MatrixBatch.view_dims_typical``); its
    entries were measured on members of 1 to 2 x that size."""
    tried = [(layout, dtype), ("uniform", dtype)] if layout != "uniform" else [(layout, dtype)]
    for key in tried:
        own = GEMV_TABLE.get((*key, trans))
        if own:
            dist, setting = _nearest(own, rows, cols)
            if dist <= 1:
                return setting
    fallback = GEMV_TABLE.get(("uniform", "float64", trans))
    return _nearest(fallback, rows, cols)[1] if fallback else None


# Shapes (view rows, view columns) where the packed kernel beat the tuning table's
# setting by 2 % or more, by dtype and the view's op ('T': True), on stacked batches of
# 256 MB (H100, session 28, an A/B in one process, C- and F-ordered, trans N and T).
# Float32 32 x 32 in the view's 'T' (C-ordered 'N'): 98 us against 116 (82 -> 98 % of
# the copy bandwidth); float64 32 x 32 'T' 101 against 108; complex128 16 x 16 'T' 106
# against 132; the FEM 8 x 81 shapes 2-5 %.  It lost where a lane has fewer than about
# eight pieces (8 x 8: 0.3-0.6x; float32 16 x 16 0.78-0.92x) and from 64 KiB matrices
# (float32 128 x 128 0.88-0.92x against the tall tiles).
# With the column sums split over the lanes (group_sum_scatter) 'T' gained more: float32
# 16 x 16 103 us against 109, complex64 16 x 16 105 against 116, complex128 32 x 32 101
# against 107, float64 64 x 64 99.6 against 102 (the same A/B).
_PACKED_WINS = {
    ("float32", True): ((16, 16), (32, 32), (64, 64), (8, 81), (8, 84)),
    ("float32", False): ((8, 81), (8, 84)),
    ("float64", True): ((32, 32), (64, 64), (8, 81), (8, 84)),
    ("float64", False): ((16, 16),),
    ("complex64", True): ((16, 16), (32, 32)),
    ("complex64", False): ((16, 16), (32, 32)),
    ("complex128", True): ((16, 16), (32, 32)),
}


def _packed_wins(dtype: str, trans: bool, rows: int, cols: int) -> bool:
    """A measured win of the packed kernel at these view rows (exactly: a column's
    pieces are the kernel's template argument) and columns within a factor of two."""
    return any(rows == er and abs(math.log2(max(cols, 1)) - math.log2(ec)) <= 1
               for er, ec in _PACKED_WINS.get((dtype, trans), ()))


def choose_gemv_setting(rows: int, cols: int, trans: bool, count: int,
                        multiprocessors: int = 132, stageable: bool = False,
                        dtype: str = "float64", layout: str = "uniform", packed: bool = False) -> GemvSetting:
    """Default setting for a column-major ``rows x cols`` matrix.

    With enough matrices or elements to fill the GPU (the regime the sweep
    measured: 256 MB of matrices, e.g. 256 of 512x512), the packed kernel where it
    measured faster (stacked batches; pointer arrays are taken to gain alike) and the
    batch allows it (``packed``: :func:`packed_pieces` found it), else the tuning table's choice for the nearest measured shape; a staged choice whose
    matrix does not fit shared memory (``stageable`` False) becomes its
    unstaged twin.  Otherwise (few matrices) the rules below.  ``layout``:
    the batch layout, whose own measured entries come first (pointer and
    variable batches differ from stacked ones in their registers and, for
    variable sizes, in how unevenly their groups finish).

    trans=False (gemv_n): up to 32 rows, a thread per output row in a sub-warp
    group (several matrices per warp).  trans=True (gemv_t): up to 8 rows, a
    thread per output column; up to 32, lanes along the column reduced by
    shuffles.  Beyond 32 rows, a 128-thread group per matrix when there are
    enough matrices to fill the GPU, else a classic tiling over the outputs.
    First guesses: bench/gemv.py --sweep measures every setting per shape.
    """
    if count >= 8 * multiprocessors or count * max(rows, 1) * max(cols, 1) >= TABLE_MIN_ELEMENTS:
        if packed and layout != "variable" and _packed_wins(str(dtype), trans, rows, cols):
            return PACKED_SETTING
        setting = table_gemv_setting(str(dtype), trans, rows, cols, layout)
        # Tall tiles (128-256 rows by 32-64 columns) won the sweep from 64 x 64 up; a
        # matrix narrower than 64 either way would leave most of a tile's lanes or
        # warps masked, and a few matrices (a block a segment) too few blocks to
        # fill the GPU: those take the rules below.
        if setting is not None and setting.tall and (
                min(rows, cols) < TALL_MIN_SIDE or count * setting.tall_segments(
                    cols if trans else rows, trans, np.dtype(dtype).itemsize, True) < 2 * multiprocessors):
            setting = None
        if setting is not None:
            return setting if stageable or not setting.staged else setting.unstaged()
    if not trans and rows <= 32:  # a thread per output row, columns looped: no reduction
        return GemvSetting(_pow2_at_least(rows, 4, 32), 1)
    if trans and rows <= 8:  # a thread per output column, its short column looped
        return GemvSetting(1, _pow2_at_least(cols, 4, 32))
    if rows <= 32:  # a lane group per column reduced by shuffles
        dim_x = _pow2_at_least(rows, 1, 32)
        return GemvSetting(dim_x, 32 // dim_x)
    outputs = cols if trans else rows
    if count >= 8 * multiprocessors or outputs <= 64:
        return GemvSetting(32, 4)
    return GemvSetting(32, 8, tile=32 if trans else 64)


def choose_gemm_setting(m: int, n: int, k: int, count: int,
                        multiprocessors: int = 132, dtype="float64") -> GemmSetting:
    """Up to 32, the dtype's tile of _GEMM_SMALL that covers the output (measured on an
    H100: the notes before it), else the smallest big-tile CUDA-core tile that covers it
    (up to 32); beyond 32, float64 and complex128 on FP64 tensor cores (64x64 real
    tiles) and every other dtype on the classic CUDA-core tiling.  complex128 up to 8
    keeps the CUDA-core tiles."""
    size = max(m, n)
    small = _GEMM_SMALL.get(str(dtype), ())
    if str(dtype) == "complex128" and size <= 8:
        small = ()
    for up_to, setting in small:
        if size <= up_to:
            return setting
    if size > 32 and str(dtype) == "float64":
        return _GEMM_TENSOR
    if size > 32 and str(dtype) == "complex128":
        return _GEMM_TENSOR_Z
    for s in _GEMM_BIG_TILES:
        if size <= s.blk_m:
            return s
    return _GEMM_CLASSIC


def multiprocessor_count() -> int:
    return _device_limits()[0]


def resident_blocks(block_threads: int, smem_bytes: int, registers: int = 0) -> int:
    """Blocks of this shape the whole GPU holds at once (threads, shared memory,
    registers per thread when given, and the 32-blocks-per-SM limit; 1 KiB of shared
    memory is reserved per block, registers go to warps in units of 256)."""
    sms, smem_per_sm, threads_per_sm = _device_limits()
    per_sm = min(32, threads_per_sm // block_threads, smem_per_sm // (smem_bytes + 1024))
    if registers:
        per_warp = -(-registers * 32 // 256) * 256
        per_sm = min(per_sm, REGISTERS_PER_SM // (per_warp * -(-block_threads // 32)))
    return max(1, per_sm) * sms


REGISTERS_PER_SM = 65536


def warp_pipe_bytes(threads: int, len_a: int, len_b: int, out_a: bool, itemsize: int,
                    late: bool = False) -> int:
    """Dynamic shared memory of bdf::warp_pipeline (device_functions/warp_pipeline.cuh)
    for blocks of ``threads``: per warp, warp_pipe_elems() elements -- the A ring (one
    buffer of 32 slots of ``len_a | 1`` elements, two when ``out_a`` and not ``late``)
    and, when ``len_b`` > 0, the B ring (two buffers of 32 slots of ``len_b | 1``)."""
    def slots(length):
        return 32 * (length | 1)
    per_warp = (2 if out_a and not late else 1) * slots(len_a) + (2 * slots(len_b) if len_b > 0 else 0)
    return threads // 32 * per_warp * itemsize


def warp_pipe_plan_bytes(threads: int, len_a: int, len_b: int, out_a: bool, itemsize: int,
                         smem_limit: int) -> int:
    """The shared memory to give a bdf::warp_pipeline launch: double-buffered when two
    blocks of it still fit the limit (the pipeline hides latency only with several
    warps per SM), else the late pipeline (one A buffer) when it fits, else 0 (off)."""
    double = warp_pipe_bytes(threads, len_a, len_b, out_a, itemsize)
    if 2 * (double + 1024) <= smem_limit + 1024:
        return double
    late = warp_pipe_bytes(threads, len_a, len_b, out_a, itemsize, late=True)
    return late if late <= smem_limit else 0   # every GPU from sm_50 to sm_90


_LIMITS_CACHE: dict[int, tuple[int, int, int]] = {}


def _device_limits() -> tuple[int, int, int]:
    """(multiprocessors, shared memory per SM, threads per SM) of the current device."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    limits = _LIMITS_CACHE.get(dev)
    if limits is None:
        props = cupy.cuda.runtime.getDeviceProperties(dev)
        limits = (props["multiProcessorCount"], props["sharedMemPerMultiprocessor"],
                  props["maxThreadsPerMultiProcessor"])
        _LIMITS_CACHE[dev] = limits
    return limits


class DesignKinds:
    """Which design a factorization setting's ``design`` field names: the predicates that
    LuSetting and CholeskySetting (frozen dataclasses with a ``design`` field) share."""

    @property
    def fused(self) -> bool:
        return self.design == "fused"

    @property
    def blocked(self) -> bool:
        return self.design == "blocked"

    @property
    def thread(self) -> bool:
        return self.design == "thread"

    @property
    def rows(self) -> bool:
        return self.design == "rows"

    @property
    def cols(self) -> bool:
        return self.design == "cols"

    @property
    def warps(self) -> bool:
        return self.design == "warps"

    @property
    def panels(self) -> bool:
        return self.design == "panels"


def check_setting(setting, kind, compiled) -> None:
    """``setting=`` of any routine: None, or one of the ``compiled`` settings of class ``kind``."""
    if setting is None:
        return
    if not isinstance(setting, kind):
        raise TypeError(f"setting must be a {kind.__name__} or None, got {type(setting).__name__}")
    if setting not in compiled:
        raise ValueError(f"setting {setting!r} is not one of the compiled settings: "
                         f"{', '.join(map(repr, compiled))}")


