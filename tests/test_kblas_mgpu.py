"""batched.kblas on a DistributedMatrix: the 1D block-cyclic layout and the
multi-device GEMV/SYMV/HEMV.

CPU: virtual host devices (``devices=k``) run the same bookkeeping, partial
products and reduction with NumPy; results are compared with a float64 /
complex128 reference through ``residuals.gemv_error_ratio`` (an n-epsilon
scaled componentwise bound).  GPU: the same on two GPUs and on every
visible GPU where there are three or more, NaN-poisoned outputs, results
equal to the single-GPU routine within n-epsilon; skipped below two GPUs.
"""

from __future__ import annotations

import numpy as np
import pytest

from batched.kblas import DistributedMatrix, distribute, gemv, hemv, symv
from batched.kblas.distributed import DEFAULT_NB, BlockCyclic, padded_ld, parse_devices
from batched.kblas.mgpu import SOURCE, kernel_name, symv_plan
from batched.kblas.settings import KBLAS_ROWS_SETTINGS, KBLAS_SETTINGS, KblasSetting
from batched.device_functions import registered
from conftest import assert_unchanged, rng_for, snapshot, to_np
from residuals import gemv_error_ratio
from strategies import random_array, triangle_with_nan

THRESHOLD = 30
DTYPES = tuple(np.dtype(d) for d in (np.float32, np.float64, np.complex64, np.complex128))
ACCURATE = (np.dtype(np.float64), np.dtype(np.complex128))
FN = {"gemv": gemv, "symv": symv, "hemv": hemv}


def gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver
        return 0


TWO_GPUS = gpu_count() >= 2
TWO_GPU_REASON = f"needs at least two CUDA GPUs (cupy.cuda.runtime.getDeviceCount() = {gpu_count()})"
# "all": every visible GPU, where there are more than two (the pair is "two").
DEVICE_SETS = {"two": [0, 1], "all": list(range(gpu_count()))}


def two_gpus(fn):
    """Marks of a multi-GPU test: ``gpu``, skipped with a reason below two GPUs."""
    return pytest.mark.gpu(pytest.mark.skipif(not TWO_GPUS, reason=TWO_GPU_REASON)(fn))


def wide(a):
    return np.asarray(a).astype(np.complex128 if np.asarray(a).dtype.kind == "c" else np.float64)


# --- the layout (pure bookkeeping) ------------------------------------------------------


@pytest.mark.parametrize("n", (0, 1, 5, 7, 64, 65, 200))
@pytest.mark.parametrize("nb", (1, 3, 4, 64))
@pytest.mark.parametrize("parts", (1, 2, 3, 4, 5))
def test_block_cyclic_partitions_the_columns(n, nb, parts):
    lay = BlockCyclic(n, nb, parts)
    cols = [lay.global_columns(d) for d in range(parts)]
    assert np.array_equal(np.sort(np.concatenate(cols)), np.arange(n))
    for d, c in enumerate(cols):
        assert c.size == lay.local_cols(d)
        assert np.all(np.diff(c) > 0)
        assert np.all((c // nb) % parts == d)  # block b on device b % parts
        jl = np.arange(c.size)
        assert np.array_equal(lay.global_of_local(d, jl), c)  # the kernels' map
        for j_local, g in list(zip(jl, c))[:50]:
            assert lay.locate(int(g)) == (d, int(j_local))
    for b in range(lay.blocks):
        assert lay.global_columns(lay.owner(b))[lay.local_start(b)] == b * nb


def test_padded_leading_dimension_aligns_columns():
    for m, item in ((1, 8), (15, 8), (16, 8), (17, 8), (33, 4), (5, 16)):
        ld = padded_ld(m, item)
        assert ld >= m and (ld * item) % 128 == 0


# --- distribute / gather ----------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0, 0), (4, 0), (0, 6), (1, 1), (7, 13), (13, 7), (20, 20), (9, 64)])
@pytest.mark.parametrize("k", (1, 2, 3, 4, 5))
@pytest.mark.parametrize("nb", (1, 3, 4, None))
def test_distribute_gather_round_trip(shape, k, nb):
    rng = rng_for("roundtrip", shape, k, nb)
    A = random_array(rng, shape, np.float64)
    before = snapshot(A)
    D = distribute(A, devices=k, nb=nb)
    assert D.shape == shape and D.dtype == A.dtype and D.devices == ("cpu",) * k
    assert D.nb == (DEFAULT_NB if nb is None else nb)
    for d, local in enumerate(D.locals):
        cols = D.global_columns(d)
        assert local.shape == (shape[0], cols.size)
        assert local.size == 0 or local.strides[0] == local.itemsize  # column-major local matrix
        assert np.array_equal(local, A[:, cols])
    G = D.gather()
    assert isinstance(G, np.ndarray) and np.array_equal(G, A)
    assert_unchanged((A,), before)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ("C", "F", "strided"))
def test_distribute_any_strides_and_dtypes(dtype, layout):
    rng = rng_for("strides", str(dtype), layout)
    base = random_array(rng, (23, 41), dtype)
    A = {"C": np.ascontiguousarray(base), "F": np.asfortranarray(base), "strided": base[::2, ::3]}[layout]
    D = distribute(A, devices=["cpu", "cpu", "cpu"], nb=5)
    assert np.array_equal(D.gather(), A)
    assert np.array_equal(D.take_rows([0, 3, len(A) - 1]), A[[0, 3, len(A) - 1]])
    assert np.array_equal(D.take_columns([0, 6, 5, A.shape[1] - 1]), A[:, [0, 6, 5, A.shape[1] - 1]])


def test_from_function_fills_blocks_in_place():
    m, n, nb, k = 11, 17, 4, 3
    calls = []

    def fn(rows, cols):
        calls.append((rows, cols))
        # every call asks for part of ONE block column (so one device)
        assert cols.start // nb == (cols.stop - 1) // nb
        return np.add.outer(np.arange(rows.start, rows.stop) * 100.0, np.arange(cols.start, cols.stop))

    D = DistributedMatrix.from_function((m, n), fn, dtype=np.float64, devices=k, nb=nb)
    assert len(calls) == -(-n // nb)
    assert np.array_equal(D.gather(), np.add.outer(np.arange(m) * 100.0, np.arange(n)))
    C = DistributedMatrix.from_function((3, 5), lambda r, c: np.ones((len(r), len(c)), np.float32),
                                        dtype=np.complex64, devices=2, nb=2)
    assert C.dtype == np.complex64 and np.all(C.gather() == 1)


def test_from_function_bad_blocks():
    with pytest.raises(ValueError, match="shape"):
        DistributedMatrix.from_function((4, 4), lambda r, c: np.zeros((2, 2)), devices=2, nb=2)
    with pytest.raises(TypeError, match="cast"):
        DistributedMatrix.from_function((4, 4), lambda r, c: np.zeros((len(r), len(c)), complex),
                                        dtype=np.float64, devices=2, nb=2)
    with pytest.raises(TypeError, match="callable"):
        DistributedMatrix.from_function((4, 4), 3, devices=2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_random_is_seeded_and_independent_of_device_count(dtype):
    a = DistributedMatrix.random((9, 14), dtype=dtype, seed=5, devices=1, nb=3).gather()
    b = DistributedMatrix.random((9, 14), dtype=dtype, seed=5, devices=4, nb=3).gather()
    c = DistributedMatrix.random((9, 14), dtype=dtype, seed=6, devices=4, nb=3).gather()
    assert a.dtype == dtype and np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.all(np.isfinite(a)) and (dtype.kind != "c" or np.any(a.imag != 0))


def test_symv_strips_refused_on_a_distributed_matrix():
    """The strips' setting (KblasRowsSetting) runs one matrix on one GPU: a named error
    for a DistributedMatrix, host placeholders included, before any work."""
    D = distribute(np.eye(6), devices=2, nb=2)
    for fn in (symv, hemv):
        with pytest.raises(TypeError, match="on a DistributedMatrix must be a KblasSetting"):
            fn(D, np.ones(6), setting=KBLAS_ROWS_SETTINGS[0])


def test_distribute_errors():
    A = np.ones((4, 4))
    with pytest.raises(ValueError, match="2-D"):
        distribute(np.ones((2, 3, 3)), devices=2)
    with pytest.raises(TypeError, match="dtype"):
        distribute(np.ones((3, 3), np.int32), devices=2)
    with pytest.raises(ValueError, match="at least 1"):
        distribute(A, devices=0)
    with pytest.raises(ValueError, match="'cpu'"):
        distribute(A, devices=["gpu"])
    with pytest.raises(TypeError, match="all GPU ids or all 'cpu'"):
        distribute(A, devices=["cpu", 0])
    with pytest.raises(ValueError, match="nb"):
        distribute(A, devices=2, nb=0)
    with pytest.raises(ValueError, match="nb"):
        distribute(A, devices=2, nb=2.5)
    with pytest.raises(ValueError, match="do not exist"):
        parse_devices([gpu_count() + 3])
    assert parse_devices(3) == ("cpu",) * 3 and parse_devices(["CPU", "cpu"]) == ("cpu", "cpu")


# --- distributed GEMV / SYMV / HEMV on host devices ---------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", "NTC")
@pytest.mark.parametrize("k", (1, 2, 3, 5))
@pytest.mark.parametrize("shape,nb", [((37, 29), 4), ((29, 37), 5), ((64, 64), 16), ((1, 9), 2), ((9, 1), 3)])
def test_gemv_distributed_against_numpy(dtype, trans, k, shape, nb):
    rng = rng_for("mgemv", str(dtype), trans, k, shape, nb)
    A = random_array(rng, shape, dtype)
    rows, inner = (shape[0], shape[1]) if trans == "N" else (shape[1], shape[0])
    x, y = random_array(rng, (inner,), dtype), random_array(rng, (rows,), dtype)
    D = distribute(A, devices=k, nb=nb)
    before = snapshot(x, y)
    out = np.full(rows, np.nan, dtype)
    res = gemv(D, x, y, alpha=1.5, beta=-0.5, trans=trans, out=out)
    assert res is out
    assert gemv_error_ratio(res, A, x, y, 1.5, -0.5, trans) < THRESHOLD
    assert_unchanged((x, y), before)


@pytest.mark.parametrize("routine", ("symv", "hemv"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lower", (True, False), ids=("lower", "upper"))
@pytest.mark.parametrize("k", (1, 2, 3, 5))
@pytest.mark.parametrize("n,nb", [(1, 1), (7, 3), (33, 4), (48, 16), (50, 64)])
def test_symv_hemv_distributed_one_triangle(routine, dtype, lower, k, n, nb):
    rng = rng_for("msymv", routine, str(dtype), lower, k, n, nb)
    A, full = triangle_with_nan(rng, n, dtype, lower, routine == "hemv" and dtype.kind == "c")
    x, y = random_array(rng, (n,), dtype), random_array(rng, (n,), dtype)
    D = distribute(A, devices=k, nb=nb)
    out = np.full(n, np.nan, dtype)
    res = FN[routine](D, x, y, alpha=0.75, beta=2.0, lower=lower, out=out)
    assert res is out and np.all(np.isfinite(res))  # the NaN triangle was never read
    assert gemv_error_ratio(res, full, x, y, 0.75, 2.0, "N") < THRESHOLD


@pytest.mark.parametrize("routine", ("gemv", "symv", "hemv"))
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.0, 0.0), (0.0, 2.5), (-2.0, 1.0), (0.5, -3.0)])
def test_scalar_rules(routine, alpha, beta):
    rng = rng_for("mscalars", routine, alpha, beta)
    n, dtype = 21, np.dtype(np.complex128)
    if routine == "gemv":
        A = random_array(rng, (n, n + 4), dtype)
        full, kw, inner = A, {"trans": "N"}, n + 4
    else:
        A, full = triangle_with_nan(rng, n, dtype, True, routine == "hemv")
        kw, inner = {"lower": True}, n
    x = random_array(rng, (inner,), dtype)
    D = distribute(A, devices=3, nb=4)
    y = random_array(rng, (n,), dtype) if beta != 0 else np.full(n, np.nan, dtype)  # beta = 0: y not read
    res = FN[routine](D, x, y, alpha=alpha, beta=beta, **kw)
    assert np.all(np.isfinite(res))
    assert gemv_error_ratio(res, full, x, None if beta == 0 else y, alpha, beta, "N") < THRESHOLD
    if alpha == 0:  # A and x not read: NaN there does not propagate
        Dn = distribute(np.full_like(A, np.nan), devices=2, nb=4)
        res = FN[routine](Dn, np.full(inner, np.nan, dtype), y, alpha=0.0, beta=beta, **kw)
        assert np.all(np.isfinite(res))


def test_strided_vectors_in_place_update_and_mixed_precision():
    rng = rng_for("mstrided")
    A = random_array(rng, (30, 30), np.float64)
    D = distribute(A, devices=4, nb=3)
    xbig = random_array(rng, (90,), np.float64)
    x = xbig[::-3]
    y = random_array(rng, (60,), np.float64)[::2].copy()
    y0 = y.copy()
    res = gemv(D, x, y, alpha=2.0, beta=1.0, out=y)  # BLAS's in-place update
    assert res is y
    assert gemv_error_ratio(res, A, x, y0, 2.0, 1.0, "N") < THRESHOLD
    S, full = triangle_with_nan(rng, 30, np.float32, True, False)
    Ds = distribute(S, devices=2, nb=4)
    x64 = random_array(rng, (30,), np.float64)
    r = symv(Ds, x64)  # float32 matrix, float64 x: promotes like numpy.result_type
    assert r.dtype == np.float64
    assert gemv_error_ratio(r.astype(np.float32), full, x64, None, 1.0, 0.0, "N") < THRESHOLD
    strided_out = np.full(60, np.nan)[::2]
    gemv(D, x, out=strided_out, trans="t")
    assert gemv_error_ratio(strided_out, A, x, None, 1.0, 0.0, "T") < THRESHOLD


def test_more_devices_than_blocks_and_empty():
    rng = rng_for("mempty")
    A = random_array(rng, (5, 5), np.float64)
    D = distribute(A, devices=5, nb=64)  # one block: devices 1..4 own nothing
    x = random_array(rng, (5,), np.float64)
    assert np.allclose(gemv(D, x), A @ x) and np.allclose(gemv(D, x, trans="T"), A.T @ x)
    E = distribute(np.zeros((0, 4)), devices=2, nb=2)
    assert gemv(E, np.ones(4)).shape == (0,) and np.array_equal(gemv(E, np.ones(0), trans="T"), np.zeros(4))
    Z = distribute(np.zeros((3, 0)), devices=2, nb=2)
    assert np.array_equal(gemv(Z, np.ones(0), np.ones(3), beta=2.0), np.full(3, 2.0))
    assert symv(distribute(np.zeros((0, 0)), devices=3), np.ones(0)).shape == (0,)


# --- bad input: named errors before any work ---------------------------------------------


def test_bad_input_errors_before_work():
    A = np.ones((6, 4))
    D = distribute(A, devices=2, nb=2)
    S = distribute(np.ones((5, 5)), devices=2, nb=2)
    out = np.full(6, np.nan)
    cases = [
        (TypeError, "dtype", lambda: gemv(D, np.ones(4, np.int64), out=out)),
        (TypeError, "dtype", lambda: gemv(D, np.ones(4), np.ones(6, np.int32), beta=1.0, out=out)),
        (ValueError, "x has shape", lambda: gemv(D, np.ones(5), out=out)),
        (ValueError, "x has shape", lambda: gemv(D, np.ones(4), trans="T", out=out)),
        (ValueError, "1-D", lambda: gemv(D, np.ones((4, 1)), out=out)),
        (ValueError, "broadcast", lambda: gemv(D, np.ones(4), np.ones(5), beta=1.0, out=out)),
        (ValueError, "out has shape", lambda: gemv(D, np.ones(4), out=np.empty(5))),
        (TypeError, "out has dtype", lambda: gemv(D, np.ones(4), out=np.empty(6, np.float32))),
        (ValueError, "trans", lambda: gemv(D, np.ones(4), trans="X", out=out)),
        (ValueError, "finite", lambda: gemv(D, np.ones(4), alpha=np.nan, out=out)),
        (TypeError, "complex", lambda: gemv(D, np.ones(4), alpha=1j, out=out)),
        (ValueError, "square", lambda: symv(D, np.ones(4), out=out)),
        (ValueError, "square", lambda: hemv(D, np.ones(6), out=out)),
        (TypeError, "lower", lambda: symv(S, np.ones(5), lower="yes")),
        (ValueError, "x has shape", lambda: symv(S, np.ones(4))),
        (TypeError, "setting", lambda: gemv(D, np.ones(4), setting="fast", out=out)),
    ]
    for exc, match, fn in cases:
        with pytest.raises(exc, match=match):
            fn()
        assert np.all(np.isnan(out)), match  # untouched
    assert np.array_equal(D.gather(), A)


# --- plans and kernels (no GPU needed) -----------------------------------------------------


def test_symv_kernels_registered_for_every_dtype():
    names = registered()[SOURCE.resolve()] if SOURCE.resolve() in registered() else registered()[SOURCE]
    for dt in DTYPES:
        fitting = [s for s in KBLAS_SETTINGS if s.fits("symv", dt)]
        assert fitting
        for s in fitting:
            assert kernel_name(dt, s) in names


def test_symv_plan_is_pure():
    s, tiles = symv_plan(1000, 448, np.float64, KblasSetting(64, 8), sms=132)
    assert tiles == 7 and s.parts >= 1
    s, tiles = symv_plan(1000, 0, np.float64, KblasSetting(32, 4, parts=3))
    assert tiles == 0 and s.parts == 3


# --- two GPUs (skipped here) ----------------------------------------------------------------


def _close_to_single(got, single, mag, n, dtype):
    """|mgpu - single| within 2 (n + 2) eps of the magnitude |alpha| |A| |x| + |beta| |y|."""
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(to_np(got) - to_np(single)) <= 2 * (n + 2) * eps * mag + np.finfo(dtype).tiny)


def mgpu_operands(rng, routine, trans, n, dtype):
    """(A, its full matrix, the routine's keywords, x, y) of a GPU case: GEMV an n x (n +
    37) matrix, SYMV/HEMV an order-n triangle_with_nan (`trans` 'L' or 'U' the triangle)."""
    herm = routine == "hemv" and dtype.kind == "c"
    if routine == "gemv":
        A = random_array(rng, (n, n + 37), dtype)
        full, kw = A, {"trans": trans}
        rows, inner = (n, n + 37) if trans == "N" else (n + 37, n)
    else:
        A, full = triangle_with_nan(rng, n, dtype, trans == "L", herm)
        kw, rows, inner = {"lower": trans == "L"}, n, n
    return A, full, kw, random_array(rng, (inner,), dtype), random_array(rng, (rows,), dtype)


@two_gpus
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("source", ("numpy", "cupy0", "cupy1"))
@pytest.mark.parametrize("nb", (32, 64, 128))
def test_gpu_distribute_gather(dtype, source, nb):
    import cupy as cp

    rng = rng_for("gpu-roundtrip", str(dtype), source, nb)
    A = random_array(rng, (301, 517), dtype)
    if source == "numpy":
        src = A
    else:
        with cp.cuda.Device(int(source[-1])):
            src = cp.asarray(A)
    D = distribute(src, devices=[0, 1], nb=nb)
    assert D.devices == (0, 1) and D.backend == "cupy"
    for d, local in enumerate(D.locals):
        assert local.device.id == d and local.strides[0] == local.itemsize
        assert local.strides[1] % 128 == 0  # padded leading dimension: aligned columns
        assert np.array_equal(cp.asnumpy(local), A[:, D.global_columns(d)])
    G = D.gather()
    assert isinstance(G, cp.ndarray) and G.device.id == 0 and np.array_equal(cp.asnumpy(G), A)
    with pytest.raises(ValueError, match="multiple of 32"):
        distribute(A, devices=[0, 1], nb=48)


@two_gpus
@pytest.mark.parametrize("routine,trans", [("gemv", "N"), ("gemv", "T"), ("gemv", "C"),
                                           ("symv", "L"), ("symv", "U"), ("hemv", "L"), ("hemv", "U")])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", (1, 33, 1000, 4097))
@pytest.mark.parametrize("x_on", ("first", "last", "host"))
@pytest.mark.parametrize("devices", ("two", "all"))
def test_gpu_devices_against_single_gpu(routine, trans, dtype, n, x_on, devices):
    """GPUs 0 and 1, and every visible GPU where there are three or more (n = 1
    and 33 leave GPUs without a block); x and y on the first or last of them,
    or on the host."""
    import cupy as cp

    if devices == "all" and gpu_count() < 3:
        pytest.skip(f"needs three or more CUDA GPUs for 'all' ({gpu_count()} visible; 'two' covers two)")
    devs = DEVICE_SETS[devices]
    rng = rng_for("gpu-mgpu", routine, trans, str(dtype), n, x_on, devices)
    A, full, kw, x, y = mgpu_operands(rng, routine, trans, n, dtype)
    rows, inner = y.shape[0], x.shape[0]
    D = distribute(A, devices=devs, nb=64)
    target = None if x_on == "host" else devs[0] if x_on == "first" else devs[-1]
    if target is None:
        xd, yd, out = x, y, np.full(rows, np.nan, dtype)
    else:
        with cp.cuda.Device(target):
            xd, yd, out = cp.asarray(x), cp.asarray(y), cp.full(rows, np.nan, dtype)
    res = FN[routine](D, xd, yd, alpha=1.25, beta=-0.5, out=out, **kw)
    assert res is out
    if target is not None:
        assert res.device.id == target
    got = to_np(res)
    assert np.all(np.isfinite(got))  # every output written; the NaN triangle never read
    op = "N" if routine != "gemv" else trans
    assert gemv_error_ratio(got, full, x, y, 1.25, -0.5, op) < THRESHOLD
    with cp.cuda.Device(0):
        single = FN[routine](cp.asarray(A), cp.asarray(x), cp.asarray(y), alpha=1.25, beta=-0.5, **kw)
    opA = wide(full) if op == "N" else (wide(full).T.conj() if op == "C" else wide(full).T)
    mag = 1.25 * (np.abs(opA) @ np.abs(wide(x))) + 0.5 * np.abs(wide(y))
    _close_to_single(got, single, mag, inner, dtype)


@two_gpus
@pytest.mark.parametrize("routine,trans", [("gemv", "N"), ("gemv", "T"), ("symv", "L"), ("hemv", "U")])
@pytest.mark.parametrize("dtype", (np.float64, np.complex64), ids=str)
@pytest.mark.parametrize("x_on", (0, 1))
def test_gpu_without_peer_access(monkeypatch, routine, trans, dtype, x_on):
    """The path for GPUs that cannot reach each other (x by a peer copy, GEMV N's
    entries gathered after it, partials through pinned host memory), forced on
    GPUs that can: the same result as with peer access, within rounding."""
    import cupy as cp

    from batched.kblas import mgpu

    dtype = np.dtype(dtype)
    n = 1000
    rng = rng_for("gpu-no-peer", routine, trans, str(dtype), x_on)
    A, full, kw, x, y = mgpu_operands(rng, routine, trans, n, dtype)
    rows, inner = y.shape[0], x.shape[0]
    D = distribute(A, devices=[0, 1], nb=64)
    with cp.cuda.Device(x_on):
        xd, yd = cp.asarray(x), cp.asarray(y)
        with_peer = FN[routine](D, xd, yd, alpha=1.25, beta=-0.5, **kw)
        monkeypatch.setattr(mgpu, "peer_access", lambda dst, src: dst == src)
        out = cp.full(rows, np.nan, dtype)
        res = FN[routine](D, xd, yd, alpha=1.25, beta=-0.5, out=out, **kw)
    assert res is out and res.device.id == x_on
    got = to_np(res)
    assert np.all(np.isfinite(got))
    op = "N" if routine != "gemv" else trans
    assert gemv_error_ratio(got, full, x, y, 1.25, -0.5, op) < THRESHOLD
    opA = wide(full) if op == "N" else wide(full).T
    mag = 1.25 * (np.abs(opA) @ np.abs(wide(x))) + 0.5 * np.abs(wide(y))
    _close_to_single(got, with_peer, mag, inner, dtype)


@two_gpus
@pytest.mark.parametrize("routine", ("gemv", "symv", "hemv"))
def test_gpu_random_in_place_and_streams(routine):
    """A matrix built in place (never whole on one GPU) against its sampled rows;
    the caller's stream on device 0 orders the inputs and the result."""
    import cupy as cp

    n = 3000
    D = DistributedMatrix.random((n, n), dtype=np.float64, seed=3, devices=[0, 1], nb=64)
    rows = np.array([0, 1, 777, n - 1])
    with cp.cuda.Device(0):
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            x = cp.random.RandomState(1).standard_normal(n)
            out = cp.full(n, np.nan)
            FN[routine](D, x, out=out)
            got = cp.asnumpy(out[cp.asarray(rows)])
        stream.synchronize()
    xh = cp.asnumpy(x)
    R = D.take_rows(rows)
    if routine == "gemv":
        ref = R @ xh
    else:  # lower triangle: row i is A[i, :i+1] then A[i+1:, i]
        C = D.take_columns(rows)
        ref = np.array([R[k, :i + 1] @ xh[:i + 1] + C[i + 1:, k] @ xh[i + 1:] for k, i in enumerate(rows)])
    mag = np.abs(R) @ np.abs(xh) + (0 if routine == "gemv" else np.abs(D.take_columns(rows)).T @ np.abs(xh))
    assert np.all(np.abs(got - ref) <= 2 * (n + 2) * np.finfo(np.float64).eps * mag)


@two_gpus
def test_gpu_from_function_with_cupy_blocks_and_errors():
    import cupy as cp

    def fn(rows, cols):  # runs with the owning GPU current: the block is made there
        assert cp.cuda.runtime.getDevice() in (0, 1)
        r = cp.arange(rows.start, rows.stop, dtype=cp.float64)[:, None]
        c = cp.arange(cols.start, cols.stop, dtype=cp.float64)[None, :]
        return r * 1000 + c

    D = DistributedMatrix.from_function((200, 300), fn, devices=[0, 1], nb=32)
    assert np.array_equal(cp.asnumpy(D.gather()), np.add.outer(np.arange(200) * 1000.0, np.arange(300)))
    H = distribute(np.ones((4, 4)), devices=2)
    with cp.cuda.Device(0):
        with pytest.raises(ValueError, match="host devices"):
            gemv(H, cp.ones(4))
    with cp.cuda.Device(0):
        x0 = cp.ones(300)
    with cp.cuda.Device(1):
        y1 = cp.ones(200)
    with pytest.raises(ValueError, match="GPU"):
        gemv(D, x0, y1, beta=1.0)
    S = DistributedMatrix.random((96, 96), devices=[0, 1], nb=32)
    with pytest.raises(ValueError, match="does not divide"):
        symv(S, x0[:96], setting=KblasSetting(64, 8))


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 1, reason="no CUDA GPU (CuPy cannot see a device)")
@pytest.mark.parametrize("routine,trans", [("gemv", "N"), ("gemv", "T"), ("symv", "L"), ("hemv", "U")])
@pytest.mark.parametrize("dtype", (np.dtype(np.float32), np.dtype(np.complex128)), ids=str)
def test_gpu_reduction_scalars_and_y(routine, trans, dtype):
    """The fused reduction on x's GPU: beta = 0 never reads y (NaN there stays
    out), y broadcast from one entry, y updated in place (out is y), alpha = 0.
    Over GPUs 0 and 1 with x on GPU 1, or over GPU 0 alone on a one-GPU machine."""
    import cupy as cp

    devices = [0, 1] if TWO_GPUS else [0]
    rng = rng_for("gpu-reduce", routine, trans, str(dtype))
    n = 200
    herm = routine == "hemv" and dtype.kind == "c"
    if routine == "gemv":
        A = random_array(rng, (n, n), dtype)
        full, kw, op = A, {"trans": trans}, trans
    else:
        A, full = triangle_with_nan(rng, n, dtype, trans == "L", herm)
        kw, op = {"lower": trans == "L"}, "N"
    D = distribute(A, devices=devices, nb=32)
    x = random_array(rng, (n,), dtype)
    opA = wide(full) if op == "N" else wide(full).T
    ref = opA @ wide(x)
    mag = np.abs(opA) @ np.abs(wide(x))  # |op(A)| |x|

    def close(got, want, alpha, y):
        """Within 4 (n + 2) eps of the largest |alpha| |op(A)| |x| + |y|."""
        bound = 4 * (n + 2) * np.finfo(dtype).eps * float(np.max(alpha * mag + y))
        np.testing.assert_allclose(to_np(got), want, rtol=0, atol=bound)

    with cp.cuda.Device(devices[-1]):
        xd = cp.asarray(x)
        got = FN[routine](D, xd, cp.full(n, np.nan, dtype), alpha=2.0, beta=0.0, **kw)
        assert got.device.id == devices[-1]
        close(got, 2 * ref, 2, 0)
        y = cp.full(n, 3.0, dtype)
        res = FN[routine](D, xd, y, beta=-1.0, out=y, **kw)  # in place
        assert res is y
        close(y, ref - 3, 1, 3)
        one = FN[routine](D, xd, cp.full(1, 5.0, dtype), beta=1.0, **kw)  # y broadcast
        close(one, ref + 5, 1, 5)
        zero = FN[routine](D, xd, cp.full(n, 7.0, dtype), alpha=0.0, beta=0.5, **kw)
        assert np.array_equal(to_np(zero), np.full(n, 3.5, dtype))
