"""Batches on Dask: every batched routine on a ``dask.array.Array`` chunked along its batch axes.

The batch axis is the natural unit of distribution (DESIGN.md, "Beyond one
GPU"): a stack ``(..., m, n)`` chunked along ``...`` is a set of independent
smaller stacks, and each chunk is one call of the ordinary routine.  Dask
schedules the chunks (its local schedulers, a dask-cuda ``LocalCUDACluster``
with one worker per GPU, or any ``distributed`` cluster); nothing here
schedules work.  A NumPy chunk runs on the CPU backend, a CuPy chunk on the GPU
of the worker that holds it: the chunk's own type decides, as for a plain call.

How a call becomes a graph (:func:`dask_call`):

1. The routine's :class:`Spec` names its batched operands and their core
   ndim (2 for a matrix, 1 for a vector, 0 for a per-matrix scalar such as
   ``scal``'s ``alpha``; right-hand sides follow the library's rule against
   their matrix).  Everything else (scalars, flags, settings) passes through.
2. The core axes of a Dask operand must be one chunk each, or a ValueError
   says which ``.rechunk`` to apply.  Batch dimensions broadcast as in the
   plain call; ``dask.array.core.unify_chunks`` aligns the chunks, and a
   non-Dask array operand becomes a one-chunk Dask array broadcast (or split)
   to match.
3. A probe call of the plain routine on NumPy zeros with a zero batch checks
   the arguments at once (the same TypeError/ValueError as a plain call) and
   gives every output's core shape and dtype, and which outputs are not
   arrays (``cho_factor``'s ``lower``): those come back as
   the probe returned them.
4. One ``blockwise`` task per output chunk runs the routine on the chunk and
   returns the tuple of its array outputs; each output is a ``blockwise``
   ``getitem`` view of that tuple (plus its whole core axes).  A routine with
   one array output (``solve``, ``svdvals``) skips the tuple: the chunk's task
   is the output's block, one task per chunk instead of two.  A chunk is
   therefore computed once for all outputs computed together
   (``dask.compute(U, S, Vh)``); ``U.compute()`` then ``S.compute()`` run it twice,
   as for any Dask graph.  (The alternative, one graph per output, would
   factor every chunk once per output.)
5. ``check=True`` (the NumPy/SciPy names): the chunk runs with
   ``check=False``; its info is checked in the task, and a LinAlgError names the
   GLOBAL batch indices of the failing matrices (the task also receives the
   chunk's ``range`` of global indices along every batch axis).  It is raised when the
   result is computed, for the first failing chunk Dask meets (other chunks may
   fail too).  ``check=False`` returns ``info`` as a Dask array of the global
   batch shape.  ``lu_factor`` warns (``LinAlgWarning``) in the task instead,
   as SciPy does.

Dask and ``distributed`` are an optional extra (``pip install "batched[dask]"``);
this module imports ``dask`` only when an argument is a Dask array, so
``import batched`` and every non-Dask call work without it.  For one worker per
GPU install ``dask-cuda`` too and start ``dask_cuda.LocalCUDACluster()``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Rhs:
    """Right-hand sides of the matrix ``of`` (a parameter name, or (name, index)
    inside a tuple parameter): a vector (core ndim 1) when 1-D or shaped like
    ``of.shape[:-1]``, else a k-column matrix (core ndim 2).  DESIGN.md's rule."""

    of: str | tuple


@dataclass(frozen=True)
class Spec:
    """How one routine maps onto Dask chunks.

    operands: ``(parameter, core)`` pairs; ``core`` is an int (the core ndim),
        a :class:`Rhs`, or, for a tuple parameter such as ``lu_and_piv``, a
        tuple of those with None for members that pass through.
    failure: ``"module:NAME"`` of the routine's ``_solvers.Failure`` that
        ``check=True`` reports (None: nothing to report).
    warn: ``check=True`` warns with ``LinAlgWarning`` instead of raising.
    """

    operands: tuple
    failure: str | None = None
    warn: bool = False


def _spec(failure=None, warn=False, **operands) -> Spec:
    return Spec(tuple(operands.items()), failure, warn)


_LU = "batched.factorizations.lu:LU_SINGULAR"
_CHOL = "batched.factorizations.cholesky:NOT_POSITIVE_DEFINITE"

#: Every exported batched routine (see batched/__init__.py) and its spec.
SPECS: dict[str, Spec] = {
    "gemv": _spec(A=2, x=1, y=1),
    "gemm": _spec(A=2, B=2, C=2),
    "trsv": _spec(A=2, x=Rhs("A")),
    "solve_triangular": _spec(A=2, B=Rhs("A"), failure="batched.factorizations._solvers:SINGULAR"),
    "nrm2": _spec(x=1),
    "asum": _spec(x=1),
    "iamax": _spec(x=1),
    "dot": _spec(x=1, y=1),
    "dotc": _spec(x=1, y=1),
    "scal": _spec(alpha=0, x=1),
    "axpy": _spec(alpha=0, x=1, y=1),
    "solve": _spec(A=2, b=Rhs("A"), failure=_LU),
    "inv": _spec(A=2, failure=_LU),
    "getrf": _spec(A=2),
    "getrs": _spec(lu=2, ipiv=1, B=Rhs("lu")),
    "gesv": _spec(A=2, B=Rhs("A")),
    "lu_factor": _spec(A=2, failure=_LU, warn=True),
    "lu_solve": _spec(lu_and_piv=(2, 1), b=Rhs(("lu_and_piv", 0))),
    "cholesky": _spec(A=2, failure=_CHOL),
    "cho_factor": _spec(a=2, failure=_CHOL),
    "cho_solve": _spec(c_and_lower=(2, None), b=Rhs(("c_and_lower", 0))),
    "potrf": _spec(A=2),
    "potrs": _spec(c=2, B=Rhs("c")),
    "posv": _spec(A=2, B=Rhs("A")),
    "qr": _spec(A=2),
    "geqrf": _spec(A=2),
    "orgqr": _spec(qr=2, tau=1),
    "gels": _spec(A=2, B=Rhs("A")),
    "lstsq": _spec(a=2, b=Rhs("a"), failure="batched.factorizations.qr:LSTSQ_NOT_CONVERGED"),
    "gebrd": _spec(A=2),
    "orgbr": _spec(a=2, tau=1),
    "bdsqr": _spec(d=1, e=1, u=2, vt=2),
    "svdvals": _spec(A=2, failure="batched.factorizations.svd:NOT_CONVERGED"),
    "svd": _spec(A=2, failure="batched.factorizations.svd:NOT_CONVERGED"),
}

_DOC_NOTE = """
    Dask
    ----
    A ``dask.array.Array`` chunked along the batch axes only (matrix axes
    whole) gives Dask arrays back, lazily, one task per chunk; NumPy chunks
    run on the CPU backend and CuPy chunks on the GPU.  ``check=True`` errors
    name global batch indices and are raised at compute time; ``out=`` and
    ``overwrite_*`` are not used with Dask.  Compute several outputs together
    (``dask.compute(*outputs)``) so that each chunk runs once.
"""


def _is_dask(value) -> bool:
    return type(value).__module__.startswith("dask")


# Types seen not to be Dask's nor a tuple or list: one set lookup an argument after that.
_PLAIN_TYPES: set = set()


def _has_dask(args, kwargs) -> bool:
    """The one check a non-Dask call pays: is any argument (or the first members of
    a tuple/list argument, e.g. ``lu_and_piv``) from a ``dask`` module?  Imports nothing."""
    for v in (*args, *kwargs.values()):
        t = type(v)
        if t in _PLAIN_TYPES:
            continue
        if t.__module__.startswith("dask"):
            return True
        if t is tuple or t is list:
            if v and any(type(m).__module__.startswith("dask") for m in v[:2]):
                return True
        elif len(_PLAIN_TYPES) < 256:
            _PLAIN_TYPES.add(t)
    return False


def dask_aware(fn, spec):
    """``fn`` unchanged for non-Dask arguments; with a Dask array argument, the
    chunked call of :func:`dask_call`.  ``spec``: a :class:`Spec` or a name in SPECS."""
    if isinstance(spec, str):
        spec = SPECS[spec]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _has_dask(args, kwargs):
            return dask_call(fn, spec, args, kwargs)
        return fn(*args, **kwargs)

    wrapper.__doc__ = (fn.__doc__ or "").rstrip() + "\n" + _DOC_NOTE
    wrapper.dask_spec = spec
    return wrapper


@dataclass
class _Operand:
    label: str        # the parameter's name as the user wrote it: "A", "lu_and_piv[0]"
    place: tuple      # (parameter, None) or (parameter, member index)
    value: object
    core: int
    batch: tuple


def _get(arguments, ref):
    if isinstance(ref, tuple):
        return arguments[ref[0]][ref[1]]
    return arguments[ref]


def _operands(spec: Spec, arguments: dict) -> list[_Operand]:
    """The batched array operands of one call, validated for Dask (matrix axes whole)."""
    found = []
    for param, core in spec.operands:
        value = arguments[param]
        if isinstance(core, tuple):
            if not isinstance(value, (tuple, list)) or len(value) != len(core):
                raise TypeError(f"{param} must be a tuple of {len(core)} members")
            for j, c in enumerate(core):
                if c is not None:
                    found.append((f"{param}[{j}]", (param, j), value[j], c))
        else:
            found.append((param, (param, None), value, core))
    operands = []
    for label, place, value, core in found:
        if isinstance(value, (list, tuple)):
            raise TypeError(f"{label} is a list: lists of matrices are not Dask inputs; stack them into one "
                            "array of shape (..., m, n) (dask.array.stack) and chunk its batch axes")
        if value is None or not hasattr(value, "shape"):
            continue  # a scalar or None passes through (scal's alpha, gemv's y)
        if _is_dask(value) and not hasattr(value, "chunks"):
            raise TypeError(f"{label} is a {type(value).__name__}: only dask.array.Array is accepted")
        if isinstance(core, Rhs):
            matrix = _get(arguments, core.of)
            vectors = value.ndim == 1 or tuple(value.shape) == tuple(getattr(matrix, "shape", ())[:-1])
            core = 1 if vectors else 2
        shape = tuple(value.shape)
        if any(isinstance(s, float) and np.isnan(s) for s in shape):
            raise ValueError(f"{label} has unknown chunk sizes (shape {shape}): call "
                             f"{label}.compute_chunk_sizes() first")
        if len(shape) < core:
            raise ValueError(f"{label} must have at least {core} dimensions, got shape {shape}")
        nb = len(shape) - core
        if _is_dask(value):
            axes = tuple(range(nb, len(shape)))
            split = [a for a in axes if len(value.chunks[a]) > 1]
            if split:
                spec_txt = ", ".join(f"{a}: -1" for a in axes)
                raise ValueError(
                    f"{label} is chunked along its matrix axes {axes} (chunks {value.chunks}): matrix "
                    f"axes must be whole, only the batch axes may be chunked; use "
                    f"{label}.rechunk({{{spec_txt}}})")
        operands.append(_Operand(label, place, value, core, shape[:nb]))
    return operands


def _probe(fn, arguments, operands, batch):
    """The plain routine on NumPy zeros with a zero (or size-1) batch: validates the
    call and gives each output's core shape and dtype."""
    pshape = tuple(1 if g == 1 else 0 for g in batch)
    kw = _with_blocks(arguments, operands, [
        np.zeros(tuple(1 if b == 1 else pshape[len(pshape) - len(op.batch) + i] for i, b in enumerate(op.batch))
                 + tuple(op.value.shape[len(op.batch):]), dtype=np.dtype(op.value.dtype))
        for op in operands])
    for key in ("setting", "gebrd_setting"):
        if key in kw:
            kw[key] = None  # GPU settings do not change shapes or dtypes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(**kw), pshape


def _with_blocks(arguments, operands, blocks) -> dict:
    kw = dict(arguments)
    for op, blk in zip(operands, blocks):
        param, j = op.place
        if j is None:
            kw[param] = blk
        else:
            members = list(kw[param])
            members[j] = blk
            kw[param] = tuple(members)
    return kw


def _failure_message(info, index, failure) -> str:
    """raise_if_failed's wording, with the global batch indices ``index[d][i]``."""
    bad = np.argwhere(info > 0)
    cols = [int(info[tuple(i)]) for i in bad]
    if info.ndim == 0:
        return f"{failure.what}: {failure.cause} ({failure.info} {cols[0]})"
    if info.ndim == 1:
        where = [int(index[0][i[0]]) for i in bad]
    else:
        where = [tuple(int(index[d][i[d]]) for d in range(info.ndim)) for i in bad]
    return f"{failure.what}: batch indices {where} have {failure.cause} ({failure.info} per index: {cols})"


def _resolve(ref: str):
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


class _ChunkCall:
    """The task of one chunk: the plain routine on the chunk's blocks (then the
    global-index check for ``check=True``); returns the tuple of array outputs.
    Picklable (module-level routine, plain data) for distributed workers."""

    def __init__(self, fn, arguments, operands, keep, check, failure, warn, bare=False):
        self.fn = fn
        self.bare = bare  # return the one kept output itself, not a tuple of it
        self.arguments = {k: v for k, v in arguments.items()}
        for op in operands:  # the chunk's blocks replace these; do not ship whole arrays
            param, j = op.place
            if j is None:
                self.arguments[param] = None
            else:
                self.arguments[param] = tuple(None if i == j else m
                                              for i, m in enumerate(self.arguments[param]))
        self.places = [(_Operand(op.label, op.place, None, op.core, ())) for op in operands]
        self.keep = keep
        self.check = check
        self.failure = failure
        self.warn = warn

    def __call__(self, *blocks):
        n = len(self.places)
        # blockwise passes an operand's whole core axes as nested one-block lists
        # (concatenate=False: concatenating one block would copy it)
        blocks = [_unwrap(b) for b in blocks]
        result = self.fn(**_with_blocks(self.arguments, self.places, blocks[:n]))
        outs = list(result) if isinstance(result, tuple) else [result]
        if self.check:
            info = outs.pop()
            # One flag from the device unless a matrix failed (then the whole info
            # comes to the host for the message).
            if self.failure is not None and _solvers().any_failed(info):
                host = _solvers().host_info(info)
                failure = _resolve(self.failure)
                message = _failure_message(host, blocks[n:], failure)
                if not self.warn:
                    raise np.linalg.LinAlgError(message)
                from scipy.linalg import LinAlgWarning

                warnings.warn(message, LinAlgWarning, stacklevel=2)
        if self.bare:
            return outs[self.keep[0]]
        return tuple(outs[k] for k in self.keep)


def _solvers():
    """factorizations._solvers (not at import: _dask is imported first)."""
    from .factorizations import _solvers

    return _solvers


def _unwrap(block):
    while isinstance(block, list):
        block = block[0]
    return block


def _index_ranges(chunks, name):
    """A 1-D Dask array of the global indices along one batch axis whose blocks
    are ``range`` objects, not arrays: a chunk's indices are needed only to name
    a failure, and a ``da.arange`` chunk (8 bytes an index: 13 MB for a chunk of
    1.6 million 8 x 8 systems) cost every task its allocation, or its transfer
    from another worker."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    starts = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
    blocks = {(name, i): range(int(starts[i]), int(starts[i + 1])) for i in range(len(chunks))}
    graph = HighLevelGraph.from_collections(name, blocks, dependencies=())
    return da.Array(graph, name, (tuple(chunks),), meta=np.empty(0, np.int64))


def _meta(like, ndim, dtype):
    """An empty array of ``like``'s type (NumPy or CuPy) for a Dask output."""
    try:
        return np.empty_like(like, shape=(0,) * ndim, dtype=dtype)  # CuPy through __array_function__
    except TypeError:
        from dask.array.utils import meta_from_array

        return meta_from_array(like, ndim=ndim, dtype=dtype)


def _pick(outputs, k):
    return outputs[k]


def _output_axes(out, nb: int, first: int, base_meta):
    """(blockwise index, new_axes, meta) of an output shaped like the probe's ``out``:
    batch axes 0 .. nb-1, core axes (whole, new to blockwise) numbered from ``first``."""
    core = out.shape[nb:]
    core_index = tuple(range(first, first + len(core)))
    return tuple(range(nb)) + core_index, dict(zip(core_index, core)), _meta(base_meta, nb + len(core), out.dtype)


def dask_call(fn, spec: Spec, args, kwargs):
    """``fn(*args, **kwargs)`` with Dask array operands: lazy Dask outputs, one task per chunk."""
    import dask.array as da
    from dask.array.core import unify_chunks
    from dask.base import tokenize

    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    name = getattr(fn, "__name__", "batched")
    if arguments.get("out") is not None:
        raise TypeError(f"{name}: out= is not supported with Dask arrays (the result is a new Dask array)")
    for key in ("overwrite_a", "overwrite_b"):
        if key in arguments:
            arguments[key] = False  # Dask chunks may be shared by other tasks: never write them
    check = bool(arguments.get("check", False))
    if "check" in arguments:
        arguments["check"] = False  # chunks return info; checked below with global indices

    operands = _operands(spec, arguments)
    try:
        batch = np.broadcast_shapes(*(op.batch for op in operands))
    except ValueError:
        shapes = ", ".join(f"{op.label} {tuple(op.value.shape)}" for op in operands)
        raise ValueError(f"{name}: batch dimensions do not broadcast: {shapes}") from None
    nb = len(batch)
    result, _ = _probe(fn, arguments, operands, batch)
    outs = list(result) if isinstance(result, tuple) else [result]
    single = not isinstance(result, tuple)
    if check:
        outs.pop()  # info
        single = len(outs) == 1
    is_array = [isinstance(o, np.ndarray) for o in outs]
    keep = [i for i, a in enumerate(is_array) if a]

    # blockwise indices: batch axis d of the result is d (right-aligned as in
    # numpy.matmul); core axes get indices of their own, whole (one chunk).
    pairs, next_index = [], nb
    for op in operands:
        k, ncore = len(op.batch), len(op.value.shape) - len(op.batch)
        pairs += [op.value, tuple(range(nb - k, nb)) + tuple(range(next_index, next_index + ncore))]
        next_index += ncore
    chunkss, arrays = unify_chunks(*pairs)
    pairs[0::2] = arrays
    needs_index = check and spec.failure is not None and nb > 0
    if needs_index:  # each task receives its chunk's global indices along every batch axis
        for d in range(nb):
            pairs += [_index_ranges(chunkss[d], f"{name}-index{d}-{tokenize(chunkss[d])}"), (d,)]
    base_meta = next(a._meta for op, a in zip(operands, arrays) if _is_dask(op.value))

    bare = single and keep == [0]
    call = _ChunkCall(fn, arguments, operands, keep, check, spec.failure, spec.warn, bare)
    token = tokenize(getattr(fn, "__module__", ""), name, *pairs,
                     sorted((k, repr(v)) for k, v in call.arguments.items()))
    if bare:  # one array out: the chunk's task is the output's block (no getitem task per chunk)
        index, new_axes, meta = _output_axes(outs[0], nb, next_index, base_meta)  # past the operands' core indices
        return da.blockwise(call, index, *pairs, concatenate=False, new_axes=new_axes, name=f"{name}-{token}",
                            meta=meta)
    tasks = da.blockwise(call, tuple(range(nb)), *pairs, concatenate=False, name=f"{name}-chunk-{token}",
                         meta=np.empty((0,) * nb, dtype=object))

    final, k = [], 0
    for out, arr in zip(outs, is_array):
        if not arr:
            final.append(out)
            continue
        index, new_axes, meta = _output_axes(out, nb, nb, base_meta)
        final.append(da.blockwise(_pick, index, tasks, tuple(range(nb)), k, None, new_axes=new_axes,
                                  name=f"{name}-{k}-{token}", meta=meta))
        k += 1
    if single:
        return final[0]
    if hasattr(result, "_fields"):  # QRResult
        return type(result)._make(final)
    return tuple(final)
