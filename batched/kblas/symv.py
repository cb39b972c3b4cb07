"""Large single-matrix SYMV and HEMV: ``alpha * A @ x + beta * y`` with A
symmetric (Hermitian) and only one triangle read (KBLAS design).

Launcher of batched/kblas/kblas_symv.cu (the strips of a short matrix in one
launch, or a diagonal-block kernel, then an off-diagonal kernel on the same
stream) and the CPU backend.  A row-major A
is its column-major view's transpose: its lower triangle is the view's upper
one, and for HEMV the view holds conj(A), so the kernels read the stored
elements conjugated; no copy either way.
"""

from __future__ import annotations

import numpy as np

from .. import _arrays as ar
from ..device_functions import build
from ..gemv import gemv as _batched_gemv
from . import _common as cm
from .distributed import DistributedMatrix
from .settings import (KBLAS_ROWS_SETTINGS, KBLAS_SETTINGS, ROWS_THREADS, KblasRowsSetting,
                       check_kblas_setting, choose_kblas_setting, choose_parts, choose_symv_strip)

SOURCE = cm.SOURCE_DIR / "kblas_symv.cu"

# Launch flags of kblas_symv.cu.
_CONJ_A, _READ_Y, _LOWER, _HERMITIAN, _VEC, _XVEC = 1, 2, 4, 8, 16, 32


def kernel_names(dtype, setting) -> tuple:
    """kblas_symv.cu's kernels of one dtype and setting: the strips' one (KblasRowsSetting),
    or the diagonal kernel and the off-diagonal walks (KblasSetting)."""
    if isinstance(setting, KblasRowsSetting):
        return (f"kblas_symv_strip_kernel<{cm.ctype(dtype)}, {setting.template_args()}>",)
    args = f"{cm.ctype(dtype)}, {setting.template_args()}"
    return f"kblas_symv_diag_kernel<{args}>", f"kblas_symv_offdiag_kernel<{args}>"


build.register(SOURCE, [name for dt in ar.SUPPORTED_DTYPES for s in (*KBLAS_SETTINGS, *KBLAS_ROWS_SETTINGS)
                        if isinstance(s, KblasRowsSetting) or s.fits("symv", dt) for name in kernel_names(dt, s)])


def symv(A, x, y=None, *, alpha=1.0, beta=0.0, lower=True, out=None, setting=None):
    """Symmetric matrix-vector product ``alpha * A @ x + beta * y``, one triangle read.

    Parameters
    ----------
    A : array_like or DistributedMatrix, shape (n, n)
        Only the triangle named by ``lower`` is read (the other may hold
        anything, NaN included).  Column-major A is native; row-major A and
        submatrix views at any offset are read in place.  A
        :class:`DistributedMatrix` runs on its devices (see Notes).
    x : array_like, shape (n,)
    y : array_like, optional
        Added as ``beta * y``; never read when ``beta == 0``, never written.
    alpha, beta : scalar
        Finite; complex only with complex operands.
    lower : bool
        Read the lower (default) or the upper triangle.
    out : array, optional
        Receives the result; may be ``y`` itself.
    setting : KblasSetting or KblasRowsSetting, optional
        Force the walks (KblasSetting) or the strips (KblasRowsSetting) and
        their shape (GPU); default chosen by size, dtype and GPU.

    Returns
    -------
    out : array of shape (n,)

    Raises
    ------
    TypeError, ValueError
        Non-square A, mismatched lengths, bad dtypes, scalars or settings,
        before any work; ``out`` untouched.

    See Also
    --------
    hemv, gemv, scipy.linalg.blas.dsymv

    Notes
    -----
    CuPy arrays run on the current stream without synchronizing (one or two
    launches); NumPy arrays run on the CPU backend.  A matrix of at most 64 MiB
    runs in strips (a block computes its outputs whole from its block row and
    block column of the stored triangle: each element read twice, the same
    result every call); a larger one in walks that read each stored tile once
    and add into the result with atomics, so the last bits of a result may
    differ from call to call.  For complex A this is the complex *symmetric*
    product (no conjugation); see :func:`hemv`.

    With a :class:`DistributedMatrix` A, each device reads the stored tiles
    of its own block columns once, applies them as A and A^T (A^H for HEMV)
    on its own stream, and the partial vectors are summed on the device of x
    (on the host for a NumPy x); see batched.kblas.mgpu.
    """
    return _symv(A, x, y, alpha, beta, lower, out, setting, hermitian=False)


def hemv(A, x, y=None, *, alpha=1.0, beta=0.0, lower=True, out=None, setting=None):
    """Hermitian matrix-vector product ``alpha * A @ x + beta * y``, one triangle read.

    As :func:`symv`, with the unread triangle taken as the conjugate transpose
    of the stored one and the imaginary parts of the diagonal ignored (taken
    as zero, as BLAS does).  For real dtypes it equals :func:`symv`.

    See Also
    --------
    symv, scipy.linalg.blas.zhemv
    """
    return _symv(A, x, y, alpha, beta, lower, out, setting, hermitian=True)


def _symv(A, x, y, alpha, beta, lower, out, setting, hermitian):
    if isinstance(A, DistributedMatrix):
        from . import mgpu

        return mgpu.symv(A, x, y, alpha, beta, lower, out, setting, hermitian)
    key = cm.replay_key(("hemv" if hermitian else "symv", type(lower), lower, setting), A, x, y, out,
                        alpha, beta)
    done = cm.try_replay(key, A, x, y, out, alpha, beta)
    if done is not None:
        return done
    if not isinstance(lower, (bool, np.bool_)):
        raise TypeError(f"lower must be True or False, got {lower!r}")
    p = cm.validate(A, x, y, out, alpha, beta)
    check_kblas_setting(setting, "symv", p.dtype)
    m, n = p.A.shape
    if m != n:
        raise ValueError(f"A must be square for {'hemv' if hermitian else 'symv'}, got shape {p.A.shape}")
    cm.check_lengths(p, n, n, "A")
    if not p.gpu:
        full = full_from_triangle(p.A.astype(p.dtype, copy=False), bool(lower), hermitian)
        return _batched_gemv(full, p.x, p.y, alpha=p.alpha, beta=p.beta, out=p.out)
    return cm.execute(p, lambda p, target: _describe(p, target, bool(lower), hermitian, setting), key,
                      (A, x, y, out))


def full_from_triangle(A, lower: bool, hermitian: bool):
    """The whole matrix from one triangle of ``A`` (NumPy): the other triangle is
    never used in arithmetic (``tril``/``triu`` select, they do not multiply),
    and a Hermitian diagonal keeps only its real part."""
    strict = np.tril(A, -1) if lower else np.triu(A, 1)
    mirror = strict.T.conj() if hermitian else strict.T
    full = strict + mirror
    diagonal = np.diagonal(A)
    np.fill_diagonal(full, diagonal.real if hermitian else diagonal)
    return full


def plan(n: int, shift: int, dtype, setting=None, sms: int = 132):
    """(setting with parts, diagonal blocks) of the walks for an order-n view with row
    origin ``shift``."""
    s = setting or choose_kblas_setting("symv", dtype, n, sms)
    blocks = cm.blocks(n + shift, s.nb)
    parts = s.parts or choose_parts("symv", blocks, blocks - 1, sms, dtype)
    return s.with_parts(parts), blocks


def _describe(p: cm.Problem, target, lower: bool, hermitian: bool, setting):
    """(Recipe, pointers, keep) of one SYMV/HEMV into ``target`` (see _common.execute)."""
    a, shift = cm.matrix_view(p)
    complex_a = p.dtype.kind == "c"
    if a.transposed:  # the view is A^T: the other triangle, and conj(A) for Hermitian A
        lower = not lower
    conj_a = a.transposed and hermitian and complex_a
    flags = ((_CONJ_A if conj_a else 0) | (_READ_Y if p.read_y else 0) | (_LOWER if lower else 0)
             | (_HERMITIAN if hermitian and complex_a else 0))
    keep = [a.arr]
    x_ptr, incx = cm.vector_args(p, p.x, p.inner, keep)
    y_ptr, incy = cm.vector_args(p, p.y if p.read_y else None, p.rows, keep)
    o_ptr, inco = cm.vector_args(p, target, p.rows, keep)
    pointers = (a.base, x_ptr, y_ptr, o_ptr)
    matrix = (cm.A_PTR, np.int64(a.ld), np.int32(a.rows))
    vectors = (cm.X_PTR, incx, cm.Y_PTR if p.read_y else np.uint64(0), incy, cm.OUT_PTR, inco, cm.ALPHA, cm.BETA)
    strip = setting if isinstance(setting, KblasRowsSetting) else (
        choose_symv_strip(p.dtype, a.rows) if setting is None else None)
    if strip is not None:
        if cm.vector_loads(a, shift, p.dtype.itemsize):
            flags |= _VEC
        if cm.x_vector_loads(x_ptr, incx, shift, p.dtype.itemsize):
            flags |= _XVEC
        rows = strip.rows(p.dtype)  # a multiple of the 16-byte pieces: the origin modulo it aligns them as well
        grid = -(-(a.rows + shift % rows) // rows)
        step = cm.launch_step(SOURCE, kernel_names(p.dtype, strip)[0], grid, ROWS_THREADS,
                              (*matrix, np.int32(shift % rows), np.int32(flags), *vectors), p.dtype)
        return cm.Recipe((step,), 0, 0, p.rows, p.dtype), pointers, keep
    s, blocks = plan(a.rows, shift, p.dtype, setting, cm.sm_count())
    diag, offdiag = kernel_names(p.dtype, s)
    walk = (*matrix, np.int32(shift), np.int32(flags), cm.X_PTR, incx)
    steps = [cm.launch_step(SOURCE, diag, blocks, s.threads, (*walk, *vectors[2:]), p.dtype)]
    if blocks > 1:  # after the diagonal kernel on the same stream: out is initialised
        steps.append(cm.launch_step(SOURCE, offdiag, blocks * s.parts, s.threads,
                                    (*walk, cm.OUT_PTR, inco, cm.ALPHA, np.int32(s.parts)), p.dtype))
    return cm.Recipe(tuple(steps), 0, 0, p.rows, p.dtype), pointers, keep
