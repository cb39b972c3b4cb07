"""Where the batched SVD spends its time: GEBRD, ORGBR and BDSQR timed apart.

The issue's svd cases (C-ordered random (batch, n, n) matrices, float64; n = 8, 16,
32 with 32,768 matrices, 64 and 128 with 1,024) and, for each, the stages of
``svdvals`` (GEBRD, then BDSQR on the bidiagonal) and of ``svd`` (GEBRD, ORGBR
for Q and for P^H, BDSQR with the rotations applied to both), each timed alone
on its own inputs by ``harness.time_calls``, next to the whole call.  The sum
of the stages against the whole shows the glue's share (copies, allocations).
Tells which kernel a speed target depends on before anything is tuned.

Usage: python3 bench/svd_stages.py [--quick] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batched.factorizations.bdsqr import bdsqr  # noqa: E402
from batched.factorizations.gebrd import gebrd, orgbr  # noqa: E402
from batched.factorizations.svd import svd, svdvals  # noqa: E402
from bench import harness  # noqa: E402

SIZES = ((8, 32_768), (16, 32_768), (32, 32_768), (64, 1_024), (128, 1_024))


def stage_times(n: int, batch: int, dtype: str) -> dict:
    """Seconds per call of each stage and of the whole, values and vectors."""
    A = harness.random_array((batch, n, n), dtype, 11)
    a, d, e, tauq, taup, _ = gebrd(A)
    lower = False   # square: GEBRD gives an upper bidiagonal
    Q, _ = orgbr("Q", a, tauq)
    PH, _ = orgbr("P", a, taup)
    t = {
        "gebrd": lambda: gebrd(A),
        "bdsqr_values": lambda: bdsqr(d, e, lower=lower),
        "svdvals": lambda: svdvals(A, check=False),
        "orgbr_q": lambda: orgbr("Q", a, tauq),
        "orgbr_p": lambda: orgbr("P", a, taup),
        "bdsqr_vectors": lambda: bdsqr(d, e, lower=lower, u=Q, vt=PH),
        "svd": lambda: svd(A, check=False),
    }
    return {name: harness.time_calls([fn], repeats=10).seconds for name, fn in t.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n = 8 and 32 only")
    p.add_argument("--results-dir", default=None)
    args = p.parse_args(argv)
    info = harness.device_info()
    sizes = [s for s in SIZES if not args.quick or s[0] in (8, 32)]
    rows = []
    print(f"svd stages on {info['name']} (float64, us per call)")
    print(f"{'n':>5} {'batch':>7} {'gebrd':>9} {'bdsqr':>9} {'svdvals':>9} | {'orgbr Q':>9} {'orgbr P':>9} "
          f"{'bdsqr uv':>9} {'svd':>9}")
    for n, batch in sizes:
        s = stage_times(n, batch, "float64")
        harness.free_memory()
        rows.append({"n": n, "batch": batch, "dtype": "float64", "seconds": s})
        us = {k: v * 1e6 for k, v in s.items()}
        print(f"{n:>5} {batch:>7} {us['gebrd']:>9.1f} {us['bdsqr_values']:>9.1f} {us['svdvals']:>9.1f} | "
              f"{us['orgbr_q']:>9.1f} {us['orgbr_p']:>9.1f} {us['bdsqr_vectors']:>9.1f} {us['svd']:>9.1f}",
              flush=True)
    out_dir = Path(args.results_dir) if args.results_dir else harness.RESULTS
    folder = out_dir / harness.gpu_dirname(info["name"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("svd_stages_quick.json" if args.quick else "svd_stages.json")
    path.write_text(json.dumps({"gpu": info["name"], "rows": rows}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
