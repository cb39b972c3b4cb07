"""What gemv, symv and hemv share: validation, the output buffer, the matrix
view and its alignment shift, the partial-sum workspace and the launch.

Each routine validates its shapes, then hands :func:`execute` a function that
describes its launches (a :class:`Recipe`); :func:`execute` settles where the
result goes, serves the cases that need no kernel (empty output, ``alpha ==
0``, empty inner dimension) with array operations, runs the recipe, and copies
a private result into ``out`` when ``out`` overlaps an input.

Replays: validating and planning a call costs several times the host time of
its launches (about 75 us a DGEMV on the H100's host, against 13 us for
cuBLAS through CuPy).  All of it depends only on what ``batched._plans``
signs (shapes, strides, dtypes, device, addresses modulo 128, the scalars'
types and zero tests) and the routine's letters and setting.  So a recipe
whose launches read and write the caller's own arrays (no copy, no private
result) is kept under that signature, and a later call with the same one runs
it with that call's pointers and scalars (:func:`try_replay`); everything
else takes the full path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from .. import _plans as plans
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


def execute(p: Problem, describe, key=None, given=None):
    """Run on the GPU: ``describe(p, target)`` gives the (Recipe, pointers, keep) that
    write the result into ``target``; the recipe is kept under ``key`` (from
    :func:`replay_key`) when its pointers are those of ``given``, the caller's own
    (A, x, y, out) (see :func:`record`)."""
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
                target[...] = p.beta * ar.astype_exact(p.y, p.dtype, xp)
            else:
                target.fill(0)
        else:
            recipe, pointers, keep = describe(p, target)
            run(recipe, pointers, p.alpha, p.beta, xp)
            del keep  # the launches are enqueued: temporaries may go back to the pool
            if key is not None and (out is None or target is out):
                record(key, recipe, pointers, given[:3] + (target,), p)
    if out is not None and target is not out:
        ar.assign(out, target)
        return out
    return target


# --- recipes and replays -------------------------------------------------------------


class Slot:
    """A kernel argument bound at run time: an operand's address, a scalar, or the
    partial sums' workspace and tickets."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Slot({self.name})"


A_PTR, X_PTR, Y_PTR, OUT_PTR = Slot("A"), Slot("x"), Slot("y"), Slot("out")
ALPHA, BETA, WORK, COUNTERS = Slot("alpha"), Slot("beta"), Slot("work"), Slot("counters")
_OPERAND_SLOTS = (A_PTR, X_PTR, Y_PTR, OUT_PTR)


@dataclass(frozen=True)
class Recipe:
    """A call's launches in order (:class:`batched._launch.PackedLaunch`, Slots bound);
    ``work`` elements of the result dtype and ``segments`` tickets when blocks combine
    partial sums (0: none); the result's length and dtype."""

    launches: tuple
    work: int
    segments: int
    rows: int
    dtype: np.dtype


def run(recipe: Recipe, pointers, alpha, beta, xp) -> None:
    """Enqueue the recipe with the (A, x, y, out) addresses ``pointers`` (0 for one
    not read) and the converted scalars."""
    values = dict(zip(_OPERAND_SLOTS, pointers))
    values[ALPHA], values[BETA] = alpha, beta
    if recipe.work:  # the pool may hand the workspace on once the launches are enqueued
        work, counters = xp.empty(recipe.work, recipe.dtype), segment_counters(xp, recipe.segments)
        values[WORK], values[COUNTERS] = work.data.ptr, counters.data.ptr
    else:
        values[WORK] = values[COUNTERS] = 0
    for launch in recipe.launches:
        launch(values)


def launch_step(source: Path, name: str, grid: int, threads: int, args, dtype) -> ln.PackedLaunch:
    """One launch of a recipe: the compiled kernel of ``name`` in ``source``; each Slot
    among ``args`` is bound at run time (the scalars in ``dtype``, the rest addresses)."""
    held = tuple((np.dtype(dtype).type(0) if a in (ALPHA, BETA) else np.uint64(0)) if type(a) is Slot else a
                 for a in args)
    bound = [(i, a) for i, a in enumerate(args) if type(a) is Slot]
    return ln.PackedLaunch(build.get_kernel(source, name), grid, threads, 0, held, bound)


_recipes: dict = {}
_MAX_RECIPES = 512


def replay_key(tag, A, x, y, out, alpha, beta):
    """The signature a call tagged ``tag`` (routine, letters, setting: hashable) is
    kept under (``batched._plans.plan_key``), or None when no replay can apply.  A
    tag holds each letter's type as well: 1 == True, and lower=1 must take the
    full path (and its TypeError), not lower=True's recipe."""
    try:
        hash(tag)
    except TypeError:
        return None
    return plans.plan_key(("kblas", tag), (A, x), y, out, alpha, beta)


def try_replay(key, A, x, y, out, alpha, beta):
    """The result of the recipe kept under ``key`` run on these operands, or None (no
    recipe, scalars that need the full check, or an ``out`` that overlaps an input
    and so needs a private result): the caller then takes the full path."""
    kept = _recipes.get(key) if key is not None else None
    if kept is None:
        return None
    recipe, zeros = kept
    scalars = plans.replay_scalars(recipe.dtype, zeros, alpha, beta)
    if scalars is None:
        return None
    target = plans.replay_target(out, (A, x), y, bool(scalars[1]), (recipe.rows,), recipe.dtype)
    if target is not None:
        import cupy

        pointers = (A.data.ptr, x.data.ptr, y.data.ptr if y is not None else 0, target.data.ptr)
        run(recipe, pointers, *scalars, cupy)
    return target


def record(key, recipe: Recipe, pointers, given, p: Problem) -> None:
    """Keep ``recipe`` under ``key`` when the launches read and wrote only the
    caller's own arrays ``given`` (A, x, y, result): an operand read through a copy
    (a dtype conversion, a misaligned or uncollapsible one) has the copy's address
    in ``pointers``, and a replay would point at memory of this call."""
    own = tuple(a.data.ptr if a is not None else 0 for a in given)
    if not p.read_y:
        own = own[:2] + (0,) + own[3:]
    if tuple(pointers) != own:
        return
    if len(_recipes) >= _MAX_RECIPES:
        _recipes.clear()
    _recipes[key] = (recipe, (not p.alpha, not p.beta))


def clear_replays() -> None:
    _recipes.clear()


# --- operands as kernel arguments ---------------------------------------------------


def matrix_view(p: Problem, prefer: str = "F"):
    """A's column-major view (a ``MatrixOperand``) and its row origin (alignment shift);
    ``prefer``: the orientation a matrix with one row or column is read in."""
    a = matrix_operand(ar.astype_exact(p.A, p.dtype, p.xp), (), p.xp, prefer)
    item = p.dtype.itemsize
    shift = (a.base % ALIGN_BYTES) // item if a.base % item == 0 else 0
    return a, shift


def vector_loads(a, shift: int, item: int) -> bool:
    """Whether every column's element -shift of the view ``a`` is 16-byte aligned (the
    kernels may then load 16 bytes at a time)."""
    return (a.base - shift * item) % 16 == 0 and (a.ld * item) % 16 == 0


def x_vector_loads(x_ptr: int, incx: int, shift: int, item: int) -> bool:
    """Whether x is contiguous with its elements aligned as A's rows (element -shift on a
    16-byte boundary): 16-byte loads of both (the kernels' KBLAS_XVEC)."""
    return incx == 1 and (x_ptr - shift * item) % 16 == 0


def vector_args(p: Problem, v, length: int, keep: list):
    """(address, increment) of a vector broadcast to ``length``; (0, 0) for None.

    A converted or copied vector is appended to ``keep``, which the caller
    holds until the launch is enqueued.
    """
    if v is None:
        return 0, np.int64(0)
    v = p.xp.broadcast_to(ar.astype_exact(v, p.dtype, p.xp), (length,))
    op = vector_operand(v, (), p.xp)
    keep.append(op.arr)
    return op.base, np.int64(op.inc)


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


def blocks(length: int, nb: int) -> int:
    return -(-length // nb)


def sm_count() -> int:
    return multiprocessor_count()


def launch(source: Path, name: str, grid: int, threads: int, args) -> None:
    kernel = build.get_kernel(source, name)
    kernel((grid,), (threads,), args)


def ctype(dtype) -> str:
    return ar.CTYPES[np.dtype(dtype)]
