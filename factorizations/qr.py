"""Batched Householder QR: ``geqrf``, ``orgqr``, ``gels`` (LAPACK) and ``qr``, ``lstsq`` (NumPy).

``gels`` covers xGELS's four cases (least squares / minimum norm, trans 'N' /
'T' / 'C') with the QR of A or of A^H (= the LQ of A); ``lstsq`` is NumPy's
minimum-norm least squares for any shape and rank, built on the batched SVD
(``svd.py``) and GEMM.

Launchers and CPU backend.  The GPU kernels (``qr.cu``) follow MAGMA's batched
designs (``qr_settings.py``): a fused kernel that keeps the whole matrix in
shared memory and runs the unblocked GEQR2 sweep (``bdf::geqr2``, built on
``bdf::larfg``/``bdf::larf_left``), a blocked kernel (panel GEQR2 in shared
memory, block reflector T, trailing update through ``bdf::gemm_tile``) and an
unblocked global-memory fallback.  GELS runs in the same kernel: the
reflectors are applied to B alongside A, then R x = (Q^H b)[:n] is solved by
the TRSV design (``bdf::trsv_tile`` + ``bdf::gemv_n``).  The CPU backend runs
the same GEQR2 / ORG2R sweeps vectorized over the batch with
``_householder.py`` and solves R with ``trsv._solve_numpy``.
"""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from .._batch import MatrixBatch
from .._operands import matrix_operand, writable_directly
from ..device_functions import build
from . import _householder as hh
from . import _solvers as sv
from . import trsv as _trsv
from .qr_settings import (ORGQR_DIMS, QR_SETTINGS, QrSetting, check_qr_setting, choose_qr_setting, orgqr_dims,
                          orgqr_smem, plan_qr)

SOURCE = Path(__file__).with_name("qr.cu")

QRResult = namedtuple("QRResult", ["Q", "R"])
LSTSQ_NOT_CONVERGED = sv.Failure("SVD did not converge in Linear Least Squares",
                                 "superdiagonals of the bidiagonal form left unconverged, or NaN/Inf entries",
                                 "unconverged superdiagonals")
_MODES = ("reduced", "complete", "r", "raw")


def kernel_name(layout: str, dtype, setting: QrSetting) -> str:
    acc = ln.accessor_type(ln.LAYOUT_ACCESSORS[layout][0], dtype)
    kind = "qr_blocked_kernel" if setting.design == "blocked" else "qr_unblocked_kernel"
    return f"{kind}<{acc}, {setting.template_args()}>"


def orgqr_kernel_name(layout: str, dtype, dims) -> str:
    acc = ln.accessor_type(ln.LAYOUT_ACCESSORS[layout][0], dtype)
    return f"orgqr_kernel<{acc}, {dims[0]}, {dims[1]}>"


build.register(SOURCE, [kernel_name(layout, dt, s) for layout in ln.LAYOUT_ACCESSORS
                        for dt in ar.SUPPORTED_DTYPES for s in QR_SETTINGS]
               + [orgqr_kernel_name(layout, dt, d) for layout in ln.LAYOUT_ACCESSORS
                  for dt in ar.SUPPORTED_DTYPES for d in ORGQR_DIMS])


# --- public functions ----------------------------------------------------------------------


def geqrf(A, *, overwrite_a=False, setting=None):
    """Batched Householder QR in LAPACK's compact form (xGEQRF).

    Parameters
    ----------
    A : array_like, shape (..., m, n), or a list of 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Any strides; not modified unless ``overwrite_a``.
    overwrite_a : bool
        Factor in place when A already has the result's dtype and a layout the
        backend can write (NumPy: any writable array; CuPy: per-matrix
        column-major, distinct matrices); otherwise a copy is made silently.
    setting : QrSetting, optional
        Force a kernel setting (GPU); default chosen by shape.

    Returns
    -------
    qr : array (..., m, n) (list for list input)
        R on and above the diagonal, the reflectors' v(1:) below it
        (v(0) = 1 implicit), exactly as LAPACK.  On the GPU each matrix is
        column-major (``qr.swapaxes(-1, -2)`` is C-contiguous).
    tau : array (..., min(m, n)) of A's dtype (list for list input)
        Q = H(0) ... H(k-1), H(j) = I - tau[j] v_j v_j^H.
    info : int32 array shaped like the batch
        Always 0 (QR has no numerical failure; kept for LAPACK's signature).

    See Also
    --------
    scipy.linalg.lapack.dgeqrf, orgqr, qr

    Notes
    -----
    The same algorithm as LAPACK's unblocked xGEQR2 (the blocked GPU design
    applies the same reflectors through xLARFT's T), so results equal
    ``scipy.linalg.lapack.*geqrf`` to rounding.  Never synchronizes.
    """
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    check_qr_setting(setting)
    if isinstance(A, (list, tuple, MatrixBatch)):
        qrs, taus, _, info = _factor_list(A, None, overwrite_a, setting)
        return qrs, taus, info
    A, xp = ar.as_array(A, "A")
    ar.check_dtype(A, "A")
    _check_matrix(A, "A")
    batch = A.shape[:-2]
    if xp is np:
        W = _work_numpy(A, batch, A.dtype, overwrite_a)
        tau = _geqr2_numpy(W)
        return W, tau, np.zeros(batch, np.int32)
    QR, tau, _, _ = _factor_cupy(xp, A, None, batch, A.dtype, overwrite_a, False, setting)
    return QR, tau, xp.zeros(batch, np.int32)


def orgqr(qr, tau, *, n_columns=None):
    """The first columns of Q from GEQRF's output (LAPACK xORGQR / xUNGQR).

    Parameters
    ----------
    qr : array_like (..., m, n), or a list of 2-D arrays
        GEQRF's compact output; only the reflectors below the diagonal of its
        first K columns are read.
    tau : array_like (..., K), K <= min(m, n) (a list for list ``qr``)
        The reflectors' scalars.  Batch dimensions broadcast with qr's.
    n_columns : int, optional
        How many columns of Q = H(0) ... H(K-1) to form: K <= n_columns <= m;
        default min(m, n) (the reduced Q).  ``m`` gives the complete Q.

    Returns
    -------
    q : array (..., m, n_columns) (list for list input)
    info : int32 array shaped like the batch, always 0.

    See Also
    --------
    scipy.linalg.lapack.dorgqr, scipy.linalg.lapack.zungqr, geqrf

    Notes
    -----
    LAPACK's unblocked xORG2R (H(K-1) applied first, to the identity's
    columns), on the GPU in place in global memory, one block per matrix.
    Never synchronizes.
    """
    if isinstance(qr, (list, tuple, MatrixBatch)):
        return _orgqr_list(qr, tau, n_columns)
    qr, xp = ar.as_array(qr, "qr")
    tau, _ = ar.as_array(tau, "tau")
    ar.common_backend({"qr": qr, "tau": tau})
    dtype = ar.result_dtype({"qr": qr, "tau": tau})
    _check_matrix(qr, "qr")
    m, n = qr.shape[-2:]
    if tau.ndim < 1:
        raise ValueError(f"tau must have shape (..., K), got shape {tau.shape}")
    k = tau.shape[-1]
    ncol = _check_columns(n_columns, m, n, k, "")
    try:
        batch = np.broadcast_shapes(qr.shape[:-2], tau.shape[:-1])
    except ValueError:
        raise ValueError(f"batch dimensions of qr {qr.shape} and tau {tau.shape} do not broadcast") from None
    qr = xp.broadcast_to(ar.astype_exact(qr, dtype, xp), (*batch, m, n))
    tau = xp.broadcast_to(ar.astype_exact(tau, dtype, xp), (*batch, k))
    if xp is np:
        return _org2r_numpy(qr, tau, ncol), np.zeros(batch, np.int32)
    return _orgqr_cupy(xp, qr, tau, batch, ncol, dtype), xp.zeros(batch, np.int32)


def qr(A, mode="reduced"):
    """Batched ``numpy.linalg.qr``: stacked (..., m, n) matrices, or a list of matrices.

    Parameters
    ----------
    A : array_like (..., m, n), or a list of 2-D arrays (then lists come back)
    mode : {'reduced', 'complete', 'r', 'raw'}
        As NumPy, with K = min(m, n): 'reduced' -> (Q (..., m, K), R (..., K, n));
        'complete' -> (Q (..., m, m), R (..., m, n)); 'r' -> R (..., K, n);
        'raw' -> (h (..., n, m), tau (..., K)), h the transpose of GEQRF's
        compact output as NumPy returns it.

    Returns
    -------
    QRResult(Q, R) (a named tuple), R, or (h, tau), as NumPy.

    See Also
    --------
    numpy.linalg.qr, geqrf, orgqr

    Notes
    -----
    R's diagonal follows LAPACK's sign convention (NumPy's too: real, of the
    opposite sign of the original pivot's real part).  Never synchronizes.
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    if isinstance(A, (list, tuple, MatrixBatch)):
        qrs, taus, _ = geqrf(A)
        if mode == "raw":
            return [h.T for h in qrs], taus
        rs = [_r_factor(h, mode) for h in qrs]
        if mode == "r":
            return rs
        qs, _ = orgqr(qrs, taus, n_columns=None if mode == "reduced" else "m")
        return QRResult(qs, rs) if qrs else QRResult([], [])
    QRm, tau, _ = geqrf(A)
    if mode == "raw":
        return QRm.swapaxes(-1, -2), tau
    R = _r_factor(QRm, mode)
    if mode == "r":
        return R
    m, n = QRm.shape[-2:]
    Q, _ = orgqr(QRm, tau, n_columns=min(m, n) if mode == "reduced" else m)
    return QRResult(Q, R)


def gels(A, B, *, trans="N", overwrite_a=False, overwrite_b=False, setting=None):
    """Batched full-rank least squares / minimum-norm solutions by QR or LQ (LAPACK xGELS).

    Solves op(A) X = B for every matrix, op(A) = A, A^T or A^H, A of full rank:

    ======  ========  ===============================================  ==========
    trans   shape     problem                                          factor
    ======  ========  ===============================================  ==========
    'N'     m >= n    least squares  min ||B - A X||                   QR of A
    'N'     m < n     minimum norm   min ||X||  s.t.  A X = B          LQ of A
    'T'/'C' m >= n    minimum norm   min ||X||  s.t.  op(A) X = B      QR of A
    'T'/'C' m < n     least squares  min ||B - op(A) X||               LQ of A
    ======  ========  ===============================================  ==========

    Parameters
    ----------
    A : array_like (..., m, n), or a list of 2-D arrays (any shapes)
    B : array_like
        Right-hand sides with as many rows as op(A) (m for 'N', n for 'T'/'C'):
        shape ``(*A.shape[:-2], rows)`` (a batch of vectors), (..., rows, k)
        (batch dimensions broadcast like ``numpy.matmul``) or (rows,); with a
        list ``A``, a list of (rows_i,) / (rows_i, k) arrays or one
        (count, rows[, k]) array.
    trans : {'N', 'T', 'C'}
        Case-insensitive.  For real dtypes 'T' and 'C' are the same; for
        complex, 'T' solves A^T X = B (LAPACK's xGELS takes only 'C' there;
        here A^T X = B is solved as A^H conj(X) = conj(B)).
    overwrite_a, overwrite_b : bool
        Work in A (and B, given as (..., m, k) of the result dtype with one
        matrix per batch element) in place when the layout allows; else copy.
        Honoured for trans='N' with m >= n (the fused kernel's path); the other
        cases always work on copies.
    setting : QrSetting, optional
        Force the QR kernel's setting (GPU).

    Returns
    -------
    qr : array (..., m, n) (list for list input)
        A overwritten as LAPACK's xGELS leaves it: m >= n, GEQRF's compact QR
        of A; m < n, GELQF's compact LQ of A (L on and below the diagonal, the
        reflectors' conjugated v to the right of it, which is exactly the
        conjugate transpose of GEQRF's output for A^H).  Broadcast to the batch.
    X : array (..., q) or (..., q, k) (list for list input), q = n for 'N' and
        m for 'T'/'C': the solution part of LAPACK's B (max(m, n) rows there).
        Where info > 0 it is not a solution: in the least-squares cases it is
        (Q^H B)[:q] unsolved (LAPACK leaves B so), in the minimum-norm cases B
        itself padded with zeros to q rows (LAPACK returns before touching B).
    info : int32 array shaped like the batch
        0, or j > 0 when the j-th diagonal entry of the triangular factor (R
        or L) is exactly zero: A is rank deficient, as xGELS reports it;
        nothing is raised.  Full rank is required (use :func:`lstsq` for
        rank-deficient matrices).

    Raises
    ------
    TypeError, ValueError
        Bad dtypes, shapes or flags, before any work.

    See Also
    --------
    scipy.linalg.lapack.dgels, scipy.linalg.lapack.zgels, scipy.linalg.lstsq, lstsq

    Notes
    -----
    The LQ factorization of A is computed as the QR factorization of A^H
    (A = L Q_lq with L = R^H and Q_lq = Q^H, the same reflectors and taus as
    LAPACK's xGELQF): one GEQRF kernel serves all four cases.  With M = A
    (m >= n) or A^H (m < n) factored as M = Q R, the least-squares cases solve
    R X = (Q^H B)[:p] and the minimum-norm cases solve R^H Y = B, X = Q Y,
    p = min(m, n).  trans='N', m >= n runs factorization, Q^H B and the
    triangular solve in one kernel on the GPU; the other cases compose
    launches (GEQRF of M, the GELS kernel or ORGQR + TRSV + GEMM).  Never
    synchronizes.
    """
    op = ar.parse_op(trans, "trans")
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    overwrite_b = sv.check_bool(overwrite_b, "overwrite_b")
    check_qr_setting(setting)
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _gels_list(A, B, op, overwrite_a, setting)
    A, _ = ar.as_array(A, "A")
    m, n = (A.shape[-2:] if A.ndim >= 2 else (0, 0))
    if op == "N" and m >= n:
        QRm, Bw, info, vectors, n = _gels_array(A, B, overwrite_a, overwrite_b, setting)
        X = Bw[..., :n, :]
        return QRm, (X[..., 0] if vectors else X), info
    return _gels_general(A, B, op, setting)


def lstsq(a, b, rcond=None, *, check=True):
    """Batched ``numpy.linalg.lstsq``: minimum-norm least squares by the SVD, any shape and rank.

    For every matrix, x minimizes ||b - a x|| and, among the minimizers, ||x||
    (singular values at or below ``rcond * s_max`` treated as zero):
    x = V diag(1/s_i if s_i > rcond s_max else 0) U^H b.

    Parameters
    ----------
    a : array_like (..., m, n), any m and n (tall, square, wide, rank deficient)
    b : array_like: ``a.shape[:-1]`` (a batch of vectors), (..., m, k) or (m,)
        (the library's right-hand-side rule; NumPy's 2-D ``b`` (m, k) with a
        2-D ``a`` reads the same).  Batch dimensions broadcast with a's.
    rcond : float, optional
        Relative cut-off for small singular values: s_i <= rcond * s_max count
        as zero.  Default (None, as NumPy 2): eps * max(m, n), eps of the
        computation's precision.  As in NumPy, which passes it to LAPACK's
        xGELSD, rcond <= 0 or rcond >= 1 means machine precision (xLAMCH('E')
        = eps / 2), not "keep every value" or "drop every value".
    check : bool
        True (default): raise LinAlgError naming every batch index whose SVD
        did not converge (synchronizes).  False: append ``info``.

    Returns
    -------
    x : array (..., n) or (..., n, k), the result dtype
    residuals : real array
        Squared 2-norms of each column of b - a x, for problems with m > n and
        rank n.  Shape:

        * no batch dimensions (one matrix, b (m,) or (m, k)): exactly NumPy's:
          (k,) ((1,) for a vector b) when m > n and rank == n (and the SVD
          converged), else (0,);
        * with batch dimensions: (..., k) ((..., 1) for vectors) whenever
          m > n, NaN for each matrix of rank < n or whose SVD failed (NumPy
          would return no residuals for it; a stacked array cannot leave one
          matrix's row empty); (..., 0) when m <= n.  The shape thus depends on
          shapes only, so batches, chunks and ``check=False`` never need the
          ranks on the host.
    rank : int32 array shaped like the batch
        The number of singular values above ``rcond * s_max``.
    s : real array (..., min(m, n))
        The singular values of a, descending (broadcast to the batch).
    info : int32 array shaped like the batch (only with ``check=False``)
        0, or > 0 where the SVD did not converge or a holds NaN/Inf (as
        :func:`svd`'s info); x, residuals and s of that matrix are NaN, its
        rank meaningless.

    Raises
    ------
    numpy.linalg.LinAlgError
        With ``check=True``, "SVD did not converge in Linear Least Squares",
        naming the batch indices (NumPy's message).  Rank deficiency is not an
        error.
    TypeError, ValueError
        Bad dtypes, shapes or flags, before any work.

    See Also
    --------
    numpy.linalg.lstsq, scipy.linalg.lstsq, gels, svd

    Notes
    -----
    Cost: one SVD (:func:`svd`: GEBRD, ORGBR, BDSQR) plus two or three GEMMs, several
    times a QR.  :func:`gels` (QR/LQ, one fused kernel for m >= n) is the
    cheaper route for matrices known to have full rank.  The residuals are
    computed as ||b - U (U^H b)||^2, equal to ||b - a x||^2 when rank == n and
    free of a's conditioning.  NumPy always computes in double precision and
    its default cut-off uses float64's eps; here single-precision input is
    solved in single precision with float32's eps.  On the GPU, one matrix
    (no batch dimensions) with m > n synchronizes to decide the residuals'
    shape as NumPy does; batches synchronize only with ``check=True``.
    """
    from ..gemm import gemm
    from .svd import svd

    check = sv.check_bool(check, "check")
    if isinstance(a, (list, tuple, MatrixBatch)):
        raise TypeError("lstsq takes stacked arrays (..., m, n); use gels for lists of matrices")
    a, _ = ar.as_array(a, "a")
    b, _ = ar.as_array(b, "b")
    xp = ar.common_backend({"a": a, "b": b})
    dtype = ar.result_dtype({"a": a, "b": b})
    _check_matrix(a, "a")
    cut = _rcond(rcond)
    m, n = a.shape[-2:]
    p = min(m, n)
    batch, _, k, vectors = sv.rhs_shape(a.shape, b.shape, "b")
    real = hh.real_dtype(dtype)
    Bm = xp.broadcast_to(ar.astype_exact(b[..., None] if vectors else b, dtype, xp), (*batch, m, k))
    U, s, Vh, info = svd(ar.astype_exact(a, dtype, xp), full_matrices=False, check=False)
    eps = float(np.finfo(real).eps)
    # xGELSD's rule (xLALSD): a cut-off outside (0, 1) means machine precision, dlamch('E') = eps / 2
    cut = eps * max(m, n) if cut is None else (eps / 2 if not 0 < cut < 1 else cut)
    if p:
        keep = s > real.type(cut) * s[..., :1]
        rank = keep.sum(axis=-1).astype(np.int32)
        sinv = xp.where(keep, 1 / xp.where(keep, s, real.type(1)), real.type(0)).astype(real, copy=False)
    else:
        rank = xp.zeros(s.shape[:-1], np.int32)
        sinv = s
    c = gemm(U, Bm, transa="C")                                   # U^H b, (*batch, p, k)
    x = gemm(Vh, c * sinv[..., :, None], transa="C")              # V diag(1/s) U^H b
    if m > n:
        r = gemm(U, c, Bm, alpha=-1.0, beta=1.0)                  # b - U U^H b
        res = (r.real ** 2 + r.imag ** 2 if r.dtype.kind == "c" else r ** 2).sum(axis=-2).astype(real, copy=False)
        good = (rank == n) & (info == 0)
        res = xp.where(good[..., None], res, real.type(np.nan))
    else:
        res = xp.zeros((*batch, 0), real)
    s, rank, info = (_to_batch(xp, v, batch, t) for v, t in ((s, 1), (rank, 0), (info, 0)))
    if not batch and m > n and not bool(good):   # one matrix: NumPy's empty residuals
        res = xp.zeros((0,), real)
    x = x[..., 0] if vectors else x
    if not check:
        return x, res, rank, s, info
    sv.raise_if_failed(info, LSTSQ_NOT_CONVERGED)
    return x, res, rank, s


# --- validation --------------------------------------------------------------------------


def _check_matrix(A, name):
    if A.ndim < 2:
        raise ValueError(f"{name} must have shape (..., m, n), got shape {A.shape}")


def _check_columns(n_columns, m, n, k, where):
    if n_columns is None:
        ncol = min(m, n)
    elif n_columns == "m":  # internal: the complete Q of each member
        ncol = m
    else:
        if isinstance(n_columns, bool) or not isinstance(n_columns, (int, np.integer)):
            raise TypeError(f"n_columns must be an int or None, got {type(n_columns).__name__}")
        ncol = int(n_columns)
    if not k <= ncol <= m:
        raise ValueError(f"n_columns{where} must satisfy K <= n_columns <= m (K = {k} reflectors, m = {m}), "
                         f"got {ncol}")
    if k > min(m, n):
        raise ValueError(f"tau{where} has {k} entries but qr{where} of shape {(m, n)} holds at most "
                         f"{min(m, n)} reflectors")
    return ncol


def _r_factor(QRm, mode):
    xp = np if isinstance(QRm, np.ndarray) else ar.cupy_or_none()
    m, n = QRm.shape[-2:]
    rows = m if mode == "complete" else min(m, n)
    return xp.triu(QRm[..., :rows, :])


# --- lstsq and the other GELS cases ---------------------------------------------------------


def _rcond(rcond):
    """None, or rcond as a float (NumPy accepts any real number; non-finite is an error here)."""
    if rcond is None:
        return None
    if isinstance(rcond, (bool, np.bool_)) or not isinstance(rcond, (int, float, np.integer, np.floating)):
        raise TypeError(f"rcond must be a real number or None, got {type(rcond).__name__}")
    if not np.isfinite(rcond):
        raise ValueError(f"rcond must be finite, got {rcond}")
    return float(rcond)


def _to_batch(xp, v, batch, core):
    """v (..., core dims) broadcast to the full batch (a copy only when it grows)."""
    shape = (*batch, *v.shape[v.ndim - core:])
    return v if tuple(v.shape) == shape else xp.broadcast_to(v, shape).copy()


def _gels_general(A, B, op, setting):
    """xGELS for trans 'T'/'C', or m < n, on stacked arrays: (LAPACK's A, X, info).

    M = A (m >= n) or A^H (m < n), r x p with r >= p, is factored M = Q R by
    GEQRF.  ``(op == 'N') == (m >= n)`` is a least-squares problem in M
    (only op 'C', m < n, reaches here: min ||B - A^H X||), solved by the GELS
    path on M; otherwise a minimum-norm problem M^H X = B (op 'C', m >= n; or
    op 'N', m < n, since A = M^H), solved as R^H Y = B (TRSV), X = Q Y (ORGQR's
    explicit Q, then GEMM).  op 'T' on complex data is op 'C' on conj(B),
    conjugated back.  Every step is a batched call, so both backends run it.
    """
    from ..gemm import gemm

    B, _ = ar.as_array(B, "B")
    xp = ar.common_backend({"A": A, "B": B})
    dtype = ar.result_dtype({"A": A, "B": B})
    _check_matrix(A, "A")
    m, n = A.shape[-2:]
    rows, q = (m, n) if op == "N" else (n, m)
    batch, _, k, vectors = sv.rhs_shape((*A.shape[:-2], rows, q), B.shape, "B")
    # B as (*batch, rows, k): broadcasting first keeps (..., rows, k) from ever
    # reading as "a batch of vectors" in the calls below
    Bm = xp.broadcast_to(ar.astype_exact(B[..., None] if vectors else B, dtype, xp), (*batch, rows, k))
    A = ar.astype_exact(A, dtype, xp)
    conj = op == "T" and dtype.kind == "c"
    if conj:
        Bm = ar.conj_exact(Bm, xp)
    tall = m >= n
    M = A if tall else ar.conj_exact(xp.swapaxes(A, -1, -2), xp)
    r, p = max(m, n), min(m, n)
    if op == "N" and tall:
        raise AssertionError("trans='N', m >= n takes the GELS kernel path")
    if not tall and op != "N":    # least squares in M = A^H
        QRm, Bw, info, _, _ = _gels_array(M, Bm, False, False, setting)
        X = Bw[..., :p, :]
    else:                         # minimum norm: M^H X = B
        QRm, tau, _ = geqrf(M, setting=setting)
        Y, info = _trsv.solve_triangular(QRm[..., :p, :p], Bm, lower=False, trans="C", check=False)
        Q, _ = orgqr(QRm, tau)
        X = gemm(Q, Y)
        # info > 0: LAPACK's xTRTRS returns first, leaving B; here B padded with zeros
        kept = xp.zeros((*batch, r, k), dtype)
        kept[..., :p, :] = Y      # Y is B where info > 0 (solve_triangular's contract)
        X = xp.where(info[..., None, None] > 0, kept, X)
    if conj:
        X = ar.conj_exact(X, xp)
    lapack_a = QRm if tall else ar.conj_exact(xp.swapaxes(QRm, -1, -2), xp)   # GELQF's compact LQ of A
    lapack_a = _to_batch(xp, lapack_a, batch, 2)
    return lapack_a, (X[..., 0] if vectors else X), info


def _gels_list(A, B, op, overwrite_a, setting):
    """gels on a list batch.  trans 'N' with every member tall: the list kernels
    (pointer / variable layout).  Otherwise members of one shape are stacked and
    solved together by the array path, one group per distinct shape."""
    from types import SimpleNamespace

    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    if op == "N" and all(r >= c for r, c in batch.shapes):
        qrs, _, X, info = _factor_list(A, B, overwrite_a, setting)
        return qrs, X, info
    xp, count = batch.xp, batch.count
    op_shapes = [(r, c) if op == "N" else (c, r) for r, c in batch.shapes]
    proxy = SimpleNamespace(count=count, shapes=op_shapes, arrays_user=batch.arrays_user, xp=xp, dtype=batch.dtype)
    members, k, vectors, b_dtype = sv.rhs_list(B, proxy, "B")
    whole = not isinstance(B, (list, tuple)) and getattr(B, "ndim", 1) in (2, 3)
    dtype = np.result_type(batch.dtype, b_dtype)
    arrays = batch.arrays_user
    groups: dict = {}
    for i, shape in enumerate(batch.shapes):
        groups.setdefault(shape, []).append(i)
    qrs, X = [None] * count, [None] * count
    info = xp.zeros(count, np.int32)
    for shape, idx in groups.items():
        a = xp.stack([ar.astype_exact(arrays[i], dtype, xp) for i in idx])
        bm = xp.stack([ar.astype_exact(members[i], dtype, xp) for i in idx])
        h, x, inf = gels(a, bm, trans=op, setting=setting)
        info[xp.asarray(np.asarray(idx, dtype=np.int64))] = inf
        for j, i in enumerate(idx):
            qrs[i] = h[j]
            X[i] = x[j, :, 0] if vectors else x[j]
    if whole and count and len({x.shape for x in X}) == 1:
        X = xp.stack(X)
    return qrs, X, info


# --- CPU backend -------------------------------------------------------------------------


def _inplace_numpy(A, batch, dtype):
    return (isinstance(A, np.ndarray) and A.dtype == dtype and A.flags.writeable
            and tuple(A.shape[:-2]) == tuple(batch) and writable_directly(A, batch, 2))


def _work_numpy(A, batch, dtype, overwrite):
    """The array GEQR2 runs in: A itself when allowed, else a copy broadcast to the batch."""
    if overwrite and _inplace_numpy(A, batch, dtype):
        return A
    return np.array(np.broadcast_to(A, (*batch, *A.shape[-2:])), dtype=dtype, copy=True)


def _geqr2_numpy(W, B=None):
    """LAPACK's xGEQR2 in place on W (..., m, n), vectorized over the batch; the
    reflectors also applied to B (..., m, k) (B := Q^H B).  Returns tau (..., K)."""
    m, n = W.shape[-2:]
    k = min(m, n)
    tau = np.zeros((*W.shape[:-2], k), W.dtype)
    for j in range(k):
        beta, v, t = hh.larfg(W[..., j, j], W[..., j + 1:, j])
        W[..., j + 1:, j] = v
        tau[..., j] = t
        vfull = np.concatenate([np.ones((*v.shape[:-1], 1), W.dtype), v], axis=-1)
        ct = t.conj()
        if j + 1 < n:
            hh.larf_left(vfull, ct, W[..., j:, j + 1:])
        if B is not None:
            hh.larf_left(vfull, ct, B[..., j:, :])
        W[..., j, j] = beta
    return tau


def _org2r_numpy(QRm, tau, ncol):
    """LAPACK's xORG2R / xUNG2R vectorized over the batch: the first ncol columns of
    H(0) ... H(K-1), the last reflector applied first."""
    m = QRm.shape[-2]
    k = tau.shape[-1]
    Q = np.zeros((*QRm.shape[:-2], m, ncol), QRm.dtype)
    Q[..., :, :k] = QRm[..., :, :k]
    idx = np.arange(k, ncol)
    Q[..., idx, idx] = 1
    with np.errstate(all="ignore"):
        for i in range(k - 1, -1, -1):
            t = tau[..., i]
            if i < ncol - 1:
                Q[..., i, i] = 1
                hh.larf_left(Q[..., i:, i], t, Q[..., i:, i + 1:])
            Q[..., i + 1:, i] *= -t[..., None]
            Q[..., i, i] = 1 - t
            Q[..., :i, i] = 0
    return Q


def _gels_numpy(A, Bm, batch, dtype, overwrite_a, overwrite_b):
    m, n = A.shape[-2:]
    W = _work_numpy(A, batch, dtype, overwrite_a)
    shape = (*batch, m, Bm.shape[-1])
    if overwrite_b and _inplace_numpy(Bm, batch, dtype) and Bm.shape == shape:
        Bw = Bm
    else:
        Bw = np.array(np.broadcast_to(Bm, shape), dtype=dtype, copy=True)
    _geqr2_numpy(W, Bw)
    _, info = _trsv._solve_numpy(W[..., :n, :n], Bw[..., :n, :], False, "N", False, True)
    return W, Bw, info


# --- arrays: validation and dispatch ---------------------------------------------------------


def _gels_array(A, B, overwrite_a, overwrite_b, setting):
    """(qr, Bw (..., m, k) holding Q^H B with X in rows :n, info, vectors, n) for stacked arrays."""
    A, _ = ar.as_array(A, "A")
    B, _ = ar.as_array(B, "B")
    xp = ar.common_backend({"A": A, "B": B})
    dtype = ar.result_dtype({"A": A, "B": B})
    _check_matrix(A, "A")
    m, n = A.shape[-2:]
    batch, _, k, vectors = sv.rhs_shape(A.shape, B.shape, "B")
    if m < n:  # callers route wide matrices to _gels_general
        raise ValueError(f"the QR least-squares path needs m >= n, got A of shape {A.shape}")
    Bm = B[..., None] if vectors else B
    if xp is np:
        QRm, Bw, info = _gels_numpy(A, Bm, batch, dtype, overwrite_a, overwrite_b and not vectors)
        return QRm, Bw, info, vectors, n
    QRm, _, Bw, info = _factor_cupy(xp, A, Bm, batch, dtype, overwrite_a, overwrite_b and not vectors, setting)
    return QRm, Bw, info, vectors, n


# --- GPU ---------------------------------------------------------------------------------


def _fortran_empty(xp, shape, dtype):
    """A new stack whose matrices are column-major (the kernels' in-place operand)."""
    return xp.swapaxes(xp.empty((*shape[:-2], shape[-1], shape[-2]), dtype), -1, -2)


def _inplace_cupy(xp, arr, batch, dtype):
    if arr.dtype != dtype or tuple(arr.shape[:-2]) != tuple(batch):
        return False
    op = matrix_operand(arr, batch, xp)
    return op.arr is arr and not op.transposed and writable_directly(arr, batch, 2)


def _column_major(xp, arr, shape, dtype, overwrite):
    """arr itself (overwrite allowed and possible) or a column-major copy broadcast to shape."""
    batch = shape[:-2]
    if overwrite and tuple(arr.shape) == tuple(shape) and _inplace_cupy(xp, arr, batch, dtype):
        return arr
    out = _fortran_empty(xp, shape, dtype)
    out[...] = ar.astype_exact(arr, dtype, xp)
    return out


def _pack_matrix(op):
    return ln.pack("UniformMatrix", op.base, op.stride, op.ld, op.rows, op.cols)


def _launch_factor(layout, dtype, setting, m_max, n_max, nrhs, count, qr_struct, b_struct, tau_struct, info):
    plan = plan_qr(setting, m_max, n_max, nrhs, np.dtype(dtype).itemsize, count, sv.smem_limit())
    head = (qr_struct, b_struct, tau_struct, info if info is not None else np.uint64(0), np.int64(count),
            np.int32(nrhs))
    if setting.design == "blocked":
        args = (*head, np.int32(plan.ldp))
    else:
        args = (*head, np.int64(plan.s_a), np.int64(plan.s_b), np.int32(plan.wlen), np.int64(plan.group_bytes))
    ln.launch_planned(build.get_kernel(SOURCE, kernel_name(layout, dtype, setting)), plan, args)


def _factor_cupy(xp, A, Bm, batch, dtype, overwrite_a, overwrite_b, setting):
    """(QR, tau, Bw, info): GEQRF (Bm None) or GELS (Bm (..., m, k)) on stacked CuPy arrays."""
    m, n = A.shape[-2:]
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    QR = _column_major(xp, A, (*batch, m, n), dtype, overwrite_a)
    tau = xp.zeros((*batch, k), dtype)
    nrhs = 0 if Bm is None else Bm.shape[-1]
    Bw = None if Bm is None else _column_major(xp, Bm, (*batch, m, nrhs), dtype, overwrite_b)
    info = None if Bm is None else xp.zeros(batch, np.int32)
    if count == 0 or k == 0:
        return QR, tau, Bw, info
    q = matrix_operand(QR, batch, xp)
    qs = _pack_matrix(q)
    bs = _pack_matrix(matrix_operand(Bw, batch, xp)) if nrhs else qs
    ts = ln.pack("UniformVector", tau.data.ptr, k, 1)
    if Bm is not None and nrhs == 0:  # nothing to solve; LAPACK's info still names a zero diagonal
        _launch_factor("uniform", dtype, setting or choose_qr_setting(m, n, 0, dtype.itemsize, sv.smem_limit()),
                       m, n, 0, count, qs, qs, ts, None)
        zero = ar.exactly_zero(xp.diagonal(QR[..., :n, :n], axis1=-2, axis2=-1), xp)
        info[...] = xp.where(zero.any(axis=-1), zero.argmax(axis=-1) + 1, 0)
        return QR, tau, Bw, info
    setting = setting or choose_qr_setting(m, n, nrhs, dtype.itemsize, sv.smem_limit())
    _launch_factor("uniform", dtype, setting, m, n, nrhs, count, qs, bs, ts, info)
    return QR, tau, Bw, info


def _orgqr_cupy(xp, QRm, tau, batch, ncol, dtype):
    m = QRm.shape[-2]
    k = tau.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    Q = _fortran_empty(xp, (*batch, m, ncol), dtype)
    Q[..., :, :k] = QRm[..., :, :k]
    if count == 0 or m == 0 or ncol == 0:
        return Q
    tau_c = xp.ascontiguousarray(tau)
    q = matrix_operand(Q, batch, xp)
    _launch_orgqr("uniform", dtype, m, ncol, count, _pack_matrix(q),
                  ln.pack("UniformVector", tau_c.data.ptr, k, 1), np.uint64(0), k)
    return Q


def _launch_orgqr(layout, dtype, m_max, ncol_max, count, q_struct, tau_struct, ks_ptr, k_uniform):
    dims = orgqr_dims(m_max)
    smem = orgqr_smem(dims, ncol_max, np.dtype(dtype).itemsize)
    kernel = build.get_kernel(SOURCE, orgqr_kernel_name(layout, dtype, dims))
    if smem > 48 * 1024:  # only for Q wider than 3072 (float64) columns
        kernel.max_dynamic_shared_size_bytes = smem
    kernel((ln.grid_for(count, 1),), (dims[0] * dims[1],),
           (q_struct, tau_struct, ks_ptr, np.int64(k_uniform), np.int64(count), np.int32(max(ncol_max, 1))),
           shared_mem=smem)


# --- lists -------------------------------------------------------------------------------


def _same_shape(arrays):
    return len({a.shape for a in arrays}) <= 1


def _factor_list(A, B, overwrite_a, setting):
    """GEQRF (B None) or GELS on a list batch: (qrs, taus, X, info).  X: a list of
    (n_i[, k]) arrays, or one (count, n[, k]) array when B was one array."""
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    xp, count = batch.xp, batch.count
    members = whole = None
    k, vectors, dtype = 0, False, batch.dtype
    if B is not None:
        rows = sv.rhs_rows(B, batch, "B")
        if rows is not None:
            whole, k, vectors = rows
            dtype = np.result_type(batch.dtype, whole.dtype)
            members = [whole[i] for i in range(count)]
        else:
            members, k, vectors, b_dtype = sv.rhs_list(B, batch, "B")
            dtype = np.result_type(batch.dtype, b_dtype)
    arrays = batch.arrays_user
    if xp is np:
        qrs, taus, bws, infos = _factor_list_numpy(arrays, members, dtype, overwrite_a)
    else:
        qrs, taus, bws, infos = _factor_list_cupy(xp, batch, members, dtype, overwrite_a, setting)
    if B is None:
        return qrs, taus, None, infos
    X = [bw[:a.shape[1], 0] if vectors else bw[:a.shape[1]] for bw, a in zip(bws, arrays)]
    if whole is not None:
        X = xp.stack(X) if X else xp.empty((0, *whole.shape[1:]), dtype)
    return qrs, taus, X, infos


def _factor_list_numpy(arrays, members, dtype, overwrite_a):
    count = len(arrays)
    if count and _same_shape(arrays) and (members is None or _same_shape(members)):
        A = np.stack(arrays).astype(dtype, copy=False)
        if members is None:
            W = np.array(A, dtype=dtype, copy=True)
            tau = _geqr2_numpy(W)
            return list(W), list(tau), None, np.zeros(count, np.int32)
        W, Bw, info = _gels_numpy(A, np.stack(members), (count,), dtype, False, False)
        return list(W), [None] * count, list(Bw), info
    qrs, taus, bws, infos = [], [], [], []
    for i, a in enumerate(arrays):
        if members is None:
            W = _work_numpy(a, (), dtype, overwrite_a)
            taus.append(_geqr2_numpy(W))
            qrs.append(W)
            continue
        W, Bw, info = _gels_numpy(a, members[i], (), dtype, overwrite_a, False)
        qrs.append(W)
        bws.append(Bw)
        infos.append(int(info))
    return qrs, taus, bws, np.array(infos if members is not None else [0] * count, np.int32).reshape(count)


def _list_struct(xp, arrays, layout):
    """The accessor struct of our own column-major arrays, in the accessor type ``layout``."""
    mb = MatrixBatch.from_list(arrays, "qr")
    assert not mb.transposed
    return mb, mb.struct(layout if mb.layout == "pointer" else "variable")


def _factor_list_cupy(xp, batch, members, dtype, overwrite_a, setting):
    count = batch.count
    info = xp.zeros(count, np.int32)
    if count == 0:
        return [], [], [], info
    qrs = [_column_major(xp, a, a.shape, dtype, overwrite_a) for a in batch.arrays_user]
    ks = [min(a.shape) for a in qrs]
    k_max = max(ks)
    tau_all = xp.zeros((count, max(k_max, 1)), dtype)
    taus = [tau_all[i, :ks[i]] for i in range(count)]
    nrhs = 0
    bws = None
    if members is not None:
        nrhs = members[0].shape[1] if members else 0
        bws = [_column_major(xp, b, b.shape, dtype, False) for b in members]
    m_max = max(a.shape[0] for a in qrs)
    n_max = max(a.shape[1] for a in qrs)
    if k_max == 0 or (members is not None and nrhs == 0):
        if members is not None and k_max:
            qrs2, taus2, _, _ = _factor_list_cupy(xp, batch, None, dtype, overwrite_a, setting)
            for i, (h, t) in enumerate(zip(qrs2, taus2)):
                qrs[i], taus[i] = h, t
                d = xp.diagonal(h)[:h.shape[1]] == 0
                info[i] = xp.where(d.any(), d.argmax() + 1, 0) if d.size else 0
        return qrs, taus, bws, info
    mb, qs = _list_struct(xp, qrs, "pointer")
    layout = "pointer" if mb.layout == "pointer" else "variable"
    bs = _list_struct(xp, bws, layout)[1] if nrhs else qs
    setting = setting or choose_qr_setting(m_max, n_max, nrhs, dtype.itemsize, sv.smem_limit())
    _launch_factor(layout, dtype, setting, m_max, n_max, nrhs, count, qs,
                   bs, ln.pack("UniformVector", tau_all.data.ptr, tau_all.shape[1], 1),
                   info if members is not None else None)
    return qrs, taus, bws, info


def _orgqr_list(qrs, taus, n_columns):
    batch = qrs if isinstance(qrs, MatrixBatch) else MatrixBatch.from_list(qrs, "qr")
    xp, count = batch.xp, batch.count
    if not isinstance(taus, (list, tuple)) or len(taus) != count:
        raise ValueError(f"tau must be a list of {count} arrays for a list qr")
    tl = [ar.as_array(t, f"tau[{i}]")[0] for i, t in enumerate(taus)]
    dtype = batch.dtype
    if tl:
        ar.common_backend({"qr[0]": batch.arrays_user[0], **{f"tau[{i}]": t for i, t in enumerate(tl)}})
        dtype = np.result_type(dtype, ar.result_dtype({f"tau[{i}]": t for i, t in enumerate(tl)}))
    ncols = []
    for i, ((m, n), t) in enumerate(zip(batch.shapes, tl)):
        if t.ndim != 1:
            raise ValueError(f"tau[{i}] must be 1-D, got shape {t.shape}")
        ncols.append(_check_columns(n_columns, m, n, t.shape[0], f"[{i}]"))
    arrays = [ar.astype_exact(a, dtype, xp) for a in batch.arrays_user]
    tl = [ar.astype_exact(t, dtype, xp) for t in tl]
    info = xp.zeros(count, np.int32)
    if xp is np:
        return [_org2r_numpy(a, t, c) for a, t, c in zip(arrays, tl, ncols)], info
    if count == 0:
        return [], info
    qs = []
    for a, t, c in zip(arrays, tl, ncols):
        q = _fortran_empty(xp, (a.shape[0], c), dtype)
        q[:, :t.shape[0]] = a[:, :t.shape[0]]
        qs.append(q)
    ks = [t.shape[0] for t in tl]
    k_max = max(max(ks), 1)
    tau_all = xp.zeros((count, k_max), dtype)
    for i, t in enumerate(tl):
        tau_all[i, :ks[i]] = t
    m_max = max(q.shape[0] for q in qs)
    c_max = max(q.shape[1] for q in qs)
    if m_max and c_max:
        mb, qstruct = _list_struct(xp, qs, "pointer")
        layout = "pointer" if mb.layout == "pointer" else "variable"
        ks_dev = xp.asarray(np.array(ks, np.int64))
        _launch_orgqr(layout, dtype, m_max, c_max, count, qstruct,
                      ln.pack("UniformVector", tau_all.data.ptr, k_max, 1), ks_dev, 0)
    return qs, info
