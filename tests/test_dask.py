"""Batches on Dask (batched/_dask.py): every batched routine on a Dask array
chunked along its batch axes equals the plain call, lazily, one task per chunk.

CPU tests use NumPy chunks; the GPU tests (CuPy chunks) skip without a GPU.
The routines are the exported (Dask-aware) ones of ``batched``: the wrapping is
what is under test.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install 'batched[dask]')")
import dask  # noqa: E402

import batched as bt  # noqa: E402
from batched import _dask  # noqa: E402
from conftest import HAVE_GPU, NO_GPU_REASON  # noqa: E402

# Batch layouts: (batch shape, chunks of the batch axes).
LAYOUTS = {
    "uneven": ((10,), ((3, 3, 4),)),
    "one-chunk": ((7,), ((7,),)),
    "two-dims": ((4, 5), ((1, 3), (2, 3))),
    "empty": ((0,), ((0,),)),
}


def _rng(*key):
    return np.random.default_rng(abs(hash(key)) % 2**32)


def _mat(rng, batch, m, n, dtype=np.float64):
    a = rng.standard_normal((*batch, m, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((*batch, m, n))
    return a.astype(dtype)


def _well(rng, batch, n, dtype=np.float64):
    return _mat(rng, batch, n, n, dtype) + 4 * n * np.eye(n)


def _spd(rng, batch, n):
    a = _mat(rng, batch, n, n)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _vec(rng, batch, n, dtype=np.float64):
    return _mat(rng, batch, n, 1, dtype)[..., 0]


# name -> builder(rng, batch) -> (args, kwargs) with NumPy arrays; every array
# whose leading axes are the batch becomes a Dask array in the tests.
def _getrs_args(rng, batch):
    lu, ipiv, _ = bt.getrf(_well(rng, batch, 4))
    return (lu, ipiv, _vec(rng, batch, 4)), {"trans": "T"}


def _geqrf_out(rng, batch):
    return bt.geqrf(_mat(rng, batch, 5, 3))


def _gebrd_out(rng, batch):
    return bt.gebrd(_mat(rng, batch, 5, 3))


CASES = {
    "gemv": lambda r, b: ((_mat(r, b, 5, 4), _vec(r, b, 4), _vec(r, b, 5)), {"alpha": 2.0, "beta": 0.5}),
    "gemm": lambda r, b: ((_mat(r, b, 3, 4), _mat(r, b, 2, 4), _mat(r, b, 3, 2)),
                          {"transb": "T", "beta": 1.0}),
    "trsv": lambda r, b: ((_well(r, b, 4), _vec(r, b, 4)), {"lower": True}),
    "solve_triangular": lambda r, b: ((_well(r, b, 4), _mat(r, b, 4, 2)), {"trans": 1}),
    "nrm2": lambda r, b: ((_vec(r, b, 6),), {}),
    "asum": lambda r, b: ((_vec(r, b, 6, np.complex128),), {}),
    "iamax": lambda r, b: ((_vec(r, b, 6),), {}),
    "dot": lambda r, b: ((_vec(r, b, 6, np.complex128), _vec(r, b, 6, np.complex128)), {}),
    "dotc": lambda r, b: ((_vec(r, b, 6, np.complex128), _vec(r, b, 6, np.complex128)), {}),
    "scal": lambda r, b: ((r.standard_normal(b), _vec(r, b, 6)), {}),
    "axpy": lambda r, b: ((3.0, _vec(r, b, 6), _vec(r, b, 6)), {}),
    "solve": lambda r, b: ((_well(r, b, 4), _vec(r, b, 4)), {}),
    "inv": lambda r, b: ((_well(r, b, 4, np.complex64),), {}),
    "getrf": lambda r, b: ((_mat(r, b, 4, 3),), {}),
    "getrs": _getrs_args,
    "gesv": lambda r, b: ((_well(r, b, 4), _mat(r, b, 4, 2)), {}),
    "lu_factor": lambda r, b: ((_well(r, b, 4),), {}),
    "lu_solve": lambda r, b: ((bt.lu_factor(_well(r, b, 4)), _vec(r, b, 4)), {"trans": 2}),
    "cholesky": lambda r, b: ((_spd(r, b, 4),), {"upper": True}),
    "cho_factor": lambda r, b: ((_spd(r, b, 4),), {}),
    "cho_solve": lambda r, b: ((bt.cho_factor(_spd(r, b, 4), lower=True), _mat(r, b, 4, 3)), {}),
    "potrf": lambda r, b: ((_spd(r, b, 4),), {}),
    "potrs": lambda r, b: ((bt.potrf(_spd(r, b, 4))[0], _vec(r, b, 4)), {}),
    "posv": lambda r, b: ((_spd(r, b, 4), _vec(r, b, 4)), {"lower": False}),
    "qr": lambda r, b: ((_mat(r, b, 5, 3),), {}),
    "geqrf": lambda r, b: ((_mat(r, b, 5, 3),), {}),
    "orgqr": lambda r, b: (_geqrf_out(r, b)[:2], {"n_columns": 5}),
    "gels": lambda r, b: ((_mat(r, b, 5, 3), _vec(r, b, 5)), {}),
    "lstsq": lambda r, b: ((_mat(r, b, 5, 3), _mat(r, b, 5, 2)), {}),
    "gebrd": lambda r, b: ((_mat(r, b, 3, 5, np.complex128),), {}),
    "orgbr": lambda r, b: (("P", _gebrd_out(r, b)[0], _gebrd_out(r, b)[4]), {}),
    "bdsqr": lambda r, b: ((_vec(r, b, 4), _vec(r, b, 3)), {"vt": _mat(r, b, 4, 2), "lower": True}),
    "svdvals": lambda r, b: ((_mat(r, b, 5, 3, np.float32),), {}),
    "svd": lambda r, b: ((_mat(r, b, 3, 4, np.complex128),), {"full_matrices": True}),
}


def test_every_routine_has_a_case_and_is_wrapped():
    assert set(CASES) == set(_dask.SPECS)
    for name in _dask.SPECS:
        assert getattr(bt, name).dask_spec is _dask.SPECS[name], name


def _to_dask(value, batch, chunks):
    """Arrays whose leading axes are the batch become Dask arrays (core axes whole)."""
    if isinstance(value, tuple) and not hasattr(value, "shape"):
        return tuple(_to_dask(v, batch, chunks) for v in value)
    if isinstance(value, np.ndarray) and value.shape[:len(batch)] == batch and value.ndim >= len(batch):
        return da.from_array(value, chunks=tuple(chunks) + (-1,) * (value.ndim - len(batch)))
    return value


def _flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def _assert_same(got, ref, batch=None):
    got, ref = _flat(got), _flat(ref)
    assert len(got) == len(ref)
    lazy = [g for g in got if isinstance(g, da.Array)]
    values = iter(dask.compute(*lazy))
    for g, r in zip(got, ref):
        if isinstance(g, da.Array):
            v = next(values)
            assert isinstance(v, np.ndarray) and v.shape == r.shape and v.dtype == r.dtype, (v, r)
            tol = 1e-4 if r.dtype in (np.float32, np.complex64) else 1e-11
            np.testing.assert_allclose(v, r, rtol=tol, atol=tol)
        else:
            assert not isinstance(r, np.ndarray)
            assert g == r


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(CASES))
def test_routine_equals_plain_call(name, layout):
    batch, chunks = LAYOUTS[layout]
    args, kwargs = CASES[name](_rng(name, layout), batch)
    fn = getattr(bt, name)
    ref = fn(*args, **kwargs)
    got = fn(*_to_dask(args, batch, chunks), **{k: _to_dask(v, batch, chunks) for k, v in kwargs.items()})
    # QRResult stays a QRResult, a tuple a tuple, a single array a single (Dask) array
    assert type(got) is type(ref) if isinstance(ref, tuple) else isinstance(got, da.Array)
    for g in _flat(got):
        if isinstance(g, da.Array):
            assert g.chunks[:len(batch)] == tuple(chunks)  # one task per input chunk
            assert all(len(c) == 1 for c in g.chunks[len(batch):])
    _assert_same(got, ref)


@pytest.mark.parametrize("name", ["solve", "svd", "lstsq", "cho_factor", "lu_factor", "solve_triangular"])
def test_check_false_appends_global_info(name):
    batch, chunks = LAYOUTS["two-dims"]
    args, kwargs = CASES[name](_rng(name), batch)
    fn = getattr(bt, name)
    got = fn(*_to_dask(args, batch, chunks), **kwargs, check=False)
    ref = fn(*args, **kwargs, check=False)
    assert _flat(got)[-1].shape == batch and _flat(got)[-1].dtype == np.int32
    _assert_same(got, ref)


# --- broadcasting with non-Dask arguments --------------------------------------------------------

def test_numpy_matrix_with_dask_stack_of_vectors():
    rng = _rng("bcast1")
    A, X = _mat(rng, (), 5, 4), _vec(rng, (9,), 4)
    got = bt.gemv(A, da.from_array(X, chunks=4))
    np.testing.assert_allclose(got.compute(), bt.gemv(A, X), rtol=1e-12)
    B = _mat(rng, (9,), 4, 2)
    A4 = _well(rng, (), 4)
    got = bt.solve(A4, da.from_array(B, chunks=(4, 4, 2)))
    np.testing.assert_allclose(got.compute(), bt.solve(A4, B), rtol=1e-12)


def test_dask_matrices_with_one_numpy_vector():
    rng = _rng("bcast2")
    A, x = _well(rng, (10,), 4), _vec(rng, (), 4)
    dA = da.from_array(A, chunks=(3, 4, 4))
    for name in ("gemv", "solve", "trsv", "gesv", "posv"):
        a = _spd(rng, (10,), 4) if name == "posv" else A
        got = getattr(bt, name)(da.from_array(a, chunks=(3, 4, 4)), x)
        _assert_same(got, getattr(bt, name)(a, x))
    # a NumPy operand with the batch axes is split to the Dask chunks
    y = _vec(rng, (10,), 4)
    np.testing.assert_allclose(bt.gemv(dA, y).compute(), bt.gemv(A, y), rtol=1e-12)


def test_batch_dimensions_broadcast_between_dask_operands():
    rng = _rng("bcast3")
    A, B = _mat(rng, (3, 1), 2, 4), _mat(rng, (1, 5), 4, 3)
    got = bt.gemm(da.from_array(A, chunks=(2, 1, 2, 4)), da.from_array(B, chunks=(1, 2, 4, 3)))
    assert got.shape == (3, 5, 2, 3) and got.chunks[:2] == ((2, 1), (2, 2, 1))
    np.testing.assert_allclose(got.compute(), bt.gemm(A, B), rtol=1e-12)
    # differently chunked operands are aligned
    x, y = _vec(rng, (12,), 5), _vec(rng, (12,), 5)
    got = bt.dot(da.from_array(x, chunks=(5, 5)), da.from_array(y, chunks=(3, 5)))
    np.testing.assert_allclose(got.compute(), bt.dot(x, y), rtol=1e-12)


def test_dask_per_vector_alpha_with_scalar_and_keyword_passthrough():
    rng = _rng("alpha")
    x, y = _vec(rng, (8,), 3), _vec(rng, (8,), 3)
    alpha = rng.standard_normal(8)
    got = bt.axpy(da.from_array(alpha, chunks=3), x, da.from_array(y, chunks=(4, 3)))
    np.testing.assert_allclose(got.compute(), bt.axpy(alpha, x, y), rtol=1e-12)
    A = _mat(rng, (8,), 3, 3)
    got = bt.gemv(da.from_array(A, chunks=(4, 3, 3)), x, trans="c", alpha=-1.5, setting=None)
    np.testing.assert_allclose(got.compute(), bt.gemv(A, x, trans="c", alpha=-1.5), rtol=1e-12)


# --- errors found before anything runs -----------------------------------------------------------

def test_chunked_matrix_axis_is_a_value_error_naming_the_rechunk():
    A = da.ones((6, 4, 4), chunks=(3, 2, 4))
    with pytest.raises(ValueError, match=r"A is chunked along its matrix axes \(1, 2\) .*"
                                         r"\(\(3, 3\), \(2, 2\), \(4,\)\).*A\.rechunk\(\{1: -1, 2: -1\}\)"):
        bt.solve(A, np.ones(4))
    with pytest.raises(ValueError, match=r"b is chunked .*b\.rechunk\(\{1: -1\}\)"):
        bt.solve(np.ones((6, 4, 4)), da.ones((6, 4), chunks=(3, 2)))
    with pytest.raises(ValueError, match=r"lu_and_piv\[0\]\.rechunk"):
        bt.lu_solve((da.ones((6, 4, 4), chunks=(6, 4, 1)), np.zeros((6, 4), np.int32)), np.ones(4))


def test_bad_arguments_raise_at_graph_time():
    A = da.ones((6, 4, 4), chunks=(3, 4, 4))
    with pytest.raises(ValueError, match="b"):
        bt.solve(A, np.ones(5))
    with pytest.raises(TypeError):
        bt.solve(A.astype(np.int64), np.ones(4))
    with pytest.raises(TypeError, match="out="):
        bt.gemv(A, np.ones(4), out=np.empty((6, 4)))
    with pytest.raises(TypeError, match="not Dask inputs"):
        bt.solve([da.ones((4, 4))], np.ones(4))
    with pytest.raises(ValueError, match="do not broadcast"):
        bt.gemm(A, da.ones((5, 4, 4), chunks=(5, 4, 4)))


# --- laziness ------------------------------------------------------------------------------------

def test_nothing_runs_before_compute_and_one_call_per_chunk():
    from batched.factorizations.lu import solve as plain_solve

    calls = []

    @functools.wraps(plain_solve)
    def counting(A, b, **kwargs):
        calls.append(A.shape[0])
        return plain_solve(A, b, **kwargs)

    solve = _dask.dask_aware(counting, "solve")
    rng = _rng("lazy")
    A, b = _well(rng, (10,), 4), _vec(rng, (10,), 4)
    x = solve(da.from_array(A, chunks=(3, 4, 4)), da.from_array(b, chunks=(3, 4)))
    x2 = x * 2
    assert all(c == 0 for c in calls)  # only the zero-batch probe ran
    calls.clear()
    np.testing.assert_allclose(x2.compute(), 2 * plain_solve(A, b), rtol=1e-12)
    assert sorted(calls) == [1, 3, 3, 3]


def test_several_outputs_share_their_chunk_task():
    from batched.factorizations.svd import svd as plain_svd

    calls = []

    @functools.wraps(plain_svd)
    def counting(A, *args, **kwargs):
        calls.append(A.shape[0])
        return plain_svd(A, *args, **kwargs)

    svd = _dask.dask_aware(counting, "svd")
    A = _mat(_rng("share"), (9,), 4, 3)
    U, S, Vh = svd(da.from_array(A, chunks=(3, 4, 3)))
    calls.clear()
    dask.compute(U, S, Vh)
    assert sorted(calls) == [3, 3, 3]


# --- numerical failures name global batch indices ------------------------------------------------

def _singular_third_chunk():
    A = _well(_rng("sing"), (10,), 4)
    A[7, :, 1] = 0  # chunks (3, 3, 4): index 7 is local index 1 of the third chunk
    return A


@pytest.mark.parametrize("name", ["solve", "inv"])
def test_singular_matrix_in_third_chunk_names_its_global_index(name):
    A = _singular_third_chunk()
    dA = da.from_array(A, chunks=(3, 4, 4))
    args = (dA, np.ones(4)) if name == "solve" else (dA,)
    result = getattr(bt, name)(*args)  # lazy: no error yet
    with pytest.raises(np.linalg.LinAlgError, match=r"batch indices \[7\] have an exactly zero pivot"):
        result.compute()
    out, info = getattr(bt, name)(*args, check=False)
    expected = np.zeros(10, np.int32)
    expected[7] = bt.getrf(A[7])[2]
    np.testing.assert_array_equal(info.compute(), expected)
    _assert_same((out, info), getattr(bt, name)(*((A,) + args[1:]), check=False))


def test_failure_with_two_batch_dimensions_names_index_tuples():
    A = _spd(_rng("chol2"), (4, 5), 3)
    A[2, 3] = -np.eye(3)
    L = bt.cholesky(da.from_array(A, chunks=(2, (2, 3), 3, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"not positive definite: batch indices \[\(2, 3\)\]"):
        L.compute()


def test_other_failures_name_global_indices():
    A = _mat(_rng("nan"), (9,), 4, 3)
    A[5, 0, 0] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match=r"SVD did not converge: batch indices \[5\]"):
        bt.svdvals(da.from_array(A, chunks=4)).compute()
    B = _mat(_rng("rank"), (9,), 4, 3)
    B[8, 1, 1] = np.nan
    with pytest.raises(np.linalg.LinAlgError,
                       match=r"SVD did not converge in Linear Least Squares: batch indices \[8\]"):
        dask.compute(*bt.lstsq(da.from_array(B, chunks=4), np.ones(4))[:3])
    T = _well(_rng("tri"), (9,), 3)
    T[4, 1, 1] = 0
    with pytest.raises(np.linalg.LinAlgError, match=r"batch indices \[4\]"):
        bt.solve_triangular(da.from_array(T, chunks=(3, 3, 3)), np.ones(3)).compute()


def test_lu_factor_warns_with_global_index():
    from scipy.linalg import LinAlgWarning

    lu, piv = bt.lu_factor(da.from_array(_singular_third_chunk(), chunks=(3, 4, 4)))
    with pytest.warns(LinAlgWarning, match=r"batch indices \[7\]"):
        dask.compute(lu, piv, scheduler="synchronous")


def test_unbatched_dask_matrix_failure():
    A = da.from_array(np.zeros((3, 3)), chunks=-1)
    with pytest.raises(np.linalg.LinAlgError, match="singular matrix"):
        bt.solve(A, np.ones(3)).compute()


# --- schedulers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_local_schedulers(scheduler):
    rng = _rng("sched")
    A, b = _well(rng, (20,), 8), _vec(rng, (20,), 8)
    with dask.config.set(scheduler=scheduler):
        x = bt.solve(da.from_array(A, chunks=(6, 8, 8)), da.from_array(b, chunks=(6, 8))).compute()
        s = bt.svdvals(da.from_array(A, chunks=(6, 8, 8))).compute()
    np.testing.assert_allclose(x, bt.solve(A, b), rtol=1e-12)
    np.testing.assert_allclose(s, bt.svdvals(A), rtol=1e-12)


def test_distributed_local_cluster_smoke():
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    rng = _rng("dist")
    A = _well(rng, (12,), 4)
    A[9] = 0
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as client:
        dA = da.from_array(A, chunks=(5, 4, 4))
        s = client.compute(bt.svdvals(dA[:8])).result()
        np.testing.assert_allclose(s, bt.svdvals(A[:8]), rtol=1e-12)
        with pytest.raises(np.linalg.LinAlgError, match=r"batch indices \[9\]"):
            client.compute(bt.solve(dA, np.ones(4))).result()


# --- without Dask --------------------------------------------------------------------------------

def test_import_and_plain_calls_without_dask():
    code = ("import sys; sys.modules['dask'] = None; sys.modules['distributed'] = None\n"
            "import numpy as np, batched as bt\n"
            "x = bt.solve(np.eye(3)[None] * 2, np.ones(3)); assert np.allclose(x, 0.5)\n"
            "assert bt.svdvals(np.eye(2)).shape == (2,)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plain_call_is_unchanged():
    A = _well(_rng("plain"), (3,), 4)
    assert type(bt.solve(A, np.ones(4))) is np.ndarray
    assert bt.solve.__wrapped__ is __import__("batched.factorizations.lu", fromlist=["solve"]).solve
    assert "Dask" in bt.solve.__doc__


# --- GPU: CuPy chunks (run on the GPU machine) ---------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=NO_GPU_REASON)
@pytest.mark.parametrize("name", ["gemv", "gemm", "solve", "svdvals", "svd", "getrf", "posv", "lstsq"])
@pytest.mark.parametrize("layout", ["uneven", "two-dims", "empty"])
def test_cupy_chunks_run_on_the_gpu(name, layout):
    import cupy

    batch, chunks = LAYOUTS[layout]
    args, kwargs = CASES[name](_rng(name, layout, "gpu"), batch)

    def on_gpu(value):
        if isinstance(value, tuple):
            return tuple(on_gpu(v) for v in value)
        if isinstance(value, np.ndarray) and value.shape[:len(batch)] == batch:
            cp = cupy.asarray(value)
            return da.from_array(cp, chunks=tuple(chunks) + (-1,) * (value.ndim - len(batch)), asarray=False)
        return cupy.asarray(value) if isinstance(value, np.ndarray) else value

    fn = getattr(bt, name)
    got = _flat(fn(*on_gpu(args), **kwargs))
    ref = _flat(fn(*args, **kwargs))
    lazy = [g for g in got if isinstance(g, da.Array)]
    assert all(isinstance(g._meta, cupy.ndarray) for g in lazy)
    values = [cupy.asnumpy(v) for v in dask.compute(*lazy)]
    assert all(v.shape == r.shape and v.dtype == r.dtype for v, r in zip(values, ref))
    if name == "svd":  # singular vectors only up to phase across backends: S and U S Vh
        U, S, Vh = values
        np.testing.assert_allclose(S, ref[1], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose((U[..., :, :3] * S[..., None, :]) @ Vh[..., :3, :], args[0], atol=1e-9)
        return
    for v, r in zip(values, ref):
        tol = 1e-3 if r.dtype in (np.float32, np.complex64) else 1e-9
        np.testing.assert_allclose(v, r, rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason=NO_GPU_REASON)
def test_cupy_chunk_singular_matrix_global_index():
    import cupy

    A = cupy.asarray(_singular_third_chunk())
    dA = da.from_array(A, chunks=(3, 4, 4), asarray=False)
    with pytest.raises(np.linalg.LinAlgError, match=r"batch indices \[7\]"):
        bt.solve(dA, cupy.ones(4)).compute()
    x, info = bt.solve(dA, cupy.ones(4), check=False)
    info = info.compute()
    assert isinstance(info, cupy.ndarray) and int(info[7]) > 0 and int(abs(info).sum()) == int(info[7])


def test_warnings_are_not_left_enabled():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bt.lu_factor(da.from_array(np.eye(3)[None].repeat(4, 0), chunks=(2, 3, 3)))[0].compute()


def test_modes_and_pass_through_flags_keep_their_meaning():
    A = _mat(_rng("modes"), (6,), 5, 3)
    dA = da.from_array(A, chunks=(4, 5, 3))
    R = bt.qr(dA, mode="r")
    assert isinstance(R, da.Array)
    np.testing.assert_allclose(R.compute(), bt.qr(A, mode="r"), rtol=1e-12)
    _assert_same(bt.qr(dA, mode="raw"), bt.qr(A, mode="raw"))
    S = _spd(_rng("flags"), (6,), 3)
    c = bt.cho_factor(da.from_array(S, chunks=(4, 3, 3)), lower=True)[0]
    x_lower, x_upper = bt.cho_solve((c, True), np.ones(3)), bt.cho_solve((c, False), np.ones(3))
    assert x_lower.name != x_upper.name  # a flag inside a tuple argument is part of the task's name
    np.testing.assert_allclose(x_lower.compute(), bt.cho_solve(bt.cho_factor(S, lower=True), np.ones(3)))


def _gpu_count() -> int:
    if not HAVE_GPU:
        return 0
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_count() < 2, reason="needs at least two CUDA GPUs (one dask-cuda worker each)")
@pytest.mark.parametrize("workers", ("two", "all"))
def test_local_cuda_cluster_workers(workers):
    """One worker per GPU (GPUs 0 and 1, or every visible GPU where there are
    three or more): CuPy chunks on several workers, results equal the plain
    NumPy call, a singular matrix named by its global batch index."""
    count = 2 if workers == "two" else _gpu_count()
    if workers == "all" and count < 3:
        pytest.skip(f"needs three or more CUDA GPUs for 'all' ({count} visible; 'two' covers two)")
    dask_cuda = pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    import cupy

    rng = _rng("cuda-cluster")
    A = _well(rng, (64,), 8)
    A[43, :, 2] = 0
    b = _vec(rng, (64,), 8)
    visible = ",".join(str(d) for d in range(count))
    with dask_cuda.LocalCUDACluster(CUDA_VISIBLE_DEVICES=visible, threads_per_worker=1,
                                    dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == count
        dA = da.from_array(A, chunks=(8, 8, 8)).map_blocks(cupy.asarray, dtype=A.dtype, meta=cupy.empty((0, 0, 0)))
        db = da.from_array(b, chunks=(8, 8)).map_blocks(cupy.asarray, dtype=b.dtype, meta=cupy.empty((0, 0)))
        dA, db = client.persist([dA, db])
        distributed.wait([dA, db])
        holders = {w for w, keys in client.has_what().items() if keys}
        # The chunks live on several GPUs' workers (Dask places the 8 chunks
        # itself: unevenly, and with four workers one may get none).
        assert len(holders) == 2 if count == 2 else len(holders) >= 2
        s = client.compute(bt.svdvals(dA)).result()
        assert isinstance(s, cupy.ndarray)
        np.testing.assert_allclose(cupy.asnumpy(s), bt.svdvals(A), rtol=1e-10, atol=1e-12)  # one is zero
        x, info = (f.result() for f in client.compute(list(bt.solve(dA, db, check=False))))
        x_ref, info_ref = bt.solve(A, b, check=False)
        np.testing.assert_array_equal(cupy.asnumpy(info), info_ref)
        assert int(info[43]) > 0 and int(abs(info).sum()) == int(info[43])
        good = np.arange(64) != 43
        np.testing.assert_allclose(cupy.asnumpy(x)[good], x_ref[good], rtol=1e-10)
        with pytest.raises(np.linalg.LinAlgError, match=r"batch indices \[43\]"):
            client.compute(bt.solve(dA, db)).result()
