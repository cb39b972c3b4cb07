"""Batched SVD (svdvals, and svd with vectors) against PyTorch and CuPy, on the same memory.

Cases (the issue's list): C-ordered random (batch, n, n) matrices, float64 and
float32; n = 8, 16, 32 with 32,768 matrices and n = 64, 128 with 1,024 and 256.
``trans`` in a row is "V" (values: ``svdvals``) or "UV" (``svd``,
full_matrices=False).  ``--sweep`` also times ours with every BdsqrSetting
(the GEBRD -> BDSQR pipeline; values: a thread or a warp per matrix), every
GesvjSetting that fits (one-sided Jacobi, values and vectors; the default for
real matrices up to 32 x 32 with vectors) and every DqdsSetting that fits
(values only: GEBRD in registers, then dqds).

Peers: ``torch`` = torch.linalg.svdvals / torch.linalg.svd(full_matrices=False)
(left out without PyTorch); ``cupy`` = cupy.linalg.svd(compute_uv=False /
full_matrices=False).  The check compares the singular values only (vectors
are unique only up to signs/phases).

Bytes: A read and S (+ U, Vh) written.  Flops: LAPACK's operation counts for
GEBRD + BDSQR, 4 n^2 (m - n/3) for the values and 4 m^2 n + 8 m n^2 + 9 n^3 with
vectors (Golub & Van Loan, Table 8.6.1), four times for complex.

Usage: python3 bench/svd.py [--quick] [--sweep] [--dry-run] [--dtype D] [--results-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batched.factorizations.svd import svd, svdvals  # noqa: E402
from batched.factorizations.svd_settings import BDSQR_SETTINGS, DQDS_SETTINGS, GESVJ_SETTINGS  # noqa: E402
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SIZES = ((8, 32_768), (16, 32_768), (32, 32_768), (64, 1_024), (128, 1_024), (64, 256), (128, 256))


def case(dtype, what, n, batch) -> Case:
    return Case("svd", dtype, "uniform", what, n, n, 0, batch, repeats=5)


def all_cases() -> list[Case]:
    return [case(dt, what, n, b) for what in ("V", "UV") for dt in ("float64", "float32") for n, b in SIZES]


def quick_cases() -> list[Case]:
    return [case("float64", "V", 16, 32_768), case("float32", "V", 8, 32_768), case("float64", "UV", 32, 4_096),
            case("float64", "V", 128, 256)]


def traffic(c: Case):
    item = np.dtype(c.dtype).itemsize
    m, n = c.m, c.n
    k = min(m, n)
    vectors = c.trans == "UV"
    elems = m * n + k + ((m * k + k * n) if vectors else 0)
    flops = 4 * n * n * (m - n / 3) if not vectors else 4 * m * m * n + 8 * m * n * n + 9 * n ** 3
    return elems * item * c.batch, int(flops * (4 if c.dtype.startswith("c") else 1) * c.batch)


def limit(c: Case, nbytes, flops, ceilings, info):
    return "fp64_peak" if c.dtype in ("float64", "complex128") else "fp32_peak"


def _values(result):
    return result[1] if isinstance(result, tuple) else result


def build(c: Case, index: int) -> Operands:
    A = harness.random_array((c.batch, c.m, c.n), c.dtype, 7919 * index + 11)
    data = {"A": A}
    torch = harness.torch_or_none()
    if torch is not None:
        data["tA"] = harness.as_torch(torch, A)
    view = (lambda r: _values(r)) if c.trans == "UV" else None
    return Operands(data, ours_view=view, peer_view=view)


def ours(c: Case, d: dict, setting):
    if c.trans == "V":
        return svdvals(d["A"], check=False, setting=setting)[0]
    U, S, Vh, _ = svd(d["A"], check=False, setting=setting)
    return U, S, Vh


def peer_torch(c: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    if c.trans == "V":
        return torch.linalg.svdvals(d["tA"])
    return tuple(torch.linalg.svd(d["tA"], full_matrices=False))


def peer_cupy(c: Case, d: dict):
    import cupy

    try:
        if c.trans == "V":
            return cupy.linalg.svd(d["A"], compute_uv=False)
        return tuple(cupy.linalg.svd(d["A"], full_matrices=False))
    except (ValueError, TypeError, NotImplementedError) as exc:  # no batched SVD in this CuPy
        raise NotApplicable from exc


def main(argv=None, print_table: bool = True) -> list:
    return harness.script_main("svd", "Batched SVD benchmark", argv, peers={"cupy": peer_cupy},
                               torch_peer=peer_torch, traffic_fn=traffic,
                               settings=BDSQR_SETTINGS + GESVJ_SETTINGS + DQDS_SETTINGS, limit=limit,
                               plot_metrics=("gflops",), all_cases=all_cases, quick_cases=quick_cases, ours=ours,
                               build=build, print_table=print_table)


if __name__ == "__main__":
    main()
