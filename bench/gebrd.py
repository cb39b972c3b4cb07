"""Batched GEBRD against a loop of cuSOLVER xGEBRD calls, and against the
paper's GEMV-bound model with the GEMV rate measured in the same run.

Cases: float64 and float32, square n x n and tall 2n x n, n in 32..512, the
batch sized so the matrices take 64 MiB (at least 16 matrices).  Rows carry the
usual figures plus ``model_s`` (the model's time), ``fraction_of_model``
(model_s / ours_s; the issue's target is >= 0.8) and ``gemv_gflops`` /
``gemm_gflops`` (the rates the model used).

The model (seed paper, section 6.2): GEBRD's F = 4 m n^2 - 4 n^3 / 3 flops
(m >= n; x4 for complex) are half GEMV and half GEMM in the blocked algorithm,
so t_model = (F / 2) / GEMV_rate + (F / 2) / GEMM_rate.  GEMV_rate is our
batched GEMV-T on the same (batch, m, n) matrices (bt.gemv, timed here);
GEMM_rate our batched GEMM of the trailing-update shape (m x 16 times 16 x n).
The blocked design (LABRD panels + GEMM trailing update, matrix in device
memory) is the one the model describes; the staged (big-tile) sweep does all F
flops as GEMVs, but on shared memory, so device memory's GEMV rate does not
bind it and its fraction can pass 1.

Switch-over cases (note "switch", ``--switch`` runs only these, the default
run leaves them out): float64 and float32 square n in 64..512 with the
chooser's staged (big-tile) setting forced where the matrix fits into shared
memory, next to the blocked settings (nb = 16 and 32) forced: the chooser
takes the staged design wherever it fits (measured faster there).

Lanes cases (note "lanes", ``--lanes`` runs only these): float64 and float32, n
in 4..32 square, 32 x 16 and 16 x 32, the lanes design (a group of 8-32 lanes a
matrix, in registers; for the chooser once measured: gebrd_settings.LANES_BY_DEFAULT)
forced next to the staged setting the chooser takes there.

Cluster cases (note "cluster", ``--cluster`` runs only these): float64 and float32,
256 x 256, 512 x 512, 512 x 256 and 1024 x 512 (16-256 matrices), the blocked design
on one block a matrix (DEFAULT_BLOCKED) next to the same on clusters of 2, 4 and 8
blocks (the ones whose blocks fit two waves of the SMs at most; for the chooser once
measured: gebrd_settings.CLUSTER_BY_DEFAULT), all forced; and (note "narrow") one
block and the chooser's cluster with LABRD's panel GEMVs a thread a row
(gebrd_settings.NARROW_GEMV; the "cluster" rows run them in the 32 x 8 shape).  The cuSOLVER loop runs on the one-block row of each
shape only (the other rows are an A/B of our settings).

Peer ``cusolver`` = one cusolverDn<t>gebrd call per matrix (CuPy's bindings,
cupy_backends.cuda.libs.cusolver), all on the current stream; wide matrices
would go through A^T (only square and tall cases here).

Usage: python3 bench/gebrd.py [--quick] [--switch | --lanes | --cluster] [--sweep] [--dry-run] [--dtype D] [--results-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import batched as bt  # noqa: E402
from batched.factorizations import gebrd_settings as gs  # noqa: E402
from batched.factorizations.gebrd import gebrd  # noqa: E402
from batched.factorizations.gebrd_settings import (BLOCKED_SETTINGS, CLUSTER_SETTINGS,  # noqa: E402
                                                   DEFAULT_BLOCKED, GEBRD_SETTINGS, GebrdSetting,
                                                   _staged_shape, cluster_setting_for, lanes_setting_for)
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SIZES = (32, 64, 128, 256, 512)
SWITCH_SIZES = (64, 96, 128, 160, 192, 256, 384, 512)
SMEM_LIMIT = 227 * 1024  # H100's opt-in limit: staged cases that do not fit are left out
TARGET = 64 * harness.MIB
NB = 16  # the panel width of the model's trailing GEMM (paper: 8 or 16 for GEBRD)


def case(dtype, m, n, setting=None, note=None) -> Case:
    batch = max(16, harness.batch_for(m * n * np.dtype(dtype).itemsize, TARGET))
    return Case("gebrd", dtype, "uniform", "N", m, n, 0, batch, setting=setting, repeats=5,
                note=note or ("square" if m == n else "tall"))


def switch_cases() -> list[Case]:
    """Staged (big-tile, where it fits) against blocked, both forced, per size."""
    out = []
    for dt in ("float64", "float32"):
        item = np.dtype(dt).itemsize
        for n in SWITCH_SIZES:
            staged = GebrdSetting(*_staged_shape(n, item), True)  # the chooser's staged shape for n
            if staged.smem_bytes(n, n, item) <= SMEM_LIMIT:
                out.append(case(dt, n, n, staged, "switch"))
            out.extend(case(dt, n, n, s, "switch") for s in BLOCKED_SETTINGS)
    return out


LANES_SHAPES = ((4, 4), (8, 8), (12, 12), (16, 16), (24, 24), (32, 32), (32, 16), (16, 32))


def lanes_cases() -> list[Case]:
    """The lanes design against the staged setting the chooser takes there, both forced."""
    out = []
    for dt in ("float64", "float32"):
        for m, n in LANES_SHAPES:
            staged = GebrdSetting(*_staged_shape(max(m, n), np.dtype(dt).itemsize), True)
            lanes = lanes_setting_for(m, n, dt)
            out.extend(case(dt, m, n, s, "lanes") for s in (staged, lanes))
    return out


CLUSTER_SHAPES = ((256, 256), (512, 512), (512, 256), (1024, 512))


def cluster_cases(sm_count: int = 132) -> list[Case]:
    """One block a matrix against clusters of 2, 4, 8 blocks, all forced."""
    out = []
    for dt in ("float64", "float32"):
        for m, n in CLUSTER_SHAPES:
            batch = case(dt, m, n).batch
            out.extend(case(dt, m, n, s, "cluster") for s in (DEFAULT_BLOCKED, *CLUSTER_SETTINGS)
                       if batch * s.cluster <= 2 * sm_count)
            # the same with LABRD's panel GEMVs a thread a row (gebrd_settings.NARROW_GEMV)
            out.extend(case(dt, m, n, s, "narrow") for s in (DEFAULT_BLOCKED, cluster_setting_for(m, n, batch))
                       if s is not None)
    return out


def all_cases() -> list[Case]:
    return [case(dt, f * n, n) for dt in ("float64", "float32") for f in (1, 2) for n in SIZES]


def quick_cases() -> list[Case]:
    return [case("float64", 32, 32), case("float64", 256, 128), case("float32", 128, 128)]


def gebrd_flops(c: Case) -> int:
    m, n = max(c.m, c.n), min(c.m, c.n)
    per = 4 if c.dtype.startswith("c") else 1
    return int(per * (4 * m * n * n - 4 * n ** 3 / 3)) * c.batch


def traffic(c: Case):
    """Bytes: A read and written once (the big-tile lower bound); flops as LAPACK counts."""
    return 2 * c.m * c.n * np.dtype(c.dtype).itemsize * c.batch, gebrd_flops(c)


def build(c: Case, index: int) -> Operands:
    A = harness.random_array((c.batch, c.m, c.n), c.dtype, 7919 * index + 11)
    return Operands({"A": A}, ours_view=lambda r: _bidiagonal_values(r[1], r[2]),
                    peer_view=lambda r: _bidiagonal_values(*r))


def _bidiagonal_values(d, e):
    """Singular values of the bidiagonal (d, e), the check of ours against the peer.
    d and e themselves are not: they are ill-conditioned functions of A (random
    64 x 64 float64 matrices perturbed by 1e-16 relative move max |d_k| by 4.5e-12
    relative in the NumPy backend; ours and cuSOLVER differed by 2e-10 to 1e-9),
    while the bidiagonal's singular values, A's, move by about eps |A|.  The same
    bdsqr runs on both, so a difference is GEBRD's."""
    return bt.bdsqr(d, e)[0].ravel()


def ours(c: Case, d: dict, setting):
    # the --cluster A/B: "narrow" rows with LABRD's panel GEMVs a thread a row, "cluster"
    # rows with the 32 x 8 shape (gebrd_settings.NARROW_GEMV); other rows the default
    default = gs.NARROW_GEMV
    if c.note in ("cluster", "narrow"):
        gs.NARROW_GEMV = c.note == "narrow"
    try:
        return gebrd(d["A"], setting=setting)
    finally:
        gs.NARROW_GEMV = default


_CUSOLVER = {"float64": "d", "float32": "s"}


def peer_cusolver(c: Case, d: dict):
    """A loop of cuSOLVER GEBRD calls; returns (d, e) (for the check)."""
    import cupy as cp

    try:
        from cupy_backends.cuda.libs import cusolver
    except ImportError as exc:
        raise NotApplicable from exc
    letter = _CUSOLVER.get(c.dtype)
    if letter is None or c.m < c.n or c.note == "lanes":  # lanes cases: an A/B of our two designs
        raise NotApplicable
    if c.note == "narrow" or (c.note == "cluster" and c.setting != DEFAULT_BLOCKED):
        raise NotApplicable  # the A/B's other rows: the loop runs once a shape (seconds each)
    key = "cusolver_ws"
    if key not in d:
        handle = cp.cuda.device.get_cusolver_handle()
        lwork = getattr(cusolver, f"{letter}gebrd_bufferSize")(handle, c.m, c.n)
        dt = np.dtype(c.dtype)
        d[key] = (handle, lwork, cp.empty((c.batch, c.n, c.m), dt), cp.empty((c.batch, c.n), dt),
                  cp.empty((c.batch, max(c.n - 1, 1)), dt), cp.empty((c.batch, c.n), dt),
                  cp.empty((c.batch, c.n), dt), cp.empty(max(lwork, 1), dt), cp.empty(1, np.int32))
    handle, lwork, work_a, D, E, TQ, TP, W, info = d[key]
    work_a[...] = d["A"].swapaxes(-1, -2)  # column-major copies (cuSOLVER overwrites A)
    fn = getattr(cusolver, f"{letter}gebrd")
    cusolver.setStream(handle, cp.cuda.get_current_stream().ptr)
    item = np.dtype(c.dtype).itemsize
    for b in range(c.batch):
        fn(handle, c.m, c.n, work_a.data.ptr + b * c.m * c.n * item, c.m, D.data.ptr + b * c.n * item,
           E.data.ptr + b * max(c.n - 1, 1) * item, TQ.data.ptr + b * c.n * item, TP.data.ptr + b * c.n * item,
           W.data.ptr, lwork, info.data.ptr)
    return D, E[:, : max(c.n - 1, 0)]


def model_rates(c: Case) -> dict:
    """Batched GEMV-T and GEMM rates (GFLOP/s) on this case's shapes, timed now."""
    A = harness.random_array((c.batch, c.m, c.n), c.dtype, 3)
    x = harness.random_array((c.batch, c.m), c.dtype, 4)
    gemv_s = harness.time_calls([lambda: bt.gemv(A, x, trans="T")], repeats=10).seconds
    U = harness.random_array((c.batch, c.m, NB), c.dtype, 5)
    Y = harness.random_array((c.batch, NB, c.n), c.dtype, 6)
    gemm_s = harness.time_calls([lambda: bt.gemm(U, Y)], repeats=10).seconds
    per = 8 if c.dtype.startswith("c") else 2
    return {"gemv_gflops": per * c.m * c.n * c.batch / gemv_s / 1e9,
            "gemm_gflops": per * c.m * c.n * NB * c.batch / gemm_s / 1e9}


def add_model(rows, cases) -> None:
    for row, c in zip(rows, cases):
        if row.get("ours_s") is None:
            continue
        rates = model_rates(c)
        half = gebrd_flops(c) / 2
        model_s = half / (rates["gemv_gflops"] * 1e9) + half / (rates["gemm_gflops"] * 1e9)
        row.update(rates, model_s=model_s, fraction_of_model=model_s / row["ours_s"])
        harness.free_memory()


def main(argv=None, print_table: bool = True) -> list:
    argv = list(sys.argv[1:] if argv is None else argv)
    switch_only, lanes_only, cluster_only = "--switch" in argv, "--lanes" in argv, "--cluster" in argv
    argv = [a for a in argv if a not in ("--switch", "--lanes", "--cluster")]
    args = harness.parse_args(argv, "Batched GEBRD benchmark")
    cases = harness.select(quick_cases() if args.quick else switch_cases() if switch_only
                           else lanes_cases() if lanes_only else cluster_cases() if cluster_only
                           else all_cases(), args)
    if args.dry_run:
        rows = harness.dry_run("gebrd", cases, traffic)
        for c in cases:
            print(f"  model for {c.label}: {gebrd_flops(c) / 1e9:.2f} GFLOP, half GEMV / half GEMM (nb = {NB})")
        return rows
    rows = harness.run("gebrd", cases, ours, {"cusolver": peer_cusolver}, build=build, args=args,
                       traffic_fn=traffic, sweep=GEBRD_SETTINGS if args.sweep else (), print_table=print_table)
    add_model(rows, cases)
    for row in rows:
        if row.get("fraction_of_model") is not None:
            print(f"  {row['dtype']} {row['m']}x{row['n']}: {row['fraction_of_model']:.2f} of the GEMV-bound model "
                  f"(GEMV {row['gemv_gflops']:.0f} GFLOP/s, GEMM {row['gemm_gflops']:.0f} GFLOP/s), "
                  f"speedup over cuSOLVER loop {row.get('speedup')}")
    # The harness wrote the JSON before the model was added: write it again with the model.
    _rewrite(rows, args)
    return rows


def _rewrite(rows, args) -> None:
    import json

    info = harness.device_info()
    out_dir = args.results_dir or harness.RESULTS
    path = out_dir / harness.gpu_dirname(info["name"]) / ("gebrd_quick.json" if args.quick else "gebrd.json")
    if path.exists():
        doc = json.loads(path.read_text())
        doc["rows"] = rows
        path.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
