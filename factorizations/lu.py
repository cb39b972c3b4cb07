"""Batched LU with partial pivoting and its solvers.

LAPACK names: ``getrf``, ``getrs``, ``gesv`` (1-based pivots, ``info`` last, never
raise for numerical failure).  SciPy/NumPy names: ``lu_factor``, ``lu_solve``,
``solve``, ``inv``.

GPU (``lu.cu``): small matrices (max(m, n) <= 64) are factored whole in shared
memory by one thread group each (or, with a thread setting, max(m, n) <= 8, in the
registers of one thread each, or up to 32 of a group of lanes), and GESV solves in
the same launch; from 65 to 128 (elements of at most 8 bytes) a block per matrix
holds it in shared memory, factored in 4-column panels (the panels design), GESV
in the same launch too; larger ones
by the blocked design (panels in shared memory, GEMM-tile trailing updates), and
their solves go through the interchanges kernel plus the TRSV drivers of
``trsv.py``.  CPU: the same right-looking algorithm vectorized over the batch
with NumPy, and the TRSV column sweep of ``trsv.py`` for the solves.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from .._batch import MatrixBatch, members_vector, rows_vector
from .._operands import matrix_operand, vector_operand, writable_directly
from ..device_functions import build
from . import _solvers as sv
from . import trsv as trsv_module
from .lu_settings import LU_SETTINGS, LuSetting, check_lu_setting, choose_lu_setting, plan_lu

SOURCE = Path(__file__).with_name("lu.cu")

# Launch flags of getrf_fused_kernel and getrf_thread_kernel (lu.cu).
_A_TRANS, _WRITE_LU, _WRITE_PIV = 1, 2, 4
LASWP_THREADS = 256

LU_SINGULAR = sv.Failure("singular matrix", "an exactly zero pivot (diagonal entry of U)")

_IVEC = {"uniform": "bdf::UniformVector<int>", "pointer": "bdf::PointerVector<int>",
         "variable": "bdf::PointerVector<int>"}


def kernel_name(kind: str, layout: str, dtype, setting: LuSetting | None = None) -> str:
    """``kind``: a setting's design ('fused', 'blocked', 'thread', 'rows', 'cols', 'warps', 'panels'),
    'direct' (a thread, rows or cols setting's kernel for packed, aligned nb x nb matrices,
    a panels setting's for X alone: uniform layout only) or 'laswp' (no setting).  Every kernel but blocked and laswp
    takes the same arguments."""
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    M, V, I = ln.accessor_type(mat, dtype), ln.accessor_type(vec, dtype), _IVEC[layout]
    if kind == "laswp":
        return f"laswp_kernel<{M}, {V}, {I}>"
    if kind == "direct" and (setting.cols or setting.rows or setting.panels):
        return f"getrf_{setting.design}_direct_kernel<{M}, {V}, {I}, {setting.template_args()}>"
    if kind in ("fused", "thread", "direct", "rows", "cols", "warps", "panels"):
        return f"getrf_{kind}_kernel<{M}, {V}, {I}, {setting.template_args()}>"
    return f"getrf_blocked_kernel<{M}, {I}, {setting.template_args()}>"


def _has_direct(setting: LuSetting, dtype) -> bool:
    """Does the setting have a direct kernel for ``dtype`` (rows: real types only)?"""
    return setting.thread or setting.cols or setting.panels or (setting.rows and np.dtype(dtype).kind != "c")


def registered_names() -> list[str]:
    """Every instantiation of lu.cu: each setting for each layout and each dtype it is
    compiled for (a thread setting only where its matrix fits the register budget; the
    direct kernels of the thread, cols and panels settings, and of the rows settings for
    real types, for the uniform layout)."""
    return ([kernel_name(s.design, layout, dt, s) for layout in ln.LAYOUT_ACCESSORS for dt in ar.SUPPORTED_DTYPES
             for s in LU_SETTINGS if s.compiled_for(np.dtype(dt).itemsize)]
            + [kernel_name("direct", "uniform", dt, s) for dt in ar.SUPPORTED_DTYPES
               for s in LU_SETTINGS if _has_direct(s, np.dtype(dt)) and s.compiled_for(np.dtype(dt).itemsize)]
            + [kernel_name("laswp", layout, dt) for layout in ln.LAYOUT_ACCESSORS for dt in ar.SUPPORTED_DTYPES])


build.register(SOURCE, registered_names())


# --- public functions --------------------------------------------------------------------


def getrf(A, *, overwrite_a=False, setting=None):
    """Batched LU factorization with partial pivoting (LAPACK xGETRF): ``P A = L U``.

    Parameters
    ----------
    A : array_like, shape (..., m, n), or a list of 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Any strides; rectangular matrices allowed.
    overwrite_a : bool
        Allow the factors to be written into ``A`` (done when ``A`` has the
        result dtype and a layout the kernels write directly: per-matrix
        column-major on the GPU; any writable array on the CPU).
    setting : LuSetting, optional
        Force a kernel setting (GPU); default chosen by the size.

    Returns
    -------
    lu : array (..., m, n) (a list for list input)
        L below the diagonal (unit diagonal not stored) and U on and above it.
        On the GPU a new ``lu`` is per-matrix column-major (Fortran order).
    ipiv : int32 array (..., min(m, n)) (a list for list input)
        1-based: row i was interchanged with row ipiv[i].
    info : int32 array shaped like the batch
        0, or k > 0 when U[k-1, k-1] is exactly zero (the first such k); the
        factorization is completed anyway, as LAPACK does.

    Raises
    ------
    TypeError, ValueError
        Bad dtypes, shapes or arguments, before any work.  Never for a
        singular matrix.

    See Also
    --------
    scipy.linalg.lapack.dgetrf, lu_factor

    Notes
    -----
    The pivot is the first entry of largest |re| + |im| (BLAS's IxAMAX), so
    pivots equal LAPACK's on finite data; a NaN counts as the largest.  A zero
    pivot's column is neither scaled nor used for an update.  Never synchronizes.
    """
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    check_lu_setting(setting)
    if _is_list(A):
        lus, pivs, info = _getrf_list(A, setting)
        return lus, pivs, info
    A, xp = _matrix_arg(A, "A")
    if xp is np:
        lu, ipiv, info = _getrf_numpy_array(A, overwrite_a)
        return lu, ipiv, info
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    lu, ipiv, _, info = _factor_cupy(xp, A, batch, m, n, A.dtype, overwrite_a, setting)
    return lu, ipiv, info


def getrs(lu, ipiv, B, *, trans="N"):
    """Solve op(A) X = B with the factors of :func:`getrf` (LAPACK xGETRS).

    Parameters
    ----------
    lu : array_like (..., n, n), or a list of square 2-D arrays
        Factors from :func:`getrf`.
    ipiv : integer array (..., n) (1-based), or a list of them
    B : array_like
        Shape ``lu.shape[:-1]`` (a batch of vectors), (..., n, k) (batch
        dimensions broadcast like ``numpy.matmul``) or (n,).  With a list
        ``lu``: a list of (n_i,) or (n_i, k) arrays, an array (count, n) or
        (count, n, k), or one 1-D array for all.
    trans : {'N', 'T', 'C'} or {0, 1, 2}
        Solve A X = B, A^T X = B or A^H X = B (case-insensitive).

    Returns
    -------
    X : array of B's (broadcast) shape (a list for list input, or one array
        when B is one (count, n[, k]) array)
    info : int32 array shaped like the batch: always 0 (LAPACK's xGETRS reports
        only illegal arguments, raised here as exceptions)

    See Also
    --------
    scipy.linalg.lapack.dgetrs, lu_solve

    Notes
    -----
    No singularity check: an exactly zero diagonal entry of U gives Inf/NaN in
    that matrix's X only.  Pivots outside [1, n] are ignored.  Never synchronizes.
    """
    op = ar.parse_op(trans, "trans")
    return _getrs(lu, ipiv, B, op, 1, "B")


def gesv(A, B, *, overwrite_a=False, overwrite_b=False, setting=None):
    """Solve A X = B by LU with partial pivoting (LAPACK xGESV).

    Parameters
    ----------
    A : array_like (..., n, n), or a list of square 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
    B : array_like
        Shape ``A.shape[:-1]`` (a batch of vectors), (..., n, k) (batch
        dimensions broadcast like ``numpy.matmul``) or (n,); with a list ``A``,
        as for :func:`getrs`.
    overwrite_a, overwrite_b : bool
        Allow the factors to be written into ``A`` and X into ``B`` (done when
        the arrays have the result dtype, the full batch shape and a layout
        the kernels write directly).
    setting : LuSetting, optional
        Force a kernel setting (GPU).  Fused settings (max(m, n) <= 64) and
        thread settings (max(m, n) <= 8) factor and solve in one launch.

    Returns
    -------
    lu, ipiv : as :func:`getrf` (for the broadcast batch)
    X : array of B's (broadcast) shape (list input: as :func:`getrs`)
    info : int32 array shaped like the batch
        0, or k > 0 when U[k-1, k-1] is exactly zero; that matrix's X is then B
        unchanged (LAPACK's xGESV does not solve).

    See Also
    --------
    scipy.linalg.lapack.dgesv, solve

    Notes
    -----
    Never raises for a singular matrix and never synchronizes.
    """
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    overwrite_b = sv.check_bool(overwrite_b, "overwrite_b")
    check_lu_setting(setting)
    if _is_list(A):
        return _gesv_list(A, B, setting, want_factors=True)
    return _gesv_arrays(A, B, overwrite_a, overwrite_b, setting, want_factors=True)


def lu_factor(A, *, overwrite_a=False, check=True):
    """Batched ``scipy.linalg.lu_factor``: LU with partial pivoting, 0-based pivots.

    Parameters
    ----------
    A : array_like (..., m, n), or a list of 2-D arrays
    overwrite_a : bool
        As :func:`getrf`.
    check : bool
        True (default): warn with ``scipy.linalg.LinAlgWarning`` (as SciPy does)
        naming the batch indices with an exactly zero pivot; this synchronizes
        with the GPU.  False: return ``info`` as well, without synchronizing.

    Returns
    -------
    lu : array (..., m, n) (a list for list input)
    piv : int32 array (..., min(m, n)), 0-based (a list for list input)
    info : int32 array shaped like the batch (only with ``check=False``)

    See Also
    --------
    scipy.linalg.lu_factor, getrf

    Notes
    -----
    No ``check_finite``: NaN/Inf stay in their own matrix.
    """
    check = sv.check_bool(check, "check")
    lu, ipiv, info = getrf(A, overwrite_a=overwrite_a)
    piv = [p - 1 for p in ipiv] if isinstance(ipiv, list) else ipiv - 1
    if not check:
        return lu, piv, info
    _warn_if_singular(info)
    return lu, piv


def lu_solve(lu_and_piv, b, *, trans=0, overwrite_b=False, check=True):
    """Batched ``scipy.linalg.lu_solve``: solve op(A) x = b from :func:`lu_factor`.

    Parameters
    ----------
    lu_and_piv : (lu, piv)
        From :func:`lu_factor` (0-based pivots); arrays or lists.
    b : array_like
        As ``B`` of :func:`getrs` (the library's right-hand-side rule).
    trans : {0, 1, 2, 'N', 'T', 'C'}
    overwrite_b : bool
        Accepted for SciPy's signature; ``b`` is never written.
    check : bool
        False: return ``(x, info)`` (info always 0, never synchronizes), for
        the same calling pattern as the other solvers.

    Returns
    -------
    x : array of b's (broadcast) shape (list input: as :func:`getrs`)

    See Also
    --------
    scipy.linalg.lu_solve, getrs

    Notes
    -----
    As SciPy, no singularity check: a zero diagonal entry of U gives Inf/NaN.
    SciPy reads ``b`` of ndim >= 2 as (..., n, k); here ``b`` of shape
    ``lu.shape[:-1]`` is a batch of vectors.
    """
    sv.check_bool(overwrite_b, "overwrite_b")
    check = sv.check_bool(check, "check")
    try:
        lu, piv = lu_and_piv
    except (TypeError, ValueError):
        raise TypeError("lu_and_piv must be the pair (lu, piv) from lu_factor") from None
    op = ar.parse_op(trans, "trans")
    x, info = _getrs(lu, piv, b, op, 0, "b")
    return x if check else (x, info)


def solve(A, b, *, check=True):
    """Batched ``numpy.linalg.solve`` with several right-hand sides.

    Parameters
    ----------
    A : array_like (..., n, n), or a list of square 2-D arrays
    b : array_like
        Shape ``A.shape[:-1]`` (a batch of vectors, as ``torch.linalg.solve``),
        (..., n, k) (batch dimensions broadcast like ``numpy.matmul``) or (n,);
        with a list ``A``, as for :func:`getrs`.
    check : bool
        True (default): raise for a singular matrix, which synchronizes with
        the GPU.  False: return ``(x, info)`` without synchronizing.

    Returns
    -------
    x : array of b's (broadcast) shape (list input: as :func:`getrs`)
    info : int32 array shaped like the batch (only with ``check=False``);
        a matrix with info > 0 has x = b.

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, naming every batch index whose U has an exactly
        zero diagonal entry.
    TypeError, ValueError
        Bad dtypes or shapes (non-square A, mismatched b), before any work.

    See Also
    --------
    numpy.linalg.solve, gesv

    Notes
    -----
    NumPy >= 2 reads b of ndim >= 2 as (..., n, k) only; here b of shape
    ``A.shape[:-1]`` is a batch of vectors (the library's rule for every solver).
    """
    check = sv.check_bool(check, "check")
    if _is_list(A):
        _, _, x, info = _gesv_list(A, b, None, want_factors=False)
    else:
        _, _, x, info = _gesv_arrays(A, b, False, False, None, want_factors=False, b_name="b")
    if not check:
        return x, info
    sv.raise_if_failed(info, LU_SINGULAR)
    return x


def inv(A, *, check=True):
    """Batched ``numpy.linalg.inv``.

    Parameters
    ----------
    A : array_like (..., n, n), or a list of square 2-D arrays
    check : bool
        True (default): raise for a singular matrix (synchronizes).  False:
        return ``(Ainv, info)`` without synchronizing; a singular matrix's
        result is then the identity.

    Returns
    -------
    Ainv : array (..., n, n) (a list for list input)
    info : int32 array shaped like the batch (only with ``check=False``)

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, naming every singular matrix's batch index.

    See Also
    --------
    numpy.linalg.inv, gesv
    """
    check = sv.check_bool(check, "check")
    if _is_list(A):
        batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
        _check_square_list(batch)
        # one launch for every size: [I 0] with n_max columns, the first n_i of X kept
        n_max = max((r for r, _ in batch.shapes), default=0)
        eyes = [batch.xp.eye(r, n_max, dtype=batch.dtype) for r, _ in batch.shapes]
        _, _, x, info = _gesv_list(batch, eyes, None, want_factors=False)
        x = [xi[:, :r] for xi, (r, _) in zip(x, batch.shapes)]
    else:
        A, xp = _matrix_arg(A, "A")
        _check_square(A, "A")
        n = A.shape[-1]
        _, _, x, info = _gesv_core(xp, A, xp.eye(n, dtype=A.dtype), tuple(A.shape[:-2]), n, n, A.dtype,
                                   False, False, None, False)
    if not check:
        return x, info
    sv.raise_if_failed(info, LU_SINGULAR)
    return x


# --- validation ------------------------------------------------------------------------


def _is_list(A) -> bool:
    return isinstance(A, (list, tuple, MatrixBatch))


def _matrix_arg(A, name):
    A, xp = ar.as_array(A, name)
    ar.check_dtype(A, name)
    if A.ndim < 2:
        raise ValueError(f"{name} must have shape (..., m, n), got shape {A.shape}")
    return A, xp


def _check_square(A, name):
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"{name} must have shape (..., n, n) (square matrices), got shape {A.shape}")


def _check_square_list(batch: MatrixBatch):
    for i, (r, c) in enumerate(batch.shapes):
        if r != c:
            raise ValueError(f"{batch.name}[{i}] must be square, got shape {(r, c)}")


def _pivot_arg(ipiv, name, lu_shape, xp):
    ipiv, p_xp = ar.as_array(ipiv, name)
    if p_xp is not xp:
        raise ValueError(f"{name} must be on the same device as the factors")
    if ipiv.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {ipiv.dtype}")
    if tuple(ipiv.shape) != tuple(lu_shape[:-1]):
        raise ValueError(f"{name} has shape {tuple(ipiv.shape)}, expected {tuple(lu_shape[:-1])} for factors "
                         f"of shape {tuple(lu_shape)}")
    return ipiv.astype(np.int32, copy=False)


def _warn_if_singular(info):
    try:
        sv.raise_if_failed(info, LU_SINGULAR)
    except np.linalg.LinAlgError as exc:
        from scipy.linalg import LinAlgWarning

        warnings.warn(str(exc), LinAlgWarning, stacklevel=3)


# --- CPU backend -----------------------------------------------------------------------


def _abs1(x):
    """|re| + |im| (BLAS's IxAMAX measure)."""
    return np.abs(x.real) + np.abs(x.imag) if x.dtype.kind == "c" else np.abs(x)


def _getrf_numpy(a):
    """Right-looking LU with partial pivoting of every a[b] (count, m, n), in place.

    One column at a time over the whole batch: the pivot is the first largest
    |re| + |im| (numpy.argmax: a NaN counts as the largest, as bdf::iamax), rows
    j and p swap across the whole matrix, the column is scaled by the
    reciprocal pivot (by the pivot itself when |pivot| < sfmin, as LAPACK), and
    the trailing matrix gets the rank-1 update.  A zero pivot is recorded in
    info and its (zero) column neither scaled nor used.  Returns (ipiv 1-based, info).
    """
    count, m, n = a.shape
    kmin = min(m, n)
    ipiv = np.empty((count, kmin), np.int32)
    info = np.zeros(count, np.int32)
    rows = np.arange(count)
    sfmin = np.finfo(a.real.dtype).tiny
    with np.errstate(all="ignore"):
        for j in range(kmin):
            p = j + np.argmax(_abs1(a[:, j:, j]), axis=1)
            ipiv[:, j] = p + 1
            moved = p != j
            if moved.any():
                r, q = rows[moved], p[moved]
                row_j = a[r, j, :].copy()
                a[r, j, :] = a[r, q, :]
                a[r, q, :] = row_j
            piv = a[:, j, j].copy()
            ok = piv != 0
            info[(info == 0) & ~ok] = j + 1
            if j + 1 >= m:
                continue
            safe = np.where(ok, piv, 1)
            col = a[:, j + 1:, j]
            scaled = np.where((np.abs(piv) >= sfmin)[:, None], col * (1 / safe)[:, None], col / safe[:, None])
            col = np.where(ok[:, None], scaled, col)
            a[:, j + 1:, j] = col
            if j + 1 < n:
                update = col[:, :, None] * a[:, j, None, j + 1:]
                a[:, j + 1:, j + 1:] -= np.where(ok[:, None, None], update, 0)
    return ipiv, info


def _laswp_numpy(X, piv0, reverse):
    """X (count, n, k) in place: the interchanges i <-> piv0[:, i] in order (or reversed);
    pivots outside [0, n) are ignored, as on the GPU."""
    count, n = X.shape[:2]
    rows = np.arange(count)
    order = range(piv0.shape[1] - 1, -1, -1) if reverse else range(piv0.shape[1])
    for i in order:
        q = piv0[:, i]
        act = (q != i) & (q >= 0) & (q < n)
        if act.any():
            r, qa = rows[act], q[act]
            row_i = X[r, i, :].copy()
            X[r, i, :] = X[r, qa, :]
            X[r, qa, :] = row_i


def _getrs_numpy(lu, piv0, X, op):
    """X (count, n, k), a fresh array, becomes op(A)^{-1} X for A = P^T L U (lu (count, n, n))."""
    solve = trsv_module._solve_numpy
    if op == "N":
        _laswp_numpy(X, piv0, False)
        solve(lu, X, True, "N", True, False)
        solve(lu, X, False, "N", False, False)
    else:
        solve(lu, X, False, op, False, False)
        solve(lu, X, True, op, True, False)
        _laswp_numpy(X, piv0, True)
    return X


def _flat(arr, batch, core, dtype):
    """A fresh (count, *core) array of ``dtype`` holding ``arr`` broadcast to the batch."""
    count = int(np.prod(batch, dtype=np.int64))
    full = np.broadcast_to(arr, (*batch, *core))
    return np.array(full.reshape(count, *core), dtype=dtype, copy=True)


def _writable_np(arr, shape, dtype) -> bool:
    return (isinstance(arr, np.ndarray) and arr.flags.writeable and arr.dtype == dtype
            and tuple(arr.shape) == tuple(shape) and all(s != 0 for s, d in zip(arr.strides, arr.shape) if d > 1))


def _getrf_numpy_array(A, overwrite_a):
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    a = _flat(A, batch, (m, n), A.dtype)
    ipiv, info = _getrf_numpy(a)
    lu = a.reshape(*batch, m, n)
    if overwrite_a and _writable_np(A, lu.shape, lu.dtype):
        A[...] = lu
        lu = A
    return lu, ipiv.reshape(*batch, min(m, n)), info.reshape(batch)


def _gesv_numpy(A, Bm, batch, n, k, dtype, want_factors):
    lu = _flat(A, batch, (n, n), dtype)
    X = _flat(Bm, batch, (n, k), dtype)
    ipiv, info = _getrf_numpy(lu)
    bad = info > 0
    kept = X[bad].copy() if bad.any() else None
    _getrs_numpy(lu, ipiv - 1, X, "N")
    if kept is not None:
        X[bad] = kept
    shape = (*batch,)
    if not want_factors:
        return None, None, X.reshape(*shape, n, k), info.reshape(shape)
    return lu.reshape(*shape, n, n), ipiv.reshape(*shape, n), X.reshape(*shape, n, k), info.reshape(shape)


# --- uniform arrays: both backends -------------------------------------------------------


def _gesv_arrays(A, B, overwrite_a, overwrite_b, setting, want_factors, b_name="B"):
    A, _ = _matrix_arg(A, "A")
    B, _ = ar.as_array(B, b_name)
    xp = ar.common_backend({"A": A, b_name: B})
    dtype = ar.result_dtype({"A": A, b_name: B})
    _check_square(A, "A")
    batch, n, k, vectors = sv.rhs_shape(A.shape, B.shape, b_name)
    Bm = B[..., None] if vectors else B
    lu, ipiv, X, info = _gesv_core(xp, A, Bm, batch, n, k, dtype, overwrite_a, overwrite_b, setting, want_factors)
    if overwrite_b and X is not None and xp is np and _writable_np(Bm, X.shape, dtype):
        Bm[...] = X
        X = Bm
    if overwrite_a and want_factors and xp is np and _writable_np(A, lu.shape, dtype):
        A[...] = lu
        lu = A
    if vectors:
        X = X[..., 0]
    return lu, ipiv, X, info


def _gesv_core(xp, A, Bm, batch, n, k, dtype, overwrite_a, overwrite_b, setting, want_factors):
    """(lu, ipiv, X (..., n, k), info); lu and ipiv None unless ``want_factors``."""
    if xp is np:
        return _gesv_numpy(A, Bm, batch, n, k, dtype, want_factors)
    return _gesv_cupy(xp, A, Bm, batch, n, k, dtype, overwrite_a, overwrite_b, setting, want_factors)


def _getrs(lu, ipiv, B, op, base, b_name):
    if _is_list(lu):
        return _getrs_list(lu, ipiv, B, op, base, b_name)
    lu, _ = _matrix_arg(lu, "lu")
    B, _ = ar.as_array(B, b_name)
    xp = ar.common_backend({"lu": lu, b_name: B})
    dtype = ar.result_dtype({"lu": lu, b_name: B})
    _check_square(lu, "lu")
    piv = _pivot_arg(ipiv, "piv" if base == 0 else "ipiv", lu.shape, xp)
    batch, n, k, vectors = sv.rhs_shape(lu.shape, B.shape, b_name)
    Bm = B[..., None] if vectors else B
    if xp is np:
        lus = _flat(lu, batch, (n, n), dtype)
        pv = _flat(piv, batch, (n,), np.int32) - base
        X = _getrs_numpy(lus, pv, _flat(Bm, batch, (n, k), dtype), op).reshape(*batch, n, k)
    else:
        X = _getrs_cupy(xp, ar.astype_exact(lu, dtype, xp), piv, Bm, batch, n, k, op, base, dtype)
    info = xp.zeros(batch, np.int32)
    return (X[..., 0] if vectors else X), info


# --- GPU: uniform arrays -----------------------------------------------------------------


def _direct_f(arr, batch, dtype) -> bool:
    """Can the kernels write ``arr`` in place as per-matrix column-major matrices?"""
    if arr.dtype != dtype or tuple(arr.shape[:-2]) != tuple(batch) or not writable_directly(arr, batch, 2):
        return False
    strides = ar.elem_strides(arr)
    orient = ar.matrix_orientation(arr.shape[-2:], strides[-2:], "F")
    return orient is not None and orient[0] == "F"


def _new_f(xp, batch, m, n, dtype):
    """A new (..., m, n) array, each matrix column-major and packed (ld = m)."""
    return xp.swapaxes(xp.empty((*batch, n, m), dtype), -1, -2)


def _uniform_struct(arr, count, m, n):
    """UniformMatrix of a per-matrix column-major array (the batch collapses to one stride)."""
    strides = ar.elem_strides(arr)
    stride = ar.batch_stride(arr.shape[:-2], strides[:-2]) if count > 1 else 0
    ld = ar.matrix_orientation((m, n), strides[-2:], "F")[1]
    return ln.pack("UniformMatrix", arr.data.ptr, stride, ld, m, n)


def _packed_aligned(a, count: int) -> bool:
    """Is the uniform operand ``a`` one packed run of its matrices (either orientation)
    at a 16-byte aligned address?"""
    return a.ld == a.rows and (a.stride == a.rows * a.cols or count == 1) and a.base % 16 == 0


def _takes_direct(setting: LuSetting, a, count: int, dtype, write_lu: bool, write_piv: bool, nrhs: int) -> bool:
    """Does a thread, rows, cols or panels setting run its direct kernel on the uniform
    operand ``a``?  A panels setting for X alone (threshold pivots: solve() returns no
    pivots), any matrix and right-hand sides; the others on one packed run of nb x nb
    matrices at a 16-byte aligned address, and for a thread setting the factors not
    stored unless a matrix is at most 32 bytes, for a rows (real ``dtype``) or cols
    setting X alone with one right-hand side (all its direct kernel compiles).  A thread's
    16-byte stores of its factors reach memory half a sector each when its matrix is
    larger: measured on an H100
    (bench/solve.py's batches), GETRF 8 x 8 took 410-433 us that way against 271-282
    through the pipeline's coalesced runs, 4 x 4 float64 372 against 226; at 2 x 2
    the direct kernel was faster (float32 252 against 405 us, float64 218 against
    238)."""
    if setting.panels:
        return not write_lu and not write_piv and nrhs >= 1
    if not _has_direct(setting, dtype) or not (a.rows == a.cols == setting.nb and _packed_aligned(a, count)):
        return False
    if setting.cols or setting.rows:
        return not write_lu and not write_piv and nrhs == 1
    return not write_lu or setting.nb ** 2 * np.dtype(dtype).itemsize <= 32


def _launch_factor(layout, dtype, setting, plan, args, kind=None):
    name = kernel_name(kind or setting.design, layout, dtype, setting)
    kernel = build.get_kernel(SOURCE, name)
    # the thread design's pipeline runs within a warp's turns: every block resident
    ln.launch_planned(kernel, plan, args, resident=bool(setting.thread and plan.smem))


def _factor_cupy(xp, A, batch, m, n, dtype, overwrite_a, setting, Bm=None, k=0, overwrite_b=False,
                 want_lu=True, want_piv=True):
    """GETRF (and, with Bm (..., n, k), GESV) of a uniform batch on the GPU.

    Returns (lu, ipiv, X, info); lu/ipiv None when not wanted and not needed.
    The fused and thread designs read A in place (any strides, either
    orientation), write lu column-major and solve in the same launch; the
    blocked design factors a column-major copy in place, and its solve goes
    through :func:`_getrs_cupy`.  A and Bm are promoted to ``dtype`` first, exactly
    (ar.astype_exact: CuPy's casts flush single-precision subnormals).
    """
    A = ar.astype_exact(A, dtype, xp)
    Bm = None if Bm is None else ar.astype_exact(Bm, dtype, xp)
    count = int(np.prod(batch, dtype=np.int64))
    kmin = min(m, n)
    itemsize = np.dtype(dtype).itemsize
    if setting is None:  # a converted A is a new packed array; else A's own layout
        direct_solve = not want_lu and not want_piv and Bm is not None and k == 1 and \
            (A.dtype != dtype or (count > 0 and m > 0 and n > 0 and
                                  _packed_aligned(matrix_operand(A, batch, xp), count)))
        setting = choose_lu_setting(m, n, itemsize, _smem_limit(), direct_solve=direct_solve,
                                    is_complex=np.dtype(dtype).kind == "c")
    keep_lu = want_lu or setting.blocked
    plan = plan_lu(setting, m, n, itemsize, count, _smem_limit(),  # a setting that cannot run raises here
                   nrhs=k if Bm is not None else 0, write_lu=keep_lu)
    in_place = overwrite_a and _direct_f(A, batch, dtype)
    lu = (A if in_place else _new_f(xp, batch, m, n, dtype)) if keep_lu else None
    ipiv = xp.empty((*batch, kmin), np.int32) if (want_piv or setting.blocked) else None
    info = xp.empty(batch, np.int32)
    X = None
    solving = Bm is not None
    if solving:
        shape = (*batch, n, k)
        X = Bm if (overwrite_b and Bm.dtype == dtype and tuple(Bm.shape) == shape
                   and writable_directly(Bm, batch, 2)) else xp.empty(shape, dtype)
    if count == 0:
        return lu, ipiv, X, info
    if m == 0 or n == 0:
        info.fill(0)
        if solving and X is not Bm:
            X[...] = Bm
        return lu, ipiv, X, info
    info_arg = info
    if setting.solves_in_launch:
        a = matrix_operand(A.astype(dtype, copy=False), batch, xp)
        lu_struct = _uniform_struct(lu, count, m, n) if lu is not None else \
            ln.pack("UniformMatrix", a.base, a.stride, a.ld, a.rows, a.cols)
        piv_struct = ln.pack("UniformVector", ipiv.data.ptr if ipiv is not None else 0, kmin, 1)
        flags = (_A_TRANS if a.transposed else 0) | (_WRITE_LU if lu is not None else 0) | \
            (_WRITE_PIV if ipiv is not None else 0)
        b_args, nrhs, keep = _rhs_args(xp, Bm, X, batch, n, k) if solving and k else \
            ((ln.pack("UniformVector", 0, 0, 1), np.int64(0), ln.pack("UniformVector", 0, 0, 1), np.int64(0)), 0, ())
        kind = None
        if _takes_direct(setting, a, count, dtype, lu is not None, ipiv is not None, nrhs):
            kind = "direct"
            if setting.thread:
                plan = replace(plan, grid=ln.grid_for(count, setting.threads), smem=0)
        _launch_factor("uniform", dtype, setting, plan,
                       (ln.pack("UniformMatrix", a.base, a.stride, a.ld, a.rows, a.cols), lu_struct, piv_struct,
                        info_arg, *b_args, np.int32(nrhs), np.int32(flags), np.int64(count)), kind)
        del a, keep
        return lu, ipiv, X, info
    if not in_place:
        lu[...] = A
    _launch_factor("uniform", dtype, setting, plan,
                   (_uniform_struct(lu, count, m, n), ln.pack("UniformVector", ipiv.data.ptr, kmin, 1), info_arg,
                    np.int32(plan.lds), np.int64(count)))
    if solving and k:
        Xs = _getrs_cupy(xp, lu, ipiv, Bm, batch, n, k, "N", 1, dtype)
        X[...] = xp.where((info > 0)[..., None, None], Bm, Xs)  # LAPACK's xGESV leaves B for a singular A
    return lu, ipiv, X, info


def _rhs_args(xp, Bm, X, batch, n, k):
    """(B accessor, b_col, X accessor, x_col), nrhs, arrays to keep alive.  B is read as
    X's dtype (the kernel's T): a B of another dtype is converted first."""
    b_arr, b_base, b_stride, b_inc, b_col = trsv_module._rhs_operand(xp, ar.astype_exact(Bm, X.dtype, xp),
                                                                     (*batch, n, k))
    xs = ar.elem_strides(X)
    x_stride = ar.batch_stride(batch, xs[:-2]) if len(batch) else 0
    args = (ln.pack("UniformVector", b_base, b_stride, b_inc), np.int64(b_col),
            ln.pack("UniformVector", X.data.ptr, x_stride, xs[-2]), np.int64(xs[-1]))
    return args, k, (b_arr,)


def _gesv_cupy(xp, A, Bm, batch, n, k, dtype, overwrite_a, overwrite_b, setting, want_factors):
    lu, ipiv, X, info = _factor_cupy(xp, A, batch, n, n, dtype, overwrite_a, setting, Bm=Bm, k=k,
                                     overwrite_b=overwrite_b, want_lu=want_factors, want_piv=want_factors)
    if not want_factors:
        lu = ipiv = None
    return lu, ipiv, X, info


def _launch_laswp(layout, dtype, lu_struct, x_struct, x_col, piv_struct, base, reverse, count, nrhs):
    items = count * nrhs
    if not items:
        return
    kernel = build.get_kernel(SOURCE, kernel_name("laswp", layout, dtype))
    grid = ln.grid_for(items, LASWP_THREADS)
    kernel((grid,), (LASWP_THREADS,), (lu_struct, x_struct, np.int64(x_col), piv_struct, np.int32(base),
                                       np.int32(reverse), np.int64(count), np.int32(nrhs)))


def _getrs_cupy(xp, lu, ipiv, Bm, batch, n, k, op, base, dtype):
    """X (..., n, k) C-contiguous: interchanges (lu.cu's laswp_kernel) and two TRSV solves."""
    count = int(np.prod(batch, dtype=np.int64))
    X = xp.empty((*batch, n, k), dtype)
    X[...] = Bm
    if count == 0 or n == 0 or k == 0:
        return X
    a = matrix_operand(lu, batch, xp)
    lu_struct = ln.pack("UniformMatrix", a.base, a.stride, a.ld, a.rows, a.cols)
    pv = vector_operand(ipiv, batch, xp)
    piv_struct = ln.pack("UniformVector", pv.base, pv.stride, pv.inc)

    def swap(Y, reverse):
        _launch_laswp("uniform", dtype, lu_struct, ln.pack("UniformVector", Y.data.ptr, n * k, k), 1, piv_struct,
                      base, reverse, count, k)

    trsv = trsv_module.trsv
    if op == "N":
        swap(X, 0)
        X = trsv(lu, trsv(lu, X, lower=True, unit_diagonal=True), lower=False)
    else:
        X = trsv(lu, trsv(lu, X, lower=False, trans=op), lower=True, trans=op, unit_diagonal=True)
        swap(X, 1)
    del a, pv
    return X


def _smem_limit():
    return sv.smem_limit()


# --- lists -------------------------------------------------------------------------------


def _list_batch(A, name="A"):
    return A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, name)


def _getrf_list(A, setting):
    batch = _list_batch(A)
    xp, count = batch.xp, batch.count
    if xp is np:
        lus, pivs, infos = [], [], []
        for a in batch.arrays_user:
            lu, ipiv, info = _getrf_numpy_array(a.astype(batch.dtype, copy=False), False)
            lus.append(lu)
            pivs.append(ipiv)
            infos.append(int(info))
        return lus, pivs, np.array(infos, dtype=np.int32).reshape(count)
    dtype = batch.dtype
    batch = batch.astype(dtype)
    lus, pivs = _new_list_outputs(xp, batch.shapes, dtype)
    info = xp.zeros(count, np.int32)
    _factor_list_cupy(batch, lus, pivs, info, setting, dtype)
    return lus, pivs, info


def _new_list_outputs(xp, shapes, dtype):
    """Column-major lu members and int32 ipiv members, each from one buffer."""
    sizes = [m * n for m, n in shapes]
    kmins = [min(m, n) for m, n in shapes]
    off = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    poff = np.concatenate([[0], np.cumsum(kmins, dtype=np.int64)])
    flat = xp.empty(int(off[-1]), dtype)
    pflat = xp.empty(int(poff[-1]), np.int32)
    lus = [flat[int(off[i]):int(off[i + 1])].reshape(n, m).T for i, (m, n) in enumerate(shapes)]
    pivs = [pflat[int(poff[i]):int(poff[i + 1])] for i in range(len(shapes))]
    return lus, pivs


def _piv_pointers(xp, pivs):
    ptrs = xp.asarray(np.array([p.data.ptr for p in pivs], dtype=np.int64))
    return ptrs, ln.pack("PointerVector", ptrs.data.ptr, 0, 1)


def _factor_list_cupy(batch, lus, pivs, info, setting, dtype, rhs=None):
    """GETRF of a list batch into lus/pivs (and the fused or thread GESV with ``rhs`` =
    (B accessor, b_col, X accessor, x_col, nrhs)).  Returns True when the solve was done."""
    xp, count = batch.xp, batch.count
    m_max = max((m for m, _ in batch.shapes), default=0)
    n_max = max((n for _, n in batch.shapes), default=0)
    itemsize = np.dtype(dtype).itemsize
    setting = setting or choose_lu_setting(m_max, n_max, itemsize, _smem_limit(),
                                           is_complex=np.dtype(dtype).kind == "c")
    plan = plan_lu(setting, m_max, n_max, itemsize, count, _smem_limit())  # raises before any launch
    if not count:
        return True
    if m_max == 0 or n_max == 0:
        return False
    out = MatrixBatch.from_list(lus, "lu")  # column-major members: read as they are
    ptrs, piv_struct = _piv_pointers(xp, pivs)
    if setting.solves_in_launch:
        layout = batch.layout
        flags = (_A_TRANS if batch.transposed else 0) | _WRITE_LU | _WRITE_PIV
        if setting.thread:   # pointer accessors are never staged: no shared memory
            plan = replace(plan, smem=0)
        if rhs is None:
            rhs = (ln.pack("PointerVector", 0, 0, 1), np.int64(0), ln.pack("PointerVector", 0, 0, 1), np.int64(0), 0)
        _launch_factor(layout, dtype, setting, plan,
                       (batch.struct(layout), out.struct(layout), piv_struct, info, *rhs[:4], np.int32(rhs[4]),
                        np.int32(flags), np.int64(count)))
        del ptrs
        return rhs[4] > 0
    for lu, a in zip(lus, batch.arrays_user):
        lu[...] = a
    _launch_factor(out.layout, dtype, setting, plan,
                   (out.struct(), piv_struct, info, np.int32(plan.lds), np.int64(count)))
    del ptrs
    return False


def _rhs_members(B, batch, b_name):
    """Right-hand sides of a list call: (whole (count, n, k) array or None, members
    as (n_i, k) arrays or None, k, vectors, dtype)."""
    rows = sv.rhs_rows(B, batch, b_name)
    if rows is not None:
        whole, k, vectors = rows
        return whole, None, k, vectors, whole.dtype
    members, k, vectors, b_dtype = sv.rhs_list(B, batch, b_name)
    return None, members, k, vectors, b_dtype


def _gesv_list(A, B, setting, want_factors):
    batch = _list_batch(A)
    _check_square_list(batch)
    whole, members, k, vectors, b_dtype = _rhs_members(B, batch, "B" if want_factors else "b")
    dtype = np.result_type(batch.dtype, b_dtype)
    xp, count = batch.xp, batch.count
    if xp is np:
        lus, pivs, xs, infos = [], [], [], []
        bs = list(whole) if members is None else members
        for a, b in zip(batch.arrays_user, bs):
            n = a.shape[0]
            lu, ipiv, x, info = _gesv_numpy(a, b, (), n, k, dtype, True)
            lus.append(lu)
            pivs.append(ipiv)
            xs.append(x)
            infos.append(int(info))
        info = np.array(infos, dtype=np.int32).reshape(count)
        X = _list_result(xs, members is None, vectors, xp, k, dtype)
        return (lus if want_factors else None), (pivs if want_factors else None), X, info
    batch = batch.astype(dtype)
    lus, pivs = _new_list_outputs(xp, batch.shapes, dtype)
    info = xp.zeros(count, np.int32)
    X, b_keep, rhs = _list_rhs_cupy(xp, whole, members, batch, k, dtype)
    solved = _factor_list_cupy(batch, lus, pivs, info, setting, dtype, rhs=rhs if k else None)
    if not solved and count and k:
        Xs = _getrs_list_cupy(MatrixBatch.from_list(lus, "lu"), pivs,
                              whole, members, k, "N", 1, dtype)
        bad = info > 0
        if members is None:
            X[...] = xp.where(bad[:, None, None], ar.astype_exact(whole, dtype, xp), Xs)
        else:
            for i, (x, xs_i, b) in enumerate(zip(X, Xs, members)):
                x[...] = xp.where(bad[i], ar.astype_exact(b, dtype, xp), xs_i)
    del b_keep
    if members is None:
        X = X[..., 0] if vectors else X
    else:
        X = [x[:, 0] if vectors else x for x in X]
    return (lus if want_factors else None), (pivs if want_factors else None), X, info


def _list_result(xs, as_whole, vectors, xp, k, dtype):
    if as_whole:
        X = np.stack(xs) if xs else np.empty((0, 0, k), dtype)
        return X[..., 0] if vectors else X
    return [x[:, 0] if vectors else x for x in xs]


def _list_rhs_cupy(xp, whole, members, batch, k, dtype):
    """New C-contiguous X (array (count, n, k) or list of (n_i, k)), the B copies kept
    alive, and the fused kernel's (B, b_col, X, x_col, nrhs) pointer accessors."""
    if members is None:
        b_all = xp.ascontiguousarray(ar.astype_exact(whole, dtype, xp))
        X = xp.empty(b_all.shape, dtype)
        b_vec, x_vec = rows_vector(b_all, k), rows_vector(X, k)
        keep = (b_all,)
    else:
        bs = [xp.ascontiguousarray(ar.astype_exact(b, dtype, xp)) for b in members]
        ns = [r for r, _ in batch.shapes]
        off = np.concatenate([[0], np.cumsum([n * k for n in ns], dtype=np.int64)])
        flat = xp.empty(int(off[-1]), dtype)
        X = [flat[int(off[i]):int(off[i + 1])].reshape(ns[i], k) for i in range(len(ns))]
        (b_vec, b_ptrs), (x_vec, x_ptrs) = members_vector(bs, k, xp), members_vector(X, k, xp)
        keep = (bs, b_ptrs, x_ptrs)
    rhs = (b_vec, np.int64(1), x_vec, np.int64(1), k)
    return X, keep, rhs


def _getrs_list(lu, ipiv, B, op, base, b_name):
    batch = _list_batch(lu, "lu")
    _check_square_list(batch)
    name = "piv" if base == 0 else "ipiv"
    if not isinstance(ipiv, (list, tuple)) or len(ipiv) != batch.count:
        raise ValueError(f"{name} must be a list of {batch.count} integer arrays for a list of factors")
    pivs = [_pivot_arg(p, f"{name}[{i}]", shape, batch.xp) for i, (p, shape) in enumerate(zip(ipiv, batch.shapes))]
    whole, members, k, vectors, b_dtype = _rhs_members(B, batch, b_name)
    dtype = np.result_type(batch.dtype, b_dtype)
    xp, count = batch.xp, batch.count
    info = xp.zeros(count, np.int32)
    if xp is np:
        xs = []
        bs = list(whole) if members is None else members
        for a, p, b in zip(batch.arrays_user, pivs, bs):
            n = a.shape[0]
            xs.append(_getrs_numpy(_flat(a, (), (n, n), dtype), (p.astype(np.int32) - base)[None],
                                   _flat(b, (), (n, k), dtype), op)[0])
        return _list_result(xs, members is None, vectors, xp, k, dtype), info
    X = _getrs_list_cupy(batch.astype(dtype), pivs, whole, members, k, op, base, dtype)
    if members is None:
        return (X[..., 0] if vectors else X), info
    return [x[:, 0] if vectors else x for x in X], info


def _getrs_list_cupy(batch, pivs, whole, members, k, op, base, dtype):
    """X as a (count, n, k) array (whole) or a list of (n_i, k) arrays."""
    xp, count = batch.xp, batch.count
    if members is None:
        X = xp.ascontiguousarray(ar.astype_exact(whole, dtype, xp, copy=True))
    else:
        X = [xp.ascontiguousarray(ar.astype_exact(b, dtype, xp, copy=True)) for b in members]
    if not count or not k or max((r for r, _ in batch.shapes), default=0) == 0:
        return X
    ptrs, piv_struct = _piv_pointers(xp, pivs)
    layout = batch.layout

    def swap(Y, reverse):
        y_vec, y_ptrs = (rows_vector(Y, k), None) if members is None else members_vector(Y, k, xp)
        _launch_laswp(layout, dtype, batch.struct(layout), y_vec, 1, piv_struct, base, reverse, count, k)
        return y_ptrs

    trsv = trsv_module.trsv
    if op == "N":
        keep = swap(X, 0)
        X = trsv(batch, trsv(batch, X, lower=True, unit_diagonal=True), lower=False)
    else:
        X = trsv(batch, trsv(batch, X, lower=False, trans=op), lower=True, trans=op, unit_diagonal=True)
        keep = swap(X, 1)
    del ptrs, keep
    return X
