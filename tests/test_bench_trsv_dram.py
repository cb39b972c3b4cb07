"""bench/trsv_dram.py's reading of Nsight Compute's CSV, on the CPU.

The script's numbers (DRAM bytes against the bytes bench/trsv.py counts, and the
effective bandwidth cap they imply) come from ``parse``: ncu's ``--csv`` table (one
row per kernel and metric, values with thousands separators, units ncu chooses)
matched in launch order with the CASE lines the profiled child prints.  These
tests feed it a table written by hand in that format.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: bench/

from bench import trsv, trsv_dram  # noqa: E402

HEADER = '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def ncu_rows(kid: int, kernel: str, dram_read, dram_write, time, sectors) -> list[str]:
    """One kernel's four metric rows as ncu --csv writes them: (value, unit) pairs."""
    metrics = (("dram__bytes_read.sum", dram_read), ("dram__bytes_write.sum", dram_write),
               ("gpu__time_duration.sum", time), ("lts__t_sectors_srcunit_tex_op_read.sum", sectors))
    return [f'"{kid}","4242","{kernel}","{name}","{unit}","{value}"' for name, (value, unit) in metrics]


def profile_text(kernels, cases) -> str:
    lines = ["==PROF== Connected to process 4242", HEADER]
    for kid, k in enumerate(kernels):
        lines += ncu_rows(kid, *k)
    lines += [f"CASE {c.dtype} {c.trans} {c.n} {c.batch}" for c in cases]
    return "\n".join(lines)


def test_rows_from_ncu_csv_and_case_lines():
    cases = [trsv.case("float64", "LN", 8), trsv.case("float32", "LT", 16)]
    kernels = [("void trsv_tile_kernel<bdf::UniformMatrix<double>, 8>(...)", ("331.35", "Mbyte"),
                ("2,097.15", "Kbyte"), ("112.4", "usecond"), ("11,000,000", "sector")),
               ("void trsv_pipeline_kernel<float, 2>(...)", ("0.5", "Gbyte"), ("1024", "byte"),
                ("0.25", "msecond"), ("1", "sector"))]
    copy = 3000.0
    rows = trsv_dram.parse(profile_text(kernels, cases), copy)
    assert [(r["dtype"], r["trans"], r["n"], r["batch"]) for r in rows] == \
        [(c.dtype, c.trans, c.n, c.batch) for c in cases]
    assert [r["kernel"] for r in rows] == ["trsv_tile_kernel", "trsv_pipeline_kernel"]
    expect = [(331.35e6, 2097.15e3, 112.4e-6, 11_000_000 * 32), (0.5e9, 1024.0, 0.25e-3, 32.0)]
    for r, c, (read, write, t, l2) in zip(rows, cases, expect):
        counted = trsv.traffic(c)[0]
        assert r["counted_bytes"] == counted
        assert r["dram_read_bytes"] == pytest.approx(read) and r["dram_write_bytes"] == pytest.approx(write)
        assert r["ncu_time_s"] == pytest.approx(t) and r["l2_read_bytes"] == pytest.approx(l2)
        assert r["dram_over_counted"] == pytest.approx((read + write) / counted)
        assert r["dram_gbps"] == pytest.approx((read + write) / t / 1e9)
        assert r["effective_gbps"] == pytest.approx(counted / t / 1e9)
        assert r["effective_cap_gbps"] == pytest.approx(copy * counted / (read + write))


def test_a_kernel_count_unlike_the_cases_is_refused():
    cases = [trsv.case("float64", "LN", 8)]
    k = ("void trsv_tile_kernel<double>(...)", ("1", "Mbyte"), ("0", "byte"), ("1", "usecond"), ("1", "sector"))
    with pytest.raises(RuntimeError, match="2 profiled kernels for 1 cases"):
        trsv_dram.parse(profile_text([k, k], cases), 3000.0)


def test_an_unknown_unit_is_an_error_not_a_silent_scale():
    cases = [trsv.case("float64", "LN", 8)]
    k = ("void trsv_tile_kernel<double>(...)", ("1", "Tbyte"), ("0", "byte"), ("1", "usecond"), ("1", "sector"))
    with pytest.raises(KeyError, match="Tbyte"):
        trsv_dram.parse(profile_text([k], cases), 3000.0)
