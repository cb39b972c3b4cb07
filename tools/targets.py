"""The open issues' speed targets against the committed benchmark results.

Reads ``bench/results/<gpu>/*.json`` (the rows ``bench/run_all.py`` writes) and prints,
for every target of issues 4-7 that a file there measures, each row it applies to: the
case, the measured figure, the threshold and whether it is met, then a count per target.
A target whose file is missing is listed as not measured.  The thresholds are the
issues' words (their H100 figures); a closing note quotes what this prints for the GPU
the results came from.

Interpretations, where an issue's words leave a choice:
  - "within 5 % at the misaligned offsets" (issue 5): the offset rows' ratio to cuBLAS is
    at least 0.95 of the aligned target (0.98 x 0.95 = 0.93).
  - "x cuBLAS" for SYMV/HEMV (issue 5): against cuBLAS's default mode (``cublas``) for the
    1.8x target, whose 85 % of copy bandwidth is listed beside it; the 1.3x target against
    the best of the default and the atomics mode (``cublas_atomics``).
  - "the memory floor" (issue 7): the bytes a row counts at the copy bandwidth its file
    measured (``copy_gbps``).

A missed ratio target is also weighed against the most any kernel could show: the peer's
time over the least time that reads the row's counted bytes once, which is the row's
``floor_s`` where the bench measured one (``harness.read_floor``: one launch, the case's
operand rotation) and otherwise the bytes at the file's read-only ceiling (``read_gbps``).
Where that bound is below the threshold the row says "out of reach" with the bound: no
design that reads its operands once can meet the target there.  TRSV's effective
bandwidth (issue 4) is weighed against the least DRAM traffic of a kernel that reads the
bench's C-ordered matrices in place: DRAM moves 64-byte pieces, so each row of the
stored triangle costs every piece it touches (a row of at most 64 bytes its whole
piece, the other triangle's part included), plus b and x; the file's copy bandwidth times
counted over those bytes is the most such a kernel can show (session 34's ncu
measurement, trsv_dram.json, found the default kernels at that traffic to 1-3 %).

Usage: python3 tools/targets.py [--gpu NVIDIA_H200] [--results DIR] [--missed]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
TRSV_OPS = ("LN", "LT", "UN", "UT")


@dataclass(frozen=True)
class Target:
    issue: int
    file: str                               # the result file's stem
    label: str
    applies: Callable[[dict], bool]         # does this row measure the target?
    figure: Callable[[dict, dict], float]   # (row, document) -> the measured figure
    threshold: float
    unit: str = "x"


def _default(row: dict) -> bool:
    return row.get("setting") is None and not row.get("failure")


def _speedup(row: dict, doc: dict) -> float:
    return row["speedup"]


def _gbps(row: dict, doc: dict) -> float:
    return row["gbps"]


def _vs_peer(name: str) -> Callable[[dict, dict], float]:
    def figure(row: dict, doc: dict) -> float:
        peer = row.get("peers", {}).get(name)
        return peer / row["ours_s"] if peer else float("nan")
    figure.peer = name
    return figure


def _peer_s(target: "Target", row: dict) -> float | None:
    """The peer time behind a ratio target's figure (None for other figures)."""
    if target.figure is _speedup:
        return row.get("best_peer_s")
    name = getattr(target.figure, "peer", None)
    return row.get("peers", {}).get(name) if name else None


def trsv_in_place_cap(row: dict, doc: dict) -> float | None:
    """GB/s at most for a TRSV row (C-ordered contiguous matrices, one right-hand side)
    by a kernel that reads the triangle in place: the file's copy bandwidth times the
    counted bytes over the DRAM bytes (whole 64-byte pieces of the triangle's rows, b, x)."""
    if row.get("routine") != "trsv" or not doc.get("copy_gbps"):
        return None
    n, item, lower = row["n"], np.dtype(row["dtype"]).itemsize, str(row.get("trans", "L")).startswith("L")
    size = n * n * item
    period = 64 // math.gcd(size, 64)   # matrices until the pieces repeat
    pieces = set()
    for k in range(period):
        for i in range(n):
            lo, hi = (0, i + 1) if lower else (i, n)
            first, last = k * size + (i * n + lo) * item, k * size + (i * n + hi) * item - 1
            pieces.update(range(first // 64, last // 64 + 1))
    dram = len(pieces) * 64 / period + 2 * n * item
    counted = (n * (n + 1) // 2 + 2 * n) * item
    return doc["copy_gbps"] * counted / dram


def reach_bound(target: "Target", row: dict, doc: dict) -> float | None:
    """The most the row could show: for a ratio target, the largest ratio to the peer
    that a kernel reading the row's counted bytes once could show (peer time over
    ``floor_s``, else over the bytes at ``read_gbps``); for TRSV's bandwidth, the cap
    that reading the matrices in place puts on it (trsv_in_place_cap)."""
    if target.figure is _gbps:
        return trsv_in_place_cap(row, doc)
    peer = _peer_s(target, row)
    if not peer:
        return None
    if row.get("floor_s"):
        return peer / row["floor_s"]
    if row.get("bytes") and doc.get("read_gbps"):
        return peer / (row["bytes"] / (doc["read_gbps"] * 1e9))
    return None


def _of_copy(row: dict, doc: dict) -> float:
    return row["bytes"] / row["ours_s"] / 1e9 / doc["copy_gbps"]


def _model(row: dict, doc: dict) -> float:
    return row.get("fraction_of_model", float("nan"))


def _rows(routine: str, dtypes=None, **match) -> Callable[[dict], bool]:
    """A selector of default-setting rows of ``routine`` (and dtype, other fields equal)."""
    def applies(row: dict) -> bool:
        if row.get("routine") != routine or not _default(row):
            return False
        if dtypes is not None and row.get("dtype") not in dtypes:
            return False
        return all(test(row.get(k)) if callable(test) else row.get(k) == test for k, test in match.items())
    return applies


def _between(lo: int, hi: int) -> Callable[[object], bool]:
    return lambda v: v is not None and lo <= v <= hi


def _either(*selectors: Callable[[dict], bool]) -> Callable[[dict], bool]:
    return lambda row: any(applies(row) for applies in selectors)


REAL = ("float64", "float32")
LARGE_SYMV_HEMV = _either(_rows("symv", ("float64",), offset=0, n=_between(12000, 10**9)),
                          _rows("hemv", ("complex128",), offset=0, n=_between(12000, 10**9)))
SMALL_TRSV = _rows("trsv", REAL, offset=0, n=_between(8, 256), trans=lambda t: t in TRSV_OPS)
TARGETS = (
    # issue 4: TRSV and the batched reductions
    Target(4, "trsv", "DTRSV/STRSV n 8-256: effective bandwidth >= 2.0 TB/s", SMALL_TRSV, _gbps, 2000, "GB/s"),
    Target(4, "trsv", "DTRSV/STRSV n 8-256: >= 3x trsmBatched (best peer)", SMALL_TRSV, _speedup, 3.0),
    Target(4, "vector", "nrm2/dot length >= 64: >= 85 % of copy bandwidth",
           _rows("vector", n=_between(64, 10**9)), _of_copy, 0.85, "of copy"),
    Target(4, "vector", "nrm2: >= 3x cupy.linalg.norm(axis=-1)",
           _rows("vector", trans="nrm2"), _vs_peer("cupy"), 3.0),
    # issue 5: large-matrix GEMV/SYMV/HEMV
    Target(5, "kblas", "DSYMV/ZHEMV n >= 12000: >= 1.8x cuBLAS (default mode)", LARGE_SYMV_HEMV,
           _vs_peer("cublas"), 1.8),
    Target(5, "kblas", "DSYMV/ZHEMV n >= 12000: >= 85 % of copy bandwidth", LARGE_SYMV_HEMV, _of_copy, 0.85,
           "of copy"),
    Target(5, "kblas", "SSYMV/CHEMV every n: >= 1.3x cuBLAS (best mode)",
           _either(_rows("symv", ("float32",), offset=0), _rows("hemv", ("complex64",), offset=0)), _speedup, 1.3),
    Target(5, "kblas", "DGEMV/SGEMV N, T n >= 8192: >= 0.98x cuBLAS",
           _rows("gemv", REAL, offset=0, n=_between(8192, 10**9)), _speedup, 0.98),
    Target(5, "kblas", "DGEMV/SGEMV N, T n 1024-4096: >= 1.2x cuBLAS",
           _rows("gemv", REAL, offset=0, n=_between(1024, 4096)), _speedup, 1.2),
    Target(5, "kblas", "DGEMV/SGEMV at offsets 1/17/1000: within 5 % of 0.98x cuBLAS",
           _rows("gemv", REAL, offset=lambda o: o not in (None, 0)), _speedup, 0.98 * 0.95),
    # issue 6: SVD and GEBRD
    Target(6, "svd", "svdvals n <= 32: >= 100x the best peer",
           _rows("svd", REAL, trans="V", n=_between(1, 32)), _speedup, 100),
    Target(6, "svd", "svdvals n 64-128: >= 20x the best peer",
           _rows("svd", REAL, trans="V", n=_between(64, 128)), _speedup, 20),
    Target(6, "svd", "svd with vectors: >= 20x the best peer", _rows("svd", REAL, trans="UV"), _speedup, 20),
    Target(6, "gebrd", "GEBRD n 32-512: >= 80 % of the GEMV-bound model",
           _rows("gebrd", n=_between(32, 512)), _model, 0.8, "of model"),
    Target(6, "gebrd", "GEBRD: >= 10x a loop of cuSOLVER GEBRD", _rows("gebrd"), _speedup, 10),
    # issue 7: the solvers
    Target(7, "solve", "DGESV/SGESV n <= 16: >= 5x the best peer", _rows("gesv", REAL, n=_between(1, 16)),
           _speedup, 5),
    Target(7, "solve", "DGESV/SGESV n <= 16: >= 50 % of the memory floor",
           _rows("gesv", REAL, n=_between(1, 16)), _of_copy, 0.5, "of floor"),
    Target(7, "solve", "DGESV/SGESV n = 32: >= 3x the best peer", _rows("gesv", REAL, n=32), _speedup, 3),
    Target(7, "solve", "DGESV/SGESV n 64-128: >= 1.5x the best peer", _rows("gesv", REAL, n=_between(64, 128)),
           _speedup, 1.5),
    Target(7, "posv", "DPOSV n <= 32: >= 3x the best peer", _rows("posv", ("float64",), n=_between(1, 32)),
           _speedup, 3),
)


def case_name(row: dict) -> str:
    shape = f"{row['m']}x{row['n']}" if row.get("m") not in (None, row.get("n")) else f"{row.get('n')}"
    parts = [row["routine"], row["dtype"], str(row.get("trans") or ""), shape, row.get("note") or ""]
    if row.get("offset"):
        parts.append(f"offset {row['offset']}")
    return " ".join(p for p in parts if p)


def evaluate(results: Path) -> list[dict]:
    """A dict a (target, row): issue, label, case, figure, threshold, met; and one with
    ``measured`` False for a target whose file is missing or has no row for it."""
    docs = {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}
    out = []
    for t in TARGETS:
        doc = docs.get(t.file)
        rows = [r for r in doc["rows"] if t.applies(r)] if doc else []
        if not rows:
            out.append({"issue": t.issue, "label": t.label, "measured": False})
        for r in rows:
            value = t.figure(r, doc)
            bound = reach_bound(t, r, doc)
            out.append({"issue": t.issue, "label": t.label, "measured": True, "case": case_name(r),
                        "figure": value, "threshold": t.threshold, "unit": t.unit,
                        "met": bool(value >= t.threshold),
                        "out_of_reach": bool(bound is not None and bound < t.threshold), "bound": bound})
    return out


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="NVIDIA_H200", help="a folder of bench/results")
    ap.add_argument("--results", type=Path, help="a results folder anywhere (overrides --gpu)")
    ap.add_argument("--missed", action="store_true", help="list only the rows that miss")
    args = ap.parse_args(argv)
    folder = args.results or RESULTS / args.gpu
    found = evaluate(folder)
    print(f"targets against {folder}")
    label = None
    for e in found:
        if e["label"] != label:
            label = e["label"]
            group = [g for g in found if g["label"] == label and g["measured"]]
            met = sum(g["met"] for g in group)
            beyond = sum(not g["met"] and g["out_of_reach"] for g in group)
            print(f"\nissue {e['issue']}: {label}: " + (f"{met} of {len(group)} met" if group else "not measured")
                  + (f" ({beyond} of the missed out of reach)" if beyond else ""))
        if e["measured"] and not (args.missed and e["met"]):
            fig = f"{e['figure']:.0f}" if e["unit"] == "GB/s" else f"{e['figure']:.2f}"
            if not e["met"] and e["out_of_reach"]:
                reach = (f"; out of reach: reading the rows in place caps it at {e['bound']:.0f} GB/s" if e["unit"] == "GB/s"
                         else f"; out of reach: reading the bytes once allows {e['bound']:.2f} x")
            else:
                reach = ""
            print(f"  {'met   ' if e['met'] else 'MISSED'} {e['case']:<40} {fig:>8} {e['unit']} "
                  f"(target {e['threshold']:g}{reach})")
    return found


if __name__ == "__main__":
    main()
