"""Batched GEMV: y_b = alpha * op(A_b) x_b + beta * y_b (launcher and CPU backend)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from . import _arrays as ar
from . import _launch as ln
from . import _plans as plans
from ._batch import MatrixBatch, allocate_vectors, length_of, vector_list
from ._operands import lists_overlap, matrix_operand, overlaps, vector_operand, writable_directly
from .settings import (GEMV_SETTINGS, PACKED_PIECES, GemvSetting, check_setting, choose_gemv_setting,
                       multiprocessor_count, packed_pieces, resident_blocks, stage_fits)
from .device_functions import build

SOURCE = Path(__file__).with_name("gemv.cu")

# Launch flags of gemv.cu.
_CONJ, _READ_Y, _SKIP_PRODUCT = 1, 2, 4


PACKED_LAYOUTS = ("uniform", "pointer")


def kernel_name(layout: str, dtype, setting: GemvSetting, trans: bool, ppc: int = 0) -> str:
    """The instantiation a launch runs; a packed setting names its kernel for ``ppc``."""
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    head = f"{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}"
    if setting.packed:
        return f"gemv_packed_kernel<{head}, {ppc}, {'true' if trans else 'false'}>"
    kernel = "gemv_staged_kernel" if setting.staged else "gemv_tall_kernel" if setting.tall else "gemv_kernel"
    return f"{kernel}<{head}, {setting.template_args()}, {'true' if trans else 'false'}>"


def stage_capacity(matrix_elements: int, inner: int) -> int:
    """Elements a staged group holds per buffer: the matrix and the vector x."""
    return matrix_elements + inner


def _block_threads(setting, layout) -> int:
    """gemv_kernel's block (gemv_block_threads<MatA>() in gemv.cu): a variable-size
    batch's sub-warp groups go one warp a block."""
    if layout == "variable" and setting.group_threads <= 32:
        return 32
    return setting.block_threads


def _launch(layout, dtype, setting, trans, operands, alpha, beta, flags, count, outputs, capacity,
            aligned=False, ppc=0):
    """Launch on the current stream; ``operands`` are the A, x, y and out accessors.
    Returns (kernel, grid, block, shared memory, args) for a plan.

    ``outputs``: the longest output (classic and tall tiling); ``capacity``: the
    largest stage_capacity of the batch; ``aligned``: every matrix starts at a
    multiple of 128 bytes (tall tiles then need no extra row tile).  A staged
    setting whose buffers would not fit shared memory runs its unstaged twin
    (same threads, operands read from global memory), so any setting can be
    forced on any shape; so does a packed setting on a batch that is not (``ppc``: the
    uniform batch's packed_pieces, 0 for other batches).
    """
    itemsize = np.dtype(dtype).itemsize
    if (setting.staged and not stage_fits(capacity, itemsize)) or (setting.packed and not ppc):
        setting = setting.unstaged()  # the same threads, reading global memory element by element
    kernel = build.get_kernel(SOURCE, kernel_name(layout, dtype, setting, trans, ppc))
    tail = (alpha, beta, np.int32(flags), np.int64(count))
    if setting.tall:  # a block per (matrix, segment)
        tiles = setting.tall_segments(outputs, trans, itemsize, aligned)
        grid, block, smem = ln.grid_for(count * tiles, 1), setting.block_threads, 0
        args = (*operands, *tail, np.int32(tiles))
    elif setting.packed:  # a warp a matrix
        grid, block, smem = ln.grid_for(count, setting.groups_per_block), setting.block_threads, 0
        args = (*operands, *tail)
    elif not setting.staged:
        tiles = setting.tiles(outputs)
        block, smem = _block_threads(setting, layout), 0
        grid = ln.grid_for(count * tiles, block // setting.group_threads)
        args = (*operands, *tail, np.int32(tiles))
    else:
        groups = setting.stage_groups_per_block(capacity, itemsize)
        smem = groups * setting.stage_bytes(capacity, itemsize)
        block = groups * setting.group_threads
        grid = min(-(-count // groups), resident_blocks(block, smem))
        args = (*operands, *tail, np.int32(capacity))
    kernel((grid,), (block,), args, shared_mem=smem)
    return kernel, (grid,), (block,), smem, args


build.register(SOURCE, [kernel_name(layout, dt, s, t) for layout in ln.LAYOUT_ACCESSORS
                        for dt in ar.SUPPORTED_DTYPES for s in GEMV_SETTINGS if not s.packed
                        for t in (False, True)]
               + [kernel_name(layout, dt, s, t, ppc) for layout in PACKED_LAYOUTS for dt in ar.SUPPORTED_DTYPES
                  for s in GEMV_SETTINGS if s.packed for ppc in PACKED_PIECES for t in (False, True)])


def gemv(A, x, y=None, *, alpha=1.0, beta=0.0, trans="N", out=None, setting=None):
    """Batched matrix-vector product ``alpha * op(A) @ x + beta * y``.

    Parameters
    ----------
    A : array_like, shape (..., m, n), or a list of 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        The matrices.  Any strides; column-major and row-major matrices are
        read in place, other strides are copied once.
    x : array_like, shape (..., k) with k the columns of op(A)
        The vectors; batch dimensions broadcast with A's like ``numpy.matmul``
        (a 1-D ``x`` is used for every matrix).  With a list ``A``: a list of
        1-D arrays, or an array (batch, k), or one 1-D array for all.
    y : array_like, optional
        Added as ``beta * y``; broadcast to the result shape.  Never read when
        ``beta == 0`` (NaN there does not propagate), never written.
    alpha, beta : scalar
        Finite; complex only with complex operands.
    trans : {'N', 'T', 'C'}
        op(A) = A, A^T or A^H (case-insensitive).
    out : array, optional
        Receives the result (exact shape and dtype); may be ``y`` itself.
    setting : GemvSetting, optional
        Force a kernel setting (GPU); default chosen by shape.

    Returns
    -------
    out : array of shape (..., rows of op(A)).  For list or batch-object input:
        a list of 1-D arrays, or one array (count, rows) when ``x`` is an array
        (count, k) and every result has one length (no per-matrix Python work).

    Raises
    ------
    TypeError, ValueError
        Bad dtypes, shapes, letters or scalars, before any work; ``out`` untouched.

    See Also
    --------
    numpy.matmul, cupy.matmul

    Notes
    -----
    CuPy arrays run on the current stream without synchronizing; NumPy arrays
    run on the CPU backend.  Operands of different precisions promote like
    ``numpy.result_type``.
    """
    check_setting(setting, GemvSetting, GEMV_SETTINGS)
    op = ar.parse_op(trans, "trans")
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _gemv_list(A, x, y, alpha, beta, op, out, setting)
    key, done = plans.try_replay(("gemv", op, setting), (A, x), y, out, alpha, beta)
    if done is not None:
        return done
    given = (A, x, y)  # a plan is kept only on these (plans.record)

    A, x, y, out, xp, dtype, alpha, beta = ar.blas_operands(A, x, y, out, alpha, beta)
    if A.ndim < 2:
        raise ValueError(f"A must have shape (..., m, n), got shape {A.shape}")
    if x.ndim < 1:
        raise ValueError(f"x must have shape (..., k), got shape {x.shape}")
    m, n = A.shape[-2:]
    rows, inner = (m, n) if op == "N" else (n, m)
    if x.shape[-1] != inner:
        raise ValueError(f"x has shape {x.shape} but op(A) has {inner} columns "
                         f"(A has shape {A.shape}, trans={op!r})")
    try:
        batch = np.broadcast_shapes(A.shape[:-2], x.shape[:-1])
    except ValueError:
        raise ValueError(f"batch dimensions of A {A.shape} and x {x.shape} do not broadcast") from None
    shape = (*batch, rows)
    ar.check_result_operands(y, "y", out, shape, dtype)
    read_y = y is not None and beta != 0
    capacity = stage_capacity(m * n, inner)

    if xp is np:
        result = _gemv_numpy(A.astype(dtype, copy=False), x.astype(dtype, copy=False),
                             y.astype(dtype, copy=False) if read_y else None, alpha, beta, op, shape)
        if out is None:
            return result
        out[...] = result
        return out

    count = math.prod(batch)
    target = out
    if out is None:
        target = xp.empty(shape, dtype)
    elif not writable_directly(out, batch, 1) or overlaps(xp, out, (A, x)) or (
            read_y and out is not y and overlaps(xp, out, (y,))):
        target = xp.empty(shape, dtype)  # private result, copied into out below
    if count and rows:
        skip = alpha == 0 or inner == 0
        a = matrix_operand(ar.astype_exact(A, dtype, xp), batch, xp)
        xv = vector_operand(ar.astype_exact(x, dtype, xp), batch, xp)
        yv = vector_operand(xp.broadcast_to(ar.astype_exact(y, dtype, xp), shape), batch, xp) if read_y else None
        ov = vector_operand(target, batch, xp)
        view_op = a.view_op(op)
        trans = ar.op_transposes(view_op)
        flags = (_CONJ if ar.op_conjugates(view_op) else 0) | (_READ_Y if read_y else 0) | (
            _SKIP_PRODUCT if skip else 0)
        ppc = packed_pieces(a.rows, a.ld, dtype.itemsize, a.base, a.stride, count)
        setting = setting or choose_gemv_setting(a.rows, a.cols, trans, count, multiprocessor_count(),
                                                 stage_fits(capacity, dtype.itemsize), dtype.name,
                                                 packed=ppc > 0)
        vec = lambda v: ln.pack("UniformVector", v.base, v.stride, v.inc) if v else ln.pack(  # noqa: E731
            "UniformVector", 0, 0, 0)
        launched = _launch("uniform", dtype, setting, trans,
                           (ln.pack("UniformMatrix", a.base, a.stride, a.ld, a.rows, a.cols), vec(xv), vec(yv),
                            vec(ov)), alpha, beta, flags, count, rows, capacity,
                           aligned=a.base % 128 == 0 and (count == 1 or a.stride * dtype.itemsize % 128 == 0),
                           ppc=ppc)
        if target is out or out is None:
            plans.record(key, *launched, (*given, target), (4, 5), shape, dtype)
    if out is not None and target is not out:
        ar.assign(out, target)
        return out
    return target


def _gemv_numpy(A, x, y, alpha, beta, op, shape):
    """CPU backend: BLAS's rules (alpha == 0 never reads A, x; y read only when beta != 0)."""
    dtype = np.result_type(A, x)
    if alpha == 0 or A.shape[-1 if op == "N" else -2] == 0:
        prod = np.zeros(shape, dtype)
    else:
        prod = alpha * np.matmul(ar.apply_op(A, op, np), x[..., None])[..., 0]
        prod = np.broadcast_to(prod, shape)
    if y is not None:
        return (prod + beta * y).astype(dtype, copy=False)
    return np.array(prod, dtype=dtype)


def _gemv_list(A, x, y, alpha, beta, op, out, setting):
    """Pointer-array and variable-size batches: a list of results, or one array
    (count, rows) when x is an array (count, k) and every result has one length."""
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    # Lengths are one int for a PointerBatch: a repeated call does no per-matrix Python work.
    rows, inner = batch.op_lengths(op)
    xs = vector_list(x, batch, "x", inner)
    ys = vector_list(y, batch, "y", rows) if y is not None else None
    dtype = np.result_type(batch.dtype, xs.dtype, *([ys.dtype] if ys is not None else []))
    alpha = ar.check_scalar(alpha, "alpha", dtype)
    beta = ar.check_scalar(beta, "beta", dtype)
    outs = vector_list(out, batch, "out", rows, exact_dtype=dtype) if out is not None else None
    read_y = ys is not None and beta != 0
    capacity, max_rows = batch.memo(("gemv", op), lambda: (
        int(np.max(stage_capacity(batch.shape_array.prod(axis=1), inner), initial=0)),
        int(np.max(rows, initial=0))))
    as_array = xs.rows_of is not None and isinstance(rows, int)
    xp = batch.xp
    if xp is np:
        results = [_gemv_numpy(a.astype(dtype, copy=False), xi.astype(dtype, copy=False),
                               ys.arrays[i].astype(dtype, copy=False) if read_y else None,
                               alpha, beta, op, (length_of(rows, i),))
                   for i, (a, xi) in enumerate(zip(batch.arrays_user, xs.arrays))]
        if outs is None:
            return np.stack(results) if as_array else results
        for o, r in zip(outs.arrays, results):
            o[...] = r
        return _returned(outs, as_array)

    batch = batch.astype(dtype)
    xs = xs.astype(dtype)
    ys = ys.astype(dtype) if read_y else None
    direct = outs is not None and outs.direct and not lists_overlap(
        outs.pieces(), [*batch.arrays, *xs.pieces(), *(ys.pieces() if read_y else [])])
    count = batch.count
    result = outs if direct else allocate_vectors(rows, dtype, xp, count)
    if count and max_rows:
        view_op = ar.FLIP[op] if batch.transposed else op
        trans = ar.op_transposes(view_op)
        flags = (_CONJ if ar.op_conjugates(view_op) else 0) | (_READ_Y if read_y else 0) | (
            _SKIP_PRODUCT if alpha == 0 else 0)
        # A variable-size batch is tuned for its typical member: the largest one's
        # setting leaves most threads idle on the rest (H100: 211 against 177 us
        # for 31,767 members of 1-64 rows and columns).
        # Nor is it staged: buffers sized for the largest member hold few groups a block.
        variable = batch.layout == "variable"
        vr, vc = batch.view_dims_typical if variable else batch.view_dims_max
        ppc = 0 if variable else batch.memo("packed_pieces", lambda: packed_pieces(
            vr, batch.lds[0], dtype.itemsize, 0 if all(a.data.ptr % 16 == 0 for a in batch.arrays) else 1, 0, 1))
        setting = setting or choose_gemv_setting(vr, vc, trans, count, multiprocessor_count(),
                                                 not variable and stage_fits(capacity, dtype.itemsize),
                                                 dtype.name, batch.layout, packed=ppc > 0)
        _launch(batch.layout, dtype, setting, trans,
                (batch.struct(), xs.struct(), ys.struct() if read_y else ln.pack("PointerVector", 0, 0, 0),
                 result.struct()), alpha, beta, flags, count, max_rows, capacity, ppc=ppc)
    if outs is not None and result is not outs:
        if outs.rows_of is not None and result.rows_of is not None:
            outs.rows_of[...] = result.rows_of
        else:
            for o, r in zip(outs.arrays, result.arrays):
                ar.assign(o, r)
        return _returned(outs, as_array)
    return _returned(result, as_array)


def _returned(vectors, as_array):
    """The 2-D array behind the vectors when the call returns one, else the list."""
    return vectors.rows_of if as_array and vectors.rows_of is not None else vectors.arrays
