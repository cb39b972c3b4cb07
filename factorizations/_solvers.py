"""Pieces every batched solver shares: right-hand sides, flags, failures, shared memory.

The right-hand-side rule of DESIGN.md (``b`` shaped like ``A.shape[:-1]`` is a
batch of vectors, ``(..., n, k)`` a batch of k-column matrices, ``(n,)`` one
vector for all), LAPACK's ``info`` turned into a ``LinAlgError`` that names
the failing batch indices, and the device's shared-memory limit.  TRSV, LU,
Cholesky, QR and the SVD drivers all use these, so they behave alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _arrays as ar
from .._batch import MatrixBatch


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def rhs_shape(A_shape, B_shape, b_name):
    """(batch, n, k, vectors): the rule of DESIGN.md for right-hand sides.

    ``n`` is ``A_shape[-2]`` (the rows of A: the length of b in ``A x = b``),
    ``batch`` the broadcast of A's and B's batch dimensions.
    """
    n = A_shape[-2]
    if len(B_shape) == 0:
        raise ValueError(f"{b_name} must have shape (..., n) or (..., n, k), got shape {B_shape}")
    vectors = len(B_shape) == 1 or tuple(B_shape) == tuple(A_shape[:-1])
    rows = B_shape[-1] if vectors else B_shape[-2]
    if rows != n:
        form = "(n,) or A.shape[:-1]" if vectors else "(..., n, k)"
        raise ValueError(f"{b_name} has shape {tuple(B_shape)} but A has shape {tuple(A_shape)}: "
                         f"{b_name} read as {form} needs n = {n} rows")
    b_batch = () if len(B_shape) == 1 else tuple(B_shape[:-1] if vectors else B_shape[:-2])
    try:
        batch = np.broadcast_shapes(tuple(A_shape[:-2]), b_batch)
    except ValueError:
        raise ValueError(f"batch dimensions of A {tuple(A_shape)} and {b_name} {tuple(B_shape)} "
                         "do not broadcast") from None
    return batch, n, (1 if vectors else B_shape[-1]), vectors


def rhs_list(B, batch: MatrixBatch, b_name):
    """(members as (n_i, k) arrays, k, vectors, dtype) for a list batch of matrices.

    ``B``: a list of (n_i,) or (n_i, k) arrays, an array (count, n) or
    (count, n, k), or one 1-D array for every matrix; n_i is the rows of A[i].
    """
    count, ns = batch.count, [r for r, _ in batch.shapes]
    if isinstance(B, (list, tuple)):
        if len(B) != count:
            raise ValueError(f"{b_name} has {len(B)} members but A has {count} matrices")
        members = [ar.as_array(v, f"{b_name}[{i}]")[0] for i, v in enumerate(B)]
    else:
        arr = ar.as_array(B, b_name)[0]
        if arr.ndim == 1:
            members = [arr] * count
        elif arr.ndim in (2, 3) and arr.shape[0] == count:
            members = [arr[i] for i in range(count)]
        else:
            raise ValueError(f"{b_name} must be a list of {count} arrays, an array ({count}, n) or "
                             f"({count}, n, k), or one 1-D array; got shape {arr.shape}")
    named = {f"{b_name}[{i}]": v for i, v in enumerate(members)}
    if count and ar.common_backend({"A[0]": batch.arrays_user[0], **named}) is not batch.xp:
        raise ValueError(f"{b_name} must be on the same device as A")
    ndims = {v.ndim for v in members}
    if not ndims <= {1} and not ndims <= {2}:
        raise ValueError(f"{b_name} mixes vectors and matrices (ndims {sorted(ndims)})")
    vectors = ndims <= {1}
    ks = {1 if vectors else v.shape[1] for v in members}
    if len(ks) > 1:
        raise ValueError(f"every member of {b_name} needs the same number of columns, got {sorted(ks)}")
    k = ks.pop() if ks else 1
    for i, (v, n) in enumerate(zip(members, ns)):
        ar.check_dtype(v, f"{b_name}[{i}]")
        if v.shape[0] != n:
            raise ValueError(f"{b_name}[{i}] has shape {v.shape}, expected {n} rows for A[{i}] of shape "
                             f"{batch.shapes[i]}")
    dtype = ar.result_dtype(named) if members else batch.dtype
    return [v if v.ndim == 2 else v[:, None] for v in members], k, vectors, dtype


def rhs_rows(B, batch: MatrixBatch, b_name):
    """``B`` given as ONE array (count, n) or (count, n, k) for a list batch whose
    matrices all have n rows: ``(array viewed as (count, n, k), k, vectors)``,
    checked as a whole, with no per-member Python work.  None for every other
    form of ``B`` (then :func:`rhs_list` validates and reports)."""
    if isinstance(B, (list, tuple)) or not batch.count:
        return None
    arr = ar.as_array(B, b_name)[0]
    rows = {r for r, _ in batch.shapes}
    if arr.ndim not in (2, 3) or arr.shape[0] != batch.count or rows != {arr.shape[1]}:
        return None
    if ar.common_backend({"A[0]": batch.arrays_user[0], b_name: arr}) is not batch.xp:
        raise ValueError(f"{b_name} must be on the same device as A")
    ar.check_dtype(arr, b_name)
    vectors = arr.ndim == 2
    return (arr[..., None] if vectors else arr), (1 if vectors else arr.shape[2]), vectors


@dataclass(frozen=True)
class Failure:
    """How a solver words LAPACK's info > 0: ``what`` (the error's opening),
    ``cause`` (what the failing matrices have) and ``info`` (what the info value
    counts: by default the 1-based column where the failure occurred)."""

    what: str
    cause: str
    info: str = "1-based column"


SINGULAR = Failure("singular matrix", "an exactly zero diagonal entry")


def host_info(info) -> np.ndarray:
    """info on the host (synchronizes for a CuPy array)."""
    return np.asarray(info.get() if hasattr(info, "get") else info)


def any_failed(info) -> bool:
    """Has some matrix info > 0?  For CuPy info one reduction on the device and
    its one value back (a synchronization), not the whole array: copying a
    3.4 M-matrix batch's info and scanning it on the host took milliseconds
    after a kernel of one."""
    if not hasattr(info, "max"):  # a list or a scalar
        info = np.asarray(info)
    if info.size == 0:
        return False
    return bool(info.max() > 0)


def raise_if_failed(info, failure: Failure = SINGULAR) -> None:
    """LinAlgError naming every batch index with info > 0 (synchronizes for CuPy
    info; the array comes to the host only when some matrix failed)."""
    if not any_failed(info):
        return
    host = host_info(info)
    bad = np.argwhere(host > 0)
    cols = [int(host[tuple(i)]) for i in bad]
    if host.ndim == 0:
        raise np.linalg.LinAlgError(f"{failure.what}: {failure.cause} ({failure.info} {cols[0]})")
    where = [int(i[0]) for i in bad] if host.ndim == 1 else [tuple(int(v) for v in i) for i in bad]
    raise np.linalg.LinAlgError(f"{failure.what}: batch indices {where} have {failure.cause} "
                                f"({failure.info} per index: {cols})")


_SMEM_LIMIT: dict[int, int] = {}


def smem_limit() -> int:
    """The device's opt-in shared memory per block (227 KiB on H100), once per device."""
    from cupy_backends.cuda.api import runtime

    dev = runtime.getDevice()
    if dev not in _SMEM_LIMIT:
        _SMEM_LIMIT[dev] = int(runtime.deviceGetAttribute(runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, dev))
    return _SMEM_LIMIT[dev]
