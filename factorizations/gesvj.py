"""Singular values of many small real matrices by one-sided Jacobi (a take on LAPACK xGESVJ).

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
  of the last sweep) when they did not converge.  NaN/Inf: NaN values, info = k.

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


def kernel_name(dtype, setting: GesvjSetting) -> str:
    return f"gesvj_values_kernel<{ln.accessor_type('UniformMatrix', dtype)}, {setting.template_args()}>"


build.register(SOURCE, [kernel_name(dt, s) for dt in _REAL_DTYPES for s in GESVJ_SETTINGS])


def pair_p(cols: int, rho: int, k: int) -> int:
    """First column of pair k in round rho (gesvj_pair_p)."""
    return cols - 1 if k == 0 else (rho + k) % (cols - 1)


def pair_q(cols: int, rho: int, k: int) -> int:
    return rho if k == 0 else (rho - k + cols - 1) % (cols - 1)


def gesvj_values(A, setting: GesvjSetting):
    """(s, info) of a stacked real (..., m, n) NumPy or CuPy array whose shape the
    setting fits (the caller checks); s (..., min(m, n)) descending."""
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    if not setting.fits(min(m, n), max(m, n)):
        raise ValueError(f"setting {setting} does not fit {m} x {n} matrices "
                         f"(at most {setting.cols} columns of {setting.rows_max} rows)")
    if isinstance(A, np.ndarray):
        count = int(np.prod(batch, dtype=np.int64))
        a = A.reshape(count, m, n) if m >= n else np.swapaxes(A.reshape(count, m, n), -1, -2)
        s, info = _gesvj_numpy(a, setting)
        return s.reshape(*batch, min(m, n)), info.reshape(batch)
    return _gesvj_cupy(A, batch, m, n, setting)


def _gesvj_cupy(A, batch, m, n, setting):
    import cupy

    from .._operands import matrix_operand

    count = int(np.prod(batch, dtype=np.int64))
    k = min(m, n)
    s = cupy.empty((*batch, k), A.dtype)
    info = cupy.zeros(batch, np.int32)
    if count and k:
        op = matrix_operand(A, batch, cupy)
        kernel = build.get_kernel(SOURCE, kernel_name(A.dtype, setting))
        groups = GESVJ_THREADS // setting.group
        args = (ln.pack("UniformMatrix", op.base, op.stride, op.ld, op.rows, op.cols), s, np.int64(k), info,
                np.int64(count), np.int32(setting.max_sweeps))
        kernel((ln.grid_for(count, groups),), (GESVJ_THREADS,), args)
        del op
    return s, info


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


def _gesvj_numpy(a, setting: GesvjSetting):
    """a: (count, l, k) real, l >= k: its columns are orthogonalized (a copy)."""
    rdt = a.dtype
    count, rows, k = a.shape
    nc = setting.cols
    s = np.empty((count, k), rdt)
    info = np.zeros(count, np.int32)
    if count == 0 or k == 0:
        return s, info
    w = np.zeros((count, rows, nc), rdt)
    w[:, :, :k] = a
    bad = ~np.isfinite(w).all(axis=(1, 2))
    w[bad] = 0
    amax = np.abs(w).max(axis=(1, 2))
    e = np.where(amax > 0, np.frexp(amax)[1], 0).astype(np.int32)
    w = np.ldexp(w, -e[:, None, None]).astype(rdt)
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
        x, nx = w[idx], norm[idx]
        rot_count = np.zeros(len(idx), np.int64)
        for p, q in rounds:
            apq = np.einsum("bij,bij->bj", x[:, :, p], x[:, :, q])
            app, aqq = nx[:, p], nx[:, q]
            rotate, c, sn, t = _rotations(app, aqq, apq, tol, rdt)
            rot_count += rotate.sum(axis=1)
            nx[:, p] = np.where(rotate, np.maximum(app - t * apq, 0), app)
            nx[:, q] = np.where(rotate, np.maximum(aqq + t * apq, 0), aqq)
            xp_, xq = x[:, :, p], x[:, :, q]
            x[:, :, p], x[:, :, q] = c[:, None] * xp_ - sn[:, None] * xq, sn[:, None] * xp_ + c[:, None] * xq
        w[idx] = x
        norm[idx] = np.einsum("bij,bij->bj", x, x)
        made[idx] = rot_count
        active[idx] = rot_count > 0
    vals = np.sqrt(norm[:, :k])
    order = np.argsort(-vals, axis=1, kind="stable")
    s[...] = np.ldexp(np.take_along_axis(vals, order, axis=1), e[:, None]).astype(rdt)
    info[:] = np.where(active, made, 0)
    s[bad] = np.nan
    info[bad] = k
    return s, info
