"""Batched LU (getrf, getrs, gesv, lu_factor, lu_solve, solve, inv) the LAPACK way.

Every test body runs on NumPy (the CPU backend) and on CuPy (the GPU, skipped
without one) through the ``xp`` fixture.  GPU bodies run with every registered
LuSetting forced (a fused or thread setting too small for the drawn size, or a
thread setting not compiled for the dtype, must raise) and with the default
chooser; the CPU backend has one path and runs the default.
Sizes: up to 24 on the CPU (fast), up to 200 on the GPU (both designs, every
panel and tile edge).  Results are new arrays: on the GPU the memory pool is
poisoned with NaN first (``poison_pool``), so an element never written shows up.

Ratios (LAPACK's testers, threshold 30), computed in float64 / complex128:
  factorization  ||P A - L U||_1 / (max(m, n) ||A||_1 eps)          (xGET01)
  solve          ||B - op(A) X||_1 / (||op(A)||_1 ||X||_1 n eps)    (xGET02, per column)
"""

from __future__ import annotations


import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations import lu as lu_module
from batched.factorizations.lu import (SOURCE, getrf, getrs, gesv, inv, kernel_name, lu_factor, lu_solve,
                                       solve)
from batched.factorizations.lu_settings import (BLOCKED_SETTINGS, COLS_SETTINGS, FUSED_SETTINGS, LU_SETTINGS,
                                                PANELS_SETTINGS, ROWS_SETTINGS, THREAD_SETTINGS, WARPS_SETTINGS, LuSetting,
                                                choose_lu_setting, plan_lu)
from conftest import assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from strategies import DTYPES, MATRIX_LAYOUTS, SETTINGS, VECTOR_LAYOUTS, arrange, broadcast_pair, random_array

THRESHOLD = 30
SETTINGS_UNDER_TEST = [*LU_SETTINGS, None]
# Fused and thread tile edges (4, 8, 16, 32, 64), the blocked panels (8, 16, 32) and GEMM tiles (32), both sides.
GPU_EDGES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 96, 97, 128, 129, 150, 200)
CPU_EDGES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17)
KINDS = ("rand", "dominant", "ill", "scaled_ufl", "scaled_ofl")


# --- matrices and ratios -----------------------------------------------------------------


def _wide(a):
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def lu_matrix(rng, batch, m, n, dtype, kind):
    """(batch..., m, n) matrices of ``kind`` (MAGMA-tester style names):
    rand: N(0, 1); dominant: rand plus (n + 1) on the diagonal; ill: U diag(s) V^H
    with s geometric from 1 to 1e-12 (cond 1e12; 1e-5 in single precision, about
    100 eps, so that rounding to ``dtype`` cannot make the matrix exactly singular); scaled_ufl / scaled_ofl: rand
    scaled near underflow / overflow of ``dtype``."""
    dtype = np.dtype(dtype)
    A = random_array(rng, (*batch, m, n), np.complex128 if dtype.kind == "c" else np.float64)
    k = min(m, n)
    if kind == "dominant":
        A[..., np.arange(k), np.arange(k)] += n + 1
    elif kind == "ill" and k:
        U, _ = np.linalg.qr(random_array(rng, (*batch, m, k), A.dtype))
        V, _ = np.linalg.qr(random_array(rng, (*batch, n, k), A.dtype))
        s = np.geomspace(1.0, 1e-5 if np.finfo(dtype).eps > 1e-10 else 1e-12, k)
        A = (U * s) @ np.swapaxes(V, -1, -2).conj()
    elif kind in ("scaled_ufl", "scaled_ofl"):
        fi = np.finfo(dtype)
        A = A * (float(fi.tiny) * 2**20 if kind == "scaled_ufl" else float(fi.max) / 2**20 / max(m, n, 1))
    return A.astype(dtype)


def permute_rows(A, ipiv):
    """P A for LAPACK's 1-based interchanges ipiv (..., k): rows i and ipiv[i] - 1 swap in order."""
    # C order: the swaps go through a reshaped view, and a copy of a broadcast batch
    # (astype keeps its strides' order) would reshape into a second copy instead.
    PA = np.array(A, copy=True, order="C")
    flatA = PA.reshape(-1, *PA.shape[-2:])
    flatp = np.asarray(ipiv).reshape(-1, ipiv.shape[-1])
    for a, p in zip(flatA, flatp):
        for i, q in enumerate(p):
            a[[i, q - 1]] = a[[q - 1, i]]
    return PA


def test_permute_rows_on_a_broadcast_batch():
    """The helper swaps rows of a batch broadcast along its first axis (hypothesis
    found a factor ratio of 1 / eps there when the swaps went to a copy)."""
    A = np.arange(8.0).reshape(2, 2, 2)
    Af = np.broadcast_to(A, (2, 2, 2, 2)).astype(np.float32)  # strides not in C order
    PA = permute_rows(Af, np.full((2, 2, 2), 2, np.int32))
    np.testing.assert_array_equal(PA, np.broadcast_to(A[:, ::-1], (2, 2, 2, 2)))


def factor_ratio(A, lu, ipiv):
    """max over the batch of ||P A - L U||_1 / (max(m, n) ||A||_1 eps) (LAPACK's xGET01)."""
    lu = np.asarray(lu)
    eps = _eps(lu.dtype)
    m, n = A.shape[-2:]
    if m == 0 or n == 0 or A.size == 0:
        return 0.0
    k = min(m, n)
    W = _wide(lu)
    L = np.tril(W[..., :, :k], -1) + np.eye(m, k)
    U = np.triu(W[..., :k, :])
    PA = permute_rows(_wide(A), np.asarray(ipiv))
    with np.errstate(all="ignore"):
        R = np.abs(PA - L @ U).sum(axis=-2).max(axis=-1)
        anorm = np.abs(_wide(A)).sum(axis=-2).max(axis=-1)
        ratio = R / (np.maximum(anorm, np.finfo(np.float64).tiny) * max(m, n) * eps)
    ratio = np.where(np.isfinite(W).all(axis=(-2, -1)), ratio, np.inf)
    return float(np.max(ratio))


def solve_ratio(A, X, B, trans="N"):
    """max over matrices and columns of ||b - op(A) x||_1 / (||op(A)||_1 ||x||_1 n eps) (xGET02).
    A (..., n, n), X and B (..., n, k) broadcast to one batch."""
    X = np.asarray(X)
    eps = _eps(X.dtype)
    n = A.shape[-1]
    if n == 0 or X.size == 0:
        return 0.0
    Aw = _wide(A)
    t = {0: "N", 1: "T", 2: "C"}.get(trans, str(trans).upper())
    opA = Aw if t == "N" else (np.swapaxes(Aw, -1, -2).conj() if t == "C" else np.swapaxes(Aw, -1, -2))
    Xw, Bw = _wide(X), _wide(B)
    with np.errstate(all="ignore"):
        R = np.abs(Bw - opA @ Xw).sum(axis=-2)
        xnorm = np.abs(Xw).sum(axis=-2)
        anorm = np.abs(opA).sum(axis=-2).max(axis=-1)[..., None]
        ratio = R / (np.maximum(anorm * xnorm, np.finfo(np.float64).tiny) * n * eps)
    ratio = np.where(np.isfinite(Xw).all(axis=-2), ratio, np.inf)
    return float(np.max(ratio))


def sizes_for(xp):
    if xp is np:
        return st.one_of(st.sampled_from(CPU_EDGES), st.integers(0, 24))
    return st.one_of(st.sampled_from(GPU_EDGES), st.integers(0, 200))


def too_small(setting, m, n):
    """A fused or thread setting whose NB is below the matrices: plan_lu raises 'takes matrices up to'."""
    return setting is not None and not setting.blocked and max(m, n) > setting.nb


def not_compiled(setting, dtype):
    """A thread setting without an instantiation for ``dtype`` (its matrix would pass the
    register budget: 8 x 8 complex128): plan_lu raises 'not compiled for'."""
    return setting is not None and not setting.compiled_for(np.dtype(dtype).itemsize)


def design_peer(setting):
    """The setting a thread, rows or warps setting is compared with: the fused one of
    the same NB (the same pivot order and operations), or, past the largest fused NB
    (warps 128), the widest blocked panel (the same pivot order)."""
    return next((s for s in FUSED_SETTINGS if s.nb >= setting.nb), BLOCKED_SETTINGS[-1])


def register_peer(xp, setting, dtype):
    """A thread, rows or warps setting's test runs on the GPU where the setting is
    compiled for ``dtype`` (skipped otherwise); returns design_peer(setting)."""
    gpu_only_setting(xp, setting)
    if not_compiled(setting, dtype):
        pytest.skip("register setting not compiled for this dtype")
    return design_peer(setting)


# --- factorization -------------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_getrf_residual(xp, setting, data):
    gpu_only_setting(xp, setting)
    m = data.draw(sizes_for(xp), "m")
    n = data.draw(st.one_of(st.just(m), sizes_for(xp)), "n")
    batch = data.draw(st.sampled_from([(), (0,), (1,), (3,), (2, 3)]), "batch")
    dtype = data.draw(st.sampled_from(DTYPES), "dtype")
    kind = data.draw(st.sampled_from(KINDS), "kind")
    layout = data.draw(st.sampled_from(MATRIX_LAYOUTS), "layout")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    A = lu_matrix(rng, batch, m, n, dtype, kind)
    Ad = arrange(xp, A, layout)
    before = snapshot(Ad)
    if too_small(setting, m, n):
        with pytest.raises(ValueError, match="takes matrices up to"):
            getrf(Ad, setting=setting)
        return
    if not_compiled(setting, dtype):
        with pytest.raises(ValueError, match="not compiled for"):
            getrf(Ad, setting=setting)
        return
    poison_pool(xp, A.nbytes)
    lu, ipiv, info = getrf(Ad, setting=setting)
    assert isinstance(lu, xp.ndarray) and lu.dtype == dtype and tuple(lu.shape) == A.shape
    assert ipiv.dtype == np.int32 and tuple(ipiv.shape) == (*batch, min(m, n))
    assert info.dtype == np.int32 and tuple(info.shape) == batch
    assert not np.any(to_np(info)), (kind, to_np(info))
    p = to_np(ipiv)
    assert np.all((p >= np.arange(1, min(m, n) + 1)) & (p <= m)), "LAPACK's ipiv[i] lies in [i + 1, m]"
    r = factor_ratio(A, to_np(lu), p)
    assert r <= THRESHOLD, (r, m, n, batch, str(dtype), kind, layout)
    assert_unchanged((Ad,), before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
def test_pivots_and_factors_match_lapack(xp, setting, dtype):
    """ipiv equals scipy.linalg.lapack's xGETRF on random data (distinct pivots), lu agrees."""
    gpu_only_setting(xp, setting)
    if not_compiled(setting, dtype):
        pytest.skip("thread setting not compiled for this dtype")
    rng = rng_for("lapack", str(np.dtype(dtype)), str(setting))
    shapes = [(n, n) for n in (1, 2, 5, 8, 13, 16)] + [(9, 5), (5, 9)]
    if xp is not np:
        shapes += [(n, n) for n in (31, 33, 64, 65, 100, 150)] + [(120, 70), (70, 120)]
    getrf_lapack = scipy.linalg.lapack.get_lapack_funcs("getrf", dtype=dtype)
    for m, n in shapes:
        if too_small(setting, m, n):
            continue
        A = lu_matrix(rng, (4,), m, n, dtype, "rand")
        lu, ipiv, info = getrf(to_xp(xp, A), setting=setting)
        for b in range(4):
            ref_lu, ref_piv, ref_info = getrf_lapack(A[b])
            np.testing.assert_array_equal(to_np(ipiv)[b], ref_piv + 1, err_msg=f"{m}x{n} matrix {b}")
            np.testing.assert_allclose(to_np(lu)[b], ref_lu, rtol=1e-9, atol=1e-9 * np.abs(ref_lu).max())
            assert int(to_np(info)[b]) == ref_info == 0


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_design_edge(xp, setting, dtype):
    """Sizes on both sides of every fused NB, panel width and GEMM tile; square and rectangular."""
    gpu_only_setting(xp, setting)
    if not_compiled(setting, dtype):
        pytest.skip("thread setting not compiled for this dtype")
    rng = rng_for("edges", str(dtype), str(setting))
    sizes = CPU_EDGES if xp is np else GPU_EDGES
    for n in sizes:
        for m in {n, max(n - 3, 0), n + 5}:
            if too_small(setting, m, n):
                continue
            A = lu_matrix(rng, (3,), m, n, dtype, "rand")
            poison_pool(xp, A.nbytes)
            lu, ipiv, info = getrf(arrange(xp, A, "F" if (m + n) % 2 else "C"), setting=setting)
            r = factor_ratio(A, to_np(lu), to_np(ipiv))
            assert r <= THRESHOLD, (m, n, r)


# --- solves ----------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_gesv_and_solve_residual(xp, setting, data):
    gpu_only_setting(xp, setting)
    n = data.draw(sizes_for(xp), "n")
    batch_a, batch_b = data.draw(broadcast_pair(), "batches")
    dt_a = data.draw(st.sampled_from(DTYPES), "dtype A")
    dt_b = data.draw(st.sampled_from([d for d in DTYPES if d.kind == dt_a.kind]), "dtype B")
    kind = data.draw(st.sampled_from(KINDS), "kind")
    form = data.draw(st.sampled_from(("vectors", "one", "matrix")), "form")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    A = lu_matrix(rng, batch_a, n, n, dt_a, kind)
    if form == "vectors":
        B = random_array(rng, A.shape[:-1], dt_b)
    elif form == "one":
        B = random_array(rng, (n,), dt_b)
    else:
        B = random_array(rng, (*batch_b, n, data.draw(st.integers(0, 5), "k")), dt_b)
    # the library's rule: B shaped like A.shape[:-1] is a batch of vectors, whatever its form
    vectors = form != "matrix" or B.shape == A.shape[:-1]
    Ad = arrange(xp, A, data.draw(st.sampled_from(MATRIX_LAYOUTS), "layout A"))
    Bd = arrange(xp, B, data.draw(st.sampled_from(VECTOR_LAYOUTS if vectors else MATRIX_LAYOUTS), "layout B"),
                 1 if vectors else 2)
    before = snapshot(Ad, Bd)
    if too_small(setting, n, n):
        with pytest.raises(ValueError):
            gesv(Ad, Bd, setting=setting)
        return
    dtype = np.result_type(dt_a, dt_b)
    if not_compiled(setting, dtype):   # the solve's dtype decides
        with pytest.raises(ValueError, match="not compiled for"):
            gesv(Ad, Bd, setting=setting)
        return
    Bm = B[..., None] if vectors else B
    batch = np.broadcast_shapes(A.shape[:-2], Bm.shape[:-2])
    out_shape = (*batch, n) if vectors else (*batch, *B.shape[-2:])
    poison_pool(xp, int(np.prod(out_shape)) * dtype.itemsize)
    lu, ipiv, X, info = gesv(Ad, Bd, setting=setting)
    assert X.dtype == dtype and tuple(X.shape) == out_shape and tuple(info.shape) == batch
    assert tuple(lu.shape) == (*batch, n, n) and tuple(ipiv.shape) == (*batch, n)
    assert not np.any(to_np(info))
    Xm = to_np(X)[..., None] if vectors else to_np(X)
    Af = np.broadcast_to(A, (*batch, n, n))
    Bf = np.broadcast_to(Bm, (*batch, *Bm.shape[-2:]))
    r = solve_ratio(Af, Xm, Bf)
    assert r <= THRESHOLD, (r, n, kind, str(dtype))
    assert factor_ratio(Af.astype(dtype), to_np(lu), to_np(ipiv)) <= THRESHOLD
    # solve() (the default setting): the same X as gesv with the default, bit for bit, where
    # both take the same setting (a solve wanting X alone may take the cols design's direct
    # kernel where gesv, which returns the factors, takes the rows design: float32 16 x 16)
    x2 = solve(Ad, Bd)
    direct = choose_lu_setting(n, n, dtype.itemsize, direct_solve=True, is_complex=dtype.kind == "c")
    if setting is None and direct == choose_lu_setting(n, n, dtype.itemsize, is_complex=dtype.kind == "c"):
        np.testing.assert_array_equal(to_np(x2), to_np(X))
    else:
        assert solve_ratio(Af, to_np(x2)[..., None] if vectors else to_np(x2), Bf) <= THRESHOLD
    # getrf with the same setting factors exactly as gesv did; getrs solves with it
    lu1, ipiv1, _ = getrf(xp.broadcast_to(Ad.astype(dtype), (*batch, n, n)), setting=setting)
    np.testing.assert_array_equal(to_np(ipiv1), to_np(ipiv))
    X3, info3 = getrs(lu1, ipiv1, Bd)
    assert solve_ratio(Af, to_np(X3)[..., None] if vectors else to_np(X3), Bf) <= THRESHOLD
    assert not np.any(to_np(info3))
    assert_unchanged((Ad, Bd), before)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", ["N", "T", "C", "n", "t", "c", 0, 1, 2])
def test_getrs_and_lu_solve_transposes(xp, dtype, trans):
    rng = rng_for("trans", str(dtype), str(trans))
    sizes = (1, 3, 8, 17) if xp is np else (1, 3, 8, 17, 33, 64, 65, 130)
    for n in sizes:
        A = lu_matrix(rng, (5,), n, n, dtype, "rand")
        B = random_array(rng, (5, n, 3), dtype)
        Ad = to_xp(xp, A)
        lu, ipiv, _ = getrf(Ad)
        poison_pool(xp, B.nbytes)
        X, info = getrs(lu, ipiv, to_xp(xp, B), trans=trans)
        assert solve_ratio(A, to_np(X), B, trans) <= THRESHOLD, (n, trans)
        assert tuple(info.shape) == (5,) and not np.any(to_np(info))
        lu2, piv = lu_factor(Ad)
        np.testing.assert_array_equal(to_np(piv), to_np(ipiv) - 1)
        x = lu_solve((lu2, piv), to_xp(xp, B[:, :, 0]), trans=trans)   # a batch of vectors
        assert solve_ratio(A, to_np(x)[..., None], B[:, :, :1], trans) <= THRESHOLD


@pytest.mark.parametrize("trans", "NTC")
def test_getrs_broadcasts_one_factorization(xp, trans):
    """Factors of one matrix (n, n) with right-hand sides (4, n, 2); factors (3, 1, n, n)
    with right-hand sides (4, n): batch dimensions broadcast like numpy.matmul."""
    rng = rng_for("broadcast", trans)
    n = 6 if xp is np else 70
    A = lu_matrix(rng, (), n, n, np.complex128, "rand")
    B = random_array(rng, (4, n, 2), np.complex128)
    lu, ipiv, _ = getrf(to_xp(xp, A))
    X, info = getrs(lu, ipiv, to_xp(xp, B), trans=trans)
    assert X.shape == (4, n, 2) and info.shape == (4,)
    assert solve_ratio(np.broadcast_to(A, (4, n, n)), to_np(X), B, trans) <= THRESHOLD
    A3 = lu_matrix(rng, (3, 1), n, n, np.float64, "rand")
    b = random_array(rng, (4, n), np.float64)
    lu, ipiv, _ = getrf(to_xp(xp, A3))
    X, info = getrs(lu, ipiv, to_xp(xp, b[:, :, None]), trans=trans)
    assert X.shape == (3, 4, n, 1) and info.shape == (3, 4)
    assert solve_ratio(np.broadcast_to(A3, (3, 4, n, n)), to_np(X), np.broadcast_to(b[:, :, None], (3, 4, n, 1)),
                       trans) <= THRESHOLD


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
def test_lu_factor_and_lu_solve_match_scipy(xp, dtype):
    rng = rng_for("scipy", str(np.dtype(dtype)))
    for n in (1, 4, 11, 30):
        A = lu_matrix(rng, (3,), n, n, dtype, "dominant")
        b = random_array(rng, (3, n), dtype)
        lu, piv = lu_factor(to_xp(xp, A))
        for i in range(3):
            ref_lu, ref_piv = scipy.linalg.lu_factor(A[i])
            np.testing.assert_array_equal(to_np(piv)[i], ref_piv)
            np.testing.assert_allclose(to_np(lu)[i], ref_lu, rtol=1e-10, atol=1e-12 * np.abs(ref_lu).max())
            for trans in (0, 1, 2):
                ref = scipy.linalg.lu_solve((ref_lu, ref_piv), b[i], trans=trans)
                got = to_np(lu_solve((lu, piv), to_xp(xp, b), trans=trans))[i]
                np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_inv(xp, dtype):
    rng = rng_for("inv", str(dtype))
    sizes = (0, 1, 2, 5, 9) if xp is np else (0, 1, 2, 5, 9, 32, 64, 65, 120)
    for n in sizes:
        A = lu_matrix(rng, (2, 3), n, n, dtype, "rand")
        poison_pool(xp, A.nbytes)
        Ai = inv(arrange(xp, A, "C"))
        assert Ai.dtype == dtype and Ai.shape == A.shape
        eye = np.broadcast_to(np.eye(n), A.shape)
        assert solve_ratio(A, to_np(Ai), eye) <= THRESHOLD, n


def test_mixed_precision_promotes(xp):
    rng = rng_for("mixed")
    A = lu_matrix(rng, (3,), 6, 6, np.float32, "dominant")
    b = random_array(rng, (3, 6), np.float64)
    x = solve(to_xp(xp, A), to_xp(xp, b))
    assert x.dtype == np.float64
    assert solve_ratio(A, to_np(x)[..., None], b[..., None]) <= THRESHOLD
    Ac = lu_matrix(rng, (3,), 6, 6, np.complex64, "dominant")
    x = solve(to_xp(xp, Ac), to_xp(xp, b.astype(np.complex128)))
    assert x.dtype == np.complex128


# --- numerical failure -------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 6, 40, 100])
def test_exactly_singular_at_a_chosen_column(xp, setting, dtype, n):
    """Column k-1 zero (earlier columns generic): U[k-1, k-1] == 0 exactly, info = k;
    the factorization completes; other matrices are untouched by the failure."""
    gpu_only_setting(xp, setting)
    if xp is np and n > 40:
        pytest.skip("CPU sizes stay small")
    if too_small(setting, n, n) or not_compiled(setting, dtype):
        pytest.skip("setting too small for n, or not compiled for dtype")
    rng = rng_for("singular", str(dtype), n, str(setting))
    count = 7
    A = lu_matrix(rng, (count,), n, n, dtype, "rand")
    cols = {1: n, 4: 1, 5: (n + 1) // 2}
    for b, k in cols.items():
        A[b, :, k - 1] = 0
    B = random_array(rng, (count, n, 2), dtype)
    Ad, Bd = to_xp(xp, A), to_xp(xp, B)
    expected = np.zeros(count, np.int32)
    for b, k in cols.items():
        expected[b] = k
    lu, ipiv, info = getrf(Ad, setting=setting)
    np.testing.assert_array_equal(to_np(info), expected)
    assert factor_ratio(A, to_np(lu), to_np(ipiv)) <= THRESHOLD   # completed, as LAPACK
    poison_pool(xp, B.nbytes)
    lu, ipiv, X, info = gesv(Ad, Bd, setting=setting)
    np.testing.assert_array_equal(to_np(info), expected)
    X = to_np(X)
    bad = expected > 0
    np.testing.assert_array_equal(X[bad], B[bad])   # LAPACK's xGESV leaves B
    assert solve_ratio(A[~bad], X[~bad], B[~bad]) <= THRESHOLD
    with pytest.raises(np.linalg.LinAlgError, match=r"\[1, 4, 5\]"):
        solve(Ad, Bd)
    with pytest.raises(np.linalg.LinAlgError, match=r"\[1, 4, 5\]"):
        inv(Ad)
    x, info = solve(Ad, Bd, check=False)
    np.testing.assert_array_equal(to_np(info), expected)
    _, info = inv(Ad, check=False)
    np.testing.assert_array_equal(to_np(info), expected)
    with pytest.warns(scipy.linalg.LinAlgWarning, match=r"\[1, 4, 5\]"):
        lu_factor(Ad)
    lu, piv, info = lu_factor(Ad, check=False)
    np.testing.assert_array_equal(to_np(info), expected)


def test_any_failed_reads_every_info_shape(xp):
    """check=True's test of info (on the device for CuPy): some entry > 0, for an
    empty, a stacked and a 0-d info, a list and a scalar."""
    from batched.factorizations._solvers import any_failed

    cases = ((np.zeros(0, np.int32), False), (np.zeros((3, 4), np.int32), False),
             (np.array([[0, 0], [0, 5]], np.int32), True), (np.array(1, np.int32), True),
             (np.array(0, np.int32), False))
    for info, failed in cases:
        assert any_failed(to_xp(xp, info)) is failed
    assert any_failed([0, 2]) and not any_failed(0)


def test_singular_rectangular_and_zero_matrices(xp):
    rng = rng_for("rect-singular")
    A = lu_matrix(rng, (3,), 9, 5, np.float64, "rand")
    A[0, :, 2] = 0
    A[2] = 0
    _, _, info = getrf(to_xp(xp, A))
    np.testing.assert_array_equal(to_np(info), [3, 0, 1])
    Z = np.zeros((2, 4, 4))
    lu, ipiv, info = getrf(to_xp(xp, Z))
    np.testing.assert_array_equal(to_np(info), [1, 1])
    np.testing.assert_array_equal(to_np(lu), Z)        # nothing divided by zero: no NaN
    np.testing.assert_array_equal(to_np(ipiv), [[1, 2, 3, 4]] * 2)


def test_linalgerror_names_index_tuples_and_single_matrices(xp):
    rng = rng_for("tuples")
    A = lu_matrix(rng, (2, 3), 5, 5, np.float64, "dominant")
    A[1, 2, :, 3] = 0
    A[0, 0, :, 0] = 0
    b = random_array(rng, (2, 3, 5), np.float64)
    with pytest.raises(np.linalg.LinAlgError) as err:
        solve(to_xp(xp, A), to_xp(xp, b))
    assert "(0, 0)" in str(err.value) and "(1, 2)" in str(err.value)
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1-based column 4\)"):
        solve(to_xp(xp, A[1, 2]), to_xp(xp, b[1, 2]))
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1-based column 4\)"):
        inv(to_xp(xp, A[1, 2]))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [8, 50, 90])
def test_nan_and_inf_stay_in_their_own_matrix(xp, setting, dtype, n):
    gpu_only_setting(xp, setting)
    if xp is np and n > 8:
        pytest.skip("CPU sizes stay small")
    if too_small(setting, n, n) or not_compiled(setting, dtype):
        pytest.skip("setting too small for n, or not compiled for dtype")
    rng = rng_for("nan", str(dtype), n, str(setting))
    count = 6
    A = lu_matrix(rng, (count,), n, n, dtype, "dominant")
    A[2, n - 1, 0] = np.nan
    A[4, n // 2, n // 2] = np.inf
    B = random_array(rng, (count, n), dtype)
    lu, ipiv, X, info = gesv(to_xp(xp, A), to_xp(xp, B), setting=setting)
    X, lu = to_np(X), to_np(lu)
    assert not np.all(np.isfinite(X[2]))   # the Inf matrix's X may be finite (an Inf pivot gives x_i = 0)
    keep = np.isin(np.arange(count), [2, 4], invert=True)
    assert np.all(np.isfinite(X[keep])) and np.all(np.isfinite(lu[keep]))
    assert solve_ratio(A[keep], X[keep][..., None], B[keep][..., None]) <= THRESHOLD
    assert not np.any(to_np(info)[keep])


# --- big batches and empty ones ----------------------------------------------------------------


@pytest.mark.parametrize("setting", [None, FUSED_SETTINGS[1], FUSED_SETTINGS[3], BLOCKED_SETTINGS[0],
                                     THREAD_SETTINGS[-1], ROWS_SETTINGS[0]], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
def test_many_small_systems(xp, setting, dtype):
    """70,000 8x8 systems on the GPU (more than 65,535 blocks); 500 on the CPU."""
    gpu_only_setting(xp, setting)
    if not_compiled(setting, dtype):
        pytest.skip("thread setting not compiled for this dtype")
    count = 500 if xp is np else 70_000
    rng = rng_for("many", str(np.dtype(dtype)), str(setting))
    A = lu_matrix(rng, (count,), 8, 8, dtype, "rand")
    B = random_array(rng, (count, 8), dtype)
    poison_pool(xp, B.nbytes)
    lu, ipiv, X, info = gesv(to_xp(xp, A), to_xp(xp, B), setting=setting)
    assert solve_ratio(A, to_np(X)[..., None], B[..., None]) <= THRESHOLD
    assert factor_ratio(A, to_np(lu), to_np(ipiv)) <= THRESHOLD
    x = solve(to_xp(xp, A), to_xp(xp, B))
    assert solve_ratio(A, to_np(x)[..., None], B[..., None]) <= THRESHOLD
    if setting is None:
        np.testing.assert_array_equal(to_np(x), to_np(X))


def test_empty_batches_and_sizes(xp):
    for a_shape, b_shape, x_shape in (((0, 4, 4), (0, 4), (0, 4)), ((3, 0, 0), (3, 0), (3, 0)),
                                      ((2, 5, 5), (2, 5, 0), (2, 5, 0)), ((5, 5), (5,), (5,)),
                                      ((0, 0), (0, 3), (0, 3))):
        A = np.eye(a_shape[-1]) * 2 + np.zeros(a_shape)
        lu, ipiv, X, info = gesv(to_xp(xp, A), to_xp(xp, np.ones(b_shape)))
        assert tuple(X.shape) == x_shape and tuple(info.shape) == a_shape[:-2]
        assert tuple(lu.shape) == a_shape and tuple(ipiv.shape) == a_shape[:-1]
        x, info = solve(to_xp(xp, A), to_xp(xp, np.ones(b_shape)), check=False)
        assert tuple(x.shape) == x_shape
        if X.size:
            np.testing.assert_allclose(to_np(X), 0.5)
    lu, ipiv, info = getrf(to_xp(xp, np.ones((2, 0, 3))))
    assert lu.shape == (2, 0, 3) and ipiv.shape == (2, 0) and to_np(info).tolist() == [0, 0]
    assert inv(to_xp(xp, np.ones((4, 0, 0)))).shape == (4, 0, 0)


def test_overwrite_flags(xp):
    rng = rng_for("overwrite")
    A = lu_matrix(rng, (3,), 6, 6, np.float64, "dominant")
    B = random_array(rng, (3, 6, 2), np.float64)
    Ad, Bd = arrange(xp, A, "F"), arrange(xp, B, "C")
    before = snapshot(Ad, Bd)
    lu, ipiv, X, info = gesv(Ad, Bd)
    assert_unchanged((Ad, Bd), before)   # the default never writes the inputs
    lu2, ipiv2, X2, info2 = gesv(Ad, Bd, overwrite_a=True, overwrite_b=True)
    assert lu2 is Ad and X2 is Bd
    np.testing.assert_array_equal(to_np(lu2), to_np(lu))
    np.testing.assert_array_equal(to_np(X2), to_np(X))
    Af = arrange(xp, A, "F")
    lu3, _, _ = getrf(Af, overwrite_a=True)
    assert lu3 is Af
    np.testing.assert_array_equal(to_np(lu3), to_np(lu))
    # a dtype that is not the result's is never written
    A32 = to_xp(xp, A.astype(np.float32))
    b32 = snapshot(A32)
    gesv(A32, to_xp(xp, B), overwrite_a=True)
    assert_unchanged((A32,), b32)


# --- lists: pointer arrays and variable sizes --------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(data=st.data())
@SETTINGS
def test_lists(xp, setting, data):
    """Equal shapes make a PointerBatch, mixed ones a VariableBatch; results are lists."""
    gpu_only_setting(xp, setting)
    top = 12 if xp is np else 150
    ns = data.draw(st.lists(st.integers(0, top), min_size=0, max_size=6), "ns")
    if data.draw(st.booleans(), "equal"):
        ns = [ns[0]] * len(ns) if ns else ns
    k = data.draw(st.sampled_from([0, 1, 3]), "k")   # 0: vectors
    dtype = data.draw(st.sampled_from(DTYPES), "dtype")
    orders = data.draw(st.lists(st.sampled_from("CF"), min_size=6, max_size=6), "orders")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))
    As = [lu_matrix(rng, (), n, n, dtype, "rand") for n in ns]
    Bs = [random_array(rng, (n,) if k == 0 else (n, k), dtype) for n in ns]
    Ad = [arrange(xp, a, orders[i]) for i, a in enumerate(As)]
    before = snapshot(*Ad)
    if ns and too_small(setting, max(ns), max(ns)):
        with pytest.raises(ValueError):
            gesv(Ad, to_xp(xp, Bs), setting=setting)
        return
    if ns and not_compiled(setting, dtype):
        with pytest.raises(ValueError, match="not compiled for"):
            gesv(Ad, to_xp(xp, Bs), setting=setting)
        return
    lus, pivs, Xs, info = gesv(Ad, to_xp(xp, Bs), setting=setting)
    assert isinstance(Xs, list) and isinstance(lus, list) and isinstance(pivs, list)
    assert len(Xs) == len(ns) and tuple(info.shape) == (len(ns),) and not np.any(to_np(info))
    for a, b, x, lu, p in zip(As, Bs, Xs, lus, pivs):
        x = to_np(x)
        assert x.shape == b.shape
        cols = (b.shape[0], 1 if k == 0 else k)
        assert solve_ratio(a, x.reshape(cols), b.reshape(cols)) <= THRESHOLD
        assert factor_ratio(a, to_np(lu), to_np(p)) <= THRESHOLD
    lus2, pivs2, info2 = getrf(Ad, setting=setting)
    for lu, lu2 in zip(lus, lus2):
        np.testing.assert_array_equal(to_np(lu), to_np(lu2))
    trans = data.draw(st.sampled_from("NTC"), "trans")
    Xs2, info2 = getrs(lus2, pivs2, to_xp(xp, Bs), trans=trans)
    assert len(Xs2) == len(ns) and not np.any(to_np(info2))
    for a, b, x in zip(As, Bs, Xs2):
        cols = (b.shape[0], 1 if k == 0 else k)
        assert solve_ratio(a, to_np(x).reshape(cols), b.reshape(cols), trans) <= THRESHOLD
    xs3 = solve(Ad, to_xp(xp, Bs))
    for a, b, x, x3 in zip(As, Bs, Xs, xs3):
        if setting is None:   # the same kernels as gesv's default: bit for bit
            np.testing.assert_array_equal(to_np(x3), to_np(x))
        cols = (b.shape[0], 1 if k == 0 else k)
        assert solve_ratio(a, to_np(x3).reshape(cols), b.reshape(cols)) <= THRESHOLD
    assert_unchanged(Ad, before)


def test_list_forms(xp):
    rng = rng_for("listforms")
    As = [lu_matrix(rng, (), 7, 7, np.float64, "rand") for _ in range(4)]
    Ad = to_xp(xp, As)
    B = random_array(rng, (4, 7), np.float64)
    x = solve(Ad, to_xp(xp, B))   # one (count, n) array in: one array out
    assert isinstance(x, xp.ndarray) and x.shape == (4, 7)
    for a, b, xi in zip(As, B, to_np(x)):
        assert solve_ratio(a, xi[:, None], b[:, None]) <= THRESHOLD
    lus, pivs = lu_factor(Ad)
    xs = lu_solve((lus, pivs), to_xp(xp, list(B)))
    for a, b, xi in zip(As, B, xs):
        assert solve_ratio(a, to_np(xi)[:, None], b[:, None]) <= THRESHOLD
    invs = inv(Ad + [to_xp(xp, As[0][:3, :3])])
    assert [tuple(v.shape) for v in invs] == [(7, 7)] * 4 + [(3, 3)]
    assert solve_ratio(As[0][:3, :3], to_np(invs[-1]), np.eye(3)) <= THRESHOLD
    assert solve([], []) == [] and getrf([])[0] == []
    As[2][:, 4] = 0
    with pytest.raises(np.linalg.LinAlgError, match=r"\[2\]"):
        solve(to_xp(xp, As), to_xp(xp, B))
    _, _, info = getrf([to_xp(xp, a) for a in As] + [to_xp(xp, np.zeros((2, 3)))])
    np.testing.assert_array_equal(to_np(info), [0, 0, 5, 0, 1])


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["solve", "gesv", "getrs", "inv"])
def test_non_square_is_value_error(xp, name):
    calls = {"solve": lambda A, b: solve(A, b), "gesv": lambda A, b: gesv(A, b), "inv": lambda A, b: inv(A),
             "getrs": lambda A, b: getrs(A, np.ones(A.shape[:-1], np.int32) if isinstance(A, list) else
                                         xp.ones(A.shape[:-1], np.int32), b)}
    call = calls[name]
    with pytest.raises(ValueError, match="square"):
        call(to_xp(xp, np.ones((3, 4, 5))), to_xp(xp, np.ones((3, 4))))
    if name != "getrs":
        with pytest.raises(ValueError, match="square"):
            call([to_xp(xp, np.ones((2, 3)))], [to_xp(xp, np.ones(2))])


@pytest.mark.parametrize("a_shape, b_shape, fragment", [
    ((3, 4, 4), (3, 5), "n = 4"), ((3, 4, 4), (2, 4, 1), "broadcast"), ((4, 4), (), "must have shape"),
    ((4,), (4,), "(..., m, n)"),
])
def test_bad_shapes_raise_naming_the_argument(xp, a_shape, b_shape, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        solve(to_xp(xp, np.ones(a_shape)), to_xp(xp, np.ones(b_shape)))


def test_bad_arguments(xp):
    A, b = to_xp(xp, np.eye(3)[None] * 2), to_xp(xp, np.ones((1, 3)))
    with pytest.raises(TypeError, match="A has dtype int32"):
        getrf(to_xp(xp, np.eye(3, dtype=np.int32)))
    with pytest.raises(TypeError, match="b has dtype float16"):
        solve(A, to_xp(xp, np.ones(3, np.float16)))
    with pytest.raises(TypeError, match="B has dtype bool"):
        gesv(A, to_xp(xp, np.ones(3, bool)))
    lu, ipiv, _ = getrf(A)
    with pytest.raises(ValueError, match="trans"):
        getrs(lu, ipiv, b, trans="X")
    with pytest.raises(ValueError, match="trans"):
        lu_solve((lu, ipiv - 1), b, trans=3)
    with pytest.raises(TypeError, match="integer"):
        getrs(lu, ipiv.astype(np.float64), b)
    with pytest.raises(ValueError, match="ipiv has shape"):
        getrs(lu, ipiv[..., :2], b)
    with pytest.raises(TypeError, match="lu_and_piv"):
        lu_solve(lu, b)
    with pytest.raises(TypeError, match="overwrite_a"):
        getrf(A, overwrite_a=1)
    with pytest.raises(TypeError, match="check"):
        solve(A, b, check=None)
    with pytest.raises(TypeError, match="LuSetting"):
        getrf(A, setting="fused")
    with pytest.raises(ValueError, match="compiled settings"):
        getrf(A, setting=LuSetting("fused", 12, 12))
    with pytest.raises(ValueError, match=r"B\[1\]"):
        gesv([np.eye(2), np.eye(3)], [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="2 members"):
        solve([np.eye(2)], [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="list of 1"):
        getrs([np.eye(2)], np.ones((1, 2), np.int32), [np.ones(2)])


@pytest.mark.gpu
def test_mixed_devices_raise(xp):
    if xp is np:
        pytest.skip("needs both backends")
    with pytest.raises(ValueError, match="on one device"):
        solve(xp.eye(3), np.ones(3))


@pytest.mark.gpu
def test_fused_setting_too_small_is_value_error(xp):
    if xp is np:
        pytest.skip("settings choose GPU kernels")
    with pytest.raises(ValueError, match="takes matrices up to 8 x 8"):
        gesv(xp.eye(9)[None], xp.ones((1, 9)), setting=FUSED_SETTINGS[1])


# --- the thread design (a thread per matrix, in registers) ------------------------------------


def _close(got, ref, dtype):
    """Equal up to rounding: both designs do the same operations, perhaps contracted differently."""
    got, ref = _wide(got), _wide(ref)
    eps = _eps(dtype)
    scale = max(1.0, float(np.nanmax(np.abs(ref)))) if ref.size else 1.0
    np.testing.assert_allclose(got, ref, rtol=1e3 * eps, atol=1e3 * eps * scale, equal_nan=True)


def _close_solutions(got, ref, A, dtype):
    """X of two designs (batch, n[, k]) for the matrices A: equal up to rounding amplified
    by each matrix's condition number (only nonsingular ones are compared)."""
    got, ref = _wide(got), _wide(ref)
    got, ref = got.reshape(len(A), -1), ref.reshape(len(A), -1)
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(_wide(A))
    for b in np.flatnonzero(np.isfinite(cond)):
        scale = max(float(np.abs(ref[b]).max(initial=0.0)), np.finfo(np.float64).tiny)
        err = float(np.abs(got[b] - ref[b]).max(initial=0.0))
        assert err <= 1e2 * _eps(dtype) * max(cond[b], 1.0) * scale, (b, err, cond[b], scale)


@pytest.mark.parametrize("setting", THREAD_SETTINGS + ROWS_SETTINGS + COLS_SETTINGS + WARPS_SETTINGS
                         + PANELS_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_register_designs_match_fused(xp, setting, dtype):
    """Thread, rows and warps designs: every m, n <= NB (NB <= 8; a spread of sizes above)
    in every memory layout (thread: packed C and F batches take the staged path, the
    others direct accesses; 300 matrices: a partial last block and, for rows, a partial
    last warp): the same info as design_peer, and against fused (the same operations) the
    same pivots and the same factors up to rounding (blocked, the peer of warps 128, rounds
    otherwise: near-ties may pivot apart in float32); X up to rounding, X = B for a
    singular matrix; one and three right-hand sides; overwrite flags."""
    fused = register_peer(xp, setting, dtype)
    rng = rng_for("thread", str(np.dtype(dtype)), str(setting))
    count = 300
    nb = setting.nb
    sizes = {1, 2, 3, 5, 8, 9, nb // 2 + 1, nb - 1, nb} | ({31, 32, 33} if setting.warps or setting.panels else set())
    for n in range(1, nb + 1) if nb <= 8 else sorted(sizes):
        for m in sorted({n, max(1, n - 2), min(setting.nb, n + 1)}):
            A = lu_matrix(rng, (count,), m, n, dtype, "rand")
            A[7, :, min(m, n) - 1] = 0      # info = min(m, n)
            A[count - 1, :, 0] = 0          # info = 1, in the partial last block
            for layout in MATRIX_LAYOUTS:
                Ad = arrange(xp, A, layout)
                before = snapshot(Ad)
                poison_pool(xp, A.nbytes)
                lu_t, piv_t, info_t = getrf(Ad, setting=setting)
                lu_f, piv_f, info_f = getrf(Ad, setting=fused)
                np.testing.assert_array_equal(to_np(info_t), to_np(info_f), err_msg=f"{m}x{n} {layout}")
                # the same operations: the same pivots (panels' blocked updates round otherwise:
                # near-ties may pivot apart)
                if fused.fused and not setting.panels:
                    np.testing.assert_array_equal(to_np(piv_t), to_np(piv_f), err_msg=f"{m}x{n} {layout}")
                    _close(to_np(lu_t), to_np(lu_f), dtype)
                assert factor_ratio(A, to_np(lu_t), to_np(piv_t)) <= THRESHOLD
                assert_unchanged((Ad,), before)
            if m != n:
                continue
            bad = np.zeros(count, bool)
            bad[[7, count - 1]] = True
            for b_layout, k in (("C", 0), ("strided", 0), ("C", 3)):
                B = random_array(rng, (count, n) if k == 0 else (count, n, k), dtype)
                Bd = arrange(xp, B, b_layout if k == 0 else "C", 1 if k == 0 else 2)
                for a_layout in ("C", "F", "sub_F"):
                    Ad = arrange(xp, A, a_layout)
                    poison_pool(xp, B.nbytes)
                    lu_t, piv_t, X_t, info_t = gesv(Ad, Bd, setting=setting)
                    _, _, X_f, _ = gesv(Ad, Bd, setting=fused)
                    x_t = to_np(X_t)
                    np.testing.assert_array_equal(to_np(info_t), np.where(bad, [n if i == 7 else 1 for i in
                                                                                range(count)], 0))
                    np.testing.assert_array_equal(x_t[bad], B[bad])   # LAPACK's xGESV leaves B
                    _close_solutions(x_t[~bad], to_np(X_f)[~bad], A[~bad], dtype)
                    xm = x_t[..., None] if k == 0 else x_t
                    bm = B[..., None] if k == 0 else B
                    assert solve_ratio(A[~bad], xm[~bad], bm[~bad]) <= THRESHOLD
                    # no factors stored (solve's flags, without LU and PIV): the same X, but where
                    # X alone takes threshold pivots (the rows design's direct kernel, the panels
                    # design): there near-ties may pivot apart, so X up to rounding, backward stable
                    x_s = to_np(lu_module._gesv_arrays(Ad, Bd, False, False, setting, want_factors=False)[2])
                    if setting.rows or setting.panels:
                        np.testing.assert_array_equal(x_s[bad], B[bad])
                        _close_solutions(x_s[~bad], x_t[~bad], A[~bad], dtype)
                        xm = x_s[..., None] if k == 0 else x_s
                        assert solve_ratio(A[~bad], xm[~bad], bm[~bad]) <= THRESHOLD
                    else:
                        np.testing.assert_array_equal(x_s, x_t)
            # overwrite_a / overwrite_b: the factors into A (packed F: staged) and X into B
            Af, Bc = arrange(xp, A, "F"), arrange(xp, random_array(rng, (count, n, 1), dtype), "C")
            lu_ref, piv_ref, X_ref, _ = gesv(Af, Bc, setting=setting)
            lu_w, _, X_w, _ = gesv(Af, Bc, overwrite_a=True, overwrite_b=True, setting=setting)
            assert lu_w is Af and X_w is Bc
            np.testing.assert_array_equal(to_np(lu_w), to_np(lu_ref))
            np.testing.assert_array_equal(to_np(X_w), to_np(X_ref))


@pytest.mark.parametrize("setting", THREAD_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def packed_off_aligned(xp, a):
    """``a`` (count, n, n) as a C-packed batch one element past an allocation's start:
    packed for the thread design's pipeline, but not at the 16-byte aligned address its
    direct kernel needs (except for 16-byte elements)."""
    flat = xp.full(a.size + 1, np.nan, a.dtype)
    out = flat[1:].reshape(a.shape)
    out[...] = to_xp(xp, a)
    return out


@pytest.mark.parametrize("setting", THREAD_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_thread_pipeline_many_turns(xp, setting, dtype):
    """Enough matrices (200,001) that every warp of the thread design's grid (capped at
    the resident blocks) takes many chunks of 32 in turn: its pipeline prefetches the next
    chunk, alternates the right-hand-side buffers and ends on a partial chunk.  C and F
    packed batches, GESV with one right-hand side (staged in and out) and GETRF: info and
    pivots equal to the fused design's, factors and X equal up to rounding; singular
    matrices in the first and the last chunk keep X = B.  NB x NB: off the aligned
    address (the pipeline's even slots) and F-packed (the direct kernel, 16-byte loads
    over a grid-stride loop)."""
    fused = register_peer(xp, setting, dtype)
    rng = rng_for("pipeline", str(np.dtype(dtype)), str(setting))
    count = 200_001
    bad = np.zeros(count, bool)
    bad[[3, count - 1]] = True
    for n, a_layout in ((setting.nb - 1, "C"), (setting.nb, "off"), (setting.nb, "F")):   # odd and even slots
        A = lu_matrix(rng, (count,), n, n, dtype, "dominant")
        A[bad, :, 0] = 0
        B = random_array(rng, (count, n), dtype)
        Ad = packed_off_aligned(xp, A) if a_layout == "off" else arrange(xp, A, a_layout)
        Bd = to_xp(xp, B)
        poison_pool(xp, B.nbytes)
        x, info = lu_module._gesv_arrays(Ad, Bd, False, False, setting, want_factors=False)[2:]
        x_f, info_f = lu_module._gesv_arrays(Ad, Bd, False, False, fused, want_factors=False)[2:]
        np.testing.assert_array_equal(to_np(info), np.where(bad, 1, 0))
        np.testing.assert_array_equal(to_np(info), to_np(info_f))
        x = to_np(x)
        np.testing.assert_array_equal(x[bad], B[bad])
        _close(x, to_np(x_f), dtype)
        assert solve_ratio(A[~bad], x[~bad][..., None], B[~bad][..., None]) <= THRESHOLD
        lu_t, piv_t, info_t = getrf(Ad, setting=setting)
        lu_f, piv_f, _ = getrf(Ad, setting=fused)
        np.testing.assert_array_equal(to_np(info_t), to_np(info_f))
        np.testing.assert_array_equal(to_np(piv_t), to_np(piv_f))
        _close(to_np(lu_t), to_np(lu_f), dtype)


def _same_solutions(x, ref, A, B, singular, dtype):
    """X of two thread kernels: B itself for the singular matrix, the others up to rounding."""
    keep = np.arange(len(A)) != singular
    np.testing.assert_array_equal(x[singular], B[singular])
    if keep.any():
        _close_solutions(x[keep], ref[keep], A[keep], dtype)


@pytest.mark.parametrize("n", [8, 16, 32, 100, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_threshold_pivots_of_x_alone_on_near_ties(xp, dtype, n):
    """solve() for X alone by the rows design's direct kernel (float64 16 and 32, float32
    32) and the panels design (100, 128: with its riding right-hand side and L's columns
    left out of order) takes threshold pivots (the other sizes and float32 16 are exact
    designs, checked alike): a candidate within 2^-14 of the column's
    largest magnitude may win by its earlier position.  Column 0 of every matrix holds
    its two largest entries at random rows p < q, |A_q0| = |A_p0| (1 + rel): rel = 2^-20
    (below the threshold's resolution: exact pivoting takes q, the threshold p) or 2^-10
    (both take q).  X is backward stable (xGET02 <= 30) and equals gesv's X (exact
    pivots) up to rounding; NaN in one matrix stays there."""
    if xp is np:
        pytest.skip("GPU kernels (the CPU backend has LAPACK's pivots)")
    rng = rng_for("threshold", str(np.dtype(dtype)), str(n))
    count = 97
    A = rng.standard_normal((count, n, n))
    rel = np.where(np.arange(count) % 4 == 3, 2.0 ** -10, 2.0 ** -20)
    for b in range(count):
        p, q = np.sort(rng.choice(n, 2, replace=False))
        v = 8.0 * rng.choice([-1.0, 1.0])
        A[b, p, 0], A[b, q, 0] = v, -v * (1 + rel[b])
    A = A.astype(dtype)
    A[5, 3, 2] = np.nan                     # one matrix's NaN stays in its X
    B = random_array(rng, (count, n), dtype)
    Ad, Bd = to_xp(xp, A), to_xp(xp, B)
    poison_pool(xp, A.nbytes)
    x = to_np(lu_module.solve(Ad, Bd, check=False)[0])
    x_ref = to_np(gesv(Ad, Bd)[2])
    ok = np.arange(count) != 5
    assert np.isnan(x[5]).all() and np.isfinite(x[ok]).all()
    assert solve_ratio(A[ok], x[ok][..., None], B[ok][..., None]) <= THRESHOLD
    _close_solutions(x[ok], x_ref[ok], A[ok], dtype)


def spy_launch_kinds(monkeypatch) -> list:
    """The kernel kind (None: the setting's general kernel, 'direct') of every factor
    launch from here on, in order, appended to the returned list."""
    kinds = []
    launch = lu_module._launch_factor

    def spy(layout, dt, setting, plan, args, kind=None):
        kinds.append(kind)
        return launch(layout, dt, setting, plan, args, kind)

    monkeypatch.setattr(lu_module, "_launch_factor", spy)
    return kinds


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_direct_kernel_takes_packed_aligned_batches(xp, dtype, monkeypatch):
    """A thread or cols setting, and a rows setting for real types, runs its direct
    kernel exactly for packed NB x NB batches at a 16-byte aligned address (C or F
    order, one matrix or many), for a thread setting when the factors are not stored or a
    matrix is at most 32 bytes, for a rows or cols setting X alone with at most one
    right-hand side; the setting's general kernel otherwise (off that address, a thread
    setting's block of larger matrices; for rows and cols three right-hand sides, or the
    factors wanted).  77 matrices: a rows setting's last warp has groups past the batch.  X alone (solve's flags) with
    one packed right-hand side, a strided one and three, and GESV with its factors: the
    same as the pipeline kernel (the same operations: the same info and pivots, factors
    and X up to rounding, X = B for the singular matrix)."""
    if xp is np:
        pytest.skip("GPU kernels (the CPU backend has one path)")
    kinds = spy_launch_kinds(monkeypatch)
    rng = rng_for("direct", str(np.dtype(dtype)))
    itemsize = np.dtype(dtype).itemsize
    real = np.dtype(dtype).kind != "c"
    for s in THREAD_SETTINGS + COLS_SETTINGS + ROWS_SETTINGS:
        if not_compiled(s, dtype) or (s.rows and not real):
            continue
        n = s.nb
        small = n * n * itemsize <= 32   # a thread setting's factors too go by direct stores
        for count in (1, 77):
            A = lu_matrix(rng, (count,), n, n, dtype, "rand")
            A[count // 2, :, n - 1] = 0    # singular: info = n, X = B
            B = random_array(rng, (count, n), dtype)
            B3 = random_array(rng, (count, n, 3), dtype)
            ref_lu, ref_piv, ref_x, ref_info = gesv(packed_off_aligned(xp, A), to_xp(xp, B), setting=s)
            ref_x3 = gesv(packed_off_aligned(xp, A), to_xp(xp, B3), setting=s)[2]
            for layout, aligned in (("C", True), ("F", True), ("off", itemsize == 16), ("sub_F", False)):
                Ad = packed_off_aligned(xp, A) if layout == "off" else arrange(xp, A, layout)
                for b_layout in ("C", "strided", "three"):
                    Bd = to_xp(xp, B3) if b_layout == "three" else arrange(xp, B, b_layout, 1)
                    Bn, xr = (B3, ref_x3) if b_layout == "three" else (B, ref_x)
                    kinds.clear()
                    poison_pool(xp, A.nbytes)
                    x, info = lu_module._gesv_arrays(Ad, Bd, False, False, s, want_factors=False)[2:]
                    direct = aligned and (s.thread or b_layout != "three")  # rows, cols: one right-hand side
                    assert kinds == ["direct" if direct else None], (s, count, layout, b_layout)
                    np.testing.assert_array_equal(to_np(info), to_np(ref_info))
                    _same_solutions(to_np(x), to_np(xr), A, Bn, count // 2, dtype)
                kinds.clear()
                poison_pool(xp, A.nbytes)
                lu, piv, x, info = gesv(Ad, to_xp(xp, B), setting=s)
                assert kinds == ["direct" if aligned and small and s.thread else None], (s, count, layout)
                np.testing.assert_array_equal(to_np(info), to_np(ref_info))
                np.testing.assert_array_equal(to_np(piv), to_np(ref_piv))
                _close(to_np(lu), to_np(ref_lu), dtype)
                _same_solutions(to_np(x), to_np(ref_x), A, B, count // 2, dtype)
        if s.nb > 2:   # below NB: the pipeline
            kinds.clear()
            Cs = arrange(xp, lu_matrix(rng, (5,), s.nb - 1, s.nb - 1, dtype, "rand"), "C")
            lu_module._gesv_arrays(Cs, to_xp(xp, random_array(rng, (5, s.nb - 1), dtype)), False, False, s,
                                   want_factors=False)
            assert kinds == [None]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_panels_direct_kernel_solves_x_alone(xp, dtype, monkeypatch):
    """The panels design's direct kernel (threshold pivots; L left out of order with one
    right-hand side) runs for X alone from any uniform batch (C, F, a sub-array, off the
    16-byte alignment) with one, strided or three right-hand sides, and only then: GESV
    with its factors and GETRF take the general kernel.  X is backward stable, equals the
    general kernel's X up to rounding, and is B for a singular matrix."""
    if xp is np:
        pytest.skip("GPU kernels (the CPU backend has one path)")
    s = PANELS_SETTINGS[0]
    if not_compiled(s, dtype):
        pytest.skip("the panels design is not compiled for 16-byte elements "
                    "(test_register_designs_lists checks the error)")
    kinds = spy_launch_kinds(monkeypatch)
    rng = rng_for("panels_direct", str(np.dtype(dtype)))
    count, n = 19, 100
    A = lu_matrix(rng, (count,), n, n, dtype, "rand")
    A[4, :, n - 1] = 0   # singular: info = n, X = B
    ok = np.arange(count) != 4
    B = random_array(rng, (count, n), dtype)
    B3 = random_array(rng, (count, n, 3), dtype)
    for layout in ("C", "F", "sub_F", "off"):
        Ad = packed_off_aligned(xp, A) if layout == "off" else arrange(xp, A, layout)
        for b_layout in ("C", "strided", "three"):
            Bd = to_xp(xp, B3) if b_layout == "three" else arrange(xp, B, b_layout, 1)
            Bn = B3 if b_layout == "three" else B
            kinds.clear()
            x_ref = to_np(gesv(Ad, Bd, setting=s)[2])
            assert kinds == [None], (layout, b_layout)
            kinds.clear()
            poison_pool(xp, A.nbytes)
            x, info = lu_module._gesv_arrays(Ad, Bd, False, False, s, want_factors=False)[2:]
            assert kinds == ["direct"], (layout, b_layout)
            x = to_np(x)
            np.testing.assert_array_equal(to_np(info), np.where(ok, 0, n))
            np.testing.assert_array_equal(x[~ok], Bn[~ok])
            _close_solutions(x[ok], x_ref[ok], A[ok], dtype)
            xm, bm = (x, Bn) if b_layout == "three" else (x[..., None], Bn[..., None])
            assert solve_ratio(A[ok], xm[ok], bm[ok]) <= THRESHOLD
    kinds.clear()
    getrf(arrange(xp, A, "C"), setting=s)
    assert kinds == [None]


@pytest.mark.parametrize("setting", THREAD_SETTINGS + ROWS_SETTINGS + COLS_SETTINGS + WARPS_SETTINGS
                         + PANELS_SETTINGS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_register_designs_lists(xp, setting, dtype):
    """Pointer (equal sizes) and variable-size lists up to NB, C and F members, more
    members than a block: the same pivots, info and X (up to rounding) as fused."""
    gpu_only_setting(xp, setting)
    if not_compiled(setting, dtype):
        with pytest.raises(ValueError, match="not compiled for"):
            gesv([xp.eye(2, dtype=dtype)], [xp.ones(2, dtype)], setting=setting)
        return
    fused = design_peer(setting)
    rng = rng_for("thread-lists", str(np.dtype(dtype)), str(setting))
    for ns in ([setting.nb] * 130, [int(v) for v in rng.integers(0, setting.nb + 1, 150)]):
        As = [lu_matrix(rng, (), n, n, dtype, "rand") for n in ns]
        Bs = [random_array(rng, (n,), dtype) for n in ns]
        Ad = [arrange(xp, a, "CF"[i % 2]) for i, a in enumerate(As)]
        lus, pivs, Xs, info = gesv(Ad, to_xp(xp, Bs), setting=setting)
        lus_f, pivs_f, Xs_f, info_f = gesv(Ad, to_xp(xp, Bs), setting=fused)
        np.testing.assert_array_equal(to_np(info), to_np(info_f))
        for a, b, lu, p, x, lu_f, p_f, x_f in zip(As, Bs, lus, pivs, Xs, lus_f, pivs_f, Xs_f):
            if fused.fused and not setting.panels:
                np.testing.assert_array_equal(to_np(p), to_np(p_f))
                _close(to_np(lu), to_np(lu_f), dtype)
            assert factor_ratio(a, to_np(lu), to_np(p)) <= THRESHOLD
            if a.size:
                _close_solutions(to_np(x)[None], to_np(x_f)[None], a[None], dtype)
            assert solve_ratio(a, to_np(x)[:, None], b[:, None]) <= THRESHOLD
    with pytest.raises(ValueError, match=f"takes matrices up to {setting.nb} x {setting.nb}"):
        gesv([xp.eye(setting.nb + 1, dtype=dtype)], [xp.ones(setting.nb + 1, dtype)], setting=setting)


# --- planner (pure, on the CPU) ---------------------------------------------------------------


def test_chooser_picks_registered_settings():
    from batched.device_functions import registered

    names = {p.name: s for p, s in registered().items()}[SOURCE.name]
    for n in (0, 1, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 200, 500, 1000):
        for itemsize in (4, 8, 16):
            s = choose_lu_setting(n, n, itemsize)
            assert s in LU_SETTINGS
            # measured: one thread per matrix up to 8 (4 for complex128), fused up to 64
            assert s.thread == (n <= (4 if itemsize == 16 else 8)), (n, itemsize, s)
            # by default never the cols design
            assert not s.cols, (n, itemsize, s)
            # a packed float32 16 x 16 batch's X alone: two lanes a matrix, by columns (its direct kernel)
            p = choose_lu_setting(n, n, itemsize, direct_solve=True)
            assert p.cols == (itemsize == 4 and n == 16) and (p.cols or p == s), (n, itemsize, p)
            assert not choose_lu_setting(n, n, itemsize, direct_solve=True, is_complex=True).cols
            assert s.rows == (not s.thread and not s.cols and n <= 32 and itemsize <= 8), (n, itemsize, s)
            # a block per matrix from 65 to 128 (not complex128): the panels design, complex64
            # included; float64 from 45 to 64 the warps design
            assert s.panels == (64 < n <= 128 and itemsize <= 8), (n, itemsize, s)
            assert s.warps == (45 <= n <= 64 and itemsize == 8), (n, itemsize, s)
            c = choose_lu_setting(n, n, itemsize, is_complex=True)
            assert c.panels == (64 < n <= 128 and itemsize <= 8) and not c.warps, (n, itemsize, c)
            assert s.fused == (not s.thread and not s.rows and not s.cols and not s.warps and n <= 64), (n, s)
            if not s.blocked:
                assert n <= s.nb <= max(4, 2 * n)
            for layout in ("uniform", "pointer", "variable"):
                assert kernel_name(s.design, layout, DTYPES[0], s) in names
    for layout in ("uniform", "pointer", "variable"):
        for dt in DTYPES:
            assert kernel_name("laswp", layout, dt) in names
    compiled = sum(s.compiled_for(np.dtype(dt).itemsize) for s in LU_SETTINGS for dt in DTYPES)
    direct = sum(s.compiled_for(np.dtype(dt).itemsize) for s in THREAD_SETTINGS + COLS_SETTINGS + PANELS_SETTINGS
                 for dt in DTYPES)
    direct += sum(s.compiled_for(np.dtype(dt).itemsize) for s in ROWS_SETTINGS for dt in DTYPES
                  if np.dtype(dt).kind != "c")   # rows: real types
    assert len(names) == 3 * (compiled + 4) + direct   # three layouts; laswp for each dtype; direct: uniform
    for s in ROWS_SETTINGS:
        for dt in DTYPES:
            name = kernel_name("direct", "uniform", dt, s)
            assert name.startswith("getrf_rows_direct_kernel<")
            assert (name in names) == (s.compiled_for(np.dtype(dt).itemsize) and np.dtype(dt).kind != "c"), name
    assert choose_lu_setting(16, 12, 4, direct_solve=True).rows and choose_lu_setting(15, 15, 4, direct_solve=True).rows
    assert choose_lu_setting(16, 16, 8) == ROWS_SETTINGS[1] and choose_lu_setting(12, 12, 16).fused
    assert choose_lu_setting(32, 32, 8) == ROWS_SETTINGS[2] and choose_lu_setting(32, 32, 16).fused
    assert choose_lu_setting(2, 2, 8) == THREAD_SETTINGS[0] and choose_lu_setting(8, 8, 4) == THREAD_SETTINGS[-1]
    assert choose_lu_setting(64, 64, 8) == LuSetting("warps", 64, 128) == choose_lu_setting(45, 30, 8)
    assert choose_lu_setting(64, 64, 8, is_complex=True).fused and choose_lu_setting(44, 44, 8).fused
    assert choose_lu_setting(64, 64, 4).fused and choose_lu_setting(33, 20, 4).fused
    for itemsize, is_complex in ((8, False), (8, True), (4, False)):   # NB = 96 up to 96, then 128
        assert choose_lu_setting(65, 65, itemsize, is_complex=is_complex) == PANELS_SETTINGS[2]
        assert choose_lu_setting(96, 90, itemsize, is_complex=is_complex) == PANELS_SETTINGS[2]
        assert choose_lu_setting(97, 97, itemsize, is_complex=is_complex) == PANELS_SETTINGS[0]
    assert choose_lu_setting(70, 128, 8) == PANELS_SETTINGS[0]
    assert choose_lu_setting(128, 128, 4) == PANELS_SETTINGS[0] and choose_lu_setting(65, 65, 16).blocked
    assert choose_lu_setting(128, 128, 8, is_complex=True) == PANELS_SETTINGS[0]
    assert choose_lu_setting(200, 30, 8) == choose_lu_setting(200, 200, 8)   # the larger dimension decides
    with pytest.raises(ValueError, match="no LU setting fits"):
        choose_lu_setting(100_000, 100_000, 16)


@pytest.mark.parametrize("setting", LU_SETTINGS, ids=str)
def test_plan_fits_shared_memory(setting):
    limit = 227 * 1024
    for n in (1, 4, 8, 33, 64, 65, 200, 600):
        for itemsize in (4, 8, 16):
            if not setting.blocked and n > setting.nb:
                assert not setting.fits(n, n, itemsize, limit)
                with pytest.raises(ValueError, match="takes matrices up to"):
                    plan_lu(setting, n, n, itemsize, 1000, limit)
                continue
            if not setting.compiled_for(itemsize):
                assert (setting.thread or setting.rows or setting.cols or setting.warps or setting.panels) and \
                    not setting.fits(n, n, itemsize, limit)
                with pytest.raises(ValueError, match="not compiled for"):
                    plan_lu(setting, n, n, itemsize, 1000, limit)
                continue
            if not setting.fits(n, n, itemsize, limit):
                with pytest.raises(ValueError, match="shared memory"):
                    plan_lu(setting, n, n, itemsize, 1000, limit)
                continue
            plan = plan_lu(setting, n, n, itemsize, 70_000, limit)
            assert plan.smem <= limit and plan.block <= 1024 and plan.block % setting.threads == 0
            assert 1 <= plan.grid <= 2**31 - 1
            if setting.thread:   # a thread per matrix, the block's matrices staged in shared memory
                assert plan.block == setting.threads == plan.groups and plan.lds == 0
                assert plan.grid == -(-70_000 // setting.threads)
                assert plan.smem == setting.thread_stage_bytes(n, n, 0, itemsize, write_lu=True)
            elif setting.rows or setting.cols:   # 32 / L matrices per warp, static shared memory or none
                block = 64 if setting.cols else 128
                assert plan.block == block and plan.groups == block // setting.threads and plan.smem == 0
                assert plan.grid == -(-70_000 // plan.groups)
            elif setting.warps or setting.panels:  # a block per matrix
                assert plan.block == setting.threads and plan.groups == 1 and plan.grid == 70_000
                assert plan.smem == setting.warps_bytes(itemsize) and plan.lds == 0
            elif setting.fused:
                assert plan.smem == plan.groups * setting.group_bytes(itemsize)
                assert plan.groups * plan.grid >= 70_000 and plan.smem <= max(48 * 1024, setting.group_bytes(itemsize))
            else:
                assert plan.lds >= n and plan.lds % 2 == 1 and plan.grid == 70_000
                assert plan.smem == setting.blocked_bytes(plan.lds, itemsize)


def test_thread_settings_plan_and_registration():
    """One thread per matrix: registered for exactly the dtypes whose NB x NB matrix fits
    the register budget; the plan is a thread per matrix, 64-bit counts, optional staging."""
    from batched.device_functions import registered

    names = {p.name: s for p, s in registered().items()}[SOURCE.name]
    for s in THREAD_SETTINGS:
        assert s.thread and s.solves_in_launch and not s.fused and not s.blocked
        assert str(s) == f"lu_thread{s.nb}x{s.threads}" and s.template_args() == f"{s.nb}, {s.threads}"
        for dt in DTYPES:
            itemsize = np.dtype(dt).itemsize
            assert s.compiled_for(itemsize) == (s.nb * s.nb * itemsize <= 512)
            for layout in ("uniform", "pointer", "variable"):
                name = kernel_name("thread", layout, dt, s)
                assert name.startswith("getrf_thread_kernel<")
                assert (name in names) == s.compiled_for(itemsize), name
                direct = kernel_name("direct", layout, dt, s)   # packed batches: the uniform layout
                assert direct.startswith("getrf_direct_kernel<")
                assert (direct in names) == (s.compiled_for(itemsize) and layout == "uniform"), direct
    assert [s.compiled_for(16) for s in THREAD_SETTINGS] == [True, True, False]   # no 8 x 8 complex128 in registers
    s = THREAD_SETTINGS[-1]
    limit = 227 * 1024
    with pytest.raises(ValueError, match="takes matrices up to 8 x 8"):
        plan_lu(s, 9, 3, 8, 10, limit)
    with pytest.raises(ValueError, match="not compiled for 16-byte elements"):
        plan_lu(s, 8, 8, 16, 10, limit)
    plan = plan_lu(s, 8, 8, 8, 2**31 + 5, limit)   # more matrices than 2^31: the grid covers them once
    assert plan.block == 128 and plan.grid == -(-(2**31 + 5) // 128) and plan.smem == 128 * 65 * 8   # late
    assert plan_lu(s, 8, 8, 8, 2**40, limit).grid == 2**31 - 1   # capped: the grid-stride loop does the rest
    assert plan_lu(s, 8, 8, 8, 1000, 48 * 1024).smem == 0        # no room to stage: direct accesses
    assert plan_lu(s, 0, 0, 4, 0, limit).grid == 1
    # the pipeline per warp (bdf::warp_pipeline, one chunk ahead): buffers of 32 odd
    # slots; one matrix buffer, two when the factors leave through it; two right-hand-side
    # buffers (the solutions leave through the current one); several right-hand sides are
    # not staged.  When two blocks of the double-buffered pipeline would not fit, the late
    # one (a single matrix buffer) is given.
    assert s.thread_stage_bytes(8, 8, 1, 8) == plan_lu(s, 8, 8, 8, 10, limit, nrhs=1, write_lu=False).smem \
        == 4 * (1 * 32 * 65 + 2 * 32 * 9) * 8
    assert plan_lu(s, 8, 8, 8, 10, limit, nrhs=1).smem == 4 * (1 * 32 * 65 + 2 * 32 * 9) * 8   # late
    assert plan_lu(s, 4, 4, 8, 10, limit, nrhs=1).smem == 4 * (2 * 32 * 17 + 2 * 32 * 5) * 8   # double
    assert s.thread_stage_bytes(2, 2, 1, 8, write_lu=True) == 4 * (2 * 32 * 5 + 2 * 32 * 3) * 8
    assert s.thread_stage_bytes(4, 4, 1, 4) == 4 * (1 * 32 * 17 + 2 * 32 * 5) * 4
    assert s.thread_stage_bytes(8, 8, 1, 8, smem_limit=60 * 1024) == 0                      # neither fits
    assert s.thread_stage_bytes(8, 5, 0, 8) == s.thread_stage_bytes(8, 5, 2, 8) == 4 * 32 * 41 * 8
    assert s.fits(8, 5, 8, limit) and not s.fits(9, 1, 4, limit) and not s.fits(2, 2, 16, limit)


def test_rows_settings_plan_and_registration():
    """A group of L lanes per matrix, R = NB / L rows each: registered for every dtype
    whose R rows of NB fit the register budget (16 x 16 and 8 x 8: all; 32 x 32 and two
    rows of 16: not complex128; four rows of 16, two of 32: float32 only); 32 / L
    matrices per warp."""
    from batched.device_functions import registered

    names = {p.name: s for p, s in registered().items()}[SOURCE.name]
    for s in ROWS_SETTINGS:
        assert s.rows and s.solves_in_launch and not (s.fused or s.blocked or s.thread)
        assert str(s) == f"lu_rows{s.nb}x{s.threads}" and s.threads <= 32 and s.nb % s.threads == 0
        assert s.rows_per_lane == s.nb // s.threads >= 1
        for dt in DTYPES:
            itemsize = np.dtype(dt).itemsize
            assert s.compiled_for(itemsize) == (s.rows_per_lane * s.nb * itemsize <= 256)
            for layout in ("uniform", "pointer", "variable"):
                name = kernel_name("rows", layout, dt, s)
                assert name.startswith("getrf_rows_kernel<")
                assert (name in names) == s.compiled_for(itemsize), name
    # the itemsizes each is compiled for (float32, float64, complex64, complex128: 4, 8, 8, 16)
    want = {"lu_rows8x8": [4, 8, 8, 16], "lu_rows16x16": [4, 8, 8, 16], "lu_rows32x32": [4, 8, 8],
            "lu_rows16x8": [4, 8, 8], "lu_rows16x4": [4], "lu_rows32x16": [4]}
    assert sorted(want) == sorted(str(s) for s in ROWS_SETTINGS)
    for s in ROWS_SETTINGS:
        assert sorted(dt.itemsize for dt in DTYPES if s.compiled_for(dt.itemsize)) == want[str(s)], s
    limit = 227 * 1024
    with pytest.raises(ValueError, match="not compiled for 16-byte elements"):
        plan_lu(LuSetting("rows", 32, 32), 20, 20, 16, 10, limit)
    plan = plan_lu(ROWS_SETTINGS[1], 16, 16, 8, 2**36, limit)
    assert plan.block == 128 and plan.groups == 8 and plan.grid == 2**31 - 1


def test_cols_settings_plan_and_registration():
    """Two lanes a matrix, by columns: registered for float32 only (a lane's 16 x 8
    elements fit 512 bytes), every layout; 32 matrices a block of 64 threads; the direct
    kernel for the uniform layout."""
    from batched.device_functions import registered

    names = {p.name: s for p, s in registered().items()}[SOURCE.name]
    (s,) = COLS_SETTINGS
    assert s.cols and s.solves_in_launch and not (s.fused or s.blocked or s.thread or s.rows or s.warps)
    assert str(s) == "lu_cols16x2" and s.template_args() == "16, 2"
    for dt in DTYPES:
        itemsize = np.dtype(dt).itemsize
        assert s.compiled_for(itemsize) == (itemsize == 4)
        for layout in ("uniform", "pointer", "variable"):
            name = kernel_name("cols", layout, dt, s)
            assert name.startswith("getrf_cols_kernel<")
            assert (name in names) == (itemsize == 4), name
        direct = kernel_name("direct", "uniform", dt, s)
        assert direct.startswith("getrf_cols_direct_kernel<") and (direct in names) == (itemsize == 4), direct
    limit = 227 * 1024
    with pytest.raises(ValueError, match="not compiled for 8-byte elements"):
        plan_lu(s, 16, 16, 8, 10, limit)
    with pytest.raises(ValueError, match="takes matrices up to 16 x 16"):
        plan_lu(s, 17, 3, 4, 10, limit)
    plan = plan_lu(s, 16, 16, 4, 2**40, limit)
    assert plan.block == 64 and plan.groups == 32 and plan.smem == 0 and plan.grid == 2**31 - 1
    assert plan_lu(s, 9, 16, 4, 65, limit).grid == 3


def test_warps_settings_plan_and_registration():
    """A block per matrix, lane i of each of W warps holding rows i, i + 32, .. and warp w
    the columns w, w + W, ..: registered for every dtype whose R x C piece fits the
    register budget of 256 bytes; shared memory as WarpsSmem in lu.cu."""
    from batched.device_functions import registered

    names = {p.name: s for p, s in registered().items()}[SOURCE.name]
    want = {"lu_warps64x128": [4, 8, 8], "lu_warps64x256": [4, 8, 8, 16], "lu_warps128x256": [4],
            "lu_warps128x512": [4, 8, 8]}
    assert sorted(want) == sorted(str(s) for s in WARPS_SETTINGS)
    for s in WARPS_SETTINGS:
        assert s.warps and s.solves_in_launch and not (s.fused or s.blocked or s.thread or s.rows)
        r, c = s.warps_piece
        assert r * 32 == s.nb and c * (s.threads // 32) == s.nb
        assert sorted(dt.itemsize for dt in DTYPES if s.compiled_for(dt.itemsize)) == want[str(s)], s
        for dt in DTYPES:
            for layout in ("uniform", "pointer", "variable"):
                name = kernel_name("warps", layout, dt, s)
                assert name.startswith("getrf_warps_kernel<")
                assert (name in names) == s.compiled_for(np.dtype(dt).itemsize), name
    s = LuSetting("warps", 128, 512)
    # the matrix (129 x 128), sl / sb / sx (4 x 128), getrs_tile's work (512 x 4), ints
    assert s.warps_piece == (4, 8)
    assert s.warps_bytes(8) == 129 * 128 * 8 + 4 * 128 * 8 + 512 * 4 * 8 + 16 + 2 * 128 * 4
    assert s.warps_bytes(8) <= 227 * 1024 and not s.fits(128, 128, 8, 100 * 1024)
    limit = 227 * 1024
    with pytest.raises(ValueError, match="not compiled for 16-byte elements"):
        plan_lu(s, 100, 100, 16, 10, limit)
    with pytest.raises(ValueError, match="shared memory"):
        plan_lu(s, 100, 100, 8, 10, 100 * 1024)
    with pytest.raises(ValueError, match="takes matrices up to 128 x 128"):
        plan_lu(s, 129, 100, 8, 10, limit)
    plan = plan_lu(s, 100, 128, 8, 2**36, limit)
    assert plan.block == 512 and plan.groups == 1 and plan.grid == 2**31 - 1


@pytest.mark.gpu
@pytest.mark.parametrize("pair", [(np.float32, np.float64), (np.complex64, np.complex128)], ids=str)
def test_mixed_precision_keeps_single_precision_subnormals(xp, pair):
    """A float32 / complex64 A with subnormal entries and a float64 / complex128 B:
    the promoted solve is the solve of the exactly widened A, bit for bit (uniform and
    list batches; hypothesis found CuPy's -ftz cast turning them into zeros: GESV of
    a float32 matrix scaled near underflow, n 164, factor ratio 1e4)."""
    dt_a, dt_b = pair
    rng = rng_for("mixed-subnormal", str(np.dtype(dt_a)))
    for n, setting in ((40, None), (164, LuSetting(design="blocked", nb=32, threads=256)), (5, None)):
        A = lu_matrix(rng, (2,), n, n, dt_a, "scaled_ufl")
        tiny = np.finfo(dt_a).tiny
        A[..., 0, 1:4] = np.array([tiny / 3, -tiny / 1000, tiny / 2**22], np.float32)  # subnormal parts
        B = random_array(rng, (2, n), dt_b)
        wide = A.astype(dt_b)   # NumPy's cast: exact
        got = gesv(to_xp(xp, A), to_xp(xp, B), setting=setting)
        want = gesv(to_xp(xp, wide), to_xp(xp, B), setting=setting)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(to_np(g), to_np(w))
        Xl = lu_module.solve([to_xp(xp, a) for a in A], [to_xp(xp, b) for b in B])
        Xw = lu_module.solve([to_xp(xp, a) for a in wide], [to_xp(xp, b) for b in B])
        for g, w in zip(Xl, Xw):
            np.testing.assert_array_equal(to_np(g), to_np(w))
