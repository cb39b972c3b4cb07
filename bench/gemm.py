"""Batched GEMM against cuBLAS (cupy.matmul) and PyTorch (torch.bmm) on the same memory.

Cases: C-ordered stacked arrays (batch, n, n), C = A @ B (alpha = 1,
beta = 0, transa = transb = 'N'); DGEMM at m = n = k in 4..512, SGEMM at 8
and 32, ZGEMM at 8..256.  Up to n = 128 the batch makes A + B + C at least
256 MiB; at 256 and 512 a few hundred products keep the run short.

The limit of a row (``limit``): the bandwidth roofline (max of the copy and
read-only ceilings) up to n = 16, where GEMM is memory bound; beyond, the FP64
non-tensor peak (FP32 peak for float32/complex64), a datasheet figure.

Peers: ``cupy`` = cupy.matmul (cuBLAS strided batched GEMM), ``torch`` =
torch.bmm on tensors sharing the CuPy memory (left out without PyTorch).
cuBLAS uses FP64 tensor cores (DMMA) on H100; so do our float64 tiles past 8 and
complex128 tiles past 8 (gemm_tile_mma), so the fp64_peak fraction can pass 1.

Usage: python3 bench/gemm.py [--quick] [--sweep] [--dry-run] [--dtype D] [--layout L]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import batched as bt  # noqa: E402
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SIZES = (4, 8, 16, 32, 64, 128, 256, 512)
BIG_BATCH = {256: 400, 512: 200}   # compute-bound: a few hundred products suffice
OTHER_DTYPE_SIZES = (8, 32)
COMPLEX128_SIZES = (8, 16, 32, 64, 128, 256)   # CUDA cores to 8, FP64 tensor cores beyond
BANDWIDTH_BOUND_UP_TO = 16


def gemm_case(dtype, n: int) -> Case:
    item = np.dtype(dtype).itemsize
    batch = BIG_BATCH.get(n) or harness.batch_for(3 * n * n * item)
    return Case("gemm", dtype, "uniform", "NN", n, n, n, batch, repeats=10 if n >= 128 else 20)


def all_cases() -> list[Case]:
    cases = [gemm_case("float64", n) for n in SIZES]
    cases += [gemm_case("float32", n) for n in OTHER_DTYPE_SIZES]
    cases += [gemm_case("complex128", n) for n in COMPLEX128_SIZES]
    return cases


def quick_cases() -> list[Case]:
    return [gemm_case("float64", 8), gemm_case("float64", 32), gemm_case("float64", 256),
            gemm_case("complex128", 8)]


def limit(case: Case, nbytes, flops, ceilings, info) -> str:
    if max(case.m, case.n, case.k) <= BANDWIDTH_BOUND_UP_TO:
        return "bandwidth"
    return "fp32_peak" if case.dtype in ("float32", "complex64") else "fp64_peak"


def build(case: Case, index: int) -> Operands:
    seed = 6007 * index + 3
    A = harness.random_array((case.batch, case.m, case.k), case.dtype, seed)
    B = harness.random_array((case.batch, case.k, case.n), case.dtype, seed + 1)
    data = {"A": A, "B": B}
    torch = harness.torch_or_none()
    if torch is not None:
        data["tA"], data["tB"] = harness.as_torch(torch, A), harness.as_torch(torch, B)
    return Operands(data)


def ours(case: Case, d: dict, setting):
    return bt.gemm(d["A"], d["B"], setting=setting)


def peer_cupy(case: Case, d: dict):
    import cupy as cp

    return cp.matmul(d["A"], d["B"])


def peer_torch(case: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    return torch.bmm(d["tA"], d["tB"])


def main(argv=None, print_table: bool = True) -> list:
    return harness.script_main("gemm", "Batched GEMM benchmark", argv, peers={"cupy": peer_cupy},
                               torch_peer=peer_torch, settings=bt.GEMM_SETTINGS, limit=limit,
                               plot_metrics=("gbps", "gflops"), all_cases=all_cases, quick_cases=quick_cases, ours=ours, build=build, print_table=print_table)

if __name__ == "__main__":
    main()
