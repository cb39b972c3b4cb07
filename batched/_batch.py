"""Pointer-array and variable-size batches: lists of matrices and vectors.

``PointerBatch`` (same-shape matrices) and ``VariableBatch`` (each its own
shape) keep the device pointer array (and, for variable sizes, the device
arrays of rows, columns and leading dimensions), so repeated calls on the same
matrices pay for them once.  A plain list passed to a routine is turned into
one of these for that call.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import cached_property

import numpy as np

from . import _arrays as ar
from . import _launch as ln


# (event, objects): buffers that asynchronous GPU work still reads or writes (pinned
# staging of an upload, a multi-GPU call's partials), referenced until the event
# recorded after that work has fired; a pool could otherwise hand the memory out again.
_KEPT: list = []


def keep_until(event, *objects) -> None:
    """Keep ``objects`` alive until ``event`` has fired (checked at the next call)."""
    _KEPT[:] = [(e, o) for e, o in _KEPT if not e.done]
    _KEPT.append((event, objects))


def upload_int64(xp, values):
    """A device int64 array of ``values`` (addresses, shapes), copied from pinned
    memory on the current stream without blocking the host.  A pageable upload
    (``cupy.asarray``) may wait until the stream has reached it, so a call with
    new addresses stalled the host behind all the work queued before it (four
    H200s, multi-GPU DGEMV N 98304: 10 % slower, session 24)."""
    host = np.asarray(values, dtype=np.int64)
    if xp is np:
        return host.copy()
    import cupyx

    arr = xp.empty(host.shape, np.int64)
    if host.size:
        staged = cupyx.empty_pinned(host.shape, np.int64)
        staged[...] = host
        stream = xp.cuda.get_current_stream()
        rt = xp.cuda.runtime
        rt.memcpyAsync(arr.data.ptr, staged.ctypes.data, host.nbytes, rt.memcpyHostToDevice, stream.ptr)
        done = xp.cuda.Event(disable_timing=True)
        done.record(stream)
        keep_until(done, staged)
    return arr


def rows_vector(arr, inc: int) -> np.void:
    """PointerVector accessor over arr[0], arr[1], ... (no pointer array, no
    per-row work); arr's first stride must be whole elements."""
    return ln.strided_vector(arr.data.ptr, ar.elem_strides(arr)[0], inc)


# The last few pointer arrays uploaded, by (device, stream, contents).
_UPLOADED: OrderedDict = OrderedDict()
_UPLOADED_KEPT = 8


def device_pointers(xp, pointers):
    """The device int64 array of ``pointers`` (addresses; upload_int64).  Uploading
    one costs the GPU a host-to-device copy (H100: 10-15 us for 31,767 pointers,
    as long as a GEMV over 1 MB); a later call with the same addresses on the same
    stream (a list call repeated on the same vectors, or a result buffer the memory
    pool hands out again) reuses that upload.  The array is read-only, and
    same-stream order makes the upload complete before any kernel that reads it."""
    host = np.asarray(pointers, dtype=np.int64)
    device = xp.cuda.Device().id
    key = (device, xp.cuda.get_current_stream().ptr, host.size, hash(host.tobytes()))
    found = _UPLOADED.get(key)
    if found is not None and np.array_equal(found[0], host):
        _UPLOADED.move_to_end(key)
        return found[1]
    arr = upload_int64(xp, host)
    _UPLOADED[key] = (host, arr)
    while len(_UPLOADED) > _UPLOADED_KEPT:
        _UPLOADED.popitem(last=False)
    return arr


def members_vector(arrays, inc: int, xp):
    """(PointerVector accessor, device pointer array) over separate arrays; the
    pointer array must stay alive until the launch is queued."""
    ptrs = device_pointers(xp, [a.data.ptr for a in arrays])
    return ln.pack("PointerVector", ptrs.data.ptr, 0, inc), ptrs


class MatrixBatch:
    """Matrices of one dtype on one device, each read as a column-major view."""

    _require_same_shape = False

    def __init__(self, arrays, name: str = "A"):
        if isinstance(arrays, MatrixBatch):
            raise TypeError("already a batch")
        # A batch named "out" is written into: its members are kept as given (see as_array).
        members = [ar.as_array(a, f"{name}[{i}]", writable=name == "out")[0] for i, a in enumerate(arrays)]
        named = {f"{name}[{i}]": a for i, a in enumerate(members)}
        self.xp = ar.common_backend(named) if members else np
        for key, a in named.items():
            ar.check_dtype(a, key)
            if a.ndim != 2:
                raise ValueError(f"{key} must be a 2-D matrix, got shape {a.shape}")
        self.dtype = ar.result_dtype(named) if members else np.dtype(np.float64)
        self.shapes = [tuple(int(d) for d in a.shape) for a in members]
        if self._require_same_shape and len(set(self.shapes)) > 1:
            raise ValueError(f"{type(self).__name__} needs matrices of one shape; {name} has shapes "
                             f"{sorted(set(self.shapes))[:4]}; use VariableBatch for mixed shapes")
        self.name = name
        self.arrays_user = members
        self.same_dtype = all(a.dtype == self.dtype for a in members)
        self._prepare(members)

    @classmethod
    def from_list(cls, arrays, name: str = "A"):
        arrays = list(arrays)
        shapes = {getattr(a, "shape", None) for a in arrays}
        kind = PointerBatch if len(shapes) <= 1 else VariableBatch
        return kind(arrays, name)

    def _prepare(self, members):
        xp = self.xp

        def orientation(a, prefer):
            st = ar.elem_strides(a)
            return ar.matrix_orientation(a.shape, st, prefer) if st is not None else None

        # Matrices with one row or column fit either orientation: only the others vote.
        votes = [orientation(a, "F")[0] for a in members
                 if orientation(a, "F") is not None and orientation(a, "F") == orientation(a, "C")]
        order = "C" if votes.count("C") > votes.count("F") else "F"
        kept, lds = [], []
        for a in members:
            o = orientation(a, order)
            if o is None or o[0] != order:
                a = ar.aligned(a)  # a misaligned "out" member: CuPy's copy would fault on it
                a = xp.ascontiguousarray(a) if order == "C" else xp.asfortranarray(a)
                o = orientation(a, order)
            kept.append(a)
            lds.append(o[1])
        self.arrays = kept
        self.transposed = order == "C"
        self.view_shapes = [(n, m) if self.transposed else (m, n) for m, n in self.shapes]
        self.lds = lds
        uniform = len(set(self.view_shapes)) <= 1 and len(set(lds)) <= 1
        self.layout = "pointer" if uniform else "variable"
        self._struct = None

    @property
    def count(self) -> int:
        return len(self.arrays)

    @cached_property
    def view_dims_max(self):
        if not self.view_shapes:
            return 0, 0
        return max(r for r, _ in self.view_shapes), max(c for _, c in self.view_shapes)

    @cached_property
    def view_dims_typical(self):
        """(rows, cols) of the column-major views, each the rounded mean over the
        members (the shape a variable-size batch's setting is chosen for)."""
        if not self.view_shapes:
            return 0, 0
        mean = np.asarray(self.view_shapes, dtype=np.float64).mean(axis=0)
        return max(1, int(round(mean[0]))), max(1, int(round(mean[1])))

    @cached_property
    def shape_array(self) -> np.ndarray:
        """(count, 2) int64: the members' shapes as given."""
        return np.array(self.shapes, dtype=np.int64).reshape(-1, 2)

    def memo(self, key, compute):
        """``compute()`` once per batch object and ``key``: per-member facts a
        routine derives (lengths, buffer sizes) cost nothing on repeated calls."""
        cached = self.__dict__.setdefault("_memo", {})
        if key not in cached:
            cached[key] = compute()
        return cached[key]

    def op_lengths(self, op: str):
        """(rows, inner) of op(A) per member, each an int when every member
        has the same, else an int64 array."""
        def compute():
            shapes = self.shape_array[:, ::-1] if op != "N" else self.shape_array
            return tuple(same_or_array(shapes[:, k]) for k in (0, 1))
        return self.memo(("op_lengths", op), compute)

    def astype(self, dtype):
        if np.dtype(dtype) == self.dtype and self.same_dtype:
            return self
        # a new array each (the callers factor in place); widening casts exact (ar.astype_exact)
        return type(self)([ar.astype_exact(a, dtype, self.xp, copy=True) for a in self.arrays_user], self.name)

    def struct(self, layout=None):
        """The accessor struct for ``layout`` (default: this batch's own); built
        once, so the pointer arrays stay on the device for repeated calls."""
        layout = layout or self.layout
        if self._struct is None or self._struct[0] != layout:
            xp = self.xp
            ptrs = upload_int64(xp, [a.data.ptr for a in self.arrays])
            if layout == "pointer":
                rows, cols = self.view_shapes[0] if self.view_shapes else (0, 0)
                ld = self.lds[0] if self.lds else 1
                self._keep = (ptrs,)
                self._struct = layout, ln.pack("PointerMatrix", ptrs.data.ptr, 0, ld, rows, cols)
            else:
                m = upload_int64(xp, [r for r, _ in self.view_shapes])
                n = upload_int64(xp, [c for _, c in self.view_shapes])
                ld = upload_int64(xp, self.lds)
                self._keep = (ptrs, m, n, ld)
                self._struct = layout, ln.pack("VariableMatrix", ptrs.data.ptr, m.data.ptr, n.data.ptr,
                                               ld.data.ptr)
        return self._struct[1]


class PointerBatch(MatrixBatch):
    """Same-shape matrices (any addresses) behind one device pointer array.

    Parameters
    ----------
    arrays : sequence of 2-D arrays of one shape (CuPy or NumPy)
    """

    _require_same_shape = True


class VariableBatch(MatrixBatch):
    """Matrices of different shapes: device arrays of pointers, rows, columns, ld.

    Parameters
    ----------
    arrays : sequence of 2-D arrays (CuPy or NumPy)
    """


class VectorList:
    """Vectors of a list batch behind one device pointer array with one increment.

    Made from a list of 1-D arrays, or from the rows of one 2-D array (count, k)
    (``rows_of``, see ``of_rows``): then no per-vector Python work is done, the
    device pointer array is computed on the device at launch, and the row views
    in ``arrays`` are made only when asked for.
    """

    def __init__(self, arrays, xp, dtype, rows_of=None):
        self._arrays = arrays          # None while only rows_of is known
        self.rows_of = rows_of
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self._struct = None
        if rows_of is not None:
            row_stride, inc = ar.elem_strides(rows_of)
            self.count = rows_of.shape[0]
            self.inc = inc if rows_of.shape[1] > 1 else 1
            self.direct = self.inc != 0 and (row_stride != 0 or self.count <= 1)
            return
        self.count = len(arrays)
        incs, unreadable = set(), False
        for v in arrays:
            st = ar.elem_strides(v)
            unreadable |= st is None  # not in place (a misaligned "out" member): copied, or written back by assign
            incs.add(st[0] if (st is not None and v.shape[0] > 1) else None)
        incs.discard(None)
        self.inc = None if unreadable else incs.pop() if len(incs) == 1 else (1 if not incs else None)
        self.direct = self.inc is not None and self.inc != 0

    @classmethod
    def of_rows(cls, arr, xp):
        """The rows of a 2-D array (a list of row views when its strides are not
        whole elements: then each row is handled like a list member)."""
        if ar.elem_strides(arr) is None:
            return cls([arr[i] for i in range(arr.shape[0])], xp, arr.dtype)
        return cls(None, xp, arr.dtype, rows_of=arr)

    @property
    def arrays(self):
        if self._arrays is None:
            self._arrays = [self.rows_of[i] for i in range(self.count)]
        return self._arrays

    def pieces(self):
        """Arrays that cover the vectors' memory, for overlap checks: the 2-D array, or the list."""
        return [self.rows_of] if self.rows_of is not None else self.arrays

    def astype(self, dtype):
        if self.rows_of is not None:
            if self.rows_of.dtype == np.dtype(dtype):
                return self
            return VectorList.of_rows(ar.astype_exact(self.rows_of, dtype, self.xp), self.xp)
        if self.inc is not None and all(v.dtype == np.dtype(dtype) for v in self.arrays):
            return self
        return VectorList([self.xp.ascontiguousarray(ar.astype_exact(v, dtype, self.xp)) for v in self.arrays],
                          self.xp, dtype)

    def struct(self):
        """The PointerVector accessor: strided over the rows of one array, or
        over a pointer array (built once; it stays alive with the accessor)."""
        if self._struct is None:
            if self.inc is None:
                raise AssertionError("mixed increments: call astype() first")
            if self.rows_of is not None:
                self._struct = rows_vector(self.rows_of, self.inc)
            else:
                self._struct, self._ptrs = members_vector(self.arrays, self.inc, self.xp)
        return self._struct


def same_or_array(values: np.ndarray):
    """An int when every entry of ``values`` is the same, else the int64 array."""
    if values.size and (values == values[0]).all():
        return int(values[0])
    return values.astype(np.int64, copy=False)


def length_of(lengths, i: int) -> int:
    """Member i of ``lengths``: one int for every member, or a sequence."""
    return lengths if isinstance(lengths, int) else int(lengths[i])


def allocate_vectors(lengths, dtype, xp, count: int | None = None) -> VectorList:
    """New vectors for the result of a list call: the rows of a (count, k) array
    when all lengths are equal (``lengths`` one int, with ``count``), else
    slices of one buffer."""
    dtype = np.dtype(dtype)
    if isinstance(lengths, int):
        return VectorList.of_rows(xp.empty((count, lengths), dtype), xp)
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    flat = xp.empty(int(offsets[-1]), dtype)
    return VectorList([flat[int(offsets[i]):int(offsets[i + 1])] for i in range(len(lengths))], xp, dtype)


def vector_list(obj, batch: MatrixBatch, name: str, lengths, exact_dtype=None) -> VectorList:
    """The vectors of a list call: a list of 1-D arrays, an array (count, k), or one 1-D array."""
    xp, count = batch.xp, batch.count
    if isinstance(obj, (list, tuple)):
        if len(obj) != count:
            raise ValueError(f"{name} has {len(obj)} vectors but {batch.name} has {count} matrices")
        vectors = [ar.as_array(v, f"{name}[{i}]", writable=name == "out")[0] for i, v in enumerate(obj)]
    else:
        arr = ar.as_array(obj, name, writable=name == "out")[0]
        if arr.ndim == 1:
            vectors = [arr] * count
        elif arr.ndim == 2 and arr.shape[0] == count:
            return _rows_vector_list(arr, batch, name, lengths, exact_dtype)
        else:
            raise ValueError(f"{name} must be a list of {count} vectors, an array ({count}, k) or "
                             f"one 1-D array; got shape {arr.shape}")
    named = {f"{name}[{i}]": v for i, v in enumerate(vectors)}
    if count:
        if ar.common_backend({batch.name: batch.arrays_user[0], **named}) is not xp:
            raise ValueError(f"{name} must be on the same device as {batch.name}")
    for i, v in enumerate(vectors):
        length = length_of(lengths, i)
        if v.ndim != 1 or v.shape[0] != length:
            raise ValueError(f"{name}[{i}] has shape {v.shape}, expected ({length},) for "
                             f"{batch.name}[{i}] of shape {batch.shapes[i]}")
        ar.check_dtype(v, f"{name}[{i}]")
        if exact_dtype is not None and v.dtype != exact_dtype:
            raise TypeError(f"{name}[{i}] has dtype {v.dtype}, expected {np.dtype(exact_dtype)}")
    dtype = ar.result_dtype(named) if vectors else batch.dtype
    return VectorList(vectors, xp, dtype)


def _rows_vector_list(arr, batch: MatrixBatch, name: str, lengths, exact_dtype) -> VectorList:
    """An array (count, k) as a vector list: checked once as a whole, not per row."""
    if batch.count and ar.common_backend({batch.name: batch.arrays_user[0], name: arr}) is not batch.xp:
        raise ValueError(f"{name} must be on the same device as {batch.name}")
    ar.check_dtype(arr, name)
    if exact_dtype is not None and arr.dtype != exact_dtype:
        raise TypeError(f"{name} has dtype {arr.dtype}, expected {np.dtype(exact_dtype)}")
    if isinstance(lengths, int):
        wrong = [0] if batch.count and lengths != arr.shape[1] else []
    else:
        wrong = np.flatnonzero(np.asarray(lengths) != arr.shape[1])
    if len(wrong):
        i = int(wrong[0])
        raise ValueError(f"{name}[{i}] has shape ({arr.shape[1]},), expected ({length_of(lengths, i)},) for "
                         f"{batch.name}[{i}] of shape {batch.shapes[i]}")
    return VectorList.of_rows(arr, batch.xp)
