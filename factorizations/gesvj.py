"""SVD of many small real matrices by one-sided Jacobi (a take on LAPACK xGESVJ).

The algorithm (both backends)
-----------------------------
Hestenes' one-sided Jacobi: plane rotations from the right make the columns
of A orthogonal; then the column norms are the singular values.  With k =
min(m, n) the columns of A (m >= n) or of A^T (m < n) are orthogonalized, k
columns of length l = max(m, n), padded with zero columns to an even count
``cols`` (zero columns are never rotated).

* Each matrix is scaled by a power of two (exact) so that its largest entry is
  in [1/2, 1); the values are scaled back at the end.
* A sweep visits every pair once in the round-robin order (``pair_p``,
  ``pair_q``: ``cols - 1`` rounds of ``cols / 2`` disjoint pairs).  A pair
  (p, q) is rotated when both squared norms are at least ``floor`` (below it a
  column perturbs the values by less than 1e-9 (float) or 1e-75 (double)
  relative to the largest entry) and |a_p . a_q| > tol |a_p| |a_q|, tol =
  sqrt(l) eps (xGESVJ's).  The rotation annihilates a_p . a_q: t = s / c is the
  smaller root of t^2 + 2 zeta t - 1 = 0, zeta = (aqq - app) / (2 apq)
  (sqrt(1 + zeta^2) taken as |zeta| where zeta^2 swamps the 1), c = 1 / sqrt(1 + t^2),
  and [a_p, a_q] <- [c a_p - s a_q, s a_p + c a_q].
* The squared norms are computed exactly at the start of each sweep and
  updated by each rotation (app - t apq, aqq + t apq) within it; convergence is
  a sweep without a rotation, so its test used exact norms throughout.
* At most ``max_sweeps`` sweeps (30, xGESVJ's NSWEEP); info > 0 (the rotations
  of the last sweep) when they did not converge.  NaN/Inf: NaN values (and
  vectors), info = k.
* Vectors: the rotations also go to W (identity at the start), so J = Ut
  diag(s) W^T with Ut the normalized columns, in the order of s.  A column
  that ends below the floor (an exact zero) gets an orthonormal completion
  instead: the first unit vector whose part orthogonal to the columns before
  it (Gram-Schmidt, twice) has squared norm above 1 / (2 l).  Then (U, Vh) =
  (Ut, W^T) when J = A and (W, Ut^T) when J = A^T.

The GPU kernel (``gesvj.cu``, ``device_functions/gesvj.cuh``) keeps a matrix
in the registers of a group of lanes (rows spread over the lanes), does the
pairs of a round together and applies each rotation in the scaled ("fast")
form, two multiply-adds per row, with the c's kept as column scales; the
NumPy backend does the same rounds vectorized over matrices and pairs with
plain rotations.  Sums run in a different order on the two, so results agree
to rounding, not bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _launch as ln
from ..device_functions import build
from .svd_settings import GESVJ_SETTINGS, GESVJ_THREADS, GesvjSetting

SOURCE = Path(__file__).with_name("gesvj.cu")
_REAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# GesvjLimits in gesvj.cuh
_FLOOR = {np.dtype(np.float32): 1.0e-18, np.dtype(np.float64): 1.0e-150}
_FLAT = {np.dtype(np.float32): 4096.0, np.dtype(np.float64): 2.0 ** 27}


def kernel_name(dtype, setting: GesvjSetting, vectors: bool) -> str:
    return (f"gesvj_kernel<{ln.accessor_type('UniformMatrix', dtype)}, {setting.template_args()}, "
            f"{'true' if vectors else 'false'}>")


build.register(SOURCE, [kernel_name(dt, s, v) for dt in _REAL_DTYPES for s in GESVJ_SETTINGS for v in (False, True)])


def pair_p(cols: int, rho: int, k: int) -> int:
    """First column of pair k in round rho (gesvj_pair_p)."""
    return cols - 1 if k == 0 else (rho + k) % (cols - 1)


def pair_q(cols: int, rho: int, k: int) -> int:
    return rho if k == 0 else (rho - k + cols - 1) % (cols - 1)


def gesvj(A, setting: GesvjSetting, vectors: bool = False):
    """(s, info), or (U, s, Vh, info) with ``vectors``, of a stacked real (..., m, n)
    NumPy or CuPy array whose shape the setting fits; s (..., k) descending, U
    (..., m, k), Vh (..., k, n) (k = min(m, n)) as numpy.linalg.svd(full_matrices=False)."""
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    if not setting.fits(min(m, n), max(m, n)):
        raise ValueError(f"setting {setting} does not fit {m} x {n} matrices "
                         f"(at most {setting.cols} columns of {setting.rows_max} rows)")
    if isinstance(A, np.ndarray):
        count = int(np.prod(batch, dtype=np.int64))
        tall = m >= n
        a = A.reshape(count, m, n) if tall else np.swapaxes(A.reshape(count, m, n), -1, -2)
        s, info, ut, w = _gesvj_numpy(a, setting, vectors)
        s, info = s.reshape(*batch, min(m, n)), info.reshape(batch)
        if not vectors:
            return s, info
        # J = Ut diag(s) W^T with J = A (tall) or A^T (wide)
        U, Vh = (ut, np.swapaxes(w, -1, -2)) if tall else (w, np.swapaxes(ut, -1, -2))
        return U.reshape(*batch, m, min(m, n)), s, Vh.reshape(*batch, min(m, n), n), info
    return _gesvj_cupy(A, batch, m, n, setting, vectors)


def _gesvj_cupy(A, batch, m, n, setting, vectors):
    import cupy

    from .._operands import matrix_operand

    count = int(np.prod(batch, dtype=np.int64))
    k = min(m, n)
    s = cupy.empty((*batch, k), A.dtype)
    info = cupy.zeros(batch, np.int32)
    U = cupy.empty((*batch, m, k), A.dtype) if vectors else None
    Vh = cupy.empty((*batch, k, n), A.dtype) if vectors else None
    if count and k:
        op = matrix_operand(A, batch, cupy)
        # J, the matrix whose columns the kernel orthogonalizes, is A or A^T; J = Ut diag(s) W^T
        j_is_a = (op.cols <= op.rows) != op.transposed
        null = (np.uint64(0), np.int64(0), np.int64(0), np.int64(0))
        to_u = (U, np.int64(m * k), np.int64(k), np.int64(1)) if vectors else null   # (i, j) -> U[b, i, j]
        to_vh = (Vh, np.int64(k * n), np.int64(1), np.int64(n)) if vectors else null  # (i, j) -> Vh[b, j, i]
        ut_w = (*to_u, *to_vh) if j_is_a else (*to_vh, *to_u)
        kernel = build.get_kernel(SOURCE, kernel_name(A.dtype, setting, vectors))
        groups = GESVJ_THREADS // setting.group
        args = (ln.pack("UniformMatrix", op.base, op.stride, op.ld, op.rows, op.cols), s, np.int64(k), info,
                np.int64(count), np.int32(setting.max_sweeps), *ut_w)
        kernel((ln.grid_for(count, groups),), (GESVJ_THREADS,), args)
        del op
    return (U, s, Vh, info) if vectors else (s, info)


def scale_to_unit(w):
    """The small-matrix kernels' scaling on the CPU: (w 2^-e, e, bad) for a writable
    (count, r, c) real stack w, e per matrix the exponent of its largest |entry| (which
    lands in [1/2, 1); 0 for a zero matrix), so the scaling is exact; the matrices with
    NaN/Inf (``bad``) are zeroed first.  Also svdvals_lanes' NumPy backend."""
    bad = ~np.isfinite(w).all(axis=(1, 2))
    w[bad] = 0
    amax = np.abs(w).max(axis=(1, 2))
    e = np.where(amax > 0, np.frexp(amax)[1], 0).astype(np.int32)
    return np.ldexp(w, -e[:, None, None]).astype(w.dtype), e, bad


def _rotations(app, aqq, apq, tol, rdt):
    """(rotate, c, s, t) of every pair at once (gesvj_rotation)."""
    floor, flat = _FLOOR[rdt], _FLAT[rdt]
    with np.errstate(all="ignore"):
        rotate = (app >= floor) & (aqq >= floor) & (np.abs(apq) > tol * np.sqrt(app * aqq))
        zeta = (aqq - app) / (2 * apq)
        z = np.abs(zeta)
        t = np.copysign(1, zeta) / (z + np.where(z > flat, z, np.sqrt(1 + zeta * zeta)))
    t = np.where(rotate, t, 0).astype(rdt)
    c = (1 / np.sqrt(1 + t * t)).astype(rdt)
    return rotate, c, c * t, t


def _complete(x, good):
    """gesvj_complete on one l x k matrix: columns good.. orthonormal to the ones before."""
    l, k = x.shape
    for j in range(good, k):
        for c in range(l):
            y = np.zeros(l, x.dtype)
            y[c] = 1
            for _ in range(2):
                for jj in range(j):
                    y -= (x[:, jj] @ y) * x[:, jj]
            nrm = y @ y
            if nrm > 1 / (2 * l):
                x[:, j] = y / np.sqrt(nrm)
                break


def _gesvj_numpy(a, setting: GesvjSetting, vectors: bool):
    """a: (count, l, k) real, l >= k: its columns are orthogonalized (on a copy).
    (s, info, Ut, W): Ut (count, l, k) and W (count, k, k) in the order of s (None
    without vectors), J = Ut diag(s) W^T."""
    rdt = a.dtype
    count, rows, k = a.shape
    nc = setting.cols
    s = np.empty((count, k), rdt)
    info = np.zeros(count, np.int32)
    if count == 0 or k == 0:
        return s, info, np.zeros((count, rows, k), rdt), np.zeros((count, k, k), rdt)
    w = np.zeros((count, rows, nc), rdt)
    w[:, :, :k] = a
    w, e, bad = scale_to_unit(w)
    v = np.broadcast_to(np.eye(nc, dtype=rdt), (count, nc, nc)).copy()
    tol = rdt.type(np.sqrt(rows) * np.finfo(rdt).eps / 2)
    rounds = [(np.array([pair_p(nc, rho, j) for j in range(nc // 2)]),
               np.array([pair_q(nc, rho, j) for j in range(nc // 2)])) for rho in range(nc - 1)]
    norm = np.einsum("bij,bij->bj", w, w)
    made = np.ones(count, np.int64)
    active = np.ones(count, bool)   # matrices whose last sweep rotated (the others are left alone)
    for _ in range(setting.max_sweeps):
        if not active.any():
            break
        idx = np.flatnonzero(active)
        x, nx, vx = w[idx], norm[idx], v[idx]
        rot_count = np.zeros(len(idx), np.int64)
        for p, q in rounds:
            apq = np.einsum("bij,bij->bj", x[:, :, p], x[:, :, q])
            app, aqq = nx[:, p], nx[:, q]
            rotate, c, sn, t = _rotations(app, aqq, apq, tol, rdt)
            rot_count += rotate.sum(axis=1)
            nx[:, p] = np.where(rotate, np.maximum(app - t * apq, 0), app)
            nx[:, q] = np.where(rotate, np.maximum(aqq + t * apq, 0), aqq)
            for y in (x, vx) if vectors else (x,):
                yp, yq = y[:, :, p], y[:, :, q]
                y[:, :, p], y[:, :, q] = c[:, None] * yp - sn[:, None] * yq, sn[:, None] * yp + c[:, None] * yq
        w[idx], v[idx] = x, vx
        norm[idx] = np.einsum("bij,bij->bj", x, x)
        made[idx] = rot_count
        active[idx] = rot_count > 0
    vals = np.sqrt(norm[:, :k])
    order = np.argsort(-vals, axis=1, kind="stable")
    s[...] = np.ldexp(np.take_along_axis(vals, order, axis=1), e[:, None]).astype(rdt)
    info[:] = np.where(active, made, 0)
    s[bad] = np.nan
    info[bad] = k
    if not vectors:
        return s, info, None, None
    nk = norm[:, :k]
    good = nk >= _FLOOR[rdt]
    with np.errstate(divide="ignore", invalid="ignore"):
        ut = np.where(good[:, None, :], w[:, :, :k] / np.sqrt(np.where(good, nk, 1))[:, None, :], 0).astype(rdt)
    ut = np.take_along_axis(ut, order[:, None, :], axis=2)
    wk = np.take_along_axis(v[:, :k, :k], order[:, None, :], axis=2)
    for b in np.flatnonzero(~good.all(axis=1) & ~bad):
        _complete(ut[b], int(good[b].sum()))
    ut[bad] = np.nan
    wk[bad] = np.nan
    return s, info, ut, wk
