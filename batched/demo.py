"""The demo workloads: FEM-style GEMVs, small GEMMs, triangular and dense solves and
singular values, checked against NumPy.

Runs on the GPU when CuPy sees one and on the CPU backend otherwise, and
prints backend, routine, batch, time and the largest relative error against a
float64 NumPy reference.  Later routines add their workloads here.
"""

from __future__ import annotations

import time

import numpy as np

from . import gemm, gemv
from .factorizations.lu import solve
from .factorizations.svd import svdvals
from .factorizations.trsv import solve_triangular
from ._arrays import gpu_available


def _workloads(rng, scale=1):
    """(name, batch, host args, ours, reference) per workload; ``scale`` divides every batch."""
    # FEM element operators: 100,000 gradients (81 quadrature values x 8 nodes).
    count = 100_000 // scale
    A = rng.standard_normal((count, 81, 8))
    x = rng.standard_normal((count, 8))
    yield "gemv 81x8", count, (A, x), lambda xp, A, x: gemv(A, x), lambda A, x: A @ x[..., None]
    # Small dense blocks: 50,000 products of 16x16 matrices.
    count = 50_000 // scale
    B = rng.standard_normal((count, 16, 16))
    C = rng.standard_normal((count, 16, 16))
    yield "gemm 16x16", count, (B, C), lambda xp, B, C: gemm(B, C), lambda B, C: B @ C
    # Forward substitution after 50,000 small Cholesky/LU factorizations: L x = b, 32x32.
    L = np.tril(rng.standard_normal((count, 32, 32))) / 8 + 4 * np.eye(32)
    b = rng.standard_normal((count, 32))
    yield ("trsv 32x32", count, (L, b),
           lambda xp, L, b: solve_triangular(L, b, lower=True),
           lambda L, b: np.linalg.solve(L, b[..., None])[..., 0])
    # Many small dense systems (FEM element problems, per-pixel fits): 500,000 of 8x8.
    count = 500_000 // scale
    A = rng.standard_normal((count, 8, 8)) + 8 * np.eye(8)
    b = rng.standard_normal((count, 8))
    yield ("solve 8x8", count, (A, b), lambda xp, A, b: solve(A, b),
           lambda A, b: np.linalg.solve(A, b[..., None])[..., 0])
    # Singular values of 100,000 16x16 matrices (compression, statistics).
    count = 100_000 // scale
    A = rng.standard_normal((count, 16, 16))
    yield ("svdvals 16x16", count, (A,), lambda xp, A: svdvals(A),
           lambda A: np.linalg.svd(A, compute_uv=False))


def _timed(fn, sync, repeats=5):
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return result, float(np.median(times))


def run(argv=(), scale=None) -> int:
    """Run every workload; ``scale`` divides the batches (default 1 on the GPU, 10 on
    the CPU backend, where the full batches would take minutes)."""
    rng = np.random.default_rng(2026)
    if gpu_available():
        import cupy as xp

        backend = f"GPU ({xp.cuda.runtime.getDeviceProperties(xp.cuda.runtime.getDevice())['name'].decode()})"
        sync = xp.cuda.Device().synchronize
        to_host = xp.asnumpy
    else:
        xp, backend = np, "CPU (NumPy backend)"
        sync = lambda: None  # noqa: E731
        to_host = np.asarray
    print(f"{'backend':<28} {'routine':<12} {'batch':>8} {'time (ms)':>10} {'max rel err':>12}")
    worst = 0.0
    for name, batch, host_args, ours, reference in _workloads(rng, scale or (1 if xp is not np else 10)):
        args = [xp.asarray(a) for a in host_args]
        result, seconds = _timed(lambda: ours(xp, *args), sync)
        ref = reference(*host_args).reshape(to_host(result).shape)
        err = float(np.max(np.abs(to_host(result) - ref)) / np.max(np.abs(ref)))
        worst = max(worst, err)
        print(f"{backend:<28} {name:<12} {batch:>8} {seconds * 1e3:>10.3f} {err:>12.2e}")
    ok = worst < 1e-12
    print("all results match NumPy" if ok else "MISMATCH against NumPy")
    return 0 if ok else 1
