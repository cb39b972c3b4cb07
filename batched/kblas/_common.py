"""What gemv, symv and hemv share: validation, the output buffer, the matrix
view and its alignment shift, the partial-sum workspace and the launch.

Each routine validates its shapes, then hands :func:`execute` a launch
function; :func:`execute` settles where the result goes, serves the cases
that need no kernel (empty output, ``alpha == 0``, empty inner dimension)
with array operations, and copies a private result into ``out`` when ``out``
overlaps an input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .._operands import matrix_operand, overlaps, vector_operand, writable_directly
from ..device_functions import build
from ..settings import multiprocessor_count

SOURCE_DIR = Path(__file__).resolve().parent
# Warps read 32 consecutive elements of a column; the row origin makes those
# runs start on a 128-byte boundary (two full lines for double).
ALIGN_BYTES = 128
# Tile indices and lengths are 32-bit in the kernels (offsets are 64-bit).
MAX_DIM = 2**31 - 1024


@dataclass
class Problem:
    """One validated call: operands on one backend, the result dtype, scalars
    converted to it, and the result length."""

    xp: object
    dtype: np.dtype
    A: object
    x: object
    y: object
    out: object
    alpha: object
    beta: object
    rows: int = 0   # length of the result
    inner: int = 0  # length of x

    @property
    def read_y(self) -> bool:
        return self.y is not None and self.beta != 0

    @property
    def gpu(self) -> bool:
        return self.xp is not np


def validate(A, x, y, out, alpha, beta) -> Problem:
    """Backend, dtypes, scalars, and A 2-D / x 1-D (shape checks are the routine's)."""
    A, x, y, out, xp, dtype, alpha, beta = ar.blas_operands(A, x, y, out, alpha, beta)
    if A.ndim != 2:
        raise ValueError(f"A must be one 2-D matrix (use batched.gemv for stacks), got shape {A.shape}")
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D vector, got shape {x.shape}")
    if max(A.shape) > MAX_DIM:
        raise ValueError(f"A has shape {A.shape}; dimensions up to {MAX_DIM} are supported")
    return Problem(xp, dtype, A, x, y, out, alpha, beta)


def check_lengths(p: Problem, rows: int, inner: int, what: str) -> None:
    """x must have ``inner`` elements; y and out must fit a result of ``rows``."""
    if p.x.shape[0] != inner:
        raise ValueError(f"x has shape {p.x.shape} but {what} has {inner} columns "
                         f"(A has shape {p.A.shape})")
    ar.check_result_operands(p.y, "y", p.out, (rows,), p.dtype)
    p.rows, p.inner = rows, inner


def execute(p: Problem, launch):
    """Run on the GPU: ``launch(p, target)`` writes the result into ``target``."""
    xp, out = p.xp, p.out
    target = out
    if out is None:
        target = xp.empty((p.rows,), p.dtype)
    elif not writable_directly(out, (), 1) or overlaps(xp, out, (p.A, p.x)) or (
            p.read_y and out is not p.y and overlaps(xp, out, (p.y,))):
        target = xp.empty((p.rows,), p.dtype)  # private result, copied into out below
    if p.rows:
        if p.alpha == 0 or p.inner == 0:  # BLAS: A and x are not read
            if p.read_y:
                target[...] = p.beta * p.y.astype(p.dtype, copy=False)
            else:
                target.fill(0)
        else:
            launch(p, target)
    if out is not None and target is not out:
        ar.assign(out, target)
        return out
    return target


# --- operands as kernel arguments ---------------------------------------------------


def matrix_view(p: Problem):
    """A's column-major view (a ``MatrixOperand``) and its row origin (alignment shift)."""
    a = matrix_operand(p.A.astype(p.dtype, copy=False), (), p.xp)
    item = p.dtype.itemsize
    shift = (a.base % ALIGN_BYTES) // item if a.base % item == 0 else 0
    return a, shift


def vector_args(p: Problem, v, length: int, keep: list):
    """(pointer, increment) of a vector broadcast to ``length``; (0, 0) for None.

    A converted or copied vector is appended to ``keep``, which the caller
    holds until the launch is enqueued.
    """
    if v is None:
        return np.uint64(0), np.int64(0)
    v = p.xp.broadcast_to(v.astype(p.dtype, copy=False), (length,))
    op = vector_operand(v, (), p.xp)
    keep.append(op.arr)
    return np.uint64(op.base), np.int64(op.inc)


_counters: dict = {}


def segment_counters(xp, count: int):
    """Zeroed int32 tickets for ``count`` segments, kept per (device, stream).

    The last block of each segment resets its ticket, so the array is zero
    again whenever a launch completes; launches on one stream never overlap,
    and each stream has its own array.
    """
    key = (xp.cuda.runtime.getDevice(), xp.cuda.get_current_stream().ptr)
    c = _counters.get(key)
    if c is None or c.size < count:
        c = xp.zeros(max(count, 1024), dtype=np.int32)
        _counters[key] = c
    return c


def partials(p: Problem, segments: int, nb: int, parts: int):
    """(workspace, counters) for ``parts`` blocks per segment; null pointers for one."""
    if parts <= 1:
        return np.uint64(0), np.uint64(0)
    return p.xp.empty(parts * segments * nb, p.dtype), segment_counters(p.xp, segments)


def blocks(length: int, nb: int) -> int:
    return -(-length // nb)


def sm_count() -> int:
    return multiprocessor_count()


def launch(source: Path, name: str, grid: int, threads: int, args) -> None:
    kernel = build.get_kernel(source, name)
    kernel((grid,), (threads,), args)


def ctype(dtype) -> str:
    return ar.CTYPES[np.dtype(dtype)]
