"""Kernel arguments: accessor structs packed as NumPy structured scalars.

Each accessor of ``device_functions/layouts.cuh`` is a struct of 8-byte fields;
CuPy passes a NumPy structured scalar by value with the same bytes, so the
host fills the struct field by field here.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from . import settings
from ._arrays import CTYPES


def _struct(*names):
    return np.dtype([(n, "<i8") for n in names], align=True)


_DTYPES = {
    "UniformMatrix": _struct("base", "stride", "ld", "m", "n"),
    "PointerMatrix": _struct("ptrs", "offset", "ld", "m", "n"),
    "VariableMatrix": _struct("ptrs", "m", "n", "ld"),
    "UniformVector": _struct("base", "stride", "inc"),
    "PointerVector": _struct("ptrs", "offset", "inc", "base", "stride"),
}

# Per batch layout: (matrix accessor, vector accessor).
LAYOUT_ACCESSORS = {
    "uniform": ("UniformMatrix", "UniformVector"),
    "pointer": ("PointerMatrix", "PointerVector"),
    "variable": ("VariableMatrix", "PointerVector"),
}


# Trailing fields a caller may leave out (zero): a PointerVector given a pointer array.
_OPTIONAL = {"PointerVector": 2}


def pack(accessor: str, *fields) -> np.void:
    dtype = _DTYPES[accessor]
    missing = len(dtype.names) - len(fields)
    if not 0 <= missing <= _OPTIONAL.get(accessor, 0):
        raise TypeError(f"{accessor} takes {len(dtype.names)} fields {dtype.names}, got {len(fields)}")
    return np.array([tuple(int(f) for f in fields) + (0,) * missing], dtype=dtype)[0]


def strided_vector(base: int, stride: int, inc: int) -> np.void:
    """A PointerVector over vectors base + b * stride (no pointer array)."""
    return pack("PointerVector", 0, 0, inc, base, stride)


def accessor_type(accessor: str, dtype) -> str:
    return f"bdf::{accessor}<{CTYPES[np.dtype(dtype)]}>"


def grid_for(items: int, groups_per_block: int) -> int:
    """Blocks for a grid-stride loop over ``items`` work items (gridDim.x only)."""
    return max(1, min(-(-items // groups_per_block), 2**31 - 1))


def launch_planned(kernel, plan, args, resident: bool = False) -> None:
    """``kernel`` over ``plan.grid`` blocks of ``plan.block`` threads with ``plan.smem``
    bytes of dynamic shared memory (opted in past the default 48 KiB).  ``resident``:
    the grid cut to the blocks the GPU holds at once, for kernels whose blocks loop
    over the work items and wait on each other's turns (a warp's pipeline)."""
    if plan.smem > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = plan.smem
    grid = plan.grid
    if resident:
        grid = min(grid, settings.resident_blocks(plan.block, plan.smem, kernel.num_regs))
    kernel((grid,), (plan.block,), args, shared_mem=plan.smem)


class PackedLaunch:
    """One kernel launch kept as bytes, replayed with new pointers and scalars.

    CuPy's kernel call converts every argument on every launch (GEMM's twelve,
    four of them structs: about 8 us of a replay's 23 on the H100's host, where
    a kernel of two arguments launches in 5.7).  Here each argument has its own
    16-byte-aligned slot in one buffer, written once; cuLaunchKernel is handed
    the slots' addresses (its ``kernelParams``), and a replay overwrites only the
    ``bound`` arguments: ``(index, key)`` pairs, argument ``index`` taking
    ``values[key]`` -- the first field (the pointer) of an accessor struct, or
    the whole of a scalar, converted to the recorded argument's type.  Every
    argument must be a NumPy scalar or accessor struct (``pack``).  The driver
    copies the arguments when the launch is enqueued, so the buffer is free
    again when ``__call__`` returns; a lock keeps two threads replaying one
    launch from mixing their values.
    """

    def __init__(self, kernel, grid, block, shared_mem: int, args, bound):
        offsets, end = [], 0
        for i, a in enumerate(args):
            if not isinstance(a, np.generic):
                raise TypeError(f"argument {i} is a {type(a).__name__}, not a NumPy scalar or struct")
            offsets.append(end)
            end += -(-a.nbytes // 16) * 16
        self._buffer = np.zeros(max(end, 16), np.uint8)
        for a, at in zip(args, offsets):
            self._buffer[at:at + a.nbytes] = np.frombuffer(a.tobytes(), np.uint8)
        self._params = np.array([self._buffer.ctypes.data + at for at in offsets], np.uint64)
        self._writes = tuple(
            (self._buffer[offsets[i]:offsets[i] + 8].view(np.int64) if isinstance(args[i], np.void)
             else self._buffer[offsets[i]:offsets[i] + args[i].nbytes].view(args[i].dtype), key)
            for i, key in bound)
        self._kernel = kernel  # keeps the module, and so the function, loaded
        self._dims = (*_dim3(grid), *_dim3(block), int(shared_mem))
        self._lock = threading.Lock()
        from cupy.cuda import get_current_stream
        from cupy_backends.cuda.api.driver import launchKernel

        function = kernel.kernel  # a RawKernel's cupy.cuda.Function on the current device
        self._enqueue = functools.partial(launchKernel, function.ptr, *self._dims)
        self._stream = get_current_stream
        self._params_address = self._params.ctypes.data

    def __call__(self, values) -> None:
        with self._lock:
            for view, key in self._writes:
                view[0] = values[key]
            self._enqueue(self._stream().ptr, self._params_address, 0)


def _dim3(dims) -> tuple:
    """(x, y, z) of a CuPy-style grid or block (an int or a tuple of up to three)."""
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
