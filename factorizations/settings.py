"""TRSV settings as data, the default chooser and the launch plan.

A setting becomes template arguments of ``factorizations/trsv.cu``: DIM_X x DIM_Y
threads per (matrix, right-hand side) -- the shape of the GEMV updates -- and
``window``: 0 for the one-level blocked design (the whole x in shared memory,
so shared memory grows with n) or the cap of the recursive design (x kept in
the output, at most ``window`` unknowns in shared memory at a time, MAGMA's 256).
Diagonal tiles are min(DIM_X * DIM_Y, 32) wide, solved by one warp.
``pipelined`` (with DIM_X = 32) is the pipelined design instead: DIM_Y warps a
matrix, one 32-unknown tile a warp, rounds of DIM_Y tiles (trsv_pipeline_kernel).
``thread`` (1 x 1) is the thread design: a thread per solve, the matrix in its registers
a column at a time, up to THREAD_MAX unknowns (trsv_thread_kernel).
``staged`` (32 x 1) is the staged design: a warp per solve, each matrix's stored triangle
copied into shared memory by the copy engine while the warp solves the one before, up to
STAGED_MAX unknowns (trsv_staged_kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._launch import grid_for
from ..settings import check_setting

GEMV_UNROLL = 4          # bdf::GEMV_UNROLL in device_functions/gemv.cuh
BLOCK_SUBWARP = 256      # trsv_block_threads() in factorizations/trsv.cu for groups <= 32
SOFT_SMEM = 48 * 1024    # keep blocks under this when possible: several blocks per SM
THREAD_BLOCK = 128       # trsv_thread_kernel's __launch_bounds__
THREAD_NB = (8, 16)      # its instantiations' NB: the smallest that holds n_max
THREAD_MAX = THREAD_NB[-1]
STAGED_MAX = 64          # TRSV_STAGED_MAX in trsv.cu: a warp's b in two registers a lane
STAGED_WARPS = 4         # trsv_staged_kernel's __launch_bounds__ (128 threads)


def staged_ld(n: int, itemsize: int) -> int:
    """Elements between the columns of a staged buffer (trsv_staged_ld in trsv.cu): n
    elements rounded up to an odd number of 16-byte units, so a warp's 16-byte reads of
    32 columns meet no bank conflict."""
    return ((n * itemsize + 15) // 16 | 1) * 16 // itemsize


def staged_warp_bytes(n: int, itemsize: int) -> int:
    """Shared memory of one warp of the staged design (trsv_staged_warp_bytes): two
    mbarriers, two buffers of n columns, and the solution."""
    return 16 + 2 * n * staged_ld(n, itemsize) * itemsize + -(-n * itemsize // 16) * 16


@dataclass(frozen=True)
class TrsvSetting:
    """DIM_X x DIM_Y threads per solve; ``window`` 0 = blocked, > 0 = recursive with that
    cap; ``pipelined``: a warp per 32-unknown tile (DIM_X = 32, window 0); ``thread``:
    one thread per solve (1 x 1), n <= THREAD_MAX; ``staged``: a warp per solve from
    shared memory (32 x 1), n <= STAGED_MAX."""

    dim_x: int
    dim_y: int
    window: int = 0
    pipelined: bool = False
    thread: bool = False
    staged: bool = False

    @property
    def max_unknowns(self) -> int | None:
        """The largest n the setting takes (a ValueError past it), None for any."""
        return THREAD_MAX if self.thread else STAGED_MAX if self.staged else None

    @property
    def group_threads(self) -> int:
        return self.dim_x * self.dim_y

    @property
    def tile(self) -> int:
        return min(self.group_threads, 32)

    @property
    def recursive(self) -> bool:
        return self.window > 0

    @property
    def max_groups_per_block(self) -> int:
        return 1 if self.group_threads > 32 else BLOCK_SUBWARP // self.group_threads

    def single_tile(self, n_max: int) -> bool:
        """Does a launch with matrices up to n_max take the single-tile kernel
        (trsv_tile_kernel<..., W = group_threads>: the tile in registers, no shared
        memory)?  A group of at most 32 lanes, the blocked design, n_max <= the group."""
        return (self.group_threads <= 32 and not self.window and not self.pipelined and not self.thread
                and not self.staged and n_max <= self.group_threads)

    def thread_nb(self, n_max: int) -> int:
        """The thread design's instantiation (NB) for matrices up to n_max; a ValueError
        past THREAD_MAX."""
        for nb in THREAD_NB:
            if n_max <= nb:
                return nb
        raise ValueError(f"setting {self} solves at most {THREAD_MAX} unknowns a matrix, got n = {n_max}")

    def xlen(self, n_max: int) -> int:
        """Unknowns a group keeps in shared memory."""
        return self.window if self.window else n_max

    def group_bytes(self, n_max: int, itemsize: int) -> int:
        """Shared memory of one group; the same sum as trsv_kernel's ``group_bytes``
        (trsv_staged_warp_bytes for the staged design)."""
        if self.staged:
            return staged_warp_bytes(n_max, itemsize)
        work = self.group_threads * GEMV_UNROLL if self.group_threads > 32 and not self.pipelined else 0
        return -(-((self.xlen(n_max) + work) * itemsize + 4) // 16) * 16

    def template_args(self) -> str:
        return str(self.dim_y) if self.pipelined else f"{self.dim_x}, {self.dim_y}, {self.window}"

    def __str__(self) -> str:
        if self.thread:
            return "trsv_thread"
        kind = (f"rec{self.window}" if self.window else "pipe" if self.pipelined else "staged" if self.staged
                else "blocked")
        return f"trsv{self.dim_x}x{self.dim_y}{kind}"


# Every setting a launcher may pick (each a registered instantiation, compiled in CI).
TRSV_SETTINGS = (
    # one tile: a sub-warp group per solve, several solves per block
    TrsvSetting(4, 1), TrsvSetting(8, 1), TrsvSetting(16, 1),
    # one warp per solve: 32-wide tiles, GEMV by 32 x 1 or 8 x 4 lanes
    TrsvSetting(32, 1), TrsvSetting(8, 4),
    # four warps per solve: blocked, and the recursive design with MAGMA's cap of 256
    TrsvSetting(32, 4), TrsvSetting(32, 4, window=256), TrsvSetting(32, 8, window=256),
    # a warp per 32-unknown tile, 2, 4 or 8 tiles a round
    TrsvSetting(32, 2, pipelined=True), TrsvSetting(32, 4, pipelined=True), TrsvSetting(32, 8, pipelined=True),
    # a warp per solve from shared memory, copied ahead by the copy engine, up to STAGED_MAX unknowns
    TrsvSetting(32, 1, staged=True),
    # a thread per solve, up to THREAD_MAX unknowns
    TrsvSetting(1, 1, thread=True),
)
TRSV_THREAD = TRSV_SETTINGS[-1]
TRSV_STAGED = TRSV_SETTINGS[-2]


# The pipelined design's measured range (session 33; A/B on an H100, C-ordered DTRSV and
# STRSV): (transposed, 8-byte or wider elements) -> (first n where it beat the one-warp
# designs, ((largest n, warps a round), ...)).  Session 40 (H200, every setting timed in
# one process, 256 MiB of C-ordered matrices) moved the first n of 8-byte elements to 129:
# the 8 x 4 warp ran DTRSV 'T' 64 in 66 us against 78 (pipelined, two warps) and 'N' 128
# in 64.5 against 75 (four warps); on the H100 those were 84 against 80 and 79 against 81.
# The 8 x 4 warp also took transposed double 160 in 70 us against 98 for two pipelined
# warps, 192 in 74 against 74 (same session): from 193 there.
_PIPELINED_RANGE = {
    (False, True): (129, ((256, 2), (384, 4), (1024, 8))),
    (False, False): (65, ((384, 4), (1024, 8))),
    (True, True): (193, ((256, 2), (384, 4), (1024, 8))),
    (True, False): (193, ((384, 4), (1024, 8))),
}


def pipelined_trsv_setting(n: int, *, transposed: bool = False, itemsize: int = 8) -> TrsvSetting | None:
    """The pipelined setting measured fastest for the largest n of a batch, or None where
    the one-warp designs won or n > 1024 (not measured); choose_trsv_setting takes it
    first."""
    first, table = _PIPELINED_RANGE[(bool(transposed), itemsize >= 8)]
    if n < first:
        return None
    for largest, warps in table:
        if n <= largest:
            return TrsvSetting(32, warps, pipelined=True)
    return None


# Where the thread design beat the default on stacked batches (uniform layout, one
# right-hand side), by the element type's NumPy char: session 43's H200 A/B
# (scratch A/B, C- and F-ordered, LN/LT/UN/UT, 256 MiB of matrices; the ratios are
# the default's time over the thread design's).  float32 1.10-2.11x at 4-11 (12 mixed,
# 0.95-1.09; 16 0.84-0.87); float64 1.01-1.31x at 4-6 (7 and 8 0.85-0.93); complex64
# 1.08-1.41x at 5-6 (4 mixed, 0.94-1.05; 8 0.84-0.86); complex128 1.00-1.50x at
# 12-14 and 1.29-1.43x at 16 (15 mixed, 0.88-1.21; 4 0.69-0.74, 5 1.00-1.04, 8
# 0.75-0.79).  Below 4 the float types extend the range measured at 4.
THREAD_WINS = {"f": range(1, 12), "d": range(1, 7), "F": range(5, 7), "D": (12, 13, 14, 16)}


def thread_wins(n: int, uniform_dtype: str | None) -> bool:
    """Does a uniform-layout launch of ``uniform_dtype`` (its NumPy char; None for
    pointer and variable batches, not measured: their timings were host-bound) with at
    most n unknowns and one right-hand side take the thread design (THREAD_WINS)?"""
    return uniform_dtype is not None and n in THREAD_WINS.get(uniform_dtype, ())


def choose_trsv_setting(n: int, count: int = 1, multiprocessors: int = 132, *, transposed: bool = False,
                        itemsize: int = 8, pipelined: bool = True, pieces: bool = False,
                        uniform_dtype: str | None = None) -> TrsvSetting:
    """Default setting for the largest n of a batch and the kernel's op (``transposed``:
    op(A) transposes the column-major view the kernel reads, e.g. 'N' on a C-ordered
    batch), from ``bench/trsv.py --sweep`` on an H100 (every setting timed on DTRSV
    and STRSV, LN/LT/UN/UT on C-ordered batches, 256 MB of matrices,
    bench/results/NVIDIA_H100_80GB_HBM3/trsv_sweep.json, session 27).

    ``uniform_dtype`` (the element type's NumPy char, given for a uniform batch with one
    right-hand side): the thread design (TrsvSetting(1, 1, thread=True)) where it won,
    THREAD_WINS.  Elsewhere up to 16 unknowns a single tile in registers (trsv_tile_kernel): the smallest
    power-of-two lane group that covers it (double 8 x 8: 113 us against 194 us for 4
    lanes).  Not transposed: one warp, the 32-lane single tile to 32 (double 72 us
    against 165 for four lanes, float 87 against 217) and 8 x 4 GEMV lanes to 256
    (double 64: 84 us against 108 for eight lanes, float 92 against 205); then the
    recursive design with MAGMA's window of 256, eight warps (double 512: 116 us
    against 177 blocked), except four warps blocked for float at 257-512 (133 us).
    Transposed: to 32, the 32-lane single tile where it reads its rows in 16-byte
    pieces (``pieces``: the rows aligned and n a multiple of a piece's elements,
    factorizations/trsv.py's tile_pieces; session 40, H200: float 32 87 us against 105
    for four lanes, double 81 against 86; without the pieces 157 and 110), else four
    lanes, 4-wide tiles and GEMV updates (double 102 us, float 111); to 64, sixteen
    lanes for 8-byte elements (77 against 98 for eight; to 96 since session 40, H200:
    69 us against 79 for 8 x 4) and four for float (100 against 109); 8 x 4 to 256;
    four warps blocked to 512
    (double 123, float 119); beyond, the recursive design for 8-byte elements
    (double 1024: 297 us against 300) and four warps blocked to 1024 for float (238
    against 281).  Complex types follow their element size (not measured).
    ``count`` and ``multiprocessors`` are not used yet.

    From 33-193 unknowns to 1024 the pipelined design (TrsvSetting(32, W,
    pipelined=True), pipelined_trsv_setting) comes first: measured faster there (session
    33, A/B on an H100; double 256 'T' on C-ordered batches 61 us against 84, 'N' 68
    against 100, 512 58-82 against 116-123, 1024 92-214 against 251-300).  Session 33
    left it opt-in after two device runs of the LU, Cholesky and QR GPU tests each had
    one unnamed failure with it as the default; the failure of session 34's run with it
    as the default was test_gels_normal_equation_residual (a float32 matrix scaled near
    underflow, in the fused QR kernel, which never calls this chooser), and the
    Cholesky test suspected before passed with either default.  Below the pipelined
    range and past 1024 the designs above; ``pipelined=False`` gives them everywhere
    (the default before session 34, which bench/trsv.py times beside).

    The staged design (TRSV_STAGED, session 72) is never chosen: built and compile-checked
    without a GPU, it waits for its first measurement (bench/trsv.py times it at 16-64).
    """
    if thread_wins(n, uniform_dtype):
        return TRSV_THREAD
    pipe = pipelined_trsv_setting(n, transposed=transposed, itemsize=itemsize) if pipelined else None
    if pipe is not None:
        return pipe
    for s in TRSV_SETTINGS[:3]:
        if n <= s.group_threads:
            return s
    wide = itemsize >= 8
    if not transposed:
        if n <= 32:
            return TrsvSetting(32, 1)
        if n <= 256:
            return TrsvSetting(8, 4)
        if n <= 512 and not wide:
            return TrsvSetting(32, 4)
        return TrsvSetting(32, 8, window=256)
    if n <= 32:
        return TrsvSetting(32, 1) if pieces else TrsvSetting(4, 1)
    if n <= 64 or (n <= 96 and wide):
        return TrsvSetting(16, 1) if wide else TrsvSetting(4, 1)
    if n <= 256:
        return TrsvSetting(8, 4)
    if n <= 512 or (n <= 1024 and not wide):
        return TrsvSetting(32, 4)
    return TrsvSetting(32, 8, window=256)


@dataclass(frozen=True)
class TrsvPlan:
    grid: int
    block: int
    smem: int
    groups: int
    xlen: int


def plan_trsv(setting: TrsvSetting, n_max: int, itemsize: int, items: int, smem_limit: int) -> TrsvPlan:
    """Grid, block and dynamic shared memory of one launch (pure: testable on the CPU).

    Sub-warp groups share a block; fewer of them are launched when their shared
    memory would pass 48 KiB, and a setting whose one group exceeds the device's
    limit is a ValueError (the blocked design with a very large n).
    """
    most = setting.max_unknowns   # the thread and staged designs
    if most is not None and n_max > most:
        raise ValueError(f"setting {setting} solves at most {most} unknowns a matrix, got n = {n_max}")
    if setting.thread:
        return TrsvPlan(grid_for(items, THREAD_BLOCK), THREAD_BLOCK, 0, THREAD_BLOCK, 0)
    if setting.single_tile(n_max):
        groups = BLOCK_SUBWARP // setting.group_threads
        return TrsvPlan(grid_for(items, groups), BLOCK_SUBWARP, 0, groups, 0)
    if setting.staged:   # a warp a solve, up to STAGED_WARPS a block (the launch keeps them resident)
        per_warp = setting.group_bytes(n_max, itemsize)
        groups = max(1, min(STAGED_WARPS, smem_limit // per_warp))
        return TrsvPlan(grid_for(items, groups), 32 * groups, groups * per_warp, groups, n_max)
    per_group = setting.group_bytes(n_max, itemsize)
    if per_group > smem_limit:
        raise ValueError(f"setting {setting} needs {per_group} bytes of shared memory for n = {n_max} "
                         f"(the device allows {smem_limit}); use a recursive setting")
    groups = max(1, min(setting.max_groups_per_block, SOFT_SMEM // per_group))
    grid = grid_for(items, groups)
    return TrsvPlan(grid, groups * setting.group_threads, groups * per_group, groups, setting.xlen(n_max))


def check_trsv_setting(setting) -> None:
    check_setting(setting, TrsvSetting, TRSV_SETTINGS)
