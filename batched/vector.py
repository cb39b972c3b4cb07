"""Batched BLAS-1 over the last axis: nrm2, asum, iamax, dot, dotc, scal, axpy.

Launcher and CPU backend.  Every function takes stacked vectors (..., n) with
any strides (batch dimensions broadcast like NumPy's) and returns a new array:
the reductions one value per vector (shape ``x.shape[:-1]``, a 0-d array for
one vector), scal and axpy the updated vectors.  Semantics are BLAS's: asum
and iamax measure a complex number by |re| + |im|, dot is unconjugated, dotc
conjugates its first argument, nrm2 is scaled like LAPACK's xNRM2.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _arrays as ar
from . import _launch as ln
from ._operands import vector_operand
from .device_functions import build
from .settings import multiprocessor_count

SOURCE = Path(__file__).with_name("vector.cu")
_NRM2, _ASUM, _IAMAX, _DOT, _DOTC = range(5)   # vector_reduce_kernel's op


@dataclass(frozen=True)
class VectorSetting:
    """Threads per vector: 2, 4 or 8 (short vectors, several per warp), 32 or 256."""

    group: int

    @property
    def block_threads(self) -> int:  # vector_block_threads() in batched/vector.cu
        return self.group if self.group > 32 else 256

    @property
    def groups_per_block(self) -> int:
        return self.block_threads // self.group

    def __str__(self) -> str:
        return f"vector{self.group}"


VECTOR_SETTINGS = (VectorSetting(8), VectorSetting(32), VectorSetting(256), VectorSetting(4), VectorSetting(2))


# nrm2, dot and dotc keep 8 lanes a vector while a vector's reads (x, and y for the
# dots) take at most this many bytes: measured on an H100 (10^6 vectors, session 26),
# the 8-lane group keeps four vectors in flight a warp where a warp-wide group keeps
# one.  DNRM2 33 106.9 us against 313.8 (a warp), 64 183.2 against 315.5, 100 290.6
# against 333.4, 128 361.1 against 348.6; SNRM2 200 319.8 against 339.6, 256 375.5
# against 351.6; ZNRM2 64 350.2 against 357.3, 100 581.0 against 571.2; DDOT 48 277.9
# against 311.4, 64 359.8 against 353.1; SDOT 100 295.1 against 336.2, 128 359.1
# against 329.8; ZDOT 24 264.4 against 265.6, 33 388.8 against 352.3.
SMALL_GROUP_BYTES = 800
# ... and 4 lanes up to this many bytes (the same A/B): a group's fixed cost (its
# reduction, nrm2's check and square root) then falls on eight vectors a warp.  DNRM2
# 10 44.0 us against 81.7 (8 lanes; cupy.linalg.norm 96.1), 24 79.5 against 87.0, 33
# 105.1 against 107.2; SNRM2 33 75.0 against 87.5; ZNRM2 10 63.4 against 73.1, 16 99.7
# against 100.0; DDOT 10 61.1 against 64.8, 16 99.6 against 98.0; SDOT 24 73.2 against
# 82.3; ZDOT 4 50.3 against 66.1, 8 100.3 against 92.5.
TINY_GROUP_BYTES = 192
# ... and nrm2 (not the dots) 2 lanes up to this many bytes: sixteen vectors a warp,
# each lane's loads still issued together.  H100, 10^6 vectors, 2 against 4 lanes
# (session 71, scratch A/B): DNRM2 4 19.7 us against 34.5, 10 32.4 against 36.1 (cupy
# 95.8), 12 (96 bytes) 39.9 against 38.9; SNRM2 10 24.6 against 49.7, 16 28.9 against
# 41.8, 24 (96 bytes) 47.4 against 43.6; CNRM2 10 31.7 against 42.0, 12 40.8 against
# 42.3; ZNRM2 4 32.2 against 33.1, 8 56.3 against 51.5.  Session 70: DDOT 10 61.9
# against 61.1 (no gain for the dots).
PAIR_GROUP_BYTES = 80


def choose_vector_setting(n: int, count: int, multiprocessors: int = 132, read_bytes: int = 0,
                          nrm2: bool = False) -> VectorSetting:
    """For nrm2 and the dots (``read_bytes``, the bytes a vector's reads take: the
    measured ones), nrm2 2 lanes up to PAIR_GROUP_BYTES, 4 lanes up to TINY_GROUP_BYTES
    and 8 up to SMALL_GROUP_BYTES; otherwise 8 lanes up to 16 elements.  A block per
    vector only for few long vectors (too few vectors to give every SM several warps); a
    warp otherwise."""
    if nrm2 and 0 < read_bytes <= PAIR_GROUP_BYTES:
        return VECTOR_SETTINGS[4]
    if 0 < read_bytes <= TINY_GROUP_BYTES:
        return VECTOR_SETTINGS[3]
    if n <= 16 or 0 < read_bytes <= SMALL_GROUP_BYTES:
        return VECTOR_SETTINGS[0]
    if n > 2048 and count < 16 * multiprocessors:
        return VECTOR_SETTINGS[2]
    return VECTOR_SETTINGS[1]


def _reduce_name(dtype, setting, op: int) -> str:
    return f"vector_reduce_kernel<{ar.CTYPES[np.dtype(dtype)]}, {setting.group}, {op}>"


def _update_name(dtype, setting) -> str:
    return f"vector_update_kernel<{ar.CTYPES[np.dtype(dtype)]}, {setting.group}>"


build.register(SOURCE, [name for dt in ar.SUPPORTED_DTYPES for s in VECTOR_SETTINGS
                        for name in (_update_name(dt, s), *(_reduce_name(dt, s, op) for op in range(5)))])


def _real(dtype):
    return np.dtype(dtype).type(0).real.dtype


# --- validation --------------------------------------------------------------------------


def _operands(named: dict, setting):
    """(arrays, xp, dtype, batch shape, n) of stacked vectors, broadcast together."""
    if setting is not None and setting not in VECTOR_SETTINGS:
        raise ValueError(f"setting {setting!r} is not one of {', '.join(map(repr, VECTOR_SETTINGS))}")
    arrays = {k: ar.as_array(v, k)[0] for k, v in named.items()}
    xp = ar.common_backend(arrays)
    dtype = ar.result_dtype(arrays)
    lengths = set()
    for k, a in arrays.items():
        if a.ndim < 1:
            raise ValueError(f"{k} must have shape (..., n), got shape {a.shape}")
        lengths.add(a.shape[-1])
    if len(lengths) > 1:
        raise ValueError("vector lengths differ: " + ", ".join(f"{k} {a.shape}" for k, a in arrays.items()))
    try:
        batch = np.broadcast_shapes(*[a.shape[:-1] for a in arrays.values()])
    except ValueError:
        raise ValueError("batch dimensions do not broadcast: "
                         + ", ".join(f"{k} {a.shape}" for k, a in arrays.items())) from None
    n = lengths.pop()
    if n >= 2**31:
        raise ValueError(f"vectors of length {n} are longer than the kernels' 32-bit lengths")
    return [ar.astype_exact(arrays[k], dtype, xp) for k in named], xp, dtype, batch, n


def _alpha(alpha, dtype, xp, batch):
    """(checked scalar, None), or (None, array of per-vector scales broadcasting to the batch)."""
    if isinstance(alpha, (numbers.Number, np.generic)):
        return ar.check_scalar(alpha, "alpha", dtype), None
    arr, _ = ar.as_array(alpha, "alpha")
    if not isinstance(arr, xp.ndarray):
        raise ValueError("alpha must be on the same device as x")
    ar.check_dtype(arr, "alpha")
    if arr.dtype.kind == "c" and dtype.kind != "c":
        raise TypeError(f"alpha is complex ({arr.dtype}) but x is real ({dtype})")
    try:
        if np.broadcast_shapes(arr.shape, batch) != tuple(batch):
            raise ValueError
    except ValueError:
        raise ValueError(f"alpha has shape {arr.shape}, which does not broadcast to the batch shape "
                         f"{tuple(batch)}") from None
    return None, arr


# --- reductions --------------------------------------------------------------------------


def _reduce(op, named, setting):
    arrays, xp, dtype, batch, n = _operands(named, setting)
    if xp is np:
        return _reduce_numpy(op, arrays, batch)
    out_dtype = np.int64 if op == _IAMAX else (_real(dtype) if op in (_NRM2, _ASUM) else dtype)
    out = xp.empty(batch, out_dtype)
    count = int(np.prod(batch, dtype=np.int64))
    if count:
        vs = [vector_operand(a, batch, xp) for a in arrays]
        x = vs[0]
        y = vs[1] if len(vs) > 1 else x
        measured = op in (_NRM2, _DOT, _DOTC)  # SMALL_GROUP_BYTES was measured on these
        read_bytes = n * np.dtype(dtype).itemsize * len(arrays) if measured else 0
        setting = setting or choose_vector_setting(n, count, multiprocessor_count(), read_bytes, op == _NRM2)
        kernel = build.get_kernel(SOURCE, _reduce_name(dtype, setting, op))
        kernel((ln.grid_for(count, setting.groups_per_block),), (setting.block_threads,),
               (ln.pack("UniformVector", x.base, x.stride, x.inc), ln.pack("UniformVector", y.base, y.stride, y.inc),
                out, np.int64(count), np.int32(n)))
    return out


def nrm2(x, *, setting=None):
    """Euclidean norm of every vector, overflow- and underflow-safe.

    Parameters
    ----------
    x : array_like, shape (..., n)
    setting : VectorSetting, optional
        Threads per vector (GPU); default chosen by n.

    Returns
    -------
    norms : real array of shape x.shape[:-1] (float32 for float32/complex64)

    See Also
    --------
    numpy.linalg.norm, scipy.linalg.blas.dnrm2

    Notes
    -----
    Blue's algorithm with LAPACK's constants (la_constants, Anderson 2017):
    entries are summed in three ranges (tiny ones scaled up, huge ones scaled
    down), so entries of 1e300 or 1e-300 neither overflow nor underflow; the
    same algorithm on both backends.  NaN gives NaN, Inf gives Inf.
    """
    return _reduce(_NRM2, {"x": x}, setting)


def asum(x, *, setting=None):
    """Sum of |re x_i| + |im x_i| of every vector (BLAS's xASUM; real result).

    See Also
    --------
    scipy.linalg.blas.dasum, scipy.linalg.blas.dzasum
    """
    return _reduce(_ASUM, {"x": x}, setting)


def iamax(x, *, setting=None):
    """0-based index of the first largest |re x_i| + |im x_i| of every vector (int64).

    Notes
    -----
    BLAS's measure and tie rule (the first maximum), 0-based.  A NaN counts as
    larger than any number (its first occurrence wins, as ``numpy.argmax``);
    an empty vector gives -1.

    See Also
    --------
    scipy.linalg.blas.idamax, numpy.argmax
    """
    return _reduce(_IAMAX, {"x": x}, setting)


def dot(x, y, *, setting=None):
    """Unconjugated dot product sum x_i y_i of every pair of vectors (batch dims broadcast).

    See Also
    --------
    numpy.vecdot (which conjugates; that is :func:`dotc`), scipy.linalg.blas.zdotu
    """
    return _reduce(_DOT, {"x": x, "y": y}, setting)


def dotc(x, y, *, setting=None):
    """Conjugated dot product sum conj(x_i) y_i of every pair of vectors.

    See Also
    --------
    numpy.vecdot, scipy.linalg.blas.zdotc
    """
    return _reduce(_DOTC, {"x": x, "y": y}, setting)


# --- element-wise ------------------------------------------------------------------------


def scal(alpha, x, *, setting=None):
    """``alpha * x`` for every vector: a new array (x is not modified).

    Parameters
    ----------
    alpha : scalar, or array_like broadcasting to x.shape[:-1]
        One scale for all vectors, or one per vector.
    x : array_like, shape (..., n)

    See Also
    --------
    scipy.linalg.blas.dscal
    """
    return _update(alpha, {"x": x}, setting)


def axpy(alpha, x, y, *, setting=None):
    """``alpha * x + y`` for every pair of vectors: a new array (x, y not modified).

    Parameters
    ----------
    alpha : scalar, or array_like broadcasting to the batch shape (one per vector)
    x, y : array_like, shape (..., n), batch dimensions broadcast

    See Also
    --------
    scipy.linalg.blas.daxpy
    """
    return _update(alpha, {"x": x, "y": y}, setting)


def _update(alpha, named, setting):
    arrays, xp, dtype, batch, n = _operands(named, setting)
    scalar, alphas = _alpha(alpha, dtype, xp, batch)
    if alphas is not None:
        dtype = np.result_type(dtype, alphas.dtype)
        arrays = [ar.astype_exact(a, dtype, xp) for a in arrays]
        alphas = ar.astype_exact(alphas, dtype, xp)
        scalar = dtype.type(0)
    shape = (*batch, n)
    if xp is np:
        a = scalar if alphas is None else np.broadcast_to(alphas, batch)[..., None]
        result = a * arrays[0] if len(arrays) == 1 else a * arrays[0] + arrays[1]
        return np.array(np.broadcast_to(result, shape), dtype=dtype)
    out = xp.empty(shape, dtype)
    count = int(np.prod(batch, dtype=np.int64))
    if count and n:
        vs = [vector_operand(a, batch, xp) for a in arrays]
        x, y = vs[0], vs[-1]
        o = vector_operand(out, batch, xp)
        al = vector_operand(alphas[..., None], batch, xp) if alphas is not None else None
        setting = setting or choose_vector_setting(n, count, multiprocessor_count())
        kernel = build.get_kernel(SOURCE, _update_name(dtype, setting))
        vec = lambda v: ln.pack("UniformVector", v.base, v.stride, v.inc)  # noqa: E731
        kernel((ln.grid_for(count, setting.groups_per_block),), (setting.block_threads,),
               (vec(x), vec(y), vec(o), scalar, np.uint64(al.base if al else 0), np.int64(al.stride if al else 0),
                np.int32(len(arrays) == 2), np.int64(count), np.int32(n)))
    return out


# --- CPU backend -------------------------------------------------------------------------

# LAPACK's la_constants for Blue's algorithm (see device_functions/vector.cuh).
_BLUE = {np.dtype(np.float64): (2.0**-511, 2.0**486, 2.0**537, 2.0**-538),
         np.dtype(np.float32): (2.0**-63, 2.0**52, 2.0**75, 2.0**-76)}


def _nrm2_numpy(x):
    """Blue's three sums and LAPACK's combination, vectorized over the batch."""
    R = _real(x.dtype)
    tsml, tbig, ssml, sbig = (R.type(c) for c in _BLUE[R])
    v = np.abs(np.concatenate([x.real, x.imag], axis=-1) if x.dtype.kind == "c" else x)
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        is_big, is_sml = v > tbig, v < tsml
        big = np.where(is_big, (v * sbig) ** 2, R.type(0)).sum(axis=-1, dtype=R)
        sml = np.where(is_sml, (v * ssml) ** 2, R.type(0)).sum(axis=-1, dtype=R)
        med = np.where(~(is_big | is_sml), v * v, R.type(0)).sum(axis=-1, dtype=R)
        med_counts = (med > 0) | np.isnan(med)
        from_big = np.sqrt(big + np.where(med_counts, (med * sbig) * sbig, R.type(0))) / sbig
        a, b = np.sqrt(med), np.sqrt(sml) / ssml
        ymax, ymin = np.maximum(a, b), np.minimum(a, b)
        q = ymin / ymax
        from_sml = np.where(med_counts, ymax * np.sqrt(1 + q * q), b)
        result = np.where(big > 0, from_big, np.where(sml > 0, from_sml, np.sqrt(med)))
    return np.asarray(result, dtype=R)


def _abs1(x):
    return np.abs(x.real) + np.abs(x.imag) if x.dtype.kind == "c" else np.abs(x)


def _reduce_numpy(op, arrays, batch):
    x = np.broadcast_to(arrays[0], (*batch, arrays[0].shape[-1]))
    if op == _NRM2:
        return _nrm2_numpy(x)
    if op == _ASUM:
        return np.asarray(_abs1(x).sum(axis=-1))
    if op == _IAMAX:
        if x.shape[-1] == 0:
            return np.full(batch, -1, dtype=np.int64)
        return np.asarray(np.argmax(_abs1(x), axis=-1), dtype=np.int64)
    y = arrays[1]
    xx = np.conj(x) if op == _DOTC else x
    return np.asarray((xx * y).sum(axis=-1))
