"""Batched BLAS-1 (nrm2, asum, iamax, dot, dotc, scal, axpy) on both backends.

Each result is compared with a float64/complex128 NumPy reference under the
inner-product bound of Higham (residuals.py): |fl(sum) - sum| <= gamma_n sum|terms|.
Every registered VectorSetting is forced on the GPU (the CPU backend has one
path and runs the default).  Results are new arrays; the GPU pool is poisoned
with NaN first so an unwritten element fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import batched as bt
from conftest import assert_unchanged, gpu_only_setting, poison_pool, rng_for, snapshot, to_np, to_xp
from strategies import DTYPES, SETTINGS, VECTOR_LAYOUTS, arrange, broadcast_pair, random_array

SETTINGS_UNDER_TEST = [*bt.VECTOR_SETTINGS, None]
LENGTHS = (0, 1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 64, 100, 255, 257, 1000)


def wide(a):
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def eps(dtype):
    return float(np.finfo(np.dtype(dtype)).eps)


def abs1(a):
    return np.abs(a.real) + np.abs(a.imag)


def sum_ratio(got, ref, mag, n, dtype):
    """max |got - ref| / ((n + 2) eps mag): Higham eq. (3.5) per output."""
    got = wide(got)
    if got.size == 0:
        return 0.0
    bound = (n + 2) * eps(dtype) * mag + np.finfo(np.float64).tiny
    return float(np.max(np.abs(got - ref) / bound))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(n=st.sampled_from(LENGTHS), pair=broadcast_pair(), dtype=st.sampled_from(DTYPES),
       layouts=st.tuples(st.sampled_from(VECTOR_LAYOUTS), st.sampled_from(VECTOR_LAYOUTS)),
       seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_reductions_against_float64(xp, setting, n, pair, dtype, layouts, seed):
    gpu_only_setting(xp, setting)
    rng = np.random.default_rng(seed)
    x = random_array(rng, (*pair[0], n), dtype)
    y = random_array(rng, (*pair[1], n), dtype)
    xd, yd = arrange(xp, x, layouts[0], 1), arrange(xp, y, layouts[1], 1)
    before = snapshot(xd, yd)
    batch = np.broadcast_shapes(pair[0], pair[1])
    xw, yw = wide(x), wide(y)
    real = np.finfo(dtype).dtype

    poison_pool(xp, int(np.prod(pair[0])) * 16)
    got = bt.nrm2(xd, setting=setting)
    assert got.dtype == real and tuple(got.shape) == pair[0]
    ref = np.sqrt((np.abs(xw) ** 2).sum(axis=-1))
    assert sum_ratio(to_np(got), ref, ref, 2 * n, dtype) < 30

    got = bt.asum(xd, setting=setting)
    assert got.dtype == real
    ref = abs1(xw).sum(axis=-1)
    assert sum_ratio(to_np(got), ref, ref, n, dtype) < 30

    got = to_np(bt.iamax(xd, setting=setting))
    assert got.dtype == np.int64
    expected = np.argmax(abs1(x), axis=-1) if n else np.full(pair[0], -1)
    np.testing.assert_array_equal(got, expected)

    for fn, conj in ((bt.dot, False), (bt.dotc, True)):
        got = fn(xd, yd, setting=setting)
        assert got.dtype == dtype and tuple(got.shape) == batch
        xx = np.conj(xw) if conj else xw
        ref = (xx * yw).sum(axis=-1)
        mag = (np.abs(xw) * np.abs(yw)).sum(axis=-1)
        assert sum_ratio(to_np(got), ref, np.broadcast_to(mag, batch), n, dtype) < 30
    assert_unchanged((xd, yd), before)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@given(n=st.sampled_from(LENGTHS), pair=broadcast_pair(), dtype=st.sampled_from(DTYPES),
       per_vector=st.booleans(), seed=st.integers(0, 2**32 - 1))
@SETTINGS
def test_scal_and_axpy(xp, setting, n, pair, dtype, per_vector, seed):
    gpu_only_setting(xp, setting)
    rng = np.random.default_rng(seed)
    x = random_array(rng, (*pair[0], n), dtype)
    y = random_array(rng, (*pair[1], n), dtype)
    batch = np.broadcast_shapes(pair[0], pair[1])
    if per_vector:
        alpha = random_array(rng, batch, dtype)
        a_arg, a_ref = to_xp(xp, alpha), wide(alpha)[..., None]
    else:
        alpha = (1.5 - 0.5j) if np.dtype(dtype).kind == "c" else -2.5
        a_arg, a_ref = alpha, alpha
    xd, yd = arrange(xp, x, "strided", 1), arrange(xp, y, "reversed", 1)
    before = snapshot(xd, yd)
    poison_pool(xp, int(np.prod(batch)) * n * np.dtype(dtype).itemsize)
    got = bt.axpy(a_arg, xd, yd, setting=setting)
    assert got.dtype == dtype and tuple(got.shape) == (*batch, n)
    ref = a_ref * wide(x) + wide(y)
    mag = np.abs(a_ref) * np.abs(wide(x)) + np.abs(wide(y))
    assert sum_ratio(to_np(got), ref, mag, 1, dtype) < 30
    if per_vector:  # one scale per vector of x alone
        alpha = random_array(rng, pair[0], dtype)
        a_arg, a_ref = to_xp(xp, alpha), wide(alpha)[..., None]
    got = bt.scal(a_arg, xd, setting=setting)
    ref = a_ref * wide(x)
    assert sum_ratio(to_np(got), ref, np.abs(ref), 1, dtype) < 30
    assert_unchanged((xd, yd), before)


# --- nrm2: no overflow, no underflow -----------------------------------------------------


def scaled_norm(x):
    """The reference: s * ||x / s|| with s = max |entry| (no over/underflow), in float64."""
    v = np.abs(np.concatenate([x.real, x.imag], axis=-1)).astype(np.float64)
    s = v.max(axis=-1, keepdims=True)
    s = np.where(s > 0, s, 1.0)
    return s[..., 0] * np.sqrt(((v / s) ** 2).sum(axis=-1))


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 31, 33, 1000])
def test_nrm2_near_overflow_and_underflow(xp, setting, dtype, n):
    gpu_only_setting(xp, setting)
    rng = rng_for("nrm2", str(dtype), n)
    single = np.dtype(dtype) in (np.float32, np.complex64)
    huge, tiny = (1e35, 1e-37) if single else (1e300, 1e-300)   # the float32 norm stays below 3.4e38
    rows = [huge * (1 + rng.random(n)),                       # squares overflow
            tiny * (1 + rng.random(n)),                       # squares underflow
            np.where(rng.random(n) < 0.5, huge, tiny) * (1 + rng.random(n)),   # both at once
            tiny * 1e-3 * (1 + rng.random(n)),                # subnormal-ish entries
            1 + rng.random(n),                                # mid range
            np.where(np.arange(n) % 3 == 1, 0.0, 1 + rng.random(n))]   # exact zeros among mid range
    x = np.array(rows)
    if np.dtype(dtype).kind == "c":
        x = x * np.exp(2j * np.pi * rng.random(x.shape)) / np.sqrt(2)
    x = x.astype(dtype)
    got = to_np(bt.nrm2(to_xp(xp, x), setting=setting))
    ref = scaled_norm(x)
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    rel = np.abs(got.astype(np.float64) - ref) / ref
    # Blue's algorithm: a few ulps plus the n-term sum (the subnormal row loses digits on input)
    tol = np.array([(2 * n + 4) * eps(dtype)] * 3 + [1e-3 if single else 1e-12] + [(2 * n + 4) * eps(dtype)] * 2)
    assert np.all(rel <= tol), (rel, tol)


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nrm2_any_start_and_length(xp, setting, dtype):
    """Contiguous vectors read in 16-byte pieces: every start modulo 16 bytes, lengths
    short of a piece, between pieces and long, with the elements before the first and
    after the last boundary; one row near overflow (the second pass after the pieces)."""
    gpu_only_setting(xp, setting)
    rng = rng_for("nrm2 pieces", str(dtype))
    single = np.dtype(dtype) in (np.float32, np.complex64)
    for n in (1, 2, 3, 5, 8, 13, 33, 100):
        for start in range(4):
            rows = 5
            flat = random_array(rng, (rows * n + start,), dtype)
            x = flat[start:].reshape(rows, n)
            x[2] *= 1e35 if single else 1e300
            got = to_np(bt.nrm2(to_xp(xp, flat)[start:].reshape(rows, n), setting=setting))
            ref = scaled_norm(x)
            rel = np.abs(got.astype(np.float64) - ref) / ref
            assert np.all(rel <= (2 * n + 4) * eps(dtype)), (n, start, rel)


def test_nrm2_propagates_nan_and_inf(xp):
    x = np.ones((4, 40))
    x[1, 7] = np.nan
    x[2, 3] = np.inf
    x[3, 5], x[3, 6] = np.inf, np.nan
    got = to_np(bt.nrm2(to_xp(xp, x)))
    assert got[0] == pytest.approx(np.sqrt(40)) and np.isnan(got[1]) and got[2] == np.inf and np.isnan(got[3])


# --- iamax rules -----------------------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("n", [1, 31, 33, 1000])
def test_iamax_ties_complex_measure_and_nan(xp, setting, n):
    gpu_only_setting(xp, setting)
    x = np.zeros((5, n), np.complex128)
    x[0, n // 3], x[0, n - 1] = 3, -3j                 # a tie: the first wins
    x[1, n - 1] = 2 + 2j                                 # |re| + |im| = 4 beats |z| = 3.5
    if n > 1:
        x[1, 0] = 3.5
    x[2, :] = 1
    x[3, n // 2], x[3, n - 1] = np.nan, 1e300           # NaN counts as largest
    got = to_np(bt.iamax(to_xp(xp, x), setting=setting))
    np.testing.assert_array_equal(got, [n // 3 if n > 1 else 0, n - 1, 0, n // 2, 0])
    assert to_np(bt.iamax(to_xp(xp, np.zeros((3, 0))), setting=setting)).tolist() == [-1, -1, -1]


# --- big batches, 0-d results, validation -------------------------------------------------------


@pytest.mark.parametrize("setting", SETTINGS_UNDER_TEST, ids=str)
@pytest.mark.parametrize("n", [0, 1, 31, 33])
def test_many_vectors(xp, setting, n):
    """70,000 vectors on the GPU (more than 65,535 blocks); 700 on the CPU."""
    gpu_only_setting(xp, setting)
    count = 700 if xp is np else 70_000
    rng = rng_for("manyvec", n)
    x = random_array(rng, (count, n), np.float32)
    y = random_array(rng, (count, n), np.float32)
    xd, yd = to_xp(xp, x), to_xp(xp, y)
    ref = (wide(x) * wide(y)).sum(axis=-1)
    mag = (np.abs(wide(x)) * np.abs(wide(y))).sum(axis=-1)
    assert sum_ratio(to_np(bt.dot(xd, yd, setting=setting)), ref, mag, n, np.float32) < 30
    nrm = np.sqrt((wide(x) ** 2).sum(axis=-1))
    assert sum_ratio(to_np(bt.nrm2(xd, setting=setting)), nrm, nrm, n, np.float32) < 30
    got = to_np(bt.axpy(2.0, xd, yd, setting=setting))
    assert sum_ratio(got, 2 * wide(x) + wide(y), 2 * np.abs(wide(x)) + np.abs(wide(y)), 1, np.float32) < 30


def test_one_vector_gives_0d_arrays(xp):
    x = to_xp(xp, np.array([3.0, -4.0]))
    for fn, expected in ((bt.nrm2, 5.0), (bt.asum, 7.0), (bt.iamax, 1)):
        r = fn(x)
        assert isinstance(r, xp.ndarray) and r.shape == () and float(to_np(r)) == expected
    assert float(to_np(bt.dot(x, x))) == 25.0


def test_vector_validation(xp):
    x = to_xp(xp, np.ones((3, 4)))
    with pytest.raises(TypeError, match="x has dtype int32"):
        bt.nrm2(to_xp(xp, np.ones(3, np.int32)))
    with pytest.raises(ValueError, match="lengths differ"):
        bt.dot(x, to_xp(xp, np.ones((3, 5))))
    with pytest.raises(ValueError, match="do not broadcast"):
        bt.axpy(1.0, x, to_xp(xp, np.ones((2, 4))))
    with pytest.raises(ValueError, match="shape"):
        bt.asum(to_xp(xp, np.float64(1.0)))
    with pytest.raises(TypeError, match="complex"):
        bt.scal(1j, x)
    with pytest.raises(TypeError, match="complex"):
        bt.scal(to_xp(xp, np.ones(3, np.complex64)), x)
    with pytest.raises(ValueError, match="finite"):
        bt.axpy(np.inf, x, x)
    with pytest.raises(ValueError, match="alpha has shape"):
        bt.scal(to_xp(xp, np.ones(4)), x)
    with pytest.raises(ValueError, match="not one of"):
        bt.nrm2(x, setting=bt.VectorSetting(64))


def test_chooser_pairs_short_nrm2_only():
    """nrm2 of at most PAIR_GROUP_BYTES takes 2 lanes a vector; the dots of as many
    bytes keep 4 (pairs gained nothing there), longer vectors 4 and 8 lanes."""
    from batched.vector import PAIR_GROUP_BYTES, TINY_GROUP_BYTES, choose_vector_setting
    pair, four, eight = bt.VectorSetting(2), bt.VectorSetting(4), bt.VectorSetting(8)
    assert choose_vector_setting(10, 10**6, 132, 80, nrm2=True) == pair
    assert choose_vector_setting(10, 10**6, 132, PAIR_GROUP_BYTES, nrm2=True) == pair
    assert choose_vector_setting(11, 10**6, 132, PAIR_GROUP_BYTES + 8, nrm2=True) == four
    assert choose_vector_setting(5, 10**6, 132, 80) == four
    assert choose_vector_setting(33, 10**6, 132, TINY_GROUP_BYTES + 72, nrm2=True) == eight
