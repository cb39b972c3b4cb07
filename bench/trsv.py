"""Batched TRSV against PyTorch (torch.linalg.solve_triangular, cuBLAS trsmBatched)
and cupyx.scipy.linalg.solve_triangular, on the same memory.

Cases: C-ordered stacked triangular matrices (batch, n, n) (diagonally
dominant, the other triangle random: it is never read), one right-hand side
(batch, n); DTRSV and STRSV; lower and upper; trans N and T; n in 8..1024; the
batch sized so the stored matrices take 256 MiB.  ``trans`` in a row is
'LN', 'LT', 'UN' or 'UT' (triangle, op).  At n = 256, 512 and 1024 the blocked
(``trsv32x4blocked``) and recursive (``trsv32x4rec256``) designs are also timed
with the setting forced, which locates the switch-over of the default chooser; where
the default is the pipelined design (``trsv32x{2,4,8}pipe``, ``bt.pipelined_trsv_setting``),
the design that was the default before it (``choose_trsv_setting(..., pipelined=False)``)
is timed beside.  Up to 16 unknowns the thread design (``trsv_thread``, a thread per solve)
is timed beside the default, or where the default is that design (THREAD_WINS), the
single tile it replaced (the chooser without the element type).  At 16, 32 and 64 the
staged design (``trsv32x1staged``, the copy engine staging each matrix into shared
memory ahead of its solve; opt-in until measured) is timed beside the default.

Bytes count the triangle n(n+1)/2 plus b read and x written; flops n^2 per solve.
Peers: ``torch`` = torch.linalg.solve_triangular(A or A^T, b[..., None])
(left out without PyTorch); ``cupyx`` = cupyx.scipy.linalg.solve_triangular
(left out where it does not take a batch).

Usage: python3 bench/trsv.py [--quick] [--sweep] [--dry-run] [--dtype D] [--results-dir DIR]
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
from batched.factorizations.settings import (THREAD_MAX, THREAD_WINS, TRSV_STAGED, TRSV_THREAD,  # noqa: E402
                                             choose_trsv_setting)

SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
DESIGNS = (bt.TrsvSetting(32, 4), bt.TrsvSetting(32, 4, window=256))
STAGED_SIZES = (16, 32, 64)


def case(dtype, trans, n, setting=None) -> Case:
    batch = harness.batch_for(n * n * np.dtype(dtype).itemsize)
    return Case("trsv", dtype, "uniform", trans, n, n, 0, batch, setting=setting, repeats=10)


def untyped_default(dtype, trans, n):
    """The chooser's setting without the element type, i.e. without the thread design
    (THREAD_WINS): the single tile it replaced where it is the default."""
    return choose_trsv_setting(n, transposed=trans[1] == "N", itemsize=np.dtype(dtype).itemsize)


def previous_default(dtype, trans, n):
    """Where the default is pipelined, the design that was the default before it (None
    elsewhere): user 'N' on a C-ordered batch transposes the kernel's column-major view."""
    transposed, itemsize = trans[1] == "N", np.dtype(dtype).itemsize
    if bt.pipelined_trsv_setting(n, transposed=transposed, itemsize=itemsize) is None:
        return None
    return choose_trsv_setting(n, transposed=transposed, itemsize=itemsize, pipelined=False)


def all_cases() -> list[Case]:
    cases = [case(dt, tr, n) for dt in ("float64", "float32") for tr in ("LN", "LT", "UN", "UT") for n in SIZES]
    cases += [case("float64", "LN", n, s) for n in (256, 512, 1024) for s in DESIGNS]
    # the previous default beside the pipelined one
    cases += [case(c.dtype, c.trans, c.n, s) for c in cases[:len(SIZES) * 8]
              if (s := previous_default(c.dtype, c.trans, c.n))]
    # the thread design beside the default where it applies, or what it replaced
    cases += [case(dt, tr, n, TRSV_THREAD if n not in THREAD_WINS[np.dtype(dt).char] else
                   untyped_default(dt, tr, n))
              for dt in ("float64", "float32") for tr in ("LN", "LT", "UN", "UT") for n in SIZES if n <= THREAD_MAX]
    cases += [case(dt, tr, n, TRSV_STAGED) for dt in ("float64", "float32") for tr in ("LN", "LT", "UN", "UT")
              for n in STAGED_SIZES]
    return cases


def quick_cases() -> list[Case]:
    return [case("float64", "LN", 8), case("float64", "UT", 64), case("float32", "LN", 256),
            case("float64", "LN", 1024, DESIGNS[1])]


def traffic(c: Case):
    item = np.dtype(c.dtype).itemsize
    n = c.n
    return (n * (n + 1) // 2 + 2 * n) * item * c.batch, n * n * c.batch * (4 if c.dtype.startswith("c") else 1)


def build(c: Case, index: int) -> Operands:
    import cupy as cp

    n = c.n
    A = harness.random_array((c.batch, n, n), c.dtype, 7919 * index + 5)
    # well conditioned, so the peers agree to rounding: |a_ii| + 2n (a_ii + 2n was exactly zero
    # somewhere among 67 M float32 1 x 1 matrices, Inf in both results and a NaN error)
    d = cp.arange(n)
    A[:, d, d] = cp.abs(A[:, d, d]) + 2 * n
    b = harness.random_array((c.batch, n), c.dtype, 7919 * index + 6)
    data = {"A": A, "b": b}
    torch = harness.torch_or_none()
    if torch is not None:
        tA = harness.as_torch(torch, A)
        data["tA"] = tA if c.trans[1] == "N" else tA.mT
        data["tb"] = harness.as_torch(torch, b).unsqueeze(-1)
    return Operands(data)


def ours(c: Case, d: dict, setting):
    return bt.trsv(d["A"], d["b"], lower=c.trans[0] == "L", trans=c.trans[1], setting=setting)


def peer_torch(c: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    # op(A) is lower for L with N and for U with T
    upper = (c.trans[0] == "U") == (c.trans[1] == "N")
    return torch.linalg.solve_triangular(d["tA"], d["tb"], upper=upper)


def peer_cupyx(c: Case, d: dict):
    from cupyx.scipy.linalg import solve_triangular

    try:
        return solve_triangular(d["A"], d["b"][..., None], lower=c.trans[0] == "L", trans=c.trans[1])
    except (ValueError, TypeError) as exc:  # no batch support in this CuPy
        raise NotApplicable from exc


def main(argv=None, print_table: bool = True) -> list:
    return harness.script_main("trsv", "Batched TRSV benchmark", argv, peers={"cupyx": peer_cupyx},
                               torch_peer=peer_torch, traffic_fn=traffic, settings=bt.TRSV_SETTINGS,
                               all_cases=all_cases, quick_cases=quick_cases, ours=ours, build=build, print_table=print_table)

if __name__ == "__main__":
    main()
