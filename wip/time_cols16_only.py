import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np, cupy as cp
from batched.factorizations import lu as lu_module
from batched.factorizations.lu_settings import LuSetting
from bench import harness
for kind in ("dominant", "random"):
    n, dt = 16, "float32"
    batch = harness.batch_for(n * n * 4)
    A = harness.random_array((batch, n, n), dt, 5)
    if kind == "dominant":
        A[:, cp.arange(n), cp.arange(n)] += n
    b = harness.random_array((batch, n), dt, 6)
    line = kind
    for s in (LuSetting("rows", 16, 16), LuSetting("cols", 16, 2)):
        f = lambda: lu_module._gesv_arrays(A, b, False, False, s, want_factors=False)
        f()
        line += f" | {s} {harness.time_calls([f], repeats=10).seconds * 1e6:6.1f}"
    print(line, flush=True)
