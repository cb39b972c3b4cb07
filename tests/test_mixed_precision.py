"""Mixed-precision calls: a float32 / complex64 operand promoted to float64 /
complex128 keeps its subnormal entries.

Each routine called with the narrow operand (subnormal entries planted) and a wide
one gives, bit for bit, what it gives with the narrow operand widened by NumPy
first: on the GPU the promotion goes through ar.astype_exact, since CuPy's own
casts (compiled with -ftz=true) read single-precision subnormals as zeros.  On the
CPU the same comparison checks that the promotion is NumPy's cast.
"""

from __future__ import annotations

import numpy as np
import pytest

import batched as bt
from conftest import rng_for, to_np, to_xp
from strategies import random_array

PAIRS = [(np.float32, np.float64), (np.complex64, np.complex128)]


def _narrow(rng, shape, dtype, shift=0.0):
    """Random float32 / complex64 entries (plus ``shift``) scaled to 16 times the
    smallest normal number, so that many round to subnormals and every one counts in
    the wide result; a few planted subnormals besides."""
    scale = float(np.finfo(dtype).tiny) * 16
    a = ((random_array(rng, shape, np.complex128 if np.dtype(dtype).kind == "c" else np.float64) + shift)
         * scale).astype(dtype)
    tiny = np.finfo(dtype).tiny
    flat = a.reshape(-1)
    flat[1:4] = np.array([tiny / 3, -tiny / 1000, tiny / 2**22], np.float32)
    assert np.any((a.view(np.float32) != 0) & (np.abs(a.view(np.float32)) < tiny))
    return a


def _spd(rng, batch, n, dtype):
    """Hermitian positive definite, scaled as _narrow, with a subnormal off-diagonal pair."""
    M = random_array(rng, (*batch, n, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    tiny = np.finfo(dtype).tiny
    A = ((M @ np.swapaxes(M, -1, -2).conj() + n * np.eye(n)) * (float(tiny) * 16)).astype(dtype)
    A[..., 0, 1] = tiny / 3
    A[..., 1, 0] = np.conj(A[..., 0, 1])
    return A


def _arrays(result):
    """The arrays of a routine's result (a tuple, a list, or one array)."""
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _arrays(r)]
    return [] if result is None or np.isscalar(result) else [to_np(result)]


def _cases(rng, narrow, wide, X):
    """(name, call, narrow operand): call(operand) runs the routine with its wide
    operands made on the backend by X."""
    n = 40
    A = _narrow(rng, (3, n, n), narrow)
    yield "gemv", lambda a: bt.gemv(a, X(random_array(rng_for("x"), (3, n), wide))), A
    yield "gemm", lambda a: bt.gemm(a, X(random_array(rng_for("B"), (3, n, 5), wide))), A
    yield "gesv", lambda a: bt.gesv(a, X(random_array(rng_for("b"), (3, n), wide))), A
    yield "posv", lambda a: bt.posv(a, X(random_array(rng_for("b"), (3, 8), wide))), _spd(rng, (3,), 8, narrow)
    yield "gels", lambda a: bt.gels(a, X(random_array(rng_for("b"), (3, 9), wide))), \
        _narrow(rng, (3, 9, 5), narrow)
    yield "dot", lambda v: bt.dot(v, X(random_array(rng_for("y"), (3, 100), wide))), \
        _narrow(rng, (3, 100), narrow)
    yield "axpy", lambda v: bt.axpy(2.0, v, X(random_array(rng_for("y"), (3, 100), wide))), \
        _narrow(rng, (3, 100), narrow)
    yield "kblas.gemv", lambda a: bt.kblas.gemv(a, X(random_array(rng_for("x"), (300,), wide))), \
        _narrow(rng, (500, 300), narrow)
    if np.dtype(narrow).kind == "f":
        yield "bdsqr", lambda d: bt.bdsqr(d, X(random_array(rng_for("e"), (3, 5), wide))), \
            _narrow(rng, (3, 6), narrow, shift=3.0)


@pytest.mark.gpu
@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_promotion_keeps_single_precision_subnormals(xp, pair):
    narrow, wide = pair
    for name, call, operand in _cases(rng_for("mixed", str(np.dtype(narrow))), narrow, wide,
                                      lambda a: to_xp(xp, a)):
        assert operand.dtype == narrow
        got = _arrays(call(to_xp(xp, operand)))
        want = _arrays(call(to_xp(xp, operand.astype(wide))))
        assert len(got) == len(want) > 0, name
        for g, w in zip(got, want):
            assert g.dtype == w.dtype, name
            np.testing.assert_array_equal(g, w, err_msg=name)
