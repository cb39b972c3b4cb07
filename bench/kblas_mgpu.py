"""batched.kblas on a DistributedMatrix (two GPUs) against our own single-GPU routines.

Part 1 (scaling): DGEMV N and T, DSYMV (lower), ZHEMV (lower) at
n in {16384, 32768, 49152, 65536, 98304}.  Each case times our single-GPU
routine on an n x n matrix on GPU 0 (left out, with a note, where it does
not fit one GPU), frees it, then times the same routine on an n x n
``DistributedMatrix.random`` over GPUs 0 and 1 (nb = library default) with x
and the result on GPU 0.  ``speedup`` = single-GPU time / two-GPU time (the
issue's targets: >= 1.9 for n >= 32768, >= 1.6 at 16384).  ``reduction_s``
times the reduction alone (the peer copy of one partial, the sum or the
scatter, the alpha scaling, as mgpu.py runs them) and ``reduction_share`` is
its share of the two-GPU time (an upper bound: on x's GPU the partial is
written in place).

Part 2 (larger than one GPU): a float64 matrix of order 140,000 (157 GB)
built in place by ``DistributedMatrix.random`` (no GPU ever holds it whole);
DGEMV N and DSYMV timed, checked on a sample of rows against a host
computation from the sampled rows and columns, and compared with twice the
single-GPU DGEMV bandwidth of part 1 (target: >= 85 %).

Every two-GPU result is checked on 8 sampled rows (relative error against a
float64/complex128 host product, tolerances of bench/harness.py).  Timing:
harness.time_calls on GPU 0's current stream (the other GPU's stream waits on
an event recorded there, and GPU 0's stream waits on it before the
reduction, so the events span the whole call).  Bytes: GEMV the matrix plus
vectors, SYMV/HEMV one triangle plus vectors.  Rows are written to
bench/results/<gpu>/kblas_mgpu.json with ``gpus``.

Usage: python3 bench/kblas_mgpu.py [--quick] [--dry-run] [--skip-large] [--large-n N]
       [--results-dir DIR]
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

SIZES = (16384, 32768, 49152, 65536, 98304)
LARGE_N = 140_000
ROUTINES = (("gemv", "float64", "N"), ("gemv", "float64", "T"), ("symv", "float64", "L"),
            ("hemv", "complex128", "L"))
SAMPLE_ROWS = 8
GPUS = 2
FREE_MARGIN = 2 * 2**30  # bytes left free on a GPU besides the matrix


@dataclass(frozen=True)
class MCase:
    routine: str
    dtype: str
    trans: str        # 'N'/'T' for gemv, 'L' (lower) for symv/hemv
    n: int
    part: str         # "scaling" or "large"
    single: bool = True  # also time the single-GPU routine
    repeats: int = 10

    @property
    def label(self) -> str:
        return f"{harness.BLAS_LETTER[self.dtype]}{self.routine} {self.trans} n={self.n}"


def all_cases(large_n: int = LARGE_N, skip_large: bool = False) -> list[MCase]:
    cases = [MCase(r, dt, tr, n, "scaling") for n in SIZES for r, dt, tr in ROUTINES]
    if not skip_large:
        cases += [MCase("gemv", "float64", "N", large_n, "large", single=False, repeats=5),
                  MCase("symv", "float64", "L", large_n, "large", single=False, repeats=5)]
    return cases


def quick_cases() -> list[MCase]:
    return [MCase("gemv", "float64", "N", 16384, "scaling"), MCase("gemv", "float64", "T", 16384, "scaling"),
            MCase("symv", "float64", "L", 16384, "scaling"), MCase("hemv", "complex128", "L", 16384, "scaling"),
            MCase("gemv", "float64", "N", 32768, "large", single=False, repeats=5)]


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


def time_reduction(case: MCase, D, cp) -> float:
    """The reduction alone, as mgpu.py runs it: one partial's peer copy into
    GPU 0's landing buffer, then its one kernel (the sum or the scatter, alpha)."""
    from batched.kblas import mgpu

    dt = np.dtype(case.dtype)
    n = case.n
    scatter = case.routine == "gemv" and case.trans != "N"
    lengths = [D.locals[d].shape[1] for d in range(GPUS)] if scatter else [n] * GPUS
    with cp.cuda.Device(1):
        p1 = cp.zeros(lengths[1], dt)
    with cp.cuda.Device(0):
        land = cp.zeros(sum(lengths), dt)
        pos = mgpu._positions(D, list(range(GPUS)), 0) if scatter else None
        rows = n
        out = cp.empty(rows, dt)
        call = mgpu.Call(D, out, None, out, cp, dt, dt.type(1.5), dt.type(0), rows, n)
        mgpu.peer_access(0, 1)
        st = cp.cuda.get_current_stream()

        def reduce():
            cp.cuda.runtime.memcpyPeerAsync(land.data.ptr + lengths[0] * dt.itemsize, 0, p1.data.ptr, 1,
                                            p1.nbytes, st.ptr)
            return mgpu._reduce(call, land, GPUS, pos)

        return harness.time_calls([reduce], repeats=case.repeats).seconds


def run_case(case: MCase, bt, cp, info, ceilings, single_gemv_gbps) -> dict:
    nbytes, flops = traffic(case)
    row = {"routine": case.routine, "dtype": case.dtype, "layout": "distributed", "trans": case.trans,
           "m": case.n, "n": case.n, "k": 0, "batch": 1, "offset": 0, "setting": None, "beta": 0.0,
           "note": case.part, "gpus": GPUS, "bytes": nbytes, "flops": flops, "ours_s": None,
           "single_gpu_s": None, "best_peer": None, "best_peer_s": None, "speedup": None, "gbps": None,
           "gflops": None, "fraction_of_limit": None, "limit": "bandwidth (2 GPUs)", "reduction_s": None,
           "reduction_share": None, "rel_error": None, "error_ok": None, "failure": None, "peers": {}}
    D = x = out = None
    try:
        if case.single:
            if _fits_one_gpu(case, info):
                row["single_gpu_s"] = time_single(case, bt, cp)
                row["best_peer"], row["best_peer_s"] = "ours_1gpu", row["single_gpu_s"]
                row["peers"]["ours_1gpu"] = row["single_gpu_s"]
            else:
                row["note"] += "; single GPU: matrix does not fit one GPU"
        t0 = time.perf_counter()
        D = bt.kblas.DistributedMatrix.random((case.n, case.n), dtype=case.dtype, seed=case.n,
                                              devices=list(range(GPUS)))
        row["build_s"] = time.perf_counter() - t0
        row["nb"] = D.nb
        with cp.cuda.Device(0):
            x = harness.random_array((case.n,), case.dtype, 13)
            out = cp.full(case.n, np.nan, case.dtype)
            fn, kw = _fn(bt, case.routine), _kwargs(case)
            t = harness.time_calls([lambda: fn(D, x, out=out, **kw)], repeats=case.repeats, keep_result=True)
            cp.cuda.get_current_stream().synchronize()
        row["ours_s"] = t.seconds
        row["ours_host_s"] = t.host_s
        row["gbps"] = nbytes / t.seconds / 1e9
        row["gflops"] = flops / t.seconds / 1e9
        bw = max(ceilings["copy_gbps"], ceilings["read_gbps"])
        row["limit_value"] = GPUS * bw
        row["fraction_of_limit"] = row["gbps"] / (GPUS * bw)
        if row["single_gpu_s"]:
            row["speedup"] = row["single_gpu_s"] / t.seconds
        if single_gemv_gbps:
            row["single_gemv_gbps"] = single_gemv_gbps
            row["fraction_of_2x_single_gemv"] = row["gbps"] / (GPUS * single_gemv_gbps)
        row["rel_error"] = sampled_error(case, D, x, out)
        row["error_ok"] = bool(row["rel_error"] <= harness.TOLERANCE[case.dtype])
        if case.part == "scaling":
            row["reduction_s"] = time_reduction(case, D, cp)
            row["reduction_share"] = row["reduction_s"] / t.seconds
    except Exception as exc:  # one broken case must not lose the others' rows
        row["failure"] = f"{type(exc).__name__}: {exc}"
        row["error_ok"] = False
        traceback.print_exc(limit=4)
    finally:
        D = x = out = None  # freed before the pools are emptied
        for dev in range(GPUS):
            with cp.cuda.Device(dev):
                harness.free_memory()
    return row


def dry_run(cases) -> list:
    print(f"kblas_mgpu: {len(cases)} cases on {GPUS} GPUs (dry run)")
    print(f"  {'case':<26}{'GiB matrix':>11}{'GiB/GPU':>9}{'GB moved':>10}  part")
    for c in cases:
        b, _ = traffic(c)
        print(f"  {c.label:<26}{matrix_bytes(c) / 2**30:>11.1f}{matrix_bytes(c) / GPUS / 2**30:>9.1f}"
              f"{b / 1e9:>10.2f}  {c.part}{'' if c.single else ' (no single-GPU run)'}")
    return []


def print_rows(rows) -> None:
    print(f"== kblas_mgpu: us per call on {GPUS} GPUs; speedup = single-GPU time / {GPUS}-GPU time")
    print(f"{'case':<26}{'2gpu_us':>10}{'1gpu_us':>10}{'spdup':>7}{'GB/s':>7}{'frac':>6}{'red%':>6}"
          f"{'of2x1':>6} {'err':>7}")
    for r in rows:
        f = lambda v, s: s.format(v) if v is not None else "-"  # noqa: E731
        label = f"{harness.BLAS_LETTER[r['dtype']]}{r['routine']} {r['trans']} n={r['n']}"
        print(f"{label:<26}{f(r['ours_s'] and r['ours_s'] * 1e6, '{:.0f}'):>10}"
              f"{f(r['single_gpu_s'] and r['single_gpu_s'] * 1e6, '{:.0f}'):>10}{f(r['speedup'], '{:.2f}'):>7}"
              f"{f(r['gbps'], '{:.0f}'):>7}{f(r['fraction_of_limit'] and 100 * r['fraction_of_limit'], '{:.0f}%'):>6}"
              f"{f(r['reduction_share'] and 100 * r['reduction_share'], '{:.1f}'):>6}"
              f"{f(r.get('fraction_of_2x_single_gemv') and 100 * r['fraction_of_2x_single_gemv'], '{:.0f}%'):>6}"
              f" {f(r['rel_error'], '{:.0e}'):>7} {'FAIL ' + r['failure'] if r['failure'] else ''}")


def main(argv=None, print_table: bool = True) -> list:
    p = argparse.ArgumentParser(description="batched.kblas on two GPUs (DistributedMatrix)")
    p.add_argument("--quick", action="store_true", help="a few cases; writes kblas_mgpu_quick.json")
    p.add_argument("--dry-run", action="store_true", help="print the cases; no GPU needed")
    p.add_argument("--skip-large", action="store_true", help=f"leave out the n = {LARGE_N} in-place cases")
    p.add_argument("--large-n", type=int, default=LARGE_N, help="order of the in-place matrix")
    p.add_argument("--results-dir", type=Path, default=None)
    args = p.parse_args(argv)
    cases = quick_cases() if args.quick else all_cases(args.large_n, args.skip_large)
    if args.dry_run:
        return dry_run(cases)

    import cupy as cp

    import batched as bt

    if cp.cuda.runtime.getDeviceCount() < GPUS:
        print(f"kblas_mgpu needs {GPUS} GPUs; {cp.cuda.runtime.getDeviceCount()} visible")
        return []
    with cp.cuda.Device(0):
        info = harness.device_info()
        ceilings = harness.measure_ceilings()
    from batched.kblas import mgpu

    print(f"kblas_mgpu on {GPUS} x {info['name']}: copy {ceilings['copy_gbps']:.0f} GB/s per GPU, "
          f"peer access 0<->1: {mgpu.peer_access(0, 1)}, {len(cases)} cases")
    rows, single_gemv_gbps = [], None
    for case in cases:
        row = run_case(case, bt, cp, info, ceilings, single_gemv_gbps if case.part == "large" else None)
        if case.routine == "gemv" and case.trans == "N" and row["single_gpu_s"]:
            single_gemv_gbps = traffic(case)[0] / row["single_gpu_s"] / 1e9  # the largest that ran, in order
        rows.append(row)
        print(f"  {case.label}: 2gpu={row['ours_s']} 1gpu={row['single_gpu_s']} speedup={row['speedup']} "
              f"err={row['rel_error']} {row['failure'] or ''}", flush=True)
    if single_gemv_gbps is None and any(c.part == "large" for c in cases):
        print("note: no single-GPU DGEMV N row ran; fraction_of_2x_single_gemv left out")

    out_dir = (args.results_dir or harness.RESULTS) / harness.gpu_dirname(info["name"])
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ("kblas_mgpu_quick.json" if args.quick else "kblas_mgpu.json")
    doc = harness.result_document(info, ceilings, rows, extra={"gpus": GPUS, "cupy": cp.__version__,
                                                               "quick": args.quick})
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")
    if print_table:
        print_rows(rows)
    return rows


if __name__ == "__main__":
    main()
