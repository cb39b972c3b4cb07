"""Batched triangular solves: ``trsv`` (BLAS) and ``solve_triangular`` (SciPy).

Launcher and CPU backend.  The GPU kernel (``trsv.cu``) solves one
(matrix, right-hand side) per thread group in MAGMA's one-level blocked or
recursive design (see ``settings.py``); the CPU backend runs the same column
sweep vectorized over the batch with NumPy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from .._batch import MatrixBatch, members_vector, rows_vector
from .._operands import matrix_operand
from ..device_functions import build
from ..settings import multiprocessor_count
from . import _solvers as sv
from .settings import (THREAD_NB, TRSV_SETTINGS, TrsvSetting, check_trsv_setting, choose_trsv_setting,
                       plan_trsv)

SOURCE = Path(__file__).with_name("trsv.cu")

# Launch flags of trsv.cu; op(A) goes in bits 4..5.
_LOWER, _UNIT, _CHECK, _ROWS16, _VECS16 = 1, 2, 4, 8, 64


def kernel_name(layout: str, dtype, setting: TrsvSetting) -> str:
    """The blocked, recursive, pipelined or staged kernel of ``setting`` (the thread
    design's is thread_kernel_name, its NB chosen by n)."""
    if setting.thread:
        raise ValueError(f"{setting} names no trsv_kernel: see thread_kernel_name")
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    operands = f"{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}"
    if setting.staged:
        return f"trsv_staged_kernel<{operands}>"
    kernel = "trsv_pipeline_kernel" if setting.pipelined else "trsv_kernel"
    return f"{kernel}<{operands}, {setting.template_args()}>"


def tile_kernel_name(layout: str, dtype, lanes: int) -> str:
    """The single-tile kernel (TrsvSetting.single_tile) for groups of ``lanes``."""
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    return f"trsv_tile_kernel<{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}, {lanes}>"


def thread_kernel_name(layout: str, dtype, nb: int) -> str:
    """The thread design's kernel (TrsvSetting.thread) for matrices up to ``nb`` unknowns."""
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    return f"trsv_thread_kernel<{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}, {nb}>"


TILE_LANES = sorted({s.group_threads for s in TRSV_SETTINGS if s.single_tile(s.group_threads)})

build.register(SOURCE, [kernel_name(layout, dt, s) for layout in ln.LAYOUT_ACCESSORS
                        for dt in ar.SUPPORTED_DTYPES for s in TRSV_SETTINGS if not s.thread]
               + [tile_kernel_name(layout, dt, w) for layout in ln.LAYOUT_ACCESSORS
                  for dt in ar.SUPPORTED_DTYPES for w in TILE_LANES]
               + [thread_kernel_name(layout, dt, nb) for layout in ln.LAYOUT_ACCESSORS
                  for dt in ar.SUPPORTED_DTYPES for nb in THREAD_NB])


def trsv(A, x, *, lower=True, trans="N", unit_diagonal=False, setting=None):
    """Batched triangular solve ``op(A) @ result = x`` (BLAS xTRSV, not in place).

    Parameters
    ----------
    A : array_like, shape (..., n, n), or a list of square 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Only the triangle named by ``lower`` is read (and not the diagonal
        when ``unit_diagonal``).  Any strides.
    x : array_like
        Right-hand sides: shape ``A.shape[:-1]`` (a batch of vectors), or
        (..., n, k) (k columns each, batch dimensions broadcast like
        ``numpy.matmul``), or (n,) for every matrix.  With a list ``A``: a
        list of (n_i,) or (n_i, k) arrays, an array (count, n) or
        (count, n, k), or one 1-D array for all.
    lower : bool
        A is lower (default, as BLAS callers usually hold L) or upper triangular.
    trans : {'N', 'T', 'C'} or {0, 1, 2}
        Solve A, A^T or A^H (case-insensitive).
    unit_diagonal : bool
        Assume ones on the diagonal (never read).
    setting : TrsvSetting, optional
        Force a kernel setting (GPU); default chosen by n.

    Returns
    -------
    result : array of x's shape (broadcast); for list input a list, or one
        array when x is one (count, n[, k]) array (matrices of one size).  A new
        array: ``x`` is never modified.

    Raises
    ------
    TypeError, ValueError
        Bad dtypes, shapes or flags, or a forced setting that cannot take the
        matrices (the thread design past 16 unknowns, the staged one past 64), before any work.

    See Also
    --------
    solve_triangular : the same solve with LAPACK's zero-diagonal check.
    scipy.linalg.blas.dtrsv

    Notes
    -----
    As in BLAS there is no singularity check: an exactly zero diagonal entry
    gives Inf/NaN in that matrix's solution (and only there).  Never
    synchronizes.
    """
    result, _ = _solve(A, x, lower, trans, unit_diagonal, False, setting, "x")
    return result


def solve_triangular(A, B, *, lower=False, trans=0, unit_diagonal=False, check=True, setting=None):
    """Batched ``scipy.linalg.solve_triangular``: solve op(A) X = B for every matrix.

    Parameters
    ----------
    A : array_like, shape (..., n, n), or a list of square 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Only the triangle named by ``lower`` is read.
    B : array_like
        Shape ``A.shape[:-1]`` (a batch of vectors), (..., n, k) (batch
        dimensions broadcast like ``numpy.matmul``) or (n,); with a list
        ``A``, as for :func:`trsv`.
    lower : bool
        Use the lower triangle (default False, as SciPy).
    trans : {0, 1, 2, 'N', 'T', 'C'}
        Solve A X = B, A^T X = B or A^H X = B.
    unit_diagonal : bool
        Assume ones on the diagonal (never read).
    check : bool
        True (default): raise for an exactly zero diagonal entry, which
        synchronizes with the GPU.  False: return ``(X, info)`` without
        synchronizing.
    setting : TrsvSetting, optional
        Force a kernel setting (GPU).

    Returns
    -------
    X : array of B's (broadcast) shape; for list input a list, or one array
        when B is one (count, n[, k]) array (matrices of one size).
    info : int32 array shaped like the batch (only with ``check=False``)
        LAPACK's xTRTRS meaning: 0, or k > 0 when A[k-1, k-1] is exactly zero
        (the first such k); that matrix's X is then B unchanged, as LAPACK
        leaves it.

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, naming every batch index whose matrix has an
        exactly zero diagonal entry (integers for one batch dimension, index
        tuples for more).
    TypeError, ValueError
        Bad dtypes, shapes or flags, or a forced setting that cannot take the
        matrices (the thread design past 16 unknowns, the staged one past 64), before any work.

    See Also
    --------
    scipy.linalg.solve_triangular, trsv

    Notes
    -----
    SciPy reads ``b`` of ndim >= 2 as (..., n, k); here ``B`` of shape
    ``A.shape[:-1]`` is a batch of vectors (the library's rule for every
    solver).  There is no ``check_finite``: NaN/Inf stay in their own matrix.
    """
    check = sv.check_bool(check, "check")
    X, info = _solve(A, B, lower, trans, unit_diagonal, True, setting, "B")
    if not check:
        return X, info
    sv.raise_if_failed(info, sv.SINGULAR)
    return X


# --- validation ------------------------------------------------------------------------


def _flags(lower, unit_diagonal, trans):
    return sv.check_bool(lower, "lower"), sv.check_bool(unit_diagonal, "unit_diagonal"), ar.parse_op(trans, "trans")


def _solve(A, B, lower, trans, unit_diagonal, check, setting, b_name):
    lower, unit, op = _flags(lower, unit_diagonal, trans)
    check_trsv_setting(setting)
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _solve_list(A, B, lower, op, unit, check, setting, b_name)
    A, _ = ar.as_array(A, "A")
    B, _ = ar.as_array(B, b_name)
    xp = ar.common_backend({"A": A, b_name: B})
    dtype = ar.result_dtype({"A": A, b_name: B})
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must have shape (..., n, n) (square matrices), got shape {A.shape}")
    batch, n, k, vectors = sv.rhs_shape(A.shape, B.shape, b_name)
    Bm = B[..., None] if vectors else B
    shape = (*batch, n, k)
    if xp is np:
        X, info = _solve_numpy(A.astype(dtype, copy=False), np.broadcast_to(Bm, shape).astype(dtype),
                               lower, op, unit, check)
    else:
        X, info = _solve_cupy(xp, ar.astype_exact(A, dtype, xp), ar.astype_exact(Bm, dtype, xp), batch, n, k,
                              lower, op, unit, check, setting)
    if vectors:
        X = X[..., 0]
    return X, (info if check else None)


# --- CPU backend -----------------------------------------------------------------------


def _triangle(A, lower, unit):
    """The referenced triangle of A, the other one zero (NaN there never enters)."""
    T = np.tril(A) if lower else np.triu(A)
    if unit:
        n = A.shape[-1]
        T = T.copy()
        T[..., np.arange(n), np.arange(n)] = 1
    return T


def _first_zero_diagonal(A, unit):
    """LAPACK's info: 1-based index of the first exactly zero diagonal entry, else 0."""
    batch = A.shape[:-2]
    if unit or A.shape[-1] == 0:
        return np.zeros(batch, np.int32)
    zero = np.diagonal(A, axis1=-2, axis2=-1) == 0
    return np.where(zero.any(axis=-1), zero.argmax(axis=-1) + 1, 0).astype(np.int32)


def _solve_numpy(A, X, lower, op, unit, check):
    """Column sweep over the batch: X (..., n, k), a fresh array, becomes the solution.

    Each step divides one unknown by its diagonal entry and subtracts its
    column from the unknowns still to solve (the right-looking substitution),
    vectorized over every matrix and right-hand side at once.  With ``check``
    a matrix with an exactly zero diagonal entry keeps X = B (LAPACK's xTRTRS).
    """
    n = A.shape[-1]
    batch = X.shape[:-2]
    info = np.array(np.broadcast_to(_first_zero_diagonal(A, unit), batch), dtype=np.int32)
    bad = info > 0
    kept = X[bad].copy() if check and bad.any() else None
    M = ar.apply_op(_triangle(A, lower, unit), op, np)
    M = np.broadcast_to(M, (*batch, n, n))
    forward = lower != (op in ("T", "C"))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in (range(n) if forward else range(n - 1, -1, -1)):
            if not unit:
                X[..., j, :] /= M[..., j, j, None]
            rest = slice(j + 1, n) if forward else slice(0, j)
            X[..., rest, :] -= M[..., rest, j, None] * X[..., j, None, :]
    if kept is not None:
        X[bad] = kept
    return X, info


# --- GPU ---------------------------------------------------------------------------------


def _launch(layout, dtype, setting, view_op, n_max, count, nrhs, args, rows16=False):
    """Launch the solve of ``count`` systems of at most ``n_max`` unknowns and ``nrhs``
    right-hand sides; ``setting`` None takes the default for the kernel's op (``view_op``),
    the layout and the element type.  ``rows16``: the uniform operand's stored columns all
    start at 16-byte boundaries."""
    itemsize = np.dtype(dtype).itemsize
    transposed = ar.op_transposes(view_op)
    uniform_dtype = np.dtype(dtype).char if layout == "uniform" and nrhs == 1 else None
    setting = setting or choose_trsv_setting(n_max, count, multiprocessor_count(), transposed=transposed,
                                             itemsize=itemsize,
                                             pieces=transposed and rows16 and tile_pieces(n_max, itemsize),
                                             uniform_dtype=uniform_dtype)
    plan = plan_trsv(setting, n_max, itemsize, count * nrhs, sv.smem_limit())
    if setting.thread:
        name = thread_kernel_name(layout, dtype, setting.thread_nb(n_max))
    elif setting.single_tile(n_max):
        name = tile_kernel_name(layout, dtype, setting.group_threads)
    else:
        name = kernel_name(layout, dtype, setting)
    # the staged design's warps walk their items with a pipeline: only resident blocks
    ln.launch_planned(build.get_kernel(SOURCE, name), plan,
                      (*args, np.int64(count), np.int32(nrhs), np.int32(plan.xlen)), resident=setting.staged)


def tile_pieces(n: int, itemsize: int) -> bool:
    """Whether the 32-lane single tile reads the rows of a transposing op with n unknowns
    in 16-byte pieces (trsv.cuh, trsv_tile_load_pieces) when the rows are aligned."""
    return itemsize < 16 and n % (16 // itemsize) == 0


def _rows16(a, itemsize: int) -> bool:
    """Does every stored column of every matrix of the uniform operand ``a`` start at a
    16-byte boundary?"""
    return a.base % 16 == 0 and (a.stride * itemsize) % 16 == 0 and (a.ld * itemsize) % 16 == 0


def _vecs16(b_base, b_stride, b_inc, X, n, k, itemsize: int) -> bool:
    """Are the one right-hand side of every matrix and its solution (X, packed) contiguous
    runs from 16-byte boundaries?"""
    return (k == 1 and b_inc == 1 and b_base % 16 == 0 and (b_stride * itemsize) % 16 == 0
            and X.data.ptr % 16 == 0 and (n * itemsize) % 16 == 0)


def _flag_bits(lower_view, view_op, unit, check):
    return np.int32((_LOWER if lower_view else 0) | (_UNIT if unit else 0) | (_CHECK if check else 0)
                    | (ar.OP_CODE[view_op] << 4))


def _rhs_operand(xp, Bm, shape):
    """(array, base, batch stride, row increment, column stride) of the (..., n, k) right-hand sides."""
    batch = shape[:-2]
    arr = Bm if tuple(Bm.shape) == tuple(shape) else xp.broadcast_to(Bm, shape)
    strides = ar.elem_strides(arr)
    stride = ar.batch_stride(batch, strides[:-2]) if strides is not None else None
    if stride is None:
        arr = xp.ascontiguousarray(arr)
        strides = ar.elem_strides(arr)
        stride = ar.batch_stride(batch, strides[:-2])
    return arr, arr.data.ptr, stride, strides[-2], strides[-1]


def _solve_cupy(xp, A, Bm, batch, n, k, lower, op, unit, check, setting):
    shape = (*batch, n, k)
    count = int(np.prod(batch, dtype=np.int64))
    dtype = A.dtype
    X = xp.empty(shape, dtype)
    info = xp.zeros(batch, np.int32) if check else None
    if count == 0 or n == 0:
        return X, info
    a = matrix_operand(A, batch, xp)
    if k == 0:  # nothing to solve, but LAPACK still reports a zero diagonal
        if check and not unit:
            zero = ar.exactly_zero(xp.diagonal(xp.broadcast_to(A, (*batch, n, n)), axis1=-2, axis2=-1), xp)
            info[...] = xp.where(zero.any(axis=-1), zero.argmax(axis=-1) + 1, 0)
        return X, info
    b_arr, b_base, b_stride, b_inc, b_col = _rhs_operand(xp, Bm, shape)
    view_op = a.view_op(op)
    rows16 = _rows16(a, dtype.itemsize)
    vecs16 = _vecs16(b_base, b_stride, b_inc, X, n, k, dtype.itemsize)
    args = (ln.pack("UniformMatrix", a.base, a.stride, a.ld, a.rows, a.cols),
            ln.pack("UniformVector", b_base, b_stride, b_inc), np.int64(b_col),
            ln.pack("UniformVector", X.data.ptr, n * k, k), np.int64(1),
            info if check else np.uint64(0),
            _flag_bits(lower != a.transposed, view_op, unit, check)
            | np.int32((_ROWS16 if rows16 else 0) | (_VECS16 if vecs16 else 0)))
    _launch("uniform", dtype, setting, view_op, n, count, k, args, rows16)
    del b_arr
    return X, info


# --- lists -------------------------------------------------------------------------------


def _solve_list(A, B, lower, op, unit, check, setting, b_name):
    """A list batch.  B as one (count, n[, k]) array gives one array back (no
    per-member work on either backend); any other B gives a list."""
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    for i, (r, c) in enumerate(batch.shapes):
        if r != c:
            raise ValueError(f"A[{i}] must be square, got shape {(r, c)}")
    rows = sv.rhs_rows(B, batch, b_name)
    if rows is not None:
        whole, k, vectors = rows
        members, b_dtype = None, whole.dtype
    else:
        members, k, vectors, b_dtype = sv.rhs_list(B, batch, b_name)
    dtype = np.result_type(batch.dtype, b_dtype)
    xp, count = batch.xp, batch.count
    ns = [r for r, _ in batch.shapes]
    if xp is np:
        if members is None:  # equal n: one vectorized solve over the stacked matrices
            A_all = np.stack(batch.arrays_user).astype(dtype, copy=False)
            X, info = _solve_numpy(A_all, whole.astype(dtype, copy=True), lower, op, unit, check)
            return (X[..., 0] if vectors else X), (info if check else None)
        results, infos = [], []
        for a, b in zip(batch.arrays_user, members):
            X, info = _solve_numpy(a.astype(dtype, copy=False), b.astype(dtype, copy=True), lower, op, unit,
                                   check)
            results.append(X[:, 0] if vectors else X)
            infos.append(info)
        return results, (np.array(infos, dtype=np.int32).reshape(count) if check else None)

    batch = batch.astype(dtype)
    if members is None:
        b_all = xp.ascontiguousarray(ar.astype_exact(whole, dtype, xp))
        out = xp.empty(b_all.shape, dtype)
        b_vec, x_vec, keep = rows_vector(b_all, k), rows_vector(out, k), ()
    else:
        bs = [xp.ascontiguousarray(ar.astype_exact(b, dtype, xp)) for b in members]
        offsets = np.concatenate([[0], np.cumsum([n * k for n in ns], dtype=np.int64)])
        flat = xp.empty(int(offsets[-1]), dtype)
        out = [flat[int(offsets[i]):int(offsets[i + 1])].reshape(ns[i], k) for i in range(count)]
        (b_vec, b_ptrs), (x_vec, x_ptrs) = members_vector(bs, k, xp), members_vector(out, k, xp)
        keep = (b_ptrs, x_ptrs)  # alive until the launch is queued
    info = xp.zeros(count, np.int32) if check else None
    n_max = max(ns, default=0)
    if count and n_max and k:
        view_op = ar.FLIP[op] if batch.transposed else op
        args = (batch.struct(), b_vec, np.int64(1), x_vec, np.int64(1),
                info if check else np.uint64(0),
                _flag_bits(lower != batch.transposed, view_op, unit, check))
        _launch(batch.layout, dtype, setting, view_op, n_max, count, k, args)
    elif count and check and k == 0 and not unit:
        for i, a in enumerate(batch.arrays_user):
            zero = ar.exactly_zero(xp.diagonal(a), xp)
            info[i] = xp.where(zero.any(), zero.argmax() + 1, 0) if a.shape[0] else 0
    del keep
    if members is None:
        return (out[..., 0] if vectors else out), info
    return [x[:, 0] if vectors else x for x in out], info
