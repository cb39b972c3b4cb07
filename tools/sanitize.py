"""Small GPU cases for compute-sanitizer (memcheck, racecheck) over every kernel.

Run as ``compute-sanitizer --tool memcheck --error-exitcode 1 python3 tools/sanitize.py``.
CuPy's memory pool is off so that every allocation is its own, and an
out-of-bounds access is caught at the allocation's edge.  Cases: batch 1 and
65,537; n in {0, 1, 31, 32, 33}; matrices at misaligned offsets (views that
start one element into a buffer); beta = 0 with an uninitialized y; every
registered setting forced once; the three layouts.
"""

import sys

import cupy as cp
import numpy as np

import batched as bt

cp.cuda.set_allocator(None)
rng = np.random.default_rng(7)
quick = "--quick" in sys.argv
# racecheck is slow: --race keeps batches small and still forces every setting once.
race = "--race" in sys.argv


def rand(shape, dtype, offset=1):
    """A random array that starts `offset` elements into a larger allocation."""
    size = int(np.prod(shape))
    flat = cp.asarray(rng.standard_normal(size + offset)).astype(dtype)
    return flat[offset:].reshape(shape)


checks = 0
for dtype in (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES:
    for n in (0, 1, 31, 32, 33):
        for batch in (1, 3) if race else (1, 65537):
            if batch > 1 and n > 1 and n != 33:
                continue
            for trans in "NTC":
                A = rand((batch, n, n + 1), dtype)
                x = rand((batch, (n + 1) if trans == "N" else n), dtype)
                rows = n if trans == "N" else n + 1
                y = cp.empty((batch, rows), dtype)  # uninitialized: beta = 0 must not read it
                bt.gemv(A, x, y, beta=0.0, trans=trans)
                bt.gemv(A, x, rand((batch, rows), dtype), alpha=0.5, beta=2.0, trans=trans)
                checks += 2
            B = rand((batch, n + 1, n), dtype)
            bt.gemm(A, B, cp.empty((batch, n, n), dtype), beta=0.0)
            bt.gemm(A, B.swapaxes(-1, -2), rand((batch, n, n), dtype), beta=1.0, transb="C")
            checks += 2
    A = rand((5, 33, 17), dtype)
    for s in bt.GEMV_SETTINGS:
        for trans in "NT":
            x = rand((5, 17 if trans == "N" else 33), dtype)
            bt.gemv(A, x, trans=trans, setting=s)
            checks += 1
    for s in bt.GEMM_SETTINGS:
        bt.gemm(A, rand((5, 17, 70), dtype), setting=s)
        checks += 1
    mats = [rand((int(rng.integers(0, 40)), int(rng.integers(0, 40))), dtype) for _ in range(33)]
    vecs = [rand((m.shape[1],), dtype) for m in mats]
    bt.gemv(mats, vecs)
    bt.gemv(bt.PointerBatch([rand((9, 4), dtype) for _ in range(33)]), rand((33, 4), dtype))
    bt.gemm(mats, [rand((m.shape[1], 3), dtype) for m in mats])
    checks += 3
cp.cuda.Device().synchronize()
print(f"sanitize: {checks} calls completed")
