"""``python -m batched demo`` runs every workload and checks it against NumPy."""

from __future__ import annotations

from batched.demo import run


def test_demo_runs_and_matches_numpy(capsys):
    assert run(scale=2000) == 0
    out = capsys.readouterr().out
    for name in ("gemv 81x8", "gemm 16x16", "trsv 32x32", "solve 8x8", "svdvals 16x16"):
        assert name in out
    assert "all results match NumPy" in out
