"""batched.kblas on a DistributedMatrix (several GPUs) against our own single-GPU routines.

Part 1 (scaling): DGEMV N and T, DSYMV (lower), ZHEMV (lower) at
n in {16384, 32768, 49152, 65536, 98304, 131072}.  Each (routine, n) times our
single-GPU routine on an n x n matrix on GPU 0 (left out, with a note, where
it does not fit one GPU), frees it, then, for every GPU count of ``--gpus``
(e.g. 2,4), times the same routine on an n x n ``DistributedMatrix.random``
over GPUs 0..count-1 (nb = library default) with x and the result on GPU 0.
``speedup`` = single-GPU time / multi-GPU time; ``speedup_vs_half`` = the
time on half as many GPUs / this time (the 2 -> 4 step, which also exists
where the matrix does not fit one GPU).  Targets: two GPUs >= 1.9 for
n >= 32768 and >= 1.6 at 16384 (issue #10); four GPUs >= 3.5 for
n >= 65536 (issue #11).  ``reduction_s`` times the reduction alone (the one
kernel on GPU 0 that reads every partial where it lies, the other GPUs' over
NVLink, and sums or scatters them with alpha, as mgpu.py runs it) and
``reduction_share`` is its share of the multi-GPU time.

Part 2 (larger than one GPU): float64 matrices built in place by
``DistributedMatrix.random`` (no GPU ever holds one whole), ``--large N:G``
(order N over G GPUs; default 140,000 (157 GB) over the largest count):
DGEMV N and DSYMV timed, checked on a sample of rows against a host
computation from the sampled rows and columns, and compared with G times the
single-GPU DGEMV bandwidth of part 1 (target: >= 85 %).

Every multi-GPU result is checked on 8 sampled rows (relative error against a
float64/complex128 host product, tolerances of bench/harness.py).  Timing:
harness.time_calls on GPU 0's current stream (the other GPUs' streams wait on
an event recorded there, and GPU 0's stream waits on theirs before the
reduction, so the events span the whole call).  Bytes: GEMV the matrix plus
vectors, SYMV/HEMV one triangle plus vectors.  Rows (one per case and GPU
count, with ``gpus``) go to bench/results/<gpu>/kblas_mgpu.json, or to
<gpu>-x<count>/ when the largest count is above two.

Usage: python3 bench/kblas_mgpu.py [--gpus 2,4] [--sizes 32768,65536] [--large 200000:4]
       [--quick] [--dry-run] [--skip-large] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness  # noqa: E402

SIZES = (16384, 32768, 49152, 65536, 98304, 131072)
LARGE_N = 140_000
ROUTINES = (("gemv", "float64", "N"), ("gemv", "float64", "T"), ("symv", "float64", "L"),
            ("hemv", "complex128", "L"))
SAMPLE_ROWS = 8
FREE_MARGIN = 2 * 2**30  # bytes left free on a GPU besides the matrix
LARGE_TARGET = 0.85      # of (GPUs x single-GPU DGEMV bandwidth)


def speedup_target(gpus: int, n: int) -> float | None:
    """The issues' scaling targets over one GPU (None: no target for this case)."""
    if gpus == 2:
        return 1.9 if n >= 32768 else (1.6 if n >= 16384 else None)
    if gpus == 4:
        return 3.5 if n >= 65536 else None
    return None


@dataclass(frozen=True)
class MCase:
    routine: str
    dtype: str
    trans: str        # 'N'/'T' for gemv, 'L' (lower) for symv/hemv
    n: int
    part: str         # "scaling" or "large"
    gpus: tuple       # GPU counts of the distributed runs, ascending
    single: bool = True  # also time the single-GPU routine
    repeats: int = 10

    @property
    def label(self) -> str:
        return f"{harness.BLAS_LETTER[self.dtype]}{self.routine} {self.trans} n={self.n}"


def all_cases(counts, sizes=SIZES, large=(), skip_large: bool = False) -> list[MCase]:
    cases = [MCase(r, dt, tr, n, "scaling", tuple(counts)) for n in sizes for r, dt, tr in ROUTINES]
    if not skip_large:
        for n, g in large:
            cases += [MCase("gemv", "float64", "N", n, "large", (g,), single=False, repeats=5),
                      MCase("symv", "float64", "L", n, "large", (g,), single=False, repeats=5)]
    return cases


def quick_cases(counts) -> list[MCase]:
    c = tuple(counts)
    return [MCase("gemv", "float64", "N", 16384, "scaling", c), MCase("gemv", "float64", "T", 16384, "scaling", c),
            MCase("symv", "float64", "L", 16384, "scaling", c), MCase("hemv", "complex128", "L", 16384, "scaling", c),
            MCase("gemv", "float64", "N", 32768, "large", (c[-1],), single=False, repeats=5)]


def traffic(case: MCase) -> tuple[int, int]:
    """(bytes, flops): the matrix (one triangle for SYMV/HEMV) plus x and y."""
    dt = np.dtype(case.dtype)
    n = case.n
    matrix = n * n if case.routine == "gemv" else n * (n + 1) // 2
    per_flop = 8 if dt.kind == "c" else 2
    return (matrix + 2 * n) * dt.itemsize, per_flop * n * n


def matrix_bytes(case: MCase) -> int:
    return case.n * case.n * np.dtype(case.dtype).itemsize


# --- operands and calls ----------------------------------------------------------------


def _fn(bt, routine):
    return {"gemv": bt.kblas.gemv, "symv": bt.kblas.symv, "hemv": bt.kblas.hemv}[routine]


def _kwargs(case: MCase) -> dict:
    return {"trans": case.trans} if case.routine == "gemv" else {"lower": case.trans == "L"}


def _fits_one_gpu(case: MCase, info: dict) -> bool:
    return matrix_bytes(case) + FREE_MARGIN <= info["memory_bytes"]


def time_single(case: MCase, bt, cp) -> float:
    """Our single-GPU routine on GPU 0 (its own random matrix, freed afterwards)."""
    with cp.cuda.Device(0):
        A = harness.random_array((case.n, case.n), case.dtype, 11).T  # F order
        x = harness.random_array((case.n,), case.dtype, 12)
        out = cp.empty(case.n, case.dtype)
        fn, kw = _fn(bt, case.routine), _kwargs(case)
        harness.settle()
        t = harness.time_calls([lambda: fn(A, x, out=out, **kw)], repeats=case.repeats)
        A = x = out = None  # freed before the pool is emptied
    harness.free_memory()
    return t.seconds


def sampled_error(case: MCase, D, x, got) -> float:
    """max |got_i - ref_i| / max |ref_i| over sampled outputs, ref on the host."""
    n = case.n
    idx = np.unique(np.concatenate([[0, n - 1], np.random.default_rng(n).integers(0, n, SAMPLE_ROWS - 2)]))
    xh = np.asarray(x.get()).astype(np.complex128 if np.dtype(case.dtype).kind == "c" else np.float64)
    g = np.asarray(got.get() if hasattr(got, "get") else got)[idx]
    if case.routine == "gemv" and case.trans == "N":
        ref = D.take_rows(idx) @ xh
    elif case.routine == "gemv":
        ref = D.take_columns(idx).T @ xh
    else:  # lower triangle stored: row i of A is A[i, :i+1] then the mirror of column i below
        R, C = D.take_rows(idx), D.take_columns(idx)
        herm = case.routine == "hemv"
        ref = []
        for k, i in enumerate(idx):
            d = R[k, i].real if herm else R[k, i]
            below = C[i + 1:, k].conj() if herm else C[i + 1:, k]
            ref.append(R[k, :i] @ xh[:i] + d * xh[i] + below @ xh[i + 1:])
        ref = np.array(ref)
    den = np.max(np.abs(ref))
    return float(np.max(np.abs(g - ref)) / den) if den else float(np.max(np.abs(g - ref)))


def time_reduction(case: MCase, D, gpus: int, cp) -> float:
    """The reduction alone, as mgpu.py runs it: one kernel on GPU 0 that reads
    every GPU's partial where it lies (the others' over NVLink) and sums or
    scatters them, with alpha."""
    from batched.kblas import mgpu

    dt = np.dtype(case.dtype)
    n = case.n
    kind = "scatter" if case.routine == "gemv" and case.trans != "N" else "sum"
    partials = []
    for d in range(gpus):
        with cp.cuda.Device(d):
            partials.append(cp.zeros(D.locals[d].shape[1] if kind == "scatter" else n, dt))
    with cp.cuda.Device(0):
        for d in range(1, gpus):
            mgpu.peer_access(0, d)
        pointers = [p.data.ptr for p in partials]
        out = cp.empty(n, dt)
        call = mgpu.Call(D, out, None, out, cp, dt, dt.type(1.5), dt.type(0), n, n)
        return harness.time_calls([lambda: mgpu._reduce(call, kind, pointers, D.nb)],
                                  repeats=case.repeats).seconds


def _free_all(cp, gpus: int) -> None:
    for dev in range(gpus):
        with cp.cuda.Device(dev):
            harness.free_memory()


def _row(case: MCase, gpus: int) -> dict:
    nbytes, flops = traffic(case)
    return {"routine": case.routine, "dtype": case.dtype, "layout": "distributed", "trans": case.trans,
            "m": case.n, "n": case.n, "k": 0, "batch": 1, "offset": 0, "setting": None, "beta": 0.0,
            "note": case.part, "gpus": gpus, "bytes": nbytes, "flops": flops, "ours_s": None,
            "single_gpu_s": None, "best_peer": None, "best_peer_s": None, "speedup": None,
            "speedup_vs_half": None, "target": speedup_target(gpus, case.n) if case.part == "scaling" else None,
            "met": None, "gbps": None, "gflops": None, "fraction_of_limit": None,
            "limit": f"bandwidth ({gpus} GPUs)", "reduction_s": None, "reduction_share": None,
            "rel_error": None, "error_ok": None, "failure": None, "peers": {}}


def run_distributed(case: MCase, gpus: int, bt, cp, ceilings, single_s, single_gemv_gbps) -> dict:
    """One row: the case on a DistributedMatrix over GPUs 0..gpus-1."""
    nbytes, flops = traffic(case)
    row = _row(case, gpus)
    if single_s:
        row["single_gpu_s"] = row["best_peer_s"] = row["peers"]["ours_1gpu"] = single_s
        row["best_peer"] = "ours_1gpu"
    elif case.single:
        row["note"] += "; single GPU: matrix does not fit one GPU"
    D = x = out = None
    try:
        t0 = time.perf_counter()
        D = bt.kblas.DistributedMatrix.random((case.n, case.n), dtype=case.dtype, seed=case.n,
                                              devices=list(range(gpus)))
        row["build_s"] = time.perf_counter() - t0
        row["nb"] = D.nb
        with cp.cuda.Device(0):
            x = harness.random_array((case.n,), case.dtype, 13)
            out = cp.full(case.n, np.nan, case.dtype)
            fn, kw = _fn(bt, case.routine), _kwargs(case)
            harness.settle(range(gpus))
            t = harness.time_calls([lambda: fn(D, x, out=out, **kw)], repeats=case.repeats, keep_result=True)
            cp.cuda.get_current_stream().synchronize()
        row["ours_s"] = t.seconds
        row["ours_host_s"] = t.host_s
        row["gbps"] = nbytes / t.seconds / 1e9
        row["gflops"] = flops / t.seconds / 1e9
        bw = max(ceilings["copy_gbps"], ceilings["read_gbps"])
        row["limit_value"] = gpus * bw
        row["fraction_of_limit"] = row["gbps"] / (gpus * bw)
        if single_s:
            row["speedup"] = single_s / t.seconds
            if row["target"] is not None:
                row["met"] = bool(row["speedup"] >= row["target"])
        if case.part == "large" and single_gemv_gbps:
            row["single_gemv_gbps"] = single_gemv_gbps
            row["fraction_of_gpus_x_single_gemv"] = row["gbps"] / (gpus * single_gemv_gbps)
            row["target"] = LARGE_TARGET
            row["met"] = bool(row["fraction_of_gpus_x_single_gemv"] >= LARGE_TARGET)
        row["rel_error"] = sampled_error(case, D, x, out)
        row["error_ok"] = bool(row["rel_error"] <= harness.TOLERANCE[case.dtype])
        if case.part == "scaling":
            row["reduction_s"] = time_reduction(case, D, gpus, cp)
            row["reduction_share"] = row["reduction_s"] / t.seconds
    except Exception as exc:  # one broken case must not lose the others' rows
        row["failure"] = f"{type(exc).__name__}: {exc}"
        row["error_ok"] = False
        traceback.print_exc(limit=4)
    finally:
        D = x = out = None  # freed before the pools are emptied
        _free_all(cp, gpus)
    return row


def run_case(case: MCase, bt, cp, info, ceilings, single_gemv_gbps) -> list[dict]:
    """The single-GPU time once, then one row per GPU count."""
    single_s = None
    if case.single and _fits_one_gpu(case, info):
        try:
            single_s = time_single(case, bt, cp)
        except Exception:  # noqa: BLE001  (the multi-GPU rows still run)
            traceback.print_exc(limit=4)
            _free_all(cp, 1)
    rows = []
    for g in case.gpus:
        row = run_distributed(case, g, bt, cp, ceilings, single_s, single_gemv_gbps)
        half = next((r for r in rows if r["gpus"] * 2 == g and r["ours_s"]), None)
        if half and row["ours_s"]:
            row["speedup_vs_half"] = half["ours_s"] / row["ours_s"]
        rows.append(row)
        print(f"  {case.label} on {g} GPUs: {row['ours_s']} s, 1gpu={single_s} speedup={row['speedup']} "
              f"vs_half={row['speedup_vs_half']} err={row['rel_error']} {row['failure'] or ''}", flush=True)
    return rows


def dry_run(cases) -> list:
    print(f"kblas_mgpu: {len(cases)} cases (dry run)")
    print(f"  {'case':<26}{'GiB matrix':>11}{'GPUs':>8}{'GiB/GPU':>9}{'GB moved':>10}  part")
    for c in cases:
        b, _ = traffic(c)
        print(f"  {c.label:<26}{matrix_bytes(c) / 2**30:>11.1f}{','.join(map(str, c.gpus)):>8}"
              f"{matrix_bytes(c) / c.gpus[-1] / 2**30:>9.1f}{b / 1e9:>10.2f}  {c.part}"
              f"{'' if c.single else ' (no single-GPU run)'}")
    return []


def print_rows(rows) -> None:
    print("== kblas_mgpu: us per call; speedup = single-GPU time / multi-GPU time; "
          "x/half = time on half the GPUs / this time")
    print(f"{'case':<26}{'gpus':>5}{'us':>10}{'1gpu_us':>10}{'spdup':>7}{'target':>7}{'x/half':>7}{'GB/s':>7}"
          f"{'frac':>6}{'red%':>6}{'ofGx1':>6} {'err':>7}")
    for r in rows:
        f = lambda v, s: s.format(v) if v is not None else "-"  # noqa: E731
        label = f"{harness.BLAS_LETTER[r['dtype']]}{r['routine']} {r['trans']} n={r['n']}"
        print(f"{label:<26}{r['gpus']:>5}{f(r['ours_s'] and r['ours_s'] * 1e6, '{:.0f}'):>10}"
              f"{f(r['single_gpu_s'] and r['single_gpu_s'] * 1e6, '{:.0f}'):>10}{f(r['speedup'], '{:.2f}'):>7}"
              f"{f(r['target'], '{:.2f}'):>7}{f(r['speedup_vs_half'], '{:.2f}'):>7}"
              f"{f(r['gbps'], '{:.0f}'):>7}{f(r['fraction_of_limit'] and 100 * r['fraction_of_limit'], '{:.0f}%'):>6}"
              f"{f(r['reduction_share'] and 100 * r['reduction_share'], '{:.1f}'):>6}"
              f"{f(r.get('fraction_of_gpus_x_single_gemv') and 100 * r['fraction_of_gpus_x_single_gemv'], '{:.0f}%'):>6}"
              f" {f(r['rel_error'], '{:.0e}'):>7} {'FAIL ' + r['failure'] if r['failure'] else ''}")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _large(text: str) -> tuple[int, int]:
    n, _, g = text.partition(":")
    return int(n), int(g) if g else 0


def main(argv=None, print_table: bool = True) -> list:
    p = argparse.ArgumentParser(description="batched.kblas on several GPUs (DistributedMatrix)")
    p.add_argument("--gpus", type=harness.gpu_counts, default=[2], help="GPU counts of the distributed runs, e.g. 2,4 (default 2)")
    p.add_argument("--sizes", type=_ints, default=list(SIZES), help="orders of the scaling part")
    p.add_argument("--large", type=_large, action="append", default=None,
                   help=f"N:G, an in-place float64 matrix of order N over G GPUs (repeatable; "
                        f"default {LARGE_N} over the largest count)")
    p.add_argument("--quick", action="store_true", help="a few cases; writes kblas_mgpu_quick.json")
    p.add_argument("--dry-run", action="store_true", help="print the cases; no GPU needed")
    p.add_argument("--skip-large", action="store_true", help="leave out the in-place cases")
    p.add_argument("--results-dir", type=Path, default=None)
    args = p.parse_args(argv)
    counts = args.gpus
    if not counts or counts[0] < 1:
        p.error("--gpus takes positive GPU counts")
    large = [(n, g or counts[-1]) for n, g in (args.large or [(LARGE_N, 0)])]
    cases = quick_cases(counts) if args.quick else all_cases(counts, args.sizes, large, args.skip_large)
    if args.dry_run:
        return dry_run(cases)

    import cupy as cp

    import batched as bt

    visible = cp.cuda.runtime.getDeviceCount()
    need = max(max(c.gpus) for c in cases)
    if visible < need:
        print(f"kblas_mgpu needs {need} GPUs; {visible} visible")
        return []
    with cp.cuda.Device(0):
        info = harness.device_info()
        ceilings = harness.measure_ceilings()
    from batched.kblas import mgpu

    peers = {d: mgpu.peer_access(0, d) for d in range(1, need)}
    print(f"kblas_mgpu on {need} x {info['name']} (GPU counts {counts}): copy {ceilings['copy_gbps']:.0f} GB/s "
          f"per GPU, peer access from GPU 0: {peers}, {len(cases)} cases")
    rows, single_gemv_gbps = [], None
    for case in cases:
        case_rows = run_case(case, bt, cp, info, ceilings, single_gemv_gbps if case.part == "large" else None)
        single = case_rows[0]["single_gpu_s"]
        if case.routine == "gemv" and case.trans == "N" and single:
            single_gemv_gbps = traffic(case)[0] / single / 1e9  # the largest that ran, in order
        rows += case_rows
    if single_gemv_gbps is None and any(c.part == "large" for c in cases):
        print("note: no single-GPU DGEMV N row ran; fraction_of_gpus_x_single_gemv left out")

    folder = harness.gpu_dirname(info["name"], need)
    out_dir = (args.results_dir or harness.RESULTS) / folder
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ("kblas_mgpu_quick.json" if args.quick else "kblas_mgpu.json")
    doc = harness.result_document(info, ceilings, rows, extra={
        "gpus": counts, "visible_gpus": visible, "peer_access_from_0": {str(k): v for k, v in peers.items()},
        "cupy": cp.__version__, "quick": args.quick})
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")
    if print_table:
        print_rows(rows)
    return rows


if __name__ == "__main__":
    main()
