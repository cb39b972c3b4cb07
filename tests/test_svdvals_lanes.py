"""Singular values by bidiagonalization in registers + dqds (DqdsSetting), the LAPACK way.

Every registered setting is forced at the edges of what it holds (max(m, n) =
group, min(m, n) = cols, both orientations, k = 1) on LAPACK's matrix kinds and
the layouts of strategies.MATRIX_LAYOUTS; values against scipy.linalg.svdvals
in float64: |s_i - s_ref_i| <= 30 max(m, n) eps s_1 (test_svd's value_ratio).
The dqds alone is checked on bidiagonals built to be hard for it (graded,
clustered, zero and tiny entries, splits) against SciPy in float64; the NumPy
backend runs the kernel's code statement for statement
(factorizations/svdvals_lanes.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations.svd import svdvals
from batched.factorizations.svd_settings import (DQDS_SETTINGS, DqdsSetting, choose_dqds_setting,
                                                 choose_gesvj_setting)
from batched.factorizations.svdvals_lanes import _lasq_one, gebd2_stage_bytes, lasq_plan, svdvals_lanes
from conftest import assert_unchanged, snapshot, to_np, to_xp
from strategies import SETTINGS
from test_svd import THRESHOLD, check_nan_stays_in_its_matrix, check_values_on_kinds, draw_small_real, value_ratio

REAL = (np.float32, np.float64)


def edge_shapes(s: DqdsSetting):
    return sorted({(s.group, s.cols), (s.cols, s.group), (s.cols - 1, s.cols - 1), (1, 1), (s.group, 1),
                   (2, s.cols), (2, 2)})


@pytest.mark.parametrize("setting", DQDS_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_every_setting_at_its_edges(xp, setting, dtype):
    rng = np.random.default_rng(setting.group * 10 + setting.cols)
    check_values_on_kinds(xp, rng, setting, edge_shapes(setting), dtype)


@given(data=st.data())
@SETTINGS
def test_dqds_property(xp, data):
    setting, A, Ax = draw_small_real(xp, data, DQDS_SETTINGS, lambda s: s.cols, lambda s: s.group)
    batch, k = A.shape[:-2], min(A.shape[-2:])
    before = snapshot(Ax)
    S, info = svdvals(Ax, setting=setting, check=False)
    assert S.shape == (*batch, k) and info.shape == batch and not to_np(info).any()
    assert value_ratio(S, A) <= THRESHOLD
    assert_unchanged((Ax,), before)


def _hard_bidiagonals(rng, n):
    """(name, d, e): bidiagonals whose values span many orders, cluster, or hold zeros."""
    out = [("random", rng.standard_normal(n), rng.standard_normal(n - 1)),
           ("graded", 10.0 ** -np.arange(n, dtype=float), 10.0 ** -np.arange(1, n, dtype=float)),
           ("reverse graded", 10.0 ** -np.arange(n, 0, -1.0), 10.0 ** -np.arange(n - 1, 0, -1.0)),
           ("clustered", 1 + 1e-12 * rng.standard_normal(n), 1e-9 * rng.random(n - 1)),
           ("ones", np.ones(n), np.ones(n - 1)),
           ("tiny", 1e-150 * rng.random(n), 1e-150 * rng.random(n - 1))]
    d = rng.standard_normal(n)
    d[n // 2] = 0.0
    out.append(("zero diagonal", d, rng.standard_normal(n - 1)))
    e = rng.standard_normal(n - 1)
    e[::3] = 0.0
    out.append(("splits", rng.standard_normal(n), e))
    d = rng.standard_normal(n)
    d[::2] = 0.0
    out.append(("many zeros", d, np.ones(n - 1)))
    return out


@pytest.mark.parametrize("n", [2, 3, 7, 16, 33])
def test_dqds_alone_on_hard_bidiagonals(n):
    rng = np.random.default_rng(n)
    for name, d, e in _hard_bidiagonals(rng, n):
        ref = scipy.linalg.svdvals(np.diag(d) + np.diag(e, 1))
        x = np.frexp(max(np.abs(d).max(), np.abs(e).max()))[1]   # the callers' scaling
        vals, info = _lasq_one(np.ldexp(d, -x), np.ldexp(e, -x), 30 * n)
        assert info == 0, name
        s = np.ldexp(np.sqrt(np.maximum(vals, 0)), x)[::-1]
        err = np.abs(s - ref).max() / (n * np.finfo(float).eps * max(ref[0], np.finfo(float).tiny))
        assert err <= THRESHOLD, (name, err)
        # relative accuracy where the values are not tiny against the largest
        big = ref > 1e-290
        assert np.all(np.abs(s[big] - ref[big]) <= 100 * n * np.finfo(float).eps * ref[big]), name


@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_hard_bidiagonals_through_svdvals(xp, dtype):
    """Dense upper bidiagonals go through the bidiagonalization unchanged (every
    reflector is the identity), so this runs the backend's own dqds (the kernel's on
    the GPU) on the hard cases: zeros in d and e, clusters, grading."""
    rng = np.random.default_rng(11)
    for n in (2, 7, 16, 32):
        cases = _hard_bidiagonals(rng, n)
        A = np.stack([np.diag(d) + np.diag(e, 1) for _, d, e in cases]).astype(dtype)
        setting = DqdsSetting(8, 8) if n <= 8 else DqdsSetting(16, 16) if n <= 16 else DqdsSetting(32, 32)
        S, info = svdvals(to_xp(xp, A), setting=setting, check=False)
        assert not to_np(info).any(), (n, to_np(info))
        for (name, _, _), s, a in zip(cases, to_np(S), A):
            ref = scipy.linalg.svdvals(a.astype(np.float64))
            err = np.abs(s - ref).max() / (n * np.finfo(dtype).eps * max(ref[0], np.finfo(dtype).tiny))
            assert err <= THRESHOLD, (n, name, err)


@given(data=st.data())
@SETTINGS
def test_dqds_alone_property(data):
    """Bidiagonals with entries over ten orders of magnitude, zeros anywhere in d and e
    (splits, zero values), and repeated diagonals (clusters)."""
    n = data.draw(st.integers(1, 40), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    d = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 3, size=n)
    e = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 3, size=n)
    d[rng.random(n) < data.draw(st.sampled_from([0.0, 0.2, 0.5]), label="zero d")] = 0
    e[rng.random(n) < data.draw(st.sampled_from([0.0, 0.2, 0.5]), label="zero e")] = 0
    e[n - 1] = 0
    if data.draw(st.booleans(), label="repeated"):
        d[:] = d[0]
    big = max(np.abs(d).max(), np.abs(e).max())
    if big == 0:
        return
    ref = scipy.linalg.svdvals(np.diag(d) + np.diag(e[:n - 1], 1))
    x = np.frexp(big)[1]
    vals, info = _lasq_one(np.ldexp(d, -x), np.ldexp(e, -x), 30 * n)
    assert info == 0
    s = np.ldexp(np.sqrt(np.maximum(vals, 0)), x)[::-1]
    assert np.abs(s - ref).max() <= THRESHOLD * n * np.finfo(float).eps * ref[0]


@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_nan_stays_in_its_matrix(xp, dtype):
    check_nan_stays_in_its_matrix(xp, dtype, DqdsSetting(16, 16))


def test_too_few_passes_is_reported(xp):
    rng = np.random.default_rng(9)
    A = rng.standard_normal((2, 3, 12, 12))
    S, info = svdvals(to_xp(xp, A), setting=DqdsSetting(16, 16, passes_per_value=0), check=False)
    assert (to_np(info) > 0).all(), "no transform: a 12 x 12 random bidiagonal does not deflate"
    with pytest.raises(np.linalg.LinAlgError, match=r"SVD did not converge.*\(0, 0\)"):
        svdvals(to_xp(xp, A), setting=DqdsSetting(16, 16, passes_per_value=0))
    assert not to_np(svdvals(to_xp(xp, A), setting=DqdsSetting(16, 16), check=False)[1]).any()


def test_bad_settings(xp):
    from batched.factorizations.svd import svd

    A = to_xp(xp, np.ones((2, 5, 5)))
    with pytest.raises(ValueError, match="does not fit"):
        svdvals(to_xp(xp, np.ones((2, 9, 9))), setting=DqdsSetting(8, 8))
    with pytest.raises(ValueError, match="float32 or float64"):
        svdvals(to_xp(xp, np.ones((2, 5, 5), np.complex128)), setting=DqdsSetting(8, 8))
    with pytest.raises(ValueError, match="registered"):
        svdvals(A, setting=DqdsSetting(8, 4))
    with pytest.raises(ValueError, match="passes_per_value"):
        svdvals(A, setting=DqdsSetting(8, 8, passes_per_value=-1))
    with pytest.raises(ValueError, match="gebrd_setting"):
        svdvals(A, setting=DqdsSetting(8, 8), gebrd_setting=object())
    with pytest.raises(ValueError, match="values only"):
        svd(A, setting=DqdsSetting(8, 8))
    with pytest.raises(TypeError, match="DqdsSetting"):
        svdvals(A, setting=3)


def test_chooser_and_plan():
    assert choose_dqds_setting(8, 8, np.float64) is None            # Jacobi measured faster
    assert choose_dqds_setting(8, 8, np.float32) is None
    assert choose_dqds_setting(9, 9, np.float32) == DqdsSetting(16, 16)
    assert choose_dqds_setting(10, 10, np.float64) == DqdsSetting(16, 16)
    assert choose_dqds_setting(16, 16, np.float64) == DqdsSetting(16, 16)
    assert choose_dqds_setting(16, 16, np.float32) == DqdsSetting(16, 16)
    assert choose_dqds_setting(12, 16, np.float32) == DqdsSetting(16, 16)
    assert choose_dqds_setting(16, 20, np.float64) is None          # rows need the 32 group
    assert choose_dqds_setting(17, 17, np.float32) == DqdsSetting(32, 32)
    assert choose_dqds_setting(32, 32, np.float64) == DqdsSetting(32, 32)
    assert choose_dqds_setting(12, 24, np.float64) is None          # tall: Jacobi
    assert choose_dqds_setting(24, 32, np.float64) == DqdsSetting(32, 32)
    assert choose_dqds_setting(33, 33, np.float64) is None
    assert choose_dqds_setting(20, 20, np.complex128) is None
    assert choose_dqds_setting(8, 8, np.float64, limit=8) is None
    for dtype in REAL:
        for k in range(1, 33):
            for length in range(k, 33):
                s = choose_dqds_setting(k, length, dtype)
                assert s is None or (s in DQDS_SETTINGS and s.fits(k, length))
    # the stage of the next matrices (dynamic) and Gebd2LanesShared (static; ptxas's count)
    assert gebd2_stage_bytes(DqdsSetting(32, 32), 8) == (32 * 33 * 4 * 8, 35840)
    assert gebd2_stage_bytes(DqdsSetting(16, 16), 4) == (16 * 17 * 8 * 4, 9728)
    assert gebd2_stage_bytes(DqdsSetting(8, 8), 8) == (8 * 9 * 16 * 8, 11264)
    assert lasq_plan(16, 8) == (64, 4 * 16 * 64 * 8)
    assert lasq_plan(32, 8) == (32, 4 * 32 * 32 * 8)
    assert lasq_plan(32, 4) == (64, 4 * 32 * 64 * 4)


def test_numpy_twin_needs_a_fitting_setting():
    with pytest.raises(ValueError, match="does not fit"):
        svdvals_lanes(np.ones((1, 5, 40)), DqdsSetting(8, 8))


def test_cpu_default_is_not_dqds():
    """On the CPU the default stays the vectorized pipeline (the dqds twin loops in Python)."""
    from batched.factorizations import svd as svd_module

    assert svd_module._dqds_setting(np.ones((1, 4, 4)), np, 4, 4, False, None, None) is None


# --- GPU only ------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", REAL, ids=str)
@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_many_matrices(xp, dtype, n):
    """65,537 matrices (past one wave of both launches) against SciPy and against Jacobi."""
    if xp is np:
        pytest.skip("GPU batch size")
    setting = DqdsSetting(8, 8) if n <= 8 else DqdsSetting(16, 16) if n <= 16 else DqdsSetting(32, 32)
    rng = np.random.default_rng(n)
    A = rng.standard_normal((65_537, n, n)).astype(dtype)
    S, info = svdvals(xp.asarray(A), setting=setting, check=False)
    assert not to_np(info).any()
    S = to_np(S)
    assert value_ratio(S[::97], A[::97]) <= THRESHOLD
    J = to_np(svdvals(xp.asarray(A[-500:]), setting=choose_gesvj_setting(n, n, dtype)))
    assert np.abs(J - S[-500:]).max() <= THRESHOLD * n * np.finfo(dtype).eps * J[:, 0].max()


@pytest.mark.gpu
def test_gpu_matches_numpy_twin(xp):
    if xp is np:
        pytest.skip("compares the backends")
    rng = np.random.default_rng(2)
    for s in DQDS_SETTINGS:
        for m, n in ((s.group, s.cols), (s.cols, s.group)):
            A = rng.standard_normal((40, m, n))
            g = to_np(svdvals(xp.asarray(A), setting=s))
            c = svdvals(A, setting=s)
            assert np.abs(g - c).max() <= 10 * s.group * np.finfo(np.float64).eps * c[:, 0].max()


def test_attempts_record_and_round_counts():
    """_lasq_one's attempt record (tools/dqds_rounds.py reads the kernel's rounds from
    it) leaves the values alone, ends every matrix's list with successes only where
    transforms ran, and the round counts follow it: a group's rounds are its longest
    list and its round work at least its rounds (every attempt has two rows or more)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "dqds_rounds", Path(__file__).resolve().parent.parent / "tools" / "dqds_rounds.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    n, count = 12, 64  # two whole groups of 32: the means below compare exactly
    d, e = tool.bidiagonals(count, n, np.float64, seed=3)
    attempts = []
    for b in range(count):
        attempts.append([])
        vals, info = _lasq_one(d[b], e[b], 30 * n, attempts[-1])
        plain, info_plain = _lasq_one(d[b], e[b], 30 * n)
        assert np.array_equal(vals, plain) and info == info_plain == 0
        assert attempts[-1] and all(2 <= rows <= n for rows, _ in attempts[-1])
        assert attempts[-1][-1][1]  # the last transform of a finished matrix succeeded
    stats = tool.round_stats(attempts)
    assert stats["rounds"] == np.mean([max(len(a) for a in attempts[g:g + 32]) for g in (0, 32)])
    assert stats["round_work"] >= 2 * stats["rounds"]
    assert stats["transforms"] <= stats["rounds"] and 0 <= stats["failures"] < stats["transforms"]
