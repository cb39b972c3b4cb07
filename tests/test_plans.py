"""Launch plans: a repeated call with the same signature replays the kept launch.

The replay replaces only the operand pointers and the scalars, so these tests
call twice with different data of one signature and check both answers (a
replay that kept a stale pointer reads the first call's data), change the
scalars, pass ``out=`` (also overlapping an input, which must leave the plan),
and check that a call needing a temporary copy keeps no plan.
"""

from __future__ import annotations

import numpy as np
import pytest

import batched as bt
from batched import _plans as plans
from conftest import nan_like_out, requires_gpu, rng_for, to_np, to_xp
from residuals import gemm_error_ratio, gemv_error_ratio
from strategies import random_array

pytestmark = requires_gpu
THRESHOLD = 30


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
@pytest.mark.parametrize("trans", "NC")
def test_gemv_replay_uses_each_calls_operands_and_scalars(dtype, trans):
    import cupy as cp

    plans.clear()
    rng = rng_for("plan-gemv", str(np.dtype(dtype)), trans)
    scalars = [(1.0, 0.0), (-2.5, 0.0), (0.5, 1.5), (0.5, 1.5)]
    for call, (alpha, beta) in enumerate(scalars):
        A = random_array(rng, (6, 9, 5), dtype)
        x = random_array(rng, (6, 9 if trans != "N" else 5), dtype)
        y = random_array(rng, (6, 5 if trans != "N" else 9), dtype)
        out = nan_like_out(cp, y.shape, dtype) if call == 3 else None
        got = bt.gemv(to_xp(cp, A), to_xp(cp, x), to_xp(cp, y), alpha=alpha, beta=beta, trans=trans, out=out)
        assert out is None or got is out
        assert gemv_error_ratio(to_np(got), A, x, y, alpha, beta, trans) < THRESHOLD, call
    assert plans._plans, "no plan was kept for plain CuPy calls"


def test_gemv_replay_with_out_overlapping_x_takes_the_full_path():
    import cupy as cp

    plans.clear()
    rng = rng_for("plan-overlap")
    A = random_array(rng, (4, 7, 7), np.float64)
    for _ in range(2):  # the second call finds the plan of the first signature
        x = random_array(rng, (4, 7), np.float64)
        xd = to_xp(cp, x)
        bt.gemv(to_xp(cp, A), xd, out=cp.empty((4, 7)))
        got = bt.gemv(to_xp(cp, A), xd, out=xd)  # out is x: computed privately, then copied
        assert gemv_error_ratio(to_np(got), A, x, None, 1.0, 0.0, "N") < THRESHOLD


def test_a_call_that_copies_an_operand_keeps_no_plan():
    import cupy as cp

    plans.clear()
    rng = rng_for("plan-copy")
    A = random_array(rng, (3, 6, 6), np.float32)
    x = random_array(rng, (3, 6), np.float64)  # promoted: A is converted to float64 first
    for _ in range(2):
        got = bt.gemv(to_xp(cp, A), to_xp(cp, x))
        assert gemv_error_ratio(to_np(got), A, x, None, 1.0, 0.0, "N") < THRESHOLD
    assert not plans._plans


@pytest.mark.parametrize("transa,transb", [("N", "N"), ("T", "C")])
def test_gemm_replay_uses_each_calls_operands_and_scalars(transa, transb):
    import cupy as cp

    plans.clear()
    rng = rng_for("plan-gemm", transa, transb)
    for call, (alpha, beta) in enumerate([(1.0, 0.0), (2.0, 0.0), (1.0, -1.0), (1.0, -1.0)]):
        A = random_array(rng, (5, 8, 8), np.complex128)
        B = random_array(rng, (5, 8, 8), np.complex128)
        C = random_array(rng, (5, 8, 8), np.complex128)
        out = nan_like_out(cp, C.shape, np.complex128) if call == 3 else None
        got = bt.gemm(to_xp(cp, A), to_xp(cp, B), to_xp(cp, C), alpha=alpha, beta=beta,
                      transa=transa, transb=transb, out=out)
        assert gemm_error_ratio(to_np(got), A, B, C, alpha, beta, transa, transb) < THRESHOLD, call
    assert plans._plans


def test_non_finite_alpha_still_raises_after_a_plan_exists():
    import cupy as cp

    plans.clear()
    A, x = cp.ones((2, 3, 3)), cp.ones((2, 3))
    bt.gemv(A, x, alpha=2.0)
    with pytest.raises(ValueError, match="alpha"):
        bt.gemv(A, x, alpha=float("inf"))
    with pytest.raises(TypeError):
        bt.gemv(A, x, alpha=1j)
