"""One large matrix over several devices: the 1D block-cyclic column layout.

The global m x n matrix is cut into block columns of width ``nb`` (the last
one narrower when nb does not divide n).  Block column b lives on device
``b % k`` of the k devices, as that device's local block ``b // k``.  Each
device keeps its blocks side by side in ONE column-major local matrix of shape
(m, local columns), so the single-GPU kernels run on it unchanged: the local
matrix is a view of an (ld, local columns) Fortran-ordered buffer whose
leading dimension ld is m rounded up to 128 bytes, so every column starts
aligned (row origin 0 in the kernels' alignment shift).

Because every block before a device's last one is full, block b starts at
local column (b // k) * nb; a device's local columns are its blocks' global
columns in increasing order.  :class:`BlockCyclic` holds that arithmetic; it is
pure and shared by both backends.

Devices are GPU ids (CuPy) or host placeholders ``'cpu'`` (NumPy): k virtual
host devices run the same bookkeeping, partial products and reduction on the
CPU, which is what CI tests.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .. import _arrays as ar

HOST = "cpu"
ALIGN_BYTES = 128
# Default block width: the largest kernel tile (NB = 64) so block columns are
# whole tiles of every compiled SYMV setting, and as narrow as that allows so
# the triangle of SYMV/HEMV splits evenly (device loads differ by at most one
# block column of tiles).  GEMV does not depend on it: each device multiplies
# its whole local matrix in one launch.
DEFAULT_NB = 64
# On GPUs the block width must be a multiple of the kernel tile (32 or 64).
GPU_NB_MULTIPLE = 32
# Elements per call of a fill callable at most (rows are split beyond it).
FILL_CHUNK_ELEMS = 2**24


@dataclass(frozen=True)
class BlockCyclic:
    """Where the n global columns live: block width ``nb``, ``parts`` devices."""

    n: int
    nb: int
    parts: int

    @property
    def blocks(self) -> int:
        return -(-self.n // self.nb)

    def owner(self, b: int) -> int:
        return b % self.parts

    def width(self, b: int) -> int:
        return min(self.nb, self.n - b * self.nb)

    def local_start(self, b: int) -> int:
        """First local column of block b on its owner."""
        return (b // self.parts) * self.nb

    def blocks_of(self, d: int) -> range:
        return range(d, self.blocks, self.parts)

    def local_cols(self, d: int) -> int:
        owned = self.blocks_of(d)
        if not owned:
            return 0
        last = owned[-1]
        return self.local_start(last) + self.width(last)

    def global_columns(self, d: int) -> np.ndarray:
        """Global column of each local column of device d (increasing)."""
        owned = np.arange(d, self.blocks, self.parts, dtype=np.int64)
        cols = (owned[:, None] * self.nb + np.arange(self.nb, dtype=np.int64)).ravel()
        return cols[cols < self.n]

    def locate(self, j: int) -> tuple[int, int]:
        """(device, local column) of global column j."""
        b = j // self.nb
        return self.owner(b), self.local_start(b) + j % self.nb

    def global_of_local(self, d: int, jl):
        """Global column of local column(s) jl of device d (the kernels' map)."""
        return ((jl // self.nb) * self.parts + d) * self.nb + jl % self.nb


def padded_ld(m: int, itemsize: int) -> int:
    per = max(1, ALIGN_BYTES // itemsize)
    return max(per, -(-m // per) * per)


# --- devices -------------------------------------------------------------------------


def _gpu_count() -> int:
    cp = ar.cupy_or_none()
    if cp is None:
        return 0
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver
        return 0


def parse_devices(devices, source_on_gpu: bool = False) -> tuple:
    """A tuple of GPU ids, or of ``'cpu'`` placeholders (virtual host devices).

    None: every visible GPU; with none visible, one host device (an error for a
    CuPy source, which cannot lack a GPU).  An int k: k host devices.  A
    sequence of GPU ids (distinct) or of ``'cpu'`` strings.
    """
    if devices is None:
        count = _gpu_count()
        return tuple(range(count)) if count else (HOST,)
    if isinstance(devices, (bool, np.bool_)):
        raise TypeError(f"devices must be None, an int or a sequence, got {devices!r}")
    if isinstance(devices, numbers.Integral):
        if devices < 1:
            raise ValueError(f"devices must be at least 1 host device, got {devices}")
        return (HOST,) * int(devices)
    if isinstance(devices, str):
        raise TypeError(f"devices must be a sequence of GPU ids or of 'cpu', got the string {devices!r}")
    try:
        items = list(devices)
    except TypeError:
        raise TypeError(f"devices must be None, an int or a sequence, got {type(devices).__name__}") from None
    if not items:
        raise ValueError("devices must name at least one device")
    if all(isinstance(d, str) for d in items):
        bad = [d for d in items if d.lower() != HOST]
        if bad:
            raise ValueError(f"host devices are written 'cpu', got {bad}")
        return (HOST,) * len(items)
    if all(isinstance(d, numbers.Integral) and not isinstance(d, (bool, np.bool_)) for d in items):
        ids = tuple(int(d) for d in items)
        if len(set(ids)) != len(ids):
            raise ValueError(f"devices lists a GPU twice: {list(ids)}")
        count = _gpu_count()
        bad = [d for d in ids if not 0 <= d < count]
        if bad:
            raise ValueError(f"GPU ids {bad} do not exist ({count} GPU(s) visible)")
        return ids
    raise TypeError(f"devices must be all GPU ids or all 'cpu', got {items!r}")


def check_nb(nb, on_gpu: bool) -> int:
    if nb is None:
        return DEFAULT_NB
    if isinstance(nb, (bool, np.bool_)) or not isinstance(nb, numbers.Integral) or nb < 1:
        raise ValueError(f"nb must be a positive integer, got {nb!r}")
    if on_gpu and nb % GPU_NB_MULTIPLE:
        raise ValueError(f"nb must be a multiple of {GPU_NB_MULTIPLE} on GPUs (the kernel tile), got {nb}")
    return int(nb)


def _check_shape(shape) -> tuple[int, int]:
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (rows, columns), got {shape!r}") from None
    if m < 0 or n < 0:
        raise ValueError(f"shape must be non-negative, got {shape!r}")
    return m, n


def _peer_copy(dst_ptr: int, dst_dev: int, src_ptr: int, src_dev: int, nbytes: int) -> None:
    """Blocking copy between two GPUs (setup paths only: distribute and gather)."""
    if nbytes:
        ar.cupy_or_none().cuda.runtime.memcpyPeer(dst_ptr, dst_dev, src_ptr, src_dev, nbytes)


# --- the matrix ----------------------------------------------------------------------


class DistributedMatrix:
    """One m x n matrix in the 1D block-cyclic column layout over several devices.

    Made by :func:`distribute` (from one NumPy or CuPy array), by
    :meth:`from_function` (each device fills its own blocks from a callable,
    so the whole matrix never passes through one device) or :meth:`random`.
    ``batched.kblas.gemv``, ``symv`` and ``hemv`` accept it as ``A``.

    Attributes
    ----------
    shape : (int, int)
    dtype : numpy.dtype
    nb : int
        Block width: block column b (global columns b*nb .. b*nb + nb - 1)
        lives on ``devices[b % len(devices)]``.
    devices : tuple
        GPU ids, or ``'cpu'`` placeholders for virtual host devices (NumPy).
    layout : BlockCyclic
        The column bookkeeping (pure).
    locals : tuple of arrays
        Device d's local matrix, column-major, shape (m, local columns),
        holding its block columns side by side (CuPy on GPU d, or NumPy).
    """

    def __init__(self, shape, dtype, devices=None, nb=None, *, _fill=None):
        m, n = _check_shape(shape)
        dtype = np.dtype(dtype)
        ar.check_dtype(np.empty(0, dtype), "dtype")
        self.devices = parse_devices(devices)
        self.on_gpu = self.devices[0] != HOST
        self.nb = check_nb(nb, self.on_gpu)
        self.shape = (m, n)
        self.dtype = dtype
        self.layout = BlockCyclic(n, self.nb, len(self.devices))
        self.ld = padded_ld(m, dtype.itemsize)
        self._index_cache: dict = {}
        storage = []
        for d, dev in enumerate(self.devices):
            shape_d = (self.ld, self.layout.local_cols(d))
            if self.on_gpu:
                cp = ar.cupy_or_none()
                with cp.cuda.Device(dev):
                    storage.append(cp.zeros(shape_d, dtype, order="F"))
            else:
                storage.append(np.zeros(shape_d, dtype, order="F"))
        self._storage = tuple(storage)
        self.locals = tuple(s[:m] for s in self._storage)
        if _fill is not None:
            _fill(self)

    # -- properties -------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return 2

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def backend(self) -> str:
        return "cupy" if self.on_gpu else "numpy"

    def __repr__(self) -> str:
        return (f"DistributedMatrix(shape={self.shape}, dtype={self.dtype}, nb={self.nb}, "
                f"devices={list(self.devices)})")

    def global_columns(self, d: int) -> np.ndarray:
        """Global columns held by the d-th device (position in ``devices``), in local order."""
        return self.layout.global_columns(d)

    def device_index(self, d: int):
        """``global_columns(d)`` as an int64 array on GPU ``dev`` (cached), for gathers and scatters."""
        return self._indices_on(d, None)

    def _indices_on(self, d: int, dev):
        """Global columns of position d as an array on ``dev`` (None: on devices[d])."""
        if not self.on_gpu:
            return self.global_columns(d)
        dev = self.devices[d] if dev is None else dev
        key = (d, dev)
        idx = self._index_cache.get(key)
        if idx is None:
            cp = ar.cupy_or_none()
            with cp.cuda.Device(dev):
                idx = cp.asarray(self.global_columns(d))
            self._index_cache[key] = idx
        return idx

    # -- filling ----------------------------------------------------------------------

    def _put(self, d: int, rows: slice, start: int, block) -> None:
        """Write ``block`` (shape checked) into rows ``rows`` and local columns
        start.. of device d, converting its dtype where it lives."""
        target = self.locals[d][rows, start:start + block.shape[1]]
        cp = ar.cupy_or_none()
        on_gpu_block = cp is not None and isinstance(block, cp.ndarray)
        if on_gpu_block:
            with cp.cuda.Device(block.device.id):
                block = ar.aligned(block)  # CuPy's copies would fault on a misaligned one
        if not self.on_gpu:
            target[...] = cp.asnumpy(block) if on_gpu_block else block
            return
        dev = self.devices[d]
        if on_gpu_block and block.device.id != dev:
            with cp.cuda.Device(block.device.id):
                src = cp.asfortranarray(ar.astype_exact(block, self.dtype, cp))
                cp.cuda.get_current_stream().synchronize()
            with cp.cuda.Device(dev):
                tmp = cp.empty(src.shape, self.dtype, order="F")
                _peer_copy(tmp.data.ptr, dev, src.data.ptr, src.device.id, src.nbytes)
                target[...] = tmp
            return
        with cp.cuda.Device(dev):
            # converted before the copy: CuPy's casting copy flushes float32 subnormals
            target[...] = ar.astype_exact(block, self.dtype, cp) if on_gpu_block else \
                cp.asarray(np.asarray(block).astype(self.dtype, copy=False))

    def _fill_from(self, fn) -> None:
        m, _ = self.shape
        lay = self.layout
        for b in range(lay.blocks):
            d, w = lay.owner(b), lay.width(b)
            c0, start = b * self.nb, lay.local_start(b)
            step = max(1, FILL_CHUNK_ELEMS // max(w, 1))
            for r0 in range(0, m, step):
                r1 = min(m, r0 + step)
                rows, cols = range(r0, r1), range(c0, c0 + w)
                if self.on_gpu:
                    with ar.cupy_or_none().cuda.Device(self.devices[d]):
                        block = fn(rows, cols)
                else:
                    block = fn(rows, cols)
                block = _checked_block(block, (r1 - r0, w), self.dtype, rows, cols)
                self._put(d, slice(r0, r1), start, block)
        self._sync()

    def _sync(self) -> None:
        if self.on_gpu:
            cp = ar.cupy_or_none()
            for dev in self.devices:
                with cp.cuda.Device(dev):
                    cp.cuda.get_current_stream().synchronize()

    # -- constructors -----------------------------------------------------------------

    @classmethod
    def from_function(cls, shape, fn, *, dtype=np.float64, devices=None, nb=None):
        """A matrix whose blocks come from ``fn(rows, cols)``, filled in place on each device.

        Parameters
        ----------
        shape : (m, n)
        fn : callable
            ``fn(rows, cols)`` with two ``range`` objects (global row and column
            indices) returns the block A[rows, cols] of shape
            (len(rows), len(cols)): a NumPy array, or a CuPy array (``fn`` runs
            with the owning GPU current, so CuPy blocks it creates are already
            there).  Called once per block column (rows split only when a
            block would pass 2**24 elements), so only one block at a time
            exists outside its device.
        dtype : dtype, optional
            One of the four supported dtypes (default float64); blocks are cast
            to it (``same_kind``).
        devices, nb : see :func:`distribute`.

        Notes
        -----
        Synchronizes every device before returning.
        """
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        return cls(shape, dtype, devices, nb, _fill=lambda self: self._fill_from(fn))

    @classmethod
    def random(cls, shape, *, dtype=np.float64, seed=0, devices=None, nb=None):
        """Standard-normal entries (both parts for complex), generated on each device.

        Block column b draws from a generator seeded by (seed, b), so the
        matrix does not depend on the number of devices (it does on ``nb`` and
        on the backend: CuPy's and NumPy's generators differ).
        """
        dt = np.dtype(dtype)
        real = np.float32 if dt in (np.float32, np.complex64) else np.float64

        def block(self, rows, cols):
            key = [int(seed), cols.start // self.nb, rows.start]
            state = int(np.random.SeedSequence(key).generate_state(1, np.uint32)[0])
            shape_b = (len(rows), len(cols))
            if self.on_gpu:
                rs = ar.cupy_or_none().random.RandomState(state)
                a = rs.standard_normal(shape_b, dtype=real)
                return a + 1j * rs.standard_normal(shape_b, dtype=real) if dt.kind == "c" else a
            g = np.random.default_rng(state)
            a = g.standard_normal(shape_b, dtype=real)
            return a + 1j * g.standard_normal(shape_b, dtype=real) if dt.kind == "c" else a

        return cls(shape, dt, devices, nb, _fill=lambda s: s._fill_from(lambda r, c: block(s, r, c)))

    # -- reading back -----------------------------------------------------------------

    def gather(self):
        """The whole matrix: NumPy (Fortran order) for host devices, CuPy on
        ``devices[0]`` for GPUs (it must fit there).  Synchronizes."""
        m, n = self.shape
        if not self.on_gpu:
            out = np.empty((m, n), self.dtype, order="F")
            for d in range(len(self.devices)):
                out[:, self.global_columns(d)] = self.locals[d]
            return out
        cp = ar.cupy_or_none()
        first = self.devices[0]
        self._sync()
        with cp.cuda.Device(first):
            out = cp.empty((m, n), self.dtype, order="F")
            for d, dev in enumerate(self.devices):
                if self._storage[d].size == 0:
                    continue
                if dev == first:
                    panel = self.locals[d]
                else:
                    tmp = cp.empty(self._storage[d].shape, self.dtype, order="F")
                    _peer_copy(tmp.data.ptr, first, self._storage[d].data.ptr, dev, tmp.nbytes)
                    panel = tmp[:m]
                out[:, self._indices_on(d, first)] = panel
            cp.cuda.get_current_stream().synchronize()
        return out

    def take_rows(self, rows) -> np.ndarray:
        """Rows ``rows`` (global indices) as a NumPy array (len(rows), n); synchronizes."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        if rows.size and not (0 <= rows.min() and rows.max() < self.shape[0]):
            raise IndexError(f"rows outside a matrix of shape {self.shape}")
        out = np.empty((rows.size, self.shape[1]), self.dtype)
        for d in range(len(self.devices)):
            out[:, self.global_columns(d)] = self._to_host(d, lambda local, xp: local[xp.asarray(rows)])
        return out

    def take_columns(self, cols) -> np.ndarray:
        """Columns ``cols`` (global indices) as a NumPy array (m, len(cols)); synchronizes."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        if cols.size and not (0 <= cols.min() and cols.max() < self.shape[1]):
            raise IndexError(f"columns outside a matrix of shape {self.shape}")
        out = np.empty((self.shape[0], cols.size), self.dtype, order="F")
        for i, j in enumerate(cols):
            d, jl = self.layout.locate(int(j))
            out[:, i] = self._to_host(d, lambda local, xp: local[:, jl])
        return out

    def _to_host(self, d, pick):
        """``pick(local matrix of device d, its array module)`` brought to the host."""
        if not self.on_gpu:
            return pick(self.locals[d], np)
        cp = ar.cupy_or_none()
        with cp.cuda.Device(self.devices[d]):
            return cp.asnumpy(pick(self.locals[d], cp))


def _checked_block(block, shape, dtype, rows, cols):
    cp = ar.cupy_or_none()
    if not (isinstance(block, np.ndarray) or (cp is not None and isinstance(block, cp.ndarray))):
        block = np.asarray(block)
    if tuple(block.shape) != shape:
        raise ValueError(f"fn(rows={rows}, cols={cols}) returned shape {tuple(block.shape)}, expected {shape}")
    if not np.can_cast(block.dtype, dtype, "same_kind"):
        raise TypeError(f"fn returned dtype {block.dtype}, which does not cast to {dtype} (same kind)")
    return block  # converted where it lives (DistributedMatrix._put)


def distribute(A, devices=None, nb=None) -> DistributedMatrix:
    """Spread one matrix over several devices in the 1D block-cyclic column layout.

    Parameters
    ----------
    A : array_like, shape (m, n)
        A NumPy array (host) or a CuPy array on one GPU; any strides.  One of
        float32, float64, complex64, complex128.
    devices : None, int or sequence, optional
        GPU ids (default: every visible GPU, or one host device when none is
        visible and A is NumPy); an int k or a list of ``'cpu'`` gives k
        virtual host devices (the NumPy backend, for tests and for machines
        without GPUs).
    nb : int, optional
        Block width (default 64, a multiple of every kernel tile); on GPUs a
        multiple of 32.

    Returns
    -------
    DistributedMatrix

    Notes
    -----
    Copies one block column at a time (peer-to-peer from a CuPy source on
    another GPU) and synchronizes before returning.  A is not modified.
    """
    A, xp = ar.as_array(A, "A")
    if A.ndim != 2:
        raise ValueError(f"A must be a 2-D matrix, got shape {A.shape}")
    ar.check_dtype(A, "A")
    on_gpu_source = xp is not np
    if on_gpu_source and devices is not None:
        parsed = parse_devices(devices)
        if parsed[0] == HOST:
            raise ValueError("a CuPy matrix is distributed over GPUs; pass GPU ids (or None), not host devices")
    if on_gpu_source and devices is None and _gpu_count() == 0:  # pragma: no cover - CuPy array without a GPU
        raise ValueError("no GPU visible")

    def block(rows, cols):
        return A[rows.start:rows.stop, cols.start:cols.stop]

    return DistributedMatrix(A.shape, A.dtype, devices, nb, _fill=lambda s: s._fill_from(block))
