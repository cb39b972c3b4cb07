"""Operands whose elements are not aligned to their size.

A complex128 array viewed 8 bytes into a float64 buffer (or float64 4 bytes
into a float32 one) is a valid CuPy array, but a kernel that loads an element
with one instruction of its size faults on it and the CUDA context is lost.
Every routine must instead read such an input through an aligned copy and
write such an ``out`` byte by byte, with the same result as for aligned
operands.  The NumPy backend copes with unaligned arrays itself and runs the
same cases.
"""

from __future__ import annotations

import numpy as np
import pytest

import batched as bt
from batched import _arrays as ar
from conftest import rng_for, to_np
from strategies import random_array

# (dtype, byte shift that breaks its alignment)
SHIFTS = [("complex128", 8), ("float64", 4), ("complex64", 4), ("float32", 2)]


class Shifted:
    """A C-contiguous array placed ``shift`` bytes past an aligned address of a byte
    buffer on the backend ``xp`` (the buffer is kept alive here)."""

    def __init__(self, xp, host, shift):
        host = np.ascontiguousarray(host)
        self.shape, self.dtype, self.shift = host.shape, host.dtype, shift
        self.nbytes = host.nbytes
        self.buf = xp.zeros(self.nbytes + 32, dtype=np.uint8)
        self.buf[shift:shift + self.nbytes] = xp.asarray(host.view(np.uint8).reshape(-1))
        if xp is np:
            self.arr = np.ndarray(self.shape, self.dtype, buffer=self.buf, offset=shift)
        else:
            self.arr = xp.ndarray(self.shape, self.dtype, memptr=self.buf.data + shift)
            assert ar.misaligned(self.arr)

    def value(self):
        """The array's contents, read through the bytes (CuPy would fault reading it directly)."""
        raw = to_np(self.buf).tobytes()
        return np.frombuffer(raw, self.dtype, count=int(np.prod(self.shape)), offset=self.shift).reshape(self.shape)


def nan_out(xp, shape, dtype, shift):
    return Shifted(xp, np.full(shape, np.nan, dtype=dtype), shift)


def _close(got, ref, dtype):
    eps = np.finfo(np.dtype(dtype)).eps
    got, ref = np.asarray(to_np(got)), np.asarray(to_np(ref))
    assert got.shape == ref.shape
    assert np.all(np.isfinite(got))
    scale = max(1.0, float(np.max(np.abs(ref), initial=0)))
    assert np.max(np.abs(got - ref), initial=0) <= 64 * eps * scale


@pytest.mark.parametrize("dtype, shift", SHIFTS)
@pytest.mark.parametrize("trans", ["N", "C"])
def test_gemv_misaligned_operands_and_out(xp, dtype, shift, trans):
    rng = rng_for("gemv", dtype, shift, trans)
    A = random_array(rng, (37, 9, 7), dtype)
    x = random_array(rng, (37, 7 if trans == "N" else 9), dtype)
    y = random_array(rng, (37, 9 if trans == "N" else 7), dtype)
    sA, sx, sy = Shifted(xp, A, shift), Shifted(xp, x, shift), Shifted(xp, y, shift)
    out = nan_out(xp, y.shape, dtype, shift)
    got = bt.gemv(sA.arr, sx.arr, sy.arr, alpha=1.5, beta=0.5, trans=trans, out=out.arr)
    assert got is out.arr
    ref = bt.gemv(xp.asarray(A), xp.asarray(x), xp.asarray(y), alpha=1.5, beta=0.5, trans=trans)
    _close(out.value(), ref, dtype)
    _close(sA.value(), A, dtype)  # inputs untouched
    # A's transposed view: misaligned and not C-contiguous.  Twice: a repeated
    # call must not replay a launch plan made on the aligned copies.
    v, sv = (x, sx) if trans == "N" else (y, sy)
    ref = bt.gemv(xp.asarray(A).swapaxes(1, 2), xp.asarray(v), trans="T")
    for _ in range(2):
        _close(bt.gemv(sA.arr.swapaxes(1, 2), sv.arr, trans="T"), ref, dtype)


@pytest.mark.parametrize("dtype, shift", SHIFTS)
def test_gemm_misaligned_operands_and_out(xp, dtype, shift):
    rng = rng_for("gemm", dtype, shift)
    A, B, C = random_array(rng, (21, 6, 5), dtype), random_array(rng, (21, 5, 4), dtype), random_array(rng, (21, 6, 4), dtype)
    sA, sB, sC = Shifted(xp, A, shift), Shifted(xp, B, shift), Shifted(xp, C, shift)
    out = nan_out(xp, C.shape, dtype, shift)
    got = bt.gemm(sA.arr, sB.arr, sC.arr, alpha=2, beta=-1, out=out.arr)
    assert got is out.arr
    ref = bt.gemm(xp.asarray(A), xp.asarray(B), xp.asarray(C), alpha=2, beta=-1)
    _close(out.value(), ref, dtype)
    for _ in range(2):  # no launch plan made on the aligned copies may replay
        _close(bt.gemm(sA.arr, sB.arr), bt.gemm(xp.asarray(A), xp.asarray(B)), dtype)


@pytest.mark.parametrize("dtype, shift", SHIFTS)
def test_list_calls_with_misaligned_members_and_outs(xp, dtype, shift):
    rng = rng_for("lists", dtype, shift)
    shapes = [(3, 4), (5, 2), (1, 6), (4, 4)]
    As = [random_array(rng, s, dtype) for s in shapes]
    xs = [random_array(rng, (s[1],), dtype) for s in shapes]
    sAs = [Shifted(xp, a, shift) for a in As]
    sxs = [Shifted(xp, v, shift) for v in xs]
    outs = [nan_out(xp, (s[0],), dtype, shift) for s in shapes]
    got = bt.gemv([s.arr for s in sAs], [s.arr for s in sxs], out=[o.arr for o in outs])
    ref = bt.gemv([xp.asarray(a) for a in As], [xp.asarray(v) for v in xs])
    assert len(got) == len(shapes)
    for o, r in zip(outs, ref):
        _close(o.value(), r, dtype)

    Bs = [random_array(rng, (s[1], 3), dtype) for s in shapes]
    sBs = [Shifted(xp, b, shift) for b in Bs]
    mouts = [nan_out(xp, (s[0], 3), dtype, shift) for s in shapes]
    bt.gemm([s.arr for s in sAs], [s.arr for s in sBs], out=[o.arr for o in mouts])
    mref = bt.gemm([xp.asarray(a) for a in As], [xp.asarray(b) for b in Bs])
    for o, r in zip(mouts, mref):
        _close(o.value(), r, dtype)


@pytest.mark.parametrize("dtype, shift", SHIFTS)
def test_solvers_and_reductions_read_misaligned_inputs(xp, dtype, shift):
    rng = rng_for("solvers", dtype, shift)
    n = 6
    A = random_array(rng, (11, n, n), dtype) + 4 * np.eye(n, dtype=dtype)
    b = random_array(rng, (11, n), dtype)
    spd = (A @ np.conj(A.swapaxes(1, 2)) + n * np.eye(n)).astype(dtype)
    sA, sb, sspd = Shifted(xp, A, shift), Shifted(xp, b, shift), Shifted(xp, spd, shift)
    dA, db, dspd = xp.asarray(A), xp.asarray(b), xp.asarray(spd)
    _close(bt.solve(sA.arr, sb.arr), bt.solve(dA, db), dtype)
    _close(bt.solve_triangular(sA.arr, sb.arr, lower=True), bt.solve_triangular(dA, db, lower=True), dtype)
    _close(bt.cholesky(sspd.arr), bt.cholesky(dspd), dtype)
    _close(bt.svdvals(sA.arr), bt.svdvals(dA), dtype)
    _close(bt.nrm2(sb.arr), bt.nrm2(db), dtype)
    _close(sA.value(), A, dtype)


@pytest.mark.parametrize("dtype, shift", SHIFTS)
def test_kblas_gemv_misaligned_matrix_and_out(xp, dtype, shift):
    rng = rng_for("kblas", dtype, shift)
    A, x = random_array(rng, (70, 45), dtype), random_array(rng, (45,), dtype)
    sA, sx = Shifted(xp, A, shift), Shifted(xp, x, shift)
    out = nan_out(xp, (70,), dtype, shift)
    got = bt.kblas.gemv(sA.arr, sx.arr, out=out.arr)
    assert got is out.arr
    _close(out.value(), bt.kblas.gemv(xp.asarray(A), xp.asarray(x)), dtype)


@pytest.mark.parametrize("dtype, shift", SHIFTS)
def test_distributed_gemv_symv_misaligned_out(xp, dtype, shift):
    """A DistributedMatrix (GPU 0, or two host blocks) into a misaligned ``out``: on the
    GPU the reduction kernel's result is written back byte by byte."""
    rng = rng_for("mgpu-out", dtype, shift)
    n = 70
    A, x = random_array(rng, (n, n), dtype), random_array(rng, (n,), dtype)
    D = bt.kblas.distribute(A, devices=2, nb=8) if xp is np else bt.kblas.distribute(xp.asarray(A), devices=[0],
                                                                                       nb=32)
    sx = Shifted(xp, x, shift)
    for fn in (bt.kblas.gemv, bt.kblas.symv):
        out = nan_out(xp, (n,), dtype, shift)
        got = fn(D, sx.arr, out=out.arr)
        assert got is out.arr
        _close(out.value(), fn(xp.asarray(A), xp.asarray(x)), dtype)


@pytest.mark.parametrize("dtype, shift", SHIFTS)
def test_aligned_and_assign_round_trip(xp, dtype, shift):
    """The helpers themselves: a misaligned strided view copied out and written back."""
    rng = rng_for("helpers", dtype, shift)
    host = random_array(rng, (4, 6, 5), dtype)
    s = Shifted(xp, host, shift)
    view = s.arr[:, ::2, ::-1]
    copy = ar.aligned(view)
    assert not ar.misaligned(copy)
    np.testing.assert_array_equal(to_np(copy), host[:, ::2, ::-1])
    ar.assign(view, xp.asarray(host[:, ::2, ::-1] * 2))
    expect = host.copy()
    expect[:, ::2, ::-1] *= 2
    np.testing.assert_array_equal(s.value(), expect)
