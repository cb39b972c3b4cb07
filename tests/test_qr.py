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


def on_scale_of(A, B, dtype):
    """B scaled by A's largest entry, so that the solution is O(cond(A)) and representable.
    (Unit-sized B with A near underflow has a solution past overflow: a float32 55 x 55
    one of condition 6.6e5 gave 1.4e39, inf from any solver; session 34.)"""
    scale = float(np.abs(A).max(initial=0.0))
    return (B * scale).astype(dtype) if scale > 0 else B


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
        B = on_scale_of(A, B, dtype)
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
def test_geqrf_keeps_a_subnormal_diagonal(xp, setting):
    """R's last diagonal of this underflow-scaled random 65 x 65 float32 matrix is
    7.5e-39, below float32's smallest normal number; LAPACK's sgeqrf keeps it.  A
    design that flushes it to zero makes R singular (gels then reports info = 65:
    found by test_gels_normal_equation_residual on the H100, 2026-11-25)."""
    gpu_only_setting(xp, setting)
    A = matrices(np.random.default_rng(65), (), 65, 65, np.float32, "ufl")
    ref = scipy.linalg.lapack.sgeqrf(A)[0][64, 64]
    assert 0 < abs(ref) < np.finfo(np.float32).tiny
    h, _, info = geqrf(arrange(xp, A, "C"), setting=setting)
    got = to_np(h)[64, 64]
    assert not np.any(to_np(info)) and got != 0, f"R[64, 64] = {got}, LAPACK {ref}"
    # GELS without right-hand sides checks R's diagonal outside the kernels
    _, _, info = gels(arrange(xp, A, "C"), to_xp(xp, np.zeros((65, 0), np.float32)), setting=setting)
    assert not np.any(to_np(info))


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


# --- lstsq: numpy.linalg.lstsq through the SVD ------------------------------------------------


def wide_type(dtype):
    return np.complex128 if np.dtype(dtype).kind == "c" else np.float64


def low_rank(rng, batch, m, n, r, dtype):
    """Rank r (exactly, before rounding to dtype): a product (m x r)(r x n) in double."""
    wt = wide_type(dtype)
    return (random_array(rng, (*batch, m, r), wt) @ random_array(rng, (*batch, r, n), wt)).astype(dtype)


def op_of(A, op):
    A = np.asarray(A)
    return A if op == "N" else (np.swapaxes(A, -1, -2) if op == "T" else H(A))


def check_against_numpy(A, b, x, res, rank, s, rcond, dtype, single_matrix):
    """One matrix's lstsq outputs (b (m, k), x (n, k), res as returned for it) against
    numpy.linalg.lstsq in double precision with the same cut-off."""
    m, n = A.shape
    e = eps(dtype)
    wt = wide_type(dtype)
    xr, rr, kr, sr = np.linalg.lstsq(A.astype(wt), b.astype(wt), rcond=rcond)
    assert int(rank) == kr, (int(rank), kr, sr)
    smax = sr[0] if sr.size else 0.0
    assert np.all(np.abs(s - sr) <= 30 * max(m, n) * e * smax + 1e-300), (s, sr)
    assert np.all(np.diff(s) <= 0)
    if kr:
        cond = sr[0] / sr[kr - 1]
        rnorm = np.linalg.norm(b - A.astype(wt) @ xr)
        xnorm = np.linalg.norm(xr)
        tol = 30 * max(m, n) * e * cond * (1 + cond * rnorm / max(smax * xnorm, 1e-300))
        err = np.linalg.norm(x - xr) / max(xnorm, 1e-300)
        assert err <= tol, (err, tol, cond)
    else:
        assert np.all(x == 0)
    # the residual's perturbation bound: |r' - r| <= eps (1 + 2 cond) ||b|| (Golub-Van Loan 5.3)
    rtol = 30 * max(m, n) * e * (1 + 2 * (sr[0] / sr[kr - 1] if kr else 1.0)) * np.linalg.norm(b, axis=0) ** 2
    if single_matrix:
        assert res.shape == rr.shape, (res.shape, rr.shape)
        if rr.size:
            assert np.all(np.abs(res - rr) <= rtol + 1e-300)
    elif m > n:
        if rr.size:
            assert np.all(np.abs(res - rr) <= rtol + 1e-300), (res, rr)
        else:
            assert np.all(np.isnan(res))


LSTSQ_SHAPES = [(7, 3), (5, 5), (3, 6), (1, 1), (6, 1), (1, 4), (0, 3), (3, 0), (12, 9)]


@pytest.mark.parametrize("deficient", [False, True], ids=["full_rank", "rank_deficient"])
@pytest.mark.parametrize("shape", LSTSQ_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lstsq_like_numpy(xp, dtype, shape, deficient):
    """x, residuals, rank and s against numpy.linalg.lstsq: tall, square, wide, empty;
    exactly rank min(m, n) - 1 matrices built as products; vectors, one shared vector
    and 2-column right-hand sides; no batch, one and two batch dimensions."""
    m, n = shape
    p = min(m, n)
    if deficient and p == 0:
        pytest.skip("no rank to lose")
    rng = rng_for("lstsq_np", str(dtype), shape, deficient)
    single = np.dtype(dtype) in (np.float32, np.complex64)
    # single precision: the product's rounding leaves the lost singular value near
    # eps32 ||A||, which the default cut-off need not catch; say where the cut is
    rcond = 1e-4 if single and deficient else None
    ref_rcond = rcond if rcond is not None else eps(dtype) * max(m, n)
    for batch in ((), (3,), (2, 3)):
        for form in ("vector", "one", "matrix"):
            if form == "one" and not batch:
                continue
            A = low_rank(rng, batch, m, n, p - 1, dtype) if deficient else random_array(rng, (*batch, m, n), dtype)
            bshape = {"vector": (*batch, m), "one": (m,), "matrix": (*batch, m, 2)}[form]
            b = random_array(rng, bshape, dtype)
            Ad, bd = to_xp(xp, A), to_xp(xp, b)
            before = snapshot(Ad, bd)
            poison_pool(xp, A.nbytes + b.nbytes)
            x, res, rank, s = lstsq(Ad, bd, rcond=rcond)
            assert_unchanged((Ad, bd), before)
            k = 2 if form == "matrix" else 1
            assert x.shape == ((*batch, n, 2) if form == "matrix" else (*batch, n)) and x.dtype == dtype
            assert s.shape == (*batch, p) and s.dtype == np.finfo(dtype).dtype
            assert rank.shape == batch and rank.dtype == np.int32
            if batch:
                assert res.shape == ((*batch, k) if m > n else (*batch, 0))
            assert res.dtype == np.finfo(dtype).dtype
            xn, resn, rankn, sn = (to_np(v) for v in (x, res, rank, s))
            bm = np.broadcast_to(b[..., None] if form != "matrix" else b, (*batch, m, k))
            xm = xn[..., None] if form != "matrix" else xn
            for i in np.ndindex(*batch):
                check_against_numpy(A[i], bm[i], xm[i], resn if not batch else resn[i], rankn[i], sn[i],
                                    ref_rcond, dtype, not batch)
            if not batch and form == "vector":  # NumPy's exact shapes for one matrix and a vector
                xr, rr, _, _ = np.linalg.lstsq(A.astype(wide_type(dtype)), b.astype(wide_type(dtype)),
                                               rcond=ref_rcond)
                assert xn.shape == xr.shape and resn.shape == rr.shape


@pytest.mark.parametrize("rcond", [None, -1, 0.0, 1e-2, 0.5, 2.0], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
@pytest.mark.parametrize("shape", [(8, 5), (5, 8), (5, 5)], ids=str)
def test_lstsq_rcond(xp, dtype, shape, rcond):
    """Singular values 1 ... 1e-6 (times a per-matrix scale): the cut-off rcond * s_max
    decides the rank and which components enter x, as NumPy / xGELSD (including its
    reading of rcond <= 0 and rcond >= 1 as machine precision)."""
    m, n = shape
    rng = rng_for("rcond", str(np.dtype(dtype)), shape, rcond)
    p = min(m, n)
    U = np.linalg.qr(random_array(rng, (4, m, p), dtype))[0]
    V = np.linalg.qr(random_array(rng, (4, n, p), dtype))[0]
    sv_ = np.geomspace(1, 1e-6, p) * np.array([1.0, 1e-3, 1e5, 7.0])[:, None]
    A = (U * sv_[:, None, :]) @ H(V)
    b = random_array(rng, (4, m, 3), dtype)
    x, res, rank, s = lstsq(to_xp(xp, A), to_xp(xp, b), rcond=rcond)
    ref_rcond = eps(dtype) * max(m, n) if rcond is None else rcond   # NumPy reads it as we do
    for i in range(4):
        check_against_numpy(A[i], b[i], to_np(x)[i], to_np(res)[i], to_np(rank)[i], to_np(s)[i], ref_rcond,
                            dtype, False)
    # xGELSD: rcond outside (0, 1) is machine precision, so 0 and 2 keep every value
    expect = {None: p, -1: p, 0.0: p, 1e-2: int(np.sum(np.geomspace(1, 1e-6, p) > 1e-2)), 0.5: 1, 2.0: p}[rcond]
    np.testing.assert_array_equal(to_np(rank), expect)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lstsq_nan_isolation(xp, dtype):
    """A NaN in one matrix: its SVD fails (NumPy's message, naming the index); with
    check=False only that matrix's outputs are NaN, the others are unchanged."""
    rng = rng_for("lstsq_nan", str(dtype))
    A = random_array(rng, (2, 3, 6, 4), dtype)
    b = random_array(rng, (2, 3, 6), dtype)
    A[1, 2, 3, 1] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match=r"SVD did not converge in Linear Least Squares: "
                                                    r"batch indices \[\(1, 2\)\]"):
        lstsq(to_xp(xp, A), to_xp(xp, b))
    x, res, rank, s, info = (to_np(v) for v in lstsq(to_xp(xp, A), to_xp(xp, b), check=False))
    assert info[1, 2] > 0 and np.count_nonzero(info) == 1
    assert np.all(np.isnan(x[1, 2])) and np.all(np.isnan(res[1, 2])) and np.all(np.isnan(s[1, 2]))
    keep = np.ones((2, 3), bool)
    keep[1, 2] = False
    x2, res2, rank2, s2 = (to_np(v) for v in lstsq(to_xp(xp, A[keep]), to_xp(xp, b[keep])))
    tol = 10 * eps(dtype)
    np.testing.assert_allclose(x[keep], x2, rtol=tol * 100, atol=tol * 100)
    np.testing.assert_allclose(res[keep], res2, rtol=tol * 100)
    np.testing.assert_array_equal(rank[keep], rank2)
    np.testing.assert_array_equal(rank[keep], 4)
    # one matrix, no batch: NumPy's error without indices
    with pytest.raises(np.linalg.LinAlgError, match="SVD did not converge in Linear Least Squares"):
        lstsq(to_xp(xp, A[1, 2]), to_xp(xp, b[1, 2]))


def test_lstsq_single_matrix_residual_shapes(xp):
    """One matrix: NumPy's residuals exactly (empty when rank < n or m <= n); a batch
    keeps (..., k) for m > n with NaN for the rank-deficient members."""
    rng = rng_for("resshape")
    A = random_array(rng, (6, 3), np.float64)
    A[:, 2] = A[:, 0] + A[:, 1]
    b = random_array(rng, (6, 2), np.float64)
    x, res, rank, s = lstsq(to_xp(xp, A), to_xp(xp, b))
    xr, rr, kr, sr = np.linalg.lstsq(A, b, rcond=None)
    assert res.shape == rr.shape == (0,) and int(rank) == kr == 2
    np.testing.assert_allclose(to_np(x), xr, atol=1e-12)
    both = np.stack([A, random_array(rng, (6, 3), np.float64)])
    x, res, rank, s = lstsq(to_xp(xp, both), to_xp(xp, b))
    assert res.shape == (2, 2)
    assert np.all(np.isnan(to_np(res)[0])) and np.all(np.isfinite(to_np(res)[1]))
    np.testing.assert_array_equal(to_np(rank), [2, 3])


# --- gels: every trans and shape (xGELS) ---------------------------------------------------------


def lapack_gels(A, B, trans):
    """scipy's dgels / zgels on one matrix (B (rows, k)): (A as xGELS leaves it, solution, info).
    Complex 'T' (not in LAPACK) as conj of the 'C' solution of conj(B)."""
    m, n = A.shape
    rows, q = (m, n) if trans == "N" else (n, m)
    complex_ = A.dtype.kind == "c"
    f = scipy.linalg.lapack.zgels if complex_ else scipy.linalg.lapack.dgels
    conj = complex_ and trans == "T"
    Bl = np.zeros((max(m, n), B.shape[1]), A.dtype)
    Bl[:rows] = B.conj() if conj else B
    letter = "N" if trans == "N" else ("C" if complex_ else "T")
    lqr, x, info = f(A, Bl, trans=letter)
    x = x[:q]
    return lqr, (x.conj() if conj else x), info


@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5), (1, 3), (3, 1), (12, 11), (11, 12)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
@pytest.mark.parametrize("trans", ["N", "T", "C"])
def test_gels_equals_lapack(xp, trans, dtype, shape):
    """All four xGELS cases: the solution and A's QR / LQ output equal dgels / zgels."""
    m, n = shape
    rng = rng_for("gels_lapack", trans, str(np.dtype(dtype)), shape)
    rows, q = (m, n) if trans == "N" else (n, m)
    A = random_array(rng, (3, m, n), dtype)
    B = random_array(rng, (3, rows, 2), dtype)
    Ad, Bd = to_xp(xp, A), to_xp(xp, B)
    before = snapshot(Ad, Bd)
    poison_pool(xp, A.nbytes)
    h, X, info = gels(Ad, Bd, trans=trans.lower() if trans == "C" else trans)
    assert_unchanged((Ad, Bd), before)
    assert h.shape == (3, m, n) and X.shape == (3, q, 2) and info.shape == (3,)
    np.testing.assert_array_equal(to_np(info), 0)
    for i in range(3):
        lqr, x, inf = lapack_gels(A[i], B[i], trans)
        assert inf == 0
        cond = np.linalg.cond(A[i])
        tol = 30 * max(m, n) * eps(dtype) * cond
        np.testing.assert_allclose(to_np(X)[i], x, rtol=0, atol=tol * max(1.0, np.abs(x).max()))
        np.testing.assert_allclose(to_np(h)[i], lqr, rtol=0, atol=30 * max(m, n) * eps(dtype) * np.abs(A[i]).max())


def min_norm_ratios(opA, B, X, dtype):
    """(max ||B - op(A) X|| / (||op(A)|| ||X|| max(m, n) eps), max ||X - P X|| / (||X|| max(m, n) eps))
    with P = pinv(op(A)) op(A) (float64) the projector on op(A)'s row space, column 1-norms."""
    opA, B, X = wide(opA), wide(B), wide(X)
    rows, q = opA.shape[-2:]
    if X.size == 0 or rows == 0:
        return 0.0, 0.0
    s = norm1(opA)[..., None, None]
    s = np.where((s == 0) | ~np.isfinite(s), 1.0, s)
    opA, B = opA / s, B / s
    e = eps(dtype)
    r = B - opA @ X
    with np.errstate(all="ignore"):
        r1 = norm1(r) / (norm1(opA) * norm1(X) * max(rows, q) * e)
        P = np.linalg.pinv(opA) @ opA
        r2 = norm1(X - P @ X) / (norm1(X) * max(rows, q) * e)
    r1, r2 = (np.where(np.isnan(v), np.where(norm1(X) == 0, 0.0, np.inf), v) for v in (r1, r2))
    return float(np.max(r1, initial=0.0)), float(np.max(r2, initial=0.0))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_gels_all_cases_residuals(xp, setting, data):
    """Hypothesis over trans, shapes (tall and wide), dtypes, batches, layouts and
    right-hand-side forms: least-squares cases by the normal-equation ratio,
    minimum-norm cases by the residual ratio and the row-space ratio, both <= 30;
    the minimum-norm X also against pinv(op(A)) B in double precision."""
    gpu_only_setting(xp, setting)
    top = 12 if xp is np else 64
    m = data.draw(st.integers(0, top))
    n = data.draw(st.integers(0, top))
    trans = data.draw(st.sampled_from(("N", "T", "C")))
    dtype = data.draw(st.sampled_from(DTYPES))
    batch = data.draw(batch_shapes())
    kind = data.draw(st.sampled_from(("random", "ufl", "ofl")))
    form = data.draw(st.sampled_from(("vectors", "one", "matrix")))
    layout = data.draw(st.sampled_from(MATRIX_LAYOUTS))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    A = matrices(rng, batch, m, n, dtype, kind)
    rows, q = (m, n) if trans == "N" else (n, m)
    bshape = {"vectors": (*batch, rows), "one": (rows,), "matrix": (*batch, rows, data.draw(st.integers(0, 3)))}
    B = random_array(rng, bshape[form], dtype)
    if kind in ("ufl", "ofl"):
        B = on_scale_of(A, B, dtype)
    Ad, Bd = arrange(xp, A, layout), to_xp(xp, B)
    before = snapshot(Ad, Bd)
    h, X, info = gels(Ad, Bd, trans=trans, setting=setting)
    assert_unchanged((Ad, Bd), before)
    vectors = form != "matrix"
    assert tuple(X.shape) == ((*batch, q) if vectors else (*batch, q, B.shape[-1])) and X.dtype == dtype
    assert tuple(h.shape) == (*batch, m, n)
    assert not np.any(to_np(info))
    Bm = np.broadcast_to(B[..., None] if vectors else B, (*batch, rows, 1 if vectors else B.shape[-1]))
    Xm = to_np(X)[..., None] if vectors else to_np(X)
    opA = np.broadcast_to(op_of(A, trans), (*batch, rows, q))
    if rows >= q:   # least squares (or square)
        r = lstsq_ratio(opA, Bm, Xm, dtype)
        assert r <= THRESHOLD, (r, m, n, trans, dtype, batch, form, kind)
    else:           # minimum norm
        r1, r2 = min_norm_ratios(opA, Bm, Xm, dtype)
        assert r1 <= THRESHOLD and r2 <= THRESHOLD, (r1, r2, m, n, trans, dtype, batch, form, kind)
        if Xm.size:
            ref = np.linalg.pinv(wide(opA)) @ wide(Bm)
            cond = np.linalg.cond(wide(opA)) if rows else 1.0
            scale = np.abs(ref).max(initial=0.0)
            assert np.abs(Xm - ref).max() <= 30 * max(m, n) * eps(dtype) * np.max(cond) * max(scale, 1e-300)


@pytest.mark.parametrize("trans", ["N", "T", "C"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5)], ids=str)
def test_gels_info_rank_deficient(xp, trans, dtype, shape):
    """An exactly zero column (m >= n: R[j, j] = 0) or row (m < n: L[j, j] = 0) j,
    the ones before it independent: info = j + 1 in every case, as dgels; the other
    matrices are solved; a failed minimum-norm X is B padded with zeros (LAPACK
    returns before touching B)."""
    m, n = shape
    rng = rng_for("gels_info", trans, str(dtype), shape)
    rows, q = (m, n) if trans == "N" else (n, m)
    A = random_array(rng, (4, m, n), dtype)
    p = min(m, n)
    zero = {1: p - 1, 2: 0}
    for i, j in zero.items():
        if m >= n:
            A[i, :, j] = 0
        else:
            A[i, j, :] = 0
    B = random_array(rng, (4, rows), dtype)
    h, X, info = gels(to_xp(xp, A), to_xp(xp, B), trans=trans)
    expect = np.array([0, p, 1, 0], np.int32)
    np.testing.assert_array_equal(to_np(info), expect)
    if dtype == np.float64:
        for i in range(4):
            assert lapack_gels(A[i], B[i][:, None], trans)[2] == expect[i]
    Xn = to_np(X)
    good = expect == 0
    opA = op_of(A[good], trans)
    if rows >= q:
        assert lstsq_ratio(opA, B[good][..., None], Xn[good][..., None], dtype) <= THRESHOLD
    else:
        r1, r2 = min_norm_ratios(opA, B[good][..., None], Xn[good][..., None], dtype)
        assert r1 <= THRESHOLD and r2 <= THRESHOLD
        np.testing.assert_array_equal(Xn[~good][:, :rows], B[~good])
        np.testing.assert_array_equal(Xn[~good][:, rows:], 0)


def test_gels_broadcast_and_mixed_precision(xp):
    """One wide matrix for a batch of right-hand sides (trans 'N'), float32 A with
    complex128 B (promoted), and complex 'T' against the explicit conjugation."""
    rng = rng_for("gels_bcast")
    A = random_array(rng, (3, 6), np.float32)
    B = random_array(rng, (5, 3, 2), np.complex128)
    h, X, info = gels(to_xp(xp, A), to_xp(xp, B))
    assert X.shape == (5, 6, 2) and X.dtype == np.complex128 and h.shape == (5, 3, 6) and info.shape == (5,)
    ref = np.linalg.pinv(A.astype(np.complex128)) @ B
    np.testing.assert_allclose(to_np(X), ref, atol=1e-12 * np.abs(ref).max())
    Ac = random_array(rng, (2, 6, 4), np.complex128)
    Bc = random_array(rng, (2, 4), np.complex128)
    _, Xt, _ = gels(to_xp(xp, Ac), to_xp(xp, Bc), trans="T")
    ref = np.linalg.pinv(np.swapaxes(Ac, -1, -2)) @ Bc[..., None]
    np.testing.assert_allclose(to_np(Xt), ref[..., 0], atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("trans", ["N", "C"])
def test_gels_lists_any_shape(xp, trans):
    """Lists of tall and wide matrices: members of one shape run as one stacked batch."""
    rng = rng_for("gels_lists", trans)
    shapes = [(5, 3), (2, 6), (7, 7), (4, 1), (2, 6)]
    As = [random_array(rng, s, np.complex128) for s in shapes]
    rows = [s[0] if trans == "N" else s[1] for s in shapes]
    Bs = [random_array(rng, (r,), np.complex128) for r in rows]
    hs, Xs, info = gels([to_xp(xp, a) for a in As], [to_xp(xp, b) for b in Bs], trans=trans)
    assert isinstance(hs, list) and isinstance(Xs, list) and tuple(info.shape) == (5,)
    np.testing.assert_array_equal(to_np(info), 0)
    for a, b, h, x in zip(As, Bs, hs, Xs):
        h1, x1, _ = gels(to_xp(xp, a), to_xp(xp, b), trans=trans)
        assert x.shape == x1.shape and h.shape == a.shape
        np.testing.assert_allclose(to_np(x), to_np(x1), atol=1e-12)
        np.testing.assert_allclose(to_np(h), to_np(h1), atol=1e-12)
    assert gels([], [], trans=trans)[1] == []


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
def test_gels_lstsq_large_batch(xp, dtype):
    """70,000 problems through the composed paths (TRSV, ORGQR, GEMM, SVD launches)."""
    if xp is np:
        pytest.skip("GPU batch size")
    rng = rng_for("gels_large", str(np.dtype(dtype)))
    A = random_array(rng, (70_000, 6, 10), dtype)
    B = random_array(rng, (70_000, 6), dtype)
    poison_pool(xp, A.nbytes)
    _, X, info = gels(to_xp(xp, A), to_xp(xp, B))
    assert not np.any(to_np(info))
    r1, r2 = min_norm_ratios(A[::97], B[::97][..., None], to_np(X)[::97][..., None], dtype)
    assert r1 <= THRESHOLD and r2 <= THRESHOLD
    Bt = random_array(rng, (70_000, 10), dtype)
    _, Xt, info = gels(to_xp(xp, A), to_xp(xp, Bt), trans="C")
    assert not np.any(to_np(info))
    assert lstsq_ratio(H(A[::97]), Bt[::97][..., None], to_np(Xt)[::97][..., None], dtype) <= THRESHOLD
    x, res, rank, s = lstsq(to_xp(xp, H(A)), to_xp(xp, Bt))
    assert res.shape == (70_000, 1) and np.all(to_np(rank) == 6)
    assert lstsq_ratio(H(A[::97]), Bt[::97][..., None], to_np(x)[::97][..., None], dtype) <= THRESHOLD


# --- numerical failure and isolation ----------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 5, 40])
def test_rank_deficient_info(xp, setting, dtype, n):
    """An exactly zero column j (with the columns before it independent) makes R[j, j]
    exactly zero: gels names the 1-based column; lstsq (SVD) solves and reports the rank."""
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
    # lstsq (the SVD) takes rank-deficient matrices: no error, the rank says it
    x, res, rank, s, info2 = lstsq(to_xp(xp, A), to_xp(xp, B), check=False)
    np.testing.assert_array_equal(to_np(info2), 0)
    np.testing.assert_array_equal(to_np(rank), np.where(good, n, np.where(np.arange(6) == 5, 0, n - 1)))
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
    with pytest.raises(ValueError, match="B"):
        gels(A, b, trans="T")        # op(A) = A^T has 3 rows: b needs 3
    with pytest.raises(ValueError, match="trans"):
        gels(A, b, trans="X")
    with pytest.raises(ValueError, match="B"):
        gels(to_xp(xp, np.ones((2, 3, 4))), to_xp(xp, np.ones((2, 4))))
    with pytest.raises(TypeError, match="rcond"):
        lstsq(A, b, rcond="warn")
    with pytest.raises(ValueError, match="rcond"):
        lstsq(A, b, rcond=np.nan)
    with pytest.raises(ValueError, match="b"):
        lstsq(A, to_xp(xp, np.ones((2, 3))))
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
