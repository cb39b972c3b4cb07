"""Batched bidiagonal reduction (LAPACK xGEBRD) and generation of Q / P^H (xORGBR/xUNGBR).

``gebrd`` reduces every matrix A (m x n) to a bidiagonal B = Q^H A P (upper when
m >= n, lower when m < n; real also for complex A, as LAPACK) and returns
LAPACK's compact output; ``orgbr`` builds Q or P^H from it, so that
A = Q B P^H.  The GPU kernels (``gebrd.cu``) run one thread block per matrix
(see ``gebrd_settings.py`` for the designs: the unblocked sweep big-tile or in
device memory, and LAPACK's blocked algorithm with LABRD panels); the CPU
backend runs the same algorithms (the unblocked xGEBD2 sweep, or the blocked
one for a blocked setting) vectorized over the batch with NumPy, on the
reflector functions shared with QR (``_householder.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from .. import settings as bs
from .._batch import MatrixBatch
from .._operands import matrix_operand
from ..device_functions import build
from . import _solvers as sv
from ._householder import larf_left, larf_right, larfg, real_dtype
from . import gebrd_settings
from .gebrd_settings import (GEBRD_SETTINGS, LANES_THREADS, ORGBR_SETTINGS, GebrdSetting, check_gebrd_fits,
                             check_gebrd_setting, choose_gebrd_setting, choose_orgbr_setting, plan_gebrd, plan_orgbr)

SOURCE = Path(__file__).with_name("gebrd.cu")
LANES_SOURCE = Path(__file__).with_name("gebrd_lanes.cu")  # the lanes design (real types)
# ORGBR's list path always uses the variable accessors (the output shapes differ from
# the input's), so it is registered for the uniform and variable layouts only.


def gebrd_kernel_name(layout: str, dtype, setting: GebrdSetting) -> str:
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    accessors = (f"{ln.accessor_type(mat, dtype)}, {ln.accessor_type(vec, real_dtype(dtype))}, "
                 f"{ln.accessor_type(vec, dtype)}, {setting.template_args()}")
    if setting.lanes:
        return f"gebrd_lanes_kernel<{accessors}>"
    if setting.blocked and setting.cluster > 1:
        return f"gebrd_cluster_kernel<{accessors}, {setting.nb}, {setting.cluster}>"
    if setting.blocked:
        return f"gebrd_blocked_kernel<{accessors}, {setting.nb}>"
    return f"gebrd_kernel<{accessors}, {'true' if setting.stage else 'false'}>"


def orgbr_kernel_name(layout: str, dtype, setting: GebrdSetting, want_p: bool) -> str:
    mat, vec = ln.LAYOUT_ACCESSORS[layout]
    return (f"orgbr_kernel<{ln.accessor_type(mat, dtype)}, {ln.accessor_type(mat, dtype)}, "
            f"{ln.accessor_type(vec, dtype)}, {setting.template_args()}, {'true' if want_p else 'false'}>")


build.register(LANES_SOURCE, [gebrd_kernel_name(layout, dt, s) for layout in ln.LAYOUT_ACCESSORS
                              for dt in ar.SUPPORTED_DTYPES for s in GEBRD_SETTINGS
                              if s.lanes and np.dtype(dt).kind == "f"])
build.register(SOURCE, [gebrd_kernel_name(layout, dt, s) for layout in ln.LAYOUT_ACCESSORS
                        for dt in ar.SUPPORTED_DTYPES for s in GEBRD_SETTINGS if not s.lanes]
               + [orgbr_kernel_name(layout, dt, s, p) for layout in ("uniform", "variable")
                  for dt in ar.SUPPORTED_DTYPES for s in ORGBR_SETTINGS for p in (False, True)])


# --- public API --------------------------------------------------------------------------


def gebrd(A, *, overwrite_a=False, setting=None):
    """Batched reduction to bidiagonal form (LAPACK xGEBRD): Q^H A P = B.

    Parameters
    ----------
    A : array_like, shape (..., m, n), or a list of 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
        Any strides; float32, float64, complex64 or complex128.
    overwrite_a : bool
        Allow the result ``a`` to reuse A's memory (when its dtype and memory
        layout allow; check ``a is A``).  Default False: A is never modified.
    setting : GebrdSetting, optional
        Force a kernel setting; default chosen by shape and dtype.  On the CPU
        backend a blocked setting (``nb > 0``) runs the blocked algorithm with
        the same panel width; the others run the unblocked sweep.  A lanes
        setting takes real matrices of at most its group's rows and columns.

    Returns
    -------
    a : array of A's shape and dtype (a list for list input)
        LAPACK's compact output: B's diagonal and off-diagonal on and next to
        the diagonal, the vectors of the reflectors H(i) below (m >= n: column
        i from row i+1; m < n: from row i+2) and those of G(i) to the right of
        the bidiagonal (conjugated, as LAPACK stores them).
    d : (..., k) real, k = min(m, n)
        Diagonal of B (float32 for float32/complex64, float64 otherwise).
    e : (..., max(k - 1, 0)) real
        Off-diagonal of B: super-diagonal when m >= n, sub-diagonal when m < n.
    tauq, taup : (..., k), A's dtype
        Scalars of H(i) = I - tauq v v^H and G(i) = I - taup u u^H;
        taup[k-1] = 0 when m >= n, tauq[k-1] = 0 when m < n (LAPACK).
    info : int32 array shaped like the batch ((count,) for lists)
        Always 0: the reduction has no numerical failure (LAPACK's convention).

    Raises
    ------
    TypeError, ValueError
        Bad dtype, shape or setting, before any work.

    See Also
    --------
    orgbr : Q and P^H from the reflectors.
    scipy.linalg.svd (driver 'gesvd' runs GEBRD first)

    Notes
    -----
    Q = H(0) H(1) ... and P = G(0) G(1) ..., so A = Q B P^H.  NaN/Inf stay in
    their own matrix.  Never synchronizes.
    """
    check_gebrd_setting(setting)
    overwrite_a = sv.check_bool(overwrite_a, "overwrite_a")
    if isinstance(A, (list, tuple, MatrixBatch)):
        return _gebrd_list(A, setting)
    A, xp = ar.as_array(A, "A")
    ar.check_dtype(A, "A")
    if A.ndim < 2:
        raise ValueError(f"A must have shape (..., m, n), got shape {A.shape}")
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    check_gebrd_fits(setting, m, n, A.dtype)
    if xp is np:
        a = A if overwrite_a and A.flags.writeable and A.flags.c_contiguous else np.array(A, copy=True)
        count = int(np.prod(batch, dtype=np.int64))
        d, e, tauq, taup = _gebrd_numpy(a.reshape(count, m, n), setting)
        k = min(m, n)
        return (a, d.reshape(*batch, k), e.reshape(*batch, max(k - 1, 0)), tauq.reshape(*batch, k),
                taup.reshape(*batch, k), np.zeros(batch, np.int32))
    return _gebrd_cupy(xp, A, batch, m, n, overwrite_a, setting)


def orgbr(vect, a, tau, *, full_matrices=False):
    """Batched generation of Q or P^H from :func:`gebrd` (LAPACK xORGBR / xUNGBR).

    Parameters
    ----------
    vect : {'Q', 'P'}
        'Q': Q from ``tauq``; 'P': P^H from ``taup`` (case-insensitive).
    a : array, shape (..., m, n), or a list of 2-D arrays
        The ``a`` that gebrd returned for an m x n input.
    tau : array (..., min(m, n)) (or a list, or an array (count, k) for a list ``a``)
        ``tauq`` for 'Q', ``taup`` for 'P'.
    full_matrices : bool
        False (default): Q is (..., m, min(m, n)) and P^H (..., min(m, n), n),
        so that A = Q B P^H with the min(m, n) square bidiagonal B.  True: Q is
        (..., m, m) and P^H (..., n, n).

    Returns
    -------
    q : array (a list for list input)
        Q or P^H, with orthonormal columns (Q) or rows (P^H).
    info : int32 array shaped like the batch ((count,) for lists), zeros.

    Raises
    ------
    TypeError, ValueError
        Bad ``vect``, dtypes or shapes, before any work.

    See Also
    --------
    gebrd, scipy.linalg.lapack.dorgbr (not wrapped by SciPy)

    Notes
    -----
    The reflectors are applied to the identity in reverse order (ORG2R's
    backward accumulation).  Never synchronizes.
    """
    want_p = _parse_vect(vect)
    full = sv.check_bool(full_matrices, "full_matrices")
    if isinstance(a, (list, tuple, MatrixBatch)):
        return _orgbr_list(want_p, a, tau, full)
    a, xp = ar.as_array(a, "a")
    tau, _ = ar.as_array(tau, "tau")
    xp = ar.common_backend({"a": a, "tau": tau})
    ar.check_dtype(a, "a")
    ar.check_dtype(tau, "tau")
    if a.ndim < 2:
        raise ValueError(f"a must have shape (..., m, n), got shape {a.shape}")
    batch, (m, n) = tuple(a.shape[:-2]), a.shape[-2:]
    k = min(m, n)
    if tuple(tau.shape) != (*batch, k):
        raise ValueError(f"tau must have shape {(*batch, k)} for a of shape {tuple(a.shape)}, "
                         f"got {tuple(tau.shape)}")
    dtype = ar.result_dtype({"a": a, "tau": tau})
    rows, cols = _orgbr_shape(want_p, m, n, full)
    if xp is np:
        count = int(np.prod(batch, dtype=np.int64))
        q = _orgbr_numpy(want_p, a.reshape(count, m, n).astype(dtype, copy=False),
                         tau.reshape(count, k).astype(dtype, copy=False), full)
        return q.reshape(*batch, rows, cols), np.zeros(batch, np.int32)
    return _orgbr_cupy(xp, want_p, ar.astype_exact(a, dtype, xp), ar.astype_exact(tau, dtype, xp), batch, m, n,
                       full)


# --- validation helpers ------------------------------------------------------------------


def _parse_vect(vect) -> bool:
    if not isinstance(vect, str) or vect.upper() not in ("Q", "P"):
        raise ValueError(f"vect must be 'Q' or 'P', got {vect!r}")
    return vect.upper() == "P"


def _orgbr_shape(want_p: bool, m: int, n: int, full: bool):
    k = min(m, n)
    if want_p:
        return (n if full else k), n
    return m, (m if full else k)


# --- CPU backend -------------------------------------------------------------------------


def _with_one(v):
    """[1; v] for a batch of vectors (..., len)."""
    return np.concatenate([np.ones((*v.shape[:-1], 1), dtype=v.dtype), v], axis=-1)


def _gebrd_numpy(a, setting):
    """The CPU algorithm for ``setting``: blocked for a blocked setting (forced, or
    chosen by shape as on the GPU), the unblocked sweep otherwise."""
    count, m, n = a.shape
    if min(m, n) == 0 or count == 0:
        return _gebd2_numpy(a)
    setting = setting or choose_gebrd_setting(m, n, a.dtype)
    if setting.blocked:
        return _gebrd_blocked_numpy(a, setting.nb)
    return _gebd2_numpy(a)


def _bidiagonal_outputs(a):
    """Zeroed d, e (real), tauq, taup for GEBRD of a (count, m, n) stack."""
    count, m, n = a.shape
    k = min(m, n)
    R = real_dtype(a.dtype)
    return (np.zeros((count, k), R), np.zeros((count, max(k - 1, 0)), R), np.zeros((count, k), a.dtype),
            np.zeros((count, k), a.dtype))


def _gebd2_numpy(a):
    """LAPACK's xGEBD2 on a writable (count, m, n) array, in place; returns d, e, tauq, taup.

    The same sequence as gebrd.cu's gebd2: column reflector (larfg on A(i:, i),
    H^H applied from the left), row reflector (larfg on the conjugated row,
    applied from the right), vectorized over the batch.
    """
    _, m, n = a.shape
    d, e, tauq, taup = _bidiagonal_outputs(a)
    if m >= n:
        for i in range(n):
            beta, v, tau = larfg(a[:, i, i], a[:, i + 1:, i])
            d[:, i], tauq[:, i] = beta, tau
            a[:, i + 1:, i] = v
            larf_left(_with_one(v), tau.conj(), a[:, i:, i + 1:])
            a[:, i, i] = beta
            if i + 1 < n:
                row = a[:, i, i + 1:].conj()
                beta, v, tau = larfg(row[:, 0], row[:, 1:])
                e[:, i], taup[:, i] = beta, tau
                larf_right(_with_one(v), tau, a[:, i + 1:, i + 1:])
                a[:, i, i + 2:] = v.conj()
                a[:, i, i + 1] = beta
    else:
        for i in range(m):
            row = a[:, i, i:].conj()
            beta, v, tau = larfg(row[:, 0], row[:, 1:])
            d[:, i], taup[:, i] = beta, tau
            larf_right(_with_one(v), tau, a[:, i + 1:, i:])
            a[:, i, i + 1:] = v.conj()
            a[:, i, i] = beta
            if i + 1 < m:
                beta, v, tau = larfg(a[:, i + 1, i], a[:, i + 2:, i])
                e[:, i], tauq[:, i] = beta, tau
                a[:, i + 2:, i] = v
                larf_left(_with_one(v), tau.conj(), a[:, i + 1:, i + 1:])
                a[:, i + 1, i] = beta
    return d, e, tauq, taup


def _labrd_numpy(a, p, nb, d, e, tauq, taup):
    """LAPACK's xLABRD on the batch ``a`` (count, m, n), in place: reduces rows
    and columns p .. p+nb-1 and returns X (count, m-p, nb) and Y (count, n-p, nb)
    (row r of X / Y is matrix row / column p + r) such that the unreduced part
    equals A0 - V Y^H - X U^H.  The reduced part holds the reflectors with ones
    on the diagonal and off-diagonal (the trailing update reads them); d, e,
    tauq, taup receive the panel's entries.  The same steps as gebrd.cu's
    labrd_upper / labrd_lower (see there for the algebra).
    """
    count, m, n = a.shape
    X = np.zeros((count, m - p, nb), a.dtype)
    Y = np.zeros((count, n - p, nb), a.dtype)
    one = a.dtype.type(1)
    mv = lambda M, x: (M @ x[..., None])[..., 0]  # noqa: E731  batched GEMV-N
    mh = lambda M, x: (M.conj().swapaxes(-1, -2) @ x[..., None])[..., 0]  # noqa: E731  GEMV-C
    with np.errstate(all="ignore"):
        if m >= n:
            for j in range(nb):
                i = p + j
                # column i: A(i:, i) -= V(i:, p:i) conj(Y(i, :j)) + X(i:, :j) A(p:i, i)
                col = a[:, i:, i] - mv(a[:, i:, p:i], Y[:, i - p, :j].conj()) - mv(X[:, i - p:, :j], a[:, p:i, i])
                beta, v, tq = larfg(col[:, 0], col[:, 1:])
                d[:, i], tauq[:, i] = beta, tq
                sv = _with_one(v)
                a[:, i, i], a[:, i + 1:, i] = one, v
                # Y(i+1:, j) = tauq (A0^H v - Y V^H v - U X^H v), U^H = A(p:i, i+1:)
                t1 = mh(a[:, i:, p:i], sv)
                t2 = mh(X[:, i - p:, :j], sv)
                y = mh(a[:, i:, i + 1:], sv) - mv(Y[:, i + 1 - p:, :j], t1) - mh(a[:, p:i, i + 1:], t2)
                Y[:, i + 1 - p:, j] = tq[:, None] * y
                # conj(row i): conj(A0(i, i+1:)) - Y conj(V(i, p:i+1)) - U conj(X(i, :j))
                vrow = np.concatenate([a[:, i, p:i], np.ones((count, 1), a.dtype)], axis=-1)
                row = (a[:, i, i + 1:].conj() - mv(Y[:, i + 1 - p:, :j + 1], vrow.conj())
                       - mh(a[:, p:i, i + 1:], X[:, i - p, :j].conj()))
                beta, u, tp = larfg(row[:, 0], row[:, 1:])
                e[:, i], taup[:, i] = beta, tp
                su = _with_one(u)
                a[:, i, i + 1], a[:, i, i + 2:] = one, u.conj()
                # X(i+1:, j) = taup (A0 u - V Y^H u - X U^H u)
                t1 = mh(Y[:, i + 1 - p:, :j + 1], su)
                t2 = mv(a[:, p:i, i + 1:], su)
                x = mv(a[:, i + 1:, i + 1:], su) - mv(a[:, i + 1:, p:i + 1], t1) - mv(X[:, i + 1 - p:, :j], t2)
                X[:, i + 1 - p:, j] = tp[:, None] * x
        else:
            for j in range(nb):
                i = p + j
                # conj(row i): conj(A0(i, i:)) - Y conj(V(i, p:i)) - U conj(X(i, :j))
                row = (a[:, i, i:].conj() - mv(Y[:, i - p:, :j], a[:, i, p:i].conj())
                       - mh(a[:, p:i, i:], X[:, i - p, :j].conj()))
                beta, u, tp = larfg(row[:, 0], row[:, 1:])
                d[:, i], taup[:, i] = beta, tp
                su = _with_one(u)
                a[:, i, i], a[:, i, i + 1:] = one, u.conj()
                # X(i+1:, j) = taup (A0 u - V Y^H u - X U^H u)
                t1 = mh(Y[:, i - p:, :j], su)
                t2 = mv(a[:, p:i, i:], su)
                x = mv(a[:, i + 1:, i:], su) - mv(a[:, i + 1:, p:i], t1) - mv(X[:, i + 1 - p:, :j], t2)
                X[:, i + 1 - p:, j] = tp[:, None] * x
                # column i: A(i+1:, i) -= V(i+1:, p:i) conj(Y(i, :j)) + X(i+1:, :j+1) A(p:i+1, i)
                col = (a[:, i + 1:, i] - mv(a[:, i + 1:, p:i], Y[:, i - p, :j].conj())
                       - mv(X[:, i + 1 - p:, :j + 1], a[:, p:i + 1, i]))
                beta, v, tq = larfg(col[:, 0], col[:, 1:])
                e[:, i], tauq[:, i] = beta, tq
                sv = _with_one(v)
                a[:, i + 1, i], a[:, i + 2:, i] = one, v
                # Y(i+1:, j) = tauq (A0^H v - Y V^H v - U X^H v), U^H = A(p:i+1, i+1:)
                t1 = mh(a[:, i + 1:, p:i], sv)
                t2 = mh(X[:, i + 1 - p:, :j + 1], sv)
                y = mh(a[:, i + 1:, i + 1:], sv) - mv(Y[:, i + 1 - p:, :j], t1) - mh(a[:, p:i + 1, i + 1:], t2)
                Y[:, i + 1 - p:, j] = tq[:, None] * y
    return X, Y


def _gebrd_blocked_numpy(a, nb):
    """LAPACK's blocked xGEBRD on a writable (count, m, n) array, in place:
    LABRD panels of nb rows and columns while more than nb remain, each followed
    by the trailing update A22 -= V Y^H + X U^H (two matrix products), then the
    unblocked sweep on the rest.  Returns d, e, tauq, taup."""
    _, m, n = a.shape
    k = min(m, n)
    d, e, tauq, taup = _bidiagonal_outputs(a)
    p = 0
    while k - p > nb:
        X, Y = _labrd_numpy(a, p, nb, d, e, tauq, taup)
        q = p + nb
        with np.errstate(all="ignore"):
            a[:, q:, q:] -= a[:, q:, p:q] @ Y[:, nb:].conj().swapaxes(-1, -2) + X[:, nb:] @ a[:, p:q, q:]
        j = np.arange(p, q)
        a[:, j, j] = d[:, j]
        if m >= n:
            a[:, j, j + 1] = e[:, j]
        else:
            a[:, j + 1, j] = e[:, j]
        p = q
    if p < k:
        dt, et, qt, pt = _gebd2_numpy(a[:, p:, p:])
        d[:, p:], tauq[:, p:], taup[:, p:] = dt, qt, pt
        e[:, p:] = et
    return d, e, tauq, taup


def _orgbr_numpy(want_p, a, tau, full):
    """Q (count, m, cols) or P^H (count, rows, n) by backward accumulation (as orgbr_kernel)."""
    count, m, n = a.shape
    rows, cols = _orgbr_shape(want_p, m, n, full)
    out = np.zeros((count, rows, cols), a.dtype)
    out[:, np.arange(min(rows, cols)), np.arange(min(rows, cols))] = 1
    tall = m >= n
    if want_p:
        k, s = (n - 1, 1) if tall else (m, 0)
        for i in reversed(range(k)):
            r0 = i + s
            if r0 < rows:
                larf_right(_with_one(a[:, i, r0 + 1:].conj()), tau[:, i].conj(), out[:, r0:, r0:])
    else:
        k, s = (n, 0) if tall else (m - 1, 1)
        for i in reversed(range(k)):
            r0 = i + s
            if r0 < cols:
                larf_left(_with_one(a[:, r0 + 1:, i]), tau[:, i], out[:, r0:, r0:])
    return out


# --- GPU ---------------------------------------------------------------------------------


def _sm_count() -> int:
    # cached per device (Device().attributes queries every attribute on each call)
    return bs.multiprocessor_count()


def _launch_gebrd(layout, dtype, setting, m_max, n_max, count, args):
    itemsize = np.dtype(dtype).itemsize
    if setting.lanes:
        kernel = build.get_kernel(LANES_SOURCE, gebrd_kernel_name(layout, dtype, setting))
        dynamic, static = setting.lanes_smem_bytes(itemsize)
        if dynamic + static > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = dynamic
        # resident blocks only: each group then has several matrices, the next one's copy
        # in flight while it reduces the current one (as svdvals_lanes)
        resident = bs.resident_blocks(LANES_THREADS, dynamic + static, kernel.num_regs)
        plan = plan_gebrd(setting, m_max, n_max, itemsize, count, sv.smem_limit(), _sm_count(), resident)
        kernel((plan.grid,), (plan.block,), (*args, np.int64(count)), shared_mem=plan.smem)
        return
    plan = plan_gebrd(setting, m_max, n_max, itemsize, count, sv.smem_limit(), _sm_count())
    tail = (np.int64(count), np.int32(m_max), np.int32(n_max))
    if setting.blocked:
        import cupy

        # X and Y in device memory when they do not fit beside the rest (one slot per block).
        work = cupy.empty(max(plan.work_elems, 1), dtype)
        tail = (*tail, work) if setting.cluster > 1 else (*tail, work, np.int32(plan.xy_shared))
        tail = (*tail, np.int32(gebrd_settings.narrow_gemv_for(m_max, n_max)))
    ln.launch_planned(build.get_kernel(SOURCE, gebrd_kernel_name(layout, dtype, setting)), plan, (*args, *tail))


def _launch_orgbr(layout, dtype, want_p, m_max, n_max, count, args):
    setting = choose_orgbr_setting(m_max, n_max)
    len_max = max(m_max, n_max)
    plan = plan_orgbr(setting, len_max, np.dtype(dtype).itemsize, count, sv.smem_limit())
    ln.launch_planned(build.get_kernel(SOURCE, orgbr_kernel_name(layout, dtype, setting, want_p)), plan,
                      (*args, np.int64(count), np.int32(len_max)))


def _column_major_empty(xp, batch, rows, cols, dtype):
    """(..., rows, cols) whose matrices are column-major and packed (ld = rows)."""
    return xp.empty((*batch, cols, rows), dtype).swapaxes(-1, -2)


def _in_place_operand(xp, A, batch):
    """A's column-major description when the kernel can work on A itself, else None."""
    if any(s == 0 for s in A.strides[:-2]):
        return None
    op = matrix_operand(A, batch, xp)
    if op.arr is not A or op.transposed:
        return None
    return op


def _gebrd_cupy(xp, A, batch, m, n, overwrite_a, setting):
    dtype, R = A.dtype, real_dtype(A.dtype)
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    op = _in_place_operand(xp, A, batch) if overwrite_a else None
    if op is None:
        a = _column_major_empty(xp, batch, m, n, dtype)
        a[...] = A
        op = matrix_operand(a, batch, xp)
    else:
        a = A
    d = xp.empty((*batch, k), R)
    e = xp.empty((*batch, max(k - 1, 0)), R)
    tauq = xp.empty((*batch, k), dtype)
    taup = xp.empty((*batch, k), dtype)
    info = xp.zeros(batch, np.int32)
    if count and k:
        setting = setting or choose_gebrd_setting(m, n, dtype, sv.smem_limit(), count, _sm_count())
        vec = lambda x, length: ln.pack("UniformVector", x.data.ptr, length, 1)  # noqa: E731
        args = (ln.pack("UniformMatrix", op.base, op.stride, op.ld, m, n), vec(d, k), vec(e, max(k - 1, 0)),
                vec(tauq, k), vec(taup, k))
        _launch_gebrd("uniform", dtype, setting, m, n, count, args)
    return a, d, e, tauq, taup, info


def _orgbr_cupy(xp, want_p, a, tau, batch, m, n, full):
    rows, cols = _orgbr_shape(want_p, m, n, full)
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    out = _column_major_empty(xp, batch, rows, cols, a.dtype)
    info = xp.zeros(batch, np.int32)
    if count == 0 or rows == 0 or cols == 0:
        return out, info
    src = matrix_operand(a, batch, xp)
    if src.transposed:  # the kernel reads A column-major: one copy
        f = _column_major_empty(xp, batch, m, n, a.dtype)
        f[...] = a
        src = matrix_operand(f, batch, xp)
    tau_c = xp.ascontiguousarray(xp.broadcast_to(tau, (*batch, k)))
    args = (ln.pack("UniformMatrix", src.base, src.stride, src.ld, m, n),
            ln.pack("UniformMatrix", out.data.ptr, rows * cols, rows, rows, cols),
            ln.pack("UniformVector", tau_c.data.ptr, k, 1))
    _launch_orgbr("uniform", a.dtype, want_p, m, n, count, args)
    return out, info


# --- lists -------------------------------------------------------------------------------


def _device_pointers(xp, flat, lengths):
    """Device int64 pointers to consecutive pieces of ``flat`` and the pieces themselves."""
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    ptrs = xp.asarray(offsets[:-1] * flat.dtype.itemsize + flat.data.ptr)
    return ptrs, [flat[int(offsets[i]):int(offsets[i + 1])] for i in range(len(lengths))]


def _gebrd_list(A, setting):
    """A list batch: lists of (a, d, e, tauq, taup) members and an info array (count,)."""
    batch = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    xp, count, dtype = batch.xp, batch.count, batch.dtype
    R = real_dtype(dtype)
    if count:
        check_gebrd_fits(setting, *(max(dims) for dims in zip(*batch.shapes)), dtype)
    if xp is np:
        outs = [gebrd(np.asarray(x, dtype=dtype), setting=setting) for x in batch.arrays_user]
        return (*([o[j] for o in outs] for j in range(5)), np.zeros(count, np.int32))
    work = MatrixBatch.from_list([xp.array(x, dtype=dtype, order="F", copy=True) for x in batch.arrays_user],
                                 "A")
    ks = [min(r, c) for r, c in batch.shapes]
    d_ptr, d = _device_pointers(xp, xp.empty(sum(ks), R), ks)
    e_ptr, e = _device_pointers(xp, xp.empty(sum(max(k - 1, 0) for k in ks), R), [max(k - 1, 0) for k in ks])
    q_ptr, tauq = _device_pointers(xp, xp.empty(sum(ks), dtype), ks)
    p_ptr, taup = _device_pointers(xp, xp.empty(sum(ks), dtype), ks)
    m_max, n_max = work.view_dims_max
    if count and min(m_max, n_max):
        setting = setting or choose_gebrd_setting(m_max, n_max, dtype, sv.smem_limit(), count, _sm_count())
        vec = lambda p: ln.pack("PointerVector", p.data.ptr, 0, 1)  # noqa: E731
        args = (work.struct(), vec(d_ptr), vec(e_ptr), vec(q_ptr), vec(p_ptr))
        _launch_gebrd(work.layout, dtype, setting, m_max, n_max, count, args)
    return list(work.arrays), d, e, tauq, taup, xp.zeros(count, np.int32)


def _orgbr_list(want_p, a, tau, full):
    batch = a if isinstance(a, MatrixBatch) else MatrixBatch.from_list(a, "a")
    xp, count = batch.xp, batch.count
    ks = [min(r, c) for r, c in batch.shapes]
    if isinstance(tau, (list, tuple)):
        if len(tau) != count:
            raise ValueError(f"tau has {len(tau)} members but a has {count} matrices")
        taus = [ar.as_array(t, f"tau[{i}]")[0] for i, t in enumerate(tau)]
    else:
        arr = ar.as_array(tau, "tau")[0]
        if arr.ndim != 2 or arr.shape[0] != count:
            raise ValueError(f"tau must be a list of {count} vectors or an array ({count}, k), got shape "
                             f"{arr.shape}")
        taus = [arr[i] for i in range(count)]
    for i, (t, k) in enumerate(zip(taus, ks)):
        ar.check_dtype(t, f"tau[{i}]")
        if tuple(t.shape) != (k,):
            raise ValueError(f"tau[{i}] must have shape ({k},) for a[{i}] of shape {batch.shapes[i]}, "
                             f"got {tuple(t.shape)}")
    if count and ar.common_backend({"a[0]": batch.arrays_user[0], **{f"tau[{i}]": t for i, t in
                                                                     enumerate(taus)}}) is not xp:
        raise ValueError("tau must be on the same device as a")
    dtype = np.result_type(batch.dtype, *[t.dtype for t in taus]) if count else batch.dtype
    if xp is np:
        outs = [orgbr("P" if want_p else "Q", np.asarray(x, dtype=dtype), t.astype(dtype), full_matrices=full)[0]
                for x, t in zip(batch.arrays_user, taus)]
        return outs, np.zeros(count, np.int32)
    src = MatrixBatch.from_list([xp.asfortranarray(ar.astype_exact(x, dtype, xp)) for x in batch.arrays_user], "a")
    shapes = [_orgbr_shape(want_p, r, c, full) for r, c in batch.shapes]
    outs = [xp.empty((c, r), dtype).T for r, c in shapes]
    dst = MatrixBatch.from_list(outs, "q")
    tau_flat = xp.concatenate([ar.astype_exact(t, dtype, xp) for t in taus]) if count else xp.empty(0, dtype)
    t_ptr, _ = _device_pointers(xp, xp.ascontiguousarray(tau_flat), ks)
    m_max, n_max = src.view_dims_max
    if count and max((r * c for r, c in shapes), default=0):
        args = (src.struct("variable"), dst.struct("variable"), ln.pack("PointerVector", t_ptr.data.ptr, 0, 1))
        _launch_orgbr("variable", dtype, want_p, m_max, n_max, count, args)
    return list(dst.arrays), xp.zeros(count, np.int32)
