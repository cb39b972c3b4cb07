"""Batched triangular solves against LAPACK's residual and SciPy, on both backends.

Every test body runs on NumPy (the CPU backend) and CuPy (the GPU, skipped
without one) through the ``xp`` fixture.  The GPU bodies run with every
registered TrsvSetting forced and with the default chooser; the CPU backend has
one path, so it runs the default only (plus one check that ``setting=`` is
accepted).  Results are new arrays: on the GPU the memory pool is poisoned with
NaN first (``poison_pool``), so an element the kernel never writes shows up.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg
from hypothesis import assume, given
from hypothesis import strategies as st

import batched as bt
from batched.factorizations.settings import (THREAD_MAX, THREAD_WINS, TRSV_SETTINGS, TRSV_STAGED, TRSV_THREAD,
                                             TrsvSetting, choose_trsv_setting, plan_trsv)
from conftest import assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from residuals import trsv_backward_error
from strategies import (DTYPES, SETTINGS, TRSV_EDGES, arrange, random_array, triangular,
                        trsv_cases)

THRESHOLD = 30
SETTINGS_UNDER_TEST = [*TRSV_SETTINGS, None]
# The recursive design's window (256) and the chooser's switch-overs, both sides.
GPU_EDGES = (127, 128, 129, 255, 256, 257, 511, 512, 513, 600)


def refused(setting, n_max):
    """A forced thread or staged design refuses matrices past its max_unknowns (a
    ValueError, test_limited_designs_refuse_large_matrices); the tests over every setting
    leave those sizes to the other settings."""
    return setting is not None and setting.max_unknowns is not None and n_max > setting.max_unknowns


def skip_if_refused(setting, n):
    if refused(setting, n):
        pytest.skip(f"{setting} refuses n > {setting.max_unknowns} (test_limited_designs_refuse_large_matrices)")


def ratio(X, case):
    A, B = case.as_matrices()
    X = to_np(X)
    Xm = X[..., None] if case.vectors else X
    return trsv_backward_error(Xm, A, B, case.lower, case.trans, case.unit)


def trans_code(trans):
    return trans if isinstance(trans, int) else "NTC".index(trans.upper())


def result_shape(case):
    A, B = case.as_matrices()
    return B.shape[:-1] if case.vectors else B.shape


# --- property tests: residuals over sizes, flags, batches, layouts, dtypes -----------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(case=trsv_cases())
@SETTINGS
def test_solve_triangular_backward_error(xp, setting, case):
    gpu_only_setting(xp, setting)
    assume(not refused(setting, case.A.shape[-1]))
    A, B = case.args(xp)
    before = snapshot(A, B)
    dtype = np.result_type(case.A, case.B)
    poison_pool(xp, int(np.prod(result_shape(case))) * dtype.itemsize)
    X, info = bt.solve_triangular(A, B, lower=case.lower, trans=case.trans, unit_diagonal=case.unit,
                                  check=False, setting=setting)
    assert isinstance(X, xp.ndarray) and X.dtype == dtype
    assert tuple(X.shape) == result_shape(case)
    assert tuple(info.shape) == result_shape(case)[:-1 if case.vectors else -2]
    assert not np.any(to_np(info)), "no diagonal entry of these kinds is zero"
    r = ratio(X, case)
    assert r <= THRESHOLD, f"backward error {r} for {case!r}"
    assert_unchanged((A, B), before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(case=trsv_cases(), data=st.data())
@SETTINGS
def test_matches_scipy_on_well_conditioned(xp, setting, case, data):
    """Forward error against SciPy (float64/complex128) where the condition number is small."""
    gpu_only_setting(xp, setting)
    assume(not refused(setting, case.A.shape[-1]))
    if case.kind != "tri_dominant":
        case.kind = "tri_dominant"
        case.A = triangular(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), case.A.shape[:-2],
                            case.A.shape[-1], case.A.dtype, "tri_dominant", case.lower)
    A, B = case.args(xp)
    X = to_np(bt.solve_triangular(A, B, lower=case.lower, trans=case.trans, unit_diagonal=case.unit,
                                  setting=setting))
    assert tuple(X.shape) == result_shape(case)
    if X.size == 0:
        return
    Aw, Bw = case.as_matrices()
    wide = np.complex128 if np.result_type(Aw, Bw).kind == "c" else np.float64
    Af = np.broadcast_to(Aw, (*Bw.shape[:-2], *Aw.shape[-2:])).reshape(-1, *Aw.shape[-2:])
    Bf = Bw.reshape(-1, *Bw.shape[-2:])
    ref = np.stack([scipy.linalg.solve_triangular(a.astype(wide), b.astype(wide), lower=case.lower,
                                                  trans=trans_code(case.trans), unit_diagonal=case.unit, check_finite=False)
                    for a, b in zip(Af, Bf)])
    got = (X[..., None] if case.vectors else X).reshape(ref.shape)
    n = max(A.shape[-1], 1)
    scale = max(float(np.max(np.abs(ref), initial=0.0)), np.finfo(np.float64).tiny)
    err = float(np.max(np.abs(got - ref), initial=0.0)) / scale
    # unit_diagonal with a dominant off-diagonal part is not well conditioned: residual only
    if not case.unit:
        assert err <= 30 * n * np.finfo(X.dtype).eps, f"forward error {err} for {case!r}"
    assert ratio(X, case) <= THRESHOLD


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_tile_and_window_edge(xp, setting, dtype):
    """Sizes on both sides of every tile (4, 8, 16, 32) and, on the GPU, of the
    recursive window (256, 512) and the chooser's switch-overs; all flags."""
    gpu_only_setting(xp, setting)
    sizes = [n for n in TRSV_EDGES + GPU_EDGES if not refused(setting, n)]
    rng = rng_for("edges", str(dtype), str(setting))
    for n in sizes:
        for lower in (True, False):
            for trans in "NTC":
                unit = bool(rng.integers(2))
                A = triangular(rng, (3,), n, dtype, "tri_rand", lower)
                B = random_array(rng, (3, n, 2), dtype)
                layout = "F" if rng.integers(2) else "C"
                Ad = arrange(xp, A, layout)
                poison_pool(xp, B.nbytes)
                X = bt.solve_triangular(Ad, to_xp(xp, B), lower=lower, trans=trans, unit_diagonal=unit,
                                        setting=setting)
                r = trsv_backward_error(to_np(X), A, B, lower, trans, unit)
                assert r <= THRESHOLD, (n, lower, trans, unit, layout, r)


def _rows_layout(xp, A, ld: int, offset: int):
    """C-ordered A in a buffer whose rows are ``ld`` elements apart, starting ``offset``
    elements into it; the padding is NaN."""
    *batch, n, _ = A.shape
    count = int(np.prod(batch, dtype=np.int64))
    flat = xp.full(offset + count * n * ld, np.nan, dtype=A.dtype)
    view = flat[offset:].reshape(*batch, n, ld)
    view[..., :n] = to_xp(xp, A)
    return view[..., :n]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=str)
def test_rows_read_in_pieces(xp, dtype):
    """The 32-lane single tile reads a transposing op's rows (C-ordered 'N', F-ordered
    'T'/'C') in 16-byte pieces when every row starts at a 16-byte boundary and n is a
    multiple of a piece's elements: n from 17 to 32 (the pieces' sizes and the others;
    100, 101 and 128 for the designs around them on the same operands), every flag, rows
    packed, padded (ld n + 4: the last row's padding is the buffer's end) and, one
    element into the buffer, unaligned; the other triangle and the padding are NaN."""
    rng = rng_for("pieces", str(np.dtype(dtype)))
    sizes = (17, 20, 22, 30, 31, 32, 100, 101, 128)
    for n, lower, trans, unit in itertools.product(sizes, (True, False), "NTC", (False, True)):
        A = triangular(rng, (3,), n, dtype, "tri_rand", lower)
        B = random_array(rng, (3, n), dtype)
        for ld, offset in ((n, 0), (n + 4, 0), (n, 1)):
            if trans == "N":
                Ad = _rows_layout(xp, A, ld, offset)
            else:  # 'T' / 'C' transpose the stored view of an F-ordered A
                Ad = xp.swapaxes(_rows_layout(xp, np.swapaxes(A, -1, -2), ld, offset), -1, -2)
            poison_pool(xp, B.nbytes)
            X = bt.trsv(Ad, to_xp(xp, B), lower=lower, trans=trans, unit_diagonal=unit)
            r = trsv_backward_error(to_np(X)[..., None], A, B[..., None], lower, trans, unit)
            assert r <= THRESHOLD, (n, lower, trans, unit, ld, offset, r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=str)
def test_thread_design_pieces_padding_and_vectors(xp, dtype):
    """The thread design (a thread per solve): n = 1 to 16, so both instantiations (NB 8
    and 16) run with n == NB (the 16-byte pieces where the columns are aligned) and n <
    NB (the tile padded with the identity); every flag; matrices C- and F-ordered,
    packed, padded (ld n + 4) and one element into their buffer (unaligned); right-hand
    sides contiguous (their 16-byte pieces), strided and unaligned; the other triangle
    and the padding NaN; one matrix with a zero diagonal (info, X = B)."""
    if xp is np:
        pytest.skip("GPU design only (the CPU backend has one path)")
    rng = rng_for("thread", str(np.dtype(dtype)))
    setting = TRSV_THREAD
    for n, lower, trans, unit in itertools.product(range(1, THREAD_MAX + 1), (True, False), "NTC", (False, True)):
        A = triangular(rng, (3,), n, dtype, "tri_rand", lower)
        B = random_array(rng, (3, n), dtype)
        for (ld, offset), order, rhs in itertools.product(((n, 0), (n + 4, 0), (n, 1)), "CF",
                                                          ("packed", "strided", "unaligned")):
            if order == "C":
                Ad = _rows_layout(xp, A, ld, offset)
            else:
                Ad = xp.swapaxes(_rows_layout(xp, np.swapaxes(A, -1, -2), ld, offset), -1, -2)
            if rhs == "packed":
                Bd = to_xp(xp, B)
            elif rhs == "strided":
                Bd = to_xp(xp, np.stack([B, np.full_like(B, np.nan)], axis=-1))[..., 0]
            else:
                Bd = xp.concatenate([xp.full(1, np.nan, dtype), to_xp(xp, B).ravel()])[1:].reshape(B.shape)
            poison_pool(xp, B.nbytes)
            X = bt.trsv(Ad, Bd, lower=lower, trans=trans, unit_diagonal=unit, setting=setting)
            r = trsv_backward_error(to_np(X)[..., None], A, B[..., None], lower, trans, unit)
            assert r <= THRESHOLD, (n, lower, trans, unit, ld, offset, order, rhs, r)
        if not unit:
            Az = A.copy()
            Az[1, n // 2, n // 2] = 0
            X, info = bt.solve_triangular(to_xp(xp, Az), to_xp(xp, B), lower=lower, trans=trans, check=False,
                                          setting=setting)
            np.testing.assert_array_equal(to_np(info), [0, n // 2 + 1, 0])
            np.testing.assert_array_equal(to_np(X)[1], B[1])   # LAPACK leaves B as it was
            keep = np.array([True, False, True])
            assert trsv_backward_error(to_np(X)[keep][..., None], A[keep], B[keep][..., None], lower, trans,
                                       False) <= THRESHOLD


@pytest.mark.gpu
def test_default_takes_the_thread_design_for_uniform_single_right_hand_sides(xp, monkeypatch):
    """The default launches trsv_thread_kernel where THREAD_WINS says so (float32 8 x 8)
    for a stacked batch with one right-hand side, and the single tile for two right-hand
    sides, a list of matrices and float64 8 x 8; each answer checked."""
    if xp is np:
        pytest.skip("the default chooses GPU kernels")
    from batched.factorizations import trsv as trsv_module

    launched = []
    get_kernel = trsv_module.build.get_kernel
    monkeypatch.setattr(trsv_module.build, "get_kernel",
                        lambda source, name: launched.append(name) or get_kernel(source, name))
    rng = rng_for("thread-default")
    for dtype, k, as_list, thread in ((np.float32, None, False, True), (np.float32, 2, False, False),
                                      (np.float32, None, True, False), (np.float64, None, False, False)):
        A = triangular(rng, (5,), 8, dtype, "tri_rand", True)
        B = random_array(rng, (5, 8) if k is None else (5, 8, k), dtype)
        Ad = [to_xp(xp, a) for a in A] if as_list else to_xp(xp, A)
        Bd = [to_xp(xp, b) for b in B] if as_list else to_xp(xp, B)
        launched.clear()
        X = bt.trsv(Ad, Bd)
        X = np.stack([to_np(x) for x in X]) if as_list else to_np(X)
        solves = [name for name in launched if name.startswith("trsv")]
        assert len(solves) == 1 and solves[0].startswith("trsv_thread_kernel") == thread, \
            (dtype, k, as_list, launched)
        Xc = X[..., None] if k is None else X
        Bc = B[..., None] if k is None else B
        assert trsv_backward_error(Xc, A, Bc, True, "N", False) <= THRESHOLD


@pytest.mark.gpu
@pytest.mark.parametrize("setting", [TRSV_THREAD, TRSV_STAGED], ids=str)
def test_limited_designs_refuse_large_matrices(xp, setting):
    """Forced past their max_unknowns (THREAD_MAX, STAGED_MAX) the thread and staged
    designs are a ValueError before any work; an empty batch or no right-hand sides
    launch nothing and pass."""
    if xp is np:
        pytest.skip("settings choose GPU kernels")
    most = setting.max_unknowns
    n = most + 1
    A = xp.asarray(np.eye(n) * 2 + np.zeros((3, n, n)))
    with pytest.raises(ValueError, match=f"at most {most} unknowns"):
        bt.trsv(A, xp.ones((3, n)), setting=setting)
    with pytest.raises(ValueError, match=f"at most {most} unknowns"):
        bt.trsv([A[0], A[1][:5, :5]], [xp.ones(n), xp.ones(5)], setting=setting)
    assert bt.trsv(A[:0], xp.ones((0, n)), setting=setting).shape == (0, n)
    np.testing.assert_array_equal(to_np(bt.trsv(A[:1, :most, :most], xp.ones((1, most)), setting=setting)),
                                  np.full((1, most), 0.5))


@pytest.mark.gpu
@pytest.mark.parametrize("setting", [TrsvSetting(32, 4, window=256), TrsvSetting(32, 8, window=256), None],
                         ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
def test_recursive_levels(xp, setting, dtype):
    """n = 1100: five windows, so the recursion's updates span 1, 2, 1 and 4 windows."""
    gpu_only_setting(xp, setting)
    if xp is np:
        pytest.skip("GPU design only (the CPU backend has one path)")
    rng = rng_for("levels", str(np.dtype(dtype)))
    for lower, trans in ((True, "N"), (False, "N"), (True, "C"), (False, "T")):
        A = triangular(rng, (2,), 1100, dtype, "tri_dominant", lower)
        B = random_array(rng, (2, 1100), dtype)
        X = bt.trsv(to_xp(xp, A), to_xp(xp, B), lower=lower, trans=trans, setting=setting)
        assert trsv_backward_error(to_np(X)[..., None], A, B[..., None], lower, trans, False) <= THRESHOLD


# --- BLAS trsv ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
def test_trsv_is_solve_triangular_with_blas_defaults(xp, dtype, trans):
    rng = rng_for("trsv", str(dtype), trans)
    A = triangular(rng, (4,), 20, dtype, "tri_dominant", True)
    x = random_array(rng, (4, 20), dtype)
    Ad, xd = to_xp(xp, A), to_xp(xp, x)
    got = to_np(bt.trsv(Ad, xd, trans=trans))   # lower=True by default
    assert trsv_backward_error(got[..., None], A, x[..., None], True, trans, False) <= THRESHOLD
    np.testing.assert_array_equal(to_np(xd), x)  # not in place
    ref = to_np(bt.solve_triangular(Ad, xd, lower=True, trans=trans))
    np.testing.assert_allclose(got, ref, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_trsv_zero_diagonal_gives_inf_only_there(xp, dtype):
    """BLAS has no singularity check: the zero pivot's matrix gets Inf/NaN, no other."""
    rng = rng_for("trsvzero", str(dtype))
    A = triangular(rng, (5,), 9, dtype, "tri_dominant", True)
    A[3, 4, 4] = 0
    x = random_array(rng, (5, 9), dtype)
    got = to_np(bt.trsv(to_xp(xp, A), to_xp(xp, x)))
    assert not np.all(np.isfinite(got[3]))
    keep = np.arange(5) != 3
    assert trsv_backward_error(got[keep][..., None], A[keep], x[keep][..., None], True, "N", False) <= THRESHOLD


# --- numerical failure -------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 9, 40])
def test_zero_diagonal_info_and_linalgerror(xp, setting, dtype, n):
    gpu_only_setting(xp, setting)
    skip_if_refused(setting, n)
    rng = rng_for("zero", str(dtype), n)
    count = 7
    A = triangular(rng, (count,), n, dtype, "tri_dominant", False)
    cols = {1: n - 1, 4: 0, 5: n // 2}
    for b, j in cols.items():
        A[b, j, j] = 0
        if b == 5 and n > 2:
            A[b, n - 1, n - 1] = -0.0   # the first zero is reported, -0.0 is zero too
    B = random_array(rng, (count, n, 3), dtype)
    Ad, Bd = to_xp(xp, A), to_xp(xp, B)
    poison_pool(xp, B.nbytes)
    X, info = bt.solve_triangular(Ad, Bd, check=False, setting=setting)
    info = to_np(info)
    assert info.dtype == np.int32 and info.shape == (count,)
    expected = np.zeros(count, np.int32)
    for b, j in cols.items():
        expected[b] = j + 1
    np.testing.assert_array_equal(info, expected)
    X = to_np(X)
    bad = expected > 0
    np.testing.assert_array_equal(X[bad], B[bad])   # LAPACK leaves B as it was
    assert trsv_backward_error(X[~bad], A[~bad], B[~bad], False, 0, False) <= THRESHOLD
    with pytest.raises(np.linalg.LinAlgError) as err:
        bt.solve_triangular(Ad, Bd, setting=setting)
    assert "[1, 4, 5]" in str(err.value)
    # unit_diagonal never reads the diagonal: no failure
    X, info = bt.solve_triangular(Ad, Bd, unit_diagonal=True, check=False, setting=setting)
    assert not np.any(to_np(info))
    assert trsv_backward_error(to_np(X), A, B, False, 0, True) <= THRESHOLD


def test_linalgerror_names_index_tuples_and_single_matrices(xp):
    rng = rng_for("tuples")
    A = triangular(rng, (2, 3), 6, np.float64, "tri_dominant", True)
    A[1, 2, 3, 3] = 0
    A[0, 0, 0, 0] = 0
    B = random_array(rng, (2, 3, 6), np.float64)
    with pytest.raises(np.linalg.LinAlgError) as err:
        bt.solve_triangular(to_xp(xp, A), to_xp(xp, B), lower=True)
    assert "(0, 0)" in str(err.value) and "(1, 2)" in str(err.value)
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1-based column 4\)"):
        bt.solve_triangular(to_xp(xp, A[1, 2]), to_xp(xp, B[1, 2]), lower=True)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [8, 70])
def test_nan_and_inf_stay_in_their_own_matrix(xp, setting, dtype, n):
    gpu_only_setting(xp, setting)
    skip_if_refused(setting, n)
    rng = rng_for("nan", str(dtype), n)
    count = 6
    A = triangular(rng, (count,), n, dtype, "tri_dominant", True)
    A[2, n - 1, 0] = np.nan
    A[4, n - 1, n // 2] = np.inf
    B = random_array(rng, (count, n), dtype)
    X = to_np(bt.solve_triangular(to_xp(xp, A), to_xp(xp, B), lower=True, setting=setting))
    assert not np.all(np.isfinite(X[2])) and not np.all(np.isfinite(X[4]))
    keep = np.isin(np.arange(count), [2, 4], invert=True)
    assert np.all(np.isfinite(X[keep]))
    assert trsv_backward_error(X[keep][..., None], A[keep], B[keep][..., None], True, 0, False) <= THRESHOLD


# --- big batches -----------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
@pytest.mark.parametrize("trans", "NT")
def test_many_small_matrices(xp, setting, dtype, trans):
    """70,000 8x8 solves on the GPU (more than 65,535 blocks); 700 on the CPU."""
    gpu_only_setting(xp, setting)
    count = 700 if xp is np else 70_000
    rng = rng_for("many", str(np.dtype(dtype)), trans)
    A = triangular(rng, (count,), 8, dtype, "tri_rand", False)
    B = random_array(rng, (count, 8), dtype)
    poison_pool(xp, B.nbytes)
    X = to_np(bt.solve_triangular(to_xp(xp, A), to_xp(xp, B), trans=trans, setting=setting))
    assert trsv_backward_error(X[..., None], A, B[..., None], False, trans, False) <= THRESHOLD


def test_empty_batches_and_sizes(xp):
    for a_shape, b_shape, out_shape in (((0, 4, 4), (0, 4), (0, 4)), ((3, 0, 0), (3, 0), (3, 0)),
                                        ((2, 5, 5), (2, 5, 0), (2, 5, 0)), ((5, 5), (5,), (5,))):
        A = np.eye(a_shape[-1]) * 2 + np.zeros(a_shape)
        X, info = bt.solve_triangular(to_xp(xp, A), to_xp(xp, np.ones(b_shape)), check=False)
        assert tuple(X.shape) == out_shape
        assert tuple(info.shape) == a_shape[:-2]
    # k == 0 still reports a zero diagonal, as LAPACK does
    A = np.zeros((2, 3, 3))
    A[1] = np.eye(3)
    _, info = bt.solve_triangular(to_xp(xp, A), to_xp(xp, np.ones((2, 3, 0))), check=False)
    np.testing.assert_array_equal(to_np(info), [1, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64], ids=str)
def test_subnormal_diagonal_is_not_zero_without_right_hand_sides(xp, dtype):
    """k == 0 checks the diagonal outside the kernels; a subnormal entry is not zero
    (CuPy's own comparison kernels flush float32 subnormals to zero)."""
    tiny = np.finfo(np.dtype(dtype).type(0).real.dtype).tiny / 16
    A = np.stack([np.eye(3, dtype=dtype)] * 2)
    A[1, 2, 2] = tiny
    _, info = bt.solve_triangular(to_xp(xp, A), to_xp(xp, np.ones((2, 3, 0), dtype)), check=False)
    np.testing.assert_array_equal(to_np(info), [0, 0])
    infos = [bt.solve_triangular([to_xp(xp, a) for a in A], [to_xp(xp, np.ones((3, 0), dtype))] * 2,
                                 check=False)[1]]
    np.testing.assert_array_equal(to_np(infos[0]), [0, 0])


# --- pointer arrays and variable sizes ---------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(ns=st.lists(st.integers(0, 70), min_size=0, max_size=10), k=st.sampled_from([0, 1, 3]),
       dtype=st.sampled_from(DTYPES), lower=st.booleans(), trans=st.sampled_from("NTC"),
       unit=st.booleans(), orders=st.lists(st.sampled_from("CF"), min_size=10, max_size=10),
       prepared=st.booleans(), seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_variable_and_pointer_lists(xp, setting, ns, k, dtype, lower, trans, unit, orders, prepared, seed):
    """k = 0: lists of vectors; k > 0: lists of (n_i, k) matrices.  Equal n_i make a
    PointerBatch, mixed ones a VariableBatch."""
    gpu_only_setting(xp, setting)
    if setting is not None and setting.max_unknowns is not None:  # its sizes (an assume would reject most lists)
        ns = [n % (setting.max_unknowns + 1) for n in ns]
    rng = np.random.default_rng(seed)
    As = [triangular(rng, (), n, dtype, "tri_rand", lower) for n in ns]
    Bs = [random_array(rng, (n,) if k == 0 else (n, k), dtype) for n in ns]
    Ad = [arrange(xp, a, orders[i]) for i, a in enumerate(As)]
    before = snapshot(*Ad)
    A_arg = (bt.PointerBatch(Ad) if len(set(ns)) <= 1 else bt.VariableBatch(Ad)) if prepared else Ad
    Xs, info = bt.solve_triangular(A_arg, to_xp(xp, Bs), lower=lower, trans=trans, unit_diagonal=unit,
                                   check=False, setting=setting)
    assert isinstance(Xs, list) and len(Xs) == len(ns)
    assert tuple(info.shape) == (len(ns),) and not np.any(to_np(info))
    for i, (a, b, x) in enumerate(zip(As, Bs, Xs)):
        x = to_np(x)
        assert x.shape == b.shape, i
        cols = (b.shape[0], 1 if k == 0 else k)
        r = trsv_backward_error(x.reshape(cols), a, b.reshape(cols), lower, trans, unit)
        assert r <= THRESHOLD, (i, a.shape, r)
    assert_unchanged(Ad, before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
def test_list_forms_and_reuse(xp, setting):
    gpu_only_setting(xp, setting)
    rng = rng_for("listforms")
    As = [triangular(rng, (), 12, np.float64, "tri_dominant", True) for _ in range(4)]
    batch = bt.PointerBatch(to_xp(xp, As))
    X = random_array(rng, (4, 12), np.float64)
    for b_arg, bs in ((to_xp(xp, X), list(X)), (to_xp(xp, X[0]), [X[0]] * 4), (to_xp(xp, list(X)), list(X))):
        for call in range(2):   # the prepared batch serves repeated calls
            got = bt.trsv(batch, b_arg, setting=setting)
            # one array in, one array out; a list or a broadcast vector gives a list
            assert isinstance(got, list) != (b_arg is not None and getattr(b_arg, "ndim", 1) == 2)
            for a, b, x in zip(As, bs, got):
                assert trsv_backward_error(to_np(x)[:, None], a, b[:, None], True, "N", False) <= THRESHOLD
    # (count, n, k) as one array: one array back, and info for each member
    Bk = random_array(rng, (4, 12, 3), np.float64)
    Xk, info = bt.solve_triangular(batch, to_xp(xp, Bk), lower=True, check=False, setting=setting)
    assert isinstance(Xk, xp.ndarray) and Xk.shape == (4, 12, 3) and to_np(info).tolist() == [0] * 4
    for a, b, x in zip(As, Bk, to_np(Xk)):
        assert trsv_backward_error(x, a, b, True, "N", False) <= THRESHOLD
    assert bt.solve_triangular([], []) == []
    # a zero diagonal in member 2 of a list
    As[2][5, 5] = 0
    with pytest.raises(np.linalg.LinAlgError, match=r"\[2\]"):
        bt.solve_triangular(to_xp(xp, As), to_xp(xp, X), lower=True, setting=setting)


@pytest.mark.parametrize("setting", TRSV_SETTINGS, ids=str)
def test_setting_is_accepted_on_the_cpu_backend(setting):
    rng = rng_for("cpu-setting", str(setting))
    A = triangular(rng, (2,), 5, np.float64, "tri_dominant", True)
    b = random_array(rng, (2, 5), np.float64)
    x = bt.trsv(A, b, setting=setting)
    assert trsv_backward_error(x[..., None], A, b[..., None], True, "N", False) <= THRESHOLD


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize("a_shape, b_shape, fragment", [
    ((3, 4, 5), (3, 4), "square"), ((4,), (4,), "square"), ((3, 4, 4), (3, 5), "n = 4"),
    ((3, 4, 4), (2, 4, 1), "broadcast"), ((4, 4), (), "B must have shape"),
    ((3, 4, 4), (3, 3, 2), "n = 4"),
])
def test_bad_shapes_raise_naming_the_argument(xp, a_shape, b_shape, fragment):
    A, B = to_xp(xp, np.ones(a_shape)), to_xp(xp, np.ones(b_shape))
    with pytest.raises(ValueError, match=fragment):
        bt.solve_triangular(A, B)


def test_bad_arguments(xp):
    A, b = to_xp(xp, np.eye(3)[None] * 2), to_xp(xp, np.ones((1, 3)))
    with pytest.raises(TypeError, match="A has dtype int32"):
        bt.solve_triangular(to_xp(xp, np.eye(3, dtype=np.int32)), b)
    with pytest.raises(TypeError, match="x has dtype float16"):
        bt.trsv(A, to_xp(xp, np.ones(3, np.float16)))
    with pytest.raises(ValueError, match="trans"):
        bt.solve_triangular(A, b, trans="X")
    with pytest.raises(ValueError, match="trans"):
        bt.solve_triangular(A, b, trans=3)
    with pytest.raises(TypeError, match="lower"):
        bt.solve_triangular(A, b, lower="yes")
    with pytest.raises(TypeError, match="check"):
        bt.solve_triangular(A, b, check=None)
    with pytest.raises(TypeError, match="TrsvSetting"):
        bt.trsv(A, b, setting=bt.GEMV_SETTINGS[0])
    with pytest.raises(ValueError, match="compiled settings"):
        bt.trsv(A, b, setting=TrsvSetting(2, 2))
    with pytest.raises(ValueError, match="square"):
        bt.solve_triangular([np.ones((2, 3))], [np.ones(2)])
    with pytest.raises(ValueError, match=r"B\[1\]"):
        bt.solve_triangular([np.eye(2), np.eye(3)], [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="same number of columns"):
        bt.solve_triangular([np.eye(2), np.eye(2)], [np.ones((2, 1)), np.ones((2, 2))])
    with pytest.raises(ValueError, match="2 members"):
        bt.solve_triangular([np.eye(2)], [np.ones(2), np.ones(2)])


@pytest.mark.gpu
def test_mixed_devices_raise(xp):
    if xp is np:
        pytest.skip("needs both backends")
    with pytest.raises(ValueError, match="on one device"):
        bt.solve_triangular(xp.eye(3), np.ones(3))


# --- planner (pure, on the CPU) -------------------------------------------------------------


def test_chooser_picks_registered_settings_and_designs():
    from batched.device_functions import registered
    from batched.factorizations import trsv as trsv_module

    names = {p.name: s for p, s in registered().items()}["trsv.cu"]
    for n, transposed, itemsize in itertools.product((*TRSV_EDGES, *GPU_EDGES, 1024, 1025, 5000, 100_000),
                                                     (False, True), (4, 8, 16)):
        s = choose_trsv_setting(n, 1000, 132, transposed=transposed, itemsize=itemsize)
        assert s in TRSV_SETTINGS
        wide = itemsize >= 8
        # the pipelined design from 129 (8-byte not transposed, session 40's H200 sweep), 65
        # (float not transposed) or 193 (transposed) to 1024 (session 33's A/B)
        first = 193 if transposed else 129 if wide else 65
        assert s.pipelined == (first <= n <= 1024), (n, transposed, itemsize, s)
        if s.pipelined:
            assert s == bt.pipelined_trsv_setting(n, transposed=transposed, itemsize=itemsize)
        # elsewhere (trsv_sweep.json): recursive past 1024
        recursive = n > 1024
        assert s.recursive == recursive, (n, transposed, itemsize, s)
        if n <= 16:   # one register tile: the smallest group that covers n
            assert s.single_tile(n) and n <= s.group_threads <= max(4, 2 * n)
        elif not transposed and n <= 32:  # the 32-lane register tile
            assert s.single_tile(n) and s.group_threads == 32, (n, s)
        elif s.pipelined or recursive:
            assert not s.single_tile(n)
        elif not transposed:  # below the pipelined range: one warp (8 x 4 lanes)
            assert n < first and s.group_threads == 32 and not s.single_tile(n), (n, s)
        else:  # below the pipelined range: 4 lanes to 32, 16 (8-byte elements, to 96) or 4 to 64, a warp
            expect = 4 if n <= 32 else 16 if wide and n <= 96 else 4 if n <= 64 else 32
            assert n < first and s.group_threads == expect and not s.single_tile(n), (n, s)
        for layout in ("uniform", "pointer", "variable"):
            for dt in bt.SUPPORTED_DTYPES:
                assert trsv_module.kernel_name(layout, dt, s) in names
                if s.single_tile(n):
                    assert trsv_module.tile_kernel_name(layout, dt, s.group_threads) in names
    threads = [s for s in TRSV_SETTINGS if s.thread]
    assert len(names) == 3 * 4 * (len(TRSV_SETTINGS) - len(threads) + len(trsv_module.TILE_LANES)
                                  + len(trsv_module.THREAD_NB))
    assert trsv_module.TILE_LANES == [4, 8, 16, 32]


def test_chooser_takes_the_thread_design_only_where_it_won():
    """With a uniform batch's element type the thread design exactly at THREAD_WINS
    (every size within THREAD_MAX); without one (pointer and variable batches, more
    right-hand sides) never."""
    assert set(THREAD_WINS) == {"f", "d", "F", "D"}
    for char, n, transposed in itertools.product("fdFD", range(1, 1100), (False, True)):
        itemsize = np.dtype(char).itemsize
        s = choose_trsv_setting(n, 1000, 132, transposed=transposed, itemsize=itemsize, uniform_dtype=char)
        assert (s == TRSV_THREAD) == (n in THREAD_WINS[char]), (char, n, s)
        assert s.thread == (s == TRSV_THREAD)
        if n in THREAD_WINS[char]:
            assert n <= THREAD_MAX
        else:
            assert s == choose_trsv_setting(n, 1000, 132, transposed=transposed, itemsize=itemsize)
        assert not choose_trsv_setting(n, 1000, 132, transposed=transposed, itemsize=itemsize).thread


def test_transposed_tiles_of_aligned_rows_take_the_pieces():
    """Transposed, 17-32 unknowns: the 32-lane single tile when its rows can be read in
    16-byte pieces (aligned, n a multiple of a piece's elements), four lanes otherwise."""
    from batched.factorizations.trsv import tile_pieces

    for n, itemsize in itertools.product(range(17, 33), (4, 8, 16)):
        pieces = tile_pieces(n, itemsize)
        assert pieces == (itemsize < 16 and n % (16 // itemsize) == 0)
        s = choose_trsv_setting(n, 1000, 132, transposed=True, itemsize=itemsize, pieces=pieces)
        assert s == (TrsvSetting(32, 1) if pieces else TrsvSetting(4, 1)), (n, itemsize, s)
        assert choose_trsv_setting(n, transposed=True, itemsize=itemsize) == TrsvSetting(4, 1)


def test_pipelined_choice_is_registered_and_measured_range_only():
    """bt.pipelined_trsv_setting: a registered pipelined setting from 129 (8-byte
    elements, not transposed), 65 (float not transposed) or 193 (transposed) to 1024,
    eight warps a round past 384; None elsewhere."""
    for n, transposed, itemsize in itertools.product((*TRSV_EDGES, *GPU_EDGES, 1024, 1025, 5000),
                                                     (False, True), (4, 8, 16)):
        s = bt.pipelined_trsv_setting(n, transposed=transposed, itemsize=itemsize)
        wide = itemsize >= 8
        first = 193 if transposed else 129 if wide else 65
        assert (s is not None) == (first <= n <= 1024), (n, transposed, itemsize, s)
        if s is not None:
            assert s in TRSV_SETTINGS and s.pipelined and (s.dim_y == 8) == (n > 384), (n, s)
            assert plan_trsv(s, n, itemsize, 1000, 227 * 1024).block == 32 * s.dim_y


def test_thread_plan_is_registers_only_and_refuses_large_matrices():
    """The thread design: THREAD_BLOCK threads a block, one solve a thread, no shared
    memory; the smallest instantiation that holds n; past THREAD_MAX a ValueError."""
    from batched.factorizations.settings import THREAD_BLOCK, THREAD_NB, TrsvPlan

    setting = TRSV_THREAD
    assert setting in TRSV_SETTINGS and not setting.single_tile(1) and str(setting) == "trsv_thread"
    for n in range(0, THREAD_MAX + 1):
        assert setting.thread_nb(n) == min(nb for nb in THREAD_NB if nb >= n)
        for items in (1, 127, 128, 70_000):
            assert plan_trsv(setting, n, 8, items, 227 * 1024) == TrsvPlan(-(-items // THREAD_BLOCK), THREAD_BLOCK, 0,
                                                                          THREAD_BLOCK, 0)
    with pytest.raises(ValueError, match=f"at most {THREAD_MAX} unknowns"):
        plan_trsv(setting, THREAD_MAX + 1, 8, 1, 227 * 1024)


def test_staged_plan_holds_two_buffers_a_warp():
    """The staged design: up to four warps a block, each with its two buffers of n
    columns an odd number of 16-byte units apart, within the device's shared memory up to
    STAGED_MAX unknowns in every element size; a ValueError past it."""
    from batched.factorizations.settings import STAGED_MAX, staged_ld, staged_warp_bytes

    limit = 227 * 1024
    assert TRSV_STAGED.staged and TRSV_STAGED.max_unknowns == STAGED_MAX == 64 and not TRSV_STAGED.single_tile(1)
    for n, itemsize in itertools.product(range(1, STAGED_MAX + 1), (4, 8, 16)):
        ld = staged_ld(n, itemsize)
        assert ld >= n and (ld * itemsize) % 16 == 0 and (ld * itemsize // 16) % 2 == 1
        assert ld * itemsize - n * itemsize < 32
        plan = plan_trsv(TRSV_STAGED, n, itemsize, 70_000, limit)
        assert 1 <= plan.groups <= 4 and plan.block == 32 * plan.groups and plan.xlen == n
        assert plan.smem == plan.groups * staged_warp_bytes(n, itemsize) <= limit
        assert staged_warp_bytes(n, itemsize) >= 16 + 2 * n * ld * itemsize + n * itemsize
        assert plan.groups == 4 or (plan.groups + 1) * staged_warp_bytes(n, itemsize) > limit
    with pytest.raises(ValueError, match=f"at most {STAGED_MAX} unknowns"):
        plan_trsv(TRSV_STAGED, STAGED_MAX + 1, 8, 1, limit)


@pytest.mark.parametrize("setting", [s for s in TRSV_SETTINGS if not s.thread and not s.staged], ids=str)
def test_plan_fits_shared_memory(setting):
    limit = 227 * 1024
    for n in (1, 33, 256, 600, 5000):
        for itemsize in (4, 16):
            plan = plan_trsv(setting, n, itemsize, 70_000, limit)
            assert plan.block % setting.group_threads == 0 and plan.block <= 1024
            if setting.single_tile(n):   # registers only: groups of <= 32 lanes, 256 threads a block
                assert (plan.block, plan.smem, plan.xlen) == (256, 0, 0)
                assert plan.groups == 256 // setting.group_threads and plan.grid == -(-70_000 // plan.groups)
                continue
            assert plan.groups * setting.group_bytes(n, itemsize) == plan.smem <= limit
            assert plan.grid >= 1 and plan.grid * plan.groups >= min(70_000, plan.grid * plan.groups)
            assert plan.xlen == (setting.window or n)
            if setting.recursive:   # the recursive design's shared memory does not grow with n
                assert plan.smem == plan_trsv(setting, 10 * n, itemsize, 70_000, limit).smem
    if not setting.recursive:
        with pytest.raises(ValueError, match="recursive"):
            plan_trsv(setting, 100_000, 16, 1, limit)


@pytest.mark.gpu
@pytest.mark.parametrize("pair", [(np.float32, np.float64), (np.complex64, np.complex128)], ids=str)
def test_mixed_precision_keeps_single_precision_subnormals(xp, pair):
    """A float32 / complex64 triangle with subnormal entries, a float64 / complex128 b:
    the promoted solve is that of the exactly widened triangle, bit for bit (uniform
    and list batches); CuPy's own casts (-ftz=true) would read them as zeros."""
    dt_a, dt_b = pair
    rng = rng_for("trsv-mixed-subnormal", str(np.dtype(dt_a)))
    for n in (5, 40):
        A = triangular(rng, (3,), n, dt_a, "tri_scaled_ufl", True)
        tiny = np.finfo(dt_a).tiny
        A[..., n - 1, :3] = np.array([tiny / 3, -tiny / 1000, tiny / 2**22], np.float32)
        B = random_array(rng, (3, n), dt_b)
        wide = A.astype(dt_b)
        np.testing.assert_array_equal(to_np(bt.trsv(to_xp(xp, A), to_xp(xp, B))),
                                      to_np(bt.trsv(to_xp(xp, wide), to_xp(xp, B))))
        got = bt.trsv([to_xp(xp, a) for a in A], [to_xp(xp, b) for b in B])
        want = bt.trsv([to_xp(xp, a) for a in wide], [to_xp(xp, b) for b in B])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(to_np(g), to_np(w))
