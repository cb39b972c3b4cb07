"""Backends, dtypes, scalars and strides: the checks every routine shares.

A routine first turns its operands into NumPy or CuPy arrays (CuPy for anything
on a GPU: ``__cuda_array_interface__`` or DLPack, without a copy), checks that
they live together, settles the result dtype like ``numpy.result_type``, and
only then plans work.  Nothing here launches a kernel.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64),
                    np.dtype(np.complex64), np.dtype(np.complex128))
CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
          np.dtype(np.complex64): "complex<float>", np.dtype(np.complex128): "complex<double>"}
_SUPPORTED_NAMES = "float32, float64, complex64, complex128"


def cupy_or_none():
    try:
        import cupy
    except ImportError:  # the CPU backend needs no CuPy
        return None
    return cupy


def gpu_available() -> bool:
    cp = cupy_or_none()
    if cp is None:
        return False
    try:
        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver or no device
        return False


def _is_gpu_object(obj) -> bool:
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    dl = getattr(obj, "__dlpack_device__", None)
    if dl is not None and not isinstance(obj, np.ndarray):
        try:
            return int(dl()[0]) in (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        except Exception:
            return False
    return False


def as_array(obj, name: str, *, writable: bool = False):
    """(array, xp) for one operand; GPU objects become CuPy without a copy.

    A GPU array whose elements are not aligned to their size (``misaligned``)
    is read through an aligned copy, unless it is ``writable`` (an output the
    caller writes back into with ``assign``): every kernel, CuPy's own
    included, loads an element with one instruction of its size, which faults
    on such an address and takes the CUDA context with it."""
    cp = cupy_or_none()
    if cp is not None and isinstance(obj, cp.ndarray):
        return (obj if writable else aligned(obj)), cp
    if isinstance(obj, np.ndarray):
        return obj, np
    if _is_gpu_object(obj):
        arr = cp.asarray(obj) if hasattr(obj, "__cuda_array_interface__") else cp.from_dlpack(obj)
        return (arr if writable else aligned(arr)), cp
    if isinstance(obj, (list, tuple, numbers.Number, np.generic)):
        return np.asarray(obj), np
    if hasattr(obj, "__array__") or hasattr(obj, "__dlpack__"):
        return np.asarray(obj), np
    raise TypeError(f"{name} must be an array, got {type(obj).__name__}")


def common_backend(named: dict):
    """The one backend of all given (non-None) operands; mixed ones are an error."""
    xp, first = None, None
    device = None
    for name, arr in named.items():
        if arr is None:
            continue
        a_xp = np if isinstance(arr, np.ndarray) else cupy_or_none()
        if xp is None:
            xp, first = a_xp, name
        elif a_xp is not xp:
            where = lambda x: "NumPy (host)" if x is np else "CuPy (GPU)"  # noqa: E731
            raise ValueError(f"{name} is a {where(a_xp)} array but {first} is a {where(xp)} array; "
                             "pass all operands on one device")
        if a_xp is not np:
            dev = arr.device.id
            if device is None:
                device = (dev, name)
            elif dev != device[0]:
                raise ValueError(f"{name} is on GPU {dev} but {device[1]} is on GPU {device[0]}")
    return xp


def check_dtype(arr, name: str) -> None:
    dt = arr.dtype
    if dt not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {dt}; supported dtypes are {_SUPPORTED_NAMES}")


def result_dtype(named: dict) -> np.dtype:
    dts = []
    for name, arr in named.items():
        if arr is None:
            continue
        check_dtype(arr, name)
        dts.append(arr.dtype)
    return np.result_type(*dts)


def check_scalar(value, name: str, dtype: np.dtype):
    """A finite scalar of ``dtype``; complex values with real arrays are a TypeError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Number, np.generic)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    z = complex(value)
    if not (math.isfinite(z.real) and math.isfinite(z.imag)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if dtype.kind != "c":
        if z.imag != 0 or isinstance(value, (complex, np.complexfloating)):
            raise TypeError(f"{name} is complex ({value!r}) but the operands are real ({dtype})")
        return dtype.type(z.real)
    return dtype.type(z)


_OP_LETTERS = {"N": "N", "T": "T", "C": "C", "n": "N", "t": "T", "c": "C"}


def parse_op(letter, name: str) -> str:
    if type(letter) is str and letter in _OP_LETTERS:  # the common case first: a dict lookup
        return _OP_LETTERS[letter]
    if isinstance(letter, (int, np.integer)) and not isinstance(letter, bool) and letter in (0, 1, 2):
        return "NTC"[int(letter)]
    if isinstance(letter, str) and letter.upper() in ("N", "T", "C"):
        return letter.upper()
    raise ValueError(f"{name} must be one of 'N', 'T', 'C' (case-insensitive), got {letter!r}")


# --- strides -----------------------------------------------------------------

# Transposing a column-major view: op on X equals flip(op) on X^T.
FLIP = {"N": "T", "T": "N", "C": "R", "R": "C"}
OP_CODE = {"N": 0, "T": 1, "C": 2, "R": 3}


def matrix_orientation(shape, strides_elems, prefer: str = "F"):
    """('F', ld) when element (i, j) is at i + j*ld, ('C', ld) when at i*ld + j,
    None when neither stride is +1 (the caller copies).

    A matrix with one row or column (or none) is both; ``prefer`` picks, so that
    every member of a list batch can be read in the batch's one orientation.
    """
    m, n = shape
    rs, cs = strides_elems
    empty = m == 0 or n == 0
    f_ok = empty or m == 1 or rs == 1
    c_ok = empty or n == 1 or cs == 1
    if f_ok and (prefer == "F" or not c_ok):
        return "F", (cs if n > 1 and not empty else max(m, 1))
    if c_ok:
        return "C", (rs if m > 1 and not empty else max(n, 1))
    return None


def batch_stride(shape, strides_elems):
    """One stride s with offset(b) = flat(b) * s over the batch dims, or None."""
    stride, span = None, None
    for size, st in zip(reversed(shape), reversed(strides_elems)):
        if size == 1:
            continue
        if stride is None:
            stride, span = st, size
            continue
        if st != stride * span:
            return None
        span *= size
    return 0 if stride is None else stride


def misaligned(arr) -> bool:
    """Is ``arr`` a non-empty GPU array with an element not at a multiple of its
    size (e.g. complex128 viewed 8 bytes into a float64 buffer)?  NumPy copes
    with such arrays itself; ``None`` and NumPy arrays are never misaligned."""
    ptr = getattr(getattr(arr, "data", None), "ptr", None)
    if ptr is None or arr.size == 0:
        return False
    item = arr.dtype.itemsize
    return ptr % item != 0 or any(s % item for s, d in zip(arr.strides, arr.shape) if d > 1)


def _byte_view(arr):
    """The bytes of a CuPy array as uint8 with one more axis (the element's bytes):
    a copy through it loads one byte at a time, so any address will do."""
    import cupy

    return cupy.ndarray((*arr.shape, arr.dtype.itemsize), cupy.uint8, memptr=arr.data,
                        strides=(*arr.strides, 1))


def aligned(arr):
    """``arr``, or a C-contiguous copy of it when it is ``misaligned``."""
    if not misaligned(arr):
        return arr
    import cupy

    copy = cupy.empty(arr.shape, arr.dtype)
    _byte_view(copy)[...] = _byte_view(arr)
    return copy


def assign(dst, src) -> None:
    """``dst[...] = src``, also where ``dst`` is ``misaligned`` (an ``out`` the caller
    gave): ``src`` is then broadcast and converted first and copied byte by byte.
    ``src`` is a routine's own result (aligned; a misaligned one goes through
    ``aligned`` on that path only)."""
    if not misaligned(dst):
        dst[...] = astype_exact(src, dst.dtype) if getattr(src, "dtype", dst.dtype) != dst.dtype else src
        return
    import cupy

    src = cupy.ascontiguousarray(cupy.broadcast_to(astype_exact(aligned(src), dst.dtype, cupy), dst.shape))
    _byte_view(dst)[...] = _byte_view(src)


def elem_strides(arr):
    """Strides in elements, or None when the kernels cannot take ``arr`` in place:
    a stride that is not whole elements, or a ``misaligned`` GPU array."""
    if misaligned(arr):
        return None
    item = arr.dtype.itemsize
    out = []
    for s in arr.strides:
        if s % item:
            return None
        out.append(s // item)
    return tuple(out)


def exactly_zero(a, xp):
    """``a == 0`` elementwise, with subnormal numbers not zero on the GPU too.

    CuPy compiles its elementwise kernels with -ftz=true, so there a float32
    subnormal such as 7.5e-39 compares equal to 0; LAPACK's singularity checks
    (a diagonal entry exactly zero) must not see it so.  The sign-cleared bits
    of the value are zero exactly for +0 and -0.
    """
    if xp is np:
        return a == 0
    a = xp.ascontiguousarray(a)
    real = a.real.dtype if a.dtype.kind == "c" else a.dtype
    bits = a.view(np.uint32 if real.itemsize == 4 else np.uint64)
    zero = (bits & bits.dtype.type(2 ** (8 * real.itemsize - 1) - 1)) == 0  # a scalar: CuPy takes no NumPy array
    if a.dtype.kind == "c":  # real and imaginary parts side by side
        zero = zero.reshape(*a.shape, 2).all(axis=-1)
    return zero


def widen_single_parts(parts, xp):
    """float64 values of a 1-D float32 array, subnormals exact, on either backend.

    The subnormal float32 m 2^-149 (biased exponent 0, m != 0) is rebuilt from its bits
    in float64 arithmetic, which no GPU flushes (-ftz acts on .f32 instructions only),
    so the result is what NumPy's cast gives whatever the backend's cast does with it.
    """
    bits = parts.view(np.uint32)
    mantissa = bits & np.uint32(0x7FFFFF)
    subnormal = ((bits & np.uint32(0x7F800000)) == 0) & (mantissa != 0)
    magnitude = mantissa.astype(np.float64) * 2.0 ** -149
    rebuilt = xp.where(bits >= np.uint32(0x80000000), -magnitude, magnitude)
    return xp.where(subnormal, rebuilt, parts.astype(np.float64))


def astype_exact(a, dtype, xp=None, copy=False):
    """``a.astype(dtype, copy=copy)``, exact for every value on the GPU too.

    CuPy compiles its elementwise kernels (casts included) with -ftz=true, so there a
    float32 or complex64 operand promoted to float64 or complex128 (a mixed-precision
    call) loses its subnormal parts: cvt.ftz.f64.f32 reads them as zero, and a
    float32 matrix scaled near underflow factors as a different matrix (session 43:
    GESV of a float32 A with a float64 B, factor ratio 1e4).  Those casts go through
    widen_single_parts (a new C-ordered array); every other cast is CuPy's or NumPy's.
    """
    dtype = np.dtype(dtype)
    if (xp is np or isinstance(a, (np.ndarray, np.generic)) or a.dtype == dtype or a.dtype.char not in "fF"
            or dtype.char not in "dD"):
        return a.astype(dtype, copy=copy)
    return widen_single(a, dtype, xp or cupy_or_none())   # a new array (xp None: a is CuPy's)


def widen_single(a, dtype, xp):
    """float32 / complex64 ``a`` as float64 or complex128 ``dtype`` through
    widen_single_parts, in a's layout (astype_exact's GPU cast; runs on NumPy too)."""
    # the axes outermost first (as astype's order 'K' keeps a layout: an F-ordered or
    # swapped stack stays so), converted as one C-ordered run, then put back
    order = tuple(sorted(range(a.ndim), key=lambda i: -abs(a.strides[i])))
    run = xp.ascontiguousarray(a.transpose(order) if order else a)
    wide = widen_single_parts(run.reshape(-1).view(np.float32), xp)   # complex64: re, im side by side
    if a.dtype.kind == "c":
        wide = wide.view(np.complex128)
    # (the run's shape: a 0-d a's is (1,))  float32 to complex128: exact after the widening
    wide = wide.reshape(tuple(a.shape[i] for i in order)).astype(dtype, copy=False)
    return wide.transpose(tuple(int(i) for i in np.argsort(order))) if order else wide


def op_transposes(op: str) -> bool:
    return op in ("T", "C")


def op_conjugates(op: str) -> bool:
    return op in ("C", "R")


def conj_exact(a, xp):
    """conj(a), keeping single-precision subnormals.  CuPy compiles its elementwise
    kernels with -ftz=true, so its conj (a negation: neg.ftz.f32) flushes subnormal
    imaginary parts of complex64 data to zero; flipping their sign bits does not.
    A new C-ordered array for complex64 on the GPU; ``xp.conj(a)`` otherwise."""
    if xp is np or a.dtype != np.complex64:
        return xp.conj(a)
    out = a.reshape(-1).copy() if a.ndim == 0 else a.copy(order="C")
    bits = out.view(np.uint32)
    bits[..., 1::2] ^= np.uint32(0x80000000)
    return out.reshape(a.shape)


def apply_op(X, op: str, xp):
    """op(X) for a stack (..., r, c): X, X^T or X^H (views; the CPU backend's matmul operand)."""
    if op == "N":
        return X
    Xt = xp.swapaxes(X, -1, -2)
    return Xt.conj() if op == "C" else Xt


def check_result_operands(addend, addend_name: str, out, shape, dtype) -> None:
    """The added term (y or C) must broadcast to the result; ``out`` must match it exactly."""
    if addend is not None:
        try:
            if np.broadcast_shapes(addend.shape, shape) != shape:
                raise ValueError
        except ValueError:
            raise ValueError(f"{addend_name} has shape {addend.shape}, which does not broadcast "
                             f"to the result shape {shape}") from None
    if out is not None:
        if tuple(out.shape) != shape:
            raise ValueError(f"out has shape {out.shape}, expected {shape}")
        if out.dtype != dtype:
            raise TypeError(f"out has dtype {out.dtype}, expected {dtype}")


def blas_operands(first, second, added, out, alpha, beta, names=("A", "x", "y")):
    """The operands of ``alpha * first @ second + beta * added`` as arrays of one
    backend, their result dtype and the checked scalars:
    (first, second, added, out, xp, dtype, alpha, beta).  ``names`` name the
    first three in errors."""
    n1, n2, n3 = names
    first, _ = as_array(first, n1)
    second, _ = as_array(second, n2)
    added = as_array(added, n3)[0] if added is not None else None
    out = as_array(out, "out", writable=True)[0] if out is not None else None
    xp = common_backend({n1: first, n2: second, n3: added, "out": out})
    dtype = result_dtype({n1: first, n2: second, n3: added})
    return (first, second, added, out, xp, dtype,
            check_scalar(alpha, "alpha", dtype), check_scalar(beta, "beta", dtype))
