"""Chase intermittent batched-GEMV errors: the tests' random cases, every
setting, each call checked against the float64 reference, for a fixed time.

Why: the property tests run each case once per setting, and an error that
depends on what ran before (a launch plan kept by an earlier call, the memory
pool's reuse) shows up there now and then, in a long multi-process run, and
is gone when hypothesis replays it.  This runs far more cases in one process
and writes every failing call with its operands and the plan state, so the
failure can be studied afterwards.  (Session 25: it found the plans' scalar
bug, a plan made with beta = 1e-50, zero in complex64, dropping beta * y of
the next call; it showed with --repeats 1, as in the tests.)

    python3 tools/stress_gemv.py --seconds 120 --out $OUT/stress.jsonl [--complex64]
        [--repeats N] [--no-plans] [--no-pool]
    # several processes at once, one GPU:  for i in $(seq 8); do ... --out $OUT/s$i.jsonl & done; wait
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import cupy  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import batched as bt  # noqa: E402
from batched import _plans  # noqa: E402
from residuals import gemv_error_ratio  # noqa: E402
from strategies import gemv_cases  # noqa: E402

SETTINGS = [*bt.GEMV_SETTINGS, None]
THRESHOLD = 30


class _TimeUp(Exception):
    pass


def _values(a):
    """A small operand as JSON (complex entries as [re, im]); None for a large one."""
    if a is None or a.size >= 5000:
        return None
    return [[float(v.real), float(v.imag)] for v in np.asarray(a).ravel()]


def failure_record(case, setting, rep, had_plan, with_out, ratio, got, err) -> dict:
    return {"ratio": ratio, "setting": str(setting), "rep": rep, "had_plan": had_plan, "plans": len(_plans._plans),
            "case": repr(case), "with_out": with_out, "error": err, "alpha": repr(case.alpha),
            "beta": repr(case.beta), "trans": case.trans, "layouts": case.layouts,
            "shapes": {k: None if v is None else list(v.shape) for k, v in (("A", case.A), ("x", case.x), ("y", case.y))},
            "dtypes": {k: None if v is None else str(v.dtype) for k, v in (("A", case.A), ("x", case.x), ("y", case.y))},
            "A": _values(case.A), "x": _values(case.x), "y": _values(case.y), "got": _values(got)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--out", default="stress_gemv.jsonl", help="failing calls, one JSON object a line")
    p.add_argument("--complex64", action="store_true", help="only cases whose result is complex64")
    p.add_argument("--repeats", type=int, default=1, help="calls per case and setting (1: as in the tests)")
    p.add_argument("--no-plans", action="store_true", help="clear the launch plans before every call")
    p.add_argument("--no-pool", action="store_true", help="cudaMalloc per array (under compute-sanitizer)")
    a = p.parse_args(argv)
    if a.no_pool:
        cupy.cuda.set_allocator(None)
    stop = time.time() + a.seconds
    stats = {"cases": 0, "calls": 0, "failed": 0, "replayed": 0}
    cases = gemv_cases()
    if a.complex64:
        cases = cases.filter(lambda c: c.dtype == np.complex64)

    with open(a.out, "a") as log:
        @settings(max_examples=10**9, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  phases=[Phase.generate])
        @given(case=cases, with_out=st.integers(0, 3), data=st.data())
        def body(case, with_out, data):
            if time.time() > stop:
                raise _TimeUp
            stats["cases"] += 1
            for setting in data.draw(st.permutations(SETTINGS)):
                for rep in range(a.repeats):
                    if a.no_plans:
                        _plans.clear()
                    A, x, y = case.args(cupy)
                    out = case.out(cupy) if with_out else None  # NaN-poisoned
                    # gemv.py's tag: the routine, the parsed letter, the setting
                    key = _plans.plan_key(("gemv", case.trans.upper(), setting), (A, x), y, out, case.alpha,
                                          case.beta)
                    had_plan = key in _plans._plans
                    got, err = None, None
                    try:
                        got = cupy.asnumpy(bt.gemv(A, x, y, alpha=case.alpha, beta=case.beta, trans=case.trans,
                                                   out=out, setting=setting))
                        ratio = gemv_error_ratio(got, case.A, case.x, case.y, case.alpha, case.beta, case.trans)
                    except Exception:  # noqa: BLE001  (recorded, not fatal)
                        ratio, err = float("inf"), traceback.format_exc()
                    stats["calls"] += 1
                    stats["replayed"] += had_plan
                    if not ratio < THRESHOLD:
                        stats["failed"] += 1
                        log.write(json.dumps(failure_record(case, setting, rep, had_plan, with_out, ratio, got,
                                                            err)) + "\n")
                        log.flush()
                        print(f"FAIL ratio {ratio:.3g} {setting} rep {rep} plan {had_plan} {case!r}", flush=True)

        try:
            body()
        except _TimeUp:
            pass
    print(json.dumps({"pid": os.getpid(), **stats}), flush=True)
    return 1 if stats["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
