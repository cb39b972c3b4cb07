"""Batched Cholesky: ``potrf``, ``potrs``, ``posv`` (LAPACK) and ``cholesky``
(NumPy), ``cho_factor``, ``cho_solve`` (SciPy).

Launchers and CPU backend.  The GPU kernels (``cholesky.cu``) factor each matrix
in one thread, lane group or block: the thread, rows and warps designs hold it in
registers (n <= 8, 32, 128), the fused design keeps the named triangle in shared
memory, and each of these solves POSV's right-hand sides in the same launch (fused:
for n <= 32); the blocked design works on the matrix in global memory a 32-column
panel at a time (see ``cholesky_settings.py``).  The CPU backend runs the same left-looking
column sweep vectorized over the batch with NumPy.  The solves of ``potrs`` and
``cho_solve`` are the triangular solves of ``trsv.py`` (L y = b, then L^H x = y).

Only the named triangle of A is ever read; the diagonal's imaginary parts are
ignored (LAPACK reads the real part only).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from .._batch import MatrixBatch, rows_vector
from .._operands import matrix_operand, writable_directly
from ..device_functions import build
from . import _solvers as sv
from . import trsv as _trsv
from .cholesky_settings import (BLOCKED_SETTINGS, CHOLESKY_SETTINGS, FUSED_SETTINGS, CholeskySetting,
                                check_cholesky_setting, choose_cholesky_setting, plan_cholesky)

SOURCE = Path(__file__).with_name("cholesky.cu")

# Launch flags of cholesky.cu.
_LOWER, _INPLACE, _ZERO_OTHER, _CONJ_SOLVE = 1, 2, 4, 8

NOT_POSITIVE_DEFINITE = sv.Failure("matrix is not positive definite", "a non-positive leading minor")


def kernel_name(layout: str, dtype, setting: CholeskySetting, solve: bool = False) -> str:
    """solve: the thread or fused kernel with POSV's solves compiled in (settings that can solve)."""
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    if setting.register:
        return (f"potrf_{setting.design}_kernel<{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}, "
                f"{setting.template_args()}, {'true' if solve else 'false'}>")
    if setting.fused:
        return (f"potrf_fused_kernel<{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, dtype)}, "
                f"{setting.template_args()}, {'true' if solve else 'false'}>")
    return f"potrf_blocked_kernel<{ln.accessor_type(mat, dtype)}, {setting.template_args()}>"


build.register(SOURCE, [kernel_name(layout, dt, s, solve) for layout in ln.LAYOUT_ACCESSORS
                        for dt in ar.SUPPORTED_DTYPES for s in CHOLESKY_SETTINGS
                        if s.compiled_for(np.dtype(dt).itemsize)
                        for solve in ((False, True) if s.can_solve(1) else (False,))])


# --- public functions ------------------------------------------------------------------


def potrf(A, *, lower=True, overwrite_a=False, setting=None):
    """Batched Cholesky factorization (LAPACK xPOTRF): A = L L^H or U^H U.

    Parameters
    ----------
    A : array_like, shape (..., n, n), or a list of square 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Hermitian (symmetric) positive definite matrices.  Only the triangle
        named by ``lower`` is read (the other may hold anything, NaN included);
        the imaginary parts of the diagonal are ignored.  Any strides.
    lower : bool
        Factor the lower triangle, A = L L^H (default, as LAPACK's callers
        usually do), or the upper, A = U^H U.
    overwrite_a : bool
        Allow the factor to be written into ``A`` (done for an array of the
        result dtype whose strides the kernel can write; never for lists).
    setting : CholeskySetting, optional
        Force a kernel setting (GPU); default chosen by n.

    Returns
    -------
    c : array of A's shape (a list for list input)
        The factor in the named triangle; the other triangle as it was in A.
    info : int32 array shaped like the batch ((count,) for lists)
        0, or k > 0 when the leading minor of order k is not positive definite
        (the pivot of column k is <= 0 or NaN).  The factorization of that
        matrix stopped there: the leading (k-1) x (k-1) block holds the factor
        of the leading minor of order k - 1, the rest of the named triangle is
        unspecified (part-updated, as LAPACK's blocked xPOTRF leaves it); the
        other matrices are unaffected.

    See Also
    --------
    scipy.linalg.lapack.dpotrf, cholesky, cho_factor

    Notes
    -----
    Never raises for numerical failure and never synchronizes.
    """
    lower = sv.check_bool(lower, "lower")
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    check_cholesky_setting(setting)
    return _factor(A, lower, overwrite_a, False, setting)


def potrs(c, B, *, lower=True):
    """Batched solve with a Cholesky factor (LAPACK xPOTRS): A X = B with A = L L^H or U^H U.

    Parameters
    ----------
    c : array_like, shape (..., n, n), or a list of square 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        The factors from :func:`potrf`; only the triangle named by ``lower`` is read.
    B : array_like
        Shape ``c.shape[:-1]`` (a batch of vectors), (..., n, k) (batch
        dimensions broadcast like ``numpy.matmul``) or (n,); with a list ``c``,
        a list of (n_i,) or (n_i, k) arrays, an array (count, n[, k]) or one 1-D array.
    lower : bool
        Whether ``c`` holds L (default) or U.

    Returns
    -------
    X : array of B's (broadcast) shape; for list input a list, or one array when
        B is one (count, n[, k]) array.  ``B`` is never modified.
    info : int32 array shaped like the batch
        Always 0 (LAPACK's xPOTRS reports argument errors only; here those raise).

    See Also
    --------
    scipy.linalg.lapack.dpotrs, cho_solve

    Notes
    -----
    Two triangular solves (:func:`batched.trsv`'s kernels).  Never synchronizes.
    """
    lower = sv.check_bool(lower, "lower")
    X = _solve_with_factor(c, B, lower)
    return X, _zero_info(c, B)


def posv(A, B, *, lower=True, overwrite_a=False, overwrite_b=False, setting=None):
    """Batched Hermitian positive definite solve (LAPACK xPOSV): factor A, solve A X = B.

    Parameters
    ----------
    A : array_like, shape (..., n, n), or a list of square 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Only the triangle named by ``lower`` is read.
    B : array_like
        Right-hand sides, as for :func:`potrs`.
    lower : bool
        Factor the lower (default) or the upper triangle.
    overwrite_a : bool
        Allow the factor to be written into ``A`` (as :func:`potrf`).
    overwrite_b : bool
        Accepted for LAPACK's signature; ``B`` is never modified.
    setting : CholeskySetting, optional
        Force the factorization's kernel setting (GPU).  A fused setting that
        covers n solves in the same launch; otherwise the solves follow as two
        triangular solves.

    Returns
    -------
    c : array of A's shape broadcast to the batch (a list for list input)
        The factor, as from :func:`potrf`.
    X : array of B's (broadcast) shape (list for list input, as :func:`potrs`)
        The solution; for a matrix with info > 0, B unchanged (LAPACK does
        not solve it).
    info : int32 array shaped like the batch
        As from :func:`potrf`.

    See Also
    --------
    scipy.linalg.lapack.dposv

    Notes
    -----
    For n <= 128 (the default setting; n <= 64 for complex128) factorization
    and solves are one kernel launch.  Never raises for numerical failure and never synchronizes.
    """
    lower = sv.check_bool(lower, "lower")
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    sv.check_bool(overwrite_b, "overwrite_b")
    check_cholesky_setting(setting)
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _posv_list(A, B, lower, setting)
    A, _ = ar.as_array(A, "A")
    B, _ = ar.as_array(B, "B")
    xp = ar.common_backend({"A": A, "B": B})
    dtype = ar.result_dtype({"A": A, "B": B})
    _check_square(A)
    batch, n, k, vectors = sv.rhs_shape(A.shape, B.shape, "B")
    A_full = A if tuple(A.shape[:-2]) == tuple(batch) else xp.broadcast_to(A, (*batch, n, n))
    if A_full is not A:
        overwrite_a = False
    Bm = B[..., None] if vectors else B
    if xp is not np:
        s = setting or choose_cholesky_setting(n, dtype.itemsize, sv.smem_limit())
        if s.can_solve(n) and n and k and int(np.prod(batch, dtype=np.int64)):
            C, X, info = _posv_fused_cupy(xp, A_full, Bm, dtype, batch, n, k, lower, overwrite_a, s)
            return C, (X[..., 0] if vectors else X), info
    C, info = _factor_array(A_full, xp, dtype, lower, overwrite_a, False, setting)
    Bw = ar.astype_exact(B, dtype, xp)
    X = _solve_with_factor(C, Bw, lower)
    Bfull = xp.broadcast_to(Bw, X.shape)
    bad = info.reshape(info.shape + (1,) * (X.ndim - info.ndim)) > 0
    X = xp.where(bad, Bfull, X)
    return C, X, info


def cholesky(A, *, upper=False, check=True):
    """Batched ``numpy.linalg.cholesky``: L with A = L L^H (or U with A = U^H U).

    Parameters
    ----------
    A : array_like, shape (..., n, n), or a list of square 2-D arrays
        Hermitian positive definite; only the lower triangle (the upper with
        ``upper=True``) is read, and the imaginary parts of its diagonal are ignored.
    upper : bool
        Return the upper factor U = L^H (NumPy 2's ``upper=``), read from the
        upper triangle.
    check : bool
        True (default): raise for a matrix that is not positive definite, which
        synchronizes with the GPU.  False: return ``(L, info)`` without synchronizing.

    Returns
    -------
    L : array of A's shape (a list for list input), the other triangle zero.
    info : int32 array shaped like the batch (only with ``check=False``), as :func:`potrf`.

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, naming every batch index whose matrix is not
        positive definite.
    TypeError, ValueError
        Bad dtypes, shapes or flags, before any work.

    See Also
    --------
    numpy.linalg.cholesky, potrf
    """
    upper = sv.check_bool(upper, "upper")
    check = sv.check_bool(check, "check")
    L, info = _factor(A, not upper, False, True, None)
    if not check:
        return L, info
    sv.raise_if_failed(info, NOT_POSITIVE_DEFINITE)
    return L


def cho_factor(a, *, lower=False, overwrite_a=False, check=True):
    """Batched ``scipy.linalg.cho_factor``: ``(c, lower)`` for :func:`cho_solve`.

    Parameters
    ----------
    a : array_like, shape (..., n, n), or a list of square 2-D arrays
        Only the triangle named by ``lower`` is read.
    lower : bool
        Factor the lower triangle (A = L L^H) or, as SciPy's default, the upper
        (A = U^H U).
    overwrite_a : bool
        Allow the factor to be written into ``a``.
    check : bool
        True (default): raise for a matrix that is not positive definite
        (synchronizes).  False: return ``(c, lower, info)`` without synchronizing.

    Returns
    -------
    c : array of a's shape (a list for list input): the factor in the named
        triangle, the other triangle as it was in ``a`` (SciPy leaves it too).
    lower : bool
    info : int32 array (only with ``check=False``), as :func:`potrf`.

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, naming the batch indices whose matrix is not positive definite.

    See Also
    --------
    scipy.linalg.cho_factor, potrf

    Notes
    -----
    There is no ``check_finite``: NaN/Inf stay in their own matrix (and make
    it fail).
    """
    lower = sv.check_bool(lower, "lower")
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    check = sv.check_bool(check, "check")
    c, info = _factor(a, lower, overwrite_a, False, None)
    if not check:
        return c, lower, info
    sv.raise_if_failed(info, NOT_POSITIVE_DEFINITE)
    return c, lower


def cho_solve(c_and_lower, b, *, overwrite_b=False):
    """Batched ``scipy.linalg.cho_solve``: solve A x = b given ``cho_factor``'s output.

    Parameters
    ----------
    c_and_lower : tuple (c, lower)
        From :func:`cho_factor` (only the named triangle of c is read).
    b : array_like
        The library's right-hand-side rule: shape ``c.shape[:-1]`` is a batch of
        vectors, (..., n, k) a batch of k-column matrices (batch dimensions
        broadcast), (n,) one vector for every matrix; lists as for :func:`potrs`.
    overwrite_b : bool
        Accepted for SciPy's signature; ``b`` is never modified.

    Returns
    -------
    x : array of b's (broadcast) shape (a list for list input, as :func:`potrs`).

    See Also
    --------
    scipy.linalg.cho_solve, potrs

    Notes
    -----
    SciPy reads ``b`` of ndim >= 2 as (..., n, k); here ``b`` shaped like
    ``c.shape[:-1]`` is a batch of vectors.  Nothing is checked numerically (as
    SciPy): a factor with a zero diagonal gives Inf/NaN in its own solution
    only.  Never synchronizes.
    """
    if not isinstance(c_and_lower, tuple) or len(c_and_lower) != 2:
        raise TypeError("c_and_lower must be the tuple (c, lower) that cho_factor returns")
    c, lower = c_and_lower
    lower = sv.check_bool(lower, "lower")
    sv.check_bool(overwrite_b, "overwrite_b")
    return _solve_with_factor(c, b, lower)


# --- validation and dispatch --------------------------------------------------------------


def _check_square(A):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must have shape (..., n, n) (square matrices), got shape {A.shape}")


def _factor(A, lower, overwrite, zero_other, setting):
    """(c, info) of one call: arrays or lists, either backend."""
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _factor_list(A, lower, zero_other, setting)
    A, xp = ar.as_array(A, "A")
    ar.check_dtype(A, "A")
    _check_square(A)
    return _factor_array(A, xp, A.dtype, lower, overwrite, zero_other, setting)


def _factor_array(A, xp, dtype, lower, overwrite, zero_other, setting):
    if xp is np:
        return _factor_numpy(A, dtype, lower, overwrite, zero_other)
    return _factor_cupy(xp, A, dtype, lower, overwrite, zero_other, setting)


def _solve_with_factor(c, B, lower):
    """L y = B, then L^H x = y (U^H y = B, U x = y for an upper factor): trsv's drivers."""
    first, second = ("N", "C") if lower else ("C", "N")
    Y, _ = _trsv._solve(c, B, lower, first, False, False, None, "B")
    X, _ = _trsv._solve(c, Y, lower, second, False, False, None, "B")
    return X


def _zero_info(c, B):
    """potrs's info: zeros shaped like the batch of the solve."""
    if isinstance(c, (list, tuple, MatrixBatch)):
        count = c.count if isinstance(c, MatrixBatch) else len(c)
        xp = c.xp if isinstance(c, MatrixBatch) else (ar.as_array(c[0], "c[0]")[1] if count else np)
        return xp.zeros(count, np.int32)
    c, xp = ar.as_array(c, "c")
    B, _ = ar.as_array(B, "B")
    batch = sv.rhs_shape(c.shape, B.shape, "B")[0]
    return xp.zeros(batch, np.int32)


# --- CPU backend -------------------------------------------------------------------------


def _lower_view(A, lower):
    """The named triangle as the lower triangle of a fresh array (the other part zero,
    so NaN there never enters): L(i, j) = A(i, j), or conj(A(j, i)) for the upper one."""
    if lower:
        return np.tril(A)
    return np.swapaxes(np.triu(A), -1, -2).conj()


def _potrf_lower_numpy(W):
    """W = L L^H in place on the lower triangle of W (..., n, n), left-looking as the
    GPU kernels (bdf::potrf_lower_columns): column j gets the update of the columns
    before it, then is scaled by the square root of its real pivot.  A matrix whose
    pivot is <= 0 or NaN stops there (its pivot stored, info = j + 1) while the
    others go on.  Returns info."""
    n = W.shape[-1]
    batch = W.shape[:-2]
    info = np.zeros(batch, np.int32)
    active = np.ones(batch, bool)
    with np.errstate(all="ignore"):
        for j in range(n):
            col = W[..., j:, j] - np.matmul(W[..., j:, :j], W[..., j, :j, None].conj())[..., 0]
            d = col[..., 0].real
            ok = active & (d > 0)
            fail = active & ~(d > 0)
            root = np.sqrt(np.where(ok, d, 1.0))
            new = np.where(ok[..., None], col / root[..., None].astype(W.dtype), col)
            new[..., 0] = np.where(ok, root, d)
            W[..., j:, j] = np.where(active[..., None], new, W[..., j:, j])
            info[fail] = j + 1
            active &= ~fail
    return info


def _factor_numpy(A, dtype, lower, overwrite, zero_other):
    n = A.shape[-1]
    W = _lower_view(A.astype(dtype, copy=False), lower).astype(dtype, copy=True)
    info = _potrf_lower_numpy(W)
    if zero_other:
        C = np.zeros(A.shape, dtype)
    elif overwrite and A.dtype == dtype and A.flags.writeable and writable_directly(A, A.shape[:-2], 2):
        C = A
    else:
        C = A.astype(dtype, copy=True)
    i, j = np.tril_indices(n)
    if lower:
        C[..., i, j] = W[..., i, j]
    else:
        C[..., j, i] = W[..., i, j].conj()
    return C, info


# --- GPU ---------------------------------------------------------------------------------


def _launch(layout, dtype, setting, n_max, count, args, nrhs=0):
    plan = plan_cholesky(setting, n_max, np.dtype(dtype).itemsize, count, sv.smem_limit(), nrhs,
                         packed=layout == "uniform")
    kernel = build.get_kernel(SOURCE, kernel_name(layout, dtype, setting, nrhs > 0))
    # the thread design's pipeline runs within a warp's turns: every block resident
    ln.launch_planned(kernel, plan, args, resident=bool(setting.thread and plan.smem))


def _dummy_vectors(layout):
    vec = ln.LAYOUT_ACCESSORS[layout][1]
    return (ln.pack(vec, 0, 0, 0), np.int64(0), ln.pack(vec, 0, 0, 0), np.int64(0), np.int32(0))


def _flags(lower_view, inplace, zero_other, conj_solve=False):
    return np.int32((_LOWER if lower_view else 0) | (_INPLACE if inplace else 0)
                    | (_ZERO_OTHER if zero_other else 0) | (_CONJ_SOLVE if conj_solve else 0))


def _output_like(xp, shape, dtype, transposed):
    """A new stack whose matrices have the orientation of the input's view: C order
    when the view is the transpose (row-major input), per-matrix column-major else."""
    if transposed:
        return xp.empty(shape, dtype)
    return xp.swapaxes(xp.empty((*shape[:-2], shape[-1], shape[-2]), dtype), -1, -2)


def _factor_operands(xp, A, dtype, overwrite, zero_other):
    """(C, a, c, inplace): the output array and the two matrix operands."""
    batch = A.shape[:-2]
    A = ar.astype_exact(A, dtype, xp)
    a = matrix_operand(A, batch, xp)
    inplace = bool(overwrite and a.arr is A and writable_directly(A, batch, 2))
    if inplace:
        return A, a, a, True
    C = _output_like(xp, A.shape, dtype, a.transposed)
    c = matrix_operand(C, batch, xp)
    assert c.transposed == a.transposed or A.shape[-1] <= 1
    return C, a, c, False


def _pack(op):
    return ln.pack("UniformMatrix", op.base, op.stride, op.ld, op.rows, op.cols)


def _factor_cupy(xp, A, dtype, lower, overwrite, zero_other, setting):
    batch, n = A.shape[:-2], A.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    if count == 0 or n == 0:
        C = A if overwrite and A.dtype == dtype else ar.astype_exact(A, dtype, xp, copy=True)
        return C, xp.zeros(batch, np.int32)
    C, a, c, inplace = _factor_operands(xp, A, dtype, overwrite, zero_other)
    info = xp.empty(batch, np.int32)   # every matrix's entry is written by the kernel
    setting = setting or choose_cholesky_setting(n, dtype.itemsize, sv.smem_limit())
    flags = _flags(lower != a.transposed, inplace, zero_other)
    if not setting.blocked:
        args = (_pack(a), _pack(c), *_dummy_vectors("uniform"), info, flags, np.int64(count), np.int32(n))
    else:
        args = (_pack(a), _pack(c), info, flags, np.int64(count))
    _launch("uniform", dtype, setting, n, count, args)
    return C, info


def _posv_fused_cupy(xp, A, Bm, dtype, batch, n, k, lower, overwrite, setting):
    """One launch: factor and both solves (n <= 32).  X is a new C-ordered (..., n, k)."""
    shape = (*batch, n, k)
    count = int(np.prod(batch, dtype=np.int64))
    C, a, c, inplace = _factor_operands(xp, A, dtype, overwrite, False)
    X = xp.empty(shape, dtype)
    info = xp.empty(batch, np.int32)
    b_arr, b_base, b_stride, b_inc, b_col = _trsv._rhs_operand(xp, ar.astype_exact(Bm, dtype, xp), shape)
    args = (_pack(a), _pack(c), ln.pack("UniformVector", b_base, b_stride, b_inc), np.int64(b_col),
            ln.pack("UniformVector", X.data.ptr, n * k, k), np.int64(1), np.int32(k), info,
            _flags(lower != a.transposed, inplace, False, conj_solve=a.transposed and dtype.kind == "c"),
            np.int64(count), np.int32(n))
    _launch("uniform", dtype, setting, n, count, args, nrhs=k)
    del b_arr
    return C, X, info


# --- lists -------------------------------------------------------------------------------


def _square_batch(A, name="A"):
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, name)
    for i, (r, c) in enumerate(batch.shapes):
        if r != c:
            raise ValueError(f"{name}[{i}] must be square, got shape {(r, c)}")
    return batch


def _list_outputs(xp, batch, dtype):
    """New matrices in the batch's orientation (slices of one buffer) and their batch."""
    ns = [r for r, _ in batch.shapes]
    offsets = np.concatenate([[0], np.cumsum([n * n for n in ns], dtype=np.int64)])
    flat = xp.empty(int(offsets[-1]), dtype)
    outs = []
    for i, n in enumerate(ns):
        m = flat[int(offsets[i]):int(offsets[i + 1])].reshape(n, n)
        outs.append(m if batch.transposed else m.T)
    return outs, MatrixBatch.from_list(outs, "c")


def _factor_list(A, lower, zero_other, setting, B=None):
    """Factor a list batch: (list of c, info).  The factor is always a new list."""
    batch = _square_batch(A)
    xp, count = batch.xp, batch.count
    dtype = batch.dtype
    if xp is np:
        results = [_factor_numpy(a, dtype, lower, False, zero_other) for a in batch.arrays_user]
        return [r[0] for r in results], np.array([r[1] for r in results], np.int32).reshape(count)
    batch = batch.astype(dtype)
    if count == 0:
        return [], xp.zeros(0, np.int32)
    outs, out_batch = _list_outputs(xp, batch, dtype)
    n_max = max(r for r, _ in batch.shapes)
    info = xp.zeros(count, np.int32)
    if n_max:
        setting = setting or choose_cholesky_setting(n_max, dtype.itemsize, sv.smem_limit())
        flags = _flags(lower != batch.transposed, False, zero_other)
        a, c = batch.struct(), out_batch.struct(batch.layout)
        if not setting.blocked:
            args = (a, c, *_dummy_vectors(batch.layout), info, flags, np.int64(count), np.int32(n_max))
        else:
            args = (a, c, info, flags, np.int64(count))
        _launch(batch.layout, dtype, setting, n_max, count, args)
    return outs, info


def _posv_list(A, B, lower, setting):
    batch = _square_batch(A)
    xp, count = batch.xp, batch.count
    rows = sv.rhs_rows(B, batch, "B")
    if rows is not None:
        whole, k, vectors = rows
        dtype = np.result_type(batch.dtype, whole.dtype)
    else:
        members, k, vectors, b_dtype = sv.rhs_list(B, batch, "B")
        dtype = np.result_type(batch.dtype, b_dtype)
    ns = [r for r, _ in batch.shapes]
    n_max = max(ns, default=0)
    if xp is not np and count and n_max and k and rows is not None:
        s = setting or choose_cholesky_setting(n_max, dtype.itemsize, sv.smem_limit())
        if s.can_solve(n_max):
            batch = batch.astype(dtype)
            outs, out_batch = _list_outputs(xp, batch, dtype)
            b_all = xp.ascontiguousarray(ar.astype_exact(whole, dtype, xp))
            X = xp.empty(b_all.shape, dtype)
            info = xp.empty(count, np.int32)
            args = (batch.struct(), out_batch.struct(batch.layout),
                    rows_vector(b_all, k), np.int64(1), rows_vector(X, k), np.int64(1), np.int32(k),
                    info, _flags(lower != batch.transposed, False, False,
                                 conj_solve=batch.transposed and dtype.kind == "c"),
                    np.int64(count), np.int32(n_max))
            _launch(batch.layout, dtype, s, n_max, count, args, nrhs=k)
            return outs, (X[..., 0] if vectors else X), info
    if dtype != batch.dtype:
        batch = MatrixBatch.from_list([ar.astype_exact(a, dtype, xp, copy=True) for a in batch.arrays_user], "A")
    cs, info = _factor_list(batch, lower, False, setting)
    X = _solve_with_factor(cs, B, lower)
    if isinstance(X, list):
        if xp is np:
            bad = info > 0
            for i in np.nonzero(bad)[0]:
                X[i] = np.array(members[i][:, 0] if vectors else members[i], dtype=dtype)
        else:
            X = [xp.where(info[i] > 0, ar.astype_exact(members[i][:, 0] if vectors else members[i], dtype, xp), x)
                 for i, x in enumerate(X)]
        return cs, X, info
    Bw = whole[..., 0] if vectors else whole
    bad = info.reshape((count,) + (1,) * (X.ndim - 1)) > 0
    return cs, xp.where(bad, ar.astype_exact(Bw, dtype, xp), X), info


__all__ = ["potrf", "potrs", "posv", "cholesky", "cho_factor", "cho_solve", "CholeskySetting",
           "CHOLESKY_SETTINGS", "FUSED_SETTINGS", "BLOCKED_SETTINGS", "choose_cholesky_setting",
           "plan_cholesky", "NOT_POSITIVE_DEFINITE"]
