"""Large single-matrix GEMV: ``alpha * op(A) @ x + beta * y`` (KBLAS design).

Launcher of batched/kblas/kblas_gemv.cu and the CPU backend.  A column-major A runs
the N kernel for 'N' and the T kernel for 'T'/'C'; a row-major A is the
transpose of its column-major view, so 'N' runs the T kernel and 'T'/'C' the N
kernel (conjugating for 'C'), without a copy.
"""

from __future__ import annotations

import numpy as np

from .. import _arrays as ar
from ..device_functions import build
from ..gemv import gemv as _batched_gemv
from . import _common as cm
from .distributed import DistributedMatrix
from .settings import (KBLAS_COLS_SETTINGS, KBLAS_ROWS_SETTINGS, KBLAS_SETTINGS, ROWS_THREADS, KblasColsSetting,
                       KblasRowsSetting, KblasSetting, check_kblas_setting, check_one_pass_op, choose_gemv_cols,
                       choose_gemv_parts, choose_gemv_rows, choose_kblas_setting)

SOURCE = cm.SOURCE_DIR / "kblas_gemv.cu"

# Launch flags of kblas_gemv.cu.
_CONJ, _READ_Y, _VEC, _XVEC = 1, 2, 4, 8


def kernel_name(dtype, setting: KblasSetting, trans: bool) -> str:
    kind = "t" if trans else "n"
    return f"kblas_gemv_{kind}_kernel<{cm.ctype(dtype)}, {setting.template_args()}>"


def rows_kernel_name(dtype, setting: KblasRowsSetting) -> str:
    return f"kblas_gemv_n_rows_kernel<{cm.ctype(dtype)}, {setting.template_args()}>"


def cols_kernel_name(dtype, setting: KblasColsSetting) -> str:
    return f"kblas_gemv_t_cols_kernel<{cm.ctype(dtype)}, {setting.template_args()}>"


build.register(SOURCE, [kernel_name(dt, s, t) for dt in ar.SUPPORTED_DTYPES for s in KBLAS_SETTINGS
                        if s.fits("gemv", dt) for t in (False, True)]
               + [rows_kernel_name(dt, s) for dt in ar.SUPPORTED_DTYPES for s in KBLAS_ROWS_SETTINGS]
               + [cols_kernel_name(dt, s) for dt in ar.SUPPORTED_DTYPES for s in KBLAS_COLS_SETTINGS])


def gemv(A, x, y=None, *, alpha=1.0, beta=0.0, trans="N", out=None, setting=None):
    """Matrix-vector product ``alpha * op(A) @ x + beta * y`` for one large matrix.

    Parameters
    ----------
    A : array_like or DistributedMatrix, shape (m, n)
        Column-major (Fortran-ordered) A is native; row-major A is read as the
        transpose of its column-major view, without a copy.  Submatrix views
        ``B[i:i+m, j:j+n]`` at any offset run at full speed; other strides
        (no unit stride in either direction) are copied once.  A
        :class:`DistributedMatrix` runs on its devices (see Notes).
    x : array_like, shape (k,)
        k = n for 'N', m for 'T'/'C'; any stride (negative too).
    y : array_like, optional
        Added as ``beta * y``; broadcast to the result shape.  Never read when
        ``beta == 0`` (NaN there does not propagate), never written.
    alpha, beta : scalar
        Finite; complex only with complex operands.  ``alpha == 0`` reads
        neither A nor x.
    trans : {'N', 'T', 'C'}
        op(A) = A, A^T or A^H (case-insensitive; also 0, 1, 2).
    out : array, optional
        Receives the result (shape (rows of op(A),), the result dtype); may be
        ``y`` itself for BLAS's in-place update.
    setting : KblasSetting, KblasRowsSetting or KblasColsSetting, optional
        Force a kernel setting (GPU); default chosen by size and GPU.  The
        one-pass kernels for short matrices run one op of the column-major
        view: a KblasRowsSetting op(A) = A ('N' on a column-major A, 'T'/'C'
        on a row-major one), a KblasColsSetting the transposing ones ('T'/'C'
        on a column-major A, 'N' on a row-major one); ValueError otherwise,
        before any work.

    Returns
    -------
    out : array of shape (m,) for 'N', (n,) for 'T'/'C'.

    Raises
    ------
    TypeError, ValueError
        Bad dtypes, shapes, letters, scalars or settings, before any work;
        ``out`` untouched.

    See Also
    --------
    batched.gemv : many small matrices; scipy.linalg.blas.dgemv, cupy.cublas.gemv

    Notes
    -----
    CuPy arrays run on the current stream without synchronizing (one launch);
    NumPy arrays run on the CPU backend.  Operands of different precisions
    promote like ``numpy.result_type``.  The result is deterministic: blocks
    sharing an output segment combine their partial sums in a fixed order.

    With a :class:`DistributedMatrix` A, each device multiplies its local
    block columns on its own stream ('N': by its entries of x, the partials
    summed; 'T'/'C': its own outputs, scattered) and the result is formed on
    the device of x, or on the host for a NumPy x (see batched.kblas.mgpu).
    """
    if isinstance(A, DistributedMatrix):
        from . import mgpu

        return mgpu.gemv(A, x, y, alpha, beta, trans, out, setting)
    key = cm.replay_key(("gemv", type(trans), trans, setting), A, x, y, out, alpha, beta)
    done = cm.try_replay(key, A, x, y, out, alpha, beta)
    if done is not None:
        return done
    op = ar.parse_op(trans, "trans")
    p = cm.validate(A, x, y, out, alpha, beta)
    check_kblas_setting(setting, "gemv", p.dtype)
    m, n = p.A.shape
    rows, inner = (m, n) if op == "N" else (n, m)
    cm.check_lengths(p, rows, inner, "op(A)")
    if not p.gpu:
        return _batched_gemv(p.A, p.x, p.y, alpha=p.alpha, beta=p.beta, trans=op, out=p.out)
    return cm.execute(p, lambda p, target: _describe(p, target, op, setting), key, (A, x, y, out))


def _one_pass(kind, setting, trans: bool, choose):
    """The one-pass setting of ``kind`` for a column-major view whose op transposes or not
    (``trans``): the forced one (ValueError for the other op), else ``choose()``'s where
    ``kind`` runs that op, else None."""
    if isinstance(setting, kind):
        check_one_pass_op(setting, trans)
        return setting
    return choose() if setting is None and trans == kind.transposes else None


def rows_plan(m: int, n: int, shift: int, trans: bool, dtype, setting=None, sms: int = 132):
    """(KblasRowsSetting, blocks) of the one-pass GEMV-N kernel for a column-major m x n
    view, or None for the tall tiles (:func:`plan`): the forced setting, else the
    chooser's (settings.choose_gemv_rows).  Pure, for CPU tests."""
    s = _one_pass(KblasRowsSetting, setting, trans, lambda: choose_gemv_rows(dtype, m, n, shift, sms))
    return None if s is None else (s, -(-(m + shift) // s.rows(dtype)))


def cols_plan(m: int, n: int, trans: bool, dtype, setting=None, sms: int = 132):
    """(KblasColsSetting, blocks) of the one-pass GEMV-T kernel for a column-major m x n
    view, or None: the forced setting, else the chooser's (settings.choose_gemv_cols).
    Pure, for CPU tests."""
    s = _one_pass(KblasColsSetting, setting, trans, lambda: choose_gemv_cols(dtype, m, n, sms))
    return None if s is None else (s, -(-n // s.warps))


def plan(m: int, n: int, shift: int, trans: bool, dtype, setting=None, sms: int = 132):
    """(setting with parts, segments, walk) for a column-major m x n view.

    Pure, so CPU tests can check what a shape gets.  Segments are row tiles
    (N) or block columns (T) of the tall tiles; the walk is the tiles each
    segment crosses.
    """
    s = setting or choose_kblas_setting("gemv", dtype, max(m, n), sms)
    rows = s.tall_rows(dtype)  # tall tiles of rows x nb (kblas.cuh, KblasTallShape)
    if trans:  # segments of nb columns walk down the row tiles
        segments, walk = cm.blocks(n, s.nb), cm.blocks(m + shift, rows)
    else:      # segments of `rows` rows walk right over the column tiles
        segments, walk = cm.blocks(m + shift, rows), cm.blocks(n, s.nb)
    parts = s.parts or choose_gemv_parts(s, dtype, trans, segments, walk, sms)
    return s.with_parts(parts), segments, walk


def segment_length(setting: KblasSetting, trans: bool, dtype) -> int:
    """Outputs one segment holds: nb columns (T), a tall tile's rows (N)."""
    return setting.nb if trans else setting.tall_rows(dtype)


def _describe(p: cm.Problem, target, op: str, setting):
    """(Recipe, pointers, keep) of one GEMV into ``target`` (see _common.execute)."""
    # a forced one-pass setting needs its op of the view: a matrix of one row or column
    # is read in the orientation that gives it (row-major where the user's op on a
    # column-major reading would be the other one)
    one_pass = isinstance(setting, (KblasRowsSetting, KblasColsSetting))
    a, shift = cm.matrix_view(p, "C" if one_pass and setting.transposes != (op != "N") else "F")
    view_op = a.view_op(op)
    trans = ar.op_transposes(view_op)
    sms = cm.sm_count()
    rows = rows_plan(a.rows, a.cols, shift, trans, p.dtype, setting, sms)
    cols = cols_plan(a.rows, a.cols, trans, p.dtype, setting, sms)
    parts, work, segments = 1, 0, 0
    if rows is not None:
        s, grid = rows
        name, threads = rows_kernel_name(p.dtype, s), ROWS_THREADS
    elif cols is not None:
        s, grid = cols
        name, threads = cols_kernel_name(p.dtype, s), 32 * s.warps
    else:
        s, segments, _ = plan(a.rows, a.cols, shift, trans, p.dtype, setting, sms)
        parts, name, grid, threads = s.parts, kernel_name(p.dtype, s, trans), segments * s.parts, s.threads
        work = s.parts * segments * segment_length(s, trans, p.dtype) if s.parts > 1 else 0
    flags = (_CONJ if ar.op_conjugates(view_op) else 0) | (_READ_Y if p.read_y else 0)
    if cm.vector_loads(a, shift, p.dtype.itemsize):
        flags |= _VEC
    keep = [a.arr]
    x_ptr, incx = cm.vector_args(p, p.x, p.inner, keep)
    if cols is not None and cm.x_vector_loads(x_ptr, incx, shift, p.dtype.itemsize):
        flags |= _XVEC  # x's elements aligned as A's rows: 16-byte loads of both
    y_ptr, incy = cm.vector_args(p, p.y if p.read_y else None, p.rows, keep)
    o_ptr, inco = cm.vector_args(p, target, p.rows, keep)
    args = (cm.A_PTR, np.int64(a.ld), np.int32(a.rows), np.int32(a.cols), np.int32(shift),
            cm.X_PTR, incx, cm.Y_PTR if p.read_y else np.uint64(0), incy, cm.OUT_PTR, inco, cm.ALPHA, cm.BETA,
            np.int32(flags), np.int32(parts), cm.WORK, cm.COUNTERS)
    step = cm.launch_step(SOURCE, name, grid, threads, args, p.dtype)
    recipe = cm.Recipe((step,), work, segments if work else 0, p.rows, p.dtype)
    return recipe, (a.base, x_ptr, y_ptr, o_ptr), keep
