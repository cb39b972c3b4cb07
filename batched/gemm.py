"""Batched GEMM: C_b = alpha * op(A_b) op(B_b) + beta * C_b (launcher and CPU backend)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from . import _arrays as ar
from . import _launch as ln
from . import _plans as plans
from ._batch import MatrixBatch, VariableBatch
from ._operands import lists_overlap, matrix_operand, overlaps, writable_directly
from .device_functions import build
from .settings import GEMM_SETTINGS, GemmSetting, check_setting, choose_gemm_setting, multiprocessor_count

SOURCE = Path(__file__).with_name("gemm.cu")

# Launch flags of gemm.cu.
_READ_C, _SKIP_PRODUCT = 1, 2


def kernel_name(layout: str, dtype, setting: GemmSetting) -> str:
    mat = ln.accessor_type(ln.LAYOUT_ACCESSORS[layout][0], dtype)
    return f"gemm_kernel<{mat}, {mat}, {mat}, {setting.template_args()}>"


build.register(SOURCE, [kernel_name(layout, dt, s) for layout in ln.LAYOUT_ACCESSORS
                        for s in GEMM_SETTINGS for dt in s.dtypes(ar.SUPPORTED_DTYPES)])


def _roles(a_view_op, b_view_op, a, b, target_transposed):
    """(X, op X, Y, op Y) with target view = op(X) op(Y).

    ``a_view_op`` maps the user's op to A's column-major view (likewise B).  A
    row-major target is computed as its transpose: out^T = op(B)^T op(A)^T.
    """
    if not target_transposed:
        return a, a_view_op("N"), b, b_view_op("N")
    return b, b_view_op("T"), a, a_view_op("T")


def gemm(A, B, C=None, *, alpha=1.0, beta=0.0, transa="N", transb="N", out=None, setting=None):
    """Batched matrix product ``alpha * op(A) @ op(B) + beta * C``.

    Parameters
    ----------
    A : array_like, shape (..., m, k) after op, or a list of 2-D arrays, or a
        :class:`PointerBatch` / :class:`VariableBatch`
    B : array_like, shape (..., k, n) after op (batch dimensions broadcast with
        A's like ``numpy.matmul``), or a list / batch object matching A
    C : array_like, optional
        Added as ``beta * C``; broadcast to the result.  Never read when
        ``beta == 0``, never written.
    alpha, beta : scalar
        Finite; complex only with complex operands.
    transa, transb : {'N', 'T', 'C'}
        op(X) = X, X^T or X^H (case-insensitive).
    out : array, optional
        Receives the result (exact shape and dtype); may be ``C`` itself.
    setting : GemmSetting, optional
        Force a kernel setting (GPU); default chosen by shape.

    Returns
    -------
    out : array of shape (..., m, n); a list for list input.

    Raises
    ------
    TypeError, ValueError
        Bad dtypes, shapes, letters or scalars, before any work; ``out`` untouched.

    See Also
    --------
    numpy.matmul, cupy.matmul

    Notes
    -----
    CuPy arrays run on the current stream without synchronizing; NumPy arrays
    run on the CPU backend.  A new result is C-contiguous.
    """
    check_setting(setting, GemmSetting, GEMM_SETTINGS)
    opa, opb = ar.parse_op(transa, "transa"), ar.parse_op(transb, "transb")
    if isinstance(A, (list, tuple, MatrixBatch)) or isinstance(B, (list, tuple, MatrixBatch)):
        return _gemm_list(A, B, C, alpha, beta, opa, opb, out, setting)
    key, done = plans.try_replay(("gemm", opa, opb, setting), (A, B), C, out, alpha, beta)
    if done is not None:
        return done
    given = (A, B, C)  # a plan is kept only on these (plans.record)

    A, B, C, out, xp, dtype, alpha, beta = ar.blas_operands(A, B, C, out, alpha, beta, ("A", "B", "C"))
    for name, arr in (("A", A), ("B", B)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (..., rows, cols), got shape {arr.shape}")
    m, k = A.shape[-2:] if opa == "N" else A.shape[-2:][::-1]
    kb, n = B.shape[-2:] if opb == "N" else B.shape[-2:][::-1]
    if k != kb:
        raise ValueError(f"op(A) is {m}x{k} but op(B) is {kb}x{n}: inner dimensions differ "
                         f"(A {A.shape}, transa={opa!r}; B {B.shape}, transb={opb!r})")
    try:
        batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except ValueError:
        raise ValueError(f"batch dimensions of A {A.shape} and B {B.shape} do not broadcast") from None
    shape = (*batch, m, n)
    ar.check_result_operands(C, "C", out, shape, dtype)
    read_c = C is not None and beta != 0

    if xp is np:
        result = _gemm_numpy(A.astype(dtype, copy=False), B.astype(dtype, copy=False),
                             C.astype(dtype, copy=False) if read_c else None, alpha, beta, opa, opb, shape)
        if out is None:
            return result
        out[...] = result
        return out

    count = math.prod(batch)
    target = out
    if out is None or not writable_directly(out, batch, 2) or overlaps(xp, out, (A, B)) or (
            read_c and out is not C and overlaps(xp, out, (C,))):
        target = xp.empty(shape, dtype)
    if count and m and n:
        t = matrix_operand(target, batch, xp)
        a = matrix_operand(ar.astype_exact(A, dtype, xp), batch, xp)
        b = matrix_operand(ar.astype_exact(B, dtype, xp), batch, xp)
        x, opx, y, opy = _roles(lambda f: a.view_op(_compose(f, opa)), lambda f: b.view_op(_compose(f, opb)),
                                a, b, t.transposed)
        empty = ln.pack("UniformMatrix", 0, 0, 1, 0, 0)
        c = empty
        if read_c:
            cm = xp.broadcast_to(ar.astype_exact(C, dtype, xp), shape)
            prefer = "C" if t.transposed else "F"
            co = matrix_operand(cm, batch, xp, prefer)
            if co.transposed != t.transposed:  # C must be read in the target's orientation
                full = xp.broadcast_to(cm, shape)
                cm = (xp.ascontiguousarray(full) if t.transposed else
                      xp.ascontiguousarray(xp.swapaxes(full, -1, -2)).swapaxes(-1, -2))
                co = matrix_operand(cm, batch, xp, prefer)
            c = ln.pack("UniformMatrix", co.base, co.stride, co.ld, co.rows, co.cols)
        skip = alpha == 0 or k == 0
        setting = (setting or choose_gemm_setting(t.rows, t.cols, k, count, multiprocessor_count(),
                                                  dtype)).for_dtype(dtype)
        tm, tn = -(-t.rows // setting.blk_m), -(-t.cols // setting.tile_n(dtype))
        kernel, smem = _kernel_for("uniform", dtype, setting)
        grid, block = (ln.grid_for(count * tm * tn, setting.groups_per_block),), (setting.block_threads,)
        args = (ln.pack("UniformMatrix", x.base, x.stride, x.ld, x.rows, x.cols),
                ln.pack("UniformMatrix", y.base, y.stride, y.ld, y.rows, y.cols), c,
                ln.pack("UniformMatrix", t.base, t.stride, t.ld, t.rows, t.cols),
                np.int32(ar.OP_CODE[opx]), np.int32(ar.OP_CODE[opy]), alpha, beta,
                np.int32((_READ_C if read_c else 0) | (_SKIP_PRODUCT if skip else 0)),
                np.int64(count), np.int32(tm), np.int32(tn))
        kernel(grid, block, args, shared_mem=smem)
        if target is out or out is None:
            plans.record(key, kernel, grid, block, smem, args, (*given, target), (6, 7), shape, dtype)
    if out is not None and target is not out:
        ar.assign(out, target)
        return out
    return target


def _kernel_for(layout: str, dtype, setting: GemmSetting):
    """(kernel, dynamic shared memory in bytes) of a setting, opted in past 48 KiB as
    the other launchers do (no default setting needs it)."""
    kernel = build.get_kernel(SOURCE, kernel_name(layout, dtype, setting))
    smem = setting.smem_bytes(np.dtype(dtype).itemsize)
    if smem > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = smem
    return kernel, smem


def _compose(flip: str, op: str) -> str:
    """op, or the transpose of op when flip == 'T' (op(X)^T as an op on X)."""
    return op if flip == "N" else ar.FLIP[op]


def _gemm_numpy(A, B, C, alpha, beta, opa, opb, shape):
    """CPU backend with BLAS's rules (alpha == 0 or k == 0 never reads A, B)."""
    dtype = np.result_type(A, B)
    k = A.shape[-1] if opa == "N" else A.shape[-2]
    if alpha == 0 or k == 0:
        prod = np.zeros(shape, dtype)
    else:
        prod = np.broadcast_to(alpha * np.matmul(ar.apply_op(A, opa, np), ar.apply_op(B, opb, np)), shape)
    if C is not None:
        return np.ascontiguousarray(prod + beta * C, dtype=dtype)
    return np.array(prod, dtype=dtype)


def _gemm_list(A, B, C, alpha, beta, opa, opb, out, setting):
    """Pointer-array and variable-size products: lists in, list out."""
    a = A if isinstance(A, MatrixBatch) else MatrixBatch.from_list(A, "A")
    b = B if isinstance(B, MatrixBatch) else MatrixBatch.from_list(B, "B")
    if b.count != a.count:
        raise ValueError(f"A has {a.count} matrices but B has {b.count}")
    if a.count and b.xp is not a.xp:
        raise ValueError("A and B must be on the same device")
    shapes = []
    for i, ((ar_, ac), (br, bc)) in enumerate(zip(a.shapes, b.shapes)):
        m, k = (ar_, ac) if opa == "N" else (ac, ar_)
        kb, n = (br, bc) if opb == "N" else (bc, br)
        if k != kb:
            raise ValueError(f"product {i}: op(A[{i}]) is {m}x{k} but op(B[{i}]) is {kb}x{n}")
        shapes.append((m, n))
    c = None
    if C is not None:
        c = C if isinstance(C, MatrixBatch) else MatrixBatch.from_list(C, "C")
        if c.shapes != shapes:
            raise ValueError(f"C must hold {a.count} matrices of the product shapes {shapes[:3]}...")
    dtype = np.result_type(a.dtype, b.dtype, *([c.dtype] if c is not None else []))
    alpha = ar.check_scalar(alpha, "alpha", dtype)
    beta = ar.check_scalar(beta, "beta", dtype)
    outs = None
    if out is not None:
        outs = out if isinstance(out, MatrixBatch) else MatrixBatch.from_list(out, "out")
        if outs.shapes != shapes:
            raise ValueError("out must hold one matrix of each product's shape")
        if any(o.dtype != dtype for o in outs.arrays_user):
            raise TypeError(f"out matrices must have dtype {dtype}")
    read_c = c is not None and beta != 0
    xp = a.xp
    if xp is np:
        results = [_gemm_numpy(ai.astype(dtype, copy=False), bi.astype(dtype, copy=False),
                               c.arrays_user[i].astype(dtype, copy=False) if read_c else None,
                               alpha, beta, opa, opb, shapes[i])
                   for i, (ai, bi) in enumerate(zip(a.arrays_user, b.arrays_user))]
        if outs is None:
            return results
        for o, r in zip(outs.arrays_user, results):
            o[...] = r
        return outs.arrays_user

    a, b = a.astype(dtype), b.astype(dtype)
    direct = outs is not None and all(o is u for o, u in zip(outs.arrays, outs.arrays_user)) and not \
        lists_overlap(outs.arrays, [*a.arrays, *b.arrays, *(c.arrays if read_c else [])])
    target = outs if direct else _allocate_matrices(shapes, dtype, xp)
    if read_c:
        c = c.astype(dtype)
        if c.transposed != target.transposed:
            c = VariableBatch([xp.ascontiguousarray(ci) if target.transposed else xp.asfortranarray(ci)
                               for ci in c.arrays_user], "C")
    count = len(shapes)
    if count and any(m and n for m, n in shapes):
        layout = "variable" if "variable" in (a.layout, b.layout, target.layout,
                                              c.layout if read_c else "pointer") else "pointer"
        x, opx, y, opy = _roles(lambda f: (ar.FLIP[_compose(f, opa)] if a.transposed else _compose(f, opa)),
                                lambda f: (ar.FLIP[_compose(f, opb)] if b.transposed else _compose(f, opb)),
                                a, b, target.transposed)
        ks = [(ac if opa == "N" else ar_) for ar_, ac in a.shapes]
        skip = alpha == 0
        vr = max(r for r, _ in target.view_shapes)
        vc = max(cc for _, cc in target.view_shapes)
        setting = (setting or choose_gemm_setting(vr, vc, max(ks), count, multiprocessor_count(),
                                                  dtype)).for_dtype(dtype)
        tm, tn = -(-vr // setting.blk_m), -(-vc // setting.tile_n(dtype))
        empty = (ln.pack("PointerMatrix", 0, 0, 1, 0, 0) if layout == "pointer"
                 else ln.pack("VariableMatrix", 0, 0, 0, 0))
        kernel, smem = _kernel_for(layout, dtype, setting)
        kernel((ln.grid_for(count * tm * tn, setting.groups_per_block),), (setting.block_threads,),
               (x.struct(layout), y.struct(layout), c.struct(layout) if read_c else empty,
                target.struct(layout), np.int32(ar.OP_CODE[opx]), np.int32(ar.OP_CODE[opy]),
                alpha, beta, np.int32((_READ_C if read_c else 0) | (_SKIP_PRODUCT if skip else 0)),
                np.int64(count), np.int32(tm), np.int32(tn)), shared_mem=smem)
    if outs is not None and target is not outs:
        for o, r in zip(outs.arrays_user, target.arrays_user):
            ar.assign(o, r)
        return outs.arrays_user
    return target.arrays_user


def _allocate_matrices(shapes, dtype, xp) -> MatrixBatch:
    """New C-contiguous results as views of one buffer."""
    sizes = [m * n for m, n in shapes]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    flat = xp.empty(int(offsets[-1]), dtype)
    return MatrixBatch.from_list([flat[int(offsets[i]):int(offsets[i + 1])].reshape(shapes[i])
                                  for i in range(len(shapes))], "out")
