"""batched.kblas (one large matrix) against cuBLAS gemv/symv/hemv on the same memory.

Cases (alpha = 1, beta = 0; column-major A):

- DGEMV and SGEMV, trans N and T, and DSYMV, SSYMV, ZHEMV, CHEMV (lower), at
  n in {1024, 2048, 4096, 8192, 12288, 16384, 24576, 30000} plus 10001 and 16385;
- the same routines on the submatrix A[o:, o:] of one 16384 x 16384 matrix
  for o in {1, 17, 1000} (misaligned rows and columns, leading dimension 16384).

Bytes: GEMV reads A (m n), x and writes y; SYMV/HEMV read one triangle
(n (n + 1) / 2), x, and write y: the "effective" bandwidth of the issue.
Peers: ``cublas`` (cuBLAS's default, atomics not allowed) and, for SYMV/HEMV,
``cublas_atomics`` (cublasSetAtomicsMode ALLOWED, cuBLAS's KBLAS-derived
kernel); both called through ctypes on the libcublas CuPy loads, since CuPy
binds gemv but not symv/hemv, and through the raw gemv binding submatrices
would be copied.  The harness reports the fraction of max(copy, read-only)
bandwidth; ``read_gbps`` in the JSON is the read-only ceiling.  ``floor_s`` (cases
of at most 256 MiB) is the fastest read-only pass over the case's bytes, one launch,
operands rotated the same way, and ``floor_speedup`` the best peer's time over it:
a ratio to cuBLAS above it is out of reach for any kernel that reads A.

Usage: python3 bench/kblas.py [--quick] [--sweep] [--dry-run] [--dtype D]
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import batched as bt  # noqa: E402
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SIZES = (1024, 2048, 4096, 8192, 12288, 16384, 24576, 30000, 10001, 16385)
PARENT = 16384
PEERS_AND_OURS = ("ours", "cublas", "cublas_atomics")
OFFSETS = (1, 17, 1000)
ROUTINES = (("gemv", "float64", "N"), ("gemv", "float64", "T"), ("gemv", "float32", "N"),
            ("gemv", "float32", "T"), ("symv", "float64", "L"), ("symv", "float32", "L"),
            ("hemv", "complex128", "L"), ("hemv", "complex64", "L"))


def all_cases() -> list[Case]:
    cases = [Case(r, dt, "F", tr, n, n, repeats=10) for r, dt, tr in ROUTINES for n in SIZES]
    cases += [Case(r, dt, "F", tr, PARENT - o, PARENT - o, offset=o, repeats=10,
                   note=f"A[{o}:, {o}:] of {PARENT}x{PARENT}") for r, dt, tr in ROUTINES for o in OFFSETS]
    return cases


def quick_cases() -> list[Case]:
    return [Case("gemv", "float64", "F", "N", 8192, 8192), Case("gemv", "float64", "F", "T", 4096, 4096),
            Case("symv", "float64", "F", "L", 12288, 12288), Case("hemv", "complex128", "F", "L", 4096, 4096),
            Case("gemv", "float32", "F", "N", PARENT - 17, PARENT - 17, offset=17)]


def traffic(case: Case):
    item = np.dtype(case.dtype).itemsize
    m, n = case.m, case.n
    per_flop = 8 if np.dtype(case.dtype).kind == "c" else 2
    matrix = m * n if case.routine == "gemv" else n * (n + 1) // 2
    return (matrix + m + n) * item, per_flop * m * n


# --- operands ----------------------------------------------------------------------

_parents: dict = {}


def build(case: Case, index: int) -> Operands:
    seed = 7919 * index + 31
    if case.offset:
        if case.dtype not in _parents:  # one parent per dtype, shared by its offset cases
            _parents.clear()
            harness.free_memory()
            _parents[case.dtype] = harness.random_array((PARENT, PARENT), case.dtype, 5).T  # F order
        o = case.offset
        A = _parents[case.dtype][o:, o:]
    else:
        A = harness.random_array((case.n, case.m), case.dtype, seed).T  # F order
    rows, inner = (case.n, case.m) if case.trans == "T" else (case.m, case.n)
    x = harness.random_array((inner,), case.dtype, seed + 1)
    import cupy as cp

    # Each side writes its own y: a shared one would make the error check compare y with itself.
    return Operands({"A": A, "x": x, **{f"y_{who}": cp.empty(rows, case.dtype) for who in PEERS_AND_OURS}})


def ours(case: Case, d: dict, setting):
    if case.routine == "gemv":
        return bt.kblas.gemv(d["A"], d["x"], trans=case.trans, out=d["y_ours"], setting=setting)
    fn = bt.kblas.symv if case.routine == "symv" else bt.kblas.hemv
    return fn(d["A"], d["x"], lower=case.trans == "L", out=d["y_ours"], setting=setting)


# --- cuBLAS through ctypes -------------------------------------------------------------

_lib = None


def _cublas_lib():
    """The libcublas CuPy loaded (found in this process's memory map)."""
    global _lib
    if _lib is None:
        from cupy_backends.cuda.libs import cublas  # noqa: F401  (loads the library)

        path = None
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = line.split()[-1]
                if "/libcublas.so" in name:
                    path = name
                    break
        _lib = ctypes.CDLL(path or "libcublas.so")
    return _lib


_P, _I = ctypes.c_void_p, ctypes.c_int
_PREFIX = {"float32": ("S", ctypes.c_float), "float64": ("D", ctypes.c_double),
           "complex64": ("C", ctypes.c_float), "complex128": ("Z", ctypes.c_double)}


def _scalar(dtype, value):
    _, real = _PREFIX[dtype]
    parts = (value.real, value.imag) if np.dtype(dtype).kind == "c" else (value,)
    return (real * len(parts))(*parts)


def _peer(case: Case, d: dict, atomics: bool):
    """One cuBLAS call, y = op(A) x, into the peer's own y."""
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    lib = _cublas_lib()
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    A, x, y = d["A"], d["x"], d["y_cublas_atomics" if atomics else "y_cublas"]
    lda = A.strides[1] // A.itemsize
    one, zero = _scalar(case.dtype, 1.0), _scalar(case.dtype, 0.0)
    letter = _PREFIX[case.dtype][0]
    if case.routine == "gemv":
        fn = getattr(lib, f"cublas{letter}gemv_v2")
        fn.argtypes = (_P, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I)
        op = 0 if case.trans == "N" else 1
        status = fn(handle, op, case.m, case.n, one, A.data.ptr, lda, x.data.ptr, 1, zero, y.data.ptr, 1)
    else:
        fn = getattr(lib, f"cublas{letter}{case.routine}_v2")
        fn.argtypes = (_P, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I)
        uplo = 0 if case.trans == "L" else 1  # CUBLAS_FILL_MODE_LOWER / UPPER
        atomics_mode = lib.cublasSetAtomicsMode  # CuPy does not bind it
        atomics_mode.argtypes = (_P, _I)
        if atomics:
            atomics_mode(handle, 1)  # CUBLAS_ATOMICS_ALLOWED
        try:
            status = fn(handle, uplo, case.n, one, A.data.ptr, lda, x.data.ptr, 1, zero, y.data.ptr, 1)
        finally:
            if atomics:
                atomics_mode(handle, 0)
    if status:
        raise RuntimeError(f"cuBLAS {case.routine} returned status {status}")
    return y


def peer_cublas(case: Case, d: dict):
    return _peer(case, d, atomics=False)


def peer_cublas_atomics(case: Case, d: dict):
    if case.routine == "gemv":
        raise NotApplicable
    return _peer(case, d, atomics=True)


def main(argv=None, print_table: bool = True) -> list:
    args = harness.parse_args(argv, "batched.kblas benchmark (one large matrix)")
    cases = harness.select(quick_cases() if args.quick else all_cases(), args)
    if args.dry_run:
        return harness.dry_run("kblas", cases, traffic)
    sweep = bt.kblas.KBLAS_SETTINGS if args.sweep else ()
    try:
        return harness.run("kblas", cases, ours, {"cublas": peer_cublas, "cublas_atomics": peer_cublas_atomics},
                           build=build, args=args, traffic_fn=traffic, sweep=sweep, sweep_layouts=("F",),
                           print_table=print_table, floor=True)
    finally:
        _parents.clear()


if __name__ == "__main__":
    main()
