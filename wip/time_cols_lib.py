"""Library cols design against rows at 9-16 (float32), GESV X only and GETRF."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np, cupy as cp
from batched.factorizations import lu as lu_module
from batched.factorizations.lu_settings import LuSetting
from bench import harness
for kind in ("dominant", "random"):
    for n in (9, 12, 13, 16):
        dt = "float32"
        batch = harness.batch_for(n * n * 4)
        A = harness.random_array((batch, n, n), dt, 5)
        if kind == "dominant":
            A[:, cp.arange(n), cp.arange(n)] += n
        b = harness.random_array((batch, n), dt, 6)
        line = f"{kind:8} n {n:2} batch {batch:7}"
        ref = None
        for s in (LuSetting("rows", 16, 16), LuSetting("rows", 16, 8), LuSetting("cols", 16, 2)):
            f = lambda: lu_module._gesv_arrays(A, b, False, False, s, want_factors=False)
            x = f()[2]
            if ref is None:
                ref = x
            err = float(cp.abs(x - ref).max() / cp.abs(ref).max())
            t = harness.time_calls([f], repeats=10).seconds * 1e6
            g = lambda: lu_module.getrf(A, setting=s)
            g()
            tg = harness.time_calls([g], repeats=10).seconds * 1e6
            line += f" | {s} gesv {t:6.1f} getrf {tg:6.1f} dx {err:.0e}"
        print(line, flush=True)
        del A, b
