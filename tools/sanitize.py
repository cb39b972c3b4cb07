"""Small GPU cases for compute-sanitizer (memcheck, racecheck) over every kernel.

Run as ``compute-sanitizer --tool memcheck --error-exitcode 1 python3 tools/sanitize.py``.
CuPy's memory pool is off so that every allocation is its own, and an
out-of-bounds access is caught at the allocation's edge.  Cases: batch 1 and
65,537; n in {0, 1, 31, 32, 33}; matrices at misaligned offsets (views that
start one element into a buffer); beta = 0 with an uninitialized y; every
registered setting forced once; the three layouts.  ``--only=blas,trsv,cholesky``
runs some sections (default all), each followed by a synchronize and a line; the LU
section's parts (``lu_tiles``, ``lu_regs``, ``lu_blocks``, ``lu_pipeline``) and the
Cholesky section's blocked settings (``cholesky_blocked``) and the trsv section's BLAS-1
vector calls (``vector``) run alone the same way, for racecheck within one device call.
"""

import itertools
import sys

import cupy as cp
import numpy as np

import batched as bt
from batched.factorizations.settings import TRSV_STAGED, TRSV_THREAD
from batched.settings import PACKED_SETTING

cp.cuda.set_allocator(None)
rng = np.random.default_rng(7)
quick = "--quick" in sys.argv
# racecheck is slow: --race keeps batches small and still forces every setting once.
race = "--race" in sys.argv


def rand(shape, dtype, offset=1):
    """A random array that starts `offset` elements into a larger allocation."""
    size = int(np.prod(shape))
    flat = cp.asarray(rng.standard_normal(size + offset)).astype(dtype)
    return flat[offset:].reshape(shape)


checks = 0


def section_blas():
    # batched.gemv and batched.gemm: every layout, setting and trans letter.
    global checks
    for dtype in (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES:
        for n in (0, 1, 31, 32, 33):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and n > 1 and n != 33:
                    continue
                for trans in "NTC":
                    A = rand((batch, n, n + 1), dtype)
                    x = rand((batch, (n + 1) if trans == "N" else n), dtype)
                    rows = n if trans == "N" else n + 1
                    y = cp.empty((batch, rows), dtype)  # uninitialized: beta = 0 must not read it
                    bt.gemv(A, x, y, beta=0.0, trans=trans)
                    bt.gemv(A, x, rand((batch, rows), dtype), alpha=0.5, beta=2.0, trans=trans)
                    checks += 2
                B = rand((batch, n + 1, n), dtype)
                bt.gemm(A, B, cp.empty((batch, n, n), dtype), beta=0.0)
                bt.gemm(A, B.swapaxes(-1, -2), rand((batch, n, n), dtype), beta=1.0, transb="C")
                checks += 2
        A = rand((5, 33, 17), dtype)
        for s in bt.GEMV_SETTINGS:
            for trans in "NT":
                x = rand((5, 17 if trans == "N" else 33), dtype)
                bt.gemv(A, x, trans=trans, setting=s)
                checks += 1
        # The packed kernel: 1, 8 and 32 pieces a column, columns of op(A) past one chunk of
        # loads, beta = 0 with an uninitialized y; one element into its buffer it runs the twin.
        for pieces in (1, 8, 32):
            rows = pieces * 16 // np.dtype(dtype).itemsize
            for offset in (0, 1):
                P = rand((3, 8 * 32 // pieces + 3, rows), dtype, offset=offset)
                for trans in "NC":
                    x = rand((3, P.shape[-1] if trans == "N" else P.shape[-2]), dtype)
                    y = cp.empty((3, P.shape[-2] if trans == "N" else P.shape[-1]), dtype)
                    bt.gemv(P, x, y, beta=0.0, trans=trans, setting=PACKED_SETTING)
                    bt.gemv([P[i] for i in range(3)], x, y, beta=0.0, trans=trans, setting=PACKED_SETTING)
                    checks += 2
        # Tall tiles past their edges: unchecked interiors and 16-byte loads, C and F
        # views one element into their buffers, list members at other offsets.
        big = rand((2, 300, 131), dtype)
        for s in (s for s in bt.GEMV_SETTINGS if s.tall):
            for view in (big, big.swapaxes(-1, -2)):
                for trans in "NT":
                    x = rand((2, view.shape[-1] if trans == "N" else view.shape[-2]), dtype)
                    y = cp.empty((2, view.shape[-2] if trans == "N" else view.shape[-1]), dtype)
                    bt.gemv(view, x, y, beta=0.0, trans=trans, setting=s)
                    bt.gemv([view[0], rand(view.shape[1:], dtype, offset=3)], x, trans=trans, setting=s)
                    checks += 2
        # Every GEMM setting on edge tiles, and on whole tiles beside edge ones (the tensor-core
        # 64 x 64 tile's stores without bound tests, beta = 0 with an uninitialized C and
        # beta = 1), one element into its buffer.
        wide = rand((2, 130, 40), dtype, offset=1)
        for s in bt.GEMM_SETTINGS:
            bt.gemm(A, rand((5, 17, 70), dtype), setting=s)
            bt.gemm(wide, rand((2, 40, 67), dtype), cp.empty((2, 130, 67), dtype), beta=0.0, setting=s)
            bt.gemm(wide, rand((2, 67, 40), dtype), rand((2, 130, 67), dtype), beta=1.0, transb="T", setting=s)
            checks += 3
        mats = [rand((int(rng.integers(0, 40)), int(rng.integers(0, 40))), dtype) for _ in range(33)]
        vecs = [rand((m.shape[1],), dtype) for m in mats]
        bt.gemv(mats, vecs)
        bt.gemv(bt.PointerBatch([rand((9, 4), dtype) for _ in range(33)]), rand((33, 4), dtype))
        bt.gemm(mats, [rand((m.shape[1], 3), dtype) for m in mats])
        checks += 3
        # Every small-group setting forced on the variable list and on a pointer batch of
        # misaligned members: their kernels are register-capped (gemv_min_blocks).
        pb = bt.PointerBatch([rand((9, 4), dtype, offset=1) for _ in range(33)])
        for s in (s for s in bt.GEMV_SETTINGS if not s.tall and s.group_threads <= 32):
            for trans in "NT":
                inner = [m.shape[1] if trans == "N" else m.shape[0] for m in mats]
                bt.gemv(mats, [rand((k,), dtype) for k in inner], trans=trans, setting=s)
                bt.gemv(pb, rand((33, 4 if trans == "N" else 9), dtype), trans=trans, setting=s)
                checks += 2



def section_kblas():
    # batched.kblas: one large matrix.  Misaligned views (rand's offset, and views
    # inside a parent), n around a block edge, beta = 0 with an uninitialized y,
    # both triangles, N/T/C, every (nb, q) forced with one and several parts.
    global checks
    kblas_dtypes = (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES
    for dtype in kblas_dtypes:
        for n in (0, 1, 31, 32, 33, 70):
            parent = rand((n + 20, n + 19), dtype, offset=3)
            for A in (parent[:n, :n], parent[17:17 + n, 1:1 + n], parent[1:1 + n, :n].T):
                for trans in "NTC":
                    bt.kblas.gemv(A, rand((n,), dtype), cp.empty(n, dtype), beta=0.0, trans=trans)
                    bt.kblas.gemv(A, rand((2 * n,), dtype)[::2], rand((n,), dtype), alpha=0.5, beta=2.0, trans=trans)
                    checks += 2
                for lower in (True, False):
                    bt.kblas.symv(A, rand((n,), dtype), cp.empty(n, dtype), beta=0.0, lower=lower)
                    bt.kblas.hemv(A, rand((n,), dtype), rand((n,), dtype), beta=-1.0, lower=lower)
                    checks += 2
        for base in bt.kblas.KBLAS_SETTINGS:
            for routine in ("gemv", "symv"):
                if not base.fits(routine, dtype):
                    continue
                for parts in (1, 3):
                    n = base.nb + 1
                    A = rand((n, n), dtype, offset=5)
                    s = base.with_parts(parts)
                    if routine == "gemv":
                        for trans in "NT":
                            bt.kblas.gemv(A, rand((n,), dtype), trans=trans, setting=s)
                            checks += 1
                        # The tall tiles: interior ones, 16-byte loads (even order) and not, both kernels
                        for tall in (2 * base.tall_rows(dtype) + 40, 2 * base.tall_rows(dtype) + 37):
                            B = rand((tall, tall), dtype, offset=5)  # C order: its 'N' runs the T kernel
                            for view, trans in ((B, "N"), (B.T, "T"), (B.T, "N"), (B, "T")):
                                bt.kblas.gemv(view, rand((tall,), dtype), cp.empty(tall, dtype), trans=trans,
                                              setting=s)
                                checks += 1
                    else:
                        for lower in (True, False):
                            bt.kblas.hemv(A, rand((n,), dtype), lower=lower, setting=s)
                            checks += 1
        # SYMV/HEMV's strips, forced (and chosen by default for the small orders above):
        # orders around a block's rows, views at offsets, both triangles and orders,
        # beta = 0 with an uninitialized y, strided x
        for s in bt.kblas.KBLAS_ROWS_SETTINGS:
            rows = s.rows(dtype)
            for n in (1, rows - 1, rows + 1, 3 * rows + 5):
                parent = rand((n + 20, n + 19), dtype, offset=3)
                for A in (parent[:n, :n], parent[17:17 + n, 1:1 + n], parent[1:1 + n, :n].T):
                    for lower in (True, False):
                        bt.kblas.symv(A, rand((n,), dtype), cp.empty(n, dtype), beta=0.0, lower=lower, setting=s)
                        bt.kblas.hemv(A, rand((2 * n,), dtype)[::2], rand((n,), dtype), beta=-1.0, lower=lower,
                                      setting=s)
                        checks += 2
        # The one-pass GEMV-N, forced (and chosen by default at 1000 x 1003): fewer rows than
        # a block's and several blocks, masked first and last blocks (views one and 17
        # rows in), columns past an unroll, column-major views with 'N' and row-major
        # ones with 'T' and 'C', beta = 0 with an uninitialized y, strided x
        for s in bt.kblas.KBLAS_ROWS_SETTINGS:
            for n in (1, 9, 33, 300):
                fparent = rand((n + 1100, n + 20), dtype, offset=3).T  # column-major
                cparent = rand((n + 20, n + 19), dtype, offset=1)       # row-major
                for A, trans in ((fparent[:n, :n + 1000], "N"), (fparent[17:17 + n, 1:1 + n], "N"),
                                 (cparent[1:1 + n, :n], "T"), (cparent[3:3 + n, 2:2 + n], "C")):
                    cols, rows = A.shape[::-1] if trans == "N" else A.shape
                    bt.kblas.gemv(A, rand((cols,), dtype), cp.empty(rows, dtype), beta=0.0, trans=trans, setting=s)
                    bt.kblas.gemv(A, rand((2 * cols,), dtype)[::2], rand((rows,), dtype), alpha=0.5, beta=2.0,
                                  trans=trans, setting=s)
                    checks += 2
        # The one-pass GEMV-T (a warp per column), forced: the same views with the other ops,
        # x contiguous (16-byte loads where aligned) and strided
        for s in bt.kblas.KBLAS_COLS_SETTINGS:
            for n in (1, 9, 33, 300):
                fparent = rand((n + 20, n + 1100), dtype, offset=3).T  # column-major, n + 1100 rows
                cparent = rand((n + 20, n + 19), dtype, offset=1)
                for A, trans in ((fparent[:n + 1000, :n], "T"), (fparent[17:17 + n, 1:1 + n], "C"),
                                 (cparent[1:1 + n, :n], "N"), (cparent[3:3 + n, 2:2 + n], "N")):
                    cols, rows = A.shape[::-1] if trans == "N" else A.shape
                    bt.kblas.gemv(A, rand((cols,), dtype, offset=0), cp.empty(rows, dtype), beta=0.0, trans=trans,
                                  setting=s)
                    bt.kblas.gemv(A, rand((2 * cols,), dtype)[::2], rand((rows,), dtype), alpha=0.5, beta=2.0,
                                  trans=trans, setting=s)
                    checks += 2
        if not race:
            A = cp.asfortranarray(rand((1000, 1003), dtype))
            bt.kblas.gemv(A, rand((1003,), dtype), cp.empty(1000, dtype), beta=0.0)
            bt.kblas.gemv(A, rand((1000,), dtype, offset=0), cp.empty(1003, dtype), beta=0.0, trans="T")
            checks += 2



def section_mgpu():
    # batched.kblas on a DistributedMatrix over every visible GPU (GPU 0 alone
    # on a one-GPU machine, which still runs the multi-GPU kernels with one
    # part; with four, n = 33 leaves GPUs without a block at nb = 32 and 64).
    # n around the block width, beta = 0 with an uninitialized y, both
    # triangles, every SYMV setting that fits (tile divides nb), x on each GPU.
    global checks
    devices = list(range(cp.cuda.runtime.getDeviceCount()))
    for dtype in (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES:
        for n in (0, 1, 31, 32, 33, 65, 200):
            for nb in (32, 64):
                D = bt.kblas.distribute(cp.asnumpy(rand((n, n), dtype)), devices=devices, nb=nb)
                for dev in devices:
                    with cp.cuda.Device(dev):
                        x = rand((n,), dtype)
                        for trans in "NTC":
                            bt.kblas.gemv(D, x, cp.empty(n, dtype), beta=0.0, trans=trans)
                            checks += 1
                        for lower in (True, False):
                            bt.kblas.symv(D, x, cp.empty(n, dtype), beta=0.0, lower=lower)
                            bt.kblas.hemv(D, x, rand((n,), dtype), beta=-1.0, lower=lower)
                            checks += 2
        D = bt.kblas.distribute(cp.asnumpy(rand((130, 130), dtype)), devices=devices, nb=64)
        with cp.cuda.Device(0):
            for base in bt.kblas.KBLAS_SETTINGS:
                if base.fits("symv", dtype) and 64 % base.nb == 0:
                    for parts in (1, 3):
                        for lower in (True, False):
                            bt.kblas.hemv(D, rand((130,), dtype), lower=lower, setting=base.with_parts(parts))
                            checks += 1
    for dev in devices:
        cp.cuda.Device(dev).synchronize()


def section_trsv():
    # batched.trsv / solve_triangular and the BLAS-1 vector kernels.  n around the tile
    # edges (31/32/33) and, for the recursive design, past its window (257); batch 1 and
    # 65,537; misaligned views; every TrsvSetting and VectorSetting forced once; three
    # layouts; a zero diagonal (the check path copies B); vectors of length 0/1/31/33.
    global checks
    trsv_dtypes = (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES
    # the pipelined design in a real type too, whatever trsv_dtypes holds (a transposing
    # op's diagonal tile goes through warp_transpose32 only there): 100 unknowns, 4 tiles
    # in rounds of 2, 4 and 8 warps (idle warps), both ops, a zero diagonal on the check path
    P = rand((3, 100, 100), np.float64) + 200 * cp.eye(100)
    P[2, 40, 40] = 0
    for s in bt.TRSV_SETTINGS:
        if s.pipelined:
            for lower, trans in ((True, "N"), (False, "N"), (True, "T")):
                bt.solve_triangular(P, rand((3, 100), np.float64), lower=lower, trans=trans, check=False, setting=s)
                checks += 1
    # the 16-byte row pieces of the 32-lane tile (n = 20, 32; 101 and 128 take the designs
    # past it on the same operands): aligned C-ordered 'N' and F-ordered 'C', the
    # allocation ending with the last matrix
    for dtype in (np.float32,) if race else (np.float32, np.float64, np.complex64):
        for n in (20, 32, 101, 128):
            for batch in (1, 3) if race or n > 32 else (1, 65537):
                A = rand((batch, n, n), dtype, offset=0) + 4 * cp.eye(n, dtype=dtype)
                for lower in (True, False):
                    bt.trsv(A, rand((batch, n), dtype), lower=lower, trans="N")
                    bt.trsv(cp.swapaxes(A, -1, -2), rand((batch, n), dtype), lower=lower, trans="C")
                    checks += 2
    for dtype in trsv_dtypes:
        for n in (0, 1, 31, 32, 33):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and n not in (1, 33):
                    continue
                A = rand((batch, n, n), dtype) + 4 * cp.eye(n, dtype=dtype)
                for lower in (True, False):
                    for trans in "NTC":
                        bt.trsv(A, rand((batch, n), dtype), lower=lower, trans=trans)
                        bt.solve_triangular(A, rand((batch, n, 2), dtype), lower=lower, trans=trans,
                                            unit_diagonal=True, check=False)
                        checks += 2
        A = rand((3, 300, 300), dtype) + 600 * cp.eye(300, dtype=dtype)
        A[1, 7, 7] = 0
        for s in bt.TRSV_SETTINGS:
            if s.max_unknowns is not None:  # the thread and staged designs: below
                continue
            for lower, trans in ((True, "N"), (False, "T")):
                bt.solve_triangular(A, rand((3, 300), dtype), lower=lower, trans=trans, check=False, setting=s)
                checks += 1
        # the thread design: both instantiations with n == NB (16-byte pieces where aligned:
        # offset 0; elements at offset 1) and n < NB (0, 1, 7, 9, 15), b and x in pieces (one
        # right-hand side, aligned) or not
        _limited_design_calls(dtype, TRSV_THREAD, (0, 1, 7, 8, 9, 15, 16), (0, 1, 7, 8, 9, 15, 16))
        # the staged design: bulk copies (offset 0: aligned columns, n whole 16-byte pieces,
        # the allocation ending with the last matrix) and copies by loads (offset 1, n = 31
        # and 33 in 8-byte types); one and two tiles (33, 64)
        _limited_design_calls(dtype, TRSV_STAGED, (1, 31, 32, 33, 64), (32, 33, 64))
        # the single-tile kernel (n <= the group): a zero diagonal on the check path, lists
        T = rand((3, 20, 20), dtype) + 40 * cp.eye(20, dtype=dtype)
        T[1, 5, 5] = 0
        for s in bt.TRSV_SETTINGS:
            if s.single_tile(20):
                bt.solve_triangular(T, rand((3, 20, 2), dtype), lower=False, trans="C", check=False, setting=s)
                checks += 1
        mats = [rand((m, m), dtype) + 2 * m * cp.eye(m, dtype=dtype) for m in rng.integers(0, 33, 33)]
        bt.solve_triangular(mats, [rand((m.shape[0], 2), dtype) for m in mats], check=False)
        mats = [rand((m, m), dtype) + 2 * m * cp.eye(m, dtype=dtype) for m in rng.integers(0, 70, 33)]
        bt.solve_triangular(mats, [rand((m.shape[0], 2), dtype) for m in mats], check=False)
        checks += 1
        bt.trsv(bt.PointerBatch([rand((40, 40), dtype) + 80 * cp.eye(40, dtype=dtype) for _ in range(33)]),
                rand((33, 40), dtype))
        checks += 2
        _vector_calls(dtype)


def _limited_design_calls(dtype, setting, sizes, large_batch_sizes):
    # a design with max_unknowns forced at `sizes` (batch 1, and 65,537 at
    # large_batch_sizes), at offsets 0 and 1, every op on C- and F-ordered views, a zero
    # diagonal on the check path; then pointer and variable lists up to its largest n
    global checks
    for n in sizes:
        for batch in (1, 3) if race else (1, 65537):
            if batch > 1 and n not in large_batch_sizes:
                continue
            for offset in (0, 1):
                A = rand((batch, n, n), dtype, offset=offset) + 2 * max(n, 2) * cp.eye(n, dtype=dtype)
                if n and batch > 1:
                    A[1, n // 2, n // 2] = 0
                for lower in (True, False):
                    for trans in "NTC":
                        bt.trsv(A, rand((batch, n), dtype, offset=offset), lower=lower, trans=trans, setting=setting)
                        bt.trsv(cp.swapaxes(A, -1, -2), rand((batch, n), dtype), lower=lower, trans=trans,
                                setting=setting)
                        bt.solve_triangular(A, rand((batch, n, 2), dtype), lower=lower, trans=trans, check=False,
                                            setting=setting)
                        checks += 3
    most = setting.max_unknowns
    mats = [rand((m, m), dtype) + 2 * m * cp.eye(m, dtype=dtype) for m in rng.integers(0, most + 1, 33)]
    bt.solve_triangular(mats, [rand((m.shape[0], 2), dtype) for m in mats], check=False, setting=setting)
    bt.trsv(bt.PointerBatch([rand((most, most), dtype) + 2 * most * cp.eye(most, dtype=dtype) for _ in range(33)]),
            rand((33, most), dtype), setting=setting)
    checks += 2


def _vector_calls(dtype):
    # every VectorSetting forced on vectors of length 0/1/10/12/31/33 (10 and 12: the
    # 2-lane group's lengths), batch 1 and 65,537, x one element and y three into their
    # buffers; then nrm2's second pass (Blue's accumulators, entries past the mid range)
    # at offsets 0-3 elements (every head before the first 16-byte boundary)
    global checks
    for n in (0, 1, 10, 12, 31, 33):
        for batch in (1, 3) if race else (1, 65537):
            x, y = rand((batch, n), dtype), rand((batch, n), dtype, offset=3)
            for s in bt.VECTOR_SETTINGS:
                for fn in (bt.nrm2, bt.asum, bt.iamax):
                    fn(x, setting=s)
                bt.dot(x, y, setting=s)
                bt.dotc(x, y, setting=s)
                bt.scal(rand((batch,), dtype), x, setting=s)
                bt.axpy(2.0, x, y, setting=s)
                checks += 7
        huge, tiny = (1e300, 1e-300) if np.finfo(dtype).dtype == np.float64 else (1e30, 1e-30)
        for offset in range(4):
            x = rand((3, n), dtype, offset=offset) * cp.asarray([1.0, huge, tiny], dtype=dtype)[:, None]
            for s in bt.VECTOR_SETTINGS:
                bt.nrm2(x, setting=s)
                checks += 1


def section_vector():
    # the BLAS-1 vector kernels alone (section_trsv runs the same calls)
    for dtype in (np.float32, np.complex128) if race or quick else bt.SUPPORTED_DTYPES:
        _vector_calls(dtype)


def spd(batch, n, dtype):
    """Hermitian positive definite matrices at a misaligned offset."""
    X = rand((*batch, n, n), dtype)
    return X @ X.conj().swapaxes(-1, -2) + n * cp.eye(n, dtype=dtype)


def _cholesky_dtypes():
    # (racecheck: float64 too, for the rows design's real-only paths: the staged copy into U
    # and b's element beside each pivot row)
    return (np.float64, np.complex128) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES


def _failing_spd(dtype):
    """Three 70 x 70 Hermitian positive definite matrices, the second not (column 41)."""
    A = spd((3,), 70, dtype)
    A[1, 40, 40] = -1
    return A


def _cholesky_blocked(dtype, A):
    # the blocked settings on A (3 x 70 x 70, the second failing at column 41) and on
    # 200 x 200 (trailing updates with more tiles than warps), both triangles
    global checks
    B = spd((2,), 200, dtype)
    for s in bt.CHOLESKY_SETTINGS:
        if s.design == "blocked":
            for lower in (True, False):
                bt.potrf(A, lower=lower, setting=s)
                bt.potrf(B, lower=lower, setting=s)
                checks += 2


def section_cholesky_blocked():
    for dtype in _cholesky_dtypes():
        _cholesky_blocked(dtype, _failing_spd(dtype))


def section_cholesky():
    # potrf / posv / cholesky: n around the fused designs' edges and the blocked panel
    # (32); batch 1 and 65,537; both triangles; a failing matrix (its solve copies B);
    # every setting forced where it fits; lists.
    global checks
    for dtype in _cholesky_dtypes():
        for n in (0, 1, 31, 32, 33):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and n not in (1, 33):
                    continue
                A = spd((batch,), n, dtype)
                for lower in (True, False):
                    bt.potrf(A, lower=lower)
                    bt.posv(A, rand((batch, n), dtype), lower=lower)
                    checks += 2
        A = _failing_spd(dtype)
        for s in bt.CHOLESKY_SETTINGS:
            if s.register or s.design == "blocked":
                continue
            for lower in (True, False):
                bt.potrf(A if s.group_threads > 32 else A[:, :20, :20], lower=lower, setting=s)
                checks += 1
        _cholesky_blocked(dtype, A)
        mats = [spd((), int(m), dtype) for m in rng.integers(0, 40, 33)]
        bt.potrf(mats)
        bt.posv(bt.PointerBatch([spd((), 20, dtype) for _ in range(33)]), rand((33, 20), dtype))
        checks += 2
        # the thread and rows designs on their sizes: packed C and F batches (thread: staged;
        # the factor and the one right-hand side through the pipeline), sliced rows and two
        # right-hand sides (direct), a failing matrix, a partial last chunk or warp,
        # cholesky's zeroed triangle, lists
        # the warps design (a block per matrix in registers): also sizes across the lanes' rows
        # (31 .. 33), batch 65,537 only for nb = 64 at n <= 33
        for s in bt.CHOLESKY_SETTINGS:
            if not s.register or not s.compiled_for(np.dtype(dtype).itemsize):
                continue
            for n in (1, 31, 32, 33, s.nb - 1, s.nb) if s.warps else (1, s.nb - 1, s.nb):
                big = s.warps and (s.nb > 64 or n > 33)
                for batch in (1, 3) if race or big else (1, 130, 65537):
                    T = spd((batch,), n, dtype)
                    T[0, n - 1, n - 1] = -1                 # info = n (or 1), X = B
                    for lower in (True, False):
                        bt.potrf(T, lower=lower, setting=s)
                        bt.posv(T, rand((batch, n), dtype), lower=lower, setting=s)
                    bt.posv(cp.swapaxes(T, -1, -2), rand((batch, n), dtype), setting=s)
                    S = spd((batch,), n + 1, dtype)[:, :n, :n]   # sliced: direct accesses
                    bt.posv(S, rand((batch, n, 2), dtype), setting=s)
                    bt.cholesky(T, check=False)
                    checks += 7
            mats = [spd((), int(m), dtype) for m in rng.integers(0, s.nb + 1, 33)]
            bt.potrf(mats, setting=s)
            bt.posv(mats, [rand((m.shape[0],), dtype) for m in mats], setting=s)
            checks += 2
    # the thread design's pipeline across turns (double-buffered at 4 x 4, late at 8 x 8)
    for s in bt.CHOLESKY_SETTINGS:
        if s.thread:
            T = spd((200_001,), s.nb, np.float64)
            bt.posv(T, rand((200_001, s.nb), np.float64), setting=s)
            bt.potrf(T, setting=s)
            checks += 2


def section_gebrd():
    # gebrd / orgbr: square, tall and wide; sizes around warp edges; batch 1 and 65,537;
    # every setting forced (staged and in device memory); lists.
    global checks
    dtypes = (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES
    for dtype in dtypes:
        for m, n in ((0, 0), (1, 1), (31, 33), (33, 31), (32, 32), (1, 5), (5, 1)):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and max(m, n) > 5:
                    continue
                a, d, e, tq, tp, _ = bt.gebrd(rand((batch, m, n), dtype))
                bt.orgbr("Q", a, tq, full_matrices=True)
                bt.orgbr("P", a, tp)
                checks += 3
        for s in bt.GEBRD_SETTINGS:
            if s.lanes or s.cluster > 1:
                continue
            bt.gebrd(rand((2, 70, 45), dtype), setting=s)
            bt.gebrd(rand((2, 45, 70), dtype), setting=s)
            checks += 2
        bt.gebrd([rand((int(m), int(n)), dtype) for m, n in rng.integers(0, 40, (33, 2))])
        checks += 1
    section_gebrd_lanes()
    section_gebrd_cluster()


def section_gebrd_cluster():
    # the blocked design on clusters of 2-8 blocks (the panel's rows and columns split, X and Y
    # shared in device memory): several panels and a tail, one panel, no panel (n <= nb), tall
    # and wide, more matrices than clusters, lists of mixed shapes
    global checks
    from batched.factorizations import gebrd_settings as gs
    from batched.factorizations.gebrd_settings import CLUSTER_SETTINGS
    for dtype in (np.complex64,) if race else (np.float64, np.complex64):
        for s in CLUSTER_SETTINGS:
            for (m, n), batch in (((70, 45), 1), ((33, 17), 2), ((40, 16), 1), ((45, 70), 1), ((17, 33), 1), ((36, 34), 20)):
                bt.gebrd(rand((batch, m, n), dtype), setting=s)
                checks += 1
            bt.gebrd([rand((int(m), int(n)), dtype) for m, n in ((50, 40), (30, 60), (0, 4), (18, 17))], setting=s)
            checks += 1
        # LABRD's panel GEMVs in the shape the default does not take at these sizes
        # (gebrd_settings.narrow_gemv_for: a thread a row, or the 32 x 8 shape), one block
        # and a cluster
        default = gs.NARROW_GEMV
        gs.NARROW_GEMV = not gs.narrow_gemv_for(70, 45)
        try:
            for s in (gs.DEFAULT_BLOCKED, CLUSTER_SETTINGS[1]):
                bt.gebrd(rand((2, 70, 45), dtype), setting=s)
                bt.gebrd(rand((1, 45, 70), dtype), setting=s)
                checks += 2
        finally:
            gs.NARROW_GEMV = default


def section_gebrd_lanes():
    # the lanes design (real types): every group at and below its size, tall and wide (the
    # transposed view's strided stores and, in groups of 32, the dealt copy), a group's walk
    # over several matrices (batch 65,537: the next matrix's copy in flight), NaN matrices, lists
    global checks
    for dtype in (np.float64,) if race else (np.float32, np.float64):
        for s in bt.GEBRD_SETTINGS:
            if not s.lanes:
                continue
            g = s.dim_x
            for m, n in ((g, g), (g, g - 3), (g - 3, g), (1, g), (g, 1)):
                for batch in (1, 3) if race else (1, 65537):
                    if batch > 1 and (m, n) != (g, g - 3):
                        continue
                    a = rand((batch, m, n), dtype)
                    if batch > 1:
                        a[batch // 2, 0, 0] = np.nan  # one bad matrix among reduced ones
                    bt.gebrd(a, setting=s)
                    checks += 1
            bt.gebrd([rand((int(m), int(n)), dtype) for m, n in rng.integers(0, g + 1, (9, 2))], setting=s)
            checks += 1


def _lu_dtypes():
    # (racecheck: every dtype: float64 and float32 for the rows design's real-only paths, the
    # staged copy into U and b's element beside each pivot row; float32 and complex64 for the
    # panels design's register layouts, which differ by element size)
    return (np.float32, np.complex128) if quick and not race else bt.SUPPORTED_DTYPES


def section_lu_tiles():
    # n around the fused tiles and the blocked panels, every fused and blocked setting
    # forced where it fits, solve / inv / variable-size lists
    global checks
    for dtype in _lu_dtypes():
        for n in (0, 1, 31, 32, 33):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and n not in (1, 33):
                    continue
                A = rand((batch, n, n), dtype)
                bt.getrf(A)
                bt.gesv(A, rand((batch, n), dtype))
                bt.getrf(rand((batch, n, n + 3), dtype))
                checks += 3
        A = rand((3, 70, 70), dtype)
        A[1, :, 40] = 0
        for s in bt.LU_SETTINGS:
            if s.thread or s.rows or s.cols or not s.compiled_for(np.dtype(dtype).itemsize):
                continue
            n = min(s.nb, 70) if s.fused or s.warps or s.panels else 70
            bt.getrf(A[:, :n, :n], setting=s)
            bt.gesv(A[:, :n, :n], rand((3, n, 2), dtype), setting=s)
            checks += 2
        bt.solve(rand((33, 20, 20), dtype) + 20 * cp.eye(20, dtype=dtype), rand((33, 20), dtype))
        bt.inv(rand((5, 9, 9), dtype) + 9 * cp.eye(9, dtype=dtype))
        mats = [rand((int(m), int(m)), dtype) for m in rng.integers(0, 40, 33)]
        bt.getrf(mats)
        checks += 3


def section_lu_regs():
    # the thread, rows and cols settings (registers) on their own sizes
    global checks
    for dtype in _lu_dtypes():
        for s in bt.LU_SETTINGS:
            if not (s.thread or s.rows or s.cols) or not s.compiled_for(np.dtype(dtype).itemsize):
                continue
            for n in (1, s.nb - 1, s.nb):
                for batch in (1, 3) if race else (1, 130, 65537):
                    T = rand((batch, n, n), dtype)
                    T[0, :, n - 1] = 0                      # singular: info = n, X = B
                    bt.getrf(T, setting=s)                  # C order: staged, transposed view
                    bt.gesv(T, rand((batch, n), dtype), setting=s)
                    F = cp.swapaxes(T, -1, -2)              # F order: staged, no transposition
                    bt.gesv(F, rand((batch, n), dtype), setting=s)
                    bt.getrf(rand((batch, n, max(1, n - 1)), dtype), setting=s)  # rectangular
                    S = rand((batch, n + 1, n), dtype)[:, :n, :]  # sliced rows: direct accesses
                    bt.gesv(S, rand((batch, n, 2), dtype), setting=s)
                    checks += 5
                    if s.rows or s.thread or s.cols:  # 16-byte aligned C order (rand's default is one element in): rows'
                        # staged copy; the thread design's direct kernel (n = NB)
                        T0 = rand((batch, n, n), dtype, offset=0)
                        T0[0, :, n - 1] = 0
                        bt.getrf(T0, setting=s)
                        bt.gesv(T0, rand((batch, n), dtype, offset=0), setting=s)
                        checks += 2
            mats = [rand((int(m), int(m)), dtype) for m in rng.integers(0, s.nb + 1, 33)]
            bt.gesv(mats, [rand((m.shape[0],), dtype) for m in mats], setting=s)
            checks += 1


def section_lu_blocks():
    # the warps and panels settings (a block per matrix): sizes across the lanes' rows
    # (31 .. 33) and the panels, batch 65,537 for NB = 64, the same accesses as lu_regs;
    # the panels design's riding right-hand side (column n of the matrix, NB: the
    # vector past it) with and without the factors
    global checks
    for dtype in _lu_dtypes():
        for s in bt.LU_SETTINGS:
            if not (s.warps or s.panels) or not s.compiled_for(np.dtype(dtype).itemsize):
                continue
            for n in (1, 31, 32, 33, s.nb - 1, s.nb):
                for batch in (1, 3) if race or s.nb > 64 or n > 33 else (1, 65537):
                    T = rand((batch, n, n), dtype)
                    T[0, :, n - 1] = 0                      # singular: info = n, X = B
                    bt.getrf(T, setting=s)                  # C order: transposed view
                    bt.gesv(cp.swapaxes(T, -1, -2), rand((batch, n), dtype), setting=s)  # F order
                    bt.getrf(rand((batch, n, max(1, n - 1)), dtype), setting=s)  # rectangular
                    S = rand((batch, n + 1, n), dtype)[:, :n, :]  # sliced rows, two right-hand sides
                    bt.gesv(S, rand((batch, n, 2), dtype), setting=s)
                    checks += 4
                    if s.panels:  # X alone (solve's flags); the first right-hand side rides as column n
                        from batched.factorizations import lu as lu_module
                        lu_module._gesv_arrays(T, rand((batch, n), dtype), False, False, s, want_factors=False)
                        checks += 1
            mats = [rand((int(m), int(m)), dtype) for m in rng.integers(0, s.nb + 1, 9)]
            bt.gesv(mats, [rand((m.shape[0],), dtype) for m in mats], setting=s)
            checks += 1


def section_lu_panels():
    # the panels design alone (racecheck of the whole lu_blocks ran past 150 s): its riding
    # right-hand side (X alone, and with the factors and a second right-hand side), GETRF;
    # n across the last panel and the lanes' rows, a singular matrix; the default settings
    # (NB = 96 up to 96, 128 above)
    global checks
    from batched.factorizations import lu as lu_module
    defaults = [x for x in bt.LU_SETTINGS if x.panels and x.threads == 256]
    for dtype, s in itertools.product((np.float64, np.float32, np.complex64), defaults):
        for n in (33, s.nb - 1, s.nb):
            T = rand((2, n, n), dtype)
            T[0, :, n - 1] = 0
            lu_module._gesv_arrays(T, rand((2, n), dtype), False, False, s, want_factors=False)
            bt.gesv(T, rand((2, n, 2), dtype), setting=s)
            bt.getrf(T, setting=s)
            checks += 3


def section_lu_pipeline():
    global checks
    # The thread design's pipeline across turns: 200,001 matrices, so that every warp of
    # the grid (capped at the resident blocks) takes several chunks, the last one partial.
    # Aligned (offset 0): the direct kernel's grid-stride loop over the same count.
    for s in bt.LU_SETTINGS:
        if s.thread:
            for offset in (1, 0):
                T = rand((200_001, s.nb, s.nb), np.float64, offset=offset)
                bt.gesv(T, rand((200_001, s.nb), np.float64, offset=offset), setting=s)
                bt.getrf(T, setting=s)
                checks += 2


def section_lu():
    # getrf / gesv / solve / inv: n around the fused tiles (4 ... 64) and the blocked
    # panels; rectangular getrf; batch 1 and 65,537; an exactly singular matrix (zero
    # pivot: no division, X = B); every setting forced where it fits; lists.  The thread
    # and rows settings (registers) on their own sizes: staged (thread: packed C and F
    # batches, one right-hand side) and direct (sliced rows, two right-hand sides)
    # accesses, a partial last block or warp, variable-size lists (mixed sizes in a warp).
    # Its parts run alone too (--only=lu_tiles,lu_regs,...): racecheck of the whole
    # section took more than 570 s on a cold kernel cache (session 31).
    section_lu_tiles()
    section_lu_regs()
    section_lu_blocks()
    section_lu_pipeline()


def section_lu_direct():
    # The rows and cols settings' direct kernels (GESV for X alone: packed NB x NB batches
    # at a 16-byte aligned address, one right-hand side; the rows design's with threshold
    # pivots and its rows left out of order), which gesv (factors wanted) never takes: C
    # and F order, batch 1, 3 and 65,537 (a partial last warp: groups past the batch
    # factor the identity), a singular matrix (X = B).
    global checks
    from batched.factorizations import lu as lu_module

    for dtype in (np.float32, np.float64):
        for s in bt.LU_SETTINGS:
            if not (s.rows or s.cols) or not s.compiled_for(np.dtype(dtype).itemsize) or \
                    (s.cols and np.dtype(dtype).itemsize != 4):
                continue
            n = s.nb
            for batch in (1, 3) if race else (1, 3, 65537):
                T = rand((batch, n, n), dtype, offset=0)
                T[0, :, n - 1] = 0                          # singular: info = n, X = B
                for A in (T, cp.swapaxes(T, -1, -2)):       # C and F order
                    b = rand((batch, n), dtype, offset=0)
                    kinds = []
                    launch = lu_module._launch_factor

                    def spy(layout, dt, setting, plan, args, kind=None):
                        kinds.append(kind)
                        return launch(layout, dt, setting, plan, args, kind)

                    lu_module._launch_factor = spy
                    try:
                        lu_module._gesv_arrays(A, b, False, False, s, want_factors=False)
                    finally:
                        lu_module._launch_factor = launch
                    assert kinds == ["direct"], (s, dtype, kinds)
                    checks += 1


def section_qr():
    # geqrf / orgqr / gels: tall, square and wide; batch 1 and 65,537; every design forced
    # (fused, blocked, global); a rank-deficient matrix for gels; lists.
    global checks
    dtypes = (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES
    for dtype in dtypes:
        for m, n in ((0, 0), (1, 1), (33, 31), (31, 33), (32, 32), (5, 1), (1, 5)):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and max(m, n) > 5:
                    continue
                qr, tau, _ = bt.geqrf(rand((batch, m, n), dtype))
                bt.orgqr(qr, tau)
                if m >= n:
                    bt.gels(rand((batch, m, n), dtype), rand((batch, m), dtype))
                checks += 3
        A = rand((3, 70, 45), dtype)
        A[1, :, 7] = 0
        for s in bt.QR_SETTINGS:
            bt.geqrf(A, setting=s)
            bt.gels(A, rand((3, 70, 2), dtype), setting=s)
            checks += 2
        bt.geqrf([rand((int(m), int(n)), dtype) for m, n in rng.integers(0, 40, (33, 2))])
        checks += 1


def section_svd():
    # bdsqr / svdvals / svd: k around a warp (31, 32, 33); batch 1 and 65,537; values and
    # vectors; lower bidiagonals; every setting forced; NaN input (info, no endless loop).
    global checks
    dtypes = (np.complex128,) if race else (np.float32, np.complex128) if quick else bt.SUPPORTED_DTYPES
    for dtype in dtypes:
        real = np.float32 if dtype in (np.float32, np.complex64) else np.float64
        for k in (0, 1, 31, 32, 33):
            for batch in (1, 3) if race else (1, 65537):
                if batch > 1 and k not in (1, 33):
                    continue
                d, e = rand((batch, k), real), rand((batch, max(k - 1, 0)), real)
                bt.bdsqr(d, e)
                bt.bdsqr(d, e, lower=True, u=rand((batch, k + 2, k), dtype), vt=rand((batch, k, k), dtype))
                checks += 2
        for s in bt.BDSQR_SETTINGS:
            bt.bdsqr(rand((3, 40), real), rand((3, 39), real), setting=s)
            checks += 1
        # the WIDE rotations (k >= BDSQR_WIDE_FROM): rows of u not a multiple of 32 or of
        # the pair chunk; values of k >= 64 in a small batch go a warp a matrix
        for k in (48, 70):
            d, e = rand((2, k), real), rand((2, k - 1), real)
            bt.bdsqr(d, e)
            for lower in (False, True):
                bt.bdsqr(d, e, lower=lower, u=rand((2, k + 35, k), dtype), vt=rand((2, k, 13), dtype))
            checks += 3
        A = rand((3, 20, 12), dtype)
        A[1, 3, 4] = np.nan
        bt.svdvals(A, check=False)
        bt.svd(A, check=False)
        bt.svd(A.swapaxes(-1, -2), full_matrices=True, check=False)
        checks += 3


def section_gesvj():
    # one-sided Jacobi values and vectors: every registered setting at its limits (k = cols, length =
    # rows_max, both orientations) and below (k in 0/1, odd k); batch 1 and 65,537 with
    # the default chooser at k = 31/32/33 (33 goes to the pipeline); NaN in one matrix;
    # max_sweeps = 0 (info, no endless loop).
    global checks
    for dtype in (np.float64,) if race else (np.float32, np.float64):
        for s in bt.GESVJ_SETTINGS:
            for m, n in {(s.rows_max, s.cols), (s.cols, s.rows_max), (1, 1), (s.cols - 1, s.cols - 1),
                         (s.rows_max, 1)}:
                bt.svdvals(rand((3, m, n), dtype), setting=s, check=False)
                bt.svd(rand((3, m, n), dtype), setting=s, check=False)
                checks += 2
        for k in (0, 1, 31, 32, 33):
            for batch in (1, 3) if race else (1, 65537):
                bt.svdvals(rand((batch, k, k), dtype), check=False)
                if k <= 32:   # 33 is the pipeline's (section svd)
                    bt.svd(rand((batch, k, k), dtype), check=False)
                    checks += 1
                checks += 1
        A = rand((5, 16, 16), dtype)
        A[2, 3, 4] = np.nan
        A[3] = 0   # every column below the floor: the completed basis
        bt.svdvals(A, check=False)
        bt.svd(A, check=False)
        bt.svdvals(A, setting=bt.GesvjSetting(16, 8, 2, max_sweeps=0), check=False)
        checks += 3


def section_dqds():
    # values by GEBRD in registers + dqds: every registered setting at its limits (both
    # orientations) and below (k = 1, odd k); batch 1 and 65,537 at k = 0/1/15/16/31/32;
    # NaN in one matrix; passes_per_value = 0 (info, no endless loop).
    global checks
    for dtype in (np.float64,) if race else (np.float32, np.float64):
        for s in bt.DQDS_SETTINGS:
            for m, n in {(s.group, s.cols), (s.cols, s.group), (1, 1), (s.cols - 1, s.cols - 1), (s.group, 1)}:
                bt.svdvals(rand((3, m, n), dtype), setting=s, check=False)
                checks += 1
            for k in (0, 1, s.cols - 1, s.cols):
                for batch in (1, 3) if race else (1, 65537):
                    bt.svdvals(rand((batch, k, k), dtype), setting=s, check=False)
                    checks += 1
        A = rand((5, 16, 16), dtype)
        A[2, 3, 4] = np.nan
        A[3] = 0
        bt.svdvals(A, setting=bt.DqdsSetting(16, 16), check=False)
        bt.svdvals(A, setting=bt.DqdsSetting(16, 16, passes_per_value=0), check=False)
        checks += 2


SECTIONS = {"blas": section_blas, "kblas": section_kblas, "mgpu": section_mgpu, "trsv": section_trsv,
            "lu": section_lu, "lu_direct": section_lu_direct, "cholesky": section_cholesky, "qr": section_qr, "gebrd": section_gebrd,
            "svd": section_svd, "gesvj": section_gesvj, "dqds": section_dqds}
# Parts of a section, for --only (not run by default: their section runs them).
PARTS = {"lu_tiles": section_lu_tiles, "lu_regs": section_lu_regs, "lu_blocks": section_lu_blocks,
         "lu_pipeline": section_lu_pipeline, "lu_panels": section_lu_panels,
         "cholesky_blocked": section_cholesky_blocked,
         "gebrd_lanes": section_gebrd_lanes, "gebrd_cluster": section_gebrd_cluster, "vector": section_vector}
only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), list(SECTIONS))
for name in only:
    (SECTIONS.get(name) or PARTS[name])()
    cp.cuda.Device().synchronize()
    print(f"sanitize: {name} done", flush=True)
cp.cuda.Device().synchronize()
print(f"sanitize: {checks} calls completed")
