"""Shared fixtures: one test body for both backends.

The ``xp`` fixture runs a test once with NumPy (the CPU backend) and once with
CuPy (the GPU).  The CuPy run carries the ``gpu`` marker (declared in
pyproject.toml) and is skipped, with its reason, where CuPy sees no device.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import batched

# tests/ is not a package: make ``residuals`` and ``strategies`` importable.
sys.path.insert(0, str(Path(__file__).resolve().parent))

NO_GPU_REASON = "no CUDA GPU (CuPy cannot see a device)"
HAVE_GPU = batched.gpu_available()

#: Apply to a test that only makes sense on a GPU (e.g. mixing devices).
requires_gpu = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_GPU, reason=NO_GPU_REASON)]


# BATCHED_FAILURE_LOG=PATH: each failing test's id and the last line of its report are
# appended to PATH as it fails (tools/device_check.sh sets it).  Why: under pytest-xdist
# the names of failures are printed only at the end of the run, and a device step that
# hits its time limit is killed first (session 33 lost the name of a failure that way,
# twice).  Written by the controlling process, which receives every worker's reports
# (a worker, PYTEST_XDIST_WORKER set, would write each line a second time).
FAILURE_LOG = None if os.environ.get("PYTEST_XDIST_WORKER") else os.environ.get("BATCHED_FAILURE_LOG")


def pytest_runtest_logreport(report):
    if FAILURE_LOG and report.failed:
        last = str(report.longrepr).strip().splitlines()[-1:] if report.longrepr else []
        with open(FAILURE_LOG, "a") as f:
            f.write(f"{report.nodeid} [{report.when}] {' '.join(last)}\n")


def _cupy():
    import cupy

    return cupy


@pytest.fixture(scope="session", params=[
    pytest.param("numpy", id="numpy"),
    pytest.param("cupy", id="cupy", marks=requires_gpu),
])
def xp(request):
    """The array module of the backend under test (session scope: hypothesis-safe)."""
    if request.param == "numpy":
        return np
    return _cupy()


def to_xp(xp, a):
    """A NumPy array (or None, or a list of arrays) on the backend ``xp``.

    CuPy may not keep exotic strides of its input; tests that care about the
    memory layout build it on the backend with ``strategies.arrange``.
    """
    if a is None:
        return None
    if isinstance(a, (list, tuple)):
        return [to_xp(xp, v) for v in a]
    if xp is np:
        return np.array(a, copy=True)
    return xp.asarray(a)


def to_np(a):
    """Back to NumPy (``cupy.asnumpy`` for CuPy arrays); lists element-wise."""
    if a is None:
        return None
    if isinstance(a, (list, tuple)):
        return [to_np(v) for v in a]
    if isinstance(a, np.ndarray):
        return a
    if HAVE_GPU or "cupy" in sys.modules:
        import cupy

        if isinstance(a, cupy.ndarray):
            return cupy.asnumpy(a)
    return np.asarray(a)


def nan_like_out(xp, shape, dtype):
    """An output buffer poisoned with NaN, so an element left unwritten fails."""
    return xp.full(shape, np.nan, dtype=dtype)


def synchronize(xp):
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def snapshot(*arrays):
    """Host copies of the inputs, to check afterwards that nothing modified them."""
    return [None if a is None else np.array(to_np(a), copy=True) for a in arrays]


def assert_unchanged(arrays, before):
    for i, (a, b) in enumerate(zip(arrays, before)):
        if a is None:
            continue
        assert np.array_equal(to_np(a), b, equal_nan=True), f"input {i} was modified"


def rng_for(*key):
    """A generator seeded from the test's parameters (stable across runs)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def gpu_only_setting(xp, setting):
    """Settings pick GPU kernels; the CPU backend has one path, run once (setting None)."""
    if xp is np and setting is not None:
        pytest.skip("settings choose GPU kernels; the CPU backend is covered with setting=None")


def poison_pool(xp, nbytes):
    """Leave a NaN-filled block of ``nbytes`` in CuPy's pool (freed at once), so the
    next result of that size starts as NaN and an unwritten element fails the
    check.  Best effort: the pool may hand out another block."""
    if xp is not np and nbytes:
        xp.full(-(-nbytes // 8), np.nan, dtype=np.float64)
