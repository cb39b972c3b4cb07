"""Singular values of many small real matrices: bidiagonalization in registers, then dqds.

The algorithm (both backends)
-----------------------------
* Each matrix is scaled by a power of two (exact) so that its largest entry is
  in [1/2, 1); the values are scaled back at the end.  A wide matrix is
  handled as its transpose (same values), so the bidiagonal is upper.
* Householder bidiagonalization (LAPACK xGEBD2's reflectors, applied and
  dropped: only d and e are kept).
* dqds (Fernando and Parlett; LAPACK xLASQ1-6 compute the same thing with a
  more elaborate shift strategy) on the qd array q_i = d_i^2, e_i = e_i^2, with
  our own shift rule, splitting and deflation (``device_functions/lasq.cuh``
  documents them; ``_lasq_one`` below is the same code in Python).  The values
  are the square roots of the array's eigenvalues, sorted descending.
* At most ``passes_per_value * k`` transforms (k = min(m, n)); info = the count
  of values not converged past them (0 otherwise), k for NaN/Inf (values NaN).

The GPU (``svdvals_lanes.cu``): a group of G lanes holds a matrix a row a lane
and bidiagonalizes it with shuffles (no shared memory, no barrier), writing d
and e; then a thread per matrix runs dqds in shared memory.  The NumPy backend
bidiagonalizes with gebrd's vectorized xGEBD2 and runs dqds matrix by matrix in
Python (slow: it is there for the CPU tests of the algorithm; the CPU default of
``svdvals`` stays the vectorized GEBRD -> BDSQR pipeline).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _launch as ln
from .. import settings as sv
from ..device_functions import build
from .gebrd_settings import LANES_THREADS, lanes_shared_bytes
from .svd_settings import DQDS_SETTINGS, DqdsSetting

SOURCE = Path(__file__).with_name("svdvals_lanes.cu")
_REAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
LASQ_THREADS = 64                  # lasq_kernel's block when its shared memory fits 48 KiB
_SOFT_SMEM = 48 * 1024


def gebd2_kernel_name(dtype, setting: DqdsSetting) -> str:
    return f"gebd2_lanes_kernel<{ln.accessor_type('UniformMatrix', dtype)}, {setting.template_args()}>"


def lasq_kernel_name(dtype) -> str:
    return f"lasq_kernel<{'float' if np.dtype(dtype) == np.float32 else 'double'}>"


build.register(SOURCE, [gebd2_kernel_name(dt, s) for dt in _REAL_DTYPES for s in DQDS_SETTINGS]
               + [lasq_kernel_name(dt) for dt in _REAL_DTYPES])


def gebd2_stage_bytes(setting: DqdsSetting, itemsize: int) -> tuple[int, int]:
    """(dynamic, static) shared bytes of gebd2_lanes_kernel (the lanes design's:
    gebrd_settings.lanes_shared_bytes)."""
    return lanes_shared_bytes(setting.group, setting.cols, itemsize)


def lasq_plan(k: int, itemsize: int):
    """(threads, shared bytes) of lasq_kernel for order k: 64 threads when their
    arrays (4 k entries each) fit 48 KiB, else 32 (64 KiB at k = 64 in double)."""
    threads = LASQ_THREADS
    while threads > 32 and 4 * max(k, 1) * threads * itemsize > _SOFT_SMEM:
        threads //= 2
    return threads, 4 * max(k, 1) * threads * itemsize


def svdvals_lanes(A, setting: DqdsSetting):
    """(s, info) of a stacked real (..., m, n) NumPy or CuPy array whose shape the
    setting fits; s (..., min(m, n)) descending."""
    batch, (m, n) = tuple(A.shape[:-2]), A.shape[-2:]
    k = min(m, n)
    if not setting.fits(k, max(m, n)):
        raise ValueError(f"setting {setting} does not fit {m} x {n} matrices "
                         f"(at most {setting.cols} columns of {setting.group} rows)")
    max_passes = setting.passes_per_value * k
    if isinstance(A, np.ndarray):
        count = int(np.prod(batch, dtype=np.int64))
        a = A.reshape(count, m, n)
        s, info = _svdvals_numpy(a if m >= n else np.swapaxes(a, -1, -2), max_passes)
        return s.reshape(*batch, k), info.reshape(batch)
    return _svdvals_cupy(A, batch, m, n, setting, max_passes)


def _svdvals_cupy(A, batch, m, n, setting, max_passes):
    import cupy

    from .._operands import matrix_operand

    count = int(np.prod(batch, dtype=np.int64))
    k = min(m, n)
    s = cupy.empty((*batch, k), A.dtype)
    # lasq_kernel writes every matrix's info, so no memset ahead of the two launches
    info = cupy.empty(batch, np.int32) if count and k else cupy.zeros(batch, np.int32)
    if count and k:
        op = matrix_operand(A, batch, cupy)
        d = cupy.empty((count, k), A.dtype)
        e = cupy.empty((count, k), A.dtype)
        scale = cupy.empty(count, np.int32)
        groups = LANES_THREADS // setting.group
        gebd2 = build.get_kernel(SOURCE, gebd2_kernel_name(A.dtype, setting))
        stage, static = gebd2_stage_bytes(setting, A.dtype.itemsize)
        if stage + static > _SOFT_SMEM:
            gebd2.max_dynamic_shared_size_bytes = stage
        # resident blocks only: each group then has several matrices, the next one's
        # loads in flight while it works on the current one
        grid = min(ln.grid_for(count, groups),
                   sv.resident_blocks(LANES_THREADS, stage + static, gebd2.num_regs))
        gebd2((grid,), (LANES_THREADS,),
              (ln.pack("UniformMatrix", op.base, op.stride, op.ld, op.rows, op.cols), d, e, np.int64(k), scale,
               np.int64(count)), shared_mem=stage)
        del op
        threads, smem = lasq_plan(k, A.dtype.itemsize)
        lasq = build.get_kernel(SOURCE, lasq_kernel_name(A.dtype))
        if smem > _SOFT_SMEM:
            lasq.max_dynamic_shared_size_bytes = smem
        lasq((ln.grid_for(count, threads),), (threads,),
             (d, e, np.int64(k), scale, np.int64(count), np.int32(k), s, np.int64(k), info, np.int32(max_passes)),
             shared_mem=smem)
    return s, info


# --- the NumPy backend ---------------------------------------------------------------------


def _scaled_bidiagonals(a):
    """(d, e, x, bad) of a (count, l, k) real stack, l >= k (not modified): each matrix
    scaled by 2^-x[b] as the kernel scales it (NaN/Inf ones, ``bad``, zeroed), then
    xGEBD2's d and e (count x k)."""
    from .gebrd import _gebd2_numpy
    from .gesvj import scale_to_unit

    w, x, bad = scale_to_unit(a.copy())
    d, e, _, _ = _gebd2_numpy(w)
    return d, e, x, bad


def _svdvals_numpy(a, max_passes):
    """a: (count, l, k) real, l >= k (a view; not modified).  (s, info)."""
    count, rows, k = a.shape
    s = np.empty((count, k), a.dtype)
    info = np.zeros(count, np.int32)
    if count == 0 or k == 0:
        return s, info
    d, e, x, bad = _scaled_bidiagonals(a)
    for b in range(count):
        if bad[b]:
            s[b] = np.nan
            info[b] = k
            continue
        vals, info[b] = _lasq_one(d[b], e[b], max_passes)
        s[b] = np.ldexp(np.sqrt(np.maximum(vals, 0)), x[b])[::-1]  # ascending -> descending
    return s, info


def _lasq_one(d, e, max_passes, attempts=None):
    """dqds on one bidiagonal (lasq.cuh's lasq_values, statement for statement):
    (the squared singular values, ascending; info).  The caller scales d and e so
    that the largest is about 1 (squares below the underflow threshold count as zero).
    ``attempts``, a list, receives (rows, ok) for each transform tried, in order: the
    block's order n0 - i0 + 1 and whether it succeeded (tools/dqds_rounds.py counts
    the kernel's rounds from it)."""
    rdt = d.dtype.type
    n = len(d)
    tol = rdt(100) * rdt(np.finfo(d.dtype).eps)
    tol2 = tol * tol
    z = np.zeros((n, 2, 2), d.dtype)       # z[i, p] = (q, e) of copy p
    z[:, 0, 0] = d * d
    z[:n - 1, 0, 1] = e[:n - 1] * e[:n - 1]
    p = passes = i0 = 0
    n0 = n - 1
    sigma, dmin, dn = rdt(0), rdt(-1), rdt(0)
    fresh = True
    while n0 >= 0:
        if fresh:
            p = 0
            i0 = n0
            while i0 > 0 and z[i0 - 1, 0, 1] > 0:
                i0 -= 1
            dmin = rdt(-1)
            fresh = False
        if n0 == i0 or z[n0 - 1, p, 1] <= tol2 * (sigma + z[n0, p, 0]):
            z[n0, 0, 0] = z[n0, p, 0] + sigma
            n0 -= 1
            dmin = rdt(-1)
        elif n0 == i0 + 1 or z[n0 - 2, p, 1] <= tol2 * (sigma + z[n0 - 1, p, 0]):
            q1, e1, q2 = z[n0 - 1, p, 0], z[n0 - 1, p, 1], z[n0, p, 0]
            h = q1 - q2 + e1
            big = rdt(0.5) * (q1 + e1 + q2 + np.sqrt(h * h + rdt(4) * e1 * q2))
            small = (q1 / big) * q2 if big > 0 else rdt(0)
            z[n0 - 1, 0, 0] = big + sigma
            z[n0, 0, 0] = small + sigma
            n0 -= 2
            dmin = rdt(-1)
        if n0 < i0:
            fresh = True
            if n0 >= 0:
                sigma = -z[n0, 0, 1]
            continue
        if n0 == i0:
            continue
        if passes >= max_passes:
            z[i0:n0 + 1, 0, 0] = z[i0:n0 + 1, p, 0] + sigma
            left = n0 + 1
            for i in range(i0 - 1, -1, -1):
                if z[i, 0, 1] <= 0:
                    sigma = -z[i, 0, 1]
                z[i, 0, 0] += sigma
            return np.sort(z[:, 0, 0]), left
        tau = _lasq_shift(z, p, i0, n0, dmin, dn)
        ok = False
        fails = 0
        while passes < max_passes:
            passes += 1
            ok, dmin_t, dn_t, last, emin_t, qmax_t = _lasq_transform(z, p, i0, n0, tau)
            if attempts is not None:
                attempts.append((n0 - i0 + 1, ok))
            if ok:
                dmin, dn = dmin_t, dn_t
                break
            bound = tau + dn_t
            tau = (rdt(0) if fails >= 3 else max(bound, rdt(0)) if last
                   else min(bound, rdt(0.5) * tau) if bound > 0 else rdt(0.25) * tau)
            fails += 1
        if not ok:
            continue
        p = 1 - p
        sigma += tau
        if p == 0 and emin_t <= tol2 * (sigma + qmax_t):
            top = i0
            for i in range(n0 - 2, i0 - 1, -1):
                if z[i, 0, 1] <= tol2 * (sigma + z[i + 1, 0, 0]):
                    z[i, 0, 1] = -sigma
                    if top == i0:
                        top = i + 1
            i0 = top
    return np.sort(z[:, 0, 0]), 0


def _lasq_transform(z, p, i0, n0, tau):
    """lasq_transform: (ok, dmin, dn, last, emin, qmax); copy p intact when not ok,
    and then dn is the negative d and ``last`` whether it was d_n0."""
    d = z[i0, p, 0] - tau
    if not d >= 0:
        return False, d, d, i0 == n0, None, None
    dmin, emin, qmax = d, 1e30, 0.0
    for i in range(i0, n0):
        qh = d + z[i, p, 1]
        split = z[i, p, 1] == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            t = z[i + 1, p, 0] / qh
        z[i, 1 - p, 0] = qh
        z[i, 1 - p, 1] = 0 if split else z[i, p, 1] * t
        d = (z[i + 1, p, 0] if split else d * t) - tau
        if not d >= 0:
            return False, d, d, i + 1 == n0, None, None
        dmin = min(dmin, d)
        if i + 1 < n0:  # the bottom row's e is the deflation test's
            emin = min(emin, z[i, 1 - p, 1])
        qmax = max(qmax, qh)
    z[n0, 1 - p, 0] = d
    return True, dmin, d, True, emin, qmax


def _lasq_shift(z, p, i0, n0, dmin, dn):
    rdt = z.dtype.type
    if dmin >= 0 and dmin < dn * rdt(0.999999):
        return rdt(0.25) * dmin
    fallback = rdt(0.25) * max(dmin, rdt(0))
    if z[n0 - 1, p, 1] > z[n0 - 1, p, 0]:
        return fallback
    b1 = z[n0 - 1, p, 1] / z[n0 - 1, p, 0]
    a = b = b1
    for i in range(n0 - 2, max(n0 - 9, i0 - 1), -1):
        if z[i, p, 1] > z[i, p, 0]:
            break
        b *= z[i, p, 1] / z[i, p, 0]
        a += b
        if rdt(100) * b < a:
            break
    if not a < rdt(0.5):
        return fallback
    q, q1, e1 = z[n0, p, 0], z[n0 - 1, p, 0], z[n0 - 1, p, 1]
    base = q * (rdt(1) - a) / (rdt(1) + a)
    # the bottom pair's smaller eigenvalue caps the rule and replaces it where larger
    h = q1 - q + e1
    big = rdt(0.5) * (q1 + e1 + q + np.sqrt(h * h + rdt(4) * e1 * q))
    r = q1 / big
    pair = r * q * (rdt(1) - rdt(32 * (n0 - i0 + 1)) * rdt(np.finfo(z.dtype).eps))
    capped = base if base < pair else pair
    t = pair - rdt(4) * (a - b1) * q1 * r
    return t if t > capped else capped

