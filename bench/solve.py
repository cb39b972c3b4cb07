"""Batched linear solves (GESV) and LU (GETRF) against cuSOLVER/cuBLAS through CuPy and PyTorch.

Cases: C-ordered stacked matrices (batch, n, n), random N(0, 1) plus n on the
diagonal (well conditioned, so every solver agrees to rounding and picks the same
pivots), one right-hand side as a batch of vectors (batch, n); n in 2..128;
DGESV and SGESV, and DGETRF alone; the batch sized so that A takes 256 MiB.

- ``gesv`` rows time ``solve(A, b, check=False)`` (the fused factor-and-solve
  kernel up to n = 64: A read once, x written, no factors stored), the call a
  user of ``numpy.linalg.solve`` makes; bytes count A and b read and x written,
  which is the issue's memory floor.  Peers: ``cupy`` = cupy.linalg.solve(A,
  b[..., None]) (cuBLAS getrf/getrsBatched), ``torch`` = torch.linalg.solve(A, b).
- ``getrf`` rows time ``getrf(A)`` (lu written column-major, ipiv, info); bytes
  count A read, lu written and ipiv.  Peer: ``torch`` = torch.linalg.lu_factor_ex.
- POSV / POTRF rows (``torch.linalg.cholesky`` + ``cholesky_solve``,
  ``torch.linalg.cholesky_ex``) are added by the Cholesky work: see the marked
  place in :func:`all_cases`.

``--sweep`` times every LU setting forced (LU_SETTINGS: fused, blocked, the thread
design, one thread per matrix in registers for n <= 8, and the rows design, a row per
lane for n <= 32) on each uniform case;
a setting that cannot take the case (NB below n, a thread setting not compiled for
the dtype) raises before any launch and is recorded as None.  A forced ``gesv``
setting does ``solve``'s work (X only, no factors stored), so that its time
compares with the default row's.

Flops: 2n^3/3 for the factorization plus 2n^2 per right-hand side (times 4 for
complex).  The limit of a row: the bandwidth roofline up to n = 16 (GESV there
is memory bound: the issue asks >= 50 % of it), the FP64/FP32 peak beyond.
Targets of the issue (H100): DGESV/SGESV >= 5x the best peer for n <= 16, >= 3x at
32, >= 1.5x at 64..128.

Usage: python3 bench/solve.py [--quick] [--sweep] [--dry-run] [--dtype D] [--results-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batched.factorizations import lu as lu_module  # noqa: E402
from batched.factorizations.lu_settings import LU_SETTINGS  # noqa: E402
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

# 72 and 96: issue 7's 1.5x is for n = 64-128, and the panels design between its two ends
# (one block an SM for any n from 65) ran DGESV 72 0.77x and 96 1.0x cupy (session 65)
SIZES = (2, 4, 8, 16, 32, 64, 72, 96, 128)
BANDWIDTH_BOUND_UP_TO = 16


def case(routine, dtype, n, setting=None) -> Case:
    """One right-hand side for ``gesv`` (k = 1), none for ``getrf`` (k = 0)."""
    batch = harness.batch_for(n * n * np.dtype(dtype).itemsize)
    return Case(routine, dtype, "uniform", "N", n, n, 1 if routine == "gesv" else 0, batch, setting=setting,
                repeats=10, note=routine)


def all_cases() -> list[Case]:
    cases = [case("gesv", dt, n) for dt in ("float64", "float32") for n in SIZES]
    cases += [case("getrf", "float64", n) for n in SIZES]
    # --- POSV / POTRF cases go here (Cholesky work; peers torch.linalg.cholesky +
    # --- cholesky_solve and torch.linalg.cholesky_ex) ---
    return cases


def quick_cases() -> list[Case]:
    return [case("gesv", "float64", 8), case("gesv", "float32", 32), case("gesv", "float64", 128),
            case("getrf", "float64", 16)]


def traffic(c: Case):
    item = np.dtype(c.dtype).itemsize
    n, k = c.n, max(c.k, 1)
    per_flop = 4 if c.dtype.startswith("complex") else 1
    factor_flops = 2 * n**3 // 3
    if c.routine == "gesv":
        return (n * n + 2 * n * k) * item * c.batch, (factor_flops + 2 * n * n * k) * per_flop * c.batch
    if c.routine == "getrf":
        return (2 * n * n * item + 4 * n) * c.batch, factor_flops * per_flop * c.batch
    raise ValueError(f"no traffic model for {c.routine!r}")


def limit(c: Case, nbytes, flops, ceilings, info) -> str:
    if c.n <= BANDWIDTH_BOUND_UP_TO:
        return "bandwidth"
    return "fp32_peak" if c.dtype in ("float32", "complex64") else "fp64_peak"


def build(c: Case, index: int) -> Operands:
    import cupy as cp

    n = c.n
    A = harness.random_array((c.batch, n, n), c.dtype, 7907 * index + 11)
    A[:, cp.arange(n), cp.arange(n)] += n   # well conditioned: the peers agree to rounding
    data = {"A": A}
    torch = harness.torch_or_none()
    if c.routine == "gesv":
        data["b"] = harness.random_array((c.batch, n), c.dtype, 7907 * index + 12)
    if torch is not None:
        data["tA"] = harness.as_torch(torch, A)
        if "b" in data:
            data["tb"] = harness.as_torch(torch, data["b"])
    first = lambda r: r[0]  # noqa: E731  (x of (x, info); lu of (lu, ipiv, info))
    return Operands(data, ours_view=first, peer_view=first if c.routine == "getrf" else None)


def ours(c: Case, d: dict, setting):
    if c.routine == "gesv":
        if setting is None:
            return lu_module.solve(d["A"], d["b"], check=False)
        # solve()'s call with the setting forced: X only, the factors not stored
        _, _, x, info = lu_module._gesv_arrays(d["A"], d["b"], False, False, setting, want_factors=False,
                                               b_name="b")
        return x, info
    return lu_module.getrf(d["A"], setting=setting)


def peer_cupy(c: Case, d: dict):
    if c.routine != "gesv":
        raise NotApplicable
    import cupy as cp

    return cp.linalg.solve(d["A"], d["b"][..., None])


def peer_torch(c: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    if c.routine == "gesv":
        return torch.linalg.solve(d["tA"], d["tb"])
    return torch.linalg.lu_factor_ex(d["tA"])


def main(argv=None, print_table: bool = True) -> list:
    return harness.script_main("solve", "Batched GESV / GETRF benchmark", argv, peers={"cupy": peer_cupy},
                               torch_peer=peer_torch, traffic_fn=traffic, settings=LU_SETTINGS, limit=limit,
                               plot_metrics=("gbps", "gflops"), all_cases=all_cases, quick_cases=quick_cases,
                               ours=ours, build=build, print_table=print_table)


if __name__ == "__main__":
    main()
