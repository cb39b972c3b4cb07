"""bench/harness.py's case selection on the CPU: --dtype, --size and --trans narrow a
script's cases together (a device call times only the rows it needs)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: bench/

from bench import harness, svd, trsv  # noqa: E402


def test_filters_narrow_together():
    args = harness.parse_args(["--size", "64", "--trans", "LN", "--dtype", "float32"], "test")
    picked = harness.select(trsv.all_cases(), args)
    assert picked and all((c.n, c.trans, c.dtype) == (64, "LN", "float32") for c in picked)
    everything = harness.select(trsv.all_cases(), harness.parse_args([], "test"))
    assert len(everything) == len(trsv.all_cases()) > len(picked)


def test_trans_repeats_and_reaches_other_scripts():
    args = harness.parse_args(["--trans", "UV", "--trans", "V", "--size", "128"], "test")
    picked = harness.select(svd.all_cases(), args)
    assert {c.trans for c in picked} == {"UV", "V"} and {c.n for c in picked} == {128}
    assert not harness.select(svd.all_cases(), harness.parse_args(["--trans", "LN"], "test"))
