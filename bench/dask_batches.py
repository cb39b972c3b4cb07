"""Batches on Dask across GPUs: svdvals (32x32 float64) and solve (8x8 float64) on a
one-worker ``dask_cuda.LocalCUDACluster`` and on clusters of ``--gpus`` workers
(e.g. 2,4; one worker per GPU).

The issues' targets: two workers >= 1.7x the one-worker cluster (#10), four
workers >= 3.3x (#11), on the same batch, sized so that each GPU of the
largest cluster holds >= 4 GB of matrices; the per-chunk overhead reported.

Method, per case, in one process (so the ratio compares like with like):

1. Start the cluster (``CUDA_VISIBLE_DEVICES`` "0", then "0,1", "0,1,2,3", ...).
2. Make the operands ON the workers (a CuPy generator per chunk, seeded by
   chunk index, chunk i on worker i % workers) and ``persist`` them, so neither
   the host nor the transfer is timed and every GPU holds as many chunks;
   work stealing is off, so every task runs where its chunk lies.  The batch
   is the same for both clusters (strong scaling); chunks are ``--chunk-mib``
   MiB of matrices.
3. Warm up (the first call compiles the kernels on every worker), then time
   ``persist`` + ``wait`` + a device synchronize on every worker (wall clock,
   median of ``--repeats``; each repeat's graph is cloned to fresh keys so no
   earlier result can be reused).  ``check=True`` (the default): every chunk tests
   its ``info`` (on the GPU since session 30: one value comes back unless a
   matrix failed) and waits for it, as a user's call would.
4. ``chunk_s``: the plain (non-Dask) call on one chunk, timed on a worker with
   device synchronizes (median).  ``per_chunk_overhead_s`` = (wall * workers /
   chunks) - chunk_s: what Dask adds to every chunk (scheduling, task
   dispatch, the info copy).  ``dask_floor_s``: the same round (persist + wait +
   synchronize) for one task a chunk that does next to nothing (the chunk's
   first elements), Dask's own fixed cost; ``per_chunk_overhead_beyond_floor_s``
   = ((wall - floor) * workers / chunks) - chunk_s.

Rows (``bench/results/<gpu>/dask_batches.json``) follow harness.result_document:
``routine, dtype, layout ("dask"), m, n, k, batch, gpus, workers, chunks,
chunk_batch, bytes_per_gpu, wall_s, chunk_s, per_chunk_overhead_s, dask_floor_s,
per_chunk_overhead_beyond_floor_s,
speedup_vs_one_gpu`` (multi-worker rows), ``target`` and ``met``; the file is
bench/results/<gpu>/ for two workers at most, <gpu>-x<count>/ above.

Needs dask[array], distributed and dask-cuda (pip download the wheels where
there is a network and carry them to the GPU machine).  ``--dry-run`` prints
the plan without any of them (and without a GPU).

Usage: python3 bench/dask_batches.py [--dry-run] [--quick] [--gpus 2,4] [--chunk-mib 512]
                                     [--gb-per-gpu 4] [--repeats 3] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness  # noqa: E402

TARGETS = {2: 1.7, 4: 3.3}  # workers -> speedup over one worker (issues #10 and #11)


@dataclass(frozen=True)
class DaskCase:
    routine: str          # "svdvals" or "solve"
    n: int
    dtype: str = "float64"

    def matrix_bytes(self) -> int:
        """Bytes per problem: the matrix, plus b and x for solve."""
        item = np.dtype(self.dtype).itemsize
        return (self.n * self.n + (2 * self.n if self.routine == "solve" else 0)) * item


CASES = (DaskCase("svdvals", 32), DaskCase("solve", 8))


def plan(case: DaskCase, gpus: int, gb_per_gpu: float, chunk_mib: float) -> dict:
    """Batch and chunks of one case: >= gb_per_gpu GB of matrices on each of
    ``gpus`` GPUs, chunks of chunk_mib MiB, a whole number of chunks per GPU."""
    per = case.matrix_bytes()
    chunk_batch = max(1, int(chunk_mib * harness.MIB) // per)
    chunks_per_gpu = -(-int(gb_per_gpu * 1e9) // (chunk_batch * per))
    batch = chunk_batch * chunks_per_gpu * gpus
    return {"batch": batch, "chunk_batch": chunk_batch, "chunks": chunks_per_gpu * gpus,
            "bytes_per_gpu": batch * per // gpus, "bytes": batch * per}


def print_plan(cases, args) -> None:
    print(f"dask_batches: dry run; clusters: LocalCUDACluster with 1 worker (GPU 0) and "
          f"{', '.join(map(str, args.gpus))} workers (GPUs 0..count-1), one thread per worker")
    print(f"  {'case':<16}{'batch':>12}{'chunk batch':>13}{'chunks':>8}{'GB/GPU':>9}{'GB total':>10}")
    for c in cases:
        p = plan(c, args.gpus[-1], args.gb_per_gpu, args.chunk_mib)
        print(f"  {c.routine + ' ' + str(c.n) + 'x' + str(c.n):<16}{p['batch']:>12}{p['chunk_batch']:>13}"
              f"{p['chunks']:>8}{p['bytes_per_gpu'] / 1e9:>9.2f}{p['bytes'] / 1e9:>10.2f}")
    print(f"  timing: warm-up, then median of {args.repeats} (persist + wait + synchronize); targets "
          + ", ".join(f"{g} workers >= {TARGETS[g]}x one worker" for g in args.gpus if g in TARGETS))


# --- run on workers (module-level functions: distributed pickles them by reference) ---------------

def _make_chunk(kind, n, dtype, seed, index, rows):
    """Chunk ``index`` of operands made on the worker's GPU: (rows, n, n)
    matrices, diagonally dominant for solve; (rows, n) right-hand sides."""
    import cupy as cp

    rng = cp.random.default_rng(seed + 1000003 * index)
    if kind == "rhs":
        return rng.standard_normal((rows, n), dtype=dtype)
    a = rng.standard_normal((rows, n, n), dtype=dtype)
    if kind == "solve":
        a += 2 * n * cp.eye(n, dtype=dtype)
    return a


def _visible_devices() -> str:
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


def _sync() -> None:
    import cupy as cp

    cp.cuda.Device().synchronize()


def _corner(a):
    """A chunk's first elements: a task with next to no GPU work (Dask's floor)."""
    return a[:, 0, 0].copy()


def _time_plain_chunk(routine, A, b, repeats):
    """The plain call on one chunk (a CuPy array on this worker), median seconds."""
    import cupy as cp

    import batched as bt

    fn = getattr(bt, routine)
    args = (A,) if b is None else (A, b)
    fn(*args)
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# --- the run --------------------------------------------------------------------------------------

def _operands(case: DaskCase, p: dict, client):
    """A (and b for solve) as Dask arrays whose chunk i is made on worker
    i % workers and stays there: the same number of chunks on every GPU, so
    the scaling measured is the routine's, not the placement's (Dask's own
    placement of root tasks was uneven: 3 and 5 chunks of 8 in a trial)."""
    import cupy as cp
    import dask
    import dask.array as da

    n, dt = case.n, case.dtype
    addresses = sorted(client.scheduler_info()["workers"])

    def array(kind, seed, tail):
        parts = []
        for i in range(p["chunks"]):
            f = client.submit(_make_chunk, kind, n, dt, seed, i, p["chunk_batch"],
                              workers=[addresses[i % len(addresses)]], allow_other_workers=False, pure=False)
            parts.append(da.from_delayed(dask.delayed(f), (p["chunk_batch"], *tail), dtype=dt,
                                         meta=cp.empty((0,) * (1 + len(tail)), dtype=dt)))
        return da.concatenate(parts, axis=0)

    A = array(case.routine, 11, (n, n))
    return A, (array("rhs", 12, (n,)) if case.routine == "solve" else None)


def run_case(case: DaskCase, workers: int, p: dict, repeats: int) -> dict:
    import dask
    from dask.core import flatten
    from dask.distributed import Client, wait
    from dask.graph_manipulation import clone
    from dask_cuda import LocalCUDACluster

    import batched as bt

    devices = ",".join(str(i) for i in range(workers))
    # No work stealing: a stolen task would first move its 512 MiB chunk between
    # GPUs through the workers' TCP connection, which times Dask's transfer, not
    # the routine (placement is already even: _operands).
    with dask.config.set({"distributed.scheduler.work-stealing": False}), \
            LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        A, b = _operands(case, p, client)
        A, b = (A.persist(), None) if b is None else tuple(client.persist([A, b]))
        operands = [A] if b is None else [A, b]
        wait(operands)
        placed = client.has_what()
        chunk_keys = {str(k) for k in flatten(A.__dask_keys__())}
        chunks_per_worker = sorted(sum(str(k) in chunk_keys for k in keys) for keys in placed.values())
        worker_gpus = sorted(client.run(_visible_devices).values())
        fn = getattr(bt, case.routine)

        def once(make=lambda: fn(*operands)):
            # Fresh keys every time: a repeat must not find an earlier repeat's
            # result still held by the scheduler (same graph, same keys).
            out = clone(make(), omit=operands)
            t0 = time.perf_counter()
            out = out.persist()
            wait(out)
            client.run(_sync)
            elapsed = time.perf_counter() - t0
            del out
            return elapsed

        once()  # compiles the kernels on every worker
        walls = [once() for _ in range(repeats)]

        def corner():  # Dask's own cost of the same round: a task a chunk, next to no work
            return A.map_blocks(_corner, drop_axis=(1, 2), dtype=A.dtype, meta=A._meta.reshape(0))

        once(corner)
        floors = [once(corner) for _ in range(repeats)]
        first_A = client.compute(A.blocks[0])  # a future on the worker holding chunk 0
        first_b = None if b is None else client.compute(b.blocks[0])
        chunk_s = client.submit(_time_plain_chunk, case.routine, first_A, first_b, max(3, repeats),
                                pure=False).result()
        wall = statistics.median(walls)
        per_worker_chunks = p["chunks"] / workers
        return {"routine": case.routine, "dtype": case.dtype, "layout": "dask", "trans": "N",
                "m": case.n, "n": case.n, "k": 1 if case.routine == "solve" else 0, "batch": p["batch"],
                "gpus": workers, "workers": workers, "chunks": p["chunks"], "chunk_batch": p["chunk_batch"],
                "bytes_per_gpu": p["bytes"] // workers, "wall_s": wall, "walls_s": walls,
                "chunk_s": chunk_s, "per_chunk_overhead_s": wall / per_worker_chunks - chunk_s,
                "dask_floor_s": statistics.median(floors), "dask_floors_s": floors,
                "per_chunk_overhead_beyond_floor_s":
                    (wall - statistics.median(floors)) / per_worker_chunks - chunk_s,
                "ours_s": wall, "wall_min_s": min(walls), "chunks_per_worker": chunks_per_worker,
                "worker_visible_devices": worker_gpus}


def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print the plan; needs neither dask_cuda nor a GPU")
    ap.add_argument("--quick", action="store_true", help="0.25 GB per GPU (smoke run); writes dask_batches_quick.json")
    ap.add_argument("--gpus", type=harness.gpu_counts, default=[2],
                    help="workers of the multi-GPU clusters, e.g. 2,4 (default 2)")
    ap.add_argument("--gb-per-gpu", type=float, default=4.0,
                    help="GB of operands per GPU at the largest --gpus (default 4)")
    ap.add_argument("--chunk-mib", type=float, default=512.0, help="MiB of operands per chunk (default 512)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", choices=[c.routine for c in CASES], action="append")
    ap.add_argument("--results-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.gb_per_gpu, args.chunk_mib = 0.25, 64.0
    cases = [c for c in CASES if not args.only or c.routine in args.only]
    if args.dry_run:
        print_plan(cases, args)
        return []

    info = harness.device_info()
    rows = []
    for case in cases:
        p = plan(case, args.gpus[-1], args.gb_per_gpu, args.chunk_mib)
        one = run_case(case, 1, p, args.repeats)
        case_rows = [one]
        for g in args.gpus:
            if g == 1:
                continue
            many = run_case(case, g, p, args.repeats)
            many["speedup_vs_one_gpu"] = one["wall_s"] / many["wall_s"]
            many["target"] = TARGETS.get(g)
            many["met"] = None if many["target"] is None else bool(many["speedup_vs_one_gpu"] >= many["target"])
            case_rows.append(many)
        rows += case_rows
        for r in case_rows:
            print(f"{r['routine']:>8} {r['n']}x{r['n']} batch {r['batch']:>10} gpus {r['gpus']}: "
                  f"{r['wall_s'] * 1e3:9.1f} ms, chunk {r['chunk_s'] * 1e3:7.2f} ms, "
                  f"overhead/chunk {r['per_chunk_overhead_s'] * 1e3:7.2f} ms (Dask's floor "
                  f"{r['dask_floor_s'] * 1e3:.1f} ms; beyond it "
                  f"{r['per_chunk_overhead_beyond_floor_s'] * 1e3:.2f}), chunks/worker "
                  f"{r['chunks_per_worker']}, walls {[round(w * 1e3, 1) for w in r['walls_s']]}"
                  + (f", {r['speedup_vs_one_gpu']:.2f}x one GPU (target {r['target']}x: "
                     f"{'-' if r['met'] is None else 'met' if r['met'] else 'NOT met'})"
                     if "speedup_vs_one_gpu" in r else ""), flush=True)

    import dask
    import dask_cuda
    import distributed

    out_dir = args.results_dir or harness.RESULTS
    folder = out_dir / harness.gpu_dirname(info["name"], args.gpus[-1])
    folder.mkdir(parents=True, exist_ok=True)
    doc = harness.result_document(info, {}, rows, extra={
        "dask": dask.__version__, "distributed": distributed.__version__, "dask_cuda": dask_cuda.__version__,
        "quick": args.quick, "gb_per_gpu": args.gb_per_gpu, "chunk_mib": args.chunk_mib})
    path = folder / ("dask_batches_quick.json" if args.quick else "dask_batches.json")
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
