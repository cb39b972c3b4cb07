"""Batched nrm2 and dot over 10^6 vectors against cupy.linalg.norm / cupy.einsum and PyTorch.

Cases: (10^6, n) C-ordered float64 (and float32 at n = 100, 1000) arrays,
n in {10, 33, 64, 100, 256, 1000}; ``trans`` holds the routine ('nrm2' or
'dot'), ``n`` the length.  Bytes: the vectors read once and one value written
per vector.  ``floor_s``: harness.read_floor of the case's bytes (at most 256 MiB).
Peers: ``cupy`` = cupy.linalg.norm(x, axis=-1) for nrm2 and
cupy.einsum('ij,ij->i', x, y) for dot; ``torch`` = torch.linalg.vector_norm /
torch.linalg.vecdot (left out without PyTorch).

Usage: python3 bench/vector.py [--quick] [--dry-run] [--dtype D] [--results-dir DIR]
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

LENGTHS = (10, 33, 64, 100, 256, 1000)
COUNT = 10**6


def case(dtype, routine, n) -> Case:
    return Case("vector", dtype, "uniform", routine, 1, n, 0, COUNT, repeats=10)


def all_cases() -> list[Case]:
    cases = [case("float64", r, n) for r in ("nrm2", "dot") for n in LENGTHS]
    return cases + [case("float32", r, n) for r in ("nrm2", "dot") for n in (100, 1000)]


def quick_cases() -> list[Case]:
    return [case("float64", "nrm2", 33), case("float64", "dot", 1000)]


def traffic(c: Case):
    item = np.dtype(c.dtype).itemsize
    vectors = 2 if c.trans == "dot" else 1
    return (vectors * c.n + 1) * item * c.batch, 2 * c.n * c.batch


def build(c: Case, index: int) -> Operands:
    x = harness.random_array((c.batch, c.n), c.dtype, 31 * index + 1)
    data = {"x": x}
    if c.trans == "dot":
        data["y"] = harness.random_array((c.batch, c.n), c.dtype, 31 * index + 2)
    torch = harness.torch_or_none()
    if torch is not None:
        data.update({"t" + k: harness.as_torch(torch, v) for k, v in list(data.items())})
    return Operands(data)


def ours(c: Case, d: dict, setting):
    if c.trans == "dot":
        return bt.dot(d["x"], d["y"], setting=setting)
    return bt.nrm2(d["x"], setting=setting)


def peer_cupy(c: Case, d: dict):
    import cupy as cp

    if c.trans == "dot":
        return cp.einsum("ij,ij->i", d["x"], d["y"])
    return cp.linalg.norm(d["x"], axis=-1)


def peer_torch(c: Case, d: dict):
    if "tx" not in d:
        raise NotApplicable
    import torch

    if c.trans == "dot":
        return torch.linalg.vecdot(d["tx"], d["ty"])
    return torch.linalg.vector_norm(d["tx"], dim=-1)


def main(argv=None, print_table: bool = True) -> list:
    # floor: the read floor of the cases of at most 256 MiB (lengths 10 and 33), so that
    # tools/targets.py can tell how much of cupy's time a single read of the vectors leaves
    return harness.script_main("vector", "Batched nrm2/dot benchmark", argv, peers={"cupy": peer_cupy},
                               torch_peer=peer_torch, traffic_fn=traffic, all_cases=all_cases,
                               quick_cases=quick_cases, ours=ours, build=build, print_table=print_table, floor=True)

if __name__ == "__main__":
    main()
