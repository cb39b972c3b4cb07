"""Host overhead of one small call with a cached kernel: ours against cupy.matmul.

Each call is timed by wall clock (time.perf_counter) over many back-to-back
iterations, synchronizing only at the end, so the figure is what a Python
loop of small calls pays per call (the GPU work, a few microseconds, hides
behind it).  Ours and the peers take turns, one loop each a round, so that
the host's speed, which drifts by a third between rounds on the lent
machines, is the same for both; times are medians over the rounds and
``ratio`` the median of the rounds' ratios.  Calls: ``batched.gemv`` on a
(4, 8, 8) float64 array and a (4, 8) vector batch, ``batched.gemm`` on two
(4, 8, 8) arrays, each with a new result and with ``out=``; the peers are
``cupy.matmul`` (and ``torch.bmm`` when PyTorch is installed) on the same
arrays.  ``batched.kblas.gemv`` on one 1024 x 1024 float64 matrix with ``out=``
against ``cupy.cublas.gemv`` (and ``torch.mv``).  ``ratio`` is ours / cupy.

Usage: python3 bench/overhead.py [--quick] [--dry-run]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import batched as bt  # noqa: E402
from bench import harness  # noqa: E402

BATCH, N = 4, 8
KBLAS_N = 1024  # batched.kblas.gemv's matrix: its GPU time (about 8 us) hides behind the host's


def loop_seconds(fns: dict, iters: int, rounds: int = 9, warmup: int = 200) -> tuple:
    """({name: median over ``rounds`` of (wall time of ``iters`` calls + one sync) /
    iters}, median of the rounds' ours / cupy); each round times every function once."""
    import cupy as cp

    stream = cp.cuda.get_current_stream()
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    stream.synchronize()
    found = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            stream.synchronize()
            found[name].append((time.perf_counter() - t0) / iters)
    ratio = statistics.median(o / c for o, c in zip(found["ours"], found["cupy"]))
    return {name: statistics.median(v) for name, v in found.items()}, ratio


def calls():
    """{(routine, variant): {"ours": fn, "cupy": fn, "torch": fn}}"""
    import cupy as cp

    A = harness.random_array((BATCH, N, N), "float64", 1)
    B = harness.random_array((BATCH, N, N), "float64", 2)
    x = harness.random_array((BATCH, N), "float64", 3)
    x3 = x[..., None]
    y, y3, C = cp.empty((BATCH, N)), cp.empty((BATCH, N, 1)), cp.empty((BATCH, N, N))
    found = {
        ("gemv", "new"): {"ours": lambda: bt.gemv(A, x), "cupy": lambda: cp.matmul(A, x3)},
        ("gemv", "out="): {"ours": lambda: bt.gemv(A, x, out=y), "cupy": lambda: cp.matmul(A, x3, out=y3)},
        ("gemm", "new"): {"ours": lambda: bt.gemm(A, B), "cupy": lambda: cp.matmul(A, B)},
        ("gemm", "out="): {"ours": lambda: bt.gemm(A, B, out=C), "cupy": lambda: cp.matmul(A, B, out=C)},
    }
    # One large matrix (batched.kblas): ours replays its kept recipe; the peer is the
    # cuBLAS GEMV CuPy wraps.
    import cupy.cublas

    KA = cp.asfortranarray(harness.random_array((KBLAS_N, KBLAS_N), "float64", 4))
    kx, ky = harness.random_array((KBLAS_N,), "float64", 5), cp.empty(KBLAS_N)
    found[("kblas_gemv", "out=")] = {"ours": lambda: bt.kblas.gemv(KA, kx, out=ky),
                                     "cupy": lambda: cupy.cublas.gemv("N", 1.0, KA, kx, 0.0, ky)}
    torch = harness.torch_or_none()
    if torch is not None:
        tA, tB, tx = (harness.as_torch(torch, a) for a in (A, B, x3))
        found[("gemv", "new")]["torch"] = lambda: torch.bmm(tA, tx)
        found[("gemm", "new")]["torch"] = lambda: torch.bmm(tA, tB)
        tKA, tkx = harness.as_torch(torch, KA), harness.as_torch(torch, kx)
        found[("kblas_gemv", "out=")]["torch"] = lambda: torch.mv(tKA, tkx)
    return found


def main(argv=None, print_table: bool = True) -> list:
    args = harness.parse_args(argv, "Host overhead of small batched calls", sweep=False)
    iters = 300 if args.quick else 3000
    if args.dry_run:
        print(f"overhead: gemv and gemm on ({BATCH}, {N}, {N}) float64, new result and out=; kblas.gemv on "
              f"{KBLAS_N} x {KBLAS_N}; {iters} iterations x 9 rounds, ours and the peers in turn; peers "
              "cupy.matmul, cupy.cublas.gemv, torch.bmm, torch.mv")
        return []
    import cupy

    info = harness.device_info()
    ceilings = harness.measure_ceilings()
    rows = []
    for (routine, variant), fns in calls().items():
        secs, ratio = loop_seconds(fns, iters)
        ours = secs.pop("ours")
        n, batch = (KBLAS_N, 1) if routine.startswith("kblas") else (N, BATCH)
        rows.append({"routine": routine, "dtype": "float64", "layout": "uniform", "trans": "NN" if routine == "gemm"
                     else "N", "m": n, "n": n, "k": N if routine == "gemm" else 0, "batch": batch, "offset": 0,
                     "setting": None, "variant": variant, "iterations": iters, "ours_s": ours, "peers": secs,
                     "ours_us": ours * 1e6, "cupy_us": secs["cupy"] * 1e6,
                     "torch_us": secs["torch"] * 1e6 if "torch" in secs else None,
                     "ratio": ratio})
    folder = (args.results_dir or harness.RESULTS) / harness.gpu_dirname(info["name"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("overhead_quick.json" if args.quick else "overhead.json")
    doc = harness.result_document(info, ceilings, rows, extra={
        "cupy": cupy.__version__, "quick": bool(args.quick),
        "method": "wall clock per call, synchronized at the end of each loop; ours and the peers "
                  "in turn, a loop each a round; ratio = median of the rounds' ours / cupy"})
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")
    if print_table:
        print_rows(rows)
    return rows


def print_rows(rows) -> None:
    print("== overhead: microseconds per call (wall clock, async), ratio = ours / cupy")
    print(f"{'call':<16}{'ours':>8}{'cupy':>8}{'torch':>8}{'ratio':>7}")
    for r in rows:
        torch_us = f"{r['torch_us']:.1f}" if r["torch_us"] is not None else "-"
        print(f"{r['routine'] + ' ' + r['variant']:<16}{r['ours_us']:>8.1f}{r['cupy_us']:>8.1f}"
              f"{torch_us:>8}{r['ratio']:>7.2f}")


if __name__ == "__main__":
    main()
