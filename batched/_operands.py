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


def matrix_operand(arr, batch_shape, xp) -> MatrixOperand:
    m, n = arr.shape[-2:]
    arr = _broadcast(arr, (*batch_shape, m, n), xp)
    strides = elem_strides(arr)
    orient = stride = None
    if strides is not None:
        orient = matrix_orientation((m, n), strides[-2:])
        stride = batch_stride(batch_shape, strides[:-2])
    if orient is None or stride is None:
        arr = xp.ascontiguousarray(arr)
        strides = elem_strides(arr)
        orient = matrix_orientation((m, n), strides[-2:])
        stride = batch_stride(batch_shape, strides[:-2])
    order, ld = orient
    if order == "F":
        return MatrixOperand(arr, arr.data.ptr, stride, m, n, ld, False)
    return MatrixOperand(arr, arr.data.ptr, stride, n, m, ld, True)


def vector_operand(arr, batch_shape, xp) -> VectorOperand:
    length = arr.shape[-1]
    arr = _broadcast(arr, (*batch_shape, length), xp)
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
