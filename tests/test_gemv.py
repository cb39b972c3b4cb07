"""Batched GEMV against the float64/complex128 reference, on both backends.

Every test body runs on NumPy (the CPU backend) and CuPy (the GPU, skipped
without one) through the ``xp`` fixture, with every registered kernel setting
forced and with the default chooser (``setting=None``).  Outputs are passed as
NaN-filled ``out=`` buffers so an element that is never written fails.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import batched as bt
from batched.settings import PACKED_SETTING
from conftest import HAVE_GPU, NO_GPU_REASON, assert_unchanged, nan_like_out, rng_for, snapshot, to_np, to_xp
from residuals import gemv_error_ratio
from strategies import (DTYPES, MIXED_DTYPES, SETTINGS, arrange, gemv_cases, random_array, variable_shapes)

SETTINGS_UNDER_TEST = [*bt.GEMV_SETTINGS, None]
THRESHOLD = 30


def op_rows(shape, trans):
    """(rows of op(A), columns of op(A)) for a stored shape (..., m, n)."""
    m, n = shape[-2:]
    return (m, n) if trans.upper() == "N" else (n, m)


# --- property test: residuals over sizes, batches, layouts, dtypes, scalars ----


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(case=gemv_cases(), with_out=st.integers(0, 3))
@SETTINGS
def test_gemv_residual(xp, setting, case, with_out):
    A, x, y = case.args(xp)
    before = snapshot(A, x, y)
    out = case.out(xp) if with_out else None  # poisoned: every element must be written
    result = bt.gemv(A, x, y, alpha=case.alpha, beta=case.beta, trans=case.trans, out=out,
                     setting=setting)
    if out is not None:
        assert result is out
    assert isinstance(result, xp.ndarray)
    assert tuple(result.shape) == case.shape
    assert result.dtype == case.dtype
    ratio = gemv_error_ratio(to_np(result), case.A, case.x, case.y, case.alpha, case.beta, case.trans)
    assert ratio < THRESHOLD, f"error ratio {ratio} for {case!r}"
    assert_unchanged((A, x, y), before)


# --- BLAS scalar rules ------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_beta_zero_never_reads_y(xp, setting, dtype, trans):
    rng = rng_for("beta0", str(dtype), trans)
    A = random_array(rng, (5, 17, 9), dtype)
    rows, inner = op_rows(A.shape, trans)
    x = random_array(rng, (5, inner), dtype)
    y = np.full((5, rows), np.nan, dtype=dtype)
    out = nan_like_out(xp, (5, rows), dtype)
    result = bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=1.5, beta=0.0, trans=trans,
                     out=out, setting=setting)
    got = to_np(result)
    assert np.all(np.isfinite(got))
    assert gemv_error_ratio(got, A, x, None, 1.5, 0.0, trans) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_alpha_zero_never_reads_a_x(xp, setting, dtype, trans):
    rng = rng_for("alpha0", str(dtype), trans)
    A = np.full((4, 33, 7), np.nan, dtype=dtype)
    rows, inner = op_rows(A.shape, trans)
    x = np.full((4, inner), np.nan, dtype=dtype)
    y = random_array(rng, (4, rows), dtype)
    for beta in (2.0, -1.5, 0.0):
        out = nan_like_out(xp, (4, rows), dtype)
        got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=0.0, beta=beta,
                            trans=trans, out=out, setting=setting))
        expected = (dtype.type(beta) * y).astype(dtype)
        np.testing.assert_allclose(got, expected, rtol=4 * np.finfo(dtype).eps, atol=0)
    # alpha == 0 and beta == 0: zeros, even with y all NaN
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, np.full_like(y, np.nan)), alpha=0,
                        beta=0, trans=trans, out=nan_like_out(xp, (4, rows), dtype), setting=setting))
    assert np.array_equal(got, np.zeros((4, rows), dtype))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_empty_inner_dimension_applies_beta(xp, setting, dtype, trans):
    rng = rng_for("k0", str(dtype), trans)
    rows = 13
    A = random_array(rng, (3, rows, 0) if trans == "N" else (3, 0, rows), dtype)
    x = random_array(rng, (3, 0), dtype)
    y = random_array(rng, (3, rows), dtype)
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=1.0, beta=2.0, trans=trans,
                        out=nan_like_out(xp, (3, rows), dtype), setting=setting))
    np.testing.assert_array_equal(got, (2 * y).astype(dtype))
    # without y: zeros, written over the poison
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), trans=trans, out=nan_like_out(xp, (3, rows), dtype),
                        setting=setting))
    np.testing.assert_array_equal(got, np.zeros((3, rows), dtype))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("trans", "NT")
def test_gemv_empty_operands_with_any_strides(xp, setting, trans):
    # An empty x that is a strided view, broadcast over A's batch: CuPy gives such
    # arrays (and their contiguous copies) strides no batch stride fits; the
    # launcher crashed on them (found on the H100 for A (2, 2, 1, 0), x (2, 0)).
    A = xp.zeros((2, 2, 1, 0) if trans == "N" else (2, 2, 0, 1), np.float32)
    x = xp.zeros((2, 6), np.float32)[:, 3:3]
    y = xp.ones((2, 2, 1), np.float32)
    got = to_np(bt.gemv(A, x, y, alpha=0.0, beta=3.0, trans=trans, setting=setting))
    np.testing.assert_array_equal(got, np.full((2, 2, 1), 3.0, np.float32))
    B = xp.zeros((2, 6, 6), np.float32)[:, 2:2, 1:5:2]  # (2, 0, 2), strided
    got = to_np(bt.gemv(B, xp.ones((2, 2), np.float32), trans="N", setting=setting))
    assert got.shape == (2, 0)


# --- outputs and aliasing ------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_out_is_y_in_place(xp, setting, dtype, trans):
    rng = rng_for("inplace", str(dtype), trans)
    A = random_array(rng, (6, 40, 9), dtype)
    rows, inner = op_rows(A.shape, trans)
    x = random_array(rng, (6, inner), dtype)
    y = random_array(rng, (6, rows), dtype)
    yd = to_xp(xp, y)
    result = bt.gemv(to_xp(xp, A), to_xp(xp, x), yd, alpha=-1.5, beta=0.5, trans=trans, out=yd,
                     setting=setting)
    assert result is yd
    assert gemv_error_ratio(to_np(yd), A, x, y, -1.5, 0.5, trans) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
@pytest.mark.parametrize("n", [5, 33])
def test_gemv_out_aliasing_x_gives_private_copy_result(xp, setting, dtype, trans, n):
    rng = rng_for("alias", str(dtype), trans, n)
    A = random_array(rng, (4, n, n), dtype)
    x = random_array(rng, (4, n), dtype)
    y = random_array(rng, (4, n), dtype)
    xd = to_xp(xp, x)
    result = bt.gemv(to_xp(xp, A), xd, to_xp(xp, y), alpha=2.0, beta=1.0, trans=trans, out=xd,
                     setting=setting)
    assert result is xd
    assert gemv_error_ratio(to_np(xd), A, x, y, 2.0, 1.0, trans) < THRESHOLD
    # out aliasing y's memory through a different view than y itself
    yd = to_xp(xp, y)
    result = bt.gemv(to_xp(xp, A), to_xp(xp, x), yd, alpha=2.0, beta=1.0, trans=trans, out=yd[...],
                     setting=setting)
    assert gemv_error_ratio(to_np(result), A, x, y, 2.0, 1.0, trans) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
def test_gemv_new_result_without_out(xp, setting):
    rng = rng_for("new")
    A = random_array(rng, (2, 3, 20, 11), np.float64)
    x = random_array(rng, (11,), np.float64)
    result = bt.gemv(to_xp(xp, A), to_xp(xp, x), setting=setting)
    assert isinstance(result, xp.ndarray) and result.shape == (2, 3, 20)
    assert gemv_error_ratio(to_np(result), A, x, None, 1.0, 0.0, "N") < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("y_shape", [(1,), (3, 1), (1, 12), ()], ids=str)
def test_gemv_y_broadcasts_to_result(xp, setting, y_shape):
    """y broadcasts to the result shape, along the vector dimension too."""
    rng = rng_for("ybcast", y_shape)
    A = random_array(rng, (3, 12, 7), np.float64)
    x = random_array(rng, (3, 7), np.float64)
    y = random_array(rng, y_shape, np.float64)
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), beta=-1.5,
                        out=nan_like_out(xp, (3, 12), np.float64), setting=setting))
    assert gemv_error_ratio(got, A, x, np.broadcast_to(y, (3, 12)), 1.0, -1.5, "N") < THRESHOLD


# --- dtypes --------------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dts", MIXED_DTYPES, ids=str)
def test_gemv_mixed_precision_promotes(xp, setting, dts):
    rng = rng_for("mixed", str(dts))
    A = random_array(rng, (3, 19, 10), dts[0])
    x = random_array(rng, (3, 10), dts[1])
    y = None if dts[2] is None else random_array(rng, (3, 19), dts[2])
    expected = np.result_type(*[d for d in dts if d is not None])
    result = bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=1.5, beta=-1.0, setting=setting)
    assert result.dtype == expected
    # the bound uses eps of the promoted precision: a float32 computation fails it
    assert gemv_error_ratio(to_np(result), A, x, y, 1.5, -1.0, "N") < THRESHOLD


# --- big batches and isolation ---------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
@pytest.mark.parametrize("trans", "NT")
def test_gemv_many_small_matrices(xp, setting, dtype, trans):
    """70,000 8x8 matrices on the GPU (more than 65,535 blocks); 700 on the CPU."""
    count = 700 if xp is np else 70_000
    rng = rng_for("many", str(np.dtype(dtype)), trans)
    A = random_array(rng, (count, 8, 8), dtype)
    x = random_array(rng, (count, 8), dtype)
    y = random_array(rng, (count, 8), dtype)
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=0.5, beta=2.0, trans=trans,
                        out=nan_like_out(xp, (count, 8), dtype), setting=setting))
    assert gemv_error_ratio(got, A, x, y, 0.5, 2.0, trans) < THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
@pytest.mark.parametrize("mn", [(8, 8), (70, 33)], ids=str)
def test_gemv_nan_matrix_stays_in_its_own_output(xp, setting, dtype, trans, mn):
    rng = rng_for("nan", str(dtype), trans, mn)
    count, bad = 9, 4
    A = random_array(rng, (count, *mn), dtype)
    A[bad] = np.nan
    rows, inner = op_rows(A.shape, trans)
    x = random_array(rng, (count, inner), dtype)
    y = random_array(rng, (count, rows), dtype)
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=1.0, beta=1.0, trans=trans,
                        out=nan_like_out(xp, (count, rows), dtype), setting=setting))
    assert np.all(np.isnan(got[bad]))
    keep = np.arange(count) != bad
    assert np.all(np.isfinite(got[keep]))
    assert gemv_error_ratio(got[keep], A[keep], x[keep], y[keep], 1.0, 1.0, trans) < THRESHOLD


# --- the packed kernel (a warp a matrix, 16-byte pieces) ------------------------------------

PACKED = PACKED_SETTING


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pieces", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_packed_every_piece_count(xp, dtype, pieces, trans):
    """Every PPC instantiation on C-ordered stacks whose view columns (A's rows) are
    ``pieces`` 16-byte pieces: columns of op(A) 1, 3 and more than one chunk of eight
    loads a lane, beta != 0, a NaN-poisoned out."""
    rows = pieces * 16 // np.dtype(dtype).itemsize   # A's last axis: the view's column length
    for cols in (1, 3, 8 * 32 // pieces + 5):
        rng = rng_for("packed", str(np.dtype(dtype)), pieces, trans, cols)
        count = 37
        A = random_array(rng, (count, cols, rows), dtype)
        rows_op, inner = op_rows(A.shape, trans)
        x = random_array(rng, (count, inner), dtype)
        y = random_array(rng, (count, rows_op), dtype)
        got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), to_xp(xp, y), alpha=0.75, beta=-1.5, trans=trans,
                            out=nan_like_out(xp, (count, rows_op), dtype), setting=PACKED))
        ratio = gemv_error_ratio(got, A, x, y, 0.75, -1.5, trans)
        assert ratio < THRESHOLD, f"{rows}x{cols}: error ratio {ratio}"
        # the same members as a pointer array: aligned (the packed kernel), then one
        # member an element into its buffer (the twin; complex128 is always 16-byte aligned)
        Ad = to_xp(xp, A)
        lists = [[Ad[i] for i in range(count)]]
        if np.dtype(dtype).itemsize < 16:
            lists.append([Ad[i] for i in range(count - 1)] + [_shifted(xp, A[-1])])
        for members in lists:
            got = to_np(bt.gemv(members, to_xp(xp, x), to_xp(xp, y), alpha=0.75, beta=-1.5, trans=trans,
                                setting=PACKED))
            ratio = gemv_error_ratio(got, A, x, y, 0.75, -1.5, trans)
            assert ratio < THRESHOLD, f"pointer {rows}x{cols}: error ratio {ratio}"


def _shifted(xp, a):
    """A copy of ``a`` (C-ordered) that starts one element into its buffer."""
    flat = xp.zeros(a.size + 1, a.dtype)
    out = flat[1:].reshape(a.shape)
    out[...] = to_xp(xp, a)
    return out


def test_packed_pieces_rules():
    from batched.settings import packed_pieces
    assert packed_pieces(32, 32, 4, 256, 32 * 32, 10) == 8
    assert packed_pieces(128, 128, 4, 0, 128 * 7, 3) == 32
    assert packed_pieces(1, 1, 16, 16, 5, 9) == 1            # complex128: an element a piece
    assert packed_pieces(256, 256, 4, 0, 0, 1) == 0          # 64 pieces a column: too many
    assert packed_pieces(24, 24, 4, 0, 24 * 24, 2) == 0      # 6 pieces: not a power of two
    assert packed_pieces(32, 33, 4, 0, 33 * 32, 2) == 0      # padded columns
    assert packed_pieces(32, 32, 4, 4, 1024, 2) == 0         # misaligned first matrix
    assert packed_pieces(32, 32, 4, 0, 1025, 2) == 0         # misaligned stride
    assert packed_pieces(32, 32, 4, 0, 1025, 1) == 8         # ... unless there is one matrix
    assert packed_pieces(6, 6, 8, 0, 36, 2) == 0             # 48 bytes: 3 pieces
    assert packed_pieces(2, 2, 8, 0, 4, 2) == 1


# --- pointer arrays and variable sizes ---------------------------------------------------


def check_members(results, As, xs, ys, alpha, beta, trans):
    assert isinstance(results, list) and len(results) == len(As)
    for i, (r, a, v) in enumerate(zip(results, As, xs)):
        yi = None if ys is None else ys[i]
        ratio = gemv_error_ratio(to_np(r), a, v, yi, alpha, beta, trans)
        assert ratio < THRESHOLD, f"member {i} ({a.shape}): error ratio {ratio}"


TALL_SETTINGS = [s for s in bt.GEMV_SETTINGS if s.tall]


@pytest.mark.parametrize("setting", [*TALL_SETTINGS, None], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
@pytest.mark.parametrize("shape", [(300, 129), (129, 300), (520, 64)], ids=str)
def test_gemv_tall_tiles_on_large_views(xp, setting, dtype, trans, shape):
    """Matrices past a tall tile (R = 128-256 rows) in every memory layout: the
    tiles' unchecked interior, their 16-byte loads, and each matrix's own 128-byte
    row origin (views at element offsets; list members at different offsets)."""
    rng = rng_for("tall", str(dtype), trans, shape)
    A = random_array(rng, (3, *shape), dtype)
    rows, inner = op_rows(shape, trans)
    x = random_array(rng, (3, inner), dtype)
    y = random_array(rng, (3, rows), dtype)
    alpha = 0.5 - 1j if np.dtype(dtype).kind == "c" else 0.5
    for layout in ("C", "F", "sub_F", "rows_sliced"):
        Ad = arrange(xp, A, layout)
        out = nan_like_out(xp, (3, rows), dtype)
        result = bt.gemv(Ad, to_xp(xp, x), arrange(xp, y, "strided", core=1), alpha=alpha, beta=-2.0,
                         trans=trans, out=out, setting=setting)
        ratio = gemv_error_ratio(to_np(result), A, x, y, alpha, -2.0, trans)
        assert ratio < THRESHOLD, f"{layout}: error ratio {ratio}"
    # A list whose members sit at element offsets 0, 1, 3 of one buffer (F order):
    # three different row origins in one launch.
    size = shape[0] * shape[1]
    flat = to_xp(xp, np.full(3 * size + 8, np.nan, dtype=dtype))
    members = []
    for i, offset in enumerate((0, 1, 3)):
        start = i * size + offset
        view = flat[start:start + size].reshape(shape[::-1]).T
        view[...] = to_xp(xp, A[i])
        members.append(view)
    outs = [nan_like_out(xp, (rows,), dtype) for _ in range(3)]
    results = bt.gemv(members, to_xp(xp, list(x)), trans=trans, out=outs, setting=setting)
    check_members(results, list(A), list(x), None, 1.0, 0.0, trans)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
@pytest.mark.parametrize("order", ["C", "F", "mixed"])
def test_gemv_pointer_list(xp, setting, dtype, trans, order):
    rng = rng_for("ptr", str(dtype), trans, order)
    count, shape = 11, (21, 6)
    As = [random_array(rng, shape, dtype) for _ in range(count)]
    rows, inner = op_rows(shape, trans)
    xs = [random_array(rng, (inner,), dtype) for _ in range(count)]
    ys = [random_array(rng, (rows,), dtype) for _ in range(count)]
    orders = {"C": "CC", "F": "FF", "mixed": "CF"}[order]
    Ad = [arrange(xp, a, orders[i % 2]) for i, a in enumerate(As)]
    before = snapshot(*Ad)
    outs = [nan_like_out(xp, (rows,), dtype) for _ in range(count)]
    results = bt.gemv(Ad, to_xp(xp, xs), to_xp(xp, ys), alpha=-1.5, beta=0.5, trans=trans, out=outs,
                      setting=setting)
    assert all(r is o for r, o in zip(results, outs))
    check_members(results, As, xs, ys, -1.5, 0.5, trans)
    assert_unchanged(Ad, before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_pointer_batch_reused(xp, setting, dtype, trans):
    rng = rng_for("ptrbatch", str(dtype), trans)
    count, shape = 10, (9, 33)
    As = [random_array(rng, shape, dtype) for _ in range(count)]
    rows, inner = op_rows(shape, trans)
    batch = bt.PointerBatch(to_xp(xp, As))
    for call in range(2):  # the prepared pointer array serves both calls
        xs = [random_array(rng, (inner,), dtype) for _ in range(count)]
        ys = [random_array(rng, (rows,), dtype) for _ in range(count)]
        results = bt.gemv(batch, to_xp(xp, xs), to_xp(xp, ys), alpha=2.0, beta=-1.0, trans=trans,
                          setting=setting)
        check_members(results, As, xs, ys, 2.0, -1.0, trans)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(shapes=variable_shapes(), dtype=st.sampled_from(DTYPES), trans=st.sampled_from("NTCntc"),
       orders=st.lists(st.sampled_from("CF"), min_size=12, max_size=12),
       prepared=st.booleans(), seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_gemv_variable_batch(xp, setting, shapes, dtype, trans, orders, prepared, seed):
    rng = np.random.default_rng(seed)
    As = [random_array(rng, s, dtype) for s in shapes]
    rows = [op_rows(s, trans)[0] for s in shapes]
    inner = [op_rows(s, trans)[1] for s in shapes]
    xs = [random_array(rng, (k,), dtype) for k in inner]
    ys = [random_array(rng, (r,), dtype) for r in rows]
    Ad = [arrange(xp, a, orders[i]) for i, a in enumerate(As)]
    before = snapshot(*Ad)
    A_arg = bt.VariableBatch(Ad) if prepared else Ad
    outs = [nan_like_out(xp, (r,), dtype) for r in rows]
    results = bt.gemv(A_arg, to_xp(xp, xs), to_xp(xp, ys), alpha=0.5, beta=-2.0, trans=trans, out=outs,
                      setting=setting)
    assert all(r is o for r, o in zip(results, outs))
    check_members(results, As, xs, ys, 0.5, -2.0, trans)
    assert_unchanged(Ad, before)
    # and without out=: a new list
    results = bt.gemv(A_arg, to_xp(xp, xs), trans=trans, setting=setting)
    check_members(results, As, xs, None, 1.0, 0.0, trans)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
def test_gemv_variable_batch_of_20000_members_on_two_streams(dtype):
    """20,000 members of 1-8 rows and columns, more than one wave of the kernel's
    groups; three launches in a row, the last on another stream, every result
    against NumPy into NaN."""
    import cupy as cp

    rng = rng_for("variable-20000", str(np.dtype(dtype)))
    shapes = [tuple(int(v) for v in rng.integers(1, 9, 2)) for _ in range(20_000)]
    As = [random_array(rng, s, dtype) for s in shapes]
    batch = bt.VariableBatch(to_xp(cp, As))
    for call in range(3):
        xs = [random_array(rng, (s[1],), dtype) for s in shapes]
        outs = [nan_like_out(cp, (s[0],), dtype) for s in shapes]
        with cp.cuda.Stream() if call == 2 else cp.cuda.Stream.null:
            bt.gemv(batch, to_xp(cp, xs), out=outs)
            cp.cuda.get_current_stream().synchronize()
        check_members(outs, As, xs, None, 1.0, 0.0, "N")


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
def test_gemv_list_vector_forms(xp, setting):
    """x as a list, as an array (count, k) and as one 1-D array for every matrix;
    an array x gives an array (count, rows) back, the others a list."""
    rng = rng_for("forms")
    As = [random_array(rng, (12, 7), np.float64) for _ in range(5)]
    X = random_array(rng, (5, 7), np.float64)
    Ad = to_xp(xp, As)
    for x_arg, xs in ((to_xp(xp, list(X)), list(X)), (to_xp(xp, X[0]), [X[0]] * 5)):
        check_members(bt.gemv(Ad, x_arg, setting=setting), As, xs, None, 1.0, 0.0, "N")
    wide = np.full((5, 10), np.nan)
    wide[:, 1:8] = X  # rows of the array 10 elements apart
    for batch in (Ad, bt.PointerBatch(Ad)):
        got = bt.gemv(batch, to_xp(xp, wide)[:, 1:8], setting=setting)
        assert isinstance(got, xp.ndarray) and got.shape == (5, 12)
        check_members(list(to_np(got)), As, list(X), None, 1.0, 0.0, "N")
        out = nan_like_out(xp, (5, 12), np.float64)
        assert bt.gemv(batch, to_xp(xp, X), out=out, setting=setting) is out
        check_members(list(to_np(out)), As, list(X), None, 1.0, 0.0, "N")


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
def test_gemv_list_mixed_precision_promotes(xp, setting):
    rng = rng_for("listmixed")
    As = [random_array(rng, (10, 6), np.float32 if i % 2 else np.float64) for i in range(6)]
    xs = [random_array(rng, (6,), np.float64 if i % 3 else np.float32) for i in range(6)]
    results = bt.gemv(to_xp(xp, As), to_xp(xp, xs), alpha=1.5, setting=setting)
    assert all(r.dtype == np.float64 for r in results)
    check_members(results, As, xs, None, 1.5, 0.0, "N")


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_gemv_list_alpha_zero_and_beta_zero(xp, setting, trans):
    rng = rng_for("listscalars", trans)
    shapes = [(5, 3), (0, 4), (7, 0), (16, 17)]
    As = [np.full(s, np.nan) for s in shapes]
    rows = [op_rows(s, trans)[0] for s in shapes]
    inner = [op_rows(s, trans)[1] for s in shapes]
    xs = [np.full((k,), np.nan) for k in inner]
    ys = [random_array(rng, (r,), np.float64) for r in rows]
    results = bt.gemv(to_xp(xp, As), to_xp(xp, xs), to_xp(xp, ys), alpha=0, beta=2.0, trans=trans,
                      out=[nan_like_out(xp, (r,), np.float64) for r in rows], setting=setting)
    for r, yi in zip(results, ys):
        np.testing.assert_array_equal(to_np(r), 2 * yi)
    As = [random_array(rng, s, np.float64) for s in shapes]
    xs = [random_array(rng, (k,), np.float64) for k in inner]
    ys = [np.full((r,), np.nan) for r in rows]
    results = bt.gemv(to_xp(xp, As), to_xp(xp, xs), to_xp(xp, ys), alpha=1.0, beta=0.0, trans=trans,
                      out=[nan_like_out(xp, (r,), np.float64) for r in rows], setting=setting)
    check_members(results, As, xs, None, 1.0, 0.0, trans)


def test_gemv_empty_list_returns_empty_list(xp):
    assert bt.gemv([], []) == []
