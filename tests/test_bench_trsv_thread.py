"""bench/trsv_thread.py on the CPU: its cases pair the thread design with the tile the
chooser takes otherwise, and its ratios are the tile's time over the thread design's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: bench/

from batched.factorizations.settings import THREAD_MAX, TRSV_THREAD  # noqa: E402
from bench import trsv, trsv_thread  # noqa: E402


def test_every_type_size_and_op_is_timed_both_ways():
    cases = trsv_thread.all_cases()
    pairs = {}
    for c in cases:
        pairs.setdefault((c.dtype, c.trans, c.n), []).append(c.setting)
    assert set(pairs) == {(dt, tr, n) for dt in trsv_thread.DTYPES for tr in trsv_thread.TRANS
                          for n in range(1, THREAD_MAX + 1)}
    for (dt, tr, n), settings in pairs.items():
        tile = trsv.untyped_default(dt, tr, n)
        assert settings == [tile, TRSV_THREAD], (dt, tr, n)
        assert not tile.thread and tile.single_tile(n)


def test_ratios_are_tile_time_over_thread_time():
    def row(dtype, trans, n, setting, seconds):
        return {"dtype": dtype, "trans": trans, "n": n, "setting": str(setting), "ours_s": seconds}

    tile = trsv.untyped_default("float64", "LN", 16)
    rows = [row("float64", "LN", 16, tile, 91e-6), row("float64", "LN", 16, TRSV_THREAD, 107e-6),
            row("float64", "LT", 16, TRSV_THREAD, 80e-6),   # its tile failed: no ratio
            row("float32", "LN", 8, trsv.untyped_default("float32", "LN", 8), 150e-6),
            row("float32", "LN", 8, TRSV_THREAD, 100e-6)]
    got = trsv_thread.ratios(rows)
    assert set(got) == {("float64", 16), ("float32", 8)}
    assert got[("float64", 16)] == {"LN": pytest.approx(91 / 107)}
    assert got[("float32", 8)] == {"LN": pytest.approx(1.5)}
