"""Batched GEMV against cuBLAS (cupy.matmul) and PyTorch (torch.bmm) on the same memory.

Cases (all alpha = 1, beta = 0, as the peers compute y = op(A) x):

- ``uniform``: C-ordered stacked arrays (batch, m, n), the common NumPy-style
  input; DGEMV and SGEMV, trans N and T, m = n in 4..512 and the FEM shapes
  81x8 and 8x81; batch sized so A takes at least 256 MiB.
- ``uniform-F``: the same square sizes with each matrix column-major
  (a (batch, n, m) array with its last two axes swapped).
- ``pointer``: a PointerBatch over the stacked matrices, built once outside
  the timing, x a (batch, n) array; DGEMV 8x8, 32x32, 81x8; A of 256 MiB as
  for ``uniform``, so that the two compare at one batch (a repeated call on a
  PointerBatch does no per-matrix host work).
- ``variable``: a VariableBatch with m, n uniform in [1, 64], as many
  matrices as fit 256 MiB (at most 2 million); bytes count what is touched.
  Its peers run on a zero-padded (batch, 64, 64) stack (a loop over the
  matrices would be far slower), as the row's ``peer_note`` says.  Its sweep
  leaves out the staged and tall settings, which a variable-size batch never
  takes (``batched/gemv.py``).
- complex ZGEMV/CGEMV at 8 to 512, uniform.

Peers: ``cupy`` = cupy.matmul(op(A), x[..., None]) (cuBLAS strided batched
GEMM), ``torch`` = torch.bmm on tensors sharing the CuPy memory (left out
when PyTorch is not installed).

Usage: python3 bench/gemv.py [--quick] [--sweep] [--dry-run] [--dtype D] [--layout L]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import batched as bt  # noqa: E402
from bench import harness  # noqa: E402
from bench.harness import Case, NotApplicable, Operands  # noqa: E402

SQUARE = (4, 8, 16, 32, 64, 128, 256, 512)
FEM = ((81, 8), (8, 81))
COMPLEX_SQUARE = (8, 32, 64, 128, 512)
POINTER_SHAPES = ((8, 8), (32, 32), (81, 8))
VARIABLE_MAX = 64
VARIABLE_COUNT_MAX = 2_000_000


def _itemsize(dtype) -> int:
    return np.dtype(dtype).itemsize


def uniform_case(dtype, layout, trans, m, n, target=harness.TARGET_BYTES, **kw) -> Case:
    batch = harness.batch_for(m * n * _itemsize(dtype), target)
    return Case("gemv", dtype, layout, trans, m, n, 0, batch, **kw)


def variable_case(dtype, trans) -> Case:
    mean_elems = ((1 + VARIABLE_MAX) / 2) ** 2
    count = min(VARIABLE_COUNT_MAX, int(harness.TARGET_BYTES // (mean_elems * _itemsize(dtype))))
    return Case("gemv", dtype, "variable", trans, VARIABLE_MAX, VARIABLE_MAX, 0, count, repeats=10,
                note=f"m, n uniform in [1, {VARIABLE_MAX}]")


def all_cases() -> list[Case]:
    cases = []
    for dtype in ("float64", "float32"):
        for trans in "NT":
            for s in SQUARE:
                cases.append(uniform_case(dtype, "uniform", trans, s, s))
            for m, n in FEM:
                cases.append(uniform_case(dtype, "uniform", trans, m, n))
            for s in SQUARE:
                cases.append(uniform_case(dtype, "uniform-F", trans, s, s))
    for trans in "NT":
        for m, n in POINTER_SHAPES:
            cases.append(uniform_case("float64", "pointer", trans, m, n, repeats=5))
    for dtype in ("float64", "float32"):
        for trans in "NT":
            cases.append(variable_case(dtype, trans))
    for dtype in ("complex128", "complex64"):
        for trans in "NT":
            for s in COMPLEX_SQUARE:
                cases.append(uniform_case(dtype, "uniform", trans, s, s))
    return cases


def quick_cases() -> list[Case]:
    return [uniform_case("float64", "uniform", "N", 8, 8),
            uniform_case("float64", "uniform", "T", 32, 32),
            uniform_case("float32", "uniform", "N", 81, 8),
            uniform_case("float64", "uniform-F", "N", 16, 16),
            uniform_case("float64", "pointer", "N", 32, 32, repeats=5),
            variable_case("float64", "N"),
            uniform_case("complex128", "uniform", "T", 8, 8)]


# --- variable sizes --------------------------------------------------------------


def variable_shapes(count: int, index: int) -> np.ndarray:
    """(count, 2) matrix shapes of input set ``index``, uniform in [1, VARIABLE_MAX]."""
    rng = np.random.default_rng(1000 + index)
    return rng.integers(1, VARIABLE_MAX + 1, size=(count, 2), dtype=np.int64)


def traffic(case: Case):
    if case.layout == "variable":
        return harness.traffic(case, shapes=variable_shapes(case.batch, 0))
    return harness.traffic(case)


# --- operands ------------------------------------------------------------------

_pointer_cache: dict = {}


def _torch_views(data, op_a, x):
    torch = harness.torch_or_none()
    if torch is not None:
        data["tA"] = harness.as_torch(torch, op_a)
        data["tx"] = harness.as_torch(torch, x).unsqueeze(-1)


def build(case: Case, index: int) -> Operands:
    m, n, dtype, count = case.m, case.n, case.dtype, case.batch
    seed = 7919 * index + 17
    if case.layout == "variable":
        return _build_variable(case, index, seed)
    inner = n if case.trans == "N" else m
    data, note = {}, ""
    if case.layout == "pointer":
        key = (dtype, m, n, count, index)
        if key not in _pointer_cache:   # N and T cases share one batch (and its device pointers)
            _pointer_cache.clear()
            A = harness.random_array((count, m, n), dtype, seed)
            _pointer_cache[key] = (A, bt.PointerBatch([A[i] for i in range(count)]))
        A, data["batchA"] = _pointer_cache[key]
        note = "peers on the stacked array behind the pointers"
    elif case.layout == "uniform-F":
        A = harness.random_array((count, n, m), dtype, seed).swapaxes(1, 2)
    else:
        A = harness.random_array((count, m, n), dtype, seed)
    x = harness.random_array((count, inner), dtype, seed + 1)
    op_a = A if case.trans == "N" else A.swapaxes(1, 2)
    data.update(A=A, x=x, opA=op_a, x3=x[..., None])
    _torch_views(data, op_a, x)
    return Operands(data, peer_note=note)


def _build_variable(case: Case, index: int, seed: int) -> Operands:
    """A VariableBatch and its zero-padded (batch, 64, 64) stack for the peers.

    Boolean-mask indexing packs the valid entries in C order, matrix after
    matrix, so the packed buffer is every (m_i, n_i) matrix C-ordered in turn.
    """
    import cupy as cp

    shapes = variable_shapes(case.batch, index)
    ms, ns = shapes[:, 0], shapes[:, 1]
    rows, inner = (ms, ns) if case.trans == "N" else (ns, ms)
    cap = VARIABLE_MAX
    ar = cp.arange(cap)
    m_d, n_d = cp.asarray(ms), cp.asarray(ns)
    mask = (ar[None, :, None] < m_d[:, None, None]) & (ar[None, None, :] < n_d[:, None, None])
    padded = harness.random_array((case.batch, cap, cap), case.dtype, seed)
    padded *= mask
    packed = padded[mask]
    offsets = np.concatenate([[0], np.cumsum(ms * ns)])
    mats = [packed[offsets[i]:offsets[i + 1]].reshape(int(ms[i]), int(ns[i])) for i in range(case.batch)]
    xmask = ar[None, :] < cp.asarray(inner)[:, None]
    xpad = harness.random_array((case.batch, cap), case.dtype, seed + 1)
    xpad *= xmask
    xpacked = xpad[xmask]
    xoff = np.concatenate([[0], np.cumsum(inner)])
    xs = [xpacked[xoff[i]:xoff[i + 1]] for i in range(case.batch)]
    op_a = padded if case.trans == "N" else padded.swapaxes(1, 2)
    out_mask = ar[None, :] < cp.asarray(rows)[:, None]
    data = {"batchA": bt.VariableBatch(mats), "xs": xs, "opA": op_a, "x3": xpad[..., None],
            }
    _torch_views(data, op_a, xpad)
    return Operands(data, peer_view=lambda r: cp.asarray(r)[..., 0][out_mask],
                    peer_note=f"peers on a zero-padded (batch, {cap}, {cap}) stack")


# --- ours and the peers ------------------------------------------------------------


def ours(case: Case, d: dict, setting):
    if case.layout == "variable" and setting is not None and (setting.staged or setting.tall):
        raise NotApplicable("a variable-size batch is never staged or tall")
    A = d.get("batchA", d.get("A"))
    x = d["xs"] if case.layout == "variable" else d["x"]
    return bt.gemv(A, x, trans=case.trans, setting=setting)


def peer_cupy(case: Case, d: dict):
    import cupy as cp

    return cp.matmul(d["opA"], d["x3"])


def peer_torch(case: Case, d: dict):
    if "tA" not in d:
        raise NotApplicable
    import torch

    return torch.bmm(d["tA"], d["tx"])


def main(argv=None, print_table: bool = True) -> list:
    args = harness.parse_args(argv, "Batched GEMV benchmark")
    cases = harness.select(quick_cases() if args.quick else all_cases(), args)
    if args.dry_run:
        return harness.dry_run("gemv", cases, traffic)
    peers = {"cupy": peer_cupy}
    if harness.torch_or_none() is not None:
        peers["torch"] = peer_torch
    else:
        print("note: PyTorch with CUDA not available; torch peer left out")
    try:
        return harness.run("gemv", cases, ours, peers, build=build, args=args, traffic_fn=traffic,
                           sweep=bt.GEMV_SETTINGS if args.sweep else (),
                           sweep_layouts=("uniform", "uniform-F", "pointer", "variable"), print_table=print_table)
    finally:
        _pointer_cache.clear()


if __name__ == "__main__":
    main()
