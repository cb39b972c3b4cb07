"""Batched GEMV: y_b = alpha * op(A_b) x_b + beta * y_b (launcher and CPU backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import _arrays as ar
from . import _launch as ln
from ._batch import MatrixBatch, allocate_vectors, vector_list
from ._operands import lists_overlap, matrix_operand, overlaps, vector_operand, writable_directly
from .settings import GEMV_SETTINGS, GemvSetting, check_setting, choose_gemv_setting, multiprocessor_count
from .device_functions import build

SOURCE = Path(__file__).with_name("gemv.cu")

# Launch flags of gemv.cu.
_CONJ, _READ_Y, _SKIP_PRODUCT = 1, 2, 4


def kernel_name(layout: str, dtype, setting: GemvSetting, trans: bool) -> str:
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    return (f"gemv_kernel<{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}, "
            f"{setting.template_args()}, {'true' if trans else 'false'}>")


build.register(SOURCE, [kernel_name(layout, dt, s, t) for layout in ln.LAYOUT_ACCESSORS
                        for dt in ar.SUPPORTED_DTYPES for s in GEMV_SETTINGS for t in (False, True)])


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
    out : array of shape (..., rows of op(A)); a list for list input.

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
    check_setting(setting, GemvSetting)
    op = ar.parse_op(trans, "trans")
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _gemv_list(A, x, y, alpha, beta, op, out, setting)

    A, _ = ar.as_array(A, "A")
    x, _ = ar.as_array(x, "x")
    y = ar.as_array(y, "y")[0] if y is not None else None
    out = ar.as_array(out, "out")[0] if out is not None else None
    xp = ar.common_backend({"A": A, "x": x, "y": y, "out": out})
    dtype = ar.result_dtype({"A": A, "x": x, "y": y})
    alpha = ar.check_scalar(alpha, "alpha", dtype)
    beta = ar.check_scalar(beta, "beta", dtype)
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

    if xp is np:
        result = _gemv_numpy(A.astype(dtype, copy=False), x.astype(dtype, copy=False),
                             y.astype(dtype, copy=False) if read_y else None, alpha, beta, op, shape)
        if out is None:
            return result
        out[...] = result
        return out

    count = int(np.prod(batch, dtype=np.int64))
    target = out
    if out is None:
        target = xp.empty(shape, dtype)
    elif not writable_directly(out, batch, 1) or overlaps(xp, out, (A, x)) or (
            read_y and out is not y and overlaps(xp, out, (y,))):
        target = xp.empty(shape, dtype)  # private result, copied into out below
    if count and rows:
        skip = alpha == 0 or inner == 0
        a = matrix_operand(A.astype(dtype, copy=False), batch, xp)
        xv = vector_operand(x.astype(dtype, copy=False), batch, xp)
        yv = vector_operand(xp.broadcast_to(y.astype(dtype, copy=False), shape), batch, xp) if read_y else None
        ov = vector_operand(target, batch, xp)
        view_op = a.view_op(op)
        trans = ar.op_transposes(view_op)
        flags = (_CONJ if ar.op_conjugates(view_op) else 0) | (_READ_Y if read_y else 0) | (
            _SKIP_PRODUCT if skip else 0)
        setting = setting or choose_gemv_setting(a.rows, a.cols, trans, count, multiprocessor_count())
        tiles = setting.tiles(rows)
        vec = lambda v: ln.pack("UniformVector", v.base, v.stride, v.inc) if v else ln.pack(  # noqa: E731
            "UniformVector", 0, 0, 0)
        kernel = build.get_kernel(SOURCE, kernel_name("uniform", dtype, setting, trans))
        kernel((ln.grid_for(count * tiles, setting.groups_per_block),), (setting.block_threads,),
               (ln.pack("UniformMatrix", a.base, a.stride, a.ld, a.rows, a.cols), vec(xv), vec(yv),
                vec(ov), alpha, beta, np.int32(flags), np.int64(count), np.int32(tiles)))
    if out is not None and target is not out:
        out[...] = target
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
    """Pointer-array and variable-size batches: lists in, list out."""
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    rows = [r if op == "N" else c for r, c in batch.shapes]
    inner = [c if op == "N" else r for r, c in batch.shapes]
    xs = vector_list(x, batch, "x", inner)
    ys = vector_list(y, batch, "y", rows) if y is not None else None
    dtype = np.result_type(batch.dtype, xs.dtype, *([ys.dtype] if ys is not None else []))
    alpha = ar.check_scalar(alpha, "alpha", dtype)
    beta = ar.check_scalar(beta, "beta", dtype)
    outs = vector_list(out, batch, "out", rows, exact_dtype=dtype) if out is not None else None
    read_y = ys is not None and beta != 0
    xp = batch.xp
    if xp is np:
        results = [_gemv_numpy(a.astype(dtype, copy=False), xi.astype(dtype, copy=False),
                               ys.arrays[i].astype(dtype, copy=False) if read_y else None,
                               alpha, beta, op, (rows[i],))
                   for i, (a, xi) in enumerate(zip(batch.arrays_user, xs.arrays))]
        if outs is None:
            return results
        for o, r in zip(outs.arrays, results):
            o[...] = r
        return outs.arrays

    batch = batch.astype(dtype)
    xs = xs.astype(dtype)
    ys = ys.astype(dtype) if read_y else None
    direct = outs is not None and outs.direct and not lists_overlap(
        outs.arrays, [*batch.arrays, *xs.arrays, *(ys.arrays if read_y else [])])
    result = outs if direct else allocate_vectors(rows, dtype, xp)
    count = len(rows)
    if count and max(rows):
        view_op = ar.FLIP[op] if batch.transposed else op
        trans = ar.op_transposes(view_op)
        flags = (_CONJ if ar.op_conjugates(view_op) else 0) | (_READ_Y if read_y else 0) | (
            _SKIP_PRODUCT if alpha == 0 else 0)
        vr, vc = batch.view_dims_max
        setting = setting or choose_gemv_setting(vr, vc, trans, count, multiprocessor_count())
        tiles = setting.tiles(max(rows))
        kernel = build.get_kernel(SOURCE, kernel_name(batch.layout, dtype, setting, trans))
        kernel((ln.grid_for(count * tiles, setting.groups_per_block),), (setting.block_threads,),
               (batch.struct(), xs.struct(), ys.struct() if read_y else ln.pack("PointerVector", 0, 0, 0),
                result.struct(), alpha, beta, np.int32(flags), np.int64(count), np.int32(tiles)))
    if outs is not None and result is not outs:
        for o, r in zip(outs.arrays, result.arrays):
            o[...] = r
        return outs.arrays
    return result.arrays
