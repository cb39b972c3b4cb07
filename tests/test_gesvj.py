"""One-sided Jacobi SVD (GesvjSetting), the LAPACK way, on both backends.

Every registered setting is forced at the edges of what it holds (k = cols,
max(m, n) = rows_max, both orientations, k = 1) on LAPACK's matrix kinds and
the layouts of strategies.MATRIX_LAYOUTS; values against scipy.linalg.svdvals
in float64: |s_i - s_ref_i| <= 30 max(m, n) eps s_1 (test_svd's value_ratio);
vectors by LAPACK's residual and orthogonality ratios (test_svd's vector_ratios).
The NumPy backend runs the same rounds as the kernel (factorizations/gesvj.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations.gesvj import gesvj, pair_p, pair_q
from batched.factorizations.svd import svd, svdvals
from batched.factorizations.svd_settings import (GESVJ_SETTINGS, BdsqrSetting, GesvjSetting,
                                                 choose_gesvj_setting)
from conftest import assert_unchanged, snapshot, to_np, to_xp
from strategies import SETTINGS
from test_svd import (KINDS, THRESHOLD, check_nan_stays_in_its_matrix, check_values_on_kinds, draw_small_real, matrices,
                      value_ratio, vector_ratios)

REAL = (np.float32, np.float64)


def edge_shapes(s: GesvjSetting):
    return sorted({(s.rows_max, s.cols), (s.cols, s.rows_max), (s.cols - 1, s.cols - 1), (1, 1),
                   (s.rows_max, 1), (2, s.cols)})


def test_round_robin_visits_every_pair_once_per_sweep():
    for nc in (4, 8, 16, 32):
        seen = []
        for rho in range(nc - 1):
            round_ = [(pair_p(nc, rho, k), pair_q(nc, rho, k)) for k in range(nc // 2)]
            cols = [c for pq in round_ for c in pq]
            assert sorted(cols) == list(range(nc)), "a round is a perfect matching"
            seen += [tuple(sorted(pq)) for pq in round_]
        assert sorted(seen) == sorted((p, q) for p in range(nc) for q in range(p + 1, nc))


@pytest.mark.parametrize("setting", GESVJ_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_every_setting_at_its_edges(xp, setting, dtype):
    rng = np.random.default_rng(setting.cols * 100 + setting.group * 10 + setting.rows_per_lane)
    check_values_on_kinds(xp, rng, setting, edge_shapes(setting), dtype)


@pytest.mark.parametrize("setting", GESVJ_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_vectors_of_every_setting_at_its_edges(xp, setting, dtype):
    rng = np.random.default_rng(setting.cols * 100 + setting.group * 10 + setting.rows_per_lane + 1)
    for m, n in edge_shapes(setting):
        for kind in KINDS:
            A, _ = matrices(rng, (2,), m, n, dtype, kind)
            Ax = to_xp(xp, A)
            before = snapshot(Ax)
            U, S, Vh, info = svd(Ax, setting=setting, check=False)
            k = min(m, n)
            assert U.shape == (2, m, k) and Vh.shape == (2, k, n) and U.dtype == np.dtype(dtype)
            assert not to_np(info).any()
            assert value_ratio(S, A) <= THRESHOLD
            ratios = vector_ratios(A, U, S, Vh)
            assert max(ratios) <= THRESHOLD, (m, n, kind, ratios)
            assert_unchanged((Ax,), before)
        if m == n:
            U, S, Vh = svd(to_xp(xp, A), full_matrices=True, setting=setting)
            assert max(vector_ratios(A, U, S, Vh)) <= THRESHOLD


@given(data=st.data())
@SETTINGS
def test_jacobi_property(xp, data):
    setting, A, Ax = draw_small_real(xp, data, GESVJ_SETTINGS, lambda s: s.cols, lambda s: s.rows_max)
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    k = min(m, n)
    before = snapshot(Ax)
    if data.draw(st.booleans(), label="vectors"):
        U, S, Vh, info = svd(Ax, setting=setting, check=False)
        assert U.shape == (*batch, m, k) and Vh.shape == (*batch, k, n)
        assert max(vector_ratios(A, U, S, Vh)) <= THRESHOLD
    else:
        S, info = svdvals(Ax, setting=setting, check=False)
    assert S.shape == (*batch, k) and info.shape == batch and not to_np(info).any()
    assert value_ratio(S, A) <= THRESHOLD
    assert_unchanged((Ax,), before)


@pytest.mark.parametrize("dtype", REAL, ids=str)
def test_nan_stays_in_its_matrix(xp, dtype):
    A = check_nan_stays_in_its_matrix(xp, dtype, GesvjSetting(8, 4, 4))
    U, S, Vh, info = (to_np(x) for x in svd(to_xp(xp, A), setting=GesvjSetting(8, 4, 4), check=False))
    assert info.tolist() == [0, 7, 7, 0]
    assert np.isnan(U[1:3]).all() and np.isnan(Vh[1:3]).all() and np.isnan(S[1:3]).all()
    assert max(vector_ratios(A[[0, 3]], U[[0, 3]], S[[0, 3]], Vh[[0, 3]])) <= THRESHOLD


def test_too_few_sweeps_is_reported(xp):
    rng = np.random.default_rng(9)
    A = rng.standard_normal((2, 3, 12, 12))
    S, info = svdvals(to_xp(xp, A), setting=GesvjSetting(16, 8, 2, max_sweeps=1), check=False)
    assert (to_np(info) > 0).all(), "one sweep never converges on random 12 x 12 matrices"
    assert (to_np(svdvals(to_xp(xp, A), setting=GesvjSetting(16, 8, 2, max_sweeps=0), check=False)[1]) > 0).all()
    with pytest.raises(np.linalg.LinAlgError, match=r"SVD did not converge.*\(0, 0\)"):
        svdvals(to_xp(xp, A), setting=GesvjSetting(16, 8, 2, max_sweeps=1))
    assert not to_np(svdvals(to_xp(xp, A), setting=GesvjSetting(16, 8, 2), check=False)[1]).any()


def test_bad_settings(xp):
    A = to_xp(xp, np.ones((2, 5, 5)))
    with pytest.raises(ValueError, match="full_matrices=True"):
        svd(to_xp(xp, np.ones((2, 5, 3))), full_matrices=True, setting=GesvjSetting(8, 4, 2))
    with pytest.raises(ValueError, match="does not fit"):
        svdvals(to_xp(xp, np.ones((2, 9, 9))), setting=GesvjSetting(8, 4, 2))
    with pytest.raises(ValueError, match="float32 or float64"):
        svdvals(to_xp(xp, np.ones((2, 5, 5), np.complex128)), setting=GesvjSetting(8, 4, 2))
    with pytest.raises(ValueError, match="registered"):
        svdvals(A, setting=GesvjSetting(8, 3, 3))
    with pytest.raises(ValueError, match="max_sweeps"):
        svdvals(A, setting=GesvjSetting(8, 4, 2, max_sweeps=-1))
    with pytest.raises(ValueError, match="gebrd_setting"):
        svdvals(A, setting=GesvjSetting(8, 4, 2), gebrd_setting=object())
    with pytest.raises(TypeError, match="GesvjSetting"):
        svdvals(A, setting=3)


def test_chooser():
    assert choose_gesvj_setting(8, 8, np.float64) == GesvjSetting(8, 4, 2)
    assert choose_gesvj_setting(16, 16, np.float32) == GesvjSetting(16, 8, 2)
    assert choose_gesvj_setting(3, 30, np.float64).fits(3, 30)
    assert choose_gesvj_setting(32, 32, np.float64) == GesvjSetting(32, 16, 2)
    assert choose_gesvj_setting(33, 33, np.float64) is None
    assert choose_gesvj_setting(8, 33, np.float64) is None
    assert choose_gesvj_setting(8, 8, np.complex128) is None
    assert choose_gesvj_setting(32, 32, np.float64, vectors=True) == GesvjSetting(32, 32, 1)
    assert choose_gesvj_setting(32, 32, np.float32, vectors=True) == GesvjSetting(32, 16, 2)
    for k in range(1, 33):
        for length in range(k, 33):
            for dtype in REAL:
                for vectors in (False, True):
                    s = choose_gesvj_setting(k, length, dtype, vectors=vectors)
                    assert s in GESVJ_SETTINGS and s.fits(k, length)


def test_numpy_twin_needs_a_fitting_setting():
    with pytest.raises(ValueError, match="does not fit"):
        gesvj(np.ones((1, 5, 40)), GesvjSetting(8, 8, 4))


# --- GPU only ------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", REAL, ids=str)
@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_default_path_on_many_matrices(xp, dtype, n):
    """The chooser's Jacobi on 65,537 matrices (more than one wave of every setting's grid)
    against the GEBRD -> BDSQR pipeline and SciPy."""
    if xp is np:
        pytest.skip("GPU batch size")
    rng = np.random.default_rng(n)
    A = rng.standard_normal((65_537, n, n)).astype(dtype)
    S, info = svdvals(xp.asarray(A), check=False)
    assert not to_np(info).any()
    S = to_np(S)
    assert value_ratio(S[::97], A[::97]) <= THRESHOLD
    P = to_np(svdvals(xp.asarray(A[-500:]), setting=BdsqrSetting(1, 128)))
    assert np.abs(P - S[-500:]).max() <= THRESHOLD * n * np.finfo(dtype).eps * P[:, 0].max()
    U, S2, Vh, info = svd(xp.asarray(A), check=False)
    assert not to_np(info).any()   # the chooser may pick another setting with vectors: equal to rounding
    assert np.abs(to_np(S2) - S).max() <= THRESHOLD * n * np.finfo(dtype).eps * S[:, 0].max()
    assert max(vector_ratios(A[::97], to_np(U)[::97], S[::97], to_np(Vh)[::97])) <= THRESHOLD


@pytest.mark.gpu
def test_gpu_matches_numpy_twin(xp):
    if xp is np:
        pytest.skip("compares the backends")
    rng = np.random.default_rng(2)
    for s in GESVJ_SETTINGS:
        A = rng.standard_normal((40, s.rows_max, s.cols))
        g = to_np(svdvals(xp.asarray(A), setting=s))
        c = svdvals(A, setting=s)
        assert np.abs(g - c).max() <= 10 * s.rows_max * np.finfo(np.float64).eps * c[:, 0].max()
        U, S, Vh = svd(xp.asarray(A), setting=s)
        assert max(vector_ratios(A, U, S, Vh)) <= THRESHOLD
