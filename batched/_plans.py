"""Launch plans: a repeated uniform call skips validation and planning.

Validating and planning a call (dtypes, broadcasting, strides, orientation,
setting, grid, accessor structs) costs far more host time than launching the
kernel.  All of it depends only on the operands' shapes, strides, dtypes,
device and alignment (address modulo 128), the letters, the setting and
whether alpha and beta are zero.  So after a successful call on plain CuPy
arrays, the launch is kept under that signature; a later call with the same
signature launches the same kernel with the same grid and arguments, replacing
only the operand pointers and the scalars.  Whether a scalar is zero decides the launch flags (y unread when
beta == 0, A and x unread when alpha == 0), and it is decided on the scalar
converted to the operands' precision: 1e-50 is not zero but float32(1e-50)
is.  So the signature holds the zero tests of the Python values and the plan
those of the converted values it was made with; a call whose converted scalars
test otherwise takes the full path (and keeps its own plan).

A call is kept only when every pointer the kernel reads or writes is the data
pointer of one of the call's own arrays (no temporary copy, no private
result), so a replay can never point at memory of an earlier call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _arrays as ar
from ._launch import PackedLaunch
from ._operands import overlaps

_MAX_PLANS = 512
_plans: dict = {}

_SCALAR_TYPES = (int, float, complex)


def signature(arrays, extra):
    """The plan key of a call, or None when a plan cannot apply (an operand that
    is not a plain CuPy array, or scalars and letters that are not plain values).
    Each array's address modulo 128 is part of it: GEMV's tall tiles count a
    matrix's row tiles from its 128-byte row origin, so a plan made on aligned
    matrices launches one tile too few for a view one element further on."""
    cp = ar.cupy_or_none()
    if cp is None:
        return None
    sig = [extra]
    for a in arrays:
        if a is None:
            sig.append(None)
        elif type(a) is cp.ndarray:
            sig.append((a.shape, a.strides, a.dtype.char, a.data.device_id, a.data.ptr % 128))
        else:
            return None
    sig.append(cp.cuda.runtime.getDevice())
    return tuple(sig)


def scalars_key(alpha, beta):
    """(type, is zero) of both scalars, or None for anything but a Python number."""
    if type(alpha) not in _SCALAR_TYPES or type(beta) not in _SCALAR_TYPES:
        return None
    return type(alpha), alpha == 0, type(beta), beta == 0


def plan_key(tag, inputs, added, out, alpha, beta):
    """The key a call ``alpha * inputs[0] @ inputs[1] + beta * added`` tagged ``tag``
    (routine, letters, setting) is kept under, or None when no plan can apply."""
    kinds = scalars_key(alpha, beta)
    return signature((*inputs, added, out), (tag, kinds)) if kinds else None


def try_replay(tag, inputs, added, out, alpha, beta):
    """(key, result) of a call ``alpha * inputs[0] @ inputs[1] + beta * added``
    tagged ``tag`` (routine, letters, setting): ``result`` is the output of a
    replayed plan, or None, and then the caller takes the full path and may
    ``record`` its launch under ``key`` (None when no plan can apply)."""
    key = plan_key(tag, inputs, added, out, alpha, beta)
    plan = _plans.get(key) if key is not None else None
    return key, (replay(plan, inputs, added, out, alpha, beta) if plan is not None else None)


def replay_scalars(dtype, zeros, alpha, beta):
    """alpha, beta (Python numbers: ``scalars_key``) converted to ``dtype``; None when
    either needs the full check (not finite, or complex with a real dtype) or is zero
    where the recorded one was not, or the other way round (``zeros``: the recorded
    call's; the launch flags differ): the caller then takes the full path."""
    if type(alpha) is complex or type(beta) is complex:
        if dtype.kind != "c" or not all(map(math.isfinite, (alpha.real, alpha.imag, beta.real, beta.imag))):
            return None
    elif not (math.isfinite(alpha) and math.isfinite(beta)):
        return None
    convert = dtype.type
    a, b = convert(alpha), convert(beta)
    # ``not``: a NumPy scalar's == 0 costs a ufunc call (1 us a test on the host)
    if (not a, not b) != zeros:
        return None
    return a, b


@dataclass
class Plan:
    launch: PackedLaunch  # its values: the operands' addresses in signature order, then alpha, beta
    shape: tuple          # of a new result
    dtype: np.dtype
    zeros: tuple          # (alpha == 0, beta == 0) of the recorded call's converted scalars

    def scalars(self, alpha, beta):
        return replay_scalars(self.dtype, self.zeros, alpha, beta)


def record(key, kernel, grid, block, shared_mem, args, operands, scalar_slots, shape, dtype) -> None:
    """Keep a launch under ``key`` when every accessor pointer is one operand's data pointer.
    ``operands`` are the arrays as the caller gave them (and the result): an input read
    through a copy (a misaligned one, see ``_arrays.as_array``) has its copy's pointer in
    the launch, not its own, so such a call is not kept."""
    if key is None:
        return
    pointers = {}
    for i, a in enumerate(operands):
        if a is not None and a.size:
            if a.data.ptr in pointers:  # two operands at one address: the roles would be ambiguous
                return
            pointers[a.data.ptr] = i
    bound = [(scalar_slots[0], len(operands)), (scalar_slots[1], len(operands) + 1)]
    for index, arg in enumerate(args):
        if isinstance(arg, np.void):
            base = int(arg[0])
            if base in pointers:
                bound.append((index, pointers[base]))
            elif base != 0:
                return  # a temporary copy: not reproducible
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    zeros = tuple(bool(args[i] == 0) for i in scalar_slots)
    _plans[key] = Plan(PackedLaunch(kernel, grid, block, shared_mem, args, bound), tuple(shape),
                       np.dtype(dtype), zeros)


def replay(plan, inputs, added, out, alpha, beta):
    """Launch a kept plan for ``alpha * inputs[0] @ inputs[1] + beta * added``;
    None sends the call down the full path (scalars that need checking, or an
    ``out`` that overlaps the operands and so needs a private result)."""
    scalars = plan.scalars(alpha, beta)
    if scalars is None:
        return None
    target = replay_target(out, inputs, added, beta != 0, plan.shape, plan.dtype)
    if target is not None:
        plan.launch((*(a.data.ptr if a is not None else 0 for a in (*inputs, added, target)), *scalars))
    return target


def replay_target(out, inputs, added, reads_added: bool, shape, dtype):
    """The array a replay writes: ``out``, or a new (shape, dtype) one when it is None;
    None when ``out`` overlaps the ``inputs``, or ``added`` where that is read
    (``reads_added``) and ``out`` is not ``added`` itself: such a call needs a private
    result, which only the full path makes."""
    import cupy

    if out is not None and (overlaps(cupy, out, inputs) or (
            added is not None and reads_added and out is not added and overlaps(cupy, out, (added,)))):
        return None
    return out if out is not None else cupy.empty(shape, dtype)


def clear() -> None:
    _plans.clear()
