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
from strategies import random_array, triangle_with_nan

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


def test_replays_from_many_threads_keep_their_own_operands_and_scalars():
    """Eight threads replay one GEMM plan at once, each call on its own operands, alpha
    and NaN-filled out: a launch given another thread's pointers or scalars (the kept
    launch's argument buffer is shared, see batched._launch.PackedLaunch) leaves an out
    unwritten or wrong."""
    import threading

    import cupy as cp

    plans.clear()
    rng = rng_for("plan-threads")
    threads, calls = 8, 24
    A = [random_array(rng, (3, 8, 8), np.float64) for _ in range(threads)]
    B = [random_array(rng, (3, 8, 8), np.float64) for _ in range(threads)]
    outs = [[nan_like_out(cp, (3, 8, 8), np.float64) for _ in range(calls)] for _ in range(threads)]
    alpha = lambda t, i: 1.0 + t + i / 32  # noqa: E731
    bt.gemm(to_xp(cp, A[0]), to_xp(cp, B[0]), out=cp.empty((3, 8, 8)))  # keeps the plan
    assert plans._plans
    start = threading.Barrier(threads)
    failed = []

    def work(t):
        try:
            a, b = to_xp(cp, A[t]), to_xp(cp, B[t])
            start.wait()
            for i in range(calls):
                bt.gemm(a, b, alpha=alpha(t, i), out=outs[t][i])
            cp.cuda.get_current_stream().synchronize()
        except Exception as e:  # noqa: BLE001 (reported below)
            failed.append(e)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failed, failed
    cp.cuda.Device().synchronize()
    for t in range(threads):
        for i in range(calls):
            got = to_np(outs[t][i])
            assert gemm_error_ratio(got, A[t], B[t], None, alpha(t, i), 0.0, "N", "N") < THRESHOLD, (t, i)


def test_non_finite_alpha_still_raises_after_a_plan_exists():
    import cupy as cp

    plans.clear()
    A, x = cp.ones((2, 3, 3)), cp.ones((2, 3))
    bt.gemv(A, x, alpha=2.0)
    with pytest.raises(ValueError, match="alpha"):
        bt.gemv(A, x, alpha=float("inf"))
    with pytest.raises(TypeError):
        bt.gemv(A, x, alpha=1j)


# Scalars that are not zero as Python numbers but are in the operands' precision
# (1e-50 in float32 / complex64): the launch flags follow the converted value, so a
# plan made with one must not serve a call with a normal value, nor the other way
# round.  Before the fix a replay dropped beta * y (or alpha * A x) of the next call.
TINY = 1e-50


@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=str)
@pytest.mark.parametrize("routine", ["gemv", "gemm"])
@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_replay_follows_scalars_that_underflow_in_the_operands_precision(dtype, routine, which):
    import cupy as cp

    rng = rng_for("plan-tiny", str(np.dtype(dtype)), routine, which)
    A = random_array(rng, (4, 6, 6), dtype)
    B = random_array(rng, (4, 6) if routine == "gemv" else (4, 6, 6), dtype)
    nan_y = np.full(B.shape, np.nan, dtype)
    normal = {"alpha": 1.5, "beta": -0.5}
    tiny = dict(normal, **{which: TINY})
    # the tiny value is zero in the operands' precision: the operand it scales is not read
    # (NaN there must not show), in either order of the plan's first and second use.
    for first, second in ((tiny, normal), (normal, tiny), (tiny, normal)):
        plans.clear()
        for scalars in (first, second, second):
            C = nan_y if scalars is tiny and which == "beta" else random_array(rng, B.shape, dtype)
            A_in = np.full(A.shape, np.nan, dtype) if scalars is tiny and which == "alpha" else A
            call = bt.gemv if routine == "gemv" else bt.gemm
            got = to_np(call(to_xp(cp, A_in), to_xp(cp, B), to_xp(cp, C), **scalars))
            alpha = 0.0 if scalars is tiny and which == "alpha" else scalars["alpha"]
            beta = 0.0 if scalars is tiny and which == "beta" else scalars["beta"]
            ratio = (gemv_error_ratio(got, A_in, B, C, alpha, beta, "N") if routine == "gemv"
                     else gemm_error_ratio(got, A_in, B, C, alpha, beta, "N", "N"))
            assert ratio < THRESHOLD, (first, second, scalars)
        assert plans._plans, "no plan was kept"


@pytest.mark.parametrize("setting", [s for s in bt.GEMV_SETTINGS if s.tall], ids=str)
def test_gemv_replay_on_a_differently_aligned_view_writes_every_row(setting):
    """Tall tiles start each matrix's rows at its 128-byte row origin: a plan made on
    aligned matrices must not serve views one element further on (one tile short)."""
    import cupy as cp

    plans.clear()
    rows = setting.tall_rows(8) - 8  # one row tile at offset 0, two at offset 12 (12 + rows > a tile)
    rng = rng_for("plan-align", str(setting))
    x = random_array(rng, (2, 16), np.float64)
    for offset in (0, 12, 0, 12):
        A = random_array(rng, (2, 16, rows + 12), np.float64)  # per-matrix column-major, ld = rows + 12
        big = to_xp(cp, A)
        view = cp.swapaxes(big[..., offset:offset + rows], -1, -2)  # (2, rows, 16), matrices 128 k bytes apart
        out = nan_like_out(cp, (2, rows), np.float64)
        got = bt.gemv(view, to_xp(cp, x), out=out, setting=setting)
        ref_A = np.swapaxes(A[..., offset:offset + rows], -1, -2)
        assert gemv_error_ratio(to_np(got), ref_A, x, None, 1.0, 0.0, "N") < THRESHOLD, offset


# --- batched.kblas: a repeated single-matrix call runs its kept recipe ------------------

KBLAS_CASES = [("gemv", "N", np.float64), ("gemv", "T", np.float32), ("gemv", "C", np.complex128),
               ("symv", True, np.float64), ("hemv", False, np.complex64)]


def _kblas_call(routine, letter, A, x, y, **kw):
    if routine == "gemv":
        return bt.kblas.gemv(A, x, y, trans=letter, **kw)
    return getattr(bt.kblas, routine)(A, x, y, lower=letter, **kw)


@pytest.mark.parametrize("order", "CF")
@pytest.mark.parametrize("routine, letter, dtype", KBLAS_CASES, ids=str)
def test_kblas_replay_uses_each_calls_operands_and_scalars(routine, letter, dtype, order, monkeypatch):
    """n = 300: several blocks a segment (the workspace and tickets a replay makes
    anew); the other triangle NaN for SYMV/HEMV; calls 2 and 4 replay 1 and 3 (the
    full path validates twice in four calls), the last two into a NaN out."""
    import cupy as cp
    from batched.kblas import _common as cm

    cm.clear_replays()
    validated = []
    full_validate = cm.validate
    monkeypatch.setattr(cm, "validate", lambda *a: validated.append(1) or full_validate(*a))
    rng = rng_for("kblas-replay", routine, str(letter), str(np.dtype(dtype)), order)
    n = 300
    complex_ = np.dtype(dtype).kind == "c"
    # the scalars' types are part of the signature: the replayed pairs share them
    scalars = [(1.0, 0.0), (-2.5, 0.0)] + ([(0.5 + 0.25j, 1.5j), (0.5 - 1j, -0.5j)] if complex_ else
                                           [(0.5, 1.5), (0.7, -1.5)])
    for call, (alpha, beta) in enumerate(scalars):
        if routine == "gemv":
            A = full = random_array(rng, (n, n), dtype)
        else:  # the reference is the whole matrix: op 'N'
            A, full = triangle_with_nan(rng, n, dtype, letter, routine == "hemv")
        A_xp = to_xp(cp, A)
        A_xp = cp.asfortranarray(A_xp) if order == "F" else cp.ascontiguousarray(A_xp)
        x, y = random_array(rng, (n,), dtype), random_array(rng, (n,), dtype)
        out = nan_like_out(cp, (n,), dtype) if call >= 2 else None
        got = _kblas_call(routine, letter, A_xp, to_xp(cp, x), to_xp(cp, y), alpha=alpha, beta=beta, out=out)
        assert out is None or got is out
        ref_op = letter if routine == "gemv" else "N"
        assert gemv_error_ratio(to_np(got), full, x, y, alpha, beta, ref_op) < THRESHOLD, call
    assert len(validated) == 2, "the second and fourth calls did not replay"


def test_kblas_replay_keeps_argument_checks_and_private_results():
    """lower=1 after lower=True (1 == True as a key) still raises; out overlapping x
    after a plain out takes the full path; a converted operand keeps no recipe; a
    replay on another stream uses that stream's tickets."""
    import cupy as cp
    from batched.kblas import _common as cm

    cm.clear_replays()
    rng = rng_for("kblas-replay-checks")
    n = 260
    A = random_array(rng, (n, n), np.float64)
    A = A + A.T
    x = random_array(rng, (n,), np.float64)
    Ad, xd = to_xp(cp, A), to_xp(cp, x)
    bt.kblas.symv(Ad, xd, lower=True)
    bt.kblas.symv(Ad, xd, lower=True)
    with pytest.raises(TypeError, match="lower"):
        bt.kblas.symv(Ad, xd, lower=1)
    bt.kblas.gemv(Ad, xd, out=cp.empty(n))
    x2 = xd.copy()
    got = bt.kblas.gemv(Ad, x2, out=x2)  # out is x: a private result, then copied
    assert got is x2 and gemv_error_ratio(to_np(got), A, x, None, 1.0, 0.0, "N") < THRESHOLD
    cm.clear_replays()
    x32 = x.astype(np.float32)
    for _ in range(2):
        got = bt.kblas.gemv(Ad, to_xp(cp, x32))  # x converted to float64 first
        assert gemv_error_ratio(to_np(got), A, x32.astype(np.float64), None, 1.0, 0.0, "N") < THRESHOLD
    assert not cm._recipes
    bt.kblas.gemv(Ad, xd, trans="T")
    assert cm._recipes
    with cp.cuda.Stream() as s:
        got = bt.kblas.gemv(Ad, xd, trans="T")
        s.synchronize()
    assert gemv_error_ratio(to_np(got), A, x, None, 1.0, 0.0, "T") < THRESHOLD
