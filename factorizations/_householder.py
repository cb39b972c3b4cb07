"""Elementary reflectors for the NumPy backend, vectorized over a batch.

The CPU twins of ``device_functions/householder.cuh``: ``larfg`` (LAPACK's
xLARFG: the same norm (Blue's scaled sums, ``batched.vector._nrm2_numpy``), the
same safe ``lapy3`` for beta, the same rescaling loop when ``|beta| < safmin``)
and the application of ``H = I - tau v v^H`` from the left or the right
(xLARF).  QR, GEBRD and ORGBR share them.  Every function works on a batch:
leading axes are batch axes, and each matrix makes its own scaling decisions.
"""

from __future__ import annotations

import numpy as np

from batched.vector import _nrm2_numpy

# LAPACK's safmin = dlamch('S') / dlamch('E') (the smallest normal number over
# the unit roundoff), as in householder.cuh's LarfgConstants.
_SAFMIN = {np.dtype(np.float64): 2.0**-969, np.dtype(np.float32): 2.0**-102}


def real_dtype(dtype) -> np.dtype:
    """float32 for float32/complex64, float64 for float64/complex128."""
    return np.empty(0, dtype=dtype).real.dtype


def lapy3(a, b, c):
    """sqrt(a^2 + b^2 + c^2) elementwise without overflow (LAPACK's xLAPY3)."""
    x, y, z = np.abs(a), np.abs(b), np.abs(c)
    w = np.maximum(np.maximum(x, y), z)
    with np.errstate(all="ignore"):
        ws = np.where((w == 0) | np.isinf(w), 1, w).astype(w.dtype)
        p, q, r = x / ws, y / ws, z / ws
        scaled = w * np.sqrt(p * p + q * q + r * r)
        return np.where((w == 0) | np.isinf(w), x + y + z, scaled)


def larfg(alpha, x):
    """LAPACK's xLARFG for a batch: H^H [alpha; x] = [beta; 0], H = I - tau v v^H.

    Parameters
    ----------
    alpha : ndarray (...,)
        First elements, real or complex (the dtype of ``x``).
    x : ndarray (..., n - 1)
        The rest of each vector (n - 1 may be 0).  Not modified.

    Returns
    -------
    beta : ndarray (...,), real dtype
        The new first elements (real even for complex input).
    v : ndarray (..., n - 1)
        v(1:n-1); v(0) = 1 is implicit.  A new array.
    tau : ndarray (...,), dtype of ``x``
        0 (and beta = Re alpha, v = x) where x = 0 and alpha is real; otherwise
        tau = (beta - alpha) / beta.  Where |beta| < safmin, x, alpha and beta
        are scaled up by 1/safmin (at most 20 times) before and beta scaled back
        after, exactly as LAPACK and ``bdf::larfg`` decide.
    """
    x = np.asarray(x)
    dtype = x.dtype
    R = real_dtype(dtype)
    safmin = R.type(_SAFMIN[R])
    rsafmn = R.type(1 / _SAFMIN[R])
    alpha = np.asarray(alpha, dtype=dtype)
    alphr = np.array(alpha.real, dtype=R, copy=True)
    alphi = np.array(alpha.imag, dtype=R, copy=True) if dtype.kind == "c" else np.zeros_like(alphr)
    with np.errstate(all="ignore"):
        xnorm = _nrm2_numpy(x)
        trivial = (xnorm == 0) & (alphi == 0)
        beta = -np.copysign(lapy3(alphr, alphi, xnorm), alphr)
        knt = np.zeros(alphr.shape, dtype=np.int32)
        active = (np.abs(beta) < safmin) & ~trivial
        if active.any():
            x = x.copy()
            while active.any():  # the do-while of LAPACK, per matrix
                knt += active
                x = np.where(active[..., None], x * rsafmn, x)
                beta = np.where(active, beta * rsafmn, beta)
                alphr = np.where(active, alphr * rsafmn, alphr)
                alphi = np.where(active, alphi * rsafmn, alphi)
                active = (np.abs(beta) < safmin) & (knt < 20)
            scaled = knt > 0
            beta = np.where(scaled, -np.copysign(lapy3(alphr, alphi, _nrm2_numpy(x)), alphr), beta)
        if dtype.kind == "c":
            tau = np.empty(beta.shape, dtype=dtype)
            tau.real, tau.imag = (beta - alphr) / beta, -alphi / beta
            denom = np.empty(beta.shape, dtype=dtype)
            denom.real, denom.imag = alphr - beta, alphi
        else:
            tau = ((beta - alphr) / beta).astype(dtype)
            denom = (alphr - beta).astype(dtype)
        with np.errstate(all="ignore"):
            v = (x / denom[..., None]).astype(dtype)   # NumPy's complex division is Smith's
        for j in range(int(knt.max(initial=0))):
            beta = np.where(knt > j, beta * safmin, beta)
    beta = np.where(trivial, np.asarray(alpha.real, dtype=R), beta).astype(R)
    tau = np.where(trivial, dtype.type(0), tau).astype(dtype)
    v = np.where(trivial[..., None], x, v).astype(dtype)
    return beta, v, tau


def larf_left(v, tau, c):
    """C := (I - tau v v^H) C in place for a batch (LAPACK's xLARF, side 'L').

    ``v`` (..., m) holds every element including v(0) (normally 1); ``tau``
    (...,); ``c`` (..., m, n) a writable array (a view into a larger matrix is
    fine).  Pass conj(tau) to apply H^H.  Matrices whose tau is 0 are left
    untouched (NaN elsewhere in them does not spread), as in LAPACK.
    """
    if c.shape[-1] == 0 or c.shape[-2] == 0:
        return c
    tau = np.asarray(tau)
    with np.errstate(all="ignore"):
        vhc = v.conj()[..., None, :] @ c  # (..., 1, n) = (C^H v)^H
        update = tau[..., None, None] * v[..., :, None] * vhc
        c -= np.where((tau == 0)[..., None, None], c.dtype.type(0), update)
    return c


def larf_right(v, tau, c):
    """C := C (I - tau v v^H) in place for a batch (LAPACK's xLARF, side 'R').

    ``v`` (..., n) including v(0); ``tau`` (...,); ``c`` (..., m, n) writable.
    """
    if c.shape[-1] == 0 or c.shape[-2] == 0:
        return c
    tau = np.asarray(tau)
    with np.errstate(all="ignore"):
        cv = c @ v[..., :, None]  # (..., m, 1)
        update = tau[..., None, None] * cv * v.conj()[..., None, :]
        c -= np.where((tau == 0)[..., None, None], c.dtype.type(0), update)
    return c
