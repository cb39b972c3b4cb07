"""DRAM bytes that batched TRSV really moves, against the bytes bench/trsv.py counts.

bench/trsv.py counts the stored triangle n(n+1)/2 plus b and x.  Memory is fetched
in whole sectors (32 bytes into L2) and, from DRAM, in 64-byte pieces, so for a small
C-ordered triangle most of the other half comes along: an 8 x 8 double matrix is 512
bytes of DRAM traffic for 288 counted.  This script runs the default kernel of each
of bench/trsv.py's DTRSV/STRSV cases ('N' and 'T' on lower triangles, n = 8 to 256,
256 MiB of matrices) once under Nsight Compute and reports, per case, the DRAM bytes
read and written, the L2 sectors read, the kernel's time, and

    effective cap = copy bandwidth x counted bytes / DRAM bytes,

the most effective bandwidth the case can show if its DRAM traffic ran at the copy
bandwidth: where it is below issue 4's 2.0 TB/s, that target cannot be met by any
kernel that reads the matrix in place.

Usage: python3 bench/trsv_dram.py [--results-dir DIR] [--sizes 8,16,...]
(runs itself under ``ncu --clock-control none``; needs ncu and hardware counters)
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness, trsv  # noqa: E402

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum")
UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "sector": 32,
         "ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3}


def cases(sizes):
    """bench/trsv.py's default cases ('N' and 'T' on lower triangles) for these sizes."""
    return [trsv.case(dtype, trans, n) for dtype in ("float64", "float32") for trans in ("LN", "LT") for n in sizes]


def run_cases(sizes) -> None:
    """The profiled child: each case's default solve once (bench/trsv.py's operands and
    call), a CASE line after it."""
    import cupy as cp

    for index, case in enumerate(cases(sizes)):
        data = trsv.build(case, index).data
        cp.cuda.Device().synchronize()
        trsv.ours(case, data, None)
        cp.cuda.Device().synchronize()
        print(f"CASE {case.dtype} {case.trans} {case.n} {case.batch}", flush=True)
        del data


def parse(text: str, copy_gbps: float) -> list[dict]:
    """Rows from ncu's CSV (one kernel per case, in launch order) and the CASE lines."""
    lines = text.splitlines()
    order = [line.split()[1:] for line in lines if line.startswith("CASE ")]
    table = list(csv.DictReader(io.StringIO("\n".join(line for line in lines if line.startswith('"')))))
    kernels: dict[int, dict] = {}
    for r in table:
        k = kernels.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"].split("<")[0].replace("void ", "")})
        k[r["Metric Name"]] = float(r["Metric Value"].replace(",", "")) * UNITS[r["Metric Unit"]]
    ids = sorted(kernels)
    if len(ids) != len(order):
        raise RuntimeError(f"{len(ids)} profiled kernels for {len(order)} cases: one TRSV launch each expected")
    rows = []
    for kid, (dtype, trans, n, batch) in zip(ids, order):
        k = kernels[kid]
        case = trsv.case(dtype, trans, int(n))
        assert case.batch == int(batch), (case, batch)
        n, batch = case.n, case.batch
        counted = trsv.traffic(case)[0]  # bench/trsv.py's count
        dram = k["dram__bytes_read.sum"] + k["dram__bytes_write.sum"]
        t = k["gpu__time_duration.sum"]
        rows.append({"routine": "trsv", "dtype": dtype, "trans": trans, "n": n, "batch": batch,
                     "kernel": k["kernel"], "ncu_time_s": t, "counted_bytes": counted,
                     "dram_read_bytes": k["dram__bytes_read.sum"], "dram_write_bytes": k["dram__bytes_write.sum"],
                     "l2_read_bytes": k["lts__t_sectors_srcunit_tex_op_read.sum"],
                     "dram_over_counted": dram / counted, "dram_gbps": dram / t / 1e9,
                     "effective_gbps": counted / t / 1e9, "effective_cap_gbps": copy_gbps * counted / dram})
    return rows


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results-dir", type=Path, default=harness.RESULTS)
    p.add_argument("--sizes", default="8,16,32,64,128,256")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        run_cases(sizes)
        return []
    info = harness.device_info()
    copy_gbps = harness.measure_ceilings()["copy_gbps"]
    cmd = ["ncu", "--clock-control", "none", "-k", "regex:trsv", "--metrics", ",".join(METRICS), "--csv",
           sys.executable, str(Path(__file__).resolve()), "--child", "--sizes", args.sizes]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"ncu failed ({done.returncode}):\n{done.stderr[-2000:]}")
    rows = parse(done.stdout, copy_gbps)
    folder = args.results_dir / harness.gpu_dirname(info["name"])
    folder.mkdir(parents=True, exist_ok=True)
    doc = harness.result_document(info, {"copy_gbps": copy_gbps}, rows,
                                  extra={"note": "ncu --clock-control none, default settings, one call a case"})
    (folder / "trsv_dram.json").write_text(json.dumps(doc, indent=1))
    print(f"{'case':16} {'kernel':22} {'us':>7} {'DRAM/counted':>12} {'DRAM GB/s':>9} {'eff GB/s':>8} {'eff cap':>8}")
    for r in rows:
        print(f"{r['dtype'][5:]:>3} {r['trans']} {r['n']:5}    {r['kernel'][:22]:22} {r['ncu_time_s'] * 1e6:7.1f} "
              f"{r['dram_over_counted']:12.2f} {r['dram_gbps']:9.0f} {r['effective_gbps']:8.0f} "
              f"{r['effective_cap_gbps']:8.0f}")
    return rows


if __name__ == "__main__":
    main()
