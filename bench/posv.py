"""Batched Cholesky solve (POSV) and factorization (POTRF) against PyTorch and CuPy.

Cases: C-ordered stacked symmetric positive definite matrices (batch, n, n)
(a random matrix, symmetrized, plus its absolute row sums + 1 on the diagonal), DPOSV and SPOSV
with one right-hand side (batch, n), and DPOTRF alone; n in 2..256; the batch
sized so the stored matrices take 256 MiB.  ``trans`` in a row is 'L' (the lower
triangle is factored).  At n = 32, 64 and 128 every setting can be timed with
``--sweep``, which locates the default chooser's switch-overs (fused sub-warp /
warp, fused four-warp, blocked).

Bytes: POSV reads A and b and writes the factor c and x (2 n^2 + 2 n elements per
system; the issue's memory floor counts A, b and x only: n^2 + 2 n); POTRF reads A
and writes c (2 n^2).  Flops: n^3 / 3 per factorization plus 2 n^2 per solve.
Peers: ``torch`` = torch.linalg.cholesky + torch.cholesky_solve (POSV) and
torch.linalg.cholesky_ex (POTRF); ``cupyx`` = cupyx.lapack.posv (cuSOLVER
potrfBatched + potrsBatched) for POSV and cupy.linalg.cholesky for POTRF (left
out where they do not take a batch).  For POTRF the comparison is on the lower
triangle (ours keeps A's upper triangle, as LAPACK does).

Usage: python3 bench/posv.py [--quick] [--sweep] [--dry-run] [--dtype D] [--results-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batched.factorizations.cholesky import posv, potrf  # noqa: E402
from batched.factorizations.cholesky_settings import CHOLESKY_SETTINGS  # noqa: E402
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SIZES = (2, 4, 8, 16, 32, 64, 128, 256)


def case(routine, dtype, n, setting=None) -> Case:
    batch = harness.batch_for(n * n * np.dtype(dtype).itemsize)
    return Case(routine, dtype, "uniform", "L", n, n, 1 if routine == "posv" else 0, batch,
                setting=setting, repeats=10, note=routine)


def all_cases() -> list[Case]:
    cases = [case("posv", dt, n) for dt in ("float64", "float32") for n in SIZES]
    cases += [case("potrf", "float64", n) for n in SIZES]
    return cases


def quick_cases() -> list[Case]:
    return [case("posv", "float64", 8), case("posv", "float64", 32), case("posv", "float32", 128),
            case("potrf", "float64", 16), case("potrf", "float64", 256)]


def traffic(c: Case):
    item = np.dtype(c.dtype).itemsize
    n = c.n
    cplx = 4 if c.dtype.startswith("c") else 1
    flops = n ** 3 // 3 + (2 * n * n if c.routine == "posv" else 0)
    elems = 2 * n * n + (2 * n if c.routine == "posv" else 0)
    return elems * item * c.batch, flops * c.batch * cplx


def build(c: Case, index: int) -> Operands:
    import cupy as cp

    n = c.n
    M = harness.random_array((c.batch, n, n), c.dtype, 7919 * index + 11)
    A = (M + M.swapaxes(-1, -2)) / 2
    # strictly diagonally dominant with a positive diagonal, so positive definite for every
    # one of millions of matrices (a fixed shift of 2n is not, for n = 2), and well
    # conditioned: the peers agree to rounding
    A[:, cp.arange(n), cp.arange(n)] += cp.abs(A).sum(axis=-1) + 1
    del M
    data = {"A": A}
    if c.routine == "posv":
        data["b"] = harness.random_array((c.batch, n), c.dtype, 7919 * index + 12)
    torch = harness.torch_or_none()
    if torch is not None:
        data["tA"] = harness.as_torch(torch, A)
        if "b" in data:
            data["tb"] = harness.as_torch(torch, data["b"]).unsqueeze(-1)
    if c.routine == "posv":
        return Operands(data, ours_view=lambda r: r[1])
    return Operands(data, ours_view=lambda r: cp.tril(r[0]))


def ours(c: Case, d: dict, setting):
    if c.routine == "posv":
        return posv(d["A"], d["b"], setting=setting)
    return potrf(d["A"], setting=setting)


def peer_torch(c: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    if c.routine == "posv":
        return torch.cholesky_solve(d["tb"], torch.linalg.cholesky(d["tA"]))
    return torch.linalg.cholesky_ex(d["tA"]).L


def peer_cupy(c: Case, d: dict):
    import cupy as cp

    try:
        if c.routine == "posv":
            import cupyx.lapack

            return cupyx.lapack.posv(d["A"], d["b"])
        return cp.linalg.cholesky(d["A"])
    except (ValueError, TypeError, RuntimeError) as exc:  # no batch support in this CuPy
        raise NotApplicable from exc


def main(argv=None, print_table: bool = True) -> list:
    return harness.script_main("posv", "Batched POSV / POTRF benchmark", argv, peers={"cupy": peer_cupy},
                               torch_peer=peer_torch, traffic_fn=traffic, settings=CHOLESKY_SETTINGS,
                               all_cases=all_cases, quick_cases=quick_cases, ours=ours, build=build, print_table=print_table)

if __name__ == "__main__":
    main()
