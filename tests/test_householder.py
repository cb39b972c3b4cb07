"""Elementary reflectors: the NumPy twins (factorizations/_householder.py) against
their definition and LAPACK's xLARFG through SciPy, and the device functions
(device_functions/householder.cuh) through the small test kernels of
tests/householder_kernels.cu against the NumPy twins (GPU only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.linalg.lapack as lapack
from hypothesis import assume, given
from hypothesis import strategies as st

from batched.device_functions import build
from batched.factorizations._householder import larf_left, larf_right, larfg, real_dtype
from conftest import requires_gpu, rng_for
from strategies import DTYPES, SETTINGS, random_array

KERNELS = Path(__file__).resolve().parent / "householder_kernels.cu"
CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
         np.dtype(np.complex64): "complex<float>", np.dtype(np.complex128): "complex<double>"}
LARFG_GROUPS = (32, 128)
LARF_SHAPES = ((32, 1), (16, 2), (32, 4))  # (DIM_X, DIM_Y): in-warp and cross-warp GEMVs
build.register(KERNELS, [f"larfg_test_kernel<{c}, {g}>" for c in CTYPE.values() for g in LARFG_GROUPS]
               + [f"larf_test_kernel<{c}, {dx}, {dy}, {s}>" for c in CTYPE.values()
                  for dx, dy in LARF_SHAPES for s in ("true", "false")])

LAPACK_LARFG = {np.dtype(np.float32): lapack.slarfg, np.dtype(np.float64): lapack.dlarfg,
                np.dtype(np.complex64): lapack.clarfg, np.dtype(np.complex128): lapack.zlarfg}
# Scales from deep underflow (LAPACK's rescaling loop) to near overflow.
SCALES = {np.dtype(np.float64): (1.0, 1e-300, 1e-310, 1e-320, 1e300, 1e-160),
          np.dtype(np.float32): (1.0, 1e-35, 1e-40, 1e-44, 1e36, 1e-20)}


def eps(dtype):
    return np.finfo(real_dtype(dtype)).eps


def reflector(v, tau):
    """H = I - tau [1; v] [1; v]^H for one vector."""
    u = np.concatenate([[1], v]).astype(np.result_type(v, tau, np.float64 if v.dtype.itemsize >= 8
                                                           else np.float32))
    return np.eye(u.size, dtype=u.dtype) - tau * np.outer(u, u.conj())


def vectors(rng, batch, n, dtype, scale):
    x = random_array(rng, (batch, n), dtype)
    with np.errstate(all="ignore"):
        return (x * real_dtype(dtype).type(scale)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 8, 33])
def test_larfg_matches_lapack(dtype, n):
    rng = rng_for("larfg", dtype, n)
    tol = 8 * eps(dtype)
    for scale in SCALES[real_dtype(dtype)]:
        x = vectors(rng, 6, n, dtype, scale)
        beta, v, tau = larfg(x[:, 0], x[:, 1:])
        assert beta.dtype == real_dtype(dtype) and v.dtype == dtype and tau.dtype == dtype
        for k in range(x.shape[0]):
            # LAPACK reads no x when n == 1, but some SciPy wrappers reject an empty one.
            tail = x[k, 1:].copy() if n > 1 else np.zeros(1, dtype=dtype)
            a_ref, v_ref, tau_ref = LAPACK_LARFG[dtype](n, x[k, 0], tail)
            assert abs(beta[k] - a_ref) <= tol * abs(a_ref), (scale, k)
            assert abs(tau[k] - tau_ref) <= tol * max(abs(tau_ref), 1), (scale, k)
            if n > 1:
                assert np.abs(v[k] - v_ref).max() <= tol * max(np.abs(v_ref).max(), 1), (scale, k)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_larfg_trivial_cases(dtype):
    R = real_dtype(dtype)
    x = np.zeros((3, 4), dtype=dtype)
    x[:, 0] = [2.0, -3.0, 0.0]
    beta, v, tau = larfg(x[:, 0], x[:, 1:])
    np.testing.assert_array_equal(tau, 0)          # x = 0, alpha real: H = I
    np.testing.assert_array_equal(beta, np.array([2.0, -3.0, 0.0], dtype=R))
    np.testing.assert_array_equal(v, 0)
    if dtype.kind == "c":                          # alpha complex, x = 0: H makes it real
        beta, v, tau = larfg(np.array([1 + 1j], dtype=dtype), np.zeros((1, 0), dtype=dtype))
        assert tau[0] != 0 and abs(abs(beta[0]) - np.sqrt(2)) < 4 * eps(dtype)
        a_ref, _, tau_ref = LAPACK_LARFG[dtype](1, dtype.type(1 + 1j), np.zeros(1, dtype=dtype))
        assert abs(beta[0] - a_ref) < 4 * eps(dtype) and abs(tau[0] - tau_ref) < 4 * eps(dtype)


@given(dtype=st.sampled_from(DTYPES), n=st.integers(1, 40), batch=st.integers(0, 5),
       scale=st.sampled_from([0, 1, 2, 4, 5]), seed=st.integers(0, 2**31))
@SETTINGS
def test_larfg_definition(dtype, n, batch, scale, seed):
    """H unitary and H^H [alpha; x] = [beta; 0] (residuals over eps and the norm).

    Subnormal scales are left out (1e-310, 1e-320 in float64; 1e-40, 1e-44 in float32):
    a subnormal entry carries fewer bits than eps assumes, so no backward error
    relative to eps holds for it; test_larfg_matches_lapack covers them against
    LAPACK instead."""
    rng = np.random.default_rng(seed)
    s = SCALES[real_dtype(dtype)][scale]
    assume(s >= np.finfo(real_dtype(dtype)).tiny)
    x = vectors(rng, batch, n, dtype, s)
    beta, v, tau = larfg(x[:, 0], x[:, 1:])
    assert beta.shape == (batch,) and v.shape == (batch, n - 1) and tau.shape == (batch,)
    e = eps(dtype)
    for k in range(batch):
        wide = x[k].astype(np.complex128 if dtype.kind == "c" else np.float64)
        H = reflector(v[k].astype(wide.dtype), complex(tau[k]) if dtype.kind == "c" else float(tau[k]))
        assert np.abs(H.conj().T @ H - np.eye(n)).max() / (n * e) < 30
        # Scale by 1/|x| before multiplying: near overflow the product itself overflows.
        norm = np.linalg.norm(wide / s) * s
        if norm == 0:
            continue
        y = H.conj().T @ (wide / norm)
        target = np.zeros(n, dtype=wide.dtype)
        target[0] = beta[k] / norm
        assert np.abs(y - target).max() / (n * e) < 30
        assert abs(abs(beta[k]) - norm) <= 30 * n * e * norm


@given(dtype=st.sampled_from(DTYPES), m=st.integers(0, 20), n=st.integers(0, 20),
       batch=st.integers(0, 4), side=st.sampled_from("LR"), seed=st.integers(0, 2**31))
@SETTINGS
def test_larf_matches_explicit_reflector(dtype, m, n, batch, side, seed):
    rng = np.random.default_rng(seed)
    length = m if side == "L" else n
    if length == 0:
        return
    x = random_array(rng, (batch, length), dtype)
    _, vt, tau = larfg(x[:, 0], x[:, 1:])
    v = np.concatenate([np.ones((batch, 1), dtype=dtype), vt], axis=1)
    C = random_array(rng, (batch, m, n), dtype)
    out = C.copy()
    (larf_left if side == "L" else larf_right)(v, tau, out)
    for k in range(batch):
        H = reflector(vt[k], tau[k]).astype(dtype)
        ref = H @ C[k] if side == "L" else C[k] @ H
        assert np.abs(out[k] - ref).max(initial=0) <= 30 * max(m, n, 1) * eps(dtype) * max(np.abs(C[k]).max(initial=0), 1)


def test_larf_skips_zero_tau_and_keeps_nan_in_its_matrix():
    C = np.ones((2, 3, 3))
    C[0, 1, 1] = np.nan
    v = np.ones((2, 3))
    out = C.copy()
    larf_left(v, np.array([0.0, 0.5]), out)
    assert np.isnan(out[0]).sum() == 1            # tau = 0: untouched, NaN did not spread
    assert np.isfinite(out[1]).all()


# --- device functions through the test kernels (GPU only) -----------------------------


def gpu(test):
    for mark in requires_gpu:
        test = mark(test)
    return test


@pytest.mark.parametrize("group", LARFG_GROUPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 2, 7, 32, 33, 200])
@gpu
def test_larfg_device_matches_numpy(dtype, n, group):
    import cupy as cp

    rng = rng_for("larfg-gpu", dtype, n, group)
    x = np.concatenate([vectors(rng, 4, n, dtype, s) for s in SCALES[real_dtype(dtype)]])
    beta, v, tau = larfg(x[:, 0], x[:, 1:])
    xd = cp.asarray(x)
    taud = cp.full(x.shape[0], np.nan, dtype=dtype)
    kernel = build.get_kernel(KERNELS, f"larfg_test_kernel<{CTYPE[dtype]}, {group}>")
    kernel((x.shape[0],), (group,), (xd, np.int32(n), taud, np.int64(x.shape[0])))
    out = cp.asnumpy(xd)
    tol = 8 * eps(dtype)
    # A subnormal beta (the 1e-40 float32 rows) holds only its absolute ulp: a one-ulp
    # difference of the scaled norm (the GPU sums in another order than NumPy) moves
    # it by one subnormal step, far more than 8 eps relative.
    tiny = 2 * np.finfo(real_dtype(dtype)).smallest_subnormal
    np.testing.assert_allclose(out[:, 0].real, beta, rtol=tol, atol=tiny)
    np.testing.assert_allclose(cp.asnumpy(taud), tau, rtol=tol, atol=tol)
    np.testing.assert_allclose(out[:, 1:], v, rtol=16 * tol, atol=16 * tol * np.abs(v).max(initial=1))


@pytest.mark.parametrize("shape", LARF_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("m,n", [(1, 1), (5, 3), (3, 40), (70, 33), (129, 65)])
@gpu
def test_larf_device_matches_numpy(dtype, shape, side, m, n):
    import cupy as cp

    rng = rng_for("larf-gpu", dtype, shape, side, m, n)
    batch, length = 3, (m if side == "L" else n)
    x = random_array(rng, (batch, length), dtype)
    _, vt, tau = larfg(x[:, 0], x[:, 1:])
    tau[1] = 0  # one matrix with H = I
    v = np.concatenate([np.ones((batch, 1), dtype=dtype), vt], axis=1)
    C = random_array(rng, (batch, m, n), dtype)
    ref = C.copy()
    (larf_left if side == "L" else larf_right)(v, tau, ref)
    cd = cp.asarray(np.ascontiguousarray(C.transpose(0, 2, 1)))  # column-major blocks
    w = cp.full((batch, n if side == "L" else m), np.nan, dtype=dtype)
    name = f"larf_test_kernel<{CTYPE[dtype]}, {shape[0]}, {shape[1]}, {'true' if side == 'L' else 'false'}>"
    build.get_kernel(KERNELS, name)((batch,), (shape[0] * shape[1],),
                                    (cd, np.int32(m), np.int32(n), cp.asarray(v), cp.asarray(tau), w,
                                     np.int64(batch)))
    out = cp.asnumpy(cd).transpose(0, 2, 1)
    np.testing.assert_array_equal(out[1], C[1])
    assert np.abs(out - ref).max() <= 30 * max(m, n) * eps(dtype) * max(np.abs(C).max(), 1)


def test_test_kernels_compile_for_sm90():
    assert build.compile_registered("sm_90", sources=[KERNELS.name]) == {KERNELS.name: 32}
