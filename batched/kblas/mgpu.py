"""GEMV, SYMV and HEMV on a :class:`DistributedMatrix` (several devices of one host).

``batched.kblas.gemv/symv/hemv`` send a DistributedMatrix here.  Each device
computes a partial result from its local matrix (the block columns it owns):

GEMV 'N'   partial_d = A_d x_d, with x_d the entries of x at device d's global
           columns (gathered on the device); the partials are summed.
GEMV 'T'/'C'  partial_d = op(A_d) x, the outputs of device d's own columns;
           they are scattered into the result (no sum).
SYMV/HEMV  partial_d (length n) from kblas_mgpu.cu: every stored tile of the
           named triangle in device d's columns is read once and applied as A
           and A^H (A^T); the diagonal tiles mirrored (the single-GPU SYMV's
           kernel bodies, device_functions/kblas.cuh, with a block-cyclic tile
           map).  Partials are summed.

The result is alpha * (sum or scatter of the partials) + beta * y, formed on
the device of x (or on the host for a NumPy x).

Streams and ordering (CuPy).  Each GPU works on its own non-blocking stream
S_d (one per device, kept for the process).  On the target device (the
device of x) the caller's current stream S_t records an event after x is made
contiguous; every S_d waits on it, brings x to its device (one kernel that
reads it over NVLink, gathering the entries GEMV 'N' needs; a peer copy
without peer access, a host-to-device copy for a NumPy x) and computes its
partial in a buffer of its own.
S_t waits on every device's event, and one kernel reads the partials where
they lie (a peer's over NVLink) and sums or scatters, scales and stores.
Without peer access a partial travels through pinned host memory
(device-to-host on S_d, host-to-device on S_t after S_d's event) into a buffer
on the target.  Nothing synchronizes the host, except a NumPy x (the host
reduction needs the partials) and first-use setup (streams, peer access).
The partials and staging buffers stay referenced until an event recorded on
S_t after the reduction has fired, so no pool hands their memory to other
work before the reduction has read them.

The NumPy backend (host devices) runs the same decomposition: the same local
products and the same reduction, with NumPy matmul.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _arrays as ar
from .._batch import keep_until
from ..device_functions import build
from . import _common as cm
from .distributed import DistributedMatrix
from .gemv import gemv as _single_gemv
from .settings import (KBLAS_SETTINGS, KblasSetting, check_kblas_setting, check_one_pass_op, choose_kblas_setting,
                       choose_parts)
from .symv import full_from_triangle

SOURCE = cm.SOURCE_DIR / "kblas_mgpu.cu"

# Launch flags of kblas_mgpu.cu.
_LOWER, _HERMITIAN = 1, 2
# Fits every dtype (complex128 included) and divides every GPU block width.
_FALLBACK = KblasSetting(32, 4)


def kernel_name(dtype, setting: KblasSetting) -> str:
    """The multi-GPU SYMV / HEMV kernel of one dtype and setting."""
    return f"kblas_symv_mgpu_kernel<{cm.ctype(dtype)}, {setting.template_args()}>"


build.register(SOURCE, [kernel_name(dt, s) for dt in ar.SUPPORTED_DTYPES for s in KBLAS_SETTINGS
                        if s.fits("symv", dt)])


@dataclass
class Call:
    """One validated call on a DistributedMatrix."""

    D: DistributedMatrix
    x: object
    y: object
    out: object
    xp: object          # backend of x, y, out (the result's)
    dtype: np.dtype
    alpha: object
    beta: object
    rows: int = 0
    inner: int = 0

    @property
    def read_y(self) -> bool:
        return self.y is not None and self.beta != 0


def validate(D: DistributedMatrix, x, y, out, alpha, beta, rows: int, inner: int, what: str) -> Call:
    """Named errors before any work: backends, dtypes, scalars, lengths."""
    x, _ = ar.as_array(x, "x")
    y = ar.as_array(y, "y")[0] if y is not None else None
    out = ar.as_array(out, "out", writable=True)[0] if out is not None else None
    xp = ar.common_backend({"x": x, "y": y, "out": out})
    if not D.on_gpu and xp is not np:
        raise ValueError("A is a DistributedMatrix on host devices; x, y and out must be NumPy arrays")
    dtype = ar.result_dtype({"A": np.empty(0, D.dtype), "x": x, "y": y})
    alpha = ar.check_scalar(alpha, "alpha", dtype)
    beta = ar.check_scalar(beta, "beta", dtype)
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D vector, got shape {x.shape}")
    if x.shape[0] != inner:
        raise ValueError(f"x has shape {x.shape} but {what} has {inner} columns (A has shape {D.shape})")
    ar.check_result_operands(y, "y", out, (rows,), dtype)
    return Call(D, x, y, out, xp, dtype, alpha, beta, rows, inner)


# --- public entry points (called by gemv.py / symv.py) ---------------------------------


def gemv(D, x, y, alpha, beta, trans, out, setting):
    op = ar.parse_op(trans, "trans")
    m, n = D.shape
    rows, inner = (m, n) if op == "N" else (n, m)
    c = validate(D, x, y, out, alpha, beta, rows, inner, "op(A)")
    check_kblas_setting(setting, "gemv", c.dtype)
    check_one_pass_op(setting, op != "N")  # the local blocks are column-major
    early = _shortcut(c)
    if early is not None:
        return early
    kind = "sum" if op == "N" else "scatter"
    if not D.on_gpu:
        return _finish_host(c, kind, [(d, _host_gemv_partial(c, d, op)) for d in _active(D)])
    return _run_gpu(c, kind, lambda d, xd, dest: _gemv_partial(c, d, op, xd, dest, setting),
                    lambda d: m if op == "N" else D.locals[d].shape[1], gather=op == "N")


def symv(D, x, y, alpha, beta, lower, out, setting, hermitian):
    name = "hemv" if hermitian else "symv"
    if not isinstance(lower, (bool, np.bool_)):
        raise TypeError(f"lower must be True or False, got {lower!r}")
    m, n = D.shape
    if m != n:
        raise ValueError(f"A must be square for {name}, got shape {D.shape}")
    c = validate(D, x, y, out, alpha, beta, n, n, "A")
    check_kblas_setting(setting, "symv", c.dtype)
    if setting is not None and not isinstance(setting, KblasSetting):  # the strips run on one matrix only
        raise TypeError(f"setting for {name} on a DistributedMatrix must be a KblasSetting or None, "
                        f"got {type(setting).__name__}")
    herm = hermitian and c.dtype.kind == "c"
    lower = bool(lower)
    if not D.on_gpu:
        early = _shortcut(c)
        if early is not None:
            return early
        return _finish_host(c, "sum", [(d, _host_symv_partial(c, d, lower, herm)) for d in _active(D)])
    kernel_setting = _symv_setting(D, c.dtype, setting)  # named error before any work
    early = _shortcut(c)
    if early is not None:
        return early
    return _run_gpu(c, "sum", lambda d, xd, dest: _symv_partial(c, d, lower, herm, xd, dest, kernel_setting),
                    lambda d: n, zeroed=True)


def _active(D) -> list[int]:
    """Devices that own columns (a device may own none when blocks < devices)."""
    return [d for d in range(len(D.devices)) if D.locals[d].shape[1] > 0]


def _shortcut(c: Call):
    """The result when no product is needed (BLAS: alpha == 0 or an empty inner
    dimension reads neither A nor x), else None."""
    if c.rows and c.alpha != 0 and c.inner:
        return None
    xp = c.xp
    if c.xp is not np:
        with xp.cuda.Device(c.x.device.id):
            return _store(c, _scaled_y(c, xp.zeros((c.rows,), c.dtype)))
    return _store(c, _scaled_y(c, np.zeros((c.rows,), c.dtype)))


def _scaled_y(c: Call, acc):
    """alpha * acc + beta * y (y read only when beta != 0)."""
    res = acc * c.alpha if c.alpha != 1 else acc
    if c.read_y:
        res = res + c.beta * ar.astype_exact(c.y, c.dtype)
    return res


def _store(c: Call, res):
    if c.out is not None:
        ar.assign(c.out, res)
        return c.out
    return res


# --- NumPy backend: the same partial products on host devices ----------------------------


def _host_gemv_partial(c: Call, d: int, op: str):
    local = c.D.locals[d].astype(c.dtype, copy=False)
    x = c.x.astype(c.dtype, copy=False)
    if op == "N":
        return local @ x[c.D.global_columns(d)]
    return ar.apply_op(local, op, np) @ x


def _host_symv_partial(c: Call, d: int, lower: bool, herm: bool):
    """Device d's share: each stored block of its block columns read once, used twice."""
    D = c.D
    n = D.shape[0]
    local = D.locals[d].astype(c.dtype, copy=False)
    x = c.x.astype(c.dtype, copy=False)
    part = np.zeros(n, c.dtype)
    lay = D.layout
    for b in lay.blocks_of(d):
        g0, w, j = b * D.nb, lay.width(b), lay.local_start(b)
        panel = local[:, j:j + w]
        cols = slice(g0, g0 + w)
        part[cols] += full_from_triangle(panel[cols], lower, herm) @ x[cols]
        others = slice(g0 + w, n) if lower else slice(0, g0)
        B = panel[others]  # the stored off-diagonal blocks of block column b
        if B.size:
            part[others] += B @ x[cols]
            part[cols] += (B.conj().T if herm else B.T) @ x[others]
    return part


def _finish_host(c: Call, kind: str, partials):
    """Sum (or scatter) the partials in device order, then alpha and beta."""
    acc = np.zeros((c.rows,), c.dtype)
    for d, p in partials:
        if kind == "sum":
            acc += p
        else:
            acc[c.D.global_columns(d)] = p
    return _store(c, _scaled_y(c, acc))


# --- CuPy: streams, transfers, partials ------------------------------------------------


def _cp():
    return ar.cupy_or_none()


_streams: dict = {}
_peer: dict = {}


def _stream(dev: int):
    s = _streams.get(dev)
    if s is None:
        cp = _cp()
        with cp.cuda.Device(dev):
            s = cp.cuda.Stream(non_blocking=True)
        _streams[dev] = s
    return s


def peer_access(dst: int, src: int) -> bool:
    """Can ``dst`` and ``src`` copy directly (enabled both ways on first use)."""
    if dst == src:
        return True
    key = (min(dst, src), max(dst, src))
    ok = _peer.get(key)
    if ok is None:
        cp = _cp()
        rt = cp.cuda.runtime
        ok = bool(rt.deviceCanAccessPeer(dst, src)) and bool(rt.deviceCanAccessPeer(src, dst))
        if ok:
            for a, b in ((dst, src), (src, dst)):
                with cp.cuda.Device(a):
                    try:
                        rt.deviceEnablePeerAccess(b)
                    except rt.CUDARuntimeError:  # already enabled (by CuPy or an earlier call)
                        pass
        _peer[key] = ok
    return ok


def _run_gpu(c: Call, kind: str, partial, length, zeroed: bool = False, gather: bool = False):
    """Partials on every device's stream, then the reduction on x's device.

    ``partial(d, xd, dest)`` enqueues device d's partial product into ``dest``
    (on that device, current stream S_d) given x on that device (``xd``,
    contiguous, of the result dtype; with ``gather``, only the entries at
    device d's global columns, in local order); ``length(d)`` is its length.
    With ``zeroed``, dest is zeroed first, before S_d waits for x (a memset
    off the critical path).  Called with rows > 0, alpha != 0 and a non-empty
    inner dimension.
    """
    cp = _cp()
    import cupyx  # pinned staging buffers

    rt = cp.cuda.runtime
    D, dtype = c.D, c.dtype
    active = _active(D)
    host_target = c.xp is np
    if host_target:
        t = None
        xh = np.ascontiguousarray(c.x, dtype=dtype)
    else:
        t = c.x.device.id
        with cp.cuda.Device(t):
            st = cp.cuda.get_current_stream()
            xt = cp.ascontiguousarray(ar.astype_exact(c.x, dtype, cp))
            start = cp.cuda.Event(disable_timing=True)
            start.record(st)
    # First use: enable peer access (a setup call, before anything is enqueued).
    peers = {D.devices[d]: not host_target and peer_access(t, D.devices[d]) for d in active}
    done = []  # (device index, partial on its device, event on S_d after it, pinned staging or None)
    for d in active:
        dev = D.devices[d]
        sd = _stream(dev)
        with cp.cuda.Device(dev), sd:
            dest = cp.empty(length(d), dtype)  # before the wait: nothing to order
            if zeroed:  # a memset, not a fill kernel: dest is contiguous
                rt.memsetAsync(dest.data.ptr, 0, dest.nbytes, sd.ptr)
            # x on this device, after the caller's work on x (the start event).
            if host_target:
                xd = cp.empty(c.inner, dtype)
                if c.inner:
                    rt.memcpyAsync(xd.data.ptr, xh.ctypes.data, xh.nbytes, rt.memcpyHostToDevice, sd.ptr)
                xd = xd[D.device_index(d)] if gather else xd
            else:
                sd.wait_event(start)
                xd = _x_on_device(c, d, dev, t, xt, peers[dev], gather)
            partial(d, xd, dest)
            pinned = None
            if host_target or (dev != t and not peers[dev]):  # through pinned host memory
                pinned = cupyx.empty_pinned((dest.size,), dtype)
                rt.memcpyAsync(pinned.ctypes.data, dest.data.ptr, dest.nbytes, rt.memcpyDeviceToHost, sd.ptr)
            ev = cp.cuda.Event(disable_timing=True)
            ev.record(sd)
            done.append((d, dest, ev, pinned))

    if host_target:
        for _, _, ev, _ in done:
            ev.synchronize()  # the host reduction needs the partials
        return _finish_host(c, kind, [(d, pinned) for d, _, _, pinned in done])

    # The reduction reads each partial where it lies: on x's device, on a peer
    # over NVLink (no copy: a cudaMemcpyPeerAsync of each partial cost its
    # launch latency on the critical path, 15-24 us of the reduction at
    # n = 16384 on two H200s), or, without peer access, in a buffer on x's
    # device that the pinned staging copy fills.
    with cp.cuda.Device(t):
        pointers = [0] * len(D.devices)
        keep = []
        for d, dest, ev, pinned in done:
            st.wait_event(ev)
            if pinned is None:
                pointers[d] = dest.data.ptr
                keep.append(dest)
            else:  # no peer access: the host-staged second half of the copy
                landed = cp.empty(dest.size, dtype)
                rt.memcpyAsync(landed.data.ptr, pinned.ctypes.data, pinned.nbytes, rt.memcpyHostToDevice, st.ptr)
                pointers[d] = landed.data.ptr
                keep += [landed, pinned]
        # The addresses are the kernel's arguments: an array of them in device memory
        # (an upload, and a load before each partial's) cost about 0.2 us of the
        # reduction's 7 at n = 32768 (two H200s).
        out = _reduce(c, kind, pointers, D.nb)
        # The partials on the other devices stay allocated until the reduction has
        # read them (their pool could otherwise hand the memory to a later call
        # whose stream is not ordered after this one's reduction).
        after = cp.cuda.Event(disable_timing=True)
        after.record(st)
        keep_until(after, *keep)
        return out


def _x_on_device(c: Call, d: int, dev: int, t: int, xt, peer: bool, gather: bool):
    """x (or with ``gather`` its entries at device d's global columns) on device
    ``dev``, enqueued on the current stream after the start event.  With peer
    access one kernel reads xt where it lies, over NVLink for a peer, and
    gathers on the way.  Before (session 30), a cudaMemcpyPeerAsync (a copy
    engine's latency) and, for GEMV 'N', a gather kernel after it sat on the
    other devices' critical path: on two H100s DSYMV 16384 took 222 us against
    205 now, DGEMV N 395 against 375, DSYMV 32768 757 against 739."""
    cp = _cp()
    if dev == t and not gather:
        return xt
    if peer:
        xd = cp.empty(c.D.locals[d].shape[1] if gather else c.inner, c.dtype)
        if xd.size:
            _pull_kernel(gather)(np.uint64(xt.data.ptr), np.int64(c.D.nb), np.int32(len(c.D.devices)),
                                 np.int64(d), xd)
        return xd
    # No peer access (so dev != t: a device is always its own peer).
    xd = cp.empty(c.inner, c.dtype)
    cp.cuda.runtime.memcpyPeerAsync(xd.data.ptr, dev, xt.data.ptr, t, xt.nbytes, cp.cuda.get_current_stream().ptr)
    return xd[c.D.device_index(d)] if gather else xd


_PULL_KERNELS: dict = {}


def _pull_kernel(gather: bool):
    """xd[i] = x[i], or with ``gather`` x at local column i's global column
    (block b = i / nb of device ``rank`` is global block b * ranks + rank,
    distributed.py), read through x's address ``src`` (a peer's over NVLink)."""
    kern = _PULL_KERNELS.get(gather)
    if kern is None:
        cp = _cp()
        where = "((long long)i / nb * ranks + rank) * nb + (long long)i % nb" if gather else "i"
        kern = cp.ElementwiseKernel("uint64 src, int64 nb, int32 ranks, int64 rank", "T xd",
                                    f"xd = reinterpret_cast<const T*>(src)[{where}];",
                                    f"batched_mgpu_pull_x{'_gather' if gather else ''}")
        _PULL_KERNELS[gather] = kern
    return kern


_REDUCE_KERNELS: dict = {}


def _reduce_kernel(kind: str, read_y: bool, ranks: int):
    """out[i] = alpha * (the sum of the partials' entry i, or for "scatter" the
    entry of global column i in its owner's partial) (+ beta * y[i]): the
    whole reduction as one kernel on x's device, reading each partial through
    its address (arguments p0 .. p{ranks-1}, 0 for a device without columns; a
    peer's memory over NVLink), summed in device order.  Without read_y, y is
    not an argument: beta = 0 never reads it.  Scatter: global column i lies in
    block b = i / nb, owned by device b % ranks at its local column
    (b / ranks) nb + i % nb (distributed.py)."""
    key = (kind, read_y, ranks)
    kern = _REDUCE_KERNELS.get(key)
    if kern is None:
        cp = _cp()
        names = [f"p{d}" for d in range(ranks)]
        if kind == "sum":
            gather = ("T acc = T(0);\n"
                      "bool first = true;\n"
                      + "".join(f"if ({p} != 0) {{\n"
                                f"  const T v = reinterpret_cast<const T*>({p})[i];\n"
                                "  acc = first ? v : acc + v;\n"
                                "  first = false;\n"
                                "}\n" for p in names))
        else:
            gather = ("const long long b = (long long)i / nb;\n"
                      f"const int owner = int(b % {ranks});\n"
                      "unsigned long long q = p0;\n"
                      + "".join(f"if (owner == {d}) q = p{d};\n" for d in range(1, ranks))
                      + f"T acc = reinterpret_cast<const T*>(q)[(b / {ranks}) * nb + (long long)i % nb];\n")
        params = ", ".join(f"uint64 {p}" for p in names) + ", int64 nb, T alpha, T beta" + (
            ", T y" if read_y else "")
        body = gather + ("out = alpha * acc + beta * y;" if read_y else "out = alpha * acc;")
        kern = cp.ElementwiseKernel(params, "T out", body,
                                    f"batched_mgpu_reduce_{kind}{ranks}{'_y' if read_y else ''}")
        _REDUCE_KERNELS[key] = kern
    return kern


def _reduce(c: Call, kind: str, pointers, nb: int):
    """The result from the partials at ``pointers`` (one address per device of
    the matrix, 0 for one without columns) on x's device, current stream.  A
    misaligned ``out`` (validate keeps it as given) is written through _store: the
    kernel's stores of whole elements would fault on it."""
    cp = _cp()
    direct = c.out is not None and not ar.misaligned(c.out)
    out = c.out if direct else cp.empty((c.rows,), c.dtype)
    args = (*(np.uint64(p) for p in pointers), np.int64(nb), c.dtype.type(c.alpha), c.dtype.type(c.beta))
    if c.read_y:
        args += (ar.astype_exact(c.y, c.dtype, cp),)
    _reduce_kernel(kind, c.read_y, len(pointers))(*args, out)
    return out if direct else _store(c, out)


def _gemv_partial(c: Call, d: int, op: str, xd, dest, setting) -> None:
    """Device d: dest = op(A_d) x_d with the single-GPU kernel (alpha 1, beta 0);
    for 'N' xd holds the entries of x at d's global columns (_run_gpu's gather)."""
    _single_gemv(c.D.locals[d], xd, trans=op, out=dest, setting=setting)


def _symv_setting(D: DistributedMatrix, dtype, setting) -> KblasSetting:
    """The kernel tile must divide the block width (a tile column is then one
    run of global columns)."""
    if setting is not None:
        if D.nb % setting.nb:
            raise ValueError(f"setting {setting} has tile {setting.nb}, which does not divide "
                             f"the matrix's block width nb = {D.nb}")
        return setting
    s = choose_kblas_setting("symv", dtype, D.shape[0])
    return s if D.nb % s.nb == 0 else _FALLBACK


def symv_plan(n: int, local_cols: int, dtype, setting: KblasSetting, sms: int = 132):
    """(setting with parts, local tile columns) of one device's launches (pure)."""
    tiles = cm.blocks(local_cols, setting.nb)
    row_tiles = cm.blocks(n, setting.nb)
    parts = setting.parts or choose_parts("symv_mgpu", tiles, max(row_tiles - 1, 1), sms)
    return setting.with_parts(parts), tiles


def _symv_partial(c: Call, d: int, lower: bool, herm: bool, xd, dest, setting) -> None:
    """Device d: dest = its share of A x (kblas_mgpu.cu), on the current stream."""
    cp = _cp()
    D = c.D
    n = D.shape[0]
    local = D.locals[d]
    if local.dtype != c.dtype:
        local = cp.asfortranarray(ar.astype_exact(local, c.dtype, cp))
    ld = local.strides[1] // local.itemsize
    s, tiles = symv_plan(n, local.shape[1], c.dtype, setting, cm.sm_count())
    flags = (_LOWER if lower else 0) | (_HERMITIAN if herm else 0)
    # dest was zeroed by _run_gpu (every tile adds into it atomically).
    args = (np.uint64(local.data.ptr), np.int64(ld), np.int32(n), np.int32(local.shape[1]), np.int32(D.nb),
            np.int32(len(D.devices)), np.int32(d), np.int32(flags), np.uint64(xd.data.ptr),
            np.uint64(dest.data.ptr), np.int32(s.parts))
    cm.launch(SOURCE, kernel_name(c.dtype, s), tiles * (s.parts + 1), s.threads, args)
