"""Run every benchmark in one process: the batched BLAS, kblas, the solvers, then overhead.

The ceilings are measured once and shared; the tables are printed together at
the end (the device tool shows only the tail of the output), followed by one
summary line per routine.  Flags go to every script (``--sweep`` only to
those that sweep settings).

Usage: python3 bench/run_all.py [--quick] [--sweep] [--dry-run] [--only gemv,gemm,kblas,trsv,...]
                                [--results-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (gebrd, gemm, gemv, harness, kblas, overhead, posv, qr, solve, svd, trsv,  # noqa: E402
                   vector)

SCRIPTS = {"gemv": gemv, "gemm": gemm, "kblas": kblas, "trsv": trsv, "vector": vector,
           "solve": solve, "posv": posv, "qr": qr, "gebrd": gebrd, "svd": svd, "overhead": overhead}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--only", default=",".join(SCRIPTS), help="comma-separated subset of " + ", ".join(SCRIPTS))
    p.add_argument("--results-dir", default=None)
    args = p.parse_args(argv)
    flags = [f for f, on in (("--quick", args.quick), ("--dry-run", args.dry_run)) if on]
    if args.results_dir:
        flags += ["--results-dir", args.results_dir]
    results, failed = {}, []
    started = time.perf_counter()
    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        script = SCRIPTS[name]
        extra = ["--sweep"] if args.sweep and name not in ("overhead", "vector") else []
        try:
            results[name] = script.main(flags + extra, print_table=False)
        except Exception:  # keep the other routines' results
            traceback.print_exc()
            failed.append(name)
    if args.dry_run:
        return 0
    for name, rows in results.items():
        if name == "overhead":
            overhead.print_rows(rows)
        else:
            harness.print_rows(name, rows)
    print(f"== summary ({time.perf_counter() - started:.0f} s)")
    for name, rows in results.items():
        if name == "overhead":
            print("overhead: " + ", ".join(f"{r['routine']} {r['variant']} x{r['ratio']:.2f}" for r in rows))
            continue
        speedups = sorted(r["speedup"] for r in rows if r.get("speedup"))
        bad = sum(1 for r in rows if r.get("failure") or r.get("error_ok") is False)
        median = f"{speedups[len(speedups) // 2]:.2f}" if speedups else "-"
        print(f"{name}: {len(rows)} cases, {bad} FAIL/ERROR, median speedup vs best peer {median}")
    for name in failed:
        print(f"{name}: crashed (traceback above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
