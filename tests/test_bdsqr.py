"""Batched bidiagonal SVD (bdsqr) the LAPACK way, on both backends.

Values against SciPy's SVD of the dense bidiagonal (float64), relative
accuracy on graded bidiagonals against a high-precision reference (mpmath)
and float32 against our float64; vectors by ||B - U S V^T|| / (k ||B|| eps)
and orthogonality ratios <= 30 (LAPACK's xBDT03 / xORT01 thresholds).  GPU
bodies run with every registered BdsqrSetting forced and with the chooser.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations.bdsqr import bdsqr
from batched.factorizations import svd_settings
from batched.factorizations.svd_settings import (BDSQR_SETTINGS, MAX_THREADS, SOFT_SMEM, BdsqrSetting, bdsqr_wide,
                                                 check_bdsqr_setting, choose_bdsqr_setting, plan_bdsqr)
from conftest import assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from strategies import SETTINGS, arrange

THRESHOLD = 30
REAL = (np.float32, np.float64)
VECTOR_SETTINGS = [s for s in BDSQR_SETTINGS if s.group == 32] + [None]
ALL_SETTINGS = [*BDSQR_SETTINGS, None]
K_EDGES = (0, 1, 2, 3, 4, 5, 8, 16, 17, 31, 32, 33)
GPU_K = (64, 65, 128, 200, 300)


def eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def dense(d, e, lower=False):
    """The dense (..., k, k) bidiagonal in float64."""
    d, e = np.asarray(d, np.float64), np.asarray(e, np.float64)
    k = d.shape[-1]
    B = np.zeros((*d.shape[:-1], k, k))
    i = np.arange(k)
    B[..., i, i] = d
    if k > 1:
        if lower:
            B[..., i[1:], i[:-1]] = e
        else:
            B[..., i[:-1], i[1:]] = e
    return B


def bidiagonal(rng, batch, k, dtype, kind="rand"):
    """d, e of a kind: rand (normal), graded (d_i ~ 10^-i, e_i ~ 10^-(i+1/2): relative
    accuracy matters), zero_diag (some d_i = 0: rank-deficient), clustered (d ~ 1, tiny e),
    ofl/ufl (rand scaled near overflow / underflow)."""
    d = rng.standard_normal((*batch, k))
    e = rng.standard_normal((*batch, max(k - 1, 0)))
    if kind == "graded":
        p = 6 if dtype == np.float32 else 14
        d = rng.uniform(1, 2, d.shape) * 10.0 ** (-np.linspace(0, p, k)) * np.sign(d)
        e = rng.uniform(1, 2, e.shape) * 10.0 ** (-np.linspace(0, p, k)[:-1] - p / max(k, 1) / 2)
    elif kind == "zero_diag" and k:
        d[..., rng.integers(0, k, 2)] = 0
    elif kind == "clustered":
        d = 1 + 1e-3 * d
        e = 1e-4 * e
    elif kind in ("ofl", "ufl"):
        fi = np.finfo(dtype)
        scale = float(fi.max) / 2**10 / max(k, 1) if kind == "ofl" else float(fi.tiny) * 2**10
        d, e = d * scale, e * scale
    return d.astype(dtype), e.astype(dtype)


def check_values(s, d, e, lower, dtype):
    """|s_i - s_ref_i| <= 30 k eps s_1 against SciPy (float64), descending and non-negative."""
    s = to_np(s)
    k = s.shape[-1]
    assert s.dtype == np.dtype(dtype)
    if s.size == 0:
        return
    B = dense(d, e, lower)
    scale = np.abs(B).max(axis=(-2, -1), keepdims=True)
    scale = np.where(scale > 0, 2.0 ** np.round(np.log2(np.where(scale > 0, scale, 1))), 1)
    ref = np.stack([scipy.linalg.svdvals(b) for b in (B / scale).reshape(-1, k, k)]).reshape(s.shape)
    ref = ref * scale[..., 0]
    assert np.all(s >= 0) and np.all(np.diff(s, axis=-1) <= 0), "values must be descending, non-negative"
    err = np.abs(s.astype(np.float64) - ref) / (k * eps(dtype) * np.maximum(ref[..., :1], np.finfo(dtype).tiny))
    assert err.max() <= THRESHOLD, f"value error ratio {err.max()}"


def vector_ratios(B, U, s, VT):
    """(||B - U S V^T|| / (k ||B|| eps), ||I - U^T U|| / (k eps), ||I - V V^T|| / (k eps)), 1-norms."""
    U, s, VT = to_np(U), to_np(s), to_np(VT)
    k = s.shape[-1]
    if k == 0:
        return 0.0, 0.0, 0.0
    ep = eps(s.dtype)
    U64, VT64 = U.astype(np.complex128), VT.astype(np.complex128)
    scale = np.abs(B).max(axis=(-2, -1), keepdims=True)
    scale = np.where(scale > 0, scale, 1)
    R = B / scale - U64 @ ((s.astype(np.float64) / scale[..., 0])[..., None] * VT64)
    nb = np.abs(B / scale).sum(axis=-2).max(axis=-1)
    res = np.abs(R).sum(axis=-2).max(axis=-1) / (k * np.maximum(nb, 1e-300) * ep)
    eye = np.eye(k)
    ou = np.abs(eye - U64.conj().swapaxes(-1, -2) @ U64).sum(axis=-2).max(axis=-1) / (k * ep)
    ov = np.abs(eye - VT64 @ VT64.conj().swapaxes(-1, -2)).sum(axis=-2).max(axis=-1) / (k * ep)
    return float(res.max()), float(ou.max()), float(ov.max())


# --- values and vectors ----------------------------------------------------------------------


@pytest.mark.parametrize("setting", ALL_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", REAL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("kind", ["rand", "graded", "zero_diag", "clustered", "ofl", "ufl"])
def test_values_match_scipy(xp, setting, dtype, lower, kind):
    gpu_only_setting(xp, setting)
    rng = rng_for("values", dtype, lower, kind)
    for k in K_EDGES + (GPU_K if xp is not np else ()):
        d, e = bidiagonal(rng, (5,), k, dtype, kind)
        dx, ex = to_xp(xp, d), to_xp(xp, e)
        before = snapshot(dx, ex)
        poison_pool(xp, 5 * k * np.dtype(dtype).itemsize)
        s, u, vt, info = bdsqr(dx, ex, lower=lower, setting=setting)
        assert u is None and vt is None
        assert not to_np(info).any()
        check_values(s, d, e, lower, dtype)
        assert_unchanged((dx, ex), before)


@pytest.mark.parametrize("setting", VECTOR_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", REAL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("kind", ["rand", "graded", "zero_diag", "clustered"])
def test_vectors_residual_and_orthogonality(xp, setting, dtype, lower, kind):
    gpu_only_setting(xp, setting)
    rng = rng_for("vectors", dtype, lower, kind)
    for k in K_EDGES + (GPU_K if xp is not np else ()):
        d, e = bidiagonal(rng, (4,), k, dtype, kind)
        eye = np.broadcast_to(np.eye(k, dtype=dtype), (4, k, k))
        ux, vx = to_xp(xp, eye), to_xp(xp, eye)
        before = snapshot(ux, vx)
        s, U, VT, info = bdsqr(to_xp(xp, d), to_xp(xp, e), lower=lower, u=ux, vt=vx, setting=setting)
        assert not to_np(info).any()
        assert U.shape == (4, k, k) and VT.shape == (4, k, k) and U.dtype == np.dtype(dtype)
        check_values(s, d, e, lower, dtype)
        s_only = to_np(bdsqr(to_xp(xp, d), to_xp(xp, e), lower=lower)[0])
        assert np.allclose(s_only, to_np(s), rtol=k * eps(dtype) * 30, atol=0) or k == 0
        res, ou, ov = vector_ratios(dense(d, e, lower), U, s, VT)
        assert max(res, ou, ov) <= THRESHOLD, (k, res, ou, ov)
        assert_unchanged((ux, vx), before)


def test_graded_relative_accuracy_float64():
    """d_i = 10^-i-like bidiagonals: every value to a few ulps of ITSELF (Demmel-Kahan),
    against 50-digit mpmath."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(7)
    for k in (6, 12, 20):
        d, e = bidiagonal(rng, (2,), k, np.float64, "graded")
        s = bdsqr(d, e)[0]
        with mpmath.workdps(50):
            for b in range(2):
                ref = sorted((float(x) for x in mpmath.svd_r(mpmath.matrix(dense(d[b], e[b]).tolist()),
                                                             compute_uv=False)), reverse=True)
                rel = np.abs(s[b] - ref) / np.array(ref)
                assert rel.max() <= THRESHOLD * k * eps(np.float64), (k, rel.max())


@pytest.mark.parametrize("lower", [False, True])
def test_graded_relative_accuracy_float32(xp, lower):
    """float32 graded bidiagonals: each value relative to itself against float64."""
    rng = rng_for("graded32", lower)
    for k in (4, 9, 16, 24):
        d, e = bidiagonal(rng, (20,), k, np.float32, "graded")
        s = to_np(bdsqr(to_xp(xp, d), to_xp(xp, e), lower=lower)[0])
        ref = bdsqr(d.astype(np.float64), e.astype(np.float64), lower=lower)[0]
        rel = np.abs(s - ref) / ref
        assert rel.max() <= THRESHOLD * k * eps(np.float32), (k, rel.max())


@pytest.mark.parametrize("setting", VECTOR_SETTINGS, ids=str)
@pytest.mark.parametrize("vdt", [np.complex64, np.complex128, np.float64], ids=lambda d: np.dtype(d).name)
def test_rotations_applied_to_given_u_and_vt(xp, setting, vdt):
    """u_in B vt_in = u_out diag(s) vt_out for rectangular, complex u (r x k) and vt (k x c)."""
    gpu_only_setting(xp, setting)
    rng = rng_for("uvt", vdt)
    rdt = np.float32 if vdt == np.complex64 else np.float64
    for k, r, c in ((1, 3, 2), (5, 7, 5), (9, 9, 12), (16, 3, 40)):
        for lower in (False, True):
            d, e = bidiagonal(rng, (3,), k, rdt)
            u = (rng.standard_normal((3, r, k)) + (1j * rng.standard_normal((3, r, k)) if np.dtype(vdt).kind == "c"
                                                   else 0)).astype(vdt)
            vt = (rng.standard_normal((3, k, c)) + (1j * rng.standard_normal((3, k, c)) if np.dtype(vdt).kind == "c"
                                                    else 0)).astype(vdt)
            s, U, VT, info = bdsqr(to_xp(xp, d), to_xp(xp, e), lower=lower, u=arrange(xp, u, "sub_F"),
                                   vt=arrange(xp, vt, "rows_reversed"), setting=setting)
            assert U.dtype == np.dtype(vdt) and VT.dtype == np.dtype(vdt)
            assert U.shape == (3, r, k) and VT.shape == (3, k, c)
            want = u.astype(np.complex128) @ dense(d, e, lower) @ vt.astype(np.complex128)
            got = to_np(U).astype(np.complex128) @ (to_np(s)[..., None] * to_np(VT).astype(np.complex128))
            bound = (np.abs(u).sum(-1).max() * np.abs(dense(d, e)).max() * np.abs(vt).sum(-2).max()
                     * k * eps(rdt))
            assert np.abs(got - want).max() <= THRESHOLD * bound


# --- hypothesis: shapes, batches, dtypes, layouts ------------------------------------------------


@given(data=st.data())
@SETTINGS
def test_property(xp, data):
    k = data.draw(st.sampled_from(K_EDGES) if xp is np else st.integers(0, 300), label="k")
    batch = data.draw(st.sampled_from([(), (0,), (1,), (3,), (2, 2)]), label="batch")
    dt_d, dt_e = data.draw(st.sampled_from([(np.float32,) * 2, (np.float64,) * 2, (np.float32, np.float64)]),
                           label="dtypes")
    lower = data.draw(st.booleans(), label="lower")
    vectors = data.draw(st.booleans(), label="vectors")
    kind = data.draw(st.sampled_from(["rand", "graded", "zero_diag", "clustered"]), label="kind")
    layout = data.draw(st.sampled_from(["C", "strided", "reversed", "batch_reversed"]), label="layout")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    d, e = bidiagonal(rng, batch, k, np.float64, kind)
    d, e = d.astype(dt_d), e.astype(dt_e)
    rdt = np.result_type(dt_d, dt_e)
    u = vt = None
    if vectors:
        u = vt = to_xp(xp, np.broadcast_to(np.eye(k), (*batch, k, k)).astype(rdt))
    s, U, VT, info = bdsqr(arrange(xp, d, layout, core=1), arrange(xp, e, layout, core=1), lower=lower,
                           u=u, vt=vt)
    assert s.shape == (*batch, k) and info.shape == batch and s.dtype == rdt
    assert not to_np(info).any()
    check_values(s, d.astype(rdt), e.astype(rdt), lower, rdt)
    if vectors and np.prod(batch, dtype=int):
        B = dense(d.astype(rdt), e.astype(rdt), lower)
        assert max(vector_ratios(B, U, s, VT)) <= THRESHOLD


# --- failures and bad input --------------------------------------------------------------------


@pytest.mark.parametrize("setting", ALL_SETTINGS, ids=str)
@pytest.mark.parametrize("vectors", [False, True])
def test_nan_stays_in_its_matrix(xp, setting, vectors):
    gpu_only_setting(xp, setting)
    if vectors and setting is not None and setting.group == 1:
        pytest.skip("vectors need a warp per matrix")
    rng = rng_for("nan", vectors)
    k = 9
    d, e = bidiagonal(rng, (4,), k, np.float64)
    d[1, 3] = np.nan
    e[2, 0] = np.inf
    eye = to_xp(xp, np.broadcast_to(np.eye(k), (4, k, k))) if vectors else None
    s, U, VT, info = bdsqr(to_xp(xp, d), to_xp(xp, e), u=eye, vt=eye, setting=setting)
    s, info = to_np(s), to_np(info)
    assert list(info) == [0, k, k, 0]
    assert np.isnan(s[1:3]).all() and np.isfinite(s[[0, 3]]).all()
    check_values(s[[0, 3]], d[[0, 3]], e[[0, 3]], False, np.float64)
    if vectors:
        assert np.isnan(to_np(U)[1:3]).all() and np.isfinite(to_np(U)[[0, 3]]).all()
        assert np.isnan(to_np(VT)[1:3]).all() and np.isfinite(to_np(VT)[[0, 3]]).all()


@pytest.mark.parametrize("group", [1, 32])
def test_iteration_cap_gives_info(xp, group):
    """maxitr = 0: one sweep, then info = the number of nonzero superdiagonals (LAPACK)."""
    rng = rng_for("cap")
    d, e = bidiagonal(rng, (6,), 12, np.float64)
    s, _, _, info = bdsqr(to_xp(xp, d), to_xp(xp, e), setting=BdsqrSetting(group, 4 if group == 32 else 32, 0))
    info = to_np(info)
    assert (info > 0).all() and (info <= 11).all()
    assert np.isfinite(to_np(s)).all()
    # the default cap converges
    assert not to_np(bdsqr(to_xp(xp, d), to_xp(xp, e))[3]).any()


def test_bad_input_raises_before_work(xp):
    d = to_xp(xp, np.ones((2, 4)))
    e = to_xp(xp, np.ones((2, 3)))
    with pytest.raises(TypeError, match="real"):
        bdsqr(to_xp(xp, np.ones((2, 4), np.complex128)), e)
    with pytest.raises(TypeError, match="dtype"):
        bdsqr(to_xp(xp, np.ones((2, 4), np.int64)), e)
    with pytest.raises(ValueError, match="e has shape"):
        bdsqr(d, to_xp(xp, np.ones((2, 4))))
    with pytest.raises(ValueError, match="u has shape"):
        bdsqr(d, e, u=to_xp(xp, np.ones((2, 5, 3))))
    with pytest.raises(ValueError, match="vt has shape"):
        bdsqr(d, e, vt=to_xp(xp, np.ones((3, 4, 4))))
    with pytest.raises(TypeError, match="lower"):
        bdsqr(d, e, lower=1)
    with pytest.raises(TypeError, match="BdsqrSetting"):
        bdsqr(d, e, setting=(32, 4))
    with pytest.raises(ValueError, match="group"):
        bdsqr(d, e, setting=BdsqrSetting(8, 4))
    with pytest.raises(ValueError, match="maxitr"):
        bdsqr(d, e, setting=BdsqrSetting(32, 4, -1))


def test_mixed_precision_promotes():
    d = np.ones(3, np.float32)
    e = np.full(2, 0.5, np.float64)
    s, u, vt, info = bdsqr(d, e, u=np.eye(3, dtype=np.complex64), vt=np.eye(3, dtype=np.float32))
    assert s.dtype == np.float64 and u.dtype == np.complex128 and vt.dtype == np.float64


# --- the plan (CPU) ------------------------------------------------------------------------------


def test_chooser_and_plan():
    assert choose_bdsqr_setting(16, vectors=True).group == 32
    assert choose_bdsqr_setting(16, vectors=False, count=100_000).group == 1
    assert choose_bdsqr_setting(512, vectors=False, count=256).group == 32
    assert choose_bdsqr_setting(64, vectors=False, count=1024).group == 32   # few large matrices: a warp each
    assert choose_bdsqr_setting(32, vectors=False, count=8192).group == 1
    assert bdsqr_wide(48, True) and not bdsqr_wide(47, True) and not bdsqr_wide(128, False)
    for s in BDSQR_SETTINGS:
        check_bdsqr_setting(s)
        assert s.threads_max <= MAX_THREADS
    # a thread per matrix: 2k reals per slot, slots shrink to stay under 48 KiB
    p = plan_bdsqr(BdsqrSetting(1, 128), 16, 8, 100_000, False, 227 * 1024)
    assert (p.block, p.slots, p.smem) == (128, 128, 128 * 2 * 16 * 8)
    p = plan_bdsqr(BdsqrSetting(1, 128), 512, 8, 1000, False, 227 * 1024)
    assert p.slots == SOFT_SMEM // (2 * 512 * 8) and p.block == p.slots and p.grid == -(-1000 // p.slots)
    # a warp per matrix with vectors: 6k reals + (2k + 4) ints per slot
    p = plan_bdsqr(BdsqrSetting(32, 4), 512, 8, 10, True, 227 * 1024)
    per = -(-(6 * 512 * 8 + (2 * 512 + 4) * 4) // 16) * 16
    assert p.block == 32 * p.slots and p.smem == -(-p.slots * per // 16) * 16 and p.slots == 1
    assert plan_bdsqr(BdsqrSetting(32, 4), 8, 4, 3, True, 227 * 1024).slots == 3  # never more than the batch
    with pytest.raises(ValueError, match="warp"):
        plan_bdsqr(BdsqrSetting(1, 128), 8, 8, 10, True, 227 * 1024)
    with pytest.raises(ValueError, match="shared memory"):
        plan_bdsqr(BdsqrSetting(32, 4), 10_000, 8, 10, True, 227 * 1024)
    assert plan_bdsqr(BdsqrSetting(1, 128), 4, 8, 10**12, False, 227 * 1024).grid == 2**31 - 1


# --- GPU only --------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("setting", ALL_SETTINGS, ids=str)
def test_many_small_bidiagonals(xp, setting):
    if xp is np:
        pytest.skip("GPU batch size")
    rng = rng_for("many", setting)
    for k in (4, 16):
        d, e = bidiagonal(rng, (70_000,), k, np.float64)
        s, _, _, info = bdsqr(to_xp(xp, d), to_xp(xp, e), setting=setting)
        assert not to_np(info).any()
        check_values(to_np(s)[::97], d[::97], e[::97], False, np.float64)
        ref = bdsqr(d[::1000], e[::1000])[0]
        assert np.allclose(to_np(s)[::1000], ref, rtol=1e-13, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("vdtype", [np.float64, np.complex128, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lower", [False, True])
def test_wide_rotations_equal_pair_at_a_time(xp, vdtype, lower, monkeypatch):
    """The WIDE kernels (rotations four streams and 8-16 pairs at a time, from
    BDSQR_WIDE_FROM on) do each entry's arithmetic in the same order as a pair at a
    time: the same bits, for u and vt of any shape (rows and columns not multiples
    of 32 or of the pair chunk), both sweep directions and the lower-to-upper pass."""
    if xp is np:
        pytest.skip("GPU kernels")
    rng = rng_for("wide", vdtype, lower)
    rdt = np.float32 if vdtype == np.float32 else np.float64
    k, r, c = 75, 139, 45
    d, e = bidiagonal(rng, (5,), k, rdt)
    u = rng.standard_normal((5, r, k))
    vt = rng.standard_normal((5, k, c))
    if np.dtype(vdtype).kind == "c":
        u = u + 1j * rng.standard_normal(u.shape)
    args = [to_xp(xp, a) for a in (d, e, u.astype(vdtype), vt.astype(vdtype))]
    assert bdsqr_wide(k, True)
    wide = bdsqr(*args[:2], lower=lower, u=args[2], vt=args[3])
    monkeypatch.setattr(svd_settings, "BDSQR_WIDE_FROM", 10**9)
    pairs = bdsqr(*args[:2], lower=lower, u=args[2], vt=args[3])
    for a, b in zip(wide, pairs):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    assert not to_np(wide[3]).any()
