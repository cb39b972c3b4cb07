"""ncu target: the prototype (scratch/cols16.cu, L2) then the library cols kernel, float32 16 x 16 GESV."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np, cupy as cp
from batched.factorizations import lu as lu_module
from batched.factorizations.lu_settings import LuSetting
from bench import harness
n, dt = 16, "float32"
batch = harness.batch_for(n * n * 4)
A = harness.random_array((batch, n, n), dt, 5)
A[:, cp.arange(n), cp.arange(n)] += n
b = harness.random_array((batch, n), dt, 6)
src = (Path(__file__).parent / "cols16.cu").read_text()
mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=["gesv16_cols<float, 2, 2>"])
ker = mod.get_function("gesv16_cols<float, 2, 2>")
X = cp.empty((batch, n), dt); info = cp.empty(batch, cp.int32)
for _ in range(2):
    ker((min(-(-batch * 2 // 128), 132 * 16),), (128,), (A, b, X, info, np.int64(batch)))
    lu_module._gesv_arrays(A, b, False, False, LuSetting("cols", 16, 2), want_factors=False)
cp.cuda.Device().synchronize()
