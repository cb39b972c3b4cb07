"""Batched GEBRD and ORGBR against LAPACK's residuals and SciPy's singular values.

Every test body runs on NumPy (the CPU backend) and CuPy (the GPU, skipped
without one) through the ``xp`` fixture.  The ratios are LAPACK's (xBRD01 /
xORT01): ||A - Q B P^H|| / (max(m, n) ||A|| eps), ||I - Q^H Q|| / (m eps),
||I - P P^H|| / (n eps), all <= 30; the singular values of B match
scipy.linalg.svdvals(A) to 30 max(m, n) eps sigma_1.  GPU runs force every
registered setting (that fits) and the default chooser; outputs come from a
NaN-poisoned pool.  The blocked design (LABRD panels + GEMM trailing update) is
forced on both backends at sizes around its panel edges; on the CPU its output
equals the unblocked sweep's to rounding (the same reflectors in exact arithmetic).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations.gebrd import _gebd2_numpy, _gebrd_blocked_numpy, gebrd, orgbr
from batched.factorizations import gebrd_settings as gs
from batched.factorizations.gebrd_settings import (BLOCKED_SETTINGS, CLUSTER_SETTINGS, DEFAULT_BLOCKED,
                                                   GEBRD_SETTINGS, LANES_SETTINGS, GebrdSetting, choose_gebrd_setting,
                                                   cluster_setting_for, lanes_setting_for, plan_gebrd, plan_orgbr)
from conftest import assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from strategies import DTYPES, MATRIX_LAYOUTS, SETTINGS, arrange, batch_shapes, random_array

THRESHOLD = 30
KINDS = ("random", "svd_geo", "svd_cluster", "rank_deficient", "zero", "identity", "rand_scaled_ofl",
         "rand_scaled_ufl")
CPU_MAX = 12      # CPU sizes stay small: the suite runs in seconds
GPU_MAX = 300


def real_of(dtype):
    return np.empty(0, dtype=dtype).real.dtype


def eps(dtype):
    return float(np.finfo(real_of(dtype)).eps)


def make_matrices(rng, batch, m, n, dtype, kind):
    """LAPACK-test-style matrices (MAGMA's names): U diag(s) V^H with prescribed s, or special."""
    dtype = np.dtype(dtype)
    shape = (*batch, m, n)
    k = min(m, n)
    if kind == "zero":
        return np.zeros(shape, dtype)
    if kind == "identity":
        return np.broadcast_to(np.eye(m, n, dtype=dtype), shape).copy()
    if kind in ("random", "rand_scaled_ofl", "rand_scaled_ufl"):
        a = random_array(rng, shape, dtype)
        R = real_of(dtype)
        scale = {"random": 1.0, "rand_scaled_ofl": float(np.finfo(R).max) ** 0.5 / 8 * float(np.finfo(R).max) ** 0.5
                 / max(m, n, 1) / 4,
                 "rand_scaled_ufl": float(np.finfo(R).tiny) / float(np.finfo(R).eps)}[kind]
        with np.errstate(all="ignore"):
            return (a * R.type(scale)).astype(dtype)
    if k == 0:
        return np.zeros(shape, dtype)
    if kind == "svd_geo":
        s = np.geomspace(1.0, 1e-6 if real_of(dtype) == np.float32 else 1e-12, k)
    elif kind == "svd_cluster":
        s = np.r_[1.0, np.full(k - 1, 1e-3)] if k > 1 else np.ones(1)
    else:  # rank_deficient: half of the singular values exactly zero
        s = np.r_[np.ones((k + 1) // 2), np.zeros(k // 2)]
    wide = np.complex128 if dtype.kind == "c" else np.float64
    U = np.linalg.qr(random_array(rng, (*batch, m, m), wide))[0]
    V = np.linalg.qr(random_array(rng, (*batch, n, n), wide))[0]
    return ((U[..., :, :k] * s) @ V[..., :, :k].conj().swapaxes(-1, -2)).astype(dtype)


def bidiagonal(d, e, m, n):
    """B (..., k, k) from d, e: upper when m >= n, lower otherwise."""
    k = min(m, n)
    B = np.zeros((*d.shape[:-1], k, k), dtype=np.float64)
    i = np.arange(k)
    B[..., i, i] = d
    if k > 1:
        j = np.arange(k - 1)
        if m >= n:
            B[..., j, j + 1] = e
        else:
            B[..., j + 1, j] = e
    return B


def ratios(A, a, d, e, tauq, taup, xp):
    """(reconstruction, Q orthogonality, P orthogonality) ratios for one stacked batch."""
    A = np.asarray(to_np(A))
    m, n = A.shape[-2:]
    dtype = A.dtype
    Q = to_np(orgbr("Q", a, tauq)[0])
    Ph = to_np(orgbr("P", a, taup)[0])
    Qf = to_np(orgbr("Q", a, tauq, full_matrices=True)[0])
    Pf = to_np(orgbr("P", a, taup, full_matrices=True)[0])
    wide = np.complex128 if dtype.kind == "c" else np.float64
    B = bidiagonal(to_np(d).astype(np.float64), to_np(e).astype(np.float64), m, n)
    with np.errstate(all="ignore"):
        Aw = A.astype(wide)
        scale = np.abs(Aw).max(initial=0)
        scale = scale if scale > 0 and np.isfinite(scale) else 1.0
        # Scale before multiplying: near overflow the product itself overflows.
        R = Aw / scale - Q.astype(wide) @ (B / scale).astype(wide) @ Ph.astype(wide)
    e_ = eps(dtype)
    norm_a = max(np.linalg.norm(Aw / scale, 1, axis=(-2, -1)).max(initial=0), np.finfo(np.float64).tiny)
    rec = np.linalg.norm(R, 1, axis=(-2, -1)).max(initial=0) / (max(m, n, 1) * norm_a * e_)
    oq = np.abs(Qf.conj().swapaxes(-1, -2) @ Qf - np.eye(m)).sum(axis=-2).max(initial=0) / (max(m, 1) * e_)
    op = np.abs(Pf @ Pf.conj().swapaxes(-1, -2) - np.eye(n)).sum(axis=-2).max(initial=0) / (max(n, 1) * e_)
    return rec, oq, op


def check_singular_values(A, d, e):
    A = to_np(A)
    m, n = A.shape[-2:]
    k = min(m, n)
    if k == 0:
        return
    B = bidiagonal(to_np(d).astype(np.float64), to_np(e).astype(np.float64), m, n)
    wide = np.complex128 if A.dtype.kind == "c" else np.float64
    for idx in np.ndindex(A.shape[:-2]):
        a = A[idx].astype(wide)
        s_ref = scipy.linalg.svdvals(a)
        s = scipy.linalg.svdvals(B[idx])
        tol = THRESHOLD * max(m, n) * eps(A.dtype) * max(s_ref[0], np.finfo(np.float64).tiny)
        assert np.abs(s - s_ref).max() <= tol, (idx, s, s_ref)


def check_shapes(A, out):
    a, d, e, tauq, taup, info = out
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    k = min(m, n)
    R = real_of(A.dtype)
    assert a.shape == A.shape and a.dtype == A.dtype
    assert d.shape == (*batch, k) and d.dtype == R
    assert e.shape == (*batch, max(k - 1, 0)) and e.dtype == R
    assert tauq.shape == (*batch, k) and tauq.dtype == A.dtype
    assert taup.shape == (*batch, k) and taup.dtype == A.dtype
    assert info.shape == batch and info.dtype == np.int32 and not to_np(info).any()
    if k:
        last = to_np(taup)[..., k - 1] if m >= n else to_np(tauq)[..., k - 1]
        assert not np.any(last), "LAPACK's last tau is zero"


def result_bytes(batch, m, n, dtype):
    return int(np.prod(batch, dtype=np.int64)) * m * n * np.dtype(dtype).itemsize


# --- residual properties -----------------------------------------------------------------------


@st.composite
def gebrd_cases(draw, max_dim):
    m = draw(st.one_of(st.integers(0, max_dim), st.sampled_from([0, 1, 2, max_dim])))
    n = draw(st.one_of(st.integers(0, max_dim), st.sampled_from([0, 1, 2, max_dim])))
    return (m, n, draw(st.sampled_from(DTYPES)), draw(batch_shapes()), draw(st.sampled_from(KINDS)),
            draw(st.sampled_from(MATRIX_LAYOUTS)), draw(st.integers(0, 2**31)))


SETTINGS_UNDER_TEST = [*GEBRD_SETTINGS, None]


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_gebrd_residuals(xp, setting, data):
    if setting is None or not setting.blocked:  # blocked settings change the CPU algorithm: run them there
        gpu_only_setting(xp, setting)
    m, n, dtype, batch, kind, layout, seed = data.draw(gebrd_cases(CPU_MAX if xp is np else 64))
    if xp is np and setting is not None:  # past the panel width, where the blocked algorithm differs
        m, n = m + setting.nb, n + setting.nb + (m % 3) - 1
        batch = batch[:1]
    if setting is not None and setting.lanes:  # real matrices in the group (the shapes drawn folded into it)
        m, n, dtype = m % (setting.dim_x + 1), n % (setting.dim_x + 1), real_of(dtype)
    if setting is not None and setting.stage and setting.smem_bytes(m, n, dtype.itemsize) > 227 * 1024:
        return
    A = make_matrices(np.random.default_rng(seed), batch, m, n, dtype, kind)
    Ad = arrange(xp, A, layout)
    before = snapshot(Ad)
    poison_pool(xp, result_bytes(batch, m, n, dtype))
    out = gebrd(Ad, setting=setting)
    assert_unchanged([Ad], before)
    check_shapes(A, out)
    a, d, e, tauq, taup, _ = out
    rec, oq, op = ratios(A, a, d, e, tauq, taup, xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (rec, oq, op)
    if kind not in ("rand_scaled_ufl",):
        check_singular_values(A, d, e)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(9, 9), (11, 4), (4, 11), (1, 7), (7, 1)], ids=str)
def test_gebrd_matrix_kinds(xp, kind, dtype, shape):
    m, n = shape
    A = make_matrices(rng_for("kinds", kind, dtype, shape), (3,), m, n, dtype, kind)
    out = gebrd(to_xp(xp, A))
    check_shapes(A, out)
    rec, oq, op = ratios(A, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (rec, oq, op)
    if kind != "rand_scaled_ufl":  # svdvals of a matrix of subnormals is itself inexact
        check_singular_values(A, out[1], out[2])
    if kind == "zero":
        assert not to_np(out[1]).any() and not to_np(out[2]).any()
        assert not to_np(out[3]).any() and not to_np(out[4]).any()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_complex_bidiagonal_is_real_and_matches_lapack_magnitudes(xp, dtype):
    """d, e real (dtype check above); |d|, |e| equal those of the same sweep in float64
    arithmetic (SciPy wraps no xGEBRD, so the reference is the CPU backend in the wide type)."""
    A = make_matrices(rng_for("mag", dtype), (4,), 8, 6, dtype, "random")
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    _, d_ref, e_ref, *_ = gebrd(A.astype(wide))
    _, d, e, *_ = gebrd(to_xp(xp, A))
    tol = 50 * 8 * eps(dtype) * np.abs(A).max()
    assert np.abs(np.abs(to_np(d)) - np.abs(d_ref)).max() <= tol
    assert np.abs(np.abs(to_np(e)) - np.abs(e_ref)).max() <= tol


# --- GPU sizes and batches -------------------------------------------------------------------


GPU_SHAPES = [(8, 8), (16, 16), (32, 32), (33, 17), (17, 33), (64, 64), (127, 127), (128, 128), (129, 129),
              (166, 166), (167, 167), (200, 100), (100, 200), (256, 256), (300, 300)]


@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gebrd_gpu_sizes(xp, shape, dtype):
    if xp is np:
        pytest.skip("large sizes run on the GPU only (the CPU backend is the same sweep)")
    m, n = shape
    A = make_matrices(rng_for("gpu", shape, dtype), (2,), m, n, dtype, "random")
    poison_pool(xp, result_bytes((2,), m, n, dtype))
    out = gebrd(to_xp(xp, A))
    check_shapes(A, out)
    rec, oq, op = ratios(A, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (rec, oq, op)
    check_singular_values(A, out[1], out[2])


@given(m=st.integers(0, GPU_MAX), n=st.integers(0, GPU_MAX), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**31))
@SETTINGS
def test_gebrd_gpu_hypothesis_shapes(xp, m, n, dtype, seed):
    if xp is np:
        pytest.skip("shapes up to 300 on the GPU only")
    A = make_matrices(np.random.default_rng(seed), (2,), m, n, dtype, "random")
    out = gebrd(to_xp(xp, A))
    rec, oq, op = ratios(A, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (rec, oq, op)


def test_gebrd_many_small(xp):
    count = 70_000 if xp is not np else 200
    A = make_matrices(rng_for("many"), (count,), 6, 5, np.float64, "random")
    out = gebrd(to_xp(xp, A))
    pick = np.r_[0, 1, count // 2, count - 1]
    rec, oq, op = ratios(A[pick], *(to_np(x)[pick] for x in out[:5]), np)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD


def test_nan_stays_in_its_matrix(xp):
    A = make_matrices(rng_for("nan"), (5,), 7, 6, np.float64, "random")
    A[2, 3, 1] = np.nan
    A[4, 0, 0] = np.inf
    a, d, e, tauq, taup, _ = (to_np(x) for x in gebrd(to_xp(xp, A)))
    clean = [0, 1, 3]
    for x in (a, d, e, tauq, taup):
        assert np.isfinite(x[clean]).all()
    rec, oq, op = ratios(A[clean], a[clean], d[clean], e[clean], tauq[clean], taup[clean], np)
    assert rec < THRESHOLD
    assert np.isnan(d[2]).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_lanes_design_where_the_default_path_goes(xp, dtype):
    """The lanes design forced on what the default path's tests give the chooser (it is not
    the default until measured: gebrd_settings.LANES_BY_DEFAULT): a NaN and an Inf matrix
    among clean ones (all of theirs NaN, the rest untouched), 70,000 matrices (each group
    walks several, the next one's copy in flight), shapes 1 x n, n x 1 and every size to 32
    square, tall and wide, in place, and lists with empty members."""
    gpu_only_setting(xp, LANES_SETTINGS[0])
    rng = rng_for("lanes", dtype)
    A = make_matrices(rng, (5,), 7, 6, dtype, "random")
    A[2, 3, 1], A[4, 0, 0] = np.nan, np.inf
    out = [to_np(x) for x in gebrd(to_xp(xp, A), setting=lanes_setting_for(7, 6, dtype))]
    clean = [0, 1, 3]
    for x in out[:5]:
        assert np.isfinite(x[clean]).all() and np.isnan(x[[2, 4]]).all()
    rec, oq, op = ratios(A[clean], *(x[clean] for x in out[:5]), np)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD
    many = make_matrices(rng, (70_000,), 12, 9, dtype, "random")
    poison_pool(xp, result_bytes((70_000,), 12, 9, dtype))
    out = gebrd(to_xp(xp, many), setting=LANES_SETTINGS[1])
    pick = np.r_[0, 1, 35_000, 69_999]
    rec, oq, op = ratios(many[pick], *(to_np(x)[pick] for x in out[:5]), np)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD
    for m, n in [(1, 1), (1, 32), (32, 1), (2, 3)] + [(k, k) for k in range(3, 33, 3)] + [(32, 20), (20, 32)]:
        A = make_matrices(rng, (3,), m, n, dtype, "random")
        out = gebrd(to_xp(xp, A), setting=lanes_setting_for(m, n, dtype))
        check_shapes(A, out)
        rec, oq, op = ratios(A, *out[:5], xp)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (m, n, rec, oq, op)
        check_singular_values(A, out[1], out[2])
    ref = make_matrices(rng, (4,), 9, 5, dtype, "svd_geo")
    A = arrange(xp, ref, "F")
    out = gebrd(A, overwrite_a=True, setting=LANES_SETTINGS[1])
    assert out[0] is A
    rec, oq, op = ratios(ref, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD
    shapes = [(5, 4), (0, 3), (8, 8), (1, 1), (3, 7), (8, 0)]
    mats = [make_matrices(rng, (), m, n, dtype, "random") for m, n in shapes]
    a, d, e, tauq, taup, info = gebrd([to_xp(xp, x) for x in mats], setting=LANES_SETTINGS[0])
    for i, x in enumerate(mats):
        if min(x.shape) == 0:
            continue
        rec, oq, op = ratios(x[None], *(to_np(v)[None] for v in (a[i], d[i], e[i], tauq[i], taup[i])), np)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (x.shape, rec, oq, op)


@pytest.mark.parametrize("setting", CLUSTER_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
def test_cluster_design_against_one_block(xp, setting, dtype):
    """The blocked design on a cluster of 2-8 blocks a matrix (not the default until
    measured: gebrd_settings.CLUSTER_BY_DEFAULT) reduces the same matrices as one block
    (DEFAULT_BLOCKED, the same panels and GEMVs split by rows and columns: d, e equal to
    rounding) with LAPACK's residuals: square, tall and wide with several panels, one
    panel and a tail of one column, n <= nb (no panel: the first block alone), one matrix, more matrices than clusters (each cluster walks several), a block
    of a bigger matrix (misaligned columns), a NaN matrix among clean ones, and lists."""
    gpu_only_setting(xp, setting)
    rng = rng_for("cluster", setting.cluster, dtype)
    tol = 200 * eps(dtype)
    for (m, n), count in [((200, 200), 3), ((300, 170), 1), ((33, 17), 2), ((17, 33), 2), ((40, 16), 2),
                          ((100, 200), 2), ((64, 96), 40), ((96, 64), 40)]:
        A = make_matrices(rng, (count,), m, n, dtype, "random")
        poison_pool(xp, result_bytes((count,), m, n, dtype))
        out = gebrd(to_xp(xp, A), setting=setting)
        check_shapes(A, out)
        pick = np.r_[0, count - 1]
        rec, oq, op = ratios(A[pick], *(to_np(x)[pick] for x in out[:5]), np)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (m, n, rec, oq, op)
        ref = gebrd(to_xp(xp, A), setting=DEFAULT_BLOCKED)
        scale = np.abs(A).max()
        for got, want in zip(out[1:3], ref[1:3]):
            assert np.abs(to_np(got) - to_np(want)).max(initial=0) <= tol * max(m, n) * scale, (m, n)
        check_singular_values(A[pick], to_np(out[1])[pick], to_np(out[2])[pick])
    A = make_matrices(rng, (2,), 150, 120, dtype, "svd_geo")
    out = gebrd(arrange(xp, A, "sub_F"), setting=setting)
    rec, oq, op = ratios(A, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD
    A = make_matrices(rng, (4,), 80, 70, dtype, "random")
    A[1, 50, 3] = np.nan
    out = [to_np(x) for x in gebrd(to_xp(xp, A), setting=setting)]
    clean = [0, 2, 3]
    for x in out[:5]:
        assert np.isfinite(x[clean]).all()
    assert np.isnan(out[1][1]).any()
    rec, oq, op = ratios(A[clean], *(x[clean] for x in out[:5]), np)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD
    shapes = [(120, 90), (60, 130), (0, 5), (70, 70), (18, 17), (3, 2)]
    mats = [make_matrices(rng, (), m, n, dtype, "random") for m, n in shapes]
    a, d, e, tauq, taup, info = gebrd([to_xp(xp, x) for x in mats], setting=setting)
    for i, x in enumerate(mats):
        if min(x.shape) == 0:
            continue
        rec, oq, op = ratios(x[None], *(to_np(v)[None] for v in (a[i], d[i], e[i], tauq[i], taup[i])), np)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (x.shape, rec, oq, op)


@pytest.mark.parametrize("setting", [DEFAULT_BLOCKED, CLUSTER_SETTINGS[1]], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
def test_narrow_panel_gemvs(xp, monkeypatch, setting, dtype):
    """LABRD's GEMV-Ns on the panel's columns with a thread a row (gebrd_settings.NARROW_GEMV
    forced; by default from NARROW_GEMV_FROM rows or columns on): the same reduction as the 32 x 8 shape to rounding, LAPACK's
    residuals, tall and wide, one block and a cluster."""
    gpu_only_setting(xp, setting)
    rng = rng_for("narrow", dtype, setting.cluster)
    for m, n in [(200, 170), (170, 200), (300, 33)]:
        A = make_matrices(rng, (3,), m, n, dtype, "random")
        monkeypatch.setattr(gs, "NARROW_GEMV", False)
        ref = gebrd(to_xp(xp, A), setting=setting)
        monkeypatch.setattr(gs, "NARROW_GEMV", True)
        poison_pool(xp, result_bytes((3,), m, n, dtype))
        out = gebrd(to_xp(xp, A), setting=setting)
        check_shapes(A, out)
        rec, oq, op = ratios(A, *out[:5], xp)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (m, n, rec, oq, op)
        scale = np.abs(A).max()
        for got, want in zip(out[1:3], ref[1:3]):
            assert np.abs(to_np(got) - to_np(want)).max() <= 200 * eps(dtype) * max(m, n) * scale, (m, n)


def test_narrow_gemv_rule_by_size(monkeypatch):
    """The narrow panel GEMVs by default from NARROW_GEMV_FROM (the larger side of the
    batch's largest matrix), slower below it on the H100; NARROW_GEMV forces either."""
    monkeypatch.setattr(gs, "NARROW_GEMV", None)
    edge = gs.NARROW_GEMV_FROM
    assert not gs.narrow_gemv_for(256, 256) and not gs.narrow_gemv_for(edge - 1, 64)
    assert gs.narrow_gemv_for(edge, 256) and gs.narrow_gemv_for(256, edge) and gs.narrow_gemv_for(1024, 512)
    for forced in (True, False):
        monkeypatch.setattr(gs, "NARROW_GEMV", forced)
        assert gs.narrow_gemv_for(32, 32) is forced and gs.narrow_gemv_for(2048, 2048) is forced


# --- lists (pointer and variable layouts) ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shapes", [[(5, 4)] * 3, [(5, 4), (3, 6), (1, 1), (0, 3), (7, 7)], []], ids=str)
def test_gebrd_orgbr_lists(xp, dtype, shapes):
    rng = rng_for("lists", dtype, shapes)
    mats = [make_matrices(rng, (), m, n, dtype, "random") for m, n in shapes]
    arrays = [arrange(xp, M, layout) for M, layout in zip(mats, ["F", "C", "sub_F", "rows_sliced", "C"])]
    before = snapshot(*arrays)
    a, d, e, tauq, taup, info = gebrd(arrays)
    assert_unchanged(arrays, before)
    assert isinstance(a, list) and len(a) == len(shapes) and to_np(info).shape == (len(shapes),)
    q, _ = orgbr("Q", a, tauq)
    p, _ = orgbr("P", a, taup, full_matrices=True)
    for i, M in enumerate(mats):
        single = gebrd(M)  # the CPU backend, one matrix
        check_shapes(M, (a[i], d[i], e[i], tauq[i], taup[i], np.zeros((), np.int32)))
        rec, oq, op = ratios(M, a[i], d[i], e[i], tauq[i], taup[i], np)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD
        np.testing.assert_allclose(np.abs(to_np(d[i])), np.abs(single[1]), atol=1e3 * eps(dtype))
        assert to_np(q[i]).shape == (M.shape[0], min(M.shape)) and to_np(p[i]).shape == (M.shape[1],) * 2


# --- ORGBR shapes -----------------------------------------------------------------------------


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (0, 3), (3, 0), (1, 5)], ids=str)
def test_orgbr_shapes(xp, shape, full):
    m, n = shape
    k = min(m, n)
    A = make_matrices(rng_for("orgbr", shape), (2,), m, n, np.complex128, "random")
    a, d, e, tauq, taup, _ = gebrd(to_xp(xp, A))
    q, info = orgbr("q", a, tauq, full_matrices=full)
    p, _ = orgbr("P", a, taup, full_matrices=full)
    assert q.shape == (2, m, m if full else k) and p.shape == (2, n if full else k, n)
    assert to_np(info).shape == (2,)
    if not full:
        B = bidiagonal(to_np(d), to_np(e), m, n)
        np.testing.assert_allclose(to_np(q) @ B @ to_np(p), A, atol=1e-12 * max(np.abs(A).max(initial=0), 1))


# --- overwrite_a, validation, settings and the plan --------------------------------------------


def test_overwrite_a(xp):
    A = make_matrices(rng_for("ow"), (3,), 6, 5, np.float64, "random")
    Ad = arrange(xp, A, "C" if xp is np else "F")
    a, *_ = gebrd(Ad, overwrite_a=True)
    assert a is Ad
    ref = gebrd(A)[0]
    np.testing.assert_allclose(to_np(a), ref, atol=1e-12)
    Ad2 = to_xp(xp, A)
    gebrd(Ad2)
    np.testing.assert_array_equal(to_np(Ad2), A)  # default: never modified


@pytest.mark.parametrize("bad, error", [
    (np.ones((3, 3), dtype=np.int64), TypeError),
    (np.ones(3), ValueError),
    (np.ones((2, 2), dtype=np.float16), TypeError),
])
def test_gebrd_bad_input(xp, bad, error):
    with pytest.raises(error):
        gebrd(to_xp(xp, bad))


def test_bad_arguments(xp):
    A = to_xp(xp, np.ones((2, 4, 3)))
    with pytest.raises(TypeError):
        gebrd(A, setting="fast")
    with pytest.raises(ValueError):
        gebrd(A, setting=GebrdSetting(7, 3))
    with pytest.raises(TypeError):
        gebrd(A, overwrite_a=1)
    a, d, e, tauq, taup, _ = gebrd(A)
    with pytest.raises(ValueError):
        orgbr("X", a, tauq)
    with pytest.raises(ValueError):
        orgbr("Q", a, tauq[..., :2])
    with pytest.raises(TypeError):
        orgbr("Q", a, tauq, full_matrices="yes")
    with pytest.raises(ValueError):
        gebrd([np.ones((2, 2)), np.ones(3)])


def test_lanes_setting_for_shapes_and_the_chooser_switch(monkeypatch):
    # real matrices up to 32 x 32: the smallest group that holds the rows
    assert lanes_setting_for(8, 8, np.float64) == LANES_SETTINGS[0] == GebrdSetting(8, 1, False, 0, True)
    assert lanes_setting_for(9, 3, np.float32) == GebrdSetting(16, 1, False, 0, True)
    assert lanes_setting_for(17, 32, np.float64) == lanes_setting_for(32, 1, np.float32) == LANES_SETTINGS[2]
    assert lanes_setting_for(33, 2, np.float64) is None and lanes_setting_for(4, 4, np.complex128) is None
    assert all(s.lanes for s in LANES_SETTINGS) and str(LANES_SETTINGS[1]) == "gebrd16lanes"
    # the chooser takes them where the switch is on (on since the H100's measurements)
    assert choose_gebrd_setting(8, 8, np.float64) == (LANES_SETTINGS[0] if gs.LANES_BY_DEFAULT
                                                      else GebrdSetting(8, 4, True))
    monkeypatch.setattr(gs, "LANES_BY_DEFAULT", True)
    assert choose_gebrd_setting(20, 9, np.float32) == LANES_SETTINGS[2]
    assert choose_gebrd_setting(20, 9, np.complex64) == GebrdSetting(8, 4, True)
    monkeypatch.setattr(gs, "LANES_BY_DEFAULT", False)
    assert choose_gebrd_setting(20, 9, np.float32) == GebrdSetting(8, 4, True)


def test_chooser_and_plan(monkeypatch):
    monkeypatch.setattr(gs, "LANES_BY_DEFAULT", False)  # the staged and blocked designs' choices
    s = choose_gebrd_setting(8, 8, np.complex64)
    assert s.stage and s.threads == 32
    assert choose_gebrd_setting(8, 8, np.float64) == s
    assert choose_gebrd_setting(33, 33, np.float64) == GebrdSetting(16, 4, True)
    assert choose_gebrd_setting(64, 64, np.complex64).stage
    assert choose_gebrd_setting(127, 127, np.float64).stage
    # big-tile wherever it fits (measured faster than the blocked design there), with
    # the measured thread shapes; the blocked design beyond
    assert choose_gebrd_setting(32, 32, np.complex64) == choose_gebrd_setting(32, 32, np.float64) == GebrdSetting(
        8, 4, True)
    assert choose_gebrd_setting(64, 64, np.float32) == GebrdSetting(16, 4, True)
    assert choose_gebrd_setting(96, 96, np.float32) == GebrdSetting(32, 4, True)
    assert choose_gebrd_setting(128, 128, np.float64) == GebrdSetting(32, 8, True)
    assert choose_gebrd_setting(160, 160, np.float64) == GebrdSetting(32, 16, True)
    assert choose_gebrd_setting(166, 166, np.float64) == GebrdSetting(32, 8, True)  # 32 x 16's GEMV work does not fit
    assert choose_gebrd_setting(167, 167, np.float64) == GebrdSetting(32, 8, False, 16)
    big = choose_gebrd_setting(300, 300, np.float64)
    assert big.blocked and not big.stage and big.threads == 256 and big.nb == 16
    # tall / wide stay big-tile while they fit, whatever their length
    assert choose_gebrd_setting(200, 100, np.float64).stage and choose_gebrd_setting(100, 200, np.float64).stage
    # narrow ones too long for shared memory: the blocked kernel (no panel: the sweep in device memory)
    assert choose_gebrd_setting(5000, 8, np.float64).blocked
    # staged: matrix + w + GEMV and vector work; 16-byte aligned parts
    assert s.smem_bytes(8, 8, 8) == 8 * 8 * 8 + 64
    assert GebrdSetting(32, 8, True).smem_bytes(100, 50, 16) == 100 * 50 * 16 + 1600 + 32 * 8 * 4 * 16 + 8 * 48
    assert GebrdSetting(32, 8, False).smem_bytes(100, 50, 16) == 1600 + 32 * 8 * 4 * 16 + 8 * 48
    plan = plan_gebrd(s, 8, 8, 8, 70_000, 227 * 1024)
    assert (plan.grid, plan.block, plan.smem) == (70_000, 32, 576)
    assert plan_gebrd(s, 8, 8, 8, 0, 227 * 1024).grid == 1
    assert plan_gebrd(s, 8, 8, 8, 2**40, 227 * 1024).grid == 2**31 - 1
    with pytest.raises(ValueError):
        plan_gebrd(GebrdSetting(32, 8, True), 300, 300, 8, 1, 227 * 1024)
    assert plan_orgbr(GebrdSetting(32, 4, False), 100, 8, 5, 227 * 1024).smem == 2 * 800 + 32 * 4 * 4 * 8 + 4 * 48
    # the switch to the blocked design follows the shared-memory limit too
    assert choose_gebrd_setting(117, 117, np.complex128).stage
    assert choose_gebrd_setting(118, 118, np.complex128).blocked
    assert choose_gebrd_setting(100, 100, np.float64, smem_limit=48 * 1024).blocked


def test_cluster_settings_chooser_and_plan(monkeypatch):
    """Clusters of 2, 4, 8 blocks a matrix for batches that leave SMs idle (m >= n > nb);
    taken by default where CLUSTER_BY_DEFAULT is on; the plan: a workspace slot per
    cluster, a whole number of clusters, at most one block an SM."""
    c2, c4, c8 = CLUSTER_SETTINGS
    assert (c2.cluster, c4.cluster, c8.cluster) == (2, 4, 8) and all(s.nb == 16 and s.blocked for s in CLUSTER_SETTINGS)
    assert str(c4) == "gebrd32x8blocked16cluster4" and DEFAULT_BLOCKED.cluster == 1
    # the largest cluster that fits the SMs and leaves each block 256 rows of the longer side
    assert cluster_setting_for(512, 512, 32) == c2 and cluster_setting_for(1024, 512, 16) == c4
    assert cluster_setting_for(512, 512, 64) == c2 and cluster_setting_for(512, 512, 1) == c2
    assert cluster_setting_for(2048, 512, 16) == c8 and cluster_setting_for(1024, 512, 64) == c2
    assert cluster_setting_for(256, 256, 8) is None  # 128 rows a block: slower than one block
    assert cluster_setting_for(512, 256, 67) is None  # two blocks each would not fit 132 SMs
    assert cluster_setting_for(256, 512, 4) == c2 and cluster_setting_for(5000, 16, 4) is None
    assert cluster_setting_for(512, 512, 0) is None and cluster_setting_for(2048, 2048, 8, sm_count=64) == c8
    monkeypatch.setattr(gs, "CLUSTER_BY_DEFAULT", False)
    assert choose_gebrd_setting(512, 512, np.float64, count=32) == DEFAULT_BLOCKED
    monkeypatch.setattr(gs, "CLUSTER_BY_DEFAULT", True)
    assert choose_gebrd_setting(512, 512, np.float64, count=32) == c2
    assert choose_gebrd_setting(1024, 512, np.float64, count=16) == c4
    assert choose_gebrd_setting(512, 512, np.float64) == DEFAULT_BLOCKED  # count unknown
    assert choose_gebrd_setting(100, 100, np.float64, count=1).stage  # big-tile wherever it fits
    plan = plan_gebrd(c4, 512, 512, 8, 32, 227 * 1024, sm_count=132)
    assert (plan.grid, plan.block, plan.xy_shared) == (128, 256, False)
    assert plan.work_elems == 32 * 1024 * 16 and plan.smem == c4.smem_bytes(512, 512, 8, xy_shared=False)
    many = plan_gebrd(c8, 300, 300, 8, 1000, 227 * 1024, sm_count=132)
    assert many.grid == 16 * 8 and many.work_elems == 16 * 600 * 16
    assert plan_gebrd(c2, 40, 16, 8, 1, 227 * 1024).grid == 2  # no panel: still a whole cluster


def test_lanes_plan_and_fit():
    g32, g8 = LANES_SETTINGS[2], LANES_SETTINGS[0]
    # four groups of 32 a block: stages of 32 x 33 entries, tiles of 32 x 34 and w of 32
    assert g32.lanes_smem_bytes(8) == (4 * 32 * 33 * 8, 4 * 32 * 35 * 8)
    assert g8.lanes_smem_bytes(4) == (16 * 8 * 9 * 4, 16 * 8 * 11 * 4)
    plan = plan_gebrd(g32, 32, 20, 8, 70_000, 227 * 1024)
    assert (plan.grid, plan.block, plan.smem) == (17_500, 128, 4 * 32 * 33 * 8)
    assert plan_gebrd(g8, 8, 8, 8, 70_001, 227 * 1024, resident=264).grid == 264
    assert plan_gebrd(g8, 8, 8, 8, 17, 227 * 1024, resident=264).grid == 2
    assert g8.fits(8, 3, np.float32) and g8.fits(0, 8, np.float64)
    assert not g8.fits(9, 3, np.float32) and not g8.fits(4, 4, np.complex64)
    assert GebrdSetting(32, 8, True).fits(500, 500, np.complex128)


@pytest.mark.parametrize("setting, shape, dtype", [
    (LANES_SETTINGS[0], (9, 4), np.float64), (LANES_SETTINGS[1], (4, 17), np.float32),
    (LANES_SETTINGS[2], (4, 4), np.complex64), (LANES_SETTINGS[2], (40, 2), np.float32)], ids=str)
def test_lanes_setting_that_does_not_fit(xp, setting, shape, dtype):
    """A forced lanes setting on complex matrices or ones too long: ValueError on both backends
    (stacked and lists)."""
    A = to_xp(xp, np.ones((2, *shape), dtype))
    with pytest.raises(ValueError, match="real matrices"):
        gebrd(A, setting=setting)
    with pytest.raises(ValueError, match="real matrices"):
        gebrd([A[0], A[1][:1]], setting=setting)


def test_blocked_plan():
    b16 = GebrdSetting(32, 8, False, 16)
    # sv (16 pad + 300) + su (300) + t (2 nb) + work max(GEMV 1024, GEMM 8*65 + 8*33) + vwork 8*48 + X, Y
    base = (316 + 300 + 32 + 1024) * 8 + 384
    assert b16.smem_bytes(300, 300, 8, xy_shared=False) == base
    assert b16.smem_bytes(300, 300, 8) == base + 600 * 16 * 8
    plan = plan_gebrd(b16, 300, 300, 8, 10_000, 227 * 1024)
    assert plan.xy_shared and plan.work_elems == 0 and plan.grid == 10_000 and plan.smem == base + 600 * 16 * 8
    # X and Y past the limit: a device workspace slot per block, the grid capped at resident blocks
    big = plan_gebrd(b16, 512, 512, 16, 10_000, 227 * 1024, sm_count=132)
    assert not big.xy_shared and big.grid == 132 * 8 and big.work_elems == big.grid * 1024 * 16
    assert big.smem == b16.smem_bytes(512, 512, 16, xy_shared=False) <= 227 * 1024
    small = plan_gebrd(b16, 512, 512, 16, 5, 227 * 1024, sm_count=132)
    assert small.grid == 5 and small.work_elems == 5 * 1024 * 16
    # no panel (min(m, n) <= nb): no X, Y
    narrow = plan_gebrd(b16, 5000, 16, 8, 10_000, 227 * 1024)
    assert not narrow.xy_shared and narrow.work_elems == 0 and narrow.grid == 10_000
    assert GebrdSetting(32, 8, False, 32).smem_bytes(64, 64, 4) == (
        (32 + 64) * 4 + 64 * 4 + 64 * 4 + 1024 * 4 + 384 + 128 * 32 * 4)
    assert str(b16) == "gebrd32x8blocked16" and str(GebrdSetting(8, 4)) == "gebrd8x4staged"


# --- the blocked design (LABRD panels + trailing GEMM) -----------------------------------------


def _unblocked_reference(A):
    """The unblocked sweep's outputs on A, and how far they move when A is perturbed
    by a few units of roundoff (the sensitivity of the reduction itself: near-
    degenerate trailing blocks amplify rounding in the last reflectors, whatever the
    algorithm)."""
    a = np.array(A, copy=True, order="C")  # reshaped below as a view (see test_lu.permute_rows)
    ref = (a, *_gebd2_numpy(a.reshape(-1, *A.shape[-2:])))
    spread = [0.0] * len(ref)
    for seed in (12345, 2, 3):   # the largest move of three perturbations (one underestimated it)
        rng = np.random.default_rng(seed)
        noise = rng.uniform(-4, 4, A.shape) * eps(A.dtype)
        with np.errstate(all="ignore"):
            ap = (A * (1 + noise).astype(real_of(A.dtype))).astype(A.dtype)
        moved = (ap, *_gebd2_numpy(ap.reshape(-1, *A.shape[-2:])))
        spread = [max(sp, np.abs(np.asarray(x).reshape(y.shape) - y).max(initial=0))
                  for sp, x, y in zip(spread, moved, ref)]
    return [np.asarray(x).reshape(*A.shape[:-2], *x.shape[1:]) if i else x for i, x in enumerate(ref)], spread


def _close_to_unblocked(A, got):
    """Blocked vs unblocked outputs equal to rounding: |x - x_ref| <= 64 max(m, n) eps
    ||A|| plus 16 times the move of x_ref under a roundoff-sized perturbation of A."""
    A = np.asarray(A)
    m, n = A.shape[-2:]
    ref, spread = _unblocked_reference(A)
    scale = max(np.abs(A).max(initial=0), np.finfo(np.float64).tiny)
    tol = 64 * max(m, n) * eps(A.dtype)
    for name, x, y, moved in zip(("a", "d", "e", "tauq", "taup"), got, ref, spread):
        x = np.asarray(to_np(x))
        assert x.shape == y.shape, name
        # d, e scale with A; tau is in [0, 2]; a holds both (O(1) reflector entries)
        s = 1.0 if name.startswith("tau") else max(scale, 1.0) if name == "a" else scale
        bound = tol * s + 16 * moved
        assert np.abs(x - y).max(initial=0) <= bound, (name, np.abs(x - y).max(initial=0), bound)


@given(m=st.integers(1, 14), n=st.integers(1, 14), nb=st.integers(1, 5), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**31))
@SETTINGS
def test_blocked_numpy_equals_unblocked(m, n, nb, dtype, seed):
    """Small panel widths put many panels and every edge into small matrices."""
    A = make_matrices(np.random.default_rng(seed), (3,), m, n, dtype, "random")
    a = A.copy()
    got = _gebrd_blocked_numpy(a, nb)
    _close_to_unblocked(A, (a, *got))


def _panel_edge_shapes(nb):
    sizes = (nb - 1, nb, nb + 1, 2 * nb + 1)
    return [(s, s) for s in sizes] + [(2 * s, s) for s in sizes] + [(s, 2 * s + 3) for s in sizes]


BLOCKED_CASES = [(s, shape) for s in BLOCKED_SETTINGS for shape in _panel_edge_shapes(s.nb)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("setting, shape", BLOCKED_CASES, ids=[f"{s}-{m}x{n}" for s, (m, n) in BLOCKED_CASES])
def test_gebrd_blocked_panel_edges(xp, setting, shape, dtype):
    m, n = shape
    A = make_matrices(rng_for("blocked", setting, shape, dtype), (2,), m, n, dtype, "random")
    poison_pool(xp, result_bytes((2,), m, n, dtype))
    out = gebrd(to_xp(xp, A), setting=setting)
    check_shapes(A, out)
    rec, oq, op = ratios(A, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (rec, oq, op)
    check_singular_values(A, out[1], out[2])
    if xp is np:  # the blocked algorithm against the unblocked sweep
        _close_to_unblocked(A, out[:5])


@pytest.mark.parametrize("kind", ["svd_geo", "rank_deficient", "zero", "identity", "rand_scaled_ofl",
                                  "rand_scaled_ufl"])
def test_gebrd_blocked_matrix_kinds(xp, kind):
    setting = BLOCKED_SETTINGS[0]
    for m, n in ((40, 37), (37, 40)):
        A = make_matrices(rng_for("bkinds", kind, m, n), (2,), m, n, np.complex128, kind)
        out = gebrd(to_xp(xp, A), setting=setting)
        rec, oq, op = ratios(A, *out[:5], xp)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (kind, rec, oq, op)
        if kind == "zero":
            assert not to_np(out[1]).any() and not to_np(out[3]).any()


def test_gebrd_blocked_nan_stays_in_its_matrix(xp):
    A = make_matrices(rng_for("bnan"), (4,), 40, 36, np.float64, "random")
    A[1, 30, 2] = np.nan
    A[3, 0, 35] = np.inf
    a, d, e, tauq, taup, _ = (to_np(x) for x in gebrd(to_xp(xp, A), setting=BLOCKED_SETTINGS[0]))
    clean = [0, 2]
    for x in (a, d, e, tauq, taup):
        assert np.isfinite(x[clean]).all()
    assert np.isnan(d[1]).any()
    rec, oq, op = ratios(A[clean], a[clean], d[clean], e[clean], tauq[clean], taup[clean], np)
    assert rec < THRESHOLD


GPU_BLOCKED_SHAPES = [(64, 64), (128, 128), (129, 129), (200, 200), (256, 256), (300, 300), (300, 150),
                      (150, 300), (257, 33), (33, 257), (512, 512), (1000, 17)]


@pytest.mark.parametrize("shape", GPU_BLOCKED_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("setting", BLOCKED_SETTINGS, ids=str)
def test_gebrd_blocked_gpu_sizes(xp, setting, shape, dtype):
    """Up to 512 (complex128 512 x 512 puts X and Y into the device workspace), with
    the three layouts: uniform (F and C order) and the pointer / variable lists."""
    if xp is np:
        pytest.skip("large sizes run on the GPU only (the CPU covers the panel edges)")
    m, n = shape
    A = make_matrices(rng_for("gpu_blocked", setting, shape, dtype), (3,), m, n, dtype, "random")
    poison_pool(xp, result_bytes((3,), m, n, dtype))
    for layout in ("F", "C"):
        out = gebrd(arrange(xp, A, layout), setting=setting)
        check_shapes(A, out)
        rec, oq, op = ratios(A, *out[:5], xp)
        assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (layout, rec, oq, op)
        check_singular_values(A, out[1], out[2])
    mats = [A[0], A[1], A[2][: max(m - 5, 1), : max(n - 3, 1)].copy()]  # variable layout
    for members in (mats[:2], mats):  # pointer layout (same shapes), then variable
        a, d, e, tauq, taup, _ = gebrd([to_xp(xp, M) for M in members], setting=setting)
        for i, M in enumerate(members):
            rec, oq, op = ratios(M, a[i], d[i], e[i], tauq[i], taup[i], np)
            assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (i, rec, oq, op)


@given(m=st.integers(0, GPU_MAX), n=st.integers(0, GPU_MAX), dtype=st.sampled_from(DTYPES),
       setting=st.sampled_from(BLOCKED_SETTINGS), seed=st.integers(0, 2**31))
@SETTINGS
def test_gebrd_blocked_gpu_hypothesis_shapes(xp, m, n, dtype, setting, seed):
    if xp is np:
        pytest.skip("shapes up to 300 on the GPU only")
    A = make_matrices(np.random.default_rng(seed), (2,), m, n, dtype, "random")
    out = gebrd(to_xp(xp, A), setting=setting)
    rec, oq, op = ratios(A, *out[:5], xp)
    assert rec < THRESHOLD and oq < THRESHOLD and op < THRESHOLD, (rec, oq, op)
