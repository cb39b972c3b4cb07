"""Batched GEMM against the float64/complex128 reference, on both backends.

One body for NumPy and CuPy (``xp`` fixture), every registered setting forced
plus the default chooser, NaN-poisoned outputs, inputs checked unchanged.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import batched as bt
from conftest import assert_unchanged, nan_like_out, rng_for, snapshot, to_np, to_xp
from residuals import gemm_error_ratio
from strategies import (DTYPES, MIXED_DTYPES, SETTINGS, arrange, gemm_cases, poisoned, random_array,
                        variable_shapes)

SETTINGS_UNDER_TEST = [*bt.GEMM_SETTINGS, None]
THRESHOLD = 30
TRANS_PAIRS = ["".join(p) for p in itertools.product("NTC", repeat=2)]


def stored(shape_after_op, trans):
    """Stored shape of an operand whose op(X) has ``shape_after_op``."""
    r, c = shape_after_op
    return (r, c) if trans.upper() == "N" else (c, r)


def operands(rng, batch_a, batch_b, m, n, k, dtype, transa, transb, batch_c=None):
    A = random_array(rng, (*batch_a, *stored((m, k), transa)), dtype)
    B = random_array(rng, (*batch_b, *stored((k, n), transb)), dtype)
    C = None if batch_c is None else random_array(rng, (*batch_c, m, n), dtype)
    return A, B, C


# --- property test -------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(case=gemm_cases(), with_out=st.integers(0, 3))
@SETTINGS
def test_gemm_residual(xp, setting, case, with_out):
    A, B, C = case.args(xp)
    before = snapshot(A, B, C)
    out = case.out(xp) if with_out else None
    result = bt.gemm(A, B, C, alpha=case.alpha, beta=case.beta, transa=case.transa,
                     transb=case.transb, out=out, setting=setting)
    if out is not None:
        assert result is out
    assert isinstance(result, xp.ndarray)
    assert tuple(result.shape) == case.shape
    assert result.dtype == case.dtype
    ratio = gemm_error_ratio(to_np(result), case.A, case.B, case.C, case.alpha, case.beta,
                             case.transa, case.transb)
    assert ratio < THRESHOLD, f"error ratio {ratio} for {case!r}"
    assert_unchanged((A, B, C), before)


# --- transpositions, conjugation, orders -------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", TRANS_PAIRS)
@pytest.mark.parametrize("out_order", ["C", "F"])
@pytest.mark.parametrize("mnk", [(5, 9, 3), (33, 17, 40), (130, 67, 45)], ids=str)
def test_gemm_all_transpositions(xp, setting, dtype, trans, out_order, mnk):
    """All nine transa/transb pairs; for complex types 'C' must conjugate, 'T' must not."""
    transa, transb = trans
    m, n, k = mnk
    rng = rng_for("trans", str(dtype), trans, out_order, mnk)
    A, B, C = operands(rng, (3,), (3,), m, n, k, dtype, transa, transb, batch_c=(3,))
    alpha = 0.5 - 1.5j if dtype.kind == "c" else -0.75
    out = poisoned(xp, (3, m, n), dtype, out_order)
    result = bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=alpha, beta=2.0, transa=transa,
                     transb=transb.lower(), out=out, setting=setting)
    assert result is out
    assert gemm_error_ratio(to_np(result), A, B, C, alpha, 2.0, transa, transb) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("a_order", ["C", "F"])
@pytest.mark.parametrize("b_order", ["C", "F"])
@pytest.mark.parametrize("c_order", ["C", "F"])
def test_gemm_operand_orders(xp, setting, dtype, a_order, b_order, c_order):
    rng = rng_for("orders", str(dtype), a_order, b_order, c_order)
    A, B, C = operands(rng, (4,), (4,), 18, 7, 11, dtype, "N", "N", batch_c=(4,))
    for out_order in ("C", "F", None):
        out = None if out_order is None else poisoned(xp, (4, 18, 7), dtype, out_order)
        result = bt.gemm(arrange(xp, A, a_order), arrange(xp, B, b_order), arrange(xp, C, c_order),
                         alpha=1.0, beta=-1.0, out=out, setting=setting)
        assert gemm_error_ratio(to_np(result), A, B, C, 1.0, -1.0, "N", "N") < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_new_result_is_c_contiguous(xp, setting, dtype):
    rng = rng_for("new", str(dtype))
    A, B, _ = operands(rng, (2,), (2,), 9, 5, 4, dtype, "N", "N")
    result = bt.gemm(arrange(xp, A, "F"), arrange(xp, B, "F"), setting=setting)
    assert result.flags.c_contiguous
    assert gemm_error_ratio(to_np(result), A, B, None, 1.0, 0.0, "N", "N") < THRESHOLD


# --- broadcasting ----------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", ["NN", "TN", "NC", "CT"])
def test_gemm_2d_b_broadcast_over_batched_a(xp, setting, dtype, trans):
    rng = rng_for("bcast", str(dtype), trans)
    transa, transb = trans
    A, B, C = operands(rng, (2, 3), (), 17, 6, 33, dtype, transa, transb, batch_c=(3,))
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=1.0, beta=0.5, transa=transa,
                        transb=transb, out=nan_like_out(xp, (2, 3, 17, 6), dtype), setting=setting))
    assert gemm_error_ratio(got, A, B, C, 1.0, 0.5, transa, transb) < THRESHOLD
    # and a 2-D A over a batched B, batch dimensions (3, 1) with (4,)
    A, B, C = operands(rng, (3, 1), (4,), 8, 8, 8, dtype, transa, transb, batch_c=(3, 4))
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), beta=-1.0, transa=transa,
                        transb=transb, out=nan_like_out(xp, (3, 4, 8, 8), dtype), setting=setting))
    assert gemm_error_ratio(got, A, B, C, 1.0, -1.0, transa, transb) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("c_shape", [(12, 7), (1, 7), (12, 1), (7,), (1, 1, 7), ()], ids=str)
@pytest.mark.parametrize("out_order", ["C", "F"])
def test_gemm_c_broadcasts_to_result(xp, setting, c_shape, out_order):
    """C broadcasts to the result shape like NumPy, along the matrix dimensions too."""
    rng = rng_for("cbcast", c_shape, out_order)
    A, B, _ = operands(rng, (3,), (3,), 12, 7, 5, np.float64, "N", "N")
    C = random_array(rng, c_shape, np.float64)
    out = poisoned(xp, (3, 12, 7), np.float64, out_order)
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), beta=2.0, out=out, setting=setting))
    assert gemm_error_ratio(got, A, B, np.broadcast_to(C, (3, 12, 7)), 1.0, 2.0, "N", "N") < THRESHOLD


# --- BLAS scalar rules --------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", ["NN", "TC"])
def test_gemm_inner_dimension_zero_applies_beta(xp, setting, dtype, trans):
    transa, transb = trans
    rng = rng_for("k0", str(dtype), trans)
    A, B, C = operands(rng, (3,), (3,), 10, 35, 0, dtype, transa, transb, batch_c=(3,))
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=1.0, beta=2.0, transa=transa,
                        transb=transb, out=nan_like_out(xp, (3, 10, 35), dtype), setting=setting))
    np.testing.assert_array_equal(got, (2 * C).astype(dtype))
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), transa=transa, transb=transb,
                        out=nan_like_out(xp, (3, 10, 35), dtype), setting=setting))
    np.testing.assert_array_equal(got, np.zeros((3, 10, 35), dtype))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_beta_zero_never_reads_c(xp, setting, dtype):
    rng = rng_for("beta0", str(dtype))
    A, B, _ = operands(rng, (4,), (4,), 20, 9, 13, dtype, "N", "T")
    C = np.full((4, 20, 9), np.nan, dtype=dtype)
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=2.0, beta=0, transb="T",
                        out=nan_like_out(xp, (4, 20, 9), dtype), setting=setting))
    assert np.all(np.isfinite(got))
    assert gemm_error_ratio(got, A, B, None, 2.0, 0.0, "N", "T") < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("beta", [0.0, -0.5])
@pytest.mark.parametrize("out_order", ["C", "F"])
@pytest.mark.parametrize("mn", [(128, 64), (130, 67)], ids=str)
def test_gemm_interior_and_edge_tiles(xp, setting, beta, out_order, mn):
    """Whole tiles (the tensor-core 64 x 64 tile stores them without bound tests, beta * C
    read or not) beside edge tiles, every element written once: NaN-poisoned out, NaN C
    when beta = 0."""
    m, n = mn
    dtype = np.dtype(np.float64)
    rng = rng_for("tiles", out_order, mn, beta)
    A, B, C = operands(rng, (2,), (2,), m, n, 40, dtype, "N", "T", batch_c=(2,))
    if beta == 0:
        C = np.full_like(C, np.nan)
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=1.25, beta=beta, transb="T",
                        out=poisoned(xp, (2, m, n), dtype, out_order), setting=setting))
    assert np.all(np.isfinite(got))
    assert gemm_error_ratio(got, A, B, None if beta == 0 else C, 1.25, beta, "N", "T") < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_alpha_zero_never_reads_a_b(xp, setting, dtype):
    rng = rng_for("alpha0", str(dtype))
    A = np.full((4, 20, 13), np.nan, dtype=dtype)
    B = np.full((4, 13, 9), np.nan, dtype=dtype)
    C = random_array(rng, (4, 20, 9), dtype)
    for beta in (2.0, -1.5):
        got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=0, beta=beta,
                            out=nan_like_out(xp, (4, 20, 9), dtype), setting=setting))
        np.testing.assert_allclose(got, (dtype.type(beta) * C).astype(dtype),
                                   rtol=4 * np.finfo(dtype).eps, atol=0)
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, np.full_like(C, np.nan)), alpha=0, beta=0,
                        out=nan_like_out(xp, (4, 20, 9), dtype), setting=setting))
    assert np.array_equal(got, np.zeros((4, 20, 9), dtype))


# --- outputs and aliasing --------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("c_order", ["C", "F"])
def test_gemm_out_is_c_in_place(xp, setting, dtype, c_order):
    rng = rng_for("inplace", str(dtype), c_order)
    A, B, C = operands(rng, (5,), (5,), 21, 34, 6, dtype, "C", "N", batch_c=(5,))
    Cd = arrange(xp, C, c_order)
    result = bt.gemm(to_xp(xp, A), to_xp(xp, B), Cd, alpha=-1.5, beta=0.5, transa="C", out=Cd,
                     setting=setting)
    assert result is Cd
    assert gemm_error_ratio(to_np(Cd), A, B, C, -1.5, 0.5, "C", "N") < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [6, 40])
@pytest.mark.parametrize("trans", ["NN", "TN", "NT", "CC"])
def test_gemm_out_aliasing_inputs_gives_private_copy_result(xp, setting, dtype, n, trans):
    """out is A, out is B (square), or a view of C: the result of private copies."""
    transa, transb = trans
    rng = rng_for("alias", str(dtype), n, trans)
    A, B, C = operands(rng, (3,), (3,), n, n, n, dtype, transa, transb, batch_c=(3,))
    Ad = to_xp(xp, A)
    result = bt.gemm(Ad, to_xp(xp, B), to_xp(xp, C), alpha=1.0, beta=1.0, transa=transa, transb=transb,
                     out=Ad, setting=setting)
    assert result is Ad
    assert gemm_error_ratio(to_np(Ad), A, B, C, 1.0, 1.0, transa, transb) < THRESHOLD
    Bd = to_xp(xp, B)
    result = bt.gemm(to_xp(xp, A), Bd, to_xp(xp, C), alpha=1.0, beta=1.0, transa=transa, transb=transb,
                     out=Bd, setting=setting)
    assert gemm_error_ratio(to_np(Bd), A, B, C, 1.0, 1.0, transa, transb) < THRESHOLD
    Cd = to_xp(xp, C)
    result = bt.gemm(to_xp(xp, A), to_xp(xp, B), Cd, alpha=1.0, beta=1.0, transa=transa, transb=transb,
                     out=Cd[...], setting=setting)
    assert gemm_error_ratio(to_np(result), A, B, C, 1.0, 1.0, transa, transb) < THRESHOLD
    # A and B the same array (A @ A^H style)
    Ad = to_xp(xp, A)
    result = bt.gemm(Ad, Ad, transa=transa, transb=transb, out=nan_like_out(xp, (3, n, n), dtype),
                     setting=setting)
    assert gemm_error_ratio(to_np(result), A, A, None, 1.0, 0.0, transa, transb) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dts", MIXED_DTYPES, ids=str)
def test_gemm_mixed_precision_promotes(xp, setting, dts):
    rng = rng_for("mixed", str(dts))
    A = random_array(rng, (2, 19, 10), dts[0])
    B = random_array(rng, (2, 10, 7), dts[1])
    C = None if dts[2] is None else random_array(rng, (2, 19, 7), dts[2])
    expected = np.result_type(*[d for d in dts if d is not None])
    result = bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=1.5, beta=-1.0, setting=setting)
    assert result.dtype == expected
    assert gemm_error_ratio(to_np(result), A, B, C, 1.5, -1.0, "N", "N") < THRESHOLD


# --- big batches and isolation -------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
def test_gemm_many_small_matrices(xp, setting, dtype):
    """70,000 8x8 products on the GPU (more blocks than gridDim.y allows); 700 on the CPU."""
    count = 700 if xp is np else 70_000
    rng = rng_for("many", str(np.dtype(dtype)))
    A, B, C = operands(rng, (count,), (count,), 8, 8, 8, dtype, "N", "T", batch_c=(count,))
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), alpha=0.5, beta=2.0, transb="T",
                        out=nan_like_out(xp, (count, 8, 8), dtype), setting=setting))
    assert gemm_error_ratio(got, A, B, C, 0.5, 2.0, "N", "T") < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mnk", [(8, 8, 8), (40, 70, 33)], ids=str)
def test_gemm_nan_matrix_stays_in_its_own_output(xp, setting, dtype, mnk):
    rng = rng_for("nan", str(dtype), mnk)
    count, bad = 9, 4
    m, n, k = mnk
    A, B, C = operands(rng, (count,), (count,), m, n, k, dtype, "N", "N", batch_c=(count,))
    A[bad] = np.nan
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, B), to_xp(xp, C), beta=1.0,
                        out=nan_like_out(xp, (count, m, n), dtype), setting=setting))
    assert np.all(np.isnan(got[bad]))
    keep = np.arange(count) != bad
    assert np.all(np.isfinite(got[keep]))
    assert gemm_error_ratio(got[keep], A[keep], B[keep], C[keep], 1.0, 1.0, "N", "N") < THRESHOLD


# --- pointer arrays and variable sizes ------------------------------------------------------------


def check_members(results, As, Bs, Cs, alpha, beta, transa, transb):
    assert isinstance(results, list) and len(results) == len(As)
    for i, (r, a, b) in enumerate(zip(results, As, Bs)):
        ci = None if Cs is None else Cs[i]
        ratio = gemm_error_ratio(to_np(r), a, b, ci, alpha, beta, transa, transb)
        assert ratio < THRESHOLD, f"product {i} ({a.shape} x {b.shape}): error ratio {ratio}"


ORDERS = {"C": "CC", "F": "FF", "mixed": "CF"}


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", ["NN", "TC", "CT"])
@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("out_order", list(ORDERS))
def test_gemm_pointer_list(xp, setting, dtype, trans, order, out_order):
    """Same-shape lists; members C-ordered, F-ordered or both, inputs and outs."""
    transa, transb = trans
    rng = rng_for("ptr", str(dtype), trans, order, out_order)
    count, (m, n, k) = 7, (17, 5, 9)
    As = [random_array(rng, stored((m, k), transa), dtype) for _ in range(count)]
    Bs = [random_array(rng, stored((k, n), transb), dtype) for _ in range(count)]
    Cs = [random_array(rng, (m, n), dtype) for _ in range(count)]
    orders = ORDERS[order]
    Ad = [arrange(xp, a, orders[i % 2]) for i, a in enumerate(As)]
    Bd = [arrange(xp, b, orders[(i + 1) % 2]) for i, b in enumerate(Bs)]
    Cd = [arrange(xp, c, orders[i % 2]) for i, c in enumerate(Cs)]
    before = snapshot(*Ad, *Bd, *Cd)
    outs = [poisoned(xp, (m, n), dtype, ORDERS[out_order][(i // 2) % 2]) for i in range(count)]
    results = bt.gemm(Ad, Bd, Cd, alpha=2.0, beta=-0.5, transa=transa, transb=transb, out=outs,
                      setting=setting)
    assert all(r is o for r, o in zip(results, outs))
    check_members(results, As, Bs, Cs, 2.0, -0.5, transa, transb)
    assert_unchanged([*Ad, *Bd, *Cd], before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemm_pointer_batch_reused(xp, setting, dtype):
    rng = rng_for("ptrbatch", str(dtype))
    count = 6
    As = [random_array(rng, (12, 33), dtype) for _ in range(count)]
    batch = bt.PointerBatch(to_xp(xp, As))
    for call in range(2):
        Bs = [random_array(rng, (33, 4 + call), dtype) for _ in range(count)]
        results = bt.gemm(batch, to_xp(xp, Bs), setting=setting)
        check_members(results, As, Bs, None, 1.0, 0.0, "N", "N")
    # the prepared batch as the right operand, transposed
    Ls = [random_array(rng, (5, 33), dtype) for _ in range(count)]
    results = bt.gemm(to_xp(xp, Ls), batch, transb="T", setting=setting)
    check_members(results, Ls, As, None, 1.0, 0.0, "N", "T")


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(shapes=variable_shapes(), ks=st.lists(st.integers(0, 40), min_size=12, max_size=12),
       dtype=st.sampled_from(DTYPES), trans=st.sampled_from(TRANS_PAIRS),
       orders=st.lists(st.sampled_from("CF"), min_size=36, max_size=36),
       prepared=st.booleans(), seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_gemm_variable_batch(xp, setting, shapes, ks, dtype, trans, orders, prepared, seed):
    transa, transb = trans
    rng = np.random.default_rng(seed)
    count = len(shapes)
    As = [random_array(rng, stored((m, ks[i]), transa), dtype) for i, (m, n) in enumerate(shapes)]
    Bs = [random_array(rng, stored((ks[i], n), transb), dtype) for i, (m, n) in enumerate(shapes)]
    Cs = [random_array(rng, s, dtype) for s in shapes]
    Ad = [arrange(xp, a, orders[i]) for i, a in enumerate(As)]
    Bd = [arrange(xp, b, orders[12 + i]) for i, b in enumerate(Bs)]
    Cd = [arrange(xp, c, orders[24 + i]) for i, c in enumerate(Cs)]
    before = snapshot(*Ad, *Bd, *Cd)
    if prepared:
        A_arg, B_arg = bt.VariableBatch(Ad), bt.VariableBatch(Bd)
    else:
        A_arg, B_arg = Ad, Bd
    outs = [nan_like_out(xp, s, dtype) for s in shapes]
    results = bt.gemm(A_arg, B_arg, Cd, alpha=0.5, beta=-2.0, transa=transa, transb=transb, out=outs,
                      setting=setting)
    assert len(results) == count and all(r is o for r, o in zip(results, outs))
    check_members(results, As, Bs, Cs, 0.5, -2.0, transa, transb)
    assert_unchanged([*Ad, *Bd, *Cd], before)
    results = bt.gemm(A_arg, B_arg, transa=transa, transb=transb, setting=setting)
    check_members(results, As, Bs, None, 1.0, 0.0, transa, transb)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
def test_gemm_list_scalar_rules(xp, setting):
    """alpha == 0 never reads A, B; beta == 0 never reads C; k == 0 applies beta."""
    rng = rng_for("listscalars")
    shapes = [((5, 3), (3, 4)), ((6, 0), (0, 2)), ((0, 4), (4, 3)), ((16, 17), (17, 9))]
    As = [np.full(a, np.nan) for a, _ in shapes]
    Bs = [np.full(b, np.nan) for _, b in shapes]
    Cs = [random_array(rng, (a[0], b[1]), np.float64) for a, b in shapes]
    outs = [nan_like_out(xp, c.shape, np.float64) for c in Cs]
    results = bt.gemm(to_xp(xp, As), to_xp(xp, Bs), to_xp(xp, Cs), alpha=0, beta=2.0, out=outs,
                      setting=setting)
    for r, c in zip(results, Cs):
        np.testing.assert_array_equal(to_np(r), 2 * c)
    As = [random_array(rng, a, np.float64) for a, _ in shapes]
    Bs = [random_array(rng, b, np.float64) for _, b in shapes]
    Cnan = [np.full_like(c, np.nan) for c in Cs]
    results = bt.gemm(to_xp(xp, As), to_xp(xp, Bs), to_xp(xp, Cnan), beta=0,
                      out=[nan_like_out(xp, c.shape, np.float64) for c in Cs], setting=setting)
    check_members(results, As, Bs, None, 1.0, 0.0, "N", "N")
    results = bt.gemm(to_xp(xp, As), to_xp(xp, Bs), to_xp(xp, Cs), beta=1.5,
                      out=[nan_like_out(xp, c.shape, np.float64) for c in Cs], setting=setting)
    check_members(results, As, Bs, Cs, 1.0, 1.5, "N", "N")


def test_gemm_empty_list_returns_empty_list(xp):
    assert bt.gemm([], []) == []
