"""Uniform-batch operands: broadcasting, strides and the copies they may need.

Every stacked operand is broadcast to the batch shape (no copy: stride 0) and
described by one batch stride plus its per-matrix (or per-vector) strides.  An
operand whose strides the kernels cannot express (no unit stride inside a
matrix, or batch dimensions that do not collapse to one stride) is copied
once; that is the only copy a uniform call makes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._arrays import FLIP, batch_stride, elem_strides, matrix_orientation


@dataclass
class MatrixOperand:
    arr: object        # the array the kernel reads (kept alive until launch)
    base: int          # device pointer of element (0, 0) of matrix 0
    stride: int        # elements between consecutive matrices (0: broadcast)
    rows: int          # column-major view: element (i, j) at base + i + j*ld
    cols: int
    ld: int
    transposed: bool   # the view is the transpose of the user's matrix

    def view_op(self, op: str) -> str:
        """The operation to apply to the column-major view to get op(user's matrix)."""
        return FLIP[op] if self.transposed else op


@dataclass
class VectorOperand:
    arr: object
    base: int
    stride: int
    inc: int


def _broadcast(arr, shape, xp):
    return arr if tuple(arr.shape) == tuple(shape) else xp.broadcast_to(arr, shape)


def matrix_operand(arr, batch_shape, xp, prefer: str = "F") -> MatrixOperand:
    """``prefer``: the orientation a matrix with one row or column is read in."""
    m, n = arr.shape[-2:]
    arr = _broadcast(arr, (*batch_shape, m, n), xp)
    # No element is read or written, and CuPy gives empty arrays (and their
    # contiguous copies) strides no batch stride may fit: any accessor will do.
    if 0 in tuple(batch_shape) or m * n == 0:
        return MatrixOperand(arr, arr.data.ptr, 0, m, n, max(m, 1), False)
    strides = elem_strides(arr)
    orient = stride = None
    if strides is not None:
        orient = matrix_orientation((m, n), strides[-2:], prefer)
        stride = batch_stride(batch_shape, strides[:-2])
    if orient is None or stride is None:
        arr = xp.ascontiguousarray(arr)
        strides = elem_strides(arr)
        orient = matrix_orientation((m, n), strides[-2:], prefer)
        stride = batch_stride(batch_shape, strides[:-2])
    order, ld = orient
    if order == "F":
        return MatrixOperand(arr, arr.data.ptr, stride, m, n, ld, False)
    return MatrixOperand(arr, arr.data.ptr, stride, n, m, ld, True)


def vector_operand(arr, batch_shape, xp) -> VectorOperand:
    length = arr.shape[-1]
    arr = _broadcast(arr, (*batch_shape, length), xp)
    if 0 in tuple(batch_shape) or length == 0:  # empty: as in matrix_operand
        return VectorOperand(arr, arr.data.ptr, 0, 1)
    strides = elem_strides(arr)
    stride = batch_stride(batch_shape, strides[:-1]) if strides is not None else None
    if stride is None:
        arr = xp.ascontiguousarray(arr)
        strides = elem_strides(arr)
        stride = batch_stride(batch_shape, strides[:-1])
    inc = strides[-1] if length > 1 else 1
    return VectorOperand(arr, arr.data.ptr, stride, inc)


def overlaps(xp, a, others) -> bool:
    return any(o is not None and xp.may_share_memory(a, o) for o in others)


def writable_directly(out, batch_shape, core_ndim: int) -> bool:
    """Can the kernel write ``out`` in place: collapsible batch and distinct elements."""
    strides = elem_strides(out)
    if strides is None:
        return False
    stride = batch_stride(batch_shape, strides[:-core_ndim])
    count = 1
    for d in batch_shape:
        count *= d
    if stride is None or (stride == 0 and count > 1):
        return False
    core = out.shape[-core_ndim:]
    if core_ndim == 1:
        return core[0] <= 1 or strides[-1] != 0
    orient = matrix_orientation(core, strides[-2:])
    return orient is not None and (min(core) <= 1 or orient[1] >= (core[0] if orient[0] == "F" else core[1]))


def _span(a):
    """[first byte, last byte] an array can touch."""
    lo = hi = a.data.ptr
    for size, st in zip(a.shape, a.strides):
        if size > 1:
            if st > 0:
                hi += (size - 1) * st
            else:
                lo += (size - 1) * st
    return lo, hi + a.dtype.itemsize


def lists_overlap(outs, ins) -> bool:
    """Does any array of ``outs`` share memory with any of ``ins`` (by address
    span, which may report overlap for interleaved but disjoint arrays: the
    caller then computes into a private buffer, which is always correct).
    O((n + m) log m), so large list batches stay cheap."""
    import bisect

    spans = sorted(_span(a) for a in ins if a.size)
    starts = [lo for lo, _ in spans]
    reach, far = [], None  # reach[i]: furthest end among spans[:i+1]
    for _, hi in spans:
        far = hi if far is None else max(far, hi)
        reach.append(far)
    for o in outs:
        if not o.size:
            continue
        lo, hi = _span(o)
        i = bisect.bisect_left(starts, hi) - 1  # spans starting before o ends
        if i >= 0 and reach[i] > lo:
            return True
    return False
