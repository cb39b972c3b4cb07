import time, sys, numpy as np, cupy as cp, batched as bt
rng = np.random.default_rng(0)
def rnd(shape, dt):
    a = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c": a = a + 1j * rng.standard_normal(shape)
    return a.astype(dt)
bad = 0
def check(name, got, ref, dt, k):
    global bad
    got = cp.asnumpy(got) if not isinstance(got, list) else [cp.asnumpy(g) for g in got]
    if isinstance(got, list):
        err = max([np.max(np.abs(g - r), initial=0) / (np.max(np.abs(r), initial=0) + 1e-30) for g, r in zip(got, ref)], default=0)
    else:
        err = np.max(np.abs(got - ref), initial=0) / (np.max(np.abs(ref), initial=0) + 1e-30)
    tol = (1e-4 if np.dtype(dt) in (np.float32, np.complex64) else 1e-12) * max(k, 1)
    ok = err < tol
    if not ok: bad += 1
    print(("ok  " if ok else "BAD ") + f"{name} err={err:.2e}")
for dt in bt.SUPPORTED_DTYPES:
    for (m, n) in [(1, 1), (4, 4), (8, 8), (81, 8), (8, 81), (33, 17), (100, 300), (513, 64)]:
        for tr in "NTC":
            for order in "CF":
                A = rnd((7, m, n), dt); x = rnd((7, n if tr == "N" else m), dt); y = rnd((7, m if tr == "N" else n), dt)
                Ad = cp.asarray(A, order=order) if order == "C" else cp.asarray(np.swapaxes(np.ascontiguousarray(np.swapaxes(A, -1, -2)), -1, -2))
                op = A if tr == "N" else (np.swapaxes(A, -1, -2).conj() if tr == "C" else np.swapaxes(A, -1, -2))
                ref = 2 * (op @ x[..., None])[..., 0] - 0.5 * y
                for s in [None, *bt.GEMV_SETTINGS]:
                    got = bt.gemv(Ad, cp.asarray(x), cp.asarray(y), alpha=2, beta=-0.5, trans=tr, setting=s)
                    if s is None or (m, n) in ((33, 17), (513, 64)):
                        check(f"gemv {np.dtype(dt)} {m}x{n} {tr} {order} {s}", got, ref, dt, max(m, n))
        # lists
        As = [rnd((rng.integers(0, 40), rng.integers(0, 40)), dt) for _ in range(50)]
        xs = [rnd((a.shape[1],), dt) for a in As]
        got = bt.gemv([cp.asarray(a) for a in As], [cp.asarray(v) for v in xs])
        check(f"gemv variable {np.dtype(dt)}", got, [a @ v for a, v in zip(As, xs)], dt, 40)
        As = [rnd((9, 5), dt) for _ in range(50)]; xs = [rnd((5,), dt) for a in As]
        got = bt.gemv(bt.PointerBatch([cp.asarray(a) for a in As]), [cp.asarray(v) for v in xs])
        check(f"gemv pointer {np.dtype(dt)}", got, [a @ v for a, v in zip(As, xs)], dt, 9)
    for n in [1, 4, 8, 13, 16, 32, 33, 70, 130]:
        for ta in "NTC":
            for tb in "NC":
                A = rnd((5, n, n + 1), dt); B = rnd((5, n + 1, n + 2) if ta == "N" else (5, n, n + 2), dt)
                if tb != "N": B = np.swapaxes(B, -1, -2).copy()
                opA = A if ta == "N" else (np.swapaxes(A, -1, -2).conj() if ta == "C" else np.swapaxes(A, -1, -2))
                opB = B if tb == "N" else np.swapaxes(B, -1, -2).conj()
                C = rnd((5, opA.shape[-2], opB.shape[-1]), dt)
                ref = 1.5 * opA @ opB + 2 * C
                for s in [None, *bt.GEMM_SETTINGS] if n in (13, 33) else [None]:
                    got = bt.gemm(cp.asarray(A), cp.asarray(B), cp.asarray(C), alpha=1.5, beta=2, transa=ta, transb=tb, setting=s)
                    check(f"gemm {np.dtype(dt)} {n} {ta}{tb} {s}", got, ref, dt, n + 2)
                outF = cp.asfortranarray(cp.full(ref.shape[::-1], cp.nan, dtype=dt)).T if False else None
    As = [rnd((rng.integers(1, 20), 6), dt) for _ in range(30)]; Bs = [rnd((6, rng.integers(1, 20)), dt) for _ in range(30)]
    got = bt.gemm([cp.asarray(a) for a in As], [cp.asarray(b) for b in Bs])
    check(f"gemm variable {np.dtype(dt)}", got, [a @ b for a, b in zip(As, Bs)], dt, 6)
print("BAD", bad)
# quick timing
def timeit(f, rep=20):
    f(); cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(rep):
        s.record(); f(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e) * 1e-3)
    return float(np.median(ts))
x = cp.ones(1 << 28, dtype=cp.float64); yb = cp.empty_like(x)
tc = timeit(lambda: cp.copyto(yb, x)); print(f"copy {2*x.nbytes/tc/1e9:.0f} GB/s")
del x, yb
for dt in (np.float64, np.float32):
    for (m, n) in [(4,4),(8, 8), (16,16), (32, 32), (64,64), (128,128), (256,256), (512, 512), (81, 8), (8, 81)]:
        batch = (256 << 20) // (m * n * np.dtype(dt).itemsize)
        A = cp.random.standard_normal((batch, m, n)).astype(dt); x = cp.random.standard_normal((batch, n)).astype(dt)
        xm = x[..., None]
        for tr in "NT":
            xx = x if tr == "N" else cp.random.standard_normal((batch, m)).astype(dt)
            t = timeit(lambda: bt.gemv(A, xx, trans=tr))
            Aop = A if tr == "N" else A.swapaxes(-1, -2)
            tb = timeit(lambda: cp.matmul(Aop, xx[..., None]))
            by = A.nbytes + xx.nbytes + batch * (m if tr == "N" else n) * np.dtype(dt).itemsize
            print(f"gemv {np.dtype(dt)} {m}x{n} {tr} batch {batch}: ours {by/t/1e9:.0f} GB/s  cublas {by/tb/1e9:.0f} GB/s  speedup {tb/t:.2f}")
for n in [4, 8, 16, 32, 64, 128, 256]:
    dt = np.float64
    batch = max(64, (256 << 20) // (3 * n * n * 8))
    A = cp.random.standard_normal((batch, n, n)); B = cp.random.standard_normal((batch, n, n))
    t = timeit(lambda: bt.gemm(A, B)); tb = timeit(lambda: cp.matmul(A, B))
    print(f"dgemm {n} batch {batch}: ours {3*A.nbytes/t/1e9:.0f} GB/s {2*n**3*batch/t/1e9:.0f} GF/s  cublas {2*n**3*batch/tb/1e9:.0f} GF/s speedup {tb/t:.2f}")
