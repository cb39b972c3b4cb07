"""Batched SVD: ``svdvals`` (SciPy's name, stacked) and ``svd`` (NumPy's conventions).

The pipeline is LAPACK xGESVD's: scale each matrix into the safe range (a power
of two, so exactly), reduce to bidiagonal form (:func:`gebrd`), generate Q and
P^H (:func:`orgbr`) when vectors are wanted, run the bidiagonal QR
(:func:`bdsqr`) applying its rotations to them, and scale the values back.
Each stage is one batched launch over every matrix on the GPU (no host round
trip unless ``check=True`` asks for the info), or vectorized NumPy on the CPU.
For small real matrices (up to 32 x 32; values, or values and vectors) the GPU
default is one launch of one-sided Jacobi instead (:mod:`.gesvj`: no bidiagonal
form, the matrix in registers, the scaling inside the kernel), or, for values
of the sizes where it measured faster, a bidiagonalization in registers and
dqds on the bidiagonal (:mod:`.svdvals_lanes`, two launches).
"""

from __future__ import annotations

import numpy as np

from .. import _arrays as ar
from .._batch import MatrixBatch
from . import _solvers as sv
from .svd_settings import (DqdsSetting, GesvjSetting, check_svd_setting, choose_dqds_setting,
                           choose_gesvj_setting)

NOT_CONVERGED = sv.Failure("SVD did not converge",
                           "an unconverged iteration (BDSQR's superdiagonals, or the one-sided Jacobi's last "
                           "sweep), or NaN/Inf entries",
                           "unconverged superdiagonals or last-sweep rotations")

_REAL = {np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64),
         np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def svdvals(A, *, check=True, setting=None, gebrd_setting=None):
    """Singular values of every matrix of a batch (``scipy.linalg.svdvals``, stacked).

    Parameters
    ----------
    A : array_like, shape (..., m, n), or a list of 2-D arrays (any shapes)
        float32, float64, complex64 or complex128; any strides.  Never modified.
    check : bool
        True (default): raise if a matrix's iteration did not converge or it
        holds NaN/Inf (this synchronizes with the GPU).  False: return
        ``(s, info)`` and never synchronize.
    setting : BdsqrSetting, GesvjSetting or DqdsSetting, optional
        A BdsqrSetting forces the GEBRD -> BDSQR pipeline and the bidiagonal
        QR's GPU setting (its ``maxitr`` caps the iteration on both backends).
        A GesvjSetting forces one-sided Jacobi (real matrices that fit it;
        its ``max_sweeps`` caps the sweeps on both backends).  A DqdsSetting
        forces the bidiagonalization in registers followed by dqds (real
        matrices that fit it; :mod:`.svdvals_lanes`).  None: on the GPU, for
        real matrices with max(m, n) <= 32, dqds where it measured faster
        (``choose_dqds_setting``: min(m, n) >= 10 in double, >= 17 in float,
        nearly square) and one-sided Jacobi otherwise
        (``choose_gesvj_setting``), else the pipeline; on the CPU, the
        pipeline.
    gebrd_setting : GebrdSetting, optional
        Force the bidiagonalization's GPU setting (and so the pipeline).

    Returns
    -------
    s : array (..., min(m, n)), the real dtype (float32 for float32/complex64)
        Descending, non-negative.  A list for list input.
    info : int32 array shaped like the batch ((count,) for lists), only with
        ``check=False``: 0; the number of unconverged superdiagonals
        (pipeline), the rotations of the last allowed sweep (Jacobi) or the
        values dqds did not reach; or min(m, n) for a matrix with NaN/Inf (its
        values are NaN).

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, "SVD did not converge", naming the batch indices.
    TypeError, ValueError
        Bad dtypes or shapes, before any work.

    See Also
    --------
    scipy.linalg.svdvals, numpy.linalg.svd (compute_uv=False), svd

    Notes
    -----
    Every path is backward stable: |s_i - s_ref_i| <= O(max(m, n) eps s_1)
    (Householder bidiagonalization then Demmel-Kahan's bidiagonal QR or dqds,
    or plane rotations of the columns until they are orthogonal to sqrt(max(m,
    n)) eps, as LAPACK's xGESVJ; see factorizations/gesvj.py).  Unlike SciPy there is no
    ``check_finite``: NaN/Inf give NaN values for that matrix only.
    """
    check = sv.check_bool(check, "check")
    check_svd_setting(setting)
    if isinstance(A, (list, tuple, MatrixBatch)):
        s, info = _list(A, False, False, setting, gebrd_setting)
    else:
        s, info = _array(A, False, False, setting, gebrd_setting)[1::2]
    if not check:
        return s, info
    sv.raise_if_failed(info, NOT_CONVERGED)
    return s


def svd(A, full_matrices=False, compute_uv=True, *, check=True, setting=None, gebrd_setting=None):
    """Batched singular value decomposition ``A = U @ diag(S) @ Vh`` (NumPy's conventions).

    Parameters
    ----------
    A : array_like, shape (..., m, n), or a list of 2-D arrays (any shapes)
        float32, float64, complex64 or complex128; any strides.  Never modified.
    full_matrices : bool
        False (default, as the issue asks; NumPy defaults to True): U is
        (..., m, k) and Vh (..., k, n), k = min(m, n).  True: (..., m, m) and
        (..., n, n).
    compute_uv : bool
        False: only S (as ``numpy.linalg.svd``).
    check : bool
        True (default): raise for non-convergence or NaN/Inf (synchronizes).
        False: append ``info`` to the result; never synchronizes.
    setting, gebrd_setting
        As for :func:`svdvals`.  One-sided Jacobi (the GPU default for real
        matrices up to 32 x 32) accumulates the right factor from its
        rotations and normalizes the orthogonalized columns into the left one
        (completing the basis where a column is zero); with
        ``full_matrices=True`` it serves square matrices only (a GesvjSetting
        on a non-square one is a ValueError).

    Returns
    -------
    U : array (..., m, k) or (..., m, m), A's dtype (a list for list input)
    S : array (..., k), the real dtype, descending, non-negative
    Vh : array (..., k, n) or (..., n, n), A's dtype
    info : int32 array shaped like the batch, only with ``check=False``
        As for :func:`svdvals`; a matrix with NaN/Inf gets NaN in U, S and Vh.

    With ``compute_uv=False`` only S (and info) is returned.

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, "SVD did not converge", naming the batch indices.
    TypeError, ValueError
        Bad dtypes, shapes or flags, before any work.

    See Also
    --------
    numpy.linalg.svd, scipy.linalg.svd, svdvals

    Notes
    -----
    The LAPACK xGESVD pipeline: GEBRD, ORGBR, BDSQR (implicit QR with the
    rotations applied to Q and P^H).  U and Vh come back in the memory
    orientation the kernels write (U column-major per matrix); their values
    follow NumPy's conventions.
    """
    full = sv.check_bool(full_matrices, "full_matrices")
    uv = sv.check_bool(compute_uv, "compute_uv")
    check = sv.check_bool(check, "check")
    check_svd_setting(setting)
    if isinstance(A, (list, tuple, MatrixBatch)):
        if uv:
            (U, S, Vh), info = _list(A, True, full, setting, gebrd_setting)
        else:
            S, info = _list(A, False, full, setting, gebrd_setting)
    else:
        U, S, Vh, info = _array(A, uv, full, setting, gebrd_setting)
    if check:
        sv.raise_if_failed(info, NOT_CONVERGED)
    out = (U, S, Vh) if uv else (S,)
    if not check:
        out = (*out, info)
    return out if len(out) > 1 else out[0]


# --- the pipeline --------------------------------------------------------------------------


def _scale_factors(xp, A, rdt):
    """Per-matrix powers of two f with max|f A| in [smlnum, bignum] (xGESVD's
    range: smlnum = sqrt(tiny) / eps, bignum = 1 / smlnum), 1 where already
    inside, zero or non-finite.  Multiplying by a power of two is exact."""
    fi = np.finfo(rdt)
    smlnum = float(np.sqrt(fi.tiny) / fi.eps)
    bignum = 1.0 / smlnum
    anrm = xp.abs(A).max(axis=(-2, -1)).astype(np.float64)
    if xp is not np and rdt == np.float32:
        # CuPy's float32 abs flushes subnormals: a matrix of nothing else reads as zero.
        # There its largest part's magnitude (max(|re|, |im|) for complex64, within
        # sqrt(2) of max |a|) from the sign-cleared bits, which order as the magnitudes
        # do; computed for every matrix and chosen by `where`, so no synchronization.
        parts = xp.ascontiguousarray(A).view(np.float32).reshape(*A.shape[:-2], -1)
        top = (parts.view(np.uint32) & np.uint32(0x7FFFFFFF)).max(axis=-1)
        anrm = xp.where(anrm > 0, anrm, ar.widen_single_parts(top.reshape(-1).view(np.float32), xp)
                        .reshape(anrm.shape))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe = xp.where((anrm > 0) & xp.isfinite(anrm), anrm, 1.0)
        down = xp.exp2(xp.floor(xp.log2(bignum / safe)))
        up = xp.exp2(xp.ceil(xp.log2(smlnum / safe)))
    f = xp.where(safe > bignum, down, xp.where(safe < smlnum, up, 1.0))
    return f


def _array(A, uv, full, setting, gebrd_setting):
    """(U, S, Vh, info) for a stacked array (U, Vh None without vectors)."""
    from .bdsqr import bdsqr
    from .gebrd import gebrd, orgbr

    A, xp = ar.as_array(A, "A")
    ar.check_dtype(A, "A")
    if A.ndim < 2:
        raise ValueError(f"A must have shape (..., m, n), got shape {A.shape}")
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    k = min(m, n)
    rdt = _REAL[A.dtype]
    count = int(np.prod(batch, dtype=np.int64))
    if count == 0 or k == 0:
        S = xp.zeros((*batch, k), rdt)
        info = xp.zeros(batch, np.int32)
        if not uv:
            return None, S, None, info
        eye = lambda r, c: xp.broadcast_to(xp.eye(r, c, dtype=A.dtype), (*batch, r, c)).copy()  # noqa: E731
        return eye(m, m if full else k), S, eye(n if full else k, n), info
    dqds = _dqds_setting(A, xp, m, n, uv, setting, gebrd_setting)
    if dqds is not None:
        from .svdvals_lanes import svdvals_lanes

        S, info = svdvals_lanes(A, dqds)
        return None, S, None, info
    jacobi = _jacobi_setting(A, xp, m, n, uv, full, setting, gebrd_setting)
    if jacobi is not None:
        from .gesvj import gesvj

        if uv:
            return gesvj(A, jacobi, vectors=True)
        S, info = gesvj(A, jacobi)
        return None, S, None, info
    f = _scale_factors(xp, A, rdt)
    As = _scaled(xp, A, f[..., None], rdt)
    a, d, e, tauq, taup, _ = gebrd(As, overwrite_a=True, setting=gebrd_setting)
    lower = m < n
    if uv:
        Q, _ = orgbr("Q", a, tauq, full_matrices=full)
        Ph, _ = orgbr("P", a, taup, full_matrices=full)
        S, U, Vh, info = bdsqr(d, e, lower=lower, u=Q[..., :k] if full else Q,
                               vt=Ph[..., :k, :] if full else Ph, setting=setting)
        if full and m > k:
            U = xp.concatenate([U, Q[..., k:]], axis=-1)
        if full and n > k:
            Vh = xp.concatenate([Vh, Ph[..., k:, :]], axis=-2)
    else:
        S, _, _, info = bdsqr(d, e, lower=lower, setting=setting)
        U = Vh = None
    S = _scaled(xp, S, 1 / f, rdt)
    return U, S, Vh, info


def _scaled(xp, X, f, rdt):
    """X * f in X's dtype, a new array: f holds float64 powers of two, one per vector
    of X's last axis (broadcasting against X.shape[:-1]).

    On the GPU through batched.scal, whose kernel (ours, compiled with -ftz=false)
    multiplies a float32 / complex64 operand as NumPy does, subnormal operands and
    results included: a power of two is exact but for the rounding into a subnormal.
    CuPy's float32 arithmetic flushes both (a matrix of subnormals scaled up, or
    singular values scaled back down to them, read as zeros).  One launch, no
    synchronization; a matrix whose rows are not contiguous but whose columns are is
    scaled by columns, so its layout is kept.
    """
    if xp is np:
        with np.errstate(invalid="ignore", over="ignore"):  # Inf * 1 in complex: NaN, as the result is anyway
            return (X * f.astype(rdt)[..., None]).astype(X.dtype, copy=False)
    from ..vector import scal

    by_columns = X.ndim >= 2 and not X.flags.c_contiguous and X.swapaxes(-1, -2).flags.c_contiguous
    if by_columns:   # f has a 1 for the rows' axis: it broadcasts over the columns alike
        return scal(f.astype(rdt), X.swapaxes(-1, -2)).swapaxes(-1, -2)
    return scal(f.astype(rdt), X)


def _dqds_setting(A, xp, m, n, uv, setting, gebrd_setting):
    """The bidiagonalization-in-registers + dqds setting for A (values only), or None.

    Forced by a DqdsSetting (real matrices that fit it, no vectors); chosen by
    default on the GPU for values of real matrices up to max(m, n) =
    DQDS_DEFAULT_MAX_LENGTH, unless another setting is given."""
    if isinstance(setting, DqdsSetting):
        if uv:
            raise ValueError("a DqdsSetting computes singular values only (compute_uv=False or svdvals)")
        if A.dtype.kind != "f":
            raise ValueError(f"a DqdsSetting takes float32 or float64 matrices, got {A.dtype}")
        if gebrd_setting is not None:
            raise ValueError("gebrd_setting does not apply to a DqdsSetting (its own bidiagonalization)")
        return setting
    if uv or setting is not None or gebrd_setting is not None or xp is np:
        return None
    return choose_dqds_setting(min(m, n), max(m, n), A.dtype)


def _jacobi_setting(A, xp, m, n, uv, full, setting, gebrd_setting):
    """The one-sided Jacobi setting for A, or None for the GEBRD pipeline.

    Forced by a GesvjSetting (real matrices that fit it; with vectors, not
    full_matrices=True of a non-square matrix, which needs a completed basis);
    chosen by default on the GPU for the same cases when a registered setting
    fits, up to min(m, n) = GESVJ_DEFAULT_MAX_K, unless a BDSQR or GEBRD
    setting asks for the pipeline."""
    square_or_reduced = not (uv and full and m != n)
    if isinstance(setting, GesvjSetting):
        if not square_or_reduced:
            raise ValueError("a GesvjSetting gives U (m, k) and Vh (k, n); full_matrices=True of a "
                             "non-square matrix needs the GEBRD pipeline")
        if A.dtype.kind != "f":
            raise ValueError(f"a GesvjSetting takes float32 or float64 matrices, got {A.dtype}")
        if gebrd_setting is not None:
            raise ValueError("gebrd_setting does not apply to a GesvjSetting (no bidiagonalization)")
        return setting
    if setting is not None or gebrd_setting is not None or not square_or_reduced or xp is np:
        return None
    return choose_gesvj_setting(min(m, n), max(m, n), A.dtype, vectors=uv)


def _list(A, uv, full, setting, gebrd_setting):
    """Lists: matrices of one shape are stacked and run as one batch (one launch
    per stage per distinct shape); results go back in the list's order."""
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    xp, count = batch.xp, batch.count
    arrays = [ar.astype_exact(a, batch.dtype, xp) for a in batch.arrays_user]
    groups: dict = {}
    for i, shape in enumerate(batch.shapes):
        groups.setdefault(shape, []).append(i)
    S, U, Vh = [None] * count, [None] * count, [None] * count
    info = xp.zeros(count, np.int32)
    for shape, idx in groups.items():
        u, s, vh, inf = _array(xp.stack([arrays[i] for i in idx]), uv, full, setting, gebrd_setting)
        info[xp.asarray(np.asarray(idx, dtype=np.int64))] = inf
        for j, i in enumerate(idx):
            S[i] = s[j]
            if uv:
                U[i], Vh[i] = u[j], vh[j]
    return ((U, S, Vh) if uv else S), info


# --- the demo workload ---------------------------------------------------------------------
