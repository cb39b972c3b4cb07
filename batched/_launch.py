"""Kernel arguments: accessor structs packed as NumPy structured scalars.

Each accessor of ``device_functions/layouts.cuh`` is a struct of 8-byte fields;
CuPy passes a NumPy structured scalar by value with the same bytes, so the
host fills the struct field by field here.
"""

from __future__ import annotations

import numpy as np

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
