"""Batched Cholesky (potrf, potrs, posv, cholesky, cho_factor, cho_solve) against
LAPACK's residuals and SciPy/NumPy, on both backends.

Every test body runs on NumPy (the CPU backend) and CuPy (the GPU, skipped
without one) through the ``xp`` fixture.  GPU bodies run with every registered
CholeskySetting forced and with the default chooser; the CPU backend has one
path and runs the default only.  Input matrices always hold NaN in the triangle
that is not named (never read) and, for complex types, random imaginary parts on
the diagonal (ignored, as LAPACK does); results are new arrays, and on the GPU the
memory pool is poisoned with NaN first, so an element the kernel never writes
shows up.

Bounds: ||A - L L^H||_1 / (n ||A||_1 eps) <= 30 (LAPACK's xPOT01) and
||b - A x||_1 / (||A||_1 ||x||_1 n eps) <= 30 per right-hand side (xPOT02).
Cholesky is backward stable whatever the condition number (Higham, Accuracy and
Stability of Numerical Algorithms, Theorem 10.3: (A + dA) = L L^H with
|dA| <= gamma_{n+1} |L| |L^H|, and |L| |L^H| is bounded by ||A|| for a positive
definite A), so both ratios stay O(1) even at cond(A) = 1e12.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched._batch import PointerBatch, VariableBatch
from batched.factorizations import cholesky as chol
from batched.factorizations.cholesky import cho_factor, cho_solve, cholesky, posv, potrf, potrs
from batched.factorizations.cholesky_settings import (BLOCKED_SETTINGS, CHOLESKY_SETTINGS, FUSED_SETTINGS,
                                                      PANEL, ROWS_SETTINGS, THREAD_SETTINGS, WARPS_SETTINGS,
                                                      CholeskySetting,
                                                      choose_cholesky_setting, plan_cholesky)
from conftest import HAVE_GPU, assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from strategies import DTYPES, MATRIX_LAYOUTS, SETTINGS, VECTOR_LAYOUTS, arrange, broadcast_pair, random_array

THRESHOLD = 30
# The thread and rows settings (n <= nb <= 32) have their own tests below; the default
# (None) takes them for n <= 32 in every property test.
SETTINGS_UNDER_TEST = [*FUSED_SETTINGS, *BLOCKED_SETTINGS, None]
KINDS = ("spd_rand", "spd_dominant", "spd_ill", "spd_scaled_ufl", "spd_scaled_ofl")
# Tile and panel edges (4, 8, 16, 32 lanes; 32-column panels; 64: the chooser's fused limit).
EDGES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)
GPU_EDGES = (95, 96, 97, 127, 128, 129, 200, 255, 256, 257)
CPU_MAX_N, GPU_MAX_N = 40, 200
FUSED_CAP = 90   # a forced fused setting keeps n^2 complex128 elements under the shared-memory limit


def wide_of(dtype):
    return np.complex128 if np.dtype(dtype).kind == "c" else np.float64


def eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


# --- matrices -----------------------------------------------------------------------------


def hermitian_pd(rng, batch, n, dtype, kind):
    """(H, A): H Hermitian positive definite of ``kind`` as ``dtype`` (real diagonal),
    A the same values with NaN in the upper triangle and, for complex types, noise in
    the imaginary parts of the diagonal (both never read by a lower factorization).

    spd_rand: M M^H / n + I (cond ~ 10).  spd_dominant: random Hermitian with a
    diagonal above its row's absolute sum.  spd_ill: Q diag(10^(0..-p)) Q^H with p = 12
    (double) or 4 (single).  spd_scaled_ufl / _ofl: spd_rand scaled near the
    underflow / overflow threshold.
    """
    dtype = np.dtype(dtype)
    wide = wide_of(dtype)
    idx = np.arange(n)
    M = random_array(rng, (*batch, n, n), wide)
    if kind in ("spd_rand", "spd_scaled_ufl", "spd_scaled_ofl"):
        H = M @ np.swapaxes(M, -1, -2).conj() / max(n, 1) + np.eye(n)
    elif kind == "spd_dominant":
        H = (M + np.swapaxes(M, -1, -2).conj()) / 2
        H[..., idx, idx] = np.abs(H).sum(axis=-1) + 1
    elif kind == "spd_ill":
        p = 12 if dtype in (np.float64, np.complex128) else 4
        Q = np.linalg.qr(M)[0] if n else M
        H = (Q * 10.0 ** (-np.linspace(0, p, n))[..., None, :]) @ np.swapaxes(Q, -1, -2).conj()
        H = (H + np.swapaxes(H, -1, -2).conj()) / 2
    else:
        raise ValueError(kind)
    if kind in ("spd_scaled_ufl", "spd_scaled_ofl"):
        fi = np.finfo(dtype)
        H = H * (float(fi.tiny) * 2**24 if kind == "spd_scaled_ufl" else float(fi.max) / 2**24 / max(n, 1))
    H = H.astype(dtype)
    H[..., idx, idx] = H[..., idx, idx].real
    A = H.copy()
    if dtype.kind == "c" and n:
        A[..., idx, idx] += 1j * rng.standard_normal((*batch, n)).astype(dtype)
    A[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = np.nan
    return H, A


def upper_input(A):
    """The same matrix given by its upper triangle: the conjugate transpose (NaN below)."""
    return np.swapaxes(A, -1, -2).conj()


def factor_of(c, lower):
    c = np.asarray(c)
    return np.tril(c) if lower else np.triu(c)


def potrf_ratio(c, H, lower) -> float:
    """max over matrices of ||H - L L^H||_1 / (n ||H||_1 eps) (LAPACK's xPOT01)."""
    c = np.asarray(c)
    n = H.shape[-1]
    if n == 0 or c.size == 0:
        return 0.0
    wide = wide_of(c.dtype)
    F = factor_of(c, lower).astype(wide)
    Hw = H.astype(wide)
    with np.errstate(all="ignore"):
        P = F @ np.swapaxes(F, -1, -2).conj() if lower else np.swapaxes(F, -1, -2).conj() @ F
        r = np.abs(Hw - P).sum(axis=-2).max(axis=-1)
        a = np.abs(Hw).sum(axis=-2).max(axis=-1)
        ratio = r / (np.maximum(a, np.finfo(np.float64).tiny) * n * eps(c.dtype))
    ratio = np.where(np.isfinite(F).all(axis=(-1, -2)), ratio, np.inf)
    return float(np.max(ratio))


def solve_ratio(X, H, B, eps_of=None) -> float:
    """max over matrices and columns of ||b - H x||_1 / (||H||_1 ||x||_1 n eps) (xPOT02);
    X and B (..., n, k), H broadcast against them; eps of X's dtype unless ``eps_of``
    names a lower precision (a factor computed in single precision)."""
    X = np.asarray(X)
    n = H.shape[-1]
    if n == 0 or X.size == 0:
        return 0.0
    wide = wide_of(X.dtype)
    Xw, Bw, Hw = X.astype(wide), B.astype(wide), H.astype(wide)
    with np.errstate(all="ignore"):
        R = Bw - Hw @ Xw
        a = np.abs(Hw).sum(axis=-2).max(axis=-1)[..., None]
        ratio = np.abs(R).sum(axis=-2) / (np.maximum(a * np.abs(Xw).sum(axis=-2), np.finfo(np.float64).tiny)
                                          * n * eps(eps_of or X.dtype))
    ratio = np.where(np.isfinite(Xw).all(axis=-2), ratio, np.inf)
    return float(np.max(ratio))


def draw_n(data, xp, setting):
    top = GPU_MAX_N if xp is not np else CPU_MAX_N
    n = data.draw(st.one_of(st.sampled_from([e for e in EDGES + GPU_EDGES if e <= top]), st.integers(0, top)),
                  label="n")
    if setting is not None and setting.fused:
        n = min(n, FUSED_CAP)
    return n


# --- property tests -------------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), kind=st.sampled_from(KINDS), lower=st.booleans(),
       batch=st.sampled_from([(), (0,), (1,), (3,), (2, 3)]), layout=st.sampled_from(MATRIX_LAYOUTS),
       seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_potrf_residual(xp, setting, data, dtype, kind, lower, batch, layout, seed):
    gpu_only_setting(xp, setting)
    n = draw_n(data, xp, setting)
    rng = np.random.default_rng(seed)
    H, A = hermitian_pd(rng, batch, n, dtype, kind)
    if not lower:
        H, A = upper_input(H), upper_input(A)
    Ad = arrange(xp, A, layout)
    before = snapshot(Ad)
    poison_pool(xp, A.nbytes)
    c, info = potrf(Ad, lower=lower, setting=setting)
    assert isinstance(c, xp.ndarray) and c.dtype == dtype and tuple(c.shape) == A.shape
    info = to_np(info)
    assert info.dtype == np.int32 and info.shape == batch
    assert not np.any(info), (kind, n, info)
    c = to_np(c)
    r = potrf_ratio(c, H, lower)
    assert r <= THRESHOLD, f"residual {r} for n={n} {dtype} {kind} lower={lower} {layout}"
    other = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    assert np.isnan(c[..., other[0], other[1]]).all(), "the other triangle is returned as it was (NaN)"
    assert np.all(np.isreal(np.diagonal(c, axis1=-2, axis2=-1))), "the diagonal of L is real"
    assert_unchanged((Ad,), before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), kind=st.sampled_from(KINDS), lower=st.booleans(),
       form=st.sampled_from(("vectors", "one", "matrix")), seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_posv_potrs_cho_solve_residual(xp, setting, data, dtype, kind, lower, form, seed):
    gpu_only_setting(xp, setting)
    n = draw_n(data, xp, setting)
    rng = np.random.default_rng(seed)
    batch_a, batch_b = data.draw(broadcast_pair(), label="batches")
    H, A = hermitian_pd(rng, batch_a, n, dtype, kind)
    if not lower:
        H, A = upper_input(H), upper_input(A)
    dt_b = data.draw(st.sampled_from([d for d in DTYPES if d.kind == np.dtype(dtype).kind]), label="B dtype")
    if form == "vectors":
        B = random_array(rng, A.shape[:-1], dt_b)
    elif form == "one":
        B = random_array(rng, (n,), dt_b)
    else:
        B = random_array(rng, (*batch_b, n, data.draw(st.integers(1, 5), label="k")), dt_b)
    # the library's rule: B shaped like A.shape[:-1] is a batch of vectors, whatever its form
    vectors = form != "matrix" or B.shape == A.shape[:-1]
    layouts = data.draw(st.tuples(st.sampled_from(MATRIX_LAYOUTS),
                                  st.sampled_from(VECTOR_LAYOUTS if vectors else MATRIX_LAYOUTS)), label="layouts")
    Ad, Bd = arrange(xp, A, layouts[0]), arrange(xp, B, layouts[1], 1 if vectors else 2)
    before = snapshot(Ad, Bd)
    out_dtype = np.result_type(dtype, dt_b)
    Bm = B[..., None] if vectors else B
    batch = np.broadcast_shapes(batch_a, Bm.shape[:-2])
    Bfull = np.broadcast_to(Bm, (*batch, *Bm.shape[-2:]))
    shape = Bfull.shape[:-1] if vectors else Bfull.shape
    poison_pool(xp, int(np.prod(shape)) * out_dtype.itemsize)
    c, X, info = posv(Ad, Bd, lower=lower, setting=setting)
    assert X.dtype == out_dtype and tuple(X.shape) == shape
    assert tuple(c.shape) == (*batch, n, n) and not np.any(to_np(info))
    assert potrf_ratio(to_np(c), np.broadcast_to(H, c.shape), lower) <= THRESHOLD
    Xm = to_np(X)[..., None] if vectors else to_np(X)
    r = solve_ratio(Xm, H, Bfull)
    assert r <= THRESHOLD, f"posv residual {r}, n={n} {dtype} {kind} lower={lower} {form}"
    # potrs and cho_solve on the factor
    c2, info2 = potrf(Ad, lower=lower, setting=setting)
    X2, info_s = potrs(c2, Bd, lower=lower)
    assert tuple(X2.shape) == shape and not np.any(to_np(info_s))
    # the factor is in A's precision, which may be below B's
    assert solve_ratio(to_np(X2)[..., None] if vectors else to_np(X2), H, Bfull, dtype) <= THRESHOLD
    X3 = cho_solve((c2, lower), Bd)
    np.testing.assert_array_equal(to_np(X3), to_np(X2))
    assert_unchanged((Ad, Bd), before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), lower=st.booleans(), seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_matches_scipy_and_numpy_on_well_conditioned(xp, setting, data, dtype, lower, seed):
    gpu_only_setting(xp, setting)
    n = draw_n(data, xp, setting)
    rng = np.random.default_rng(seed)
    H, A = hermitian_pd(rng, (3,), n, dtype, "spd_dominant")
    if not lower:
        H, A = upper_input(H), upper_input(A)
    Ad = to_xp(xp, A)
    c, info = potrf(Ad, lower=lower, setting=setting)
    got = factor_of(to_np(c), lower)
    wide = wide_of(dtype)
    ref = np.stack([scipy.linalg.cholesky(h.astype(wide), lower=lower) for h in H]) if n else got
    tol = 30 * max(n, 1) * eps(dtype) * max(float(np.max(np.abs(ref), initial=0.0)), 1e-300)
    assert float(np.max(np.abs(got - ref), initial=0.0)) <= tol
    L = to_np(cholesky(Ad, upper=not lower))     # numpy's semantics: the other triangle zero
    np.testing.assert_allclose(L, got, rtol=0, atol=tol)   # the default setting may differ from `setting`
    np.testing.assert_array_equal(L == 0, factor_of(np.ones_like(L), lower) == 0)
    if n:
        np.testing.assert_allclose(L, np.linalg.cholesky(H.astype(wide), upper=not lower), rtol=0, atol=tol)


# --- every tile and panel edge, all settings -------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_edge(xp, setting, dtype):
    gpu_only_setting(xp, setting)
    sizes = EDGES + (GPU_EDGES if xp is not np else ())
    if setting is not None and setting.fused:
        sizes = tuple(n for n in sizes if n <= FUSED_CAP)
    rng = rng_for("edges", str(dtype), str(setting))
    for n in sizes:
        for lower in (True, False):
            H, A = hermitian_pd(rng, (3,), n, dtype, "spd_rand")
            if not lower:
                H, A = upper_input(H), upper_input(A)
            layout = "F" if rng.integers(2) else "C"
            B = random_array(rng, (3, n, 2), dtype)
            poison_pool(xp, A.nbytes)
            c, X, info = posv(arrange(xp, A, layout), to_xp(xp, B), lower=lower, setting=setting)
            assert not np.any(to_np(info)), (n, lower)
            assert potrf_ratio(to_np(c), H, lower) <= THRESHOLD, (n, lower, layout)
            assert solve_ratio(to_np(X), H, B) <= THRESHOLD, (n, lower, layout)


# --- numerical failure ---------------------------------------------------------------------


def make_indefinite_at(H, A, b, k):
    """Make the leading minor of order k (1-based) of matrix b indefinite: its pivot
    becomes -1 (and stays so in A); smaller minors are untouched."""
    b = b if isinstance(b, tuple) else (b,)
    L = np.linalg.cholesky(H[b].astype(wide_of(H.dtype)))
    shift = L[k - 1, k - 1].real ** 2 + 1
    H[(*b, k - 1, k - 1)] -= shift
    A[(*b, k - 1, k - 1)] -= shift


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 6, 9, 40, 70])
def test_not_positive_definite_info(xp, setting, dtype, n):
    """info names the failing order exactly (a negative pivot, a NaN on the diagonal,
    an exact zero); the leading block is the factor of the leading minor; the other
    matrices are untouched; posv leaves the failing matrices' B unsolved."""
    gpu_only_setting(xp, setting)
    rng = rng_for("indefinite", str(dtype), n)
    count = 7
    H, A = hermitian_pd(rng, (count,), n, dtype, "spd_rand")
    fails = {1: n, 4: 1, 5: (n + 1) // 2}
    for b, k in fails.items():
        make_indefinite_at(H, A, b, k)
    if n > 2:
        A[6, n - 2, n - 2] = np.nan   # a NaN pivot fails like LAPACK's isnan(ajj)
        fails[6] = n - 1
    if n > 3:
        A[2, 2, 2] = 0   # a zero diagonal: the pivot of order 3 is -|L(2, :2)|^2 < 0
        H[2, 2, 2] = 0
        fails[2] = 3
    expected = np.zeros(count, np.int32)
    for b, k in fails.items():
        expected[b] = k
    wide = wide_of(dtype)
    for lower in (True, False):
        Ain = A if lower else upper_input(A)
        Hin = H if lower else upper_input(H)
        c, info = potrf(to_xp(xp, Ain), lower=lower, setting=setting)
        info, c = to_np(info), to_np(c)
        np.testing.assert_array_equal(info, expected)
        ok = expected == 0
        assert potrf_ratio(c[ok], Hin[ok], lower) <= THRESHOLD
        for b, k in fails.items():
            if k > 1:   # the leading (k-1) x (k-1) block is the factor of that minor
                ref = scipy.linalg.cholesky(Hin[b, :k - 1, :k - 1].astype(wide), lower=lower)
                got = factor_of(c[b, :k - 1, :k - 1], lower)
                np.testing.assert_allclose(got, ref, rtol=0, atol=1e3 * eps(dtype) * np.abs(ref).max())
        B = random_array(rng, (count, n), dtype)
        cc, X, info2 = posv(to_xp(xp, Ain), to_xp(xp, B), lower=lower, setting=setting)
        np.testing.assert_array_equal(to_np(info2), expected)
        X = to_np(X)
        np.testing.assert_array_equal(X[~ok], B[~ok])      # LAPACK's xPOSV leaves B
        assert solve_ratio(X[ok][..., None], Hin[ok], B[ok][..., None]) <= THRESHOLD
    with pytest.raises(np.linalg.LinAlgError) as err:
        cholesky(to_xp(xp, A))
    assert "not positive definite" in str(err.value)
    assert str(sorted(fails)).replace(" ", "") in str(err.value).replace(" ", "")
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        cho_factor(to_xp(xp, upper_input(A)))
    L, info = cholesky(to_xp(xp, A), check=False)
    np.testing.assert_array_equal(to_np(info), expected)
    c, low, info = cho_factor(to_xp(xp, A), lower=True, check=False)
    assert low is True
    np.testing.assert_array_equal(to_np(info), expected)


def test_linalgerror_names_index_tuples_and_single_matrices(xp):
    rng = rng_for("tuples")
    H, A = hermitian_pd(rng, (2, 3), 6, np.float64, "spd_rand")
    make_indefinite_at(H, A, (1, 2), 4)
    A[0, 0, 0, 0] = -1.0
    with pytest.raises(np.linalg.LinAlgError) as err:
        cholesky(to_xp(xp, A))
    assert "(0, 0)" in str(err.value) and "(1, 2)" in str(err.value)
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1-based column 4\)"):
        cholesky(to_xp(xp, A[1, 2]))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [8, 50])
def test_nan_and_inf_stay_in_their_own_matrix(xp, setting, dtype, n):
    gpu_only_setting(xp, setting)
    rng = rng_for("nan", str(dtype), n)
    count = 6
    H, A = hermitian_pd(rng, (count,), n, dtype, "spd_rand")
    A[2, n - 1, 0] = np.nan
    A[4, n - 1, n // 2] = np.inf
    B = random_array(rng, (count, n), dtype)
    c, X, info = posv(to_xp(xp, A), to_xp(xp, B), setting=setting)
    c, X, info = to_np(c), to_np(X), to_np(info)
    keep = np.isin(np.arange(count), [2, 4], invert=True)
    # the last pivot of both is NaN or -Inf: they fail at order n and keep their B
    np.testing.assert_array_equal(info, np.where(keep, 0, n))
    assert not np.all(np.isfinite(np.tril(c[2]))) and not np.all(np.isfinite(np.tril(c[4])))
    np.testing.assert_array_equal(X[~keep], B[~keep])
    assert np.all(np.isfinite(np.tril(c[keep]))) and np.all(np.isfinite(X[keep]))
    assert potrf_ratio(c[keep], H[keep], True) <= THRESHOLD
    assert solve_ratio(X[keep][..., None], H[keep], B[keep][..., None]) <= THRESHOLD


# --- big batches, empty ones, overwrite ----------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
def test_many_small_matrices(xp, setting, dtype):
    """70,000 8x8 factor-and-solves on the GPU (more than 65,535 blocks); 700 on the CPU."""
    gpu_only_setting(xp, setting)
    count = 700 if xp is np else 70_000
    rng = rng_for("many", str(np.dtype(dtype)))
    H, A = hermitian_pd(rng, (count,), 8, dtype, "spd_rand")
    B = random_array(rng, (count, 8), dtype)
    poison_pool(xp, B.nbytes)
    c, X, info = posv(to_xp(xp, A), to_xp(xp, B), setting=setting)
    assert not np.any(to_np(info))
    assert potrf_ratio(to_np(c), H, True) <= THRESHOLD
    assert solve_ratio(to_np(X)[..., None], H, B[..., None]) <= THRESHOLD


# --- the register designs: thread (a matrix per thread, n <= 8), rows (a row per lane),
# warps (a block per matrix, n <= 128) ---------------------------------------------------------
REGISTER_SETTINGS = THREAD_SETTINGS + ROWS_SETTINGS + WARPS_SETTINGS


def thread_peer(setting):
    """The fused setting a register design is compared with (the warps design: four warps,
    the matrix in shared memory, left-looking)."""
    return next(s for s in FUSED_SETTINGS if s.group_threads >= setting.nb)


def thread_skip(xp, setting, dtype):
    gpu_only_setting(xp, setting)
    if not setting.compiled_for(np.dtype(dtype).itemsize):
        with pytest.raises(ValueError, match="not compiled for"):
            posv(xp.eye(2, dtype=dtype), xp.ones(2, dtype), setting=setting)
        pytest.skip("register setting not compiled for this dtype (checked: a ValueError)")


def close_factors(got, ref, dtype):
    """The thread design scales by the reciprocal of the pivot, the fused one divides:
    equal up to a few rounding errors per element."""
    scale = max(float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0)), 1e-300)
    np.testing.assert_allclose(got, ref, rtol=0, atol=50 * eps(dtype) * scale)


@pytest.mark.parametrize("setting", REGISTER_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_thread_design_matches_fused(xp, setting, dtype):
    """Every n <= nb (rows, warps: a spread across the lanes' rows), both triangles, every
    matrix layout (thread: packed C and F batches take the staged path, the others direct
    accesses), 300 matrices (a partial last chunk or warp): the same info as the fused
    design (failures at the first, a middle and the last column), factors equal up to
    rounding (and the leading block of a failed matrix), the other triangle returned as
    it was (NaN) or zero (cholesky), POSV with one staged, one strided and three
    right-hand sides, X = B where the factorization failed; overwrite_a in place."""
    thread_skip(xp, setting, dtype)
    fused = thread_peer(setting)
    rng = rng_for("chol-thread", str(np.dtype(dtype)), str(setting))
    count = 300
    nb = setting.nb
    sizes = range(1, nb + 1) if setting.thread else sorted({1, 2, 7, nb // 2 + 1, nb - 1, nb}
                                                           | ({31, 32, 33} if setting.warps else set()))
    for n in sizes:
        H, A = hermitian_pd(rng, (count,), n, dtype, "spd_rand")
        fails = {7: n, count - 1: 1, 11: (n + 1) // 2}   # the last one in the partial last chunk
        for b, k in fails.items():
            make_indefinite_at(H, A, b, k)
        expected = np.zeros(count, np.int32)
        expected[list(fails)] = list(fails.values())
        ok = expected == 0
        for lower in (True, False):
            Ain, Hin = (A, H) if lower else (upper_input(A), upper_input(H))
            for layout in MATRIX_LAYOUTS:
                Ad = arrange(xp, Ain, layout)
                before = snapshot(Ad)
                poison_pool(xp, A.nbytes)
                c_t, info_t = potrf(Ad, lower=lower, setting=setting)
                c_f, info_f = potrf(Ad, lower=lower, setting=fused)
                np.testing.assert_array_equal(to_np(info_t), expected, err_msg=f"n={n} {layout}")
                np.testing.assert_array_equal(to_np(info_f), expected)
                c_t, c_f = to_np(c_t), to_np(c_f)
                close_factors(factor_of(c_t, lower)[ok], factor_of(c_f, lower)[ok], dtype)
                for b, k in fails.items():   # the factor of the leading minor of order k - 1
                    close_factors(factor_of(c_t[b, :k - 1, :k - 1], lower), factor_of(c_f[b, :k - 1, :k - 1], lower),
                                  dtype)
                assert potrf_ratio(c_t[ok], Hin[ok], lower) <= THRESHOLD
                other = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
                assert np.isnan(c_t[..., other[0], other[1]]).all(), (n, layout)
                assert_unchanged((Ad,), before)
            L = to_np(cholesky(arrange(xp, A, "C"), upper=False, check=False)[0])
            assert not np.isnan(L[ok]).any() and (np.triu(L[ok], 1) == 0).all()
            for b_layout, k in (("C", 0), ("strided", 0), ("C", 3)):
                B = random_array(rng, (count, n) if k == 0 else (count, n, k), dtype)
                Bd = arrange(xp, B, b_layout, 1 if k == 0 else 2)
                for a_layout in ("C", "F", "sub_F"):
                    poison_pool(xp, B.nbytes)
                    c, X, info = posv(arrange(xp, Ain, a_layout), Bd, lower=lower, setting=setting)
                    np.testing.assert_array_equal(to_np(info), expected)
                    X = to_np(X)
                    np.testing.assert_array_equal(X[~ok], B[~ok])   # LAPACK's xPOSV leaves B
                    Xm, Bm = (X[..., None], B[..., None]) if k == 0 else (X, B)
                    assert solve_ratio(Xm[ok], Hin[ok], Bm[ok]) <= THRESHOLD, (n, lower, b_layout, a_layout)
                    close_factors(factor_of(to_np(c), lower)[ok], factor_of(c_f, lower)[ok], dtype)
        # overwrite_a: a packed F batch of the result dtype is factored in place (staged)
        Af = arrange(xp, A, "F")
        c_ref, _ = potrf(Af, setting=setting)
        c_w, _ = potrf(Af, overwrite_a=True, setting=setting)
        assert c_w is Af
        np.testing.assert_array_equal(to_np(c_w), to_np(c_ref))


@pytest.mark.parametrize("setting", THREAD_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_thread_pipeline_many_turns(xp, setting, dtype):
    """200,001 matrices: every warp of the grid (capped at the resident blocks) takes many
    chunks of 32 in turn, through the double-buffered (small n) or the late (8 x 8:
    C leaves through the one matrix buffer) pipeline, and ends on a partial chunk.  C
    and F packed batches, POSV with one right-hand side (staged in and out) and POTRF:
    info equal to the fused design's, factors equal up to rounding, failures in the
    first and the last chunk keep X = B."""
    thread_skip(xp, setting, dtype)
    fused = thread_peer(setting)
    rng = rng_for("chol-pipeline", str(np.dtype(dtype)), str(setting))
    count = 200_001
    for n, layout in ((max(1, setting.nb - 1), "C"), (setting.nb, "F")):   # odd and even slots
        H, A = hermitian_pd(rng, (count,), n, dtype, "spd_dominant")
        fails = {3: 1, count - 1: n}
        for b, k in fails.items():
            make_indefinite_at(H, A, b, k)
        expected = np.zeros(count, np.int32)
        expected[list(fails)] = list(fails.values())
        ok = expected == 0
        B = random_array(rng, (count, n), dtype)
        Ad, Bd = arrange(xp, A, layout), to_xp(xp, B)
        poison_pool(xp, B.nbytes)
        c, X, info = posv(Ad, Bd, setting=setting)
        c_f, X_f, info_f = posv(Ad, Bd, setting=fused)
        np.testing.assert_array_equal(to_np(info), expected)
        np.testing.assert_array_equal(to_np(info_f), expected)
        X = to_np(X)
        np.testing.assert_array_equal(X[~ok], B[~ok])
        assert solve_ratio(X[ok][..., None], H[ok], B[ok][..., None]) <= THRESHOLD
        close_factors(np.tril(to_np(c))[ok], np.tril(to_np(c_f))[ok], dtype)
        c2, info2 = potrf(Ad, setting=setting)
        np.testing.assert_array_equal(to_np(info2), expected)
        np.testing.assert_array_equal(to_np(c2), to_np(c))


@pytest.mark.parametrize("setting", REGISTER_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_thread_design_lists(xp, setting, dtype):
    """Pointer (equal sizes) and variable-size lists up to nb, C and F members, more
    members than a block: info and residuals as LAPACK's bounds; larger members raise."""
    thread_skip(xp, setting, dtype)
    rng = rng_for("chol-thread-lists", str(np.dtype(dtype)), str(setting))
    for ns in ([setting.nb] * 130, [int(v) for v in rng.integers(0, setting.nb + 1, 150)]):
        pairs = [hermitian_pd(rng, (), n, dtype, "spd_rand") for n in ns]
        Bs = [random_array(rng, (n,), dtype) for n in ns]
        Ad = [arrange(xp, a, "CF"[i % 2]) for i, (_, a) in enumerate(pairs)]
        cs, Xs, info = posv(Ad, to_xp(xp, Bs), setting=setting)
        assert not np.any(to_np(info))
        for (h, _), c, x, b in zip(pairs, cs, Xs, Bs):
            assert potrf_ratio(to_np(c)[None], h[None], True) <= THRESHOLD
            assert solve_ratio(to_np(x)[None, :, None], h[None], b[None, :, None]) <= THRESHOLD
        cs2, info2 = potrf(Ad, setting=setting)
        for c, c2 in zip(cs, cs2):
            np.testing.assert_array_equal(to_np(c2), to_np(c))
    big = setting.nb + 1
    with pytest.raises(ValueError, match=f"takes matrices up to {setting.nb} x {setting.nb}"):
        posv([xp.eye(big, dtype=dtype)], [xp.ones(big, dtype)], setting=setting)


def test_empty_batches_and_sizes(xp):
    for a_shape, b_shape, out_shape in (((0, 4, 4), (0, 4), (0, 4)), ((3, 0, 0), (3, 0), (3, 0)),
                                        ((2, 5, 5), (2, 5, 0), (2, 5, 0)), ((5, 5), (5,), (5,))):
        A = np.eye(a_shape[-1]) * 2 + np.zeros(a_shape)
        c, info = potrf(to_xp(xp, A))
        assert tuple(c.shape) == a_shape and tuple(info.shape) == a_shape[:-2]
        c, X, info = posv(to_xp(xp, A), to_xp(xp, np.ones(b_shape)))
        assert tuple(X.shape) == out_shape and tuple(info.shape) == a_shape[:-2]
        assert tuple(cholesky(to_xp(xp, A)).shape) == a_shape
        assert tuple(cho_solve(cho_factor(to_xp(xp, A)), to_xp(xp, np.ones(b_shape))).shape) == out_shape
    assert potrf([])[0] == [] and cholesky([]) == []


@pytest.mark.parametrize("order", ["C", "F"])
def test_overwrite_a(xp, order):
    rng = rng_for("overwrite", order)
    H, A = hermitian_pd(rng, (4,), 12, np.float64, "spd_rand")
    Ad = arrange(xp, A, order)
    c, info = potrf(Ad, overwrite_a=True)
    assert c is Ad, "the factor is written in place for a writable array of the result dtype"
    assert potrf_ratio(to_np(Ad), H, True) <= THRESHOLD
    Ad32 = arrange(xp, A.astype(np.float32), order)   # not of the result dtype: a copy, input kept
    Ad = arrange(xp, A, order)
    before = snapshot(Ad)
    c, info = potrf(Ad, overwrite_a=False)
    assert c is not Ad
    assert_unchanged((Ad,), before)
    c32, _ = potrf(Ad32, overwrite_a=True)
    assert c32.dtype == np.float32


# --- pointer arrays and variable sizes -------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(ns=st.lists(st.integers(0, 40), min_size=0, max_size=8), k=st.sampled_from([0, 1, 3]),
       dtype=st.sampled_from(DTYPES), lower=st.booleans(),
       orders=st.lists(st.sampled_from("CF"), min_size=8, max_size=8), prepared=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_variable_and_pointer_lists(xp, setting, ns, k, dtype, lower, orders, prepared, seed):
    """Equal n_i make a PointerBatch, mixed ones a VariableBatch; k = 0: vectors."""
    gpu_only_setting(xp, setting)
    rng = np.random.default_rng(seed)
    pairs = [hermitian_pd(rng, (), n, dtype, "spd_rand") for n in ns]
    Hs = [h if lower else upper_input(h) for h, _ in pairs]
    As = [a if lower else upper_input(a) for _, a in pairs]
    Bs = [random_array(rng, (n,) if k == 0 else (n, k), dtype) for n in ns]
    Ad = [arrange(xp, a, orders[i]) for i, a in enumerate(As)]
    before = snapshot(*Ad)
    A_arg = (PointerBatch(Ad) if len(set(ns)) <= 1 else VariableBatch(Ad)) if prepared else Ad
    cs, info = potrf(A_arg, lower=lower, setting=setting)
    assert isinstance(cs, list) and len(cs) == len(ns)
    assert tuple(info.shape) == (len(ns),) and not np.any(to_np(info))
    for c, h in zip(cs, Hs):
        assert potrf_ratio(to_np(c), h, lower) <= THRESHOLD
    Ls = cholesky(A_arg, upper=not lower)
    for L, h in zip(Ls, Hs):   # the default setting; the other triangle zero
        L = to_np(L)
        assert potrf_ratio(L, h, lower) <= THRESHOLD
        np.testing.assert_array_equal(L, factor_of(L, lower))
    cs2, Xs, info = posv(A_arg, to_xp(xp, Bs), lower=lower, setting=setting)
    assert isinstance(Xs, list) and not np.any(to_np(info))
    Ys = cho_solve((cs, lower), to_xp(xp, Bs))
    for x, y, h, b in zip(Xs, Ys, Hs, Bs):
        cols = (b.shape[0], 1 if k == 0 else k)
        assert to_np(x).shape == b.shape
        assert solve_ratio(to_np(x).reshape(cols), h, b.reshape(cols)) <= THRESHOLD
        assert solve_ratio(to_np(y).reshape(cols), h, b.reshape(cols)) <= THRESHOLD
    if len(set(ns)) == 1 and ns:   # one (count, n[, k]) array: one array back (the fused list path)
        Barr = np.stack(Bs)
        _, X, info = posv(A_arg, to_xp(xp, Barr), lower=lower, setting=setting)
        assert isinstance(X, xp.ndarray) and X.shape == Barr.shape
        Xm = to_np(X) if k else to_np(X)[..., None]
        assert solve_ratio(Xm, np.stack(Hs), Barr if k else Barr[..., None]) <= THRESHOLD
    assert_unchanged(Ad, before)


def test_list_failures_name_members(xp):
    rng = rng_for("listfail")
    pairs = [hermitian_pd(rng, (), n, np.float64, "spd_rand") for n in (3, 5, 5, 7)]
    As = [a for _, a in pairs]
    As[2][3, 3] = -100.0
    cs, info = potrf(to_xp(xp, As))
    np.testing.assert_array_equal(to_np(info), [0, 0, 4, 0])
    with pytest.raises(np.linalg.LinAlgError, match=r"\[2\]"):
        cholesky(to_xp(xp, As))
    Bs = [np.ones(a.shape[0]) for a in As]
    _, Xs, info = posv(to_xp(xp, As), to_xp(xp, Bs))
    np.testing.assert_array_equal(to_np(Xs[2]), Bs[2])


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("a_shape, b_shape, fragment", [
    ((3, 4, 5), (3, 4), "square"), ((4,), (4,), "square"), ((3, 4, 4), (3, 5), "n = 4"),
    ((3, 4, 4), (2, 4, 1), "broadcast"), ((4, 4), (), "B must have shape"),
])
def test_bad_shapes_raise_naming_the_argument(xp, a_shape, b_shape, fragment):
    A, B = to_xp(xp, np.ones(a_shape)), to_xp(xp, np.ones(b_shape))
    with pytest.raises(ValueError, match=fragment):
        posv(A, B)
    if fragment == "square":
        with pytest.raises(ValueError, match="square"):
            potrf(A)
        with pytest.raises(ValueError, match="square"):
            cholesky(A)


def test_bad_arguments(xp):
    A = to_xp(xp, np.eye(3)[None] * 2)
    b = to_xp(xp, np.ones((1, 3)))
    with pytest.raises(TypeError, match="A has dtype int32"):
        potrf(to_xp(xp, np.eye(3, dtype=np.int32)))
    with pytest.raises(TypeError, match="float16"):
        posv(A, to_xp(xp, np.ones(3, np.float16)))
    with pytest.raises(TypeError, match="lower"):
        potrf(A, lower="yes")
    with pytest.raises(TypeError, match="upper"):
        cholesky(A, upper=1)
    with pytest.raises(TypeError, match="check"):
        cho_factor(A, check=None)
    with pytest.raises(TypeError, match="overwrite_a"):
        potrf(A, overwrite_a=None)
    with pytest.raises(TypeError, match="CholeskySetting"):
        potrf(A, setting="fused")
    with pytest.raises(ValueError, match="compiled settings"):
        potrf(A, setting=CholeskySetting("fused", 2))
    with pytest.raises(TypeError, match="cho_factor"):
        cho_solve(A, b)
    with pytest.raises(ValueError, match="square"):
        potrf([np.ones((2, 3))])
    with pytest.raises(ValueError, match=r"B\[1\]"):
        posv([np.eye(2), np.eye(3)], [np.ones(2), np.ones(2)])


@pytest.mark.gpu
def test_mixed_devices_raise(xp):
    if xp is np:
        pytest.skip("needs both backends")
    with pytest.raises(ValueError, match="on one device"):
        posv(xp.eye(3), np.ones(3))


# --- chooser and plan (pure, on the CPU) --------------------------------------------------------


def test_chooser_picks_registered_settings():
    from batched.device_functions import registered

    names = {p.name: s for p, s in registered().items()}["cholesky.cu"]
    for n in (*EDGES, *GPU_EDGES, 1000):
        for itemsize in (4, 8, 16):
            s = choose_cholesky_setting(n, itemsize)
            assert s in CHOLESKY_SETTINGS and s.compiled_for(itemsize)
            fits = FUSED_SETTINGS[4].group_bytes(n, itemsize) <= 48 * 1024
            thread = n <= 4 or (n <= 8 and itemsize <= 8)
            rows = not thread and (n <= 16 or (n <= 32 and itemsize <= 8))
            warps = 32 < n <= 128 and (n <= 64 or itemsize <= 8)
            assert s.thread == thread and s.rows == rows and s.warps == warps, (n, itemsize, s)
            assert s.fused == (not (thread or rows or warps) and (n <= 32 or (n <= 64 and fits))), (n, itemsize, s)
            if thread or rows or warps:
                assert n <= s.nb <= max(2 if thread else 16, 2 * n) and s.can_solve(n)
            elif n <= 32:
                assert n <= s.group_threads <= max(4, 2 * n) and s.can_solve(n)
            for layout in ("uniform", "pointer", "variable"):
                for dt in DTYPES:
                    if not s.compiled_for(np.dtype(dt).itemsize):
                        continue
                    assert chol.kernel_name(layout, dt, s) in names
                    if s.can_solve(n):
                        assert chol.kernel_name(layout, dt, s, True) in names
    # settings that differ only in fuse_solve share their factor-only kernels; a thread
    # setting is compiled only where its triangle fits the register budget
    per_dtype = {}
    for dt in DTYPES:
        ok = [s for s in CHOLESKY_SETTINGS if s.compiled_for(np.dtype(dt).itemsize)]
        per_dtype[dt] = (len({(s.design, s.template_args()) for s in ok})
                         + len({(s.design, s.template_args()) for s in ok if s.can_solve(1)}))
    assert len(names) == 3 * sum(per_dtype.values())
    assert [s.compiled_for(16) for s in THREAD_SETTINGS] == [True, True, False]   # no 8 x 8 complex128
    assert [s.compiled_for(16) for s in ROWS_SETTINGS] == [True, False]          # no row of 32 complex128
    assert [s.compiled_for(16) for s in WARPS_SETTINGS] == [False, True, False, False]   # 64 x 256 only


def test_warps_plan():
    """The warps design: a block of DIM_X threads per matrix, the grid a block per matrix
    (capped), the shared memory of PotrfWarpsSmem (the matrix with ld nb + 1, the three
    multiplier slots, the right-hand side, trsv_window's GEMV work, three reciprocal
    slots, three flags), the same with or without a solve; too large or not compiled:
    ValueError."""
    limit = 227 * 1024
    w64, w64b, w128, w128b = WARPS_SETTINGS
    assert str(w128b) == "potrf_warps128x512" and w128b.template_args() == "128, 512" and w128b.warps
    assert w128b.warps_piece == (4, 8) and w64.warps_piece == (2, 16) and w128.can_solve(128)
    assert not w128.can_solve(129) and not (w128.fused or w128.thread or w128.rows)
    for s in WARPS_SETTINGS:
        for itemsize in (4, 8, 16):
            if not s.compiled_for(itemsize):
                with pytest.raises(ValueError, match=f"not compiled for {itemsize}-byte elements"):
                    plan_cholesky(s, s.nb, itemsize, 10, limit)
                continue
            nb = s.nb
            smem = -(-(nb * (nb + 1) * itemsize) // 16) * 16 + (4 * nb + 4 * s.dim_x) * itemsize
            smem = -(-(-(-smem // 16) * 16 + 3 * itemsize) // 16) * 16
            smem = -(-(smem + 12) // 16) * 16
            for nrhs in (0, 1, 3):
                plan = plan_cholesky(s, nb, itemsize, 70_000, limit, nrhs=nrhs)
                assert (plan.grid, plan.block, plan.smem, plan.groups) == (70_000, s.dim_x, smem, 1)
            assert plan_cholesky(s, 1, itemsize, 2**40, limit).grid == 2**31 - 1
            with pytest.raises(ValueError, match=f"takes matrices up to {nb} x {nb}"):
                plan_cholesky(s, nb + 1, itemsize, 10, limit)
            with pytest.raises(ValueError, match="shared memory"):
                plan_cholesky(s, nb, itemsize, 10, smem - 16)


def test_thread_plan():
    """The thread design: one matrix per thread, the grid covering every chunk of 32 once;
    the pipeline's shared memory double-buffered (C leaves through a second matrix
    buffer) while two blocks of it fit, else late (one matrix buffer), only for packed
    uniform batches; too large or not compiled: ValueError."""
    limit = 227 * 1024
    s2, s4, s8 = THREAD_SETTINGS
    assert str(s8) == "potrf_thread8x128" and s8.template_args() == "8, 128" and s8.group_threads == 1
    assert s8.thread and not s8.fused and s8.can_solve(8) and not s8.can_solve(9)
    plan = plan_cholesky(s4, 4, 8, 70_000, limit, nrhs=1)
    assert plan.block == 128 and plan.grid == -(-70_000 // 128)
    assert plan.smem == 4 * (2 * 32 * 17 + 2 * 32 * 5) * 8                   # double-buffered
    assert plan_cholesky(s4, 3, 8, 70_000, limit).smem == 4 * (2 * 32 * 9) * 8   # POTRF: no B ring
    assert plan_cholesky(s8, 8, 8, 10, limit, nrhs=1).smem == 4 * (32 * 65 + 2 * 32 * 9) * 8   # late
    assert plan_cholesky(s8, 8, 8, 10, limit, nrhs=2).smem == 4 * (32 * 65) * 8   # two: not staged
    assert plan_cholesky(s8, 8, 8, 10, limit, nrhs=1, packed=False).smem == 0
    assert plan_cholesky(s8, 8, 8, 10, 60 * 1024, nrhs=1).smem == 0             # no room: direct
    assert plan_cholesky(s8, 8, 8, 2**40, limit).grid == 2**31 - 1
    with pytest.raises(ValueError, match="takes matrices up to 4 x 4"):
        plan_cholesky(s4, 5, 8, 10, limit)
    with pytest.raises(ValueError, match="not compiled for 16-byte elements"):
        plan_cholesky(s8, 8, 16, 10, limit)
    r16, r32 = ROWS_SETTINGS   # rows: 128-thread blocks of 128 / L groups, static shared memory
    assert str(r32) == "potrf_rows32x32" and r32.template_args() == "32, 32" and r32.can_solve(32)
    p16 = plan_cholesky(r16, 16, 8, 70_001, limit, nrhs=1)
    assert (p16.block, p16.smem, p16.groups, p16.grid) == (128, 0, 8, -(-70_001 // 8))
    with pytest.raises(ValueError, match="takes matrices up to 16 x 16"):
        plan_cholesky(r16, 17, 8, 10, limit)
    with pytest.raises(ValueError, match="not compiled for 16-byte elements"):
        plan_cholesky(r32, 20, 16, 10, limit)


@pytest.mark.parametrize("setting", FUSED_SETTINGS + BLOCKED_SETTINGS, ids=str)
def test_plan_fits_shared_memory(setting):
    limit = 227 * 1024
    for n in (1, 8, 32, 33, 64, 100, 500):
        for itemsize in (4, 16):
            if setting.fused and setting.group_bytes(n, itemsize) > limit:
                with pytest.raises(ValueError, match="blocked"):
                    plan_cholesky(setting, n, itemsize, 70_000, limit)
                continue
            plan = plan_cholesky(setting, n, itemsize, 70_000, limit)
            assert plan.block % setting.group_threads == 0 and plan.block <= 1024
            assert plan.groups * setting.group_bytes(n, itemsize) == plan.smem <= limit
            assert plan.grid * plan.groups >= 70_000 > (plan.grid - 1) * plan.groups
            if not setting.fused:   # the blocked design's shared memory does not grow with n
                assert plan.groups == 1 and plan.smem == plan_cholesky(setting, 10 * n, itemsize, 1, limit).smem
            if setting.can_solve(n):
                p2 = plan_cholesky(setting, n, itemsize, 70_000, limit, nrhs=3)
                assert p2.smem // p2.groups >= plan.smem // plan.groups and p2.block <= plan.block
            elif n:
                with pytest.raises(ValueError, match="cannot solve"):
                    plan_cholesky(setting, n, itemsize, 70_000, limit, nrhs=1)
    assert PANEL == 32 and all(not s.fused for s in BLOCKED_SETTINGS) and all(s.fused for s in FUSED_SETTINGS)


@pytest.mark.parametrize("setting", CHOLESKY_SETTINGS, ids=str)
def test_setting_is_accepted_on_the_cpu_backend(setting):
    rng = rng_for("cpu-setting", str(setting))
    H, A = hermitian_pd(rng, (2,), 5, np.float64, "spd_rand")
    c, info = potrf(A, setting=setting)
    assert potrf_ratio(c, H, True) <= THRESHOLD


@pytest.mark.skipif(HAVE_GPU, reason="checks the CPU-only import path")
def test_cpu_only_import_needs_no_device():
    H, A = hermitian_pd(rng_for("cpu"), (2,), 3, np.float64, "spd_rand")
    assert potrf_ratio(cholesky(A), H, True) <= THRESHOLD
