"""Batched bidiagonal SVD: ``bdsqr`` (a batched take on LAPACK xBDSQR).

The algorithm (both backends, one matrix at a time in spirit)
-------------------------------------------------------------
Demmel and Kahan's implicit QR on the bidiagonal B ("Accurate singular values
of bidiagonal matrices", SISC 11, 1990), in LAPACK xBDSQR's organisation:

* a lower bidiagonal is first rotated to upper from the left (those rotations
  go to u);
* ``tol = max(10, min(100, eps^(-1/8))) * eps`` (eps the unit roundoff) and an
  absolute threshold ``thresh = max(tol * sminoa / sqrt(k), maxitr k^2 tiny)``
  from the estimate ``sminoa`` of the smallest singular value (the mu
  recurrence);
* a main loop that, for the bottom index m, splits off the trailing unreduced
  block [ll, m] at superdiagonals below ``thresh``, deflates a converged bottom
  (or top) value, and otherwise chooses a direction for a new block ("chase the
  bulge" top-down when |d_ll| >= |d_m|, else bottom-up), applies the relative
  convergence tests |e_j| <= tol * mu_j of the mu recurrence, and does one QR
  sweep over the block: Demmel-Kahan's zero-shift sweep when the shift would
  spoil relative accuracy (k tol sminl / smax <= max(eps, tol / 100)) or is
  negligible, else the standard shifted sweep with the smaller singular value
  of the 2 x 2 corner at the far end as the shift;
* at most ``maxitr * k^2`` inner steps (maxitr = 6); info > 0 counts the
  superdiagonals that did not converge;
* the values made non-negative (flipping vt's rows) and sorted descending
  (permuting u's columns and vt's rows).

The 2 x 2 blocks are not special-cased (LAPACK uses xLASV2 there): the shifted
sweep with the block's exact smaller singular value as the shift converges in
one or two steps, so the one sweep code serves every block size.  The same
iteration gives the values alone (no rotations recorded): Demmel-Kahan's
algorithm is relatively accurate either way; LAPACK's dqds (xLASQ1) for the
values-only case is not implemented.  Rotations use hypot (overflow-safe);
LAPACK's xGESVD-style scaling of the matrix into a safe range happens in
``svd.py`` before the bidiagonalization.

Rotation convention (both backends): a rotation (c, s) on the pair (p, p+1)
maps x_p <- c x_p + s x_{p+1}, x_{p+1} <- -s x_p + c x_{p+1}; applied to the
columns of u for the left rotations of B and to the rows of vt for the right
ones, in the order the sweep made them, so ``B_in = u_out-part B_out vt_out-part``
holds throughout (u <- u G_L, vt <- G_R^T vt).

Backends
--------
NumPy: the iteration vectorized over the batch.  Every unfinished matrix takes
one step of the main loop per round (finish, fail, deflate, a convergence test,
or a sweep); the sweeps of one round run together, grouped by kind (zero-shift
or shifted, top-down or bottom-up), stepping through positions with per-matrix
indices and masks, since block sizes and iteration counts differ between
matrices.  CuPy: ``bdsqr.cu`` (see ``svd_settings.py`` for the thread mapping
and the shared memory).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import _arrays as ar
from .. import _launch as ln
from ..device_functions import build
from ..settings import multiprocessor_count
from . import _solvers as sv
from .svd_settings import MAXITR, bdsqr_wide, check_bdsqr_setting, choose_bdsqr_setting, plan_bdsqr

SOURCE = Path(__file__).with_name("bdsqr.cu")

_REAL = {np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64),
         np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_CREAL = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_CVEC = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
         np.dtype(np.complex64): "complex<float>", np.dtype(np.complex128): "complex<double>"}


def kernel_name(real_dtype, vec_dtype, group: int, vectors: bool, wide: bool = False) -> str:
    """``wide``: the vectors' rotations four streams and 8-16 pairs at a time (bdsqr.cu's
    rotate_lanes; ``bdsqr_wide`` says when)."""
    return (f"bdsqr_kernel<{_CREAL[np.dtype(real_dtype)]}, {_CVEC[np.dtype(vec_dtype)]}, {group}, "
            f"{'true' if vectors else 'false'}, {'true' if wide else 'false'}>")


def _instantiations():
    names = []
    for r in (np.float32, np.float64):
        for g in (1, 32):
            names.append(kernel_name(r, r, g, False))
        for v in ((np.float32, np.complex64) if r is np.float32 else (np.float64, np.complex128)):
            names += [kernel_name(r, v, 32, True, wide) for wide in (False, True)]
    return names


build.register(SOURCE, _instantiations())


def bdsqr(d, e, *, lower=False, u=None, vt=None, setting=None):
    """Batched singular values (and vectors) of real bidiagonal matrices (LAPACK xBDSQR).

    Parameters
    ----------
    d : array_like, shape (..., k), float32 or float64
        Diagonals.
    e : array_like, shape (..., max(k - 1, 0)), float32 or float64
        Superdiagonals (``lower=False``) or subdiagonals (``lower=True``).
    lower : bool
        B is lower bidiagonal; it is first rotated to upper from the left (the
        rotations go to ``u``), as LAPACK does.
    u : array_like, shape (..., r, k), optional
        Real or complex.  The left rotations are applied to its columns:
        ``u @ U_B`` is returned.
    vt : array_like, shape (..., k, c), optional
        Real or complex.  The right rotations are applied to its rows:
        ``V_B^H @ vt`` is returned.
    setting : BdsqrSetting, optional
        Force the GPU thread mapping; its ``maxitr`` (LAPACK's MAXITR, 6)
        caps the iteration on both backends.

    Returns
    -------
    s : array (..., k), the real dtype
        Singular values, descending, non-negative.
    u, vt : arrays or None
        New arrays (the inputs are never modified), None where not given.
        With B = U_B diag(s) V_B^T: ``u_in B vt_in = u diag(s) vt``.
    info : int32 array shaped like the batch
        0, or the number of superdiagonals that did not converge within
        ``maxitr * k^2`` inner steps (LAPACK's meaning); ``k`` when d or e
        holds NaN or Inf (then s, u and vt of that matrix are NaN).

    Raises
    ------
    TypeError, ValueError
        Bad dtypes (complex d/e, integers), shapes or flags, before any work.

    See Also
    --------
    scipy.linalg.lapack.dbdsqr, svd

    Notes
    -----
    All operands' precisions promote together (numpy.result_type).  Batch
    dimensions of d, e, u and vt must be equal.  Lists of (d, e) pairs are
    not accepted; stack the bidiagonals of one order.  Never synchronizes.
    """
    lower = sv.check_bool(lower, "lower")
    check_bdsqr_setting(setting)
    d, e, u, vt, xp, rdt = _validate(d, e, u, vt)
    batch, k = d.shape[:-1], d.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    maxitr = setting.maxitr if setting is not None else MAXITR
    if xp is np:
        s, uo, vo, info = _bdsqr_numpy(
            d.reshape(count, k).astype(rdt, copy=True), e.reshape(count, max(k - 1, 0)).astype(rdt, copy=True),
            lower, None if u is None else u.reshape(count, *u.shape[-2:]).astype(_vec_dtype(u, rdt), copy=True),
            None if vt is None else vt.reshape(count, *vt.shape[-2:]).astype(_vec_dtype(vt, rdt), copy=True),
            maxitr)
        info = info.reshape(batch)
    else:
        s, uo, vo, info = _bdsqr_cupy(xp, d, e, u, vt, lower, rdt, count, setting)
    s = s.reshape(*batch, k)
    uo = None if uo is None else uo.reshape(u.shape)
    vo = None if vo is None else vo.reshape(vt.shape)
    return s, uo, vo, info.reshape(batch)


def _vec_dtype(v, rdt):
    return np.dtype(np.complex64 if rdt == np.float32 else np.complex128) if v.dtype.kind == "c" else rdt


def _validate(d, e, u, vt):
    d, _ = ar.as_array(d, "d")
    e, _ = ar.as_array(e, "e")
    u = None if u is None else ar.as_array(u, "u")[0]
    vt = None if vt is None else ar.as_array(vt, "vt")[0]
    xp = ar.common_backend({"d": d, "e": e, "u": u, "vt": vt})
    for name, v in (("d", d), ("e", e)):
        ar.check_dtype(v, name)
        if v.dtype.kind == "c":
            raise TypeError(f"{name} must be real (float32 or float64), got {v.dtype}")
        if v.ndim < 1:
            raise ValueError(f"{name} must have shape (..., k), got shape {v.shape}")
    for name, v in (("u", u), ("vt", vt)):
        if v is not None:
            ar.check_dtype(v, name)
            if v.ndim < 2:
                raise ValueError(f"{name} must be a stack of matrices, got shape {v.shape}")
    k = d.shape[-1]
    batch = tuple(d.shape[:-1])
    if tuple(e.shape) != (*batch, max(k - 1, 0)):
        raise ValueError(f"e has shape {tuple(e.shape)}; d of shape {tuple(d.shape)} needs "
                         f"{(*batch, max(k - 1, 0))}")
    if u is not None and (tuple(u.shape[:-2]) != batch or u.shape[-1] != k):
        raise ValueError(f"u has shape {tuple(u.shape)}; d of shape {tuple(d.shape)} needs (*{batch}, r, {k})")
    if vt is not None and (tuple(vt.shape[:-2]) != batch or vt.shape[-2] != k):
        raise ValueError(f"vt has shape {tuple(vt.shape)}; d of shape {tuple(d.shape)} needs (*{batch}, {k}, c)")
    parts = [d.dtype, e.dtype] + [_REAL[v.dtype] for v in (u, vt) if v is not None]
    rdt = np.dtype(np.result_type(*parts))
    return d, e, u, vt, xp, rdt


# --- the scalar pieces, vectorized over matrices ------------------------------------------


def _lartg(f, g):
    """(c, s, r) with [c s; -s c] [f; g] = [r; 0], r = hypot(f, g) >= 0; (1, 0, 0) for f = g = 0."""
    r = np.hypot(f, g)
    zero = r == 0
    safe = np.where(zero, 1, r)
    c = np.where(zero, 1, f / safe)
    s = np.where(zero, 0, g / safe)
    return c.astype(f.dtype, copy=False), s.astype(f.dtype, copy=False), r


def _sv2_min(f, g, h):
    """Smaller singular value of [[f, g], [0, h]] without overflow: from
    s_max + s_min = hypot(|f| + |h|, g), s_max - s_min = hypot(|f| - |h|, g) and
    s_min s_max = |f h|, scaled by the largest of |f|, |h| or by |g|."""
    fa, ga, ha = np.abs(f), np.abs(g), np.abs(h)
    lo, hi = np.minimum(fa, ha), np.maximum(fa, ha)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        safe_hi = np.where(hi == 0, 1, hi)
        p = 1 + lo / safe_hi
        q = (hi - lo) / safe_hi
        # |g| < max(|f|, |h|): scale by hi
        r2 = (ga / safe_hi) ** 2
        small_g = lo * 2 / (np.sqrt(p * p + r2) + np.sqrt(q * q + r2))
        # |g| >= hi: scale by |g|
        safe_g = np.where(ga == 0, 1, ga)
        w = hi / safe_g
        big_g = np.where(w == 0, (lo * hi) / safe_g,
                         2 * lo * w / (np.sqrt(1 + (p * w) ** 2) + np.sqrt(1 + (q * w) ** 2)))
        out = np.where(ga < hi, small_g, big_g)
    return np.where(lo == 0, 0, out).astype(f.dtype, copy=False)


def _rotate_pairs(x, rows, p, c, s, axis, act):
    """Apply (c, s) to the pairs (p, p+1) of x[rows] along ``axis`` (2: columns of
    u (B, r, k); 1: rows of vt (B, k, c)), only where ``act``."""
    if not act.any():
        return
    rows, p, c, s = rows[act], p[act], c[act], s[act]
    if axis == 2:
        a, b = x[rows, :, p], x[rows, :, p + 1]
    else:
        a, b = x[rows, p, :], x[rows, p + 1, :]
    c, s = c[:, None], s[:, None]
    na, nb = c * a + s * b, c * b - s * a
    if axis == 2:
        x[rows, :, p], x[rows, :, p + 1] = na, nb
    else:
        x[rows, p, :], x[rows, p + 1, :] = na, nb


# --- the CPU backend ------------------------------------------------------------------------


def _bdsqr_numpy(d, e, lower, u, vt, maxitr):
    """d (B, k), e (B, k-1) real copies; u (B, r, k), vt (B, k, c) copies or None.
    Works in place; returns (s, u, vt, info)."""
    B, k = d.shape
    info = np.zeros(B, np.int32)
    if B == 0 or k == 0:
        return d, u, vt, info
    R = d.dtype
    eps = float(np.finfo(R).eps) / 2          # unit roundoff, LAPACK's xLAMCH('E')
    # (the scaling below is exact: powers of two)
    unfl = float(np.finfo(R).tiny)
    tol = max(10.0, min(100.0, eps ** -0.125)) * eps
    allb = np.arange(B)
    with np.errstate(all="ignore"):
        bad = ~(np.isfinite(d).all(axis=1) & np.isfinite(e).all(axis=1))
        # exact power-of-two scaling: the largest entry in [1/2, 1), so the threshold's
        # floor maxitr k^2 tiny and the rotations never meet underflow or overflow
        big = np.maximum(np.abs(d).max(axis=1), np.abs(e).max(axis=1) if k > 1 else 0)
        expo = np.where(~bad & (big > 0), np.frexp(np.where(bad, 1, big))[1], 0).astype(np.int32)
        d[...] = np.ldexp(d, -expo[:, None])
        e[...] = np.ldexp(e, -expo[:, None])
        if lower and k > 1:
            for i in range(k - 1):
                c, s, r = _lartg(d[:, i], e[:, i])
                d[:, i] = r
                e[:, i] = s * d[:, i + 1]
                d[:, i + 1] = c * d[:, i + 1]
                if u is not None:
                    _rotate_pairs(u, allb, np.full(B, i), c, s, 2, np.ones(B, bool))
        if k > 1:
            _iterate(d, e, u, vt, maxitr, tol, eps, unfl, bad, info)
        # non-negative values (flip vt's rows), then descending order
        neg = d < 0
        d = np.ldexp(np.abs(d), expo[:, None]).astype(R, copy=False)
        if vt is not None and neg.any():
            vt *= np.where(neg, -1, 1).astype(R)[:, :, None]
        order = np.argsort(-d, axis=1, kind="stable")
        d = np.take_along_axis(d, order, axis=1)
        if u is not None:
            u = np.take_along_axis(u, order[:, None, :], axis=2)
        if vt is not None:
            vt = np.take_along_axis(vt, order[:, :, None], axis=1)
        if bad.any():
            d[bad] = np.nan
            info[bad] = k
            if u is not None:
                u[bad] = np.nan
            if vt is not None:
                vt[bad] = np.nan
    return d, u, vt, info


def _iterate(d, e, u, vt, maxitr, tol, eps, unfl, bad, info):
    """The main loop of xBDSQR, one step per unfinished matrix per round."""
    B, k = d.shape
    R = d.dtype
    ad, ae = np.abs(d), np.abs(e)
    # sminoa: estimate of the smallest singular value (the mu recurrence)
    mu = ad[:, 0].copy()
    sminoa = mu.copy()
    for i in range(1, k):
        mu = np.where(mu == 0, 0, ad[:, i] * (mu / np.where(mu == 0, 1, mu + ae[:, i - 1])))
        sminoa = np.minimum(sminoa, mu)
    thresh = np.maximum(tol * (sminoa / math.sqrt(k)), maxitr * (k * (k * unfl))).astype(R)
    maxit = maxitr * k * k
    m = np.full(B, k - 1)
    oldll = np.full(B, -1)
    oldm = np.full(B, -1)
    idir = np.zeros(B, np.int64)
    iters = np.zeros(B, np.int64)
    live = ~bad
    ke = np.arange(k - 1)
    kd = np.arange(k)
    while True:
        L = np.flatnonzero(live)
        if not len(L):
            return
        # finished, or out of iterations (info: nonzero superdiagonals)
        done = m[L] <= 0
        fail = ~done & (iters[L] > maxit)
        if fail.any():
            info[L[fail]] = np.count_nonzero(e[L[fail]], axis=1)
        live[L[done | fail]] = False
        L = L[~(done | fail)]
        if not len(L):
            continue
        dl, el = d[L], e[L]
        mm = m[L]
        rows = np.arange(len(L))
        # split at negligible superdiagonals (absolute threshold)
        small = (np.abs(el) <= thresh[L][:, None]) & (ke[None, :] < mm[:, None])
        el[small] = 0
        last = np.where(small.any(axis=1), k - 2 - np.argmax(small[:, ::-1], axis=1), -1)
        ll = last + 1
        bottom = ll == mm                     # e[m-1] negligible: d[m] converged
        m[L[bottom]] -= 1
        go = ~bottom
        # direction for a new block
        dll, dmm = np.abs(dl[rows, ll]), np.abs(dl[rows, mm])
        new = (ll > oldm[L]) | (mm < oldll[L])
        dirs = np.where(new, np.where(dll >= dmm, 1, 2), idir[L])
        idir[L[go]] = dirs[go]
        # relative convergence test at the far end
        emm1 = np.abs(el[rows, mm - 1])
        ell = np.abs(el[rows, np.minimum(ll, k - 2)])
        t1 = go & np.where(dirs == 1, emm1 <= tol * dmm, ell <= tol * dll)
        el[rows[t1], np.where(dirs == 1, mm - 1, ll)[t1]] = 0
        go &= ~t1
        # the mu recurrence from the near end: zero the first relatively negligible e
        mu = np.where(dirs == 1, dll, dmm)
        sminl = mu.copy()
        lens = mm - ll
        stopped = ~go
        for t in range(int(lens[go].max()) if go.any() else 0):
            act = ~stopped & (t < lens)
            if not act.any():
                break
            j = np.clip(np.where(dirs == 1, ll + t, mm - 1 - t), 0, k - 2)
            ej = np.abs(el[rows, j])
            hit = act & (ej <= tol * mu)
            el[rows[hit], j[hit]] = 0
            stopped |= hit
            upd = act & ~hit
            dn = np.abs(dl[rows, np.where(dirs == 1, j + 1, j)])
            mun = dn * (mu / np.where(upd, mu + ej, 1))
            mu = np.where(upd, mun, mu)
            sminl = np.where(upd, np.minimum(sminl, mun), sminl)
        go &= ~stopped
        if go.any():
            oldll[L[go]] = ll[go]
            oldm[L[go]] = mm[go]
            # the shift: zero when it would spoil relative accuracy or is negligible
            smax = np.maximum(
                np.max(np.where((kd >= ll[:, None]) & (kd <= mm[:, None]), np.abs(dl), 0), axis=1),
                np.max(np.where((ke >= ll[:, None]) & (ke < mm[:, None]), np.abs(el), 0), axis=1)
                if k > 1 else 0)
            zero = k * tol * (sminl / np.where(smax == 0, 1, smax)) <= max(eps, 0.01 * tol)
            i1 = np.clip(np.where(dirs == 1, mm - 1, ll), 0, k - 1)
            shift = _sv2_min(dl[rows, i1], el[rows, np.minimum(i1, k - 2)], dl[rows, np.minimum(i1 + 1, k - 1)])
            sll = np.where(dirs == 1, dll, dmm)
            negligible = (sll > 0) & ((shift / np.where(sll > 0, sll, 1)) ** 2 < eps)
            shift = np.where(zero | negligible, 0, shift).astype(R)
            iters[L[go]] += lens[go]
            thr = thresh[L]
            for top in (True, False):
                for shifted in (False, True):
                    sel = go & (dirs == (1 if top else 2)) & ((shift != 0) == shifted)
                    if sel.any():
                        _sweep(dl, el, rows[sel], L[sel], ll[sel], mm[sel], shift[sel], thr[sel], top,
                               shifted, u, vt)
        d[L], e[L] = dl, el


def _sweep(d, e, rows, glob, ll, mm, shift, thr, top, shifted, u, vt):
    """One QR sweep over the blocks [ll, mm] of the matrices d[rows], e[rows]
    (in place); glob are the batch indices for u and vt.  Records the
    rotations and applies them to u (left) and vt (right) in sweep order."""
    R = d.dtype
    n = len(rows)
    lens = mm - ll
    steps = int(lens.max())
    one = np.ones(n, R)
    rec = []                                   # per step: (pair p, act, lc, ls, rc, rs)

    def at(a, idx):
        return a[rows, np.clip(idx, 0, a.shape[1] - 1)]

    def put(a, idx, val, mask):
        a[rows[mask], idx[mask]] = val[mask]

    if not shifted:
        cs, oldcs, oldsn = one.copy(), one.copy(), np.zeros(n, R)
        for t in range(steps):
            act = t < lens
            if top:
                i = ll + t
                c1, s1, r = _lartg(at(d, i) * cs, at(e, i))
                put(e, i - 1, oldsn * r, act & (t > 0))
                c2, s2, dn = _lartg(oldcs * r, at(d, i + 1) * s1)
                put(d, i, dn, act)
                rec.append((i, act, c2, s2, c1, s1))
            else:
                i = mm - t
                c1, s1, r = _lartg(at(d, i) * cs, at(e, i - 1))
                put(e, i, oldsn * r, act & (t > 0))
                c2, s2, dn = _lartg(oldcs * r, at(d, i - 1) * s1)
                put(d, i, dn, act)
                rec.append((i - 1, act, c1, -s1, c2, -s2))
            cs = np.where(act, c1, cs)
            oldcs, oldsn = np.where(act, c2, oldcs), np.where(act, s2, oldsn)
        end, far = (mm, mm - 1) if top else (ll, ll)
        h = at(d, end) * cs
        allm = np.ones(n, bool)
        put(d, end, h * oldcs, allm)
        put(e, far, h * oldsn, allm)
    else:
        start = ll if top else mm
        ds = at(d, start)
        f = (np.abs(ds) - shift) * (np.where(ds >= 0, 1, -1).astype(R) + shift / ds)
        g = at(e, ll if top else mm - 1)
        for t in range(steps):
            act = t < lens
            i = ll + t if top else mm - t
            nb = i + 1 if top else i - 1               # the other diagonal of the pair
            ei = i if top else i - 1                   # the superdiagonal between them
            cr, sr, r = _lartg(f, g)
            put(e, i - 1 if top else i, r, act & (t > 0))
            di, en, dnb = at(d, i), at(e, ei), at(d, nb)
            f1 = cr * di + sr * en
            en = cr * en - sr * di
            g1 = sr * dnb
            dnb = cr * dnb
            cl, sl, r = _lartg(f1, g1)
            put(d, i, r, act)
            put(e, ei, en, act)
            put(d, nb, cl * dnb - sl * en, act)
            f = np.where(act, cl * en + sl * dnb, f)
            nxt = i + 1 if top else i - 2              # the next superdiagonal out
            more = act & ((i < mm - 1) if top else (i > ll + 1))
            en2 = at(e, nxt)
            g = np.where(more, sl * en2, g)
            put(e, nxt, cl * en2, more)
            if top:
                rec.append((i, act, cl, sl, cr, sr))
            else:
                rec.append((i - 1, act, cr, -sr, cl, -sl))
        put(e, mm - 1 if top else ll, f, np.ones(n, bool))
    far = mm - 1 if top else ll
    tiny = np.abs(at(e, far)) <= thr
    put(e, far, np.zeros(n, R), tiny)
    for p, act, lc, ls, rc, rs in rec:
        if u is not None:
            _rotate_pairs(u, glob, p, lc, ls, 2, act)
        if vt is not None:
            _rotate_pairs(vt, glob, p, rc, rs, 1, act)


# --- GPU ---------------------------------------------------------------------------------


def _bdsqr_cupy(xp, d, e, u, vt, lower, rdt, count, setting):
    """Copies u into a per-matrix column-major buffer and vt into a row-major one
    (the lanes' coalesced orientations), then one launch does every matrix."""
    from .._operands import vector_operand

    batch, k = tuple(d.shape[:-1]), d.shape[-1]
    s = xp.empty((count, k), rdt)
    info = xp.zeros(count, np.int32)
    vectors = u is not None or vt is not None
    # one vector type per launch: complex when either operand is (a real one comes back real)
    complex_vectors = any(v is not None and v.dtype.kind == "c" for v in (u, vt))
    vdt = np.dtype(np.complex64 if rdt == np.float32 else np.complex128) if complex_vectors else rdt
    ubuf = vbuf = None
    r = c = 0
    if u is not None:
        r = u.shape[-2]
        ubuf = xp.empty((count, k, r), vdt)                   # (i, j) of matrix b at b*k*r + i + j*r
        ubuf[...] = xp.swapaxes(ar.astype_exact(u.reshape(count, r, k), vdt, xp), -1, -2)
    if vt is not None:
        c = vt.shape[-1]
        vbuf = xp.array(ar.astype_exact(vt.reshape(count, k, c), vdt, xp), order="C", copy=True)
    if count and k:
        setting = setting or choose_bdsqr_setting(k, vectors, count, multiprocessor_count())
        plan = plan_bdsqr(setting, k, rdt.itemsize, count, vectors, sv.smem_limit())
        kernel = build.get_kernel(SOURCE, kernel_name(rdt, vdt, setting.group, vectors, bdsqr_wide(k, vectors)))
        if plan.smem > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = plan.smem
        dop = vector_operand(ar.astype_exact(d, rdt, xp), batch, xp)
        eop = vector_operand(ar.astype_exact(e, rdt, xp), batch, xp)
        null = np.uint64(0)
        args = (ln.pack("UniformVector", dop.base, dop.stride, dop.inc),
                ln.pack("UniformVector", eop.base, eop.stride, eop.inc), s,
                ubuf if ubuf is not None else null, np.int64(k * r), np.int64(max(r, 1)), np.int32(r),
                vbuf if vbuf is not None else null, np.int64(k * c), np.int64(max(c, 1)), np.int32(c),
                info, np.int32(k), np.int32(lower), np.int32(setting.maxitr), np.int64(count))
        kernel((plan.grid,), (plan.block,), args, shared_mem=plan.smem)
        del dop, eop
    uo = None if ubuf is None else xp.swapaxes(ubuf, -1, -2)
    vo = vbuf
    if uo is not None and u.dtype.kind != "c" and vdt.kind == "c":
        uo = uo.real.copy()
    if vo is not None and vt.dtype.kind != "c" and vdt.kind == "c":
        vo = vo.real.copy()
    return s, uo, vo, info
