"""Batched QR (geqrf, orgqr, qr) and least squares (gels, lstsq) the LAPACK way.

Every test body runs on NumPy (the CPU backend) and CuPy (the GPU, skipped
without one) through the ``xp`` fixture.  GPU bodies run with every registered
QrSetting forced and with the default chooser; the CPU backend has one path.
Ratios (LAPACK's xQRT01 / xQRT17 style, threshold 30):

    ||A - Q R|| / (max(m, n) ||A|| eps),    ||I - Q^H Q|| / (m eps),
    ||A^H (b - A x)|| / (max(m, n, k) ||A|| (||b - A x|| + ||A|| ||x||) eps),

the last one the normal-equation residual of a backward-stable least-squares
solution (x solves a problem with ||dA|| <= c eps ||A||).  eps is the result
precision's.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations.qr import QRResult, geqrf, gels, lstsq, orgqr, qr
from batched.factorizations.qr_settings import (BLOCKED_SETTINGS, FUSED_SETTINGS, GLOBAL_SETTINGS, QR_SETTINGS,
                                                QrSetting, check_qr_setting, choose_qr_setting, orgqr_dims,
                                                plan_qr)
from conftest import assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from strategies import DTYPES, MATRIX_LAYOUTS, SETTINGS, arrange, batch_shapes, random_array

THRESHOLD = 30
SETTINGS_UNDER_TEST = [*QR_SETTINGS, None]
CPU_MAX = 24        # sizes drawn on the CPU (the sweep is O(n) NumPy calls per matrix)
GPU_MAX = 200
KINDS = ("random", "ill", "rank_deficient", "zero", "ufl", "ofl")


def eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def wide(a):
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def norm1(a):
    """Largest column 1-norm of each matrix (LAPACK's 'O' norm), shape batch."""
    return np.abs(wide(a)).sum(axis=-2).max(axis=-1, initial=0.0)


def H(a):
    return np.swapaxes(a, -1, -2).conj()


def factor_ratios(A, Q, R):
    """(max ||A - Q R|| / (max(m,n) ||A|| eps), max ||I - Q^H Q|| / (m eps)) over the batch."""
    e = eps(to_np(Q).dtype)
    A, Q, R = wide(A), wide(to_np(Q)), wide(to_np(R))
    m, n = A.shape[-2:]
    if A.size == 0 or m == 0:
        return 0.0, 0.0
    tiny = np.finfo(np.float64).tiny
    with np.errstate(all="ignore"):
        r1 = norm1(A - Q @ R) / (max(m, n) * np.maximum(norm1(A), tiny) * e)
        I = np.eye(Q.shape[-1])
        r2 = norm1(I - H(Q) @ Q) / (m * e)
    r1 = np.where(np.isnan(r1), np.inf, r1)
    r2 = np.where(np.isnan(r2), np.inf, r2)
    return float(np.max(r1, initial=0.0)), float(np.max(r2, initial=0.0))


def lstsq_ratio(A, B, X, dtype):
    """Normal-equation residual of a least-squares solution (see the module docstring)."""
    A, B, X = wide(A), wide(B), wide(to_np(X))
    m, n = A.shape[-2:]
    k = B.shape[-1]
    if X.size == 0:
        return 0.0
    Ab = np.broadcast_to(A, (*X.shape[:-2], m, n))
    # scale each problem by 1 / ||A|| (x unchanged), so that matrices near the
    # overflow or underflow thresholds give representable residuals
    s = norm1(Ab)[..., None, None]
    s = np.where((s == 0) | ~np.isfinite(s), 1.0, s)
    Ab, B = Ab / s, np.broadcast_to(B, (*X.shape[:-2], m, k)) / s
    r = B - Ab @ X
    num = norm1(H(Ab) @ r)
    den = max(m, n, k) * norm1(Ab) * (norm1(r) + norm1(Ab) * norm1(X)) * eps(dtype)
    with np.errstate(all="ignore"):
        ratio = np.where(num == 0, 0.0, num / np.maximum(den, np.finfo(np.float64).tiny))
    return float(np.max(np.where(np.isnan(ratio), np.inf, ratio), initial=0.0))


def matrices(rng, batch, m, n, dtype, kind):
    """Stacked (batch..., m, n) matrices of a named kind (MAGMA-tester style).

    ill: singular values geometric from 1 to 1e-12 (1e-5 in single precision);
    rank_deficient: rank min(m, n) - 1 through a repeated column (R has a
    tiny, not exactly zero, diagonal entry); zero; ufl / ofl: random scaled
    near the underflow / overflow thresholds."""
    dtype = np.dtype(dtype)
    A = random_array(rng, (*batch, m, n), dtype)
    k = min(m, n)
    if kind == "ill" and k > 1:
        cond = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
        U = np.linalg.qr(random_array(rng, (*batch, m, k), np.complex128 if dtype.kind == "c" else np.float64))[0]
        V = np.linalg.qr(random_array(rng, (*batch, n, k), np.complex128 if dtype.kind == "c" else np.float64))[0]
        s = np.geomspace(1, cond, k)
        A = ((U * s[..., None, :]) @ H(V)).astype(dtype)
    elif kind == "rank_deficient" and n > 1:
        A[..., :, -1] = A[..., :, 0]
    elif kind == "zero":
        A = np.zeros_like(A)
    elif kind in ("ufl", "ofl"):
        fi = np.finfo(dtype)
        scale = float(fi.tiny) * 2**10 if kind == "ufl" else float(fi.max) / 2**10 / max(m, n, 1)
        A = (A * scale).astype(dtype)
    return A


def run_qr(xp, A, setting):
    """(Q, R) through geqrf + orgqr (the setting applies to geqrf)."""
    h, tau, info = geqrf(A, setting=setting)
    assert not np.any(to_np(info))
    m, n = h.shape[-2:]
    Q, info = orgqr(h, tau)
    return Q, xp.triu(h[..., :min(m, n), :]), h, tau


# --- property tests -------------------------------------------------------------------------


@st.composite
def qr_cases(draw, max_dim):
    m = draw(st.integers(0, max_dim))
    n = draw(st.integers(0, max_dim))
    dtype = draw(st.sampled_from(DTYPES))
    batch = draw(batch_shapes())
    layout = draw(st.sampled_from(MATRIX_LAYOUTS))
    kind = draw(st.sampled_from(KINDS))
    seed = draw(st.integers(0, 2**32 - 1))
    return m, n, dtype, batch, layout, kind, seed


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_qr_residuals(xp, setting, data):
    gpu_only_setting(xp, setting)
    m, n, dtype, batch, layout, kind, seed = data.draw(qr_cases(CPU_MAX if xp is np else GPU_MAX))
    if setting is not None and setting.design == "fused" and max(m, n) > 64:
        m, n = min(m, 64), min(n, 64)   # the fused design's shared memory limit
    A = matrices(np.random.default_rng(seed), batch, m, n, dtype, kind)
    Ad = arrange(xp, A, layout)
    before = snapshot(Ad)
    k = min(m, n)
    poison_pool(xp, A.nbytes)
    Q, R, h, tau = run_qr(xp, Ad, setting)
    assert_unchanged((Ad,), before)
    assert Q.shape == (*batch, m, k) and R.shape == (*batch, k, n) and tau.shape == (*batch, k)
    assert h.dtype == dtype and tau.dtype == dtype
    r1, r2 = factor_ratios(A, Q, R)
    assert r1 <= THRESHOLD and r2 <= THRESHOLD, (r1, r2, m, n, dtype, batch, layout, kind)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_gels_normal_equation_residual(xp, setting, data):
    gpu_only_setting(xp, setting)
    top = CPU_MAX if xp is np else GPU_MAX
    n = data.draw(st.integers(0, min(top, 64) if setting is not None and setting.design == "fused" else top))
    m = data.draw(st.integers(n, max(n, min(top, 64) if setting is not None and setting.design == "fused"
                                         else top)))
    dtype = data.draw(st.sampled_from(DTYPES))
    batch = data.draw(batch_shapes())
    form = data.draw(st.sampled_from(("vectors", "one", "matrix")))
    kind = data.draw(st.sampled_from(("random", "ill", "ufl", "ofl")))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    A = matrices(rng, batch, m, n, dtype, kind)
    if form == "vectors":
        B = random_array(rng, (*batch, m), dtype)
    elif form == "one":
        B = random_array(rng, (m,), dtype)
    else:
        B = random_array(rng, (*batch, m, data.draw(st.integers(0, 4))), dtype)
    if kind in ("ufl", "ofl"):
        B = (B * np.abs(A).max(initial=1.0)).astype(dtype)
    layout = data.draw(st.sampled_from(MATRIX_LAYOUTS))
    Ad, Bd = arrange(xp, A, layout), to_xp(xp, B)
    before = snapshot(Ad, Bd)
    vectors = form != "matrix"
    h, X, info = gels(Ad, Bd, setting=setting)
    assert_unchanged((Ad, Bd), before)
    expect = (*batch, n) if vectors else (*batch, n, B.shape[-1])
    assert tuple(X.shape) == expect and X.dtype == dtype
    assert not np.any(to_np(info))
    Bm = B[..., None] if vectors else B
    Bm = np.broadcast_to(Bm, (*batch, m, Bm.shape[-1]))
    Xm = to_np(X)[..., None] if vectors else to_np(X)
    r = lstsq_ratio(A, Bm, Xm, dtype)
    assert r <= THRESHOLD, (r, m, n, dtype, batch, form, kind)


# --- agreement with LAPACK and NumPy -----------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (8, 8), (17, 9), (33, 40), (70, 40)])
def test_geqrf_equals_lapack(xp, setting, dtype, shape):
    """The same algorithm as LAPACK: dgeqrf/zgeqrf's output to rounding (signs included)."""
    gpu_only_setting(xp, setting)
    m, n = shape
    if setting is not None and setting.design == "fused" and setting.group_threads < 128 and max(m, n) > 64:
        pytest.skip("beyond the fused design's size")
    rng = rng_for("lapack", str(np.dtype(dtype)), shape, str(setting))
    A = random_array(rng, (3, m, n), dtype)
    h, tau, info = geqrf(to_xp(xp, A), setting=setting)
    f = scipy.linalg.lapack.dgeqrf if dtype == np.float64 else scipy.linalg.lapack.zgeqrf
    for b in range(3):
        qr_ref, tau_ref, _, _ = f(A[b])
        scale = np.abs(A[b]).max()
        tol = 50 * max(m, n) * eps(dtype)
        np.testing.assert_allclose(to_np(h)[b], qr_ref, rtol=0, atol=tol * scale)
        np.testing.assert_allclose(to_np(tau)[b], tau_ref, rtol=0, atol=tol)
    np.testing.assert_array_equal(to_np(info), 0)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r", "raw"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (1, 1), (6, 4), (4, 6), (5, 5)])
def test_qr_modes_like_numpy(xp, mode, dtype, shape):
    m, n = shape
    rng = rng_for("modes", mode, str(dtype), shape)
    A = random_array(rng, (2, 3, m, n), dtype)
    got = qr(to_xp(xp, A), mode=mode)
    ref = np.linalg.qr(A, mode=mode)
    tol = 30 * max(m, n, 1) * eps(dtype)
    if mode == "r":
        assert got.shape == ref.shape
        np.testing.assert_allclose(np.abs(to_np(got)), np.abs(ref), atol=tol * max(1, np.abs(A).max(initial=0)))
        return
    if mode == "raw":
        assert got[0].shape == ref[0].shape and got[1].shape == ref[1].shape
        np.testing.assert_allclose(to_np(got[0]), ref[0], atol=tol * max(1, np.abs(A).max(initial=0)))
        np.testing.assert_allclose(to_np(got[1]), ref[1], atol=tol)
        return
    assert isinstance(got, QRResult)
    Q, R = got
    assert Q.shape == ref.Q.shape and R.shape == ref.R.shape
    # NumPy runs LAPACK: the same signs, so the factors agree to rounding
    np.testing.assert_allclose(to_np(R), ref.R, atol=tol * max(1, np.abs(A).max(initial=0)))
    np.testing.assert_allclose(to_np(Q), ref.Q, atol=tol)
    r1, r2 = factor_ratios(A, Q, R)
    assert r1 <= THRESHOLD and r2 <= THRESHOLD


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gels_matches_scipy_lstsq(xp, dtype):
    rng = rng_for("scipy", str(dtype))
    for m, n, k in ((6, 4, 1), (9, 9, 2), (20, 7, 3), (1, 1, 1), (40, 33, 2)):
        A = random_array(rng, (4, m, n), dtype)
        B = random_array(rng, (4, m, k), dtype)
        h, X, info = gels(to_xp(xp, A), to_xp(xp, B))
        wide_t = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        for b in range(4):
            ref = scipy.linalg.lstsq(A[b].astype(wide_t), B[b].astype(wide_t))[0]
            cond = np.linalg.cond(A[b].astype(wide_t))
            err = np.abs(to_np(X)[b] - ref).max() / max(np.abs(ref).max(), 1e-300)
            assert err <= 30 * max(m, n) * cond * eps(dtype), (m, n, k, err, cond)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lstsq_like_numpy(xp, dtype):
    rng = rng_for("lstsq", str(dtype))
    for m, n in ((7, 3), (5, 5), (12, 1)):
        A = random_array(rng, (3, m, n), dtype)
        b = random_array(rng, (3, m), dtype)
        x, res, rank, s = lstsq(to_xp(xp, A), to_xp(xp, b))
        assert s is None
        assert x.shape == (3, n) and res.shape == ((3, 1) if m > n else (3, 0)) and rank.shape == (3,)
        assert res.dtype == np.finfo(dtype).dtype
        tol = 100 * max(m, n) * eps(dtype)
        for i in range(3):
            xr, rr, kr, _ = np.linalg.lstsq(A[i].astype(np.complex128), b[i].astype(np.complex128), rcond=None)
            np.testing.assert_allclose(to_np(x)[i], xr, atol=tol * 10 * max(1, np.abs(xr).max()))
            assert int(to_np(rank)[i]) == kr
            if m > n:
                np.testing.assert_allclose(to_np(res)[i], rr, rtol=tol * 10, atol=tol)
        # (m, k) right-hand sides on one matrix read as NumPy reads them
        B = random_array(rng, (m, 2), dtype)
        x2, res2, _, _ = lstsq(to_xp(xp, A[0]), to_xp(xp, B))
        xr, rr, _, _ = np.linalg.lstsq(A[0].astype(np.complex128), B.astype(np.complex128), rcond=None)
        assert x2.shape == (n, 2) and res2.shape == ((2,) if m > n else (0,))
        np.testing.assert_allclose(to_np(x2), xr, atol=tol * 10 * max(1, np.abs(xr).max()))


# --- numerical failure and isolation ----------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 5, 40])
def test_rank_deficient_info_and_linalgerror(xp, setting, dtype, n):
    """An exactly zero column j (with the columns before it independent) makes R[j, j]
    exactly zero: gels names the 1-based column, lstsq raises naming the batch index."""
    gpu_only_setting(xp, setting)
    rng = rng_for("rankdef", str(dtype), n, str(setting))
    m = n + 3
    A = random_array(rng, (6, m, n), dtype)
    cols = {1: n - 1, 4: 0}
    for b, j in cols.items():
        A[b, :, j] = 0
    A[5] = 0
    B = random_array(rng, (6, m), dtype)
    h, X, info = gels(to_xp(xp, A), to_xp(xp, B), setting=setting)
    expected = np.zeros(6, np.int32)
    for b, j in cols.items():
        expected[b] = j + 1
    expected[5] = 1
    np.testing.assert_array_equal(to_np(info), expected)
    good = expected == 0
    Xn = to_np(X)
    assert lstsq_ratio(A[good], B[good][..., None], Xn[good][..., None], dtype) <= THRESHOLD
    with pytest.raises(np.linalg.LinAlgError, match=r"\[1, 4, 5\]"):
        lstsq(to_xp(xp, A), to_xp(xp, B))
    x, res, rank, s, info2 = lstsq(to_xp(xp, A), to_xp(xp, B), check=False)
    np.testing.assert_array_equal(to_np(info2), expected)
    assert np.all(np.isnan(to_np(res)[~good])) and np.all(np.isfinite(to_np(res)[good]))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_stays_in_its_matrix(xp, setting, dtype):
    gpu_only_setting(xp, setting)
    rng = rng_for("nan", str(dtype), str(setting))
    m, n = 9, 6
    A = random_array(rng, (5, m, n), dtype)
    A[2, 4, 3] = np.nan
    B = random_array(rng, (5, m), dtype)
    h, tau, _ = geqrf(to_xp(xp, A), setting=setting)
    h, tau = to_np(h), to_np(tau)
    assert np.isnan(h[2]).any()
    keep = np.arange(5) != 2
    assert np.all(np.isfinite(h[keep])) and np.all(np.isfinite(tau[keep]))
    _, X, info = gels(to_xp(xp, A), to_xp(xp, B), setting=setting)
    Xn = to_np(X)
    assert np.all(np.isfinite(Xn[keep]))
    assert lstsq_ratio(A[keep], B[keep][..., None], Xn[keep][..., None], dtype) <= THRESHOLD


# --- lists -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shapes", [[(5, 3)] * 4, [(5, 3), (2, 6), (7, 7), (0, 2), (4, 1)]], ids=["pointer", "variable"])
def test_lists(xp, dtype, shapes):
    rng = rng_for("lists", str(dtype), len(shapes))
    As = [random_array(rng, s, dtype) for s in shapes]
    Ad = [arrange(xp, a, "C" if i % 2 else "F") for i, a in enumerate(As)]
    before = snapshot(*Ad)
    hs, taus, info = geqrf(Ad)
    assert isinstance(hs, list) and len(hs) == len(shapes) and tuple(info.shape) == (len(shapes),)
    Qs, Rs = qr(Ad)
    Qc, Rc = qr(Ad, mode="complete")
    for a, h, t, Q, R, Q2, R2 in zip(As, hs, taus, Qs, Rs, Qc, Rc):
        m, n = a.shape
        assert h.shape == (m, n) and t.shape == (min(m, n),)
        assert Q.shape == (m, min(m, n)) and R.shape == (min(m, n), n)
        r1, r2 = factor_ratios(a, Q, R)
        assert r1 <= THRESHOLD and r2 <= THRESHOLD
        r1, r2 = factor_ratios(a, Q2, R2)
        assert r1 <= THRESHOLD and r2 <= THRESHOLD
    assert_unchanged(Ad, before)
    # least squares on the members with m >= n, right-hand sides as a list
    tall = [a for a in As if a.shape[0] >= a.shape[1]]
    Bs = [random_array(rng, (a.shape[0],), dtype) for a in tall]
    hs, Xs, info = gels([to_xp(xp, a) for a in tall], [to_xp(xp, b) for b in Bs])
    for a, b, x in zip(tall, Bs, Xs):
        assert x.shape == (a.shape[1],)
        assert lstsq_ratio(a, b[:, None], to_np(x)[:, None], dtype) <= THRESHOLD
    assert geqrf([])[0] == [] and qr([])[0] == []


def test_gels_list_with_one_rhs_array(xp):
    rng = rng_for("listone")
    As = [random_array(rng, (6, 4), np.float64) for _ in range(3)]
    B = random_array(rng, (3, 6, 2), np.float64)
    _, X, info = gels([to_xp(xp, a) for a in As], to_xp(xp, B))
    assert tuple(X.shape) == (3, 4, 2)
    for i, a in enumerate(As):
        assert lstsq_ratio(a, B[i], to_np(X)[i], np.float64) <= THRESHOLD


# --- in place ---------------------------------------------------------------------------------


def test_overwrite_a(xp):
    rng = rng_for("overwrite")
    A = random_array(rng, (4, 6, 5), np.float64)
    Ad = arrange(xp, A, "F")
    h, tau, _ = geqrf(Ad, overwrite_a=True)
    assert h is Ad
    ref, _, _ = geqrf(to_xp(xp, A))
    np.testing.assert_allclose(to_np(h), to_np(ref), atol=1e-13)
    Ac = to_xp(xp, A)
    h2, _, _ = geqrf(Ac)       # default: input untouched
    np.testing.assert_array_equal(to_np(Ac), A)


# --- validation before any work ------------------------------------------------------------------


def test_bad_inputs(xp):
    A = to_xp(xp, np.ones((2, 4, 3)))
    b = to_xp(xp, np.ones((2, 4)))
    with pytest.raises(TypeError, match="dtype"):
        geqrf(to_xp(xp, np.ones((2, 3, 3), np.int64)))
    with pytest.raises(ValueError, match="shape"):
        geqrf(to_xp(xp, np.ones(3)))
    with pytest.raises(ValueError, match="mode"):
        qr(A, mode="economic")
    with pytest.raises(NotImplementedError, match="trans"):
        gels(A, b, trans="T")
    with pytest.raises(NotImplementedError, match="m >= n"):
        gels(to_xp(xp, np.ones((2, 3, 4))), to_xp(xp, np.ones((2, 3))))
    with pytest.raises(ValueError, match="B"):
        gels(A, to_xp(xp, np.ones((2, 5))))
    with pytest.raises(ValueError, match="n_columns"):
        orgqr(A, to_xp(xp, np.ones((2, 3))), n_columns=2)
    with pytest.raises(ValueError, match="n_columns"):
        orgqr(A, to_xp(xp, np.ones((2, 3))), n_columns=5)
    with pytest.raises(TypeError, match="setting"):
        geqrf(A, setting="fused")
    with pytest.raises(ValueError, match="compiled"):
        geqrf(A, setting=QrSetting("fused", 64, 1))
    with pytest.raises(TypeError, match="overwrite_a"):
        geqrf(A, overwrite_a=1)
    with pytest.raises(TypeError, match="check"):
        lstsq(A, b, check=None)
    with pytest.raises(TypeError, match="lists"):
        lstsq([np.ones((3, 2))], [np.ones(3)])


# --- GPU-only -----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
@pytest.mark.parametrize("n", [2, 8, 16])
def test_large_batch(xp, dtype, n):
    """70,000 small matrices: the grid-stride loop and several groups per block."""
    if xp is np:
        pytest.skip("GPU batch size")
    rng = rng_for("large", str(np.dtype(dtype)), n)
    A = random_array(rng, (70_000, n + 2, n), dtype)
    B = random_array(rng, (70_000, n + 2), dtype)
    poison_pool(xp, A.nbytes)
    Q, R = qr(to_xp(xp, A))
    r1, r2 = factor_ratios(A[::97], to_np(Q)[::97], to_np(R)[::97])
    assert r1 <= THRESHOLD and r2 <= THRESHOLD
    assert np.all(np.isfinite(to_np(Q))) and np.all(np.isfinite(to_np(R)))
    _, X, info = gels(to_xp(xp, A), to_xp(xp, B))
    assert not np.any(to_np(info))
    assert lstsq_ratio(A[::97], B[::97][..., None], to_np(X)[::97][..., None], dtype) <= THRESHOLD


@pytest.mark.gpu
@pytest.mark.parametrize("setting", [*BLOCKED_SETTINGS, *GLOBAL_SETTINGS, None], ids=str)
@pytest.mark.parametrize("shape", [(200, 200), (300, 64), (64, 300), (129, 97)])
def test_large_sizes(xp, setting, shape):
    """Sizes across several panels of the blocked design, tall and wide."""
    if xp is np:
        pytest.skip("GPU sizes")
    m, n = shape
    rng = rng_for("sizes", shape, str(setting))
    A = random_array(rng, (3, m, n), np.float64)
    Q, R, h, tau = run_qr(xp, to_xp(xp, A), setting)
    r1, r2 = factor_ratios(A, Q, R)
    assert r1 <= THRESHOLD and r2 <= THRESHOLD
    for b in range(3):
        qr_ref, tau_ref, _, _ = scipy.linalg.lapack.dgeqrf(A[b])
        np.testing.assert_allclose(to_np(h)[b], qr_ref, atol=1e-10 * np.abs(A).max())
    if m >= n:
        B = random_array(rng, (3, m, 3), np.float64)
        _, X, _ = gels(to_xp(xp, A), to_xp(xp, B), setting=setting)
        assert lstsq_ratio(A, B, X, np.float64) <= THRESHOLD


# --- the plan and the chooser (CPU) ---------------------------------------------------------------


def test_chooser_and_plan():
    assert choose_qr_setting(4, 4) == FUSED_SETTINGS[0]
    assert choose_qr_setting(16, 10) == FUSED_SETTINGS[1]
    assert choose_qr_setting(32, 32) == FUSED_SETTINGS[2]
    assert choose_qr_setting(64, 64, itemsize=8) == FUSED_SETTINGS[3]
    assert choose_qr_setting(200, 200, itemsize=8) == BLOCKED_SETTINGS[0]
    assert choose_qr_setting(20_000, 40, itemsize=16) == GLOBAL_SETTINGS[0]
    for s in QR_SETTINGS:
        check_qr_setting(s)
    # sub-warp groups share a block; the plan's bytes are the setting's layout
    s = FUSED_SETTINGS[0]
    p = plan_qr(s, 8, 8, 1, 8, 1000, 227 * 1024)
    assert p.groups == 32 and p.block == 256 and p.smem == 32 * p.group_bytes
    assert (p.s_a, p.s_b, p.wlen) == (64, 8, 8)
    assert p.grid == -(-1000 // 32)
    # a group over 48 KiB runs alone in its block; over the device limit is an error
    big = FUSED_SETTINGS[3]
    p = plan_qr(big, 100, 100, 0, 8, 10, 227 * 1024)
    assert p.groups == 1 and p.smem > 48 * 1024 and p.block == 128
    with pytest.raises(ValueError, match="shared memory"):
        plan_qr(big, 300, 300, 0, 8, 10, 227 * 1024)
    b = BLOCKED_SETTINGS[0]
    p = plan_qr(b, 200, 500, 2, 16, 7, 227 * 1024)
    assert p.grid == 7 and p.block == 256 and p.ldp == 200 and p.smem == b.blocked_bytes(200, 16)
    with pytest.raises(ValueError, match="global"):
        plan_qr(b, 5000, 10, 0, 16, 7, 227 * 1024)
    g = GLOBAL_SETTINGS[0]
    p = plan_qr(g, 100_000, 100, 1, 16, 3, 227 * 1024)
    assert p.s_a == 0 and p.s_b == 0 and p.smem < 48 * 1024
    assert orgqr_dims(8) == (32, 1) and orgqr_dims(100) == (32, 4)
    assert str(b) == "qrblocked32x8nb32"
