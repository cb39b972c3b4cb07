"""The one benchmark harness: timing, ceilings, cases, checks, JSON and plots.

A routine's script (``bench/gemv.py``, ``bench/gemm.py``) lists its cases, a
builder of operands and its peers, and hands them to :func:`run`; everything
else lives here, so every routine is measured the same way.

Timing (:func:`time_calls`)
    Warm-ups first (the first call compiles), then the median of the repeats,
    each timed with CUDA events on the current stream.  Before each timed pass
    a one-thread "blocking" kernel spins on the GPU's global timer for longer
    than the host needs to enqueue the pass, so the start event fires only
    once the whole pass is queued and the event interval is the GPU's time,
    not Python's.  A pointer-array or variable-size call costs O(batch) host
    work per call; that host time is reported separately (``ours_host_s``)
    and ``overhead.py`` measures the per-call cost of small calls.  A repeat
    whose host time outran the spin is counted in ``host_bound`` and replaced by
    another (at most twice the repeats in all), so a stall of the host does not
    enter the median.  Each case starts after :func:`settle` (the device idle,
    then 0.1 s): right after the previous case's operands are freed the GPU runs
    slow for about 10 ms, which fell on whichever side was timed first.
DRAM, not L2
    A case whose operands would fit twice in L2 (50 MB on H100) is run on
    several input sets in rotation (``sets`` in the row) so that every call
    reads from DRAM; cases of 256 MiB and more use one set.
Ceilings (:func:`measure_ceilings`)
    Measured once per process on the same GPU: device-to-device copy (bytes
    read + written; the better of cudaMemcpy and CuPy's copy kernel) and a
    read-only streaming kernel reading 16-byte vectors (bytes read).  A
    memory-bound case's limit is max(copy, read): GEMV and small GEMM read far
    more than they write.  FP64/FP32 peaks are datasheet constants
    (:data:`PEAK_FLOPS`), not measurements.
Bytes and flops (:func:`traffic`)
    Each input read once, each output written once: GEMV A + x + y (+ y read
    when beta != 0), GEMM A + B + C (+ C read when beta != 0); GEMV 2mn and
    GEMM 2mnk flops per matrix, four times that for complex.

Results go to ``bench/results/<gpu name, spaces as underscores>/<routine>.json``
(``<routine>_quick.json`` for ``--quick``, so a smoke run never replaces the
full table) with a PNG plot beside it.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

MIB = 2**20
TARGET_BYTES = 256 * MIB     # operands of a "large" case: far beyond any L2
L2_FALLBACK = 50 * MIB       # H100/H200 L2; the device's own value is used when known
MAX_SETS = 64
RESULTS = Path(__file__).resolve().with_name("results")

# Datasheet leads (NVIDIA H100 / H200 Tensor Core GPU datasheets), FLOP/s;
# not measured.  First matching substring of the device name wins.
_H100_SXM = {"fp64": 33.5e12, "fp64_tensor": 67e12, "fp32": 67e12}
PEAK_FLOPS = (
    ("H100 PCIe", {"fp64": 26e12, "fp64_tensor": 51e12, "fp32": 51e12}),
    ("H100 NVL", None),          # figures differ between datasheet editions
    ("H100", _H100_SXM),         # "NVIDIA H100 80GB HBM3" is the SXM5 part
    ("H200", dict(_H100_SXM)),   # same SMs and clocks as H100 SXM
)

# Relative error (max |ours - peer| / max |peer|) above which a row is an ERROR.
TOLERANCE = {"float32": 1e-3, "complex64": 1e-3, "float64": 1e-10, "complex128": 1e-10}

BLAS_LETTER = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
LAYOUT_SHORT = {"uniform": "U", "uniform-F": "UF", "pointer": "P", "variable": "V"}


class NotApplicable(Exception):
    """Raised by a peer (at its first call) that cannot run a case; it is left out."""


@dataclass(frozen=True)
class Case:
    """One benchmark case.  ``k`` is 0 for GEMV; ``trans`` is 'N'/'T' for GEMV
    and 'NN' for GEMM; ``setting`` None means the library's default chooser."""

    routine: str
    dtype: str
    layout: str
    trans: str
    m: int
    n: int
    k: int = 0
    batch: int = 1
    offset: int = 0
    setting: object = None
    beta: float = 0.0
    repeats: int = 20
    note: str = ""

    @property
    def label(self) -> str:
        shape = f"{self.m}x{self.n}" + (f"x{self.k}" if self.k else "")
        return (f"{BLAS_LETTER.get(self.dtype, self.dtype)} {LAYOUT_SHORT.get(self.layout, self.layout)} "
                f"{self.trans} {shape}")


@dataclass
class Operands:
    """One input set of a case, built on the GPU by a script's builder.

    ``data`` is what ``ours`` and the peers read.  ``ours_view`` and
    ``peer_view`` turn a result into the array compared (default: the
    result itself, flattened); ``peer_note`` says how the peers' operands
    differ from ours (e.g. padding).
    """

    data: dict
    ours_view: Callable | None = None
    peer_view: Callable | None = None
    peer_note: str = ""


@dataclass
class Timing:
    seconds: float            # median GPU time of one call
    host_s: float             # median host (enqueue) time of one call
    repeats: int
    host_bound: int = 0       # repeats set aside: their enqueueing outran the spin
    all_s: list = field(default_factory=list)
    result: object = None     # what the first warm-up call (input set 0) returned


# --- bytes and flops -----------------------------------------------------------


def traffic(case: Case, shapes=None) -> tuple[int, int]:
    """(bytes moved, flops) of a case; ``shapes`` lists (m, n[, k]) per matrix
    for variable sizes (default: every matrix is ``case.m x case.n``)."""
    dt = np.dtype(case.dtype)
    per_flop = 8 if dt.kind == "c" else 2
    if shapes is None:
        dims = np.array([[case.m, case.n, case.k]], dtype=np.int64)
        count = case.batch
    else:
        dims = np.array([tuple(s) + (0,) * (3 - len(s)) for s in shapes], dtype=np.int64)
        count = 1
    m, n, k = dims[:, 0], dims[:, 1], dims[:, 2]
    if case.routine == "gemv":
        outs = m if case.trans.upper() == "N" else n
        ins = n if case.trans.upper() == "N" else m
        elems = m * n + ins + outs + (outs if case.beta != 0 else 0)
        flops = per_flop * m * n
    elif case.routine == "gemm":
        elems = m * k + k * n + m * n + (m * n if case.beta != 0 else 0)
        flops = per_flop * m * n * k
    else:
        raise ValueError(f"no traffic model for routine {case.routine!r}")
    return int(elems.sum()) * dt.itemsize * count, int(flops.sum()) * count


def batch_for(bytes_per_item: int, target: int = TARGET_BYTES) -> int:
    """Smallest batch whose ``bytes_per_item * batch`` reaches ``target``."""
    return max(1, -(-target // bytes_per_item))


def rotation_sets(case_bytes: int, l2_bytes: int = L2_FALLBACK) -> int:
    """Input sets to rotate among so each call reads DRAM: 1 above 2x L2."""
    if case_bytes >= 2 * l2_bytes:
        return 1
    return max(2, min(MAX_SETS, -(-TARGET_BYTES // max(case_bytes, 1))))


# --- the device ----------------------------------------------------------------


def _cupy():
    import cupy

    return cupy


def torch_or_none():
    """PyTorch with CUDA, or None (then its peers are left out)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    # Full-precision FP32 products, as cuBLAS through CuPy computes them.
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def as_torch(torch, arr):
    """A torch tensor on the same memory as CuPy array ``arr`` (no copy)."""
    try:
        return torch.as_tensor(arr, device="cuda")
    except Exception:
        return torch.from_dlpack(arr)


def device_info() -> dict:
    cp = _cupy()
    dev = cp.cuda.runtime.getDevice()
    props = cp.cuda.runtime.getDeviceProperties(dev)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    peaks = None
    for key, value in PEAK_FLOPS:
        if key in name:
            peaks = value
            break
    return {"name": name, "sm_count": int(props["multiProcessorCount"]),
            "l2_bytes": int(props.get("l2CacheSize", L2_FALLBACK)) or L2_FALLBACK,
            "memory_bytes": int(props["totalGlobalMem"]), "peak_flops": peaks,
            "cc": f"{props['major']}.{props['minor']}"}


def gpu_dirname(name: str, gpus: int = 1) -> str:
    """The results folder of a GPU model; a run on more than two GPUs of one
    host gets a folder of its own, ``<gpu>-x<gpus>`` (two-GPU runs keep the
    model's folder, as the first nvidia-h200-x2 results did)."""
    base = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.replace(" ", "_"))
    return base + (f"-x{gpus}" if gpus > 2 else "")


def gpu_counts(text: str) -> list[int]:
    """``--gpus 2,4``: the GPU (worker) counts of a multi-GPU benchmark, ascending."""
    return sorted({int(v) for v in text.split(",") if v})


_KERNEL_SOURCE = r"""
extern "C" __global__ void bench_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// Streams p[0, n) once in 16-byte loads, four in flight per thread, each block
// its own contiguous chunk (a grid-stride loop, whose four loads lie a grid
// apart, read 15 % slower than a copy on the H100; 256 KiB chunks as fast as
// cuBLAS's GEMV); the sum is stored only if it takes an impossible value, so
// the loads are kept.
extern "C" __global__ void bench_read(const double2* __restrict__ p, long long n, double* out) {
    const long long chunk = (n + gridDim.x - 1) / gridDim.x;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < n ? lo + chunk : n;
    const long long step = blockDim.x;
    double acc = 0.0;
    long long i = lo + threadIdx.x;
    for (; i + 3 * step < hi; i += 4 * step) {
        double2 a = __ldg(p + i), b = __ldg(p + i + step);
        double2 c = __ldg(p + i + 2 * step), d = __ldg(p + i + 3 * step);
        acc += (a.x + a.y) + (b.x + b.y) + (c.x + c.y) + (d.x + d.y);
    }
    for (; i < hi; i += step) {
        double2 a = __ldg(p + i);
        acc += a.x + a.y;
    }
    if (acc == -1.25e-300) out[0] = acc;
}
"""

_kernels: dict = {}
READ_CHUNK_BYTES = 256 * 1024  # bench_read: bytes a block streams


def _kernel(name: str):
    if name not in _kernels:
        _kernels[name] = _cupy().RawKernel(_KERNEL_SOURCE, name)
    return _kernels[name]


def spin(seconds: float) -> None:
    """Keep the current stream busy for ``seconds`` with one thread."""
    ns = int(min(max(seconds, 0.0), 30.0) * 1e9)
    _kernel("bench_spin")((1,), (1,), (np.uint64(ns),))


def _event_median(fn, repeats: int, warmup: int = 2) -> float:
    cp = _cupy()
    for _ in range(warmup):
        fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


READ_FLOOR_CHUNKS = (4096, 16384, 65536, 262144)  # bytes a block of bench_read streams
READ_FLOOR_MAX_BYTES = 256 * MIB  # cases beyond it stream at the ceiling's rate anyway


def read_floor(nbytes: int, sets: int, repeats: int = 10) -> float | None:
    """GPU seconds of the fastest read-only pass over ``nbytes`` contiguous bytes that
    bench_read gives (best over READ_FLOOR_CHUNKS), with ``sets`` buffers in rotation as
    the case's operands: what a kernel that only reads the case's bytes once, and
    launches once, needs at that size.  A speed-up that would take a call below it is
    out of reach for any design.  None above READ_FLOOR_MAX_BYTES."""
    if nbytes > READ_FLOOR_MAX_BYTES:
        return None
    cp = _cupy()
    count = -(-nbytes // 16)
    buffers = [cp.ones(2 * count, dtype=cp.float64) for _ in range(sets)]
    out = cp.zeros(1, dtype=cp.float64)
    kernel = _kernel("bench_read")
    best = None
    for chunk in READ_FLOOR_CHUNKS:
        grid = max(1, -(-nbytes // chunk))
        t = time_calls([(lambda b=b, g=grid: kernel((g,), (256,), (b, np.int64(count), out))) for b in buffers],
                       repeats=repeats).seconds
        best = t if best is None else min(best, t)
    del buffers
    free_memory()
    return best


_ceilings: dict = {}


def measure_ceilings(nbytes: int = 1 << 30, repeats: int = 10) -> dict:
    """Copy and read-only streaming bandwidth in GB/s (10^9 B/s), once per process."""
    if _ceilings:
        return _ceilings
    cp = _cupy()

    def copies():
        src = cp.ones(nbytes // 8, dtype=cp.float64)
        dst = cp.empty_like(src)
        memcpy = _event_median(lambda: dst.data.copy_from_device_async(src.data, nbytes), repeats)
        kernel = _event_median(lambda: cp.copyto(dst, src), repeats)
        return memcpy, kernel

    def reads():
        # Twice the copy's bytes: at 1 GiB the H100's read pass varied from 2.6 to 3.0 TB/s
        # between processes, at 2 GiB it read 3.07 in every probe.
        src = cp.ones(2 * nbytes // 8, dtype=cp.float64)
        out = cp.zeros(1, dtype=cp.float64)
        grid = max(1, 2 * nbytes // READ_CHUNK_BYTES)
        return _event_median(lambda: _kernel("bench_read")((grid,), (256,), (src, np.int64(2 * nbytes // 16), out)),
                             repeats) / 2

    memcpy, kernel = copies()
    free_memory()
    copy_s = min(memcpy, kernel)
    read_s = reads()
    free_memory()
    _ceilings.update({
        "copy_gbps": 2 * nbytes / copy_s / 1e9,
        "read_gbps": nbytes / read_s / 1e9,
        "copy_method": "cudaMemcpyAsync" if memcpy <= kernel else "cupy.copyto kernel",
        "ceiling_bytes": nbytes,
    })
    return _ceilings


def free_memory() -> None:
    cp = _cupy()
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- timing --------------------------------------------------------------------


# After the previous case's operands are freed (free_memory, every case), the GPU runs
# slow for a while: on an H100 after 7.2 GB were freed, the next 35 DGEMV calls at n =
# 10001 took 330-354 us against 279 (about 10 ms), whoever made them; after a 0.05-1 s
# pause only the first call was slow, which the warm-up takes.  Without the pause the
# first side timed (ours) paid it: bench/kblas.py's n = 10001 rows, timed after n =
# 30000, read 0.83-0.89x cuBLAS in the full run and 0.98-1.07x alone (session 31).
SETTLE_S = 0.1


def settle(devices=None) -> None:
    """Wait for the devices (default: the current one), then SETTLE_S, before a
    case's first timing."""
    cp = _cupy()
    for d in (devices if devices is not None else [cp.cuda.Device().id]):
        cp.cuda.Device(d).synchronize()
    time.sleep(SETTLE_S)


SLOW_CALL_S = 0.05   # a call this long (a peer's loop over the batch) is timed on one set, once or twice


def time_calls(calls, repeats: int = 20, warmup: int = 1, budget_s: float = 2.0,
               min_repeats: int = 3, keep_result: bool = False) -> Timing:
    """GPU time of one call: ``calls`` holds one zero-argument callable per
    input set; a pass calls each once, in order.  The median over repeats of
    (pass time / len(calls)); repeats shrink to fit ``budget_s``.  With
    ``keep_result`` the first call's result is returned for the error check
    (saving a call: list layouts spend seconds of host time per call).  A warm
    call longer than SLOW_CALL_S (a peer that loops over a large batch: the
    cache effects the rotation sets guard against are noise there) is timed on
    the first set only with at least one repeat, so one slow peer cannot take
    minutes of a device session."""
    cp = _cupy()
    stream = cp.cuda.get_current_stream()
    kept = calls[0]() if keep_result else None
    if not keep_result:
        calls[0]()   # the first call compiles
    stream.synchronize()
    t0 = time.perf_counter()
    calls[0]()
    stream.synchronize()
    if time.perf_counter() - t0 > SLOW_CALL_S:
        calls, min_repeats = calls[:1], 1
    else:
        for _ in range(warmup):
            for c in calls[1:]:
                c()
    stream.synchronize()
    # One more (warm) pass measures the host's enqueueing time of a pass.
    t0 = time.perf_counter()
    for c in calls:
        c()
    host = time.perf_counter() - t0
    stream.synchronize()
    wall = time.perf_counter() - t0
    spin_s = 1.3 * host + 200e-6
    per_repeat = spin_s + wall
    repeats = max(min_repeats, min(repeats, int(budget_s / per_repeat)))
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times, bound_times, hosts = [], [], []
    gc_was_on = gc.isenabled()
    gc.disable()   # a collection among millions of views would outrun the spin
    try:
        # A repeat whose enqueueing outran the spin timed the host too (the GPU waited
        # for it): it is set aside and another taken, up to twice the repeats in all.
        # The device's host stalls for hundreds of microseconds at times (session 27:
        # STRSV 256 read 759 us in a run where 6 of 10 repeats were bound, 87 in others).
        while len(times) < repeats and len(times) + len(bound_times) < 2 * repeats:
            spin(spin_s)
            start.record(stream)
            t0 = time.perf_counter()
            for c in calls:
                c()
            h = time.perf_counter() - t0
            end.record(stream)
            end.synchronize()
            t = cp.cuda.get_elapsed_time(start, end) / 1e3 / len(calls)
            (bound_times if h > spin_s else times).append(t)
            hosts.append(h / len(calls))
    finally:
        if gc_was_on:
            gc.enable()
    # Host-bound throughout (a call whose host work exceeds the spin every time): the
    # bound repeats are all there is, and host_bound says so.
    times = times or bound_times
    return Timing(statistics.median(times), statistics.median(hosts), len(times), len(bound_times), times, kept)


def sweep_settings(case: Case, ours, operand_sets, settings, repeats: int = 5,
                   budget_s: float = 1.0) -> dict:
    """GPU seconds of ``ours`` with each forced setting: {str(setting): seconds};
    None for a setting that raised."""
    found = {}
    for s in settings:
        calls = [(lambda d=o.data, s=s: ours(case, d, s)) for o in operand_sets]
        try:
            found[str(s)] = time_calls(calls, repeats=repeats, budget_s=budget_s).seconds
        except Exception as exc:  # a setting the shape cannot use: recorded, not fatal
            found[str(s)] = None
            print(f"    sweep {s}: {type(exc).__name__}: {exc}")
    return found


# --- checking ------------------------------------------------------------------


def _flat(result):
    cp = _cupy()
    if isinstance(result, (list, tuple)):
        first = result[0] if result else None
        base = getattr(first, "base", None)
        total = sum(int(r.size) for r in result)
        last = result[-1] if result else None
        if (base is not None and base.ndim == 1 and base.size == total and base.flags.c_contiguous
                and first.data.ptr == base.data.ptr
                and last.data.ptr + last.nbytes == base.data.ptr + base.nbytes):
            return base   # the list's views tile one buffer, in order
        return cp.concatenate([cp.asarray(r).ravel() for r in result])
    return cp.asarray(result).ravel()


def rel_error(got, ref) -> float:
    """max |got - ref| / max |ref| over the whole batch."""
    cp = _cupy()
    got, ref = _flat(got), _flat(ref)
    if got.size != ref.size:
        raise ValueError(f"result sizes differ: ours {got.size}, peer {ref.size}")
    num = float(cp.max(cp.abs(got - ref))) if got.size else 0.0
    den = float(cp.max(cp.abs(ref))) if ref.size else 0.0
    return num / den if den else num


# --- the run -------------------------------------------------------------------


def parse_args(argv, description: str, sweep: bool = True):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a few cases (smoke run); writes <routine>_quick.json")
    if sweep:
        p.add_argument("--sweep", action="store_true",
                       help="also time ours with every compiled setting (uniform layouts)")
    p.add_argument("--dry-run", action="store_true", help="print the cases; no GPU needed")
    p.add_argument("--dtype", action="append", help="only these dtypes (repeatable)")
    p.add_argument("--layout", action="append", help="only these layouts (repeatable)")
    p.add_argument("--size", action="append", type=int,
                   help="only cases whose largest of m, n is this (repeatable)")
    p.add_argument("--trans", action="append",
                   help="only cases of this trans field, e.g. LN for TRSV or UV for svd (repeatable)")
    p.add_argument("--results-dir", type=Path, default=None,
                   help=f"where <gpu>/<routine>.json goes (default {RESULTS})")
    args = p.parse_args(argv)
    if not sweep:
        args.sweep = False
    return args


def select(cases, args):
    return [c for c in cases if (not args.dtype or c.dtype in args.dtype)
            and (not args.layout or c.layout in args.layout)
            and (not getattr(args, "size", None) or max(c.m, c.n) in args.size)
            and (not getattr(args, "trans", None) or c.trans in args.trans)]


def dry_run(routine: str, cases, traffic_fn=traffic) -> list:
    print(f"{routine}: {len(cases)} cases (dry run; sets assume a {L2_FALLBACK // MIB} MiB L2)")
    print(f"  {'case':<22}{'batch':>9}{'MiB':>9}{'GFLOP':>9}{'sets':>5}  note")
    total = 0
    for c in cases:
        b, f = traffic_fn(c)
        total += b
        print(f"  {c.label:<22}{c.batch:>9}{b / MIB:>9.1f}{f / 1e9:>9.2f}{rotation_sets(b):>5}  "
              f"{'setting=' + str(c.setting) + ' ' if c.setting else ''}{c.note}")
    print(f"  operands in all: {total / 2**30:.1f} GiB")
    return []


def script_main(routine: str, description: str, argv, *, all_cases, quick_cases, ours, peers: dict,
                build, traffic_fn=traffic, torch_peer=None, settings=(), print_table=True, **run_kwargs) -> list:
    """The whole ``main()`` of a routine's script: arguments, case selection, the
    dry run, the optional PyTorch peer (left out with a note when PyTorch has
    no CUDA), and :func:`run` with ``settings`` swept under ``--sweep``."""
    args = parse_args(argv, description, sweep=bool(settings))
    cases = select(quick_cases() if args.quick else all_cases(), args)
    if args.dry_run:
        return dry_run(routine, cases, traffic_fn)
    peers = dict(peers)
    if torch_peer is not None:
        if torch_or_none() is not None:
            peers["torch"] = torch_peer
        else:
            print("note: PyTorch with CUDA not available; torch peer left out")
    return run(routine, cases, ours, peers, build=build, args=args, traffic_fn=traffic_fn,
               sweep=settings if args.sweep else (), print_table=print_table, **run_kwargs)


def _limit_bandwidth(case, nbytes, flops, ceilings, info):
    return "bandwidth"


def run(routine: str, cases, ours, peers: dict, out_dir=None, *, build, args=None,
        traffic_fn=traffic, limit=_limit_bandwidth, plot_metrics=("gbps",),
        sweep=(), sweep_layouts=("uniform", "uniform-F"), print_table=True, floor=False) -> list:
    """Time ``ours`` and every peer on every case, check, write JSON and a plot.

    ours(case, data, setting) and peers[name](case, data) run one call on an
    input set's ``data``; build(case, index) -> Operands makes input set
    ``index``; limit(case, bytes, flops, ceilings, info) names the limit of a
    case: "bandwidth", "fp64_peak" or "fp32_peak".  The first peer that runs
    is the reference of the error check.  With ``floor`` each row also holds
    ``floor_s``, :func:`read_floor` of the case's bytes, and ``floor_speedup``,
    the best peer's time over it (the most any design could gain).  Returns the rows.
    """
    if args is not None and args.dry_run:
        return dry_run(routine, cases, traffic_fn)
    quick = bool(args and args.quick)
    info = device_info()
    ceilings = measure_ceilings()
    bw_limit = max(ceilings["copy_gbps"], ceilings["read_gbps"])
    torch = sys.modules.get("torch")
    check_streams()
    print(f"{routine} on {info['name']}: copy {ceilings['copy_gbps']:.0f} GB/s, "
          f"read {ceilings['read_gbps']:.0f} GB/s, L2 {info['l2_bytes'] // MIB} MiB, "
          f"{len(cases)} cases, peers {', '.join(peers)}")
    out_dir = Path(out_dir) if out_dir else (args.results_dir if args and args.results_dir else RESULTS)
    folder = out_dir / gpu_dirname(info["name"])
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{routine}_quick" if quick else routine
    path = folder / f"{stem}.json"
    rows = []
    started = time.perf_counter()
    for case in cases:
        row = _run_case(case, ours, peers, build, traffic_fn, limit, info, ceilings, bw_limit,
                        sweep if case.layout in sweep_layouts else (), floor)
        rows.append(row)
        print(_progress(row), flush=True)
        # Rewritten after every case: a run stopped by a time limit keeps what it measured
        # ("complete": false until the last case).
        _write_document(path, info, ceilings, rows, torch, quick, complete=len(rows) == len(cases))
    print(f"{routine}: {len(rows)} cases in {time.perf_counter() - started:.0f} s")
    print(f"wrote {path}")
    plot(rows, folder / f"{stem}.png", f"{routine} on {info['name']}", plot_metrics, ceilings, info)
    if print_table:
        print_rows(routine, rows)
    return rows


def _write_document(path, info, ceilings, rows, torch, quick, complete):
    doc = result_document(info, ceilings, rows, extra={
        "cupy": _cupy().__version__, "torch": getattr(torch, "__version__", None),
        "quick": quick, "tolerance": TOLERANCE, "complete": complete})
    path.write_text(json.dumps(doc, indent=1))


def result_document(info, ceilings, rows, extra=None) -> dict:
    return {"gpu": info["name"],
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "copy_gbps": ceilings.get("copy_gbps"), "read_gbps": ceilings.get("read_gbps"),
            "rows": rows,
            "meta": {"sm_count": info["sm_count"], "l2_bytes": info["l2_bytes"], "cc": info["cc"],
                     "peak_flops": info["peak_flops"], "peak_source": "datasheet",
                     "copy_method": ceilings.get("copy_method"), **(extra or {})}}


def _base_row(case: Case) -> dict:
    return {"routine": case.routine, "dtype": case.dtype, "layout": case.layout, "trans": case.trans,
            "m": case.m, "n": case.n, "k": case.k, "batch": case.batch, "offset": case.offset,
            "setting": None if case.setting is None else str(case.setting), "beta": case.beta,
            "note": case.note}


def _run_case(case, ours, peers, build, traffic_fn, limit, info, ceilings, bw_limit, sweep, floor=False):
    row = _base_row(case)
    row.update(ours_s=None, best_peer=None, best_peer_s=None, speedup=None, gbps=None, gflops=None,
               fraction_of_limit=None, limit=None, peers={}, rel_error=None, error_ok=None,
               failure=None)
    sets = []
    try:
        nbytes, flops = traffic_fn(case)
        row.update(bytes=nbytes, flops=flops)
        sets = [build(case, 0)]
        nsets = rotation_sets(nbytes, info["l2_bytes"])
        sets += [build(case, i) for i in range(1, nsets)]
        row.update(sets=nsets, peer_note=sets[0].peer_note)
        settle()
        t = time_calls([(lambda d=o.data: ours(case, d, case.setting)) for o in sets], repeats=case.repeats,
                       keep_result=True)
        row.update(ours_s=t.seconds, ours_host_s=t.host_s, repeats=t.repeats, host_bound=t.host_bound)
        got, ref, ref_name = t.result, None, None
        del t
        for name, peer in peers.items():
            try:
                pt = time_calls([(lambda d=o.data, p=peer: p(case, d)) for o in sets],
                                repeats=case.repeats, keep_result=ref is None)
                row["peers"][name] = pt.seconds
                if ref is None:
                    ref, ref_name = pt.result, name
                del pt
            except NotApplicable:
                continue
            except Exception as exc:  # a peer's failure (e.g. out of memory) is recorded, not fatal
                row["peers"][name] = None
                print(f"    peer {name}: {type(exc).__name__}: {exc}")
        _figures(row, case, limit, info, ceilings, bw_limit)
        _check(row, case, sets[0], got, ref, ref_name)
        del got, ref
        if floor:
            row["floor_s"] = read_floor(nbytes, nsets, case.repeats)
            if row["floor_s"] and row["best_peer_s"]:
                row["floor_speedup"] = row["best_peer_s"] / row["floor_s"]
        if sweep:
            row["settings"] = sweep_settings(case, ours, sets, sweep)
            timed = {k: v for k, v in row["settings"].items() if v is not None}
            row["best_setting"] = min(timed, key=timed.get) if timed else None
    except Exception as exc:  # one broken case must not lose the others' results
        row["failure"] = f"{type(exc).__name__}: {exc}"
        row["error_ok"] = False
        traceback.print_exc(limit=3)
    finally:
        del sets
        free_memory()
    return row


def _figures(row, case, limit, info, ceilings, bw_limit):
    nbytes, flops, ours_s = row["bytes"], row["flops"], row["ours_s"]
    timed = {k: v for k, v in row["peers"].items() if v is not None}
    if timed:
        best = min(timed, key=timed.get)
        row.update(best_peer=best, best_peer_s=timed[best], speedup=timed[best] / ours_s,
                   best_peer_gbps=nbytes / timed[best] / 1e9, best_peer_gflops=flops / timed[best] / 1e9)
    row.update(gbps=nbytes / ours_s / 1e9, gflops=flops / ours_s / 1e9)
    kind = limit(case, nbytes, flops, ceilings, info)
    row["limit"] = kind
    if kind == "bandwidth":
        row["limit_value"] = bw_limit
        row["fraction_of_limit"] = row["gbps"] / bw_limit
    else:
        peak = (info["peak_flops"] or {}).get(kind.replace("_peak", ""))
        row["limit_value"] = peak
        row["fraction_of_limit"] = flops / ours_s / peak if peak else None


def _check(row, case, operands, got, ref, ref_name):
    """Relative error of ours against the first peer that ran, on input set 0."""
    if ref is None:
        row["error_ok"] = None   # no peer ran: unchecked
        return
    if operands.ours_view:
        got = operands.ours_view(got)
    if operands.peer_view:
        ref = operands.peer_view(ref)
    err = rel_error(got, ref)
    row.update(rel_error=err, error_ok=bool(err <= TOLERANCE[case.dtype]), checked_against=ref_name)


# --- output --------------------------------------------------------------------


def _flag(row) -> str:
    if row.get("failure"):
        return "FAIL"
    if row.get("error_ok") is False:
        return "ERROR"
    if row.get("error_ok") is None:
        return "NOCHECK"
    return ""


def _shape(row) -> str:
    return f"{row['m']}x{row['n']}" + (f"x{row['k']}" if row.get("k") else "")


def _progress(row) -> str:
    peers = " ".join(f"{k}={v * 1e6:.1f}" if v else f"{k}=-" for k, v in row["peers"].items())
    ours = f"{row['ours_s'] * 1e6:.1f}us" if row["ours_s"] else "-"
    gb = f"{row['gbps']:.0f}GB/s" if row["gbps"] else ""
    err = f"err={row['rel_error']:.1e}" if row["rel_error"] is not None else ""
    return (f"  {BLAS_LETTER[row['dtype']]} {LAYOUT_SHORT.get(row['layout'], row['layout'])} "
            f"{row['trans']} {_shape(row)} b={row['batch']} ours={ours} {gb} [{peers}] {err} "
            f"{_flag(row)}{' ' + row['failure'] if row.get('failure') else ''}")


def print_rows(routine: str, rows) -> None:
    """The compact table (the device tool shows only the tail of the output)."""
    print(f"== {routine}: us per call; speedup = best peer / ours; frac = of the row's limit "
          f"(bw = max(copy, read), or FP peak)")
    print(f"{'case':<19}{'batch':>8}{'ours':>9} {'peer':<6}{'peer_us':>9}{'spdup':>7}"
          f"{'GB/s':>6}{'GF/s':>7}{'frac':>5} {'err':>7}")
    for r in rows:
        case = (f"{BLAS_LETTER[r['dtype']]} {LAYOUT_SHORT.get(r['layout'], r['layout'])} "
                f"{r['trans']} {_shape(r)}")
        fmt = lambda v, f: (f.format(v) if v is not None else "-")  # noqa: E731
        frac = r.get("fraction_of_limit")
        print(f"{case:<19}{r['batch']:>8}{fmt(r['ours_s'] and r['ours_s'] * 1e6, '{:.1f}'):>9} "
              f"{(r['best_peer'] or '-')[:6]:<6}"
              f"{fmt(r['best_peer_s'] and r['best_peer_s'] * 1e6, '{:.1f}'):>9}"
              f"{fmt(r['speedup'], '{:.2f}'):>7}{fmt(r['gbps'], '{:.0f}'):>6}"
              f"{fmt(r['gflops'], '{:.0f}'):>7}{fmt(frac and 100 * frac, '{:.0f}%'):>5} "
              f"{fmt(r['rel_error'], '{:.0e}'):>7} {_flag(r)}")
    bad = [r for r in rows if _flag(r) in ("FAIL", "ERROR")]
    if bad:
        print(f"{len(bad)} case(s) flagged FAIL/ERROR")


def plot(rows, path: Path, title: str, metrics=("gbps",), ceilings=None, info=None):
    """Bandwidth (and/or GFLOP/s) against bytes per matrix, one panel per
    (dtype, trans): ours solid, best peer dashed, one colour per layout."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; no plot written")
        return None
    good = [r for r in rows if r.get("ours_s")]
    groups = sorted({(r["dtype"], r["trans"]) for r in good})
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), len(metrics), figsize=(6.5 * len(metrics), 3.4 * len(groups)),
                             squeeze=False)
    colours = {"uniform": "C0", "uniform-F": "C1", "pointer": "C2", "variable": "C3"}
    for gi, (dt, tr) in enumerate(groups):
        for mi, metric in enumerate(metrics):
            ax = axes[gi][mi]
            mine = [r for r in good if (r["dtype"], r["trans"]) == (dt, tr)]
            for layout in sorted({r["layout"] for r in mine}):
                rs = sorted((r for r in mine if r["layout"] == layout), key=lambda r: r["bytes"] / r["batch"])
                x = [r["bytes"] / r["batch"] for r in rs]
                col = colours.get(layout, "C4")
                ax.plot(x, [r[metric] for r in rs], "o-", color=col, label=f"ours {layout}")
                peer = [r.get(f"best_peer_{metric}") for r in rs]
                if any(v is not None for v in peer):
                    ax.plot(x, [v if v is not None else float("nan") for v in peer], "s--", color=col,
                            alpha=0.6, label=f"best peer {layout}")
                for xi, r in zip(x, rs):
                    ax.annotate(_shape(r), (xi, r[metric]), fontsize=6, alpha=0.7)
            if metric == "gbps" and ceilings:
                ax.axhline(ceilings["copy_gbps"], color="grey", ls=":", lw=1, label="copy")
                ax.axhline(ceilings["read_gbps"], color="black", ls=":", lw=1, label="read-only")
            if metric == "gflops" and info and info.get("peak_flops"):
                key = "fp32" if dt in ("float32", "complex64") else "fp64"
                ax.axhline(info["peak_flops"][key] / 1e9, color="black", ls=":", lw=1, label=f"{key} peak")
            ax.set_xscale("log", base=2)
            if metric == "gflops":
                ax.set_yscale("log")
            ax.set_xlabel("bytes moved per matrix")
            ax.set_ylabel({"gbps": "GB/s", "gflops": "GFLOP/s"}[metric])
            ax.set_title(f"{dt} trans={tr}", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return path


def random_array(shape, dtype, seed: int):
    """Standard-normal CuPy data (never zeros); complex: both parts random."""
    cp = _cupy()
    rs = cp.random.RandomState(seed)
    dt = np.dtype(dtype)
    real = np.float32 if dt in (np.float32, np.complex64) else np.float64
    if dt.kind != "c":
        return rs.standard_normal(shape, dtype=real)
    # Part by part into the result (the same numbers as a + 1j * b): one real
    # temporary at a time, so a complex matrix of half a GPU still fits.
    out = cp.empty(shape, dt)
    out.real[...] = rs.standard_normal(shape, dtype=real)
    out.imag[...] = rs.standard_normal(shape, dtype=real)
    return out


def check_streams() -> None:
    """Warn unless CuPy and PyTorch both run on the legacy default stream: the
    events and the spin kernel are on CuPy's current stream."""
    cp = _cupy()
    torch = sys.modules.get("torch")
    if cp.cuda.get_current_stream().ptr != 0:
        print("warning: CuPy's current stream is not the legacy default stream")
    if torch is not None and torch.cuda.is_available() and torch.cuda.current_stream().cuda_stream != 0:
        print("warning: PyTorch's current stream is not the legacy default stream")
