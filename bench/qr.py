"""Batched QR (GEQRF) and least squares (GELS) against PyTorch and CuPy, on the same memory.

Cases: C-ordered stacked matrices (batch, m, n), random normal entries;
square (m = n) and tall (m = 2n) shapes, n in 4..128; DGEQRF, SGEQRF, DGELS,
SGELS (one right-hand side (batch, rows of op(A))); the batch sized so the
matrices take 256 MiB.  ``trans`` is GELS's: the 'N' tall/square rows are the
fused factor-and-solve kernel; at n = 8 and 32 DGELS also runs the composed
minimum-norm paths (trans 'N' on wide n x 2n, trans 'C' on tall 2n x n:
GEQRF, TRSV, ORGQR and GEMM launches) and DLSTSQ (``lstsq``: the SVD, any
rank) on 2n x n.  At n = 32 and 64 every GEQRF design is also timed with its
setting forced (fused 32x4, blocked, global), which locates the chooser's
switch-overs.

Bytes: A read and written (plus tau, b and x for GELS); flops: LAPACK's
count 2 r p^2 - 2 p^3 / 3 for GEQRF (r = max(m, n), p = min(m, n); times 4 for
complex), plus 4 r p - p^2 for applying Q^H and the triangular solve in GELS;
the composed minimum-norm GELS counts the QR twice (ORGQR's explicit Q); LSTSQ
counts 12 r p^2 (an approximate GESVD with vectors).  The limit is the FP64 /
FP32 peak from n = 32 on and the copy bandwidth below.

Peers: GEQRF: ``torch`` = torch.geqrf (cuSOLVER / MAGMA, the same compact
output), ``cupy`` = cupy.linalg.qr(mode='raw') (its h is the transpose: the
check compares ours against the first peer that ran, torch when present).
GELS and LSTSQ: ``torch`` = torch.linalg.lstsq(op(A), b[..., None]) (driver
'gels', the only one on CUDA: full rank, and only m >= n there, so the wide
problems have no peer); cupy.linalg.lstsq takes no batch (left out).

Usage: python3 bench/qr.py [--quick] [--sweep] [--dry-run] [--dtype D] [--results-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batched.factorizations.qr import geqrf, gels, lstsq  # noqa: E402
from batched.factorizations.qr_settings import (BLOCKED_SETTINGS, FUSED_SETTINGS, GLOBAL_SETTINGS,  # noqa: E402
                                                QR_SETTINGS)
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SIZES = (4, 8, 16, 32, 64, 128)
DESIGNS = (FUSED_SETTINGS[3], BLOCKED_SETTINGS[0], GLOBAL_SETTINGS[0])


def case(routine, dtype, m, n, setting=None, trans="N") -> Case:
    batch = harness.batch_for(m * n * np.dtype(dtype).itemsize)
    return Case(routine, dtype, "uniform", trans, m, n, 0, batch, setting=setting, repeats=10, note=routine)


def _rhs_rows(c: Case) -> int:
    return c.m if c.trans == "N" else c.n


def all_cases() -> list[Case]:
    cases = []
    for routine in ("geqrf", "gels"):
        for dt in ("float64", "float32"):
            for n in SIZES:
                cases += [case(routine, dt, n, n), case(routine, dt, 2 * n, n)]
    cases += [case("geqrf", "float64", n, n, s) for n in (32, 64) for s in DESIGNS]
    for n in (8, 32):
        cases += [case("gels", "float64", n, 2 * n), case("gels", "float64", 2 * n, n, trans="C"),
                  case("lstsq", "float64", 2 * n, n)]
    return cases


def quick_cases() -> list[Case]:
    return [case("geqrf", "float64", 8, 8), case("geqrf", "float32", 64, 32), case("gels", "float64", 16, 8),
            case("geqrf", "float64", 128, 128, BLOCKED_SETTINGS[0]), case("gels", "float64", 8, 16),
            case("lstsq", "float64", 16, 8)]


def traffic(c: Case):
    item = np.dtype(c.dtype).itemsize
    r, p = max(c.m, c.n), min(c.m, c.n)
    flops = 2 * r * p * p - 2 * p ** 3 / 3
    elems = 2 * c.m * c.n + p
    if c.routine == "gels":
        if (c.trans == "N") != (c.m >= c.n):   # minimum-norm paths: ORGQR's explicit Q doubles the QR
            flops *= 2
        flops += 4 * r * p - p * p
        elems += c.m + c.n
    elif c.routine == "lstsq":
        flops = 12 * r * p * p
        elems = c.m * c.n + p + c.m + c.n
    if c.dtype.startswith("c"):
        flops *= 4
    return int(elems * item * c.batch), int(flops * c.batch)


def limit(c: Case, nbytes, flops, ceilings, info):
    if c.n < 32:
        return "bandwidth"
    return "fp64_peak" if c.dtype in ("float64", "complex128") else "fp32_peak"


def build(c: Case, index: int) -> Operands:
    A = harness.random_array((c.batch, c.m, c.n), c.dtype, 7919 * index + 11)
    data = {"A": A}
    if c.routine in ("gels", "lstsq"):
        data["b"] = harness.random_array((c.batch, _rhs_rows(c)), c.dtype, 7919 * index + 12)
    torch = harness.torch_or_none()
    if torch is not None:
        tA = harness.as_torch(torch, A)
        data["tA"] = tA if c.trans == "N" else tA.mH
        if c.routine in ("gels", "lstsq"):
            data["tb"] = harness.as_torch(torch, data["b"]).unsqueeze(-1)
    if c.routine == "geqrf":
        # ours: (qr, tau, info); torch.geqrf: (a, tau); cupy's raw: (h^T, tau)
        return Operands(data, ours_view=lambda r: r[0],
                        peer_view=lambda r: r[0].swapaxes(-1, -2) if _is_cupy_raw(r) else r[0])
    return Operands(data, ours_view=lambda r: r[1] if c.routine == "gels" else r[0],
                    peer_view=lambda r: r.solution[..., 0] if hasattr(r, "solution") else r)


def _is_cupy_raw(result) -> bool:
    import cupy as cp

    return isinstance(result[0], cp.ndarray)


def ours(c: Case, d: dict, setting):
    if c.routine == "geqrf":
        return geqrf(d["A"], setting=setting)
    if c.routine == "lstsq":
        return lstsq(d["A"], d["b"])
    return gels(d["A"], d["b"], trans=c.trans, setting=setting)


def peer_torch(c: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    if c.routine == "geqrf":
        return torch.geqrf(d["tA"])
    if d["tA"].shape[-2] < d["tA"].shape[-1]:
        raise NotApplicable  # torch's CUDA lstsq ('gels') takes only m >= n
    return torch.linalg.lstsq(d["tA"], d["tb"])


def peer_cupy(c: Case, d: dict):
    if c.routine != "geqrf":
        raise NotApplicable  # cupy.linalg.lstsq takes one matrix
    import cupy as cp

    try:
        return cp.linalg.qr(d["A"], mode="raw")
    except (ValueError, TypeError, NotImplementedError) as exc:  # no batch support in this CuPy
        raise NotApplicable from exc


def main(argv=None, print_table: bool = True) -> list:
    return harness.script_main("qr", "Batched QR / least-squares benchmark", argv, peers={"cupy": peer_cupy},
                               torch_peer=peer_torch, traffic_fn=traffic, settings=QR_SETTINGS, limit=limit,
                               plot_metrics=("gflops",), all_cases=all_cases, quick_cases=quick_cases, ours=ours, build=build, print_table=print_table)

if __name__ == "__main__":
    main()
