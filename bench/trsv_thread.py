"""The TRSV thread design against the tile it competes with, 1-16 unknowns, every type:
the measurement behind the chooser's THREAD_WINS table, on whatever GPU runs it.

THREAD_WINS (factorizations/settings.py) came from one H200 A/B (session 43); on an
H100 the same kernels ranked differently at float64 16 x 16 (the thread design 0.85x
where the H200 had 1.01-1.03x; design.md), so the table is rechecked per GPU with this
script rather than with scratch code.  Each case is timed twice, with the setting
forced both ways: ``trsv_thread`` and the single tile the chooser takes without the
element type (bench/trsv.py's ``untyped_default``).  Cases as in
bench/trsv.py (C-ordered stacked batches of 256 MiB, one right-hand side, LN/LT/UN/UT:
user 'N' on a C-ordered batch transposes the kernel's column-major view, 'T' does
not), for float32, float64, complex64 and complex128 and n = 1..16.  The one peer is
cupyx.scipy.linalg.solve_triangular (the error check's reference; PyTorch is left out
to keep the call short).  After the table, one line per type and n: the tile's time
over the thread design's for each of LN/LT/UN/UT, and whether THREAD_WINS takes it.

Usage: python3 bench/trsv_thread.py [--dry-run] [--dtype D] [--size N] [--results-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batched.factorizations.settings import THREAD_MAX, TRSV_THREAD, thread_wins  # noqa: E402
from bench import harness, trsv  # noqa: E402

DTYPES = ("float32", "float64", "complex64", "complex128")
TRANS = ("LN", "LT", "UN", "UT")


def all_cases() -> list:
    return [trsv.case(dt, tr, n, s) for dt in DTYPES for n in range(1, THREAD_MAX + 1) for tr in TRANS
            for s in (trsv.untyped_default(dt, tr, n), TRSV_THREAD)]


def quick_cases() -> list:
    return [trsv.case(dt, "LN", 8, s) for dt in ("float32", "float64")
            for s in (trsv.untyped_default(dt, "LN", 8), TRSV_THREAD)]


def ratios(rows) -> dict:
    """{(dtype, n): {trans: tile time / thread time}} from a run's rows (pairs where
    both ran)."""
    times = {}
    for r in rows:
        if r.get("ours_s"):
            design = "thread" if r["setting"] == str(TRSV_THREAD) else "tile"
            times.setdefault((r["dtype"], r["n"], r["trans"]), {})[design] = r["ours_s"]
    out = {}
    for (dt, n, tr), t in sorted(times.items()):
        if len(t) == 2:
            out.setdefault((dt, n), {})[tr] = t["tile"] / t["thread"]
    return out


def print_ratios(rows) -> None:
    print("tile time / thread time (> 1: the thread design faster); THREAD_WINS's choice")
    for (dt, n), by_trans in ratios(rows).items():
        shown = "  ".join(f"{tr} {by_trans[tr]:.2f}" if tr in by_trans else f"{tr}  -  " for tr in TRANS)
        chosen = thread_wins(n, np.dtype(dt).char)
        print(f"  {dt:<10} {n:>2}  {shown}  {'thread' if chosen else 'tile'}")


def main(argv=None, print_table: bool = True) -> list:
    rows = harness.script_main("trsv_thread", "TRSV thread design against the single tile", argv,
                               peers={"cupyx": trsv.peer_cupyx}, traffic_fn=trsv.traffic,
                               all_cases=all_cases, quick_cases=quick_cases, ours=trsv.ours,
                               build=trsv.build, print_table=print_table)
    if rows:
        print_ratios(rows)
    return rows


if __name__ == "__main__":
    main()
