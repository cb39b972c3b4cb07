"""batched.kblas: GEMV, SYMV and HEMV on one large matrix, on both backends.

Every test body runs on NumPy (the CPU backend) and CuPy (the GPU, skipped
without one) through the ``xp`` fixture.  Results are compared with a float64 /
complex128 reference through the componentwise bound of ``residuals`` (an
n-epsilon-scaled tolerance); outputs are NaN-poisoned ``out=`` buffers; the
unread triangle of SYMV/HEMV holds NaN.  Sizes above 1000 run on the GPU only
(the CPU suite stays short); every registered setting is forced on the GPU
around its tile edges, with one and several blocks per block row/column.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import batched as bt
from batched.kblas import (KBLAS_COLS_SETTINGS, KBLAS_ROWS_SETTINGS, KBLAS_SETTINGS, KblasColsSetting,
                           KblasRowsSetting, KblasSetting)
from batched.device_functions import registered
from conftest import assert_unchanged, nan_like_out, rng_for, snapshot, to_np
from residuals import gemv_error_ratio
from strategies import random_array, triangle_with_nan

kgemv_module = importlib.import_module("batched.kblas.gemv")
ksymv_module = importlib.import_module("batched.kblas.symv")
settings_module = importlib.import_module("batched.kblas.settings")

THRESHOLD = 30
SIZES = (0, 1, 31, 32, 33, 1000, 4097, 10001)
CPU_MAX = 1000  # larger sizes: GPU only
ACCURATE = (np.dtype(np.float64), np.dtype(np.complex128))
ALL_DTYPES = tuple(bt.SUPPORTED_DTYPES)
ROUTINES = ("gemv", "symv", "hemv")


def skip_large_on_cpu(xp, n):
    if xp is np and n > CPU_MAX:
        pytest.skip(f"n = {n} runs on the GPU only (CPU suite keeps n <= {CPU_MAX})")


# --- operands --------------------------------------------------------------------------


def place(xp, a, order="F", offset=0):
    """``a`` on backend ``xp``: Fortran or C order, or a view at row and column
    ``offset`` of a larger matrix of that order (misaligned for any offset
    that is not a multiple of 128 bytes).  The surrounding entries are NaN, so
    a read outside the view shows up in the result."""
    m, n = a.shape
    if offset:
        big = np.full((m + offset + 3, n + offset + 5), np.nan, dtype=a.dtype)
        big[offset:offset + m, offset:offset + n] = a
        parent = xp.asfortranarray(xp.asarray(big)) if order == "F" else xp.ascontiguousarray(xp.asarray(big))
        return parent[offset:offset + m, offset:offset + n]
    dev = xp.asarray(a)
    return xp.asfortranarray(dev) if order == "F" else xp.ascontiguousarray(dev)


def call(routine, A, x, y=None, **kw):
    fn = {"gemv": bt.kblas.gemv, "symv": bt.kblas.symv, "hemv": bt.kblas.hemv}[routine]
    return fn(A, x, y, **kw)


def make_case(rng, routine, n, dtype, trans="N", lower=True, cols=None):
    """(stored A, reference op(A) for trans 'N', x, result length)."""
    if routine == "gemv":
        m, k = n, (n + 3 if cols is None else cols)
        A = random_array(rng, (m, k), dtype)
        ref = A.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
        ref = ref if trans == "N" else (ref.T.conj() if trans == "C" else ref.T)
        return A, ref, random_array(rng, (ref.shape[1],), dtype), ref.shape[0]
    A, ref = triangle_with_nan(rng, n, dtype, lower, routine == "hemv")
    return A, ref, random_array(rng, (n,), dtype), n


def kwargs_for(routine, trans, lower):
    return {"trans": trans} if routine == "gemv" else {"lower": lower}


# --- correctness over sizes, layouts, triangles ------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ACCURATE, ids=str)
@pytest.mark.parametrize("trans", "NTC")
@pytest.mark.parametrize("order", "FC")
def test_gemv_sizes(xp, n, dtype, trans, order):
    skip_large_on_cpu(xp, n)
    if n > CPU_MAX and (order == "C" or trans == "C"):
        pytest.skip("largest sizes: F-ordered N and T cover the kernels")
    rng = rng_for("kgemv", n, str(dtype), trans, order)
    A, ref, x, rows = make_case(rng, "gemv", n, dtype, trans)
    y = random_array(rng, (rows,), dtype)
    Ad, xd, yd = place(xp, A, order), xp.asarray(x), xp.asarray(y)
    before = snapshot(Ad, xd, yd)
    out = nan_like_out(xp, (rows,), dtype)
    result = bt.kblas.gemv(Ad, xd, yd, alpha=1.5, beta=-0.5, trans=trans, out=out)
    assert result is out
    assert gemv_error_ratio(to_np(result), ref, x, y, 1.5, -0.5, "N") < THRESHOLD
    assert_unchanged((Ad, xd, yd), before)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("routine", ("symv", "hemv"))
@pytest.mark.parametrize("dtype", ACCURATE, ids=str)
@pytest.mark.parametrize("lower", (True, False), ids=("lower", "upper"))
@pytest.mark.parametrize("order", "FC")
def test_symv_hemv_sizes_one_triangle(xp, n, routine, dtype, lower, order):
    skip_large_on_cpu(xp, n)
    if n > CPU_MAX and (order == "C" or dtype.kind == "c") and n != 4097:
        pytest.skip("n = 10001: F-ordered float64 covers the kernels")
    rng = rng_for("ksymv", n, routine, str(dtype), lower, order)
    A, ref, x, _ = make_case(rng, routine, n, dtype, lower=lower)
    y = random_array(rng, (n,), dtype)
    Ad, xd, yd = place(xp, A, order), xp.asarray(x), xp.asarray(y)
    before = snapshot(Ad, xd, yd)
    out = nan_like_out(xp, (n,), dtype)
    result = call(routine, Ad, xd, yd, alpha=0.75, beta=2.0, lower=lower, out=out)
    assert result is out
    assert gemv_error_ratio(to_np(result), ref, x, y, 0.75, 2.0, "N") < THRESHOLD
    assert_unchanged((Ad, xd, yd), before)


@pytest.mark.parametrize("routine", ROUTINES)
@pytest.mark.parametrize("offset", (1, 3, 17))
@pytest.mark.parametrize("order", "FC")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_submatrix_views_at_misaligned_offsets(xp, routine, offset, order, dtype):
    rng = rng_for("koffset", routine, offset, order, str(dtype))
    for n, trans, lower in ((70, "N", True), (97, "T", False), (129, "C", True)):
        A, ref, x, rows = make_case(rng, routine, n, dtype, trans, lower)
        Ad = place(xp, A, order, offset)
        out = nan_like_out(xp, (rows,), dtype)
        result = call(routine, Ad, xp.asarray(x), out=out, **kwargs_for(routine, trans, lower))
        assert gemv_error_ratio(to_np(result), ref, x, None, 1.0, 0.0, "N") < THRESHOLD, (n, trans, lower)


# --- BLAS scalar rules -------------------------------------------------------------------


@pytest.mark.parametrize("routine", ROUTINES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.0, 0.0), (0.0, 2.5), (-2.0, 1.0), (0.5, -3.0)])
@pytest.mark.parametrize("dtype", ACCURATE, ids=str)
def test_alpha_beta_rules(xp, routine, alpha, beta, dtype):
    """beta == 0 never reads y (NaN there); alpha == 0 never reads A or x (NaN there)."""
    rng = rng_for("kscalars", routine, alpha, beta, str(dtype))
    n = 45
    A, ref, x, rows = make_case(rng, routine, n, dtype, "T", lower=False)
    y = random_array(rng, (rows,), dtype)
    if beta == 0:
        y = np.full_like(y, np.nan)
    if alpha == 0:
        A, x = np.full_like(A, np.nan), np.full_like(x, np.nan)
    out = nan_like_out(xp, (rows,), dtype)
    result = call(routine, place(xp, A), xp.asarray(x), xp.asarray(y), alpha=alpha, beta=beta, out=out,
                  **kwargs_for(routine, "T", False))
    got = to_np(result)
    assert np.all(np.isfinite(got))
    if alpha == 0:
        np.testing.assert_array_equal(got, (dtype.type(beta) * y).astype(dtype) if beta else np.zeros_like(y))
    else:
        assert gemv_error_ratio(got, ref, x, None if beta == 0 else y, alpha, beta, "N") < THRESHOLD


@pytest.mark.parametrize("routine", ROUTINES)
def test_complex_scalars(xp, routine):
    rng = rng_for("kcomplex", routine)
    A, ref, x, rows = make_case(rng, routine, 40, np.complex128, "C", lower=True)
    y = random_array(rng, (rows,), np.complex128)
    got = to_np(call(routine, place(xp, A, "C"), xp.asarray(x), xp.asarray(y), alpha=0.5 - 2j, beta=1j,
                     **kwargs_for(routine, "C", True)))
    assert gemv_error_ratio(got, ref, x, y, 0.5 - 2j, 1j, "N") < THRESHOLD


@pytest.mark.parametrize("routine", ROUTINES)
def test_empty_inner_dimension_applies_beta(xp, routine):
    if routine != "gemv":  # symv: n = 0 means an empty result
        got = to_np(call(routine, xp.zeros((0, 0)), xp.zeros(0), xp.zeros(0), beta=2.0))
        assert got.shape == (0,)
        return
    y = np.arange(1.0, 6.0)
    for trans, shape in (("N", (5, 0)), ("T", (0, 5))):
        got = to_np(bt.kblas.gemv(xp.zeros(shape), xp.zeros(0), xp.asarray(y), beta=2.0, trans=trans,
                                  out=nan_like_out(xp, (5,), np.float64)))
        np.testing.assert_array_equal(got, 2 * y)


# --- vectors and outputs -------------------------------------------------------------------


@pytest.mark.parametrize("routine", ROUTINES)
@pytest.mark.parametrize("dtype", ACCURATE, ids=str)
def test_strided_and_reversed_vectors(xp, routine, dtype):
    rng = rng_for("kstrided", routine, str(dtype))
    n = 77
    A, ref, x, rows = make_case(rng, routine, n, dtype, "N", lower=False)
    xbuf = xp.asarray(random_array(rng, (3 * len(x),), dtype))
    xd = xbuf[::-3]
    ybuf = xp.asarray(random_array(rng, (2 * rows,), dtype))
    yd = ybuf[::2]
    outbuf = nan_like_out(xp, (5 * rows,), dtype)
    out = outbuf[::5]
    result = call(routine, place(xp, A), xd, yd, alpha=-1.0, beta=0.5, out=out,
                  **kwargs_for(routine, "N", False))
    assert result is out
    assert gemv_error_ratio(to_np(out), ref, to_np(xd), to_np(yd), -1.0, 0.5, "N") < THRESHOLD
    untouched = np.delete(to_np(outbuf), np.arange(0, 5 * rows, 5))
    assert np.all(np.isnan(untouched)), "elements between the strided outputs were written"


@pytest.mark.parametrize("routine", ROUTINES)
def test_out_is_y_in_place_and_new_result(xp, routine):
    rng = rng_for("kinplace", routine)
    A, ref, x, rows = make_case(rng, routine, 66, np.float64, "T", lower=True)
    y = random_array(rng, (rows,), np.float64)
    yd = xp.asarray(y.copy())  # a copy on NumPy too: the reference needs the old y
    result = call(routine, place(xp, A), xp.asarray(x), yd, alpha=2.0, beta=-1.0, out=yd,
                  **kwargs_for(routine, "T", True))
    assert result is yd
    assert gemv_error_ratio(to_np(yd), ref, x, y, 2.0, -1.0, "N") < THRESHOLD
    fresh = call(routine, place(xp, A), xp.asarray(x), **kwargs_for(routine, "T", True))
    assert isinstance(fresh, xp.ndarray) and fresh.shape == (rows,)
    assert gemv_error_ratio(to_np(fresh), ref, x, None, 1.0, 0.0, "N") < THRESHOLD


@pytest.mark.parametrize("routine", ROUTINES)
def test_out_aliasing_x_gives_private_copy_result(xp, routine):
    rng = rng_for("kalias", routine)
    n = 50
    A, ref, x, _ = make_case(rng, routine, n, np.float64, "N", lower=True, cols=n)
    xd = xp.asarray(x.copy())  # a copy on NumPy too: the reference needs the old x
    result = call(routine, place(xp, A), xd, out=xd, **kwargs_for(routine, "N", True))
    assert result is xd
    assert gemv_error_ratio(to_np(xd), ref, x, None, 1.0, 0.0, "N") < THRESHOLD


@pytest.mark.parametrize("dts", [(np.float32, np.float64, None), (np.complex64, np.complex128, np.complex64),
                                 (np.float64, np.complex64, None)], ids=str)
@pytest.mark.parametrize("routine", ROUTINES)
def test_mixed_precision_promotes(xp, routine, dts):
    rng = rng_for("kmixed", routine, str(dts))
    A, ref, _, rows = make_case(rng, routine, 40, dts[0], "N", lower=True)
    x = random_array(rng, (ref.shape[1],), dts[1])
    y = None if dts[2] is None else random_array(rng, (rows,), dts[2])
    expected = np.result_type(*[d for d in dts if d is not None])
    result = call(routine, place(xp, A), xp.asarray(x), None if y is None else xp.asarray(y), beta=1.0)
    assert result.dtype == expected
    assert gemv_error_ratio(to_np(result), ref, x, y, 1.0, 1.0 if y is not None else 0.0, "N") < THRESHOLD


# --- every setting forced --------------------------------------------------------------------


def _fitting(routine):
    return [(s, dt) for s in KBLAS_SETTINGS for dt in ALL_DTYPES
            if s.fits("symv" if routine == "hemv" else routine, dt)]


@pytest.mark.parametrize("routine", ROUTINES)
@pytest.mark.parametrize("parts", (1, 3, 0))
@pytest.mark.parametrize("base", KBLAS_SETTINGS, ids=str)
def test_every_setting_forced(xp, routine, parts, base):
    """Sizes on both sides of the tile edge, a misaligned view, one and several
    blocks per block row/column (parts 1 and 3; 0 lets the chooser decide)."""
    setting = base.with_parts(parts)
    for dtype in ALL_DTYPES:
        if not base.fits("symv" if routine == "hemv" else routine, dtype):
            continue
        if xp is np and dtype not in ACCURATE:
            continue  # the CPU backend ignores the setting: two dtypes suffice there
        rng = rng_for("ksetting", routine, str(base), parts, str(dtype))
        nb = base.nb
        cases = [(nb - 1, "N", True, 0, "F"), (nb, "T", False, 1, "F"), (nb + 1, "C", True, 3, "C"),
                 (3 * nb + 5, "N", False, 17, "F"), (3 * nb + 5, "T", True, 1, "C")]
        if routine == "gemv":  # tall tiles: several of them, with and without 16-byte loads, N and T kernels
            tall = base.tall_rows(dtype)
            cases += [(2 * tall + 40, "T", True, 0, "F"), (2 * tall + 37, "C", False, 1, "F"),
                      (2 * tall + 40, "N", True, 17, "C"), (2 * tall + 40, "N", True, 0, "F"),
                      (2 * tall + 37, "T", False, 3, "C")]
        for n, trans, lower, offset, order in cases:
            A, ref, x, rows = make_case(rng, routine, n, dtype, trans, lower)
            y = random_array(rng, (rows,), dtype)
            out = nan_like_out(xp, (rows,), dtype)
            result = call(routine, place(xp, A, order, offset), xp.asarray(x), xp.asarray(y), alpha=1.25,
                          beta=-1.0, out=out, setting=setting, **kwargs_for(routine, trans, lower))
            ratio = gemv_error_ratio(to_np(result), ref, x, y, 1.25, -1.0, "N")
            assert ratio < THRESHOLD, (str(dtype), n, trans, lower, offset, order, ratio)


@pytest.mark.parametrize("setting", KBLAS_ROWS_SETTINGS, ids=str)
@pytest.mark.parametrize("routine", ("symv", "hemv"))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_symv_strips_forced(xp, setting, routine, dtype):
    """SYMV/HEMV's strips (kblas_symv_strip_kernel) forced: orders on both sides of a
    block's rows and of several blocks, both triangles, views at offsets (the rows'
    origin), both orders (C: the other triangle, conjugated for HEMV), strided and
    misaligned x, beta = 0 with an uninitialized y and beta != 0, NaN in the unread
    triangle (never read)."""
    if xp is np and dtype not in ACCURATE:
        pytest.skip("the CPU backend ignores the setting: two dtypes suffice there")
    rng = rng_for("kstrip", routine, str(setting), str(dtype))
    rows = setting.rows(dtype)
    cases = [(1, True, 0, "F", 1, 0.0), (rows - 1, False, 0, "F", 1, 2.0), (rows, True, 1, "C", 2, 0.0),
             (rows + 1, False, 3, "F", 1, -1.0), (3 * rows + 5, True, 17, "F", 3, 0.5),
             (3 * rows + 5, False, 1, "C", 1, 0.0), (257, True, 0, "F", 1, 1.0), (300, False, 5, "C", 1, 0.0),
             (2 * rows + 3, False, 17, "F", 1, 1.0), (2 * rows + 3, True, 17, "C", 2, 0.0),
             (max(1, rows - 3), False, 29, "F", 1, 0.0), (5, True, 31, "C", 1, 1.0)]
    for n, lower, offset, order, step, beta in cases:
        A, ref, x, _ = make_case(rng, routine, n, dtype, lower=lower)
        y = random_array(rng, (n,), dtype)
        xs = xp.asarray(np.repeat(x, step))[::step]
        out = nan_like_out(xp, (n,), dtype)
        result = call(routine, place(xp, A, order, offset), xs, xp.asarray(y), alpha=0.75, beta=beta,
                      lower=lower, out=out, setting=setting)
        ratio = gemv_error_ratio(to_np(result), ref, x, y, 0.75, beta, "N")
        assert ratio < THRESHOLD, (n, lower, offset, order, step, beta, ratio)


def _one_pass_forced(xp, tag, setting, dtype, cases):
    """A forced one-pass setting on each (m, cols, trans, order, offset, x step) case, with
    alpha, beta and a NaN-poisoned out."""
    if xp is np and dtype not in ACCURATE:
        pytest.skip("the CPU backend ignores the setting: two dtypes suffice there")
    rng = rng_for(tag, str(setting), str(dtype))
    for m, cols, trans, order, offset, step in cases:
        A, ref, x, rows = make_case(rng, "gemv", m, dtype, trans, cols=cols)
        y = random_array(rng, (rows,), dtype)
        xs = xp.asarray(np.repeat(x, step))[::step]
        out = nan_like_out(xp, (rows,), dtype)
        result = bt.kblas.gemv(place(xp, A, order, offset), xs, xp.asarray(y), alpha=0.5, beta=2.0, trans=trans,
                               out=out, setting=setting)
        ratio = gemv_error_ratio(to_np(result), ref, x, y, 0.5, 2.0, "N")
        assert ratio < THRESHOLD, (m, cols, trans, order, offset, step, ratio)


@pytest.mark.parametrize("setting", KBLAS_ROWS_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_rows_setting_forced(xp, setting, dtype):
    """The one-pass GEMV-N: fewer rows than a block's and several blocks, the first and
    last blocks' masked rows (offsets), columns around the column lanes and an unroll,
    16-byte loads and element loads (odd leading dimensions), conj, beta, strided x."""
    cases = [(1, 1, "N", "F", 0), (7, 5, "N", "F", 0), (8, 64, "N", "F", 1), (9, 65, "T", "C", 0),
             (33, 300, "C", "C", 3), (300, 1000, "N", "F", 17), (257, 1501, "N", "F", 0), (64, 33, "T", "C", 1),
             (130, 2 * 1024 + 7, "C", "C", 0), (1, 40, "T", "C", 0), (1, 1, "C", "C", 0), (40, 1, "N", "F", 0)]
    _one_pass_forced(xp, "krows", setting, dtype, [case + (2,) for case in cases])


@pytest.mark.parametrize("setting", KBLAS_COLS_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_cols_setting_forced(xp, setting, dtype):
    """The one-pass GEMV-T, a warp per column: fewer columns than a block's warps and
    several blocks, rows around a lane step and an unroll, masked first and last steps
    (offsets), 16-byte loads and element loads (odd leading dimensions, strided x),
    conj, beta."""
    _one_pass_forced(xp, "kcols", setting, dtype, [
        (1, 1, "T", "F", 0, 1), (5, 7, "T", "F", 0, 1), (64, 8, "T", "F", 1, 1), (65, 9, "N", "C", 0, 1),
        (300, 33, "C", "F", 3, 2), (1000, 300, "T", "F", 17, 1), (1501, 257, "T", "F", 0, 1),
        (33, 64, "N", "C", 1, 2), (2 * 1024 + 7, 130, "C", "F", 0, 1), (40, 1, "N", "C", 0, 1),
        (1, 40, "T", "F", 0, 1)])


def test_cols_chooser_takes_short_float64_and_float32_matrices_by_their_bytes():
    cols_plan = kgemv_module.cols_plan
    assert cols_plan(1024, 1024, True, np.float64) == (KblasColsSetting(16, 8), 128)
    assert cols_plan(2048, 2048, True, np.float64) == (KblasColsSetting(8, 4), 512)
    assert cols_plan(4096, 4096, True, np.float64) == (KblasColsSetting(4, 8), 512)
    assert cols_plan(4096, 4096, True, np.float32) == (KblasColsSetting(4, 8), 512)
    for m, n, dt in ((8192, 8192, np.float64), (8192, 8192, np.float32), (1024, 1024, np.complex128),
                     (8192, 64, np.float64)):
        assert cols_plan(m, n, True, dt) is None, (m, n, dt)
    assert cols_plan(1024, 1024, False, np.float64) is None  # N kernel
    assert cols_plan(10, 10, True, np.float32, KblasColsSetting(8, 4)) == (KblasColsSetting(8, 4), 3)
    with pytest.raises(ValueError, match="transposing op"):
        cols_plan(10, 10, False, np.float32, KblasColsSetting(8, 4))


@pytest.mark.parametrize("setting, refused, message", [
    (KBLAS_ROWS_SETTINGS[0], (("T", "F"), ("C", "F"), ("N", "C")), "column-major view only"),
    (KBLAS_COLS_SETTINGS[0], (("N", "F"), ("T", "C"), ("C", "C")), "transposing op of the column-major view only")],
    ids=("rows", "cols"))
def test_one_pass_setting_refuses_the_other_op_of_the_view_before_any_work(xp, setting, refused, message):
    if xp is np:
        pytest.skip("the CPU backend ignores settings")
    A = xp.ones((40, 40), order="F")
    for trans, order in refused:
        out = nan_like_out(xp, (40,), np.float64)
        Ao = A if order == "F" else xp.ascontiguousarray(A)
        with pytest.raises(ValueError, match=message):
            bt.kblas.gemv(Ao, xp.ones(40), trans=trans, out=out, setting=setting)
        assert np.all(np.isnan(to_np(out)))


def test_rows_chooser_takes_short_matrices_by_their_bytes():
    rows_plan = kgemv_module.rows_plan
    assert rows_plan(1024, 1024, 0, False, np.float64) == (KblasRowsSetting(16, 4), 128)
    assert rows_plan(2048, 2048, 5, False, np.float64) == (KblasRowsSetting(16, 4), 257)
    assert rows_plan(4096, 4096, 0, False, np.float64) == (KblasRowsSetting(16, 8), 256)
    assert rows_plan(1000, 1000, 0, False, np.complex128) == (KblasRowsSetting(8, 4), 250)
    assert rows_plan(2048, 2048, 0, False, np.complex128) == (KblasRowsSetting(8, 8), 256)
    assert rows_plan(1024, 1024, 0, False, np.complex64) == (KblasRowsSetting(16, 4), 128)
    assert rows_plan(2048, 2048, 0, False, np.complex64) == (KblasRowsSetting(16, 8), 128)
    for m, n, dt in ((1024, 1024, np.float32), (5120, 5120, np.float64), (3072, 3072, np.complex64),
                     (4096, 4096, np.complex128), (512, 8192, np.float64), (70000, 64, np.float64),
                     (33, 33, np.float64)):
        assert rows_plan(m, n, 0, False, dt) is None, (m, n, dt)
    assert rows_plan(1024, 1024, 0, True, np.float64) is None  # T kernel: the tall tiles
    assert rows_plan(1024, 1024, 0, False, np.float64, KblasSetting(32, 4)) is None  # a forced tall setting
    assert rows_plan(10, 10, 0, False, np.float32, KblasRowsSetting(8, 8)) == (KblasRowsSetting(8, 8), 1)
    with pytest.raises(ValueError, match="column-major view only"):
        rows_plan(10, 10, 0, True, np.float32, KblasRowsSetting(8))


@pytest.mark.parametrize("routine", ROUTINES)
def test_repeated_calls_reuse_the_segment_tickets(xp, routine):
    """The last block of each segment resets its ticket: a second and third
    call on the same stream (other sizes, other settings) are still right."""
    if xp is np:
        pytest.skip("tickets exist on the GPU only")
    rng = rng_for("ktickets", routine)
    for n, base in ((300, KBLAS_SETTINGS[0]), (301, KBLAS_SETTINGS[3]), (300, KBLAS_SETTINGS[0])):
        A, ref, x, rows = make_case(rng, routine, n, np.float64, "T", lower=True)
        got = to_np(call(routine, place(xp, A), xp.asarray(x), setting=base.with_parts(5),
                         **kwargs_for(routine, "T", True)))
        assert gemv_error_ratio(got, ref, x, None, 1.0, 0.0, "N") < THRESHOLD


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_symv_and_gemv_in_turn_on_one_stream(xp, dtype):
    """SYMV/HEMV (the strips by default, the walks forced with their parts) and GEMV
    (its partial sums and per-stream tickets) called in turn on one stream, other
    sizes, settings and parts, views at offsets: every result right."""
    if xp is np:
        pytest.skip("tickets exist on the GPU only")
    rng = rng_for("kshare", str(dtype))
    calls = [("symv", 33, True, 0, "F", 0), ("gemv", 301, "T", 0, "F", 5), ("hemv", 1000, False, 17, "C", 1),
             ("symv", 4097, True, 1, "F", 3), ("gemv", 300, "N", 3, "C", 4), ("hemv", 70, False, 3, "C", 0),
             ("symv", 31, False, 0, "F", 0)]
    for routine, n, flag, offset, order, parts in calls:
        trans, lower = (flag, True) if routine == "gemv" else ("N", flag)
        A, ref, x, rows = make_case(rng, routine, n, dtype, trans, lower)
        y = random_array(rng, (rows,), dtype)
        out = nan_like_out(xp, (rows,), dtype)
        setting = None if parts == 0 else KblasSetting(32, 4, parts)
        result = call(routine, place(xp, A, order, offset), xp.asarray(x), xp.asarray(y), alpha=-0.5, beta=1.5,
                      out=out, setting=setting, **kwargs_for(routine, trans, lower))
        ratio = gemv_error_ratio(to_np(result), ref, x, y, -0.5, 1.5, "N")
        assert ratio < THRESHOLD, (routine, n, flag, offset, order, parts, ratio)


# --- bad input: named errors before any work, outputs untouched ------------------------------


def _bad_calls(xp):
    A = xp.ones((6, 6))
    x = xp.ones(6)
    return [
        (ValueError, "A must be square", lambda out: bt.kblas.symv(xp.ones((6, 5)), xp.ones(5), out=out)),
        (ValueError, "A must be square", lambda out: bt.kblas.hemv(xp.ones((5, 6)), xp.ones(6), out=out)),
        (ValueError, "x has shape", lambda out: bt.kblas.symv(A, xp.ones(5), out=out)),
        (ValueError, "x has shape", lambda out: bt.kblas.gemv(xp.ones((6, 4)), x, out=out)),
        (ValueError, "x has shape", lambda out: bt.kblas.gemv(xp.ones((4, 6)), x, trans="T", out=out)),
        (ValueError, "y has shape", lambda out: bt.kblas.gemv(A, x, xp.ones(5), beta=1.0, out=out)),
        (ValueError, "y has shape", lambda out: bt.kblas.hemv(A, x, xp.ones(7), out=out)),
        (ValueError, "A must be one 2-D matrix", lambda out: bt.kblas.gemv(xp.ones((2, 6, 6)), x, out=out)),
        (ValueError, "x must be a 1-D vector", lambda out: bt.kblas.symv(A, xp.ones((6, 1)), out=out)),
        (TypeError, "A has dtype int64", lambda out: bt.kblas.gemv(xp.ones((6, 6), dtype=np.int64), x, out=out)),
        (TypeError, "x has dtype float16", lambda out: bt.kblas.symv(A, xp.ones(6, dtype=np.float16), out=out)),
        (TypeError, "y has dtype bool", lambda out: bt.kblas.hemv(A, x, xp.ones(6, dtype=bool), out=out)),
        (TypeError, "alpha is complex", lambda out: bt.kblas.symv(A, x, alpha=1j, out=out)),
        (ValueError, "beta must be finite", lambda out: bt.kblas.gemv(A, x, x, beta=np.nan, out=out)),
        (ValueError, "trans must be one of", lambda out: bt.kblas.gemv(A, x, trans="X", out=out)),
        (TypeError, "lower must be True or False", lambda out: bt.kblas.symv(A, x, lower="L", out=out)),
        (TypeError, "setting must be a KblasSetting", lambda out: bt.kblas.gemv(A, x, out=out,
                                                                                setting=bt.GEMV_SETTINGS[0])),
        (TypeError, "setting must be a KblasSetting, KblasRowsSetting or None", lambda out: bt.kblas.symv(
            A, x, out=out, setting=KBLAS_COLS_SETTINGS[0])),
        (ValueError, "not one of the compiled settings", lambda out: bt.kblas.hemv(
            A, x, out=out, setting=KblasRowsSetting(4, 4))),
        (ValueError, "not one of the compiled settings", lambda out: bt.kblas.gemv(
            A, x, out=out, setting=KblasRowsSetting(4, 4))),
        (ValueError, "not one of the compiled settings", lambda out: bt.kblas.gemv(
            A, x, trans="T", out=out, setting=KblasColsSetting(5, 8))),
        (ValueError, "not one of the compiled settings", lambda out: bt.kblas.symv(
            A, x, out=out, setting=KblasSetting(128, 4))),
        (ValueError, "does not fit complex128", lambda out: bt.kblas.gemv(
            A.astype(np.complex128), x, out=out.astype(np.complex128), setting=KblasSetting(64, 8))),
        (ValueError, "out has shape", lambda out: bt.kblas.gemv(A, x, out=xp.ones(5))),
        (TypeError, "out has dtype", lambda out: bt.kblas.gemv(A, x, out=xp.ones(6, dtype=np.float32))),
    ]


def test_bad_input_raises_named_errors_before_any_work(xp):
    for kind, message, bad in _bad_calls(xp):
        out = nan_like_out(xp, (6,), np.float64)
        with pytest.raises(kind, match=message):
            bad(out)
        assert np.all(np.isnan(to_np(out))), f"out was touched by a call that raised {message!r}"


# --- planning (pure, CPU) ----------------------------------------------------------------------


def test_registry_holds_every_fitting_setting():
    reg = {path.name: names for path, names in registered().items()}
    gemv_expected = {kgemv_module.kernel_name(dt, s, t) for s, dt in _fitting("gemv") for t in (False, True)}
    gemv_expected |= {kgemv_module.rows_kernel_name(dt, s) for s in KBLAS_ROWS_SETTINGS for dt in ALL_DTYPES}
    gemv_expected |= {kgemv_module.cols_kernel_name(dt, s) for s in KBLAS_COLS_SETTINGS for dt in ALL_DTYPES}
    symv_expected = {name for s, dt in _fitting("symv") for name in ksymv_module.kernel_names(dt, s)}
    symv_expected |= {ksymv_module.kernel_names(dt, s)[0] for s in KBLAS_ROWS_SETTINGS for dt in ALL_DTYPES}
    assert reg["kblas_gemv.cu"] == gemv_expected
    assert reg["kblas_symv.cu"] == symv_expected
    assert 0 < len(gemv_expected) + len(symv_expected) <= 110  # CI compiles each for sm_90


@pytest.mark.parametrize("n", (1, 31, 33, 1000, 2048, 2049, 10001, 30000))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("sms", (1, 16, 132))
def test_default_plans_are_registered_and_cover_the_walk(n, dtype, sms):
    names = {path.name: s for path, s in registered().items()}
    for shift in (0, 1, 15):
        for trans in (False, True):
            s, segments, walk = kgemv_module.plan(n, n + 7, shift, trans, dtype, sms=sms)
            assert kgemv_module.kernel_name(dtype, KblasSetting(s.nb, s.q), trans) in names["kblas_gemv.cu"]
            assert 1 <= s.parts <= max(walk, 1)
            rows = s.tall_rows(dtype)  # tall tiles: rows x nb
            assert segments * (s.nb if trans else rows) >= (n + 7 if trans else n + shift)
            moving, tile = (n + shift, rows) if trans else (n + 7, s.nb)
            assert walk == -(-moving // tile)
            one_pass = kgemv_module.rows_plan(n, n + 7, shift, trans, dtype, sms=sms)
            if one_pass is not None:
                r, blocks = one_pass
                assert kgemv_module.rows_kernel_name(dtype, r) in names["kblas_gemv.cu"]
                assert (blocks - 1) * r.rows(dtype) < n + shift <= blocks * r.rows(dtype)
            warp_a_column = kgemv_module.cols_plan(n, n + 7, trans, dtype, sms=sms)
            if warp_a_column is not None:
                c, blocks = warp_a_column
                assert kgemv_module.cols_kernel_name(dtype, c) in names["kblas_gemv.cu"]
                assert (blocks - 1) * c.warps < n + 7 <= blocks * c.warps
        s, blocks = ksymv_module.plan(n, shift, dtype, sms=sms)
        assert set(ksymv_module.kernel_names(dtype, KblasSetting(s.nb, s.q))) <= names["kblas_symv.cu"]
        assert blocks * s.nb >= n + shift and 1 <= s.parts <= max(blocks - 1, 1)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_symv_strips_by_the_matrix_bytes(dtype):
    """The strips (n^2 elements read) while the whole matrix is at most
    SYMV_STRIP_MAX_BYTES, the walks (n^2 / 2) above; a compiled, registered setting."""
    names = {path.name: set(n) for path, n in registered().items()}["kblas_symv.cu"]
    limit = settings_module.SYMV_STRIP_MAX_BYTES
    largest = int((limit // dtype.itemsize) ** 0.5)
    for n in (1, 33, 1000, largest, largest + 1, 10001):
        s = settings_module.choose_symv_strip(dtype, n)
        assert (s is not None) == (n * n * dtype.itemsize <= limit), n
        if s is not None:
            assert s in KBLAS_ROWS_SETTINGS and ksymv_module.kernel_names(dtype, s)[0] in names


def test_settings_fit_the_hardware_limits():
    for s in KBLAS_SETTINGS:
        assert s.threads <= 1024 and s.nb % 32 == 0 and s.nb % s.q == 0
        for dt in ALL_DTYPES:
            if s.fits("symv", dt):
                assert (s.nb * (s.nb + 1) + 2 * s.nb + s.q * s.nb) * dt.itemsize <= 48 * 1024
    assert len({str(s) for s in KBLAS_SETTINGS}) == len(KBLAS_SETTINGS)
    assert all(any(s.fits(r, dt) for s in KBLAS_SETTINGS) for r in settings_module.ROUTINES for dt in ALL_DTYPES)


def test_numpy_full_from_triangle_ignores_the_other_triangle():
    rng = rng_for("kfull")
    for lower in (True, False):
        for hermitian in (True, False):
            A, ref = triangle_with_nan(rng, 9, np.complex128, lower, hermitian)
            np.testing.assert_array_equal(ksymv_module.full_from_triangle(A, lower, hermitian), ref)


def test_replays_apply_to_plain_cupy_calls_only():
    """A NumPy call, an unhashable letter or a scalar that is not a Python number has no
    replay key: those calls take the full path (the GPU replays: tests/test_plans.py)."""
    from batched.kblas import _common as cm

    A, x = np.eye(3), np.ones(3)
    assert cm.replay_key(("gemv", str, "N", None), A, x, None, None, 1.0, 0.0) is None
    assert cm.replay_key(("gemv", list, ["N"], None), A, x, None, None, 1.0, 0.0) is None
    assert cm.replay_key(("gemv", str, "N", None), A, x, None, None, np.float64(1.0), 0.0) is None
    assert cm.try_replay(None, A, x, None, None, 1.0, 0.0) is None
    np.testing.assert_allclose(bt.kblas.gemv(A, x, trans=["N"][0]), x)
