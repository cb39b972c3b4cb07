"""What dqds's rounds cost, counted on the CPU: transforms, failures and warp rounds.

The GPU kernel (svdvals_lanes.cu, lasq.cuh) runs a warp's 32 matrices in rounds: each
round every unfinished thread tries one transform, and the round lasts as long as its
longest one.  Its time follows the rounds and their lengths, not the mean transform
count, so a change of the shift or deflation rules is judged here first: each matrix
runs through the NumPy twin (``_lasq_one``, the kernel's algorithm) on the bidiagonals
of random Gaussian matrices (as ``bench/svd.py`` draws them), and for each group of 32
this reports the rounds (the most attempts of a thread) and the round work (the sum
over rounds of the longest block then tried, in rows).  A failed transform counts its
block's whole order (most fail at the last row).  Used in session 39 to weigh
LAPACK's shift cases against ours (design.md, the dqds transform's instructions).

Usage: python3 tools/dqds_rounds.py [--n 16] [--count 256] [--dtype float32] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bidiagonals(count: int, n: int, dtype, seed: int):
    """d, e (count x n) of random n x n Gaussian matrices, scaled as svdvals scales them."""
    from batched.factorizations.svdvals_lanes import _scaled_bidiagonals

    a = np.random.default_rng(seed).standard_normal((count, n, n)).astype(dtype)
    d, e, _, _ = _scaled_bidiagonals(a)
    return d, e


def round_stats(attempts: list[list[tuple[int, bool]]], lanes: int = 32) -> dict:
    """Means over matrices (transforms, failures) and over groups of ``lanes`` (rounds,
    round work) of the per-matrix attempt lists."""
    rounds, work = [], []
    for g in range(0, len(attempts), lanes):
        group = attempts[g:g + lanes]
        longest = max(len(a) for a in group)
        rounds.append(longest)
        work.append(sum(max((a[r][0] for a in group if r < len(a)), default=0) for r in range(longest)))
    return {"transforms": float(np.mean([len(a) for a in attempts])),
            "failures": float(np.mean([sum(not ok for _, ok in a) for a in attempts])),
            "rounds": float(np.mean(rounds)), "round_work": float(np.mean(work))}


def main(argv=None) -> dict:
    from batched.factorizations.svdvals_lanes import _lasq_one

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--count", type=int, default=256)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    d, e = bidiagonals(args.count, args.n, np.dtype(args.dtype), args.seed)
    attempts = []
    for b in range(args.count):
        attempts.append([])
        _lasq_one(d[b], e[b], 30 * args.n, attempts[-1])
    stats = round_stats(attempts)
    print(f"{args.dtype} {args.n} x {args.n}, {args.count} matrices: " +
          ", ".join(f"{k} {v:.1f}" for k, v in stats.items()))
    return stats


if __name__ == "__main__":
    main()
