"""Settings of the batched kernels as data, and the default choosers.

A setting becomes template arguments.  Big-tile: one thread group owns a whole
matrix (its output fits one tile); classic: several groups share a matrix,
each owning a tile of the output, for more parallelism on few large matrices.
``setting=`` on every routine forces one, so both can be benchmarked.
"""

from __future__ import annotations

from dataclasses import dataclass




def _pow2_at_least(v: int, lo: int, hi: int) -> int:
    p = lo
    while p < v and p < hi:
        p *= 2
    return p


@dataclass(frozen=True)
class GemvSetting:
    """DIM_X x DIM_Y threads per matrix (or tile); ``tile`` outputs per group, 0 = big-tile."""

    dim_x: int
    dim_y: int
    tile: int = 0

    @property
    def big_tile(self) -> bool:
        return self.tile == 0

    @property
    def group_threads(self) -> int:
        return self.dim_x * self.dim_y

    @property
    def block_threads(self) -> int:  # gemv_block_threads() in batched/gemv.cu
        return self.group_threads if self.group_threads > 32 else 256

    @property
    def groups_per_block(self) -> int:
        return self.block_threads // self.group_threads

    def tiles(self, outputs: int) -> int:
        return 1 if self.tile == 0 else max(1, -(-outputs // self.tile))

    def template_args(self) -> str:
        return f"{self.dim_x}, {self.dim_y}, {self.tile}"

    def __str__(self) -> str:
        kind = "big" if self.big_tile else f"tile{self.tile}"
        return f"gemv{self.dim_x}x{self.dim_y}{kind}"


@dataclass(frozen=True)
class GemmSetting:
    """DIM_X x DIM_Y threads compute a BLK_M x BLK_N output tile in BLK_K steps."""

    dim_x: int
    dim_y: int
    blk_m: int
    blk_n: int
    blk_k: int

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

    def smem_bytes(self, itemsize: int) -> int:
        per_group = self.blk_k * (self.blk_m + 1) + self.blk_k * (self.blk_n + 1)
        return self.groups_per_block * per_group * itemsize

    def template_args(self) -> str:
        return f"{self.dim_x}, {self.dim_y}, {self.blk_m}, {self.blk_n}, {self.blk_k}"

    def __str__(self) -> str:
        return f"gemm{self.dim_x}x{self.dim_y}_{self.blk_m}x{self.blk_n}x{self.blk_k}"


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
)

GEMM_SETTINGS = (
    GemmSetting(4, 4, 4, 4, 4),
    GemmSetting(8, 4, 8, 8, 8),
    GemmSetting(16, 8, 16, 16, 16),
    GemmSetting(16, 16, 32, 32, 16),
    GemmSetting(16, 16, 64, 64, 16),
)


def choose_gemv_setting(rows: int, cols: int, trans: bool, count: int,
                        multiprocessors: int = 132) -> GemvSetting:
    """Default setting for a column-major ``rows x cols`` matrix.

    trans=False (gemv_n): up to 32 rows, a thread per output row in a sub-warp
    group (several matrices per warp).  trans=True (gemv_t): up to 8 rows, a
    thread per output column; up to 32, lanes along the column reduced by
    shuffles.  Beyond 32 rows, a 128-thread group per matrix when there are
    enough matrices to fill the GPU, else a classic tiling over the outputs.
    First guesses: bench/gemv.py --sweep measures every setting per shape.
    """
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
                        multiprocessors: int = 132) -> GemmSetting:
    """Smallest tile that covers the output (big-tile) up to 32, classic beyond."""
    size = max(m, n)
    for s in GEMM_SETTINGS[:-1]:
        if size <= s.blk_m:
            return s
    return GEMM_SETTINGS[-1]


def multiprocessor_count() -> int:
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    return _sm_count(dev)


_SM_CACHE: dict[int, int] = {}


def _sm_count(dev: int) -> int:
    sms = _SM_CACHE.get(dev)
    if sms is None:
        import cupy

        sms = cupy.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]
        _SM_CACHE[dev] = sms
    return sms


def check_setting(setting, kind) -> None:
    if setting is not None and not isinstance(setting, kind):
        raise TypeError(f"setting must be a {kind.__name__} or None, got {type(setting).__name__}")
    if setting is not None:
        registered = GEMV_SETTINGS if kind is GemvSetting else GEMM_SETTINGS
        if setting not in registered:
            raise ValueError(f"setting {setting!r} is not one of the compiled settings: "
                             f"{', '.join(map(repr, registered))}")


