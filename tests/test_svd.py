"""Batched svd / svdvals (GEBRD -> ORGBR -> BDSQR) the LAPACK way, on both backends.

Values against ``scipy.linalg.svdvals`` in float64/complex128:
|s_i - s_ref_i| <= 30 max(m, n) eps s_1; vectors: ||A - U S V^H|| / (max(m, n)
||A|| eps), ||I - U^H U|| / (m eps), ||I - V^H V|| / (n eps) <= 30 (LAPACK's
xBDT01 / xORT01).  Matrix kinds of LAPACK's xDRVBD tests: random, graded and
clustered singular values, rank-deficient, zero, identity, scaled near
overflow and underflow.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from batched.factorizations.bdsqr import bdsqr
from batched.factorizations.svd import svd, svdvals
from batched.factorizations.svd_settings import BdsqrSetting
from conftest import assert_unchanged, snapshot, to_np, to_xp
from strategies import DTYPES, MATRIX_LAYOUTS, SETTINGS, arrange, random_array

THRESHOLD = 30
KINDS = ("svd_rand", "svd_geo", "svd_cluster", "svd_rank", "zero", "identity", "rand_scaled_ofl",
         "rand_scaled_ufl")


def eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def real_of(dtype):
    return np.dtype(np.float32) if np.dtype(dtype) in (np.float32, np.complex64) else np.dtype(np.float64)


def unitary(rng, batch, n, dtype):
    Z = random_array(rng, (*batch, n, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    Q, R = np.linalg.qr(Z)
    return Q


def matrices(rng, batch, m, n, dtype, kind):
    """(A in dtype, the power of two it was scaled by).  Singular value spectra as
    LAPACK's xLATMS modes: geometric 1 .. 1/cond (svd_geo), one large and the rest
    clustered at 1/cond (svd_cluster), half zero (svd_rank)."""
    dtype = np.dtype(dtype)
    k = min(m, n)
    scale = 1.0
    if kind == "zero":
        return np.zeros((*batch, m, n), dtype), scale
    if kind == "identity":
        return np.broadcast_to(np.eye(m, n, dtype=dtype), (*batch, m, n)).copy(), scale
    if kind in ("svd_rand", "rand_scaled_ofl", "rand_scaled_ufl"):
        A = random_array(rng, (*batch, m, n), np.complex128 if dtype.kind == "c" else np.float64)
        if kind != "svd_rand":
            fi = np.finfo(real_of(dtype))
            target = float(fi.max) / 2**12 / max(m, n, 1) if kind == "rand_scaled_ofl" else float(fi.tiny) * 2**12
            scale = 2.0 ** np.floor(np.log2(target))
            A = A.astype(dtype)
            return (A.astype(np.complex128 if dtype.kind == "c" else np.float64) * scale).astype(dtype), scale
        return A.astype(dtype), scale
    cond = 1 / (np.sqrt(eps(dtype)) * 10)
    if kind == "svd_geo":
        sig = cond ** (-np.linspace(0, 1, k)) if k > 1 else np.ones(k)
    elif kind == "svd_cluster":
        sig = np.full(k, 1 / cond)
        sig[:1] = 1
    else:  # svd_rank
        sig = np.where(np.arange(k) < (k + 1) // 2, 1 + rng.random(k), 0.0)
    U = unitary(rng, batch, m, dtype)[..., :, :k]
    V = unitary(rng, batch, n, dtype)[..., :k, :]
    return (U @ (sig[:, None] * V)).astype(dtype), scale


def reference_values(A):
    """scipy.linalg.svdvals in float64/complex128 (each matrix brought to O(1) by a power of two)."""
    A = np.asarray(A)
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    count = int(np.prod(batch, dtype=int))
    W = A.astype(np.complex128 if A.dtype.kind == "c" else np.float64).reshape(count, m, n)
    out = np.zeros((count, k))
    for i, a in enumerate(W):
        big = np.abs(a).max() if a.size else 0
        f = 2.0 ** -np.round(np.log2(big)) if big > 0 else 1.0
        out[i] = scipy.linalg.svdvals(a * f) / f if k else out[i]
    return out.reshape(*batch, k)


def check_values_on_kinds(xp, rng, setting, shapes, dtype):
    """svdvals with ``setting`` forced on three matrices of every LAPACK kind and each
    (m, n) of ``shapes``: dtype and shape of S, info 0, value_ratio <= THRESHOLD, A
    unchanged."""
    for m, n in shapes:
        for kind in KINDS:
            A, _ = matrices(rng, (3,), m, n, dtype, kind)
            Ax = to_xp(xp, A)
            before = snapshot(Ax)
            S, info = svdvals(Ax, setting=setting, check=False)
            assert S.dtype == np.dtype(dtype) and S.shape == (3, min(m, n))
            assert not to_np(info).any(), (m, n, kind, to_np(info))
            r = value_ratio(S, A)
            assert r <= THRESHOLD, (m, n, kind, r)
            assert_unchanged((Ax,), before)


def check_nan_stays_in_its_matrix(xp, dtype, setting):
    """svdvals with ``setting`` forced on four 9 x 7 matrices, NaN in the second and
    -Inf in the third: info 7 and NaN values there, the others' values right.
    Returns the matrices (NumPy)."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((4, 9, 7)).astype(dtype)
    A[1, 2, 3] = np.nan
    A[2, 0, 0] = -np.inf
    S, info = svdvals(to_xp(xp, A), setting=setting, check=False)
    S, info = to_np(S), to_np(info)
    assert info.tolist() == [0, 7, 7, 0]
    assert np.isnan(S[1:3]).all()
    assert value_ratio(S[[0, 3]], A[[0, 3]]) <= THRESHOLD
    return A


def draw_small_real(xp, data, settings, cols, rows):
    """A drawn case for the small real designs (one-sided Jacobi, dqds): a setting of
    ``settings``, k <= cols(setting) and max(m, n) <= rows(setting) in either
    orientation, a real dtype, a layout, a batch shape and one of LAPACK's kinds.
    Returns (setting, A as NumPy, A arranged for xp)."""
    setting = data.draw(st.sampled_from(settings), label="setting")
    k = data.draw(st.integers(1, cols(setting)), label="k")
    length = data.draw(st.integers(k, rows(setting)), label="length")
    wide = data.draw(st.booleans(), label="wide")
    m, n = (k, length) if wide else (length, k)
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    layout = data.draw(st.sampled_from(MATRIX_LAYOUTS), label="layout")
    batch = data.draw(st.sampled_from([(), (0,), (1,), (3,), (2, 2)]), label="batch")
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    A, _ = matrices(rng, batch, m, n, dtype, kind)
    return setting, A, arrange(xp, A, layout)


def value_ratio(S, A):
    S = to_np(S)
    ref = reference_values(A)
    if S.size == 0:
        return 0.0
    m, n = A.shape[-2:]
    assert np.all(np.diff(S, axis=-1) <= 0) and np.all(S >= 0), "descending, non-negative"
    tiny = np.finfo(S.dtype).tiny
    err = np.abs(S.astype(np.float64) - ref) / (max(m, n) * eps(S.dtype) * np.maximum(ref[..., :1], tiny))
    return float(err.max())


def vector_ratios(A, U, S, Vh):
    """LAPACK's normalized residual and orthogonality ratios, 1-norms, each matrix
    scaled by a power of two first (exact) so near-overflow data stays finite."""
    A, U, S, Vh = (np.asarray(to_np(x)) for x in (A, U, S, Vh))
    m, n = A.shape[-2:]
    k = min(m, n)
    ep = eps(S.dtype)
    wide = np.complex128
    Aw = A.astype(wide)
    big = np.abs(Aw).max(axis=(-2, -1), keepdims=True) if A.size else np.ones(A.shape[:-2] + (1, 1))
    f = np.where(big > 0, 2.0 ** -np.round(np.log2(np.where(big > 0, big, 1))), 1.0)
    Uw, Vw = U.astype(wide), Vh.astype(wide)
    R = Aw * f - Uw[..., :, :k] @ ((S.astype(np.float64) * f[..., 0])[..., None] * Vw[..., :k, :])
    norm = lambda X: np.abs(X).sum(axis=-2).max(axis=-1) if X.shape[-1] and X.shape[-2] else np.zeros(X.shape[:-2])  # noqa: E731
    na = norm(Aw * f)
    res = np.where(na > 0, norm(R) / (max(m, n, 1) * np.where(na > 0, na, 1) * ep), norm(R) / ep)
    ou = norm(np.eye(U.shape[-1]) - Uw.conj().swapaxes(-1, -2) @ Uw) / (max(m, 1) * ep)
    ov = norm(np.eye(Vh.shape[-2]) - Vw @ Vw.conj().swapaxes(-1, -2)) / (max(n, 1) * ep)
    return tuple(float(x.max()) if np.size(x) else 0.0 for x in (res, ou, ov))


# --- kinds ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_svdvals_kinds(xp, dtype, kind):
    rng = np.random.default_rng(abs(hash((kind, str(dtype)))) % 2**32)
    shapes = ((1, 1), (5, 5), (9, 4), (4, 9), (16, 16)) + (((64, 64), (100, 37), (37, 100)) if xp is not np else ())
    for m, n in shapes:
        A, _ = matrices(rng, (3,), m, n, dtype, kind)
        Ax = to_xp(xp, A)
        before = snapshot(Ax)
        S = svdvals(Ax)
        assert S.dtype == real_of(dtype) and S.shape == (3, min(m, n))
        r = value_ratio(S, A)
        assert r <= THRESHOLD, (m, n, r)
        assert_unchanged((Ax,), before)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("full", [False, True])
def test_svd_kinds(xp, dtype, kind, full):
    rng = np.random.default_rng(abs(hash((kind, str(dtype), full))) % 2**32)
    shapes = ((1, 1), (6, 6), (9, 4), (4, 9)) + (((48, 48), (90, 33), (33, 90)) if xp is not np else ())
    for m, n in shapes:
        A, _ = matrices(rng, (2,), m, n, dtype, kind)
        Ax = to_xp(xp, A)
        U, S, Vh = svd(Ax, full_matrices=full)
        k = min(m, n)
        assert U.shape == (2, m, m if full else k) and Vh.shape == (2, n if full else k, n)
        assert U.dtype == np.dtype(dtype) and Vh.dtype == np.dtype(dtype) and S.dtype == real_of(dtype)
        assert value_ratio(S, A) <= THRESHOLD
        res, ou, ov = vector_ratios(A, U, S, Vh)
        assert max(res, ou, ov) <= THRESHOLD, (m, n, res, ou, ov)


# --- hypothesis ---------------------------------------------------------------------------------


@given(data=st.data())
@SETTINGS
def test_svd_property(xp, data):
    top = 12 if xp is np else 300
    m = data.draw(st.one_of(st.sampled_from((0, 1, 2, 3, 8)), st.integers(0, top)), label="m")
    n = data.draw(st.one_of(st.sampled_from((0, 1, 2, 3, 8)), st.integers(0, top)), label="n")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    layout = data.draw(st.sampled_from(MATRIX_LAYOUTS), label="layout")
    batch = data.draw(st.sampled_from([(), (0,), (1,), (3,), (2, 2)]), label="batch")
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    uv = data.draw(st.booleans(), label="compute_uv")
    full = data.draw(st.booleans(), label="full_matrices")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    A, _ = matrices(rng, batch, m, n, dtype, kind)
    Ax = arrange(xp, A, layout)
    before = snapshot(Ax)
    k = min(m, n)
    if uv:
        U, S, Vh, info = svd(Ax, full_matrices=full, check=False)
        assert U.shape == (*batch, m, m if full else k) and Vh.shape == (*batch, n if full else k, n)
        assert max(vector_ratios(A, U, S, Vh)) <= THRESHOLD
    else:
        S, info = svd(Ax, compute_uv=False, check=False)
    assert S.shape == (*batch, k) and info.shape == batch and not to_np(info).any()
    assert value_ratio(S, A) <= THRESHOLD
    assert_unchanged((Ax,), before)


# --- lists, empties, NaN, failures, errors ---------------------------------------------------------


@pytest.mark.parametrize("uv", [False, True])
def test_lists_of_matrices(xp, uv):
    rng = np.random.default_rng(3)
    shapes = [(5, 3), (3, 5), (5, 3), (1, 1), (0, 2), (7, 7)]
    mats = [random_array(rng, s, np.complex128) for s in shapes]
    xs = to_xp(xp, mats)
    if uv:
        U, S, Vh = svd(xs)
        assert isinstance(U, list) and len(U) == len(shapes)
        for a, u, s, vh in zip(mats, U, S, Vh):
            assert value_ratio(s[None], a[None]) <= THRESHOLD
            assert max(vector_ratios(a[None], u[None], s[None], vh[None])) <= THRESHOLD
    else:
        S, info = svdvals(xs, check=False)
        assert isinstance(S, list) and info.shape == (len(shapes),)
        for a, s in zip(mats, S):
            assert value_ratio(s[None], a[None]) <= THRESHOLD
    assert svdvals([]) == []


def test_empty_and_degenerate(xp):
    assert svdvals(to_xp(xp, np.zeros((0, 4, 3)))).shape == (0, 3)
    U, S, Vh = svd(to_xp(xp, np.zeros((2, 0, 3))), full_matrices=True)
    assert U.shape == (2, 0, 0) and S.shape == (2, 0) and Vh.shape == (2, 3, 3)
    assert np.allclose(to_np(Vh), np.eye(3))
    S = svdvals(to_xp(xp, np.array([[-3.0]])))
    assert to_np(S).tolist() == [3.0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_stays_in_its_matrix(xp, dtype):
    rng = np.random.default_rng(11)
    A = random_array(rng, (4, 6, 5), dtype)
    A[1, 2, 3] = np.nan
    A[2, 0, 0] = np.inf
    U, S, Vh, info = svd(to_xp(xp, A), check=False)
    S, info = to_np(S), to_np(info)
    assert list(info > 0) == [False, True, True, False]
    assert np.isnan(S[1:3]).all() and np.isnan(to_np(U)[1:3]).all()
    assert value_ratio(S[[0, 3]], A[[0, 3]]) <= THRESHOLD
    assert max(vector_ratios(A[[0, 3]], to_np(U)[[0, 3]], S[[0, 3]], to_np(Vh)[[0, 3]])) <= THRESHOLD
    with pytest.raises(np.linalg.LinAlgError, match=r"SVD did not converge.*\[1, 2\]"):
        svdvals(to_xp(xp, A))


def test_non_convergence_raises_naming_indices(xp):
    rng = np.random.default_rng(5)
    A = random_array(rng, (2, 3, 10, 10), np.float64)
    cap = BdsqrSetting(32, 4, maxitr=0)
    S, info = svdvals(to_xp(xp, A), check=False, setting=cap)
    assert (to_np(info) > 0).all()
    with pytest.raises(np.linalg.LinAlgError, match=r"SVD did not converge.*\(0, 0\)"):
        svd(to_xp(xp, A), setting=cap)
    assert not to_np(svdvals(to_xp(xp, A), check=False)[1]).any()


def test_bad_arguments(xp):
    A = to_xp(xp, np.ones((2, 3, 3)))
    with pytest.raises(TypeError, match="dtype"):
        svdvals(to_xp(xp, np.ones((3, 3), np.int32)))
    with pytest.raises(ValueError, match=r"\(\.\.\., m, n\)"):
        svd(to_xp(xp, np.ones(3)))
    with pytest.raises(TypeError, match="full_matrices"):
        svd(A, full_matrices=1)
    with pytest.raises(TypeError, match="compute_uv"):
        svd(A, compute_uv="yes")
    with pytest.raises(TypeError, match="check"):
        svdvals(A, check=None)
    with pytest.raises(TypeError, match="BdsqrSetting"):
        svdvals(A, setting="fast")
    with pytest.raises(ValueError, match="2-D"):
        svdvals([to_xp(xp, np.ones(3))])


def test_numpy_conventions():
    """Return order (U, S, Vh), compute_uv=False gives S alone, check=False appends info."""
    A = np.random.default_rng(0).standard_normal((3, 4, 2))
    out = svd(A)
    assert len(out) == 3 and out[0].shape == (3, 4, 2)
    assert svd(A, compute_uv=False).shape == (3, 2)
    assert len(svd(A, check=False)) == 4 and len(svd(A, compute_uv=False, check=False)) == 2
    assert np.allclose(svdvals(A), np.linalg.svd(A, compute_uv=False), rtol=1e-13)


# --- GPU only ------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64], ids=str)
@pytest.mark.parametrize("n", [8, 16, 32])
def test_many_small_matrices(xp, dtype, n):
    if xp is np:
        pytest.skip("GPU batch size")
    rng = np.random.default_rng(n)
    A = random_array(rng, (70_000, n, n), dtype)
    S = to_np(svdvals(xp.asarray(A)))
    assert value_ratio(S[::137], A[::137]) <= THRESHOLD
    U, S2, Vh = svd(xp.asarray(A[:5000]))
    assert max(vector_ratios(A[:5000:50], to_np(U)[::50], to_np(S2)[::50], to_np(Vh)[::50])) <= THRESHOLD
    # svd's values come from the pipeline, svdvals' (real) from one-sided Jacobi: equal to
    # the absolute accuracy both promise, 30 n eps s_1
    S2 = to_np(S2)
    assert (np.abs(S2 - S[:5000]) <= n * THRESHOLD * eps(dtype) * S2[:, :1]).all()


@pytest.mark.gpu
def test_gpu_matches_cpu_backend(xp):
    if xp is np:
        pytest.skip("compares the backends")
    rng = np.random.default_rng(1)
    for m, n in ((16, 16), (40, 17), (17, 40), (128, 128)):
        A = random_array(rng, (20, m, n), np.float64)
        s_gpu = to_np(svdvals(xp.asarray(A)))   # one-sided Jacobi for (16, 16) on the GPU
        s_cpu = svdvals(A)
        assert (np.abs(s_gpu - s_cpu) <= 1e-13 * max(m, n) * s_cpu[:, :1]).all()
        d = rng.standard_normal((20, n))
        e = rng.standard_normal((20, n - 1))
        assert np.allclose(to_np(bdsqr(xp.asarray(d), xp.asarray(e))[0]), bdsqr(d, e)[0], rtol=1e-13, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=str)
@pytest.mark.parametrize("shape", [(40, 40), (64, 48), (5, 5), (16, 16), (9, 4)], ids=str)
def test_svdvals_of_subnormal_matrices(xp, dtype, shape):
    """Single-precision matrices whose every entry is subnormal (and one zero matrix):
    the singular values are NumPy's of the exactly widened matrices, to a few units of
    the smallest subnormal beyond the relative rounding.  On the GPU CuPy's float32
    arithmetic reads such entries as zeros; svd's scaling (xGESVD's, up by a power of
    two) goes through float64 there (40 x 40 and 64 x 48 take that path; the others
    their own kernels)."""
    m, n = shape
    rng = np.random.default_rng(1000 * m + n + (7 if np.dtype(dtype).kind == "c" else 0))
    tiny = float(np.finfo(dtype).tiny)
    A = random_array(rng, (3, m, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    A = (A / np.abs(A).max() * tiny / 4).astype(dtype)   # |a| <= tiny / 4: subnormal or zero
    A[2] = 0
    parts = A.view(np.float32)
    assert np.all(np.abs(parts) < tiny) and np.count_nonzero(parts) > parts.size // 2
    S = to_np(svdvals(to_xp(xp, A)))
    ref = np.linalg.svd(A.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64), compute_uv=False)
    eps = float(np.finfo(dtype).eps)
    bound = THRESHOLD * eps * ref.max(axis=-1, keepdims=True) * max(m, n) + 4 * 2.0 ** -149
    assert np.all(np.abs(S - ref) <= bound), (shape, np.abs(S - ref).max(), bound.max())
    assert np.all(S[2] == 0)
