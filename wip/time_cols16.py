"""Prototype timing: gesv16_cols (scratch/cols16.cu) against batched.solve (rows16) on
bench/solve.py's batches (diagonally dominant) and on random ones (interchanges)."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np, cupy as cp
import batched as bt
from bench import harness
src = (Path(__file__).parent / "cols16.cu").read_text()
variants = {"float32": [(2, 2), (4, 3), (4, 4)], "float64": [(4, 2), (8, 3), (8, 2)]}
names = [f"gesv16_cols<{'float' if dt == 'float32' else 'double'}, {L}, {mb}>" for dt, vs in variants.items() for L, mb in vs]
mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
n = 16
for dt, vs in variants.items():
    for kind in ("dominant", "random"):
        batch = harness.batch_for(n * n * np.dtype(dt).itemsize)
        A = harness.random_array((batch, n, n), dt, 5)
        if kind == "dominant":
            A[:, cp.arange(n), cp.arange(n)] += n
        b = harness.random_array((batch, n), dt, 6)
        f = lambda: bt.solve(A, b, check=False)
        x_ref, _ = f()
        t_ref = harness.time_calls([f], repeats=10).seconds * 1e6
        line = f"{dt} {kind:8} batch {batch} rows16 {t_ref:7.1f} us"
        for L, mb in vs:
            ker = mod.get_function(f"gesv16_cols<{'float' if dt == 'float32' else 'double'}, {L}, {mb}>")
            X = cp.full((batch, n), cp.nan, dt)
            info = cp.full(batch, -1, cp.int32)
            grid = min(-(-batch * L // 128), 132 * 16)
            g = lambda: ker((grid,), (128,), (A, b, X, info, np.int64(batch)))
            g()
            cp.cuda.Device().synchronize()
            t = harness.time_calls([g], repeats=10).seconds * 1e6
            err = float(cp.abs(X - x_ref).max() / cp.abs(x_ref).max())
            sub = slice(0, 2000)
            r = cp.abs(cp.einsum("bij,bj->bi", A[sub].astype(cp.float64), X[sub].astype(cp.float64)) - b[sub]).max()
            line += f" | L{L} mb{mb} {t:7.1f} us x{t_ref / t:.2f} err {err:.1e} res {float(r):.1e} bad_info {int((info != 0).sum())} ker_regs {ker.num_regs}"
        print(line, flush=True)
        del A, b
