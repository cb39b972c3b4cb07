"""batched.kblas: GEMV, SYMV and HEMV on ONE large matrix (KBLAS design).

The matrix is cut into nb x nb tiles; thread blocks walk a block row (GEMV-N)
or a block column (GEMV-T, SYMV/HEMV) with the tiles double buffered in
registers, several blocks sharing a long walk.  SYMV/HEMV read only one
triangle, each off-diagonal tile once, and use it twice; a short one (at most
64 MiB) runs in strips instead, a block per few outputs reading its block row
and block column (every element twice, no atomics).  Column-major input
is native, row-major input runs through the transposition identities, and
submatrix views at any offset keep aligned reads.  NumPy arrays run on the CPU
backend with the same API.

Routines
--------
gemv(A, x, y=None, *, alpha=1, beta=0, trans='N', out=None, setting=None)
symv(A, x, y=None, *, alpha=1, beta=0, lower=True, out=None, setting=None)
hemv(A, x, y=None, *, alpha=1, beta=0, lower=True, out=None, setting=None)
KblasSetting, KBLAS_SETTINGS, choose_kblas_setting
KblasRowsSetting, KBLAS_ROWS_SETTINGS, KblasColsSetting, KBLAS_COLS_SETTINGS (GEMV in one pass, short matrices;
    KblasRowsSetting is also the shape of SYMV/HEMV's strips)

Several GPUs of one host
------------------------
DistributedMatrix   one matrix in the 1D block-cyclic column layout over devices
distribute(A, devices=None, nb=None)   make one from a NumPy or CuPy array
DistributedMatrix.from_function / .random   fill each device's blocks in place
gemv, symv and hemv accept a DistributedMatrix as A (batched.kblas.mgpu).
Host placeholders (``devices=3`` or ``['cpu'] * 3``) run the same layout and
reduction with NumPy.
"""

from .distributed import DistributedMatrix, distribute
from .gemv import gemv
from .settings import (KBLAS_COLS_SETTINGS, KBLAS_ROWS_SETTINGS, KBLAS_SETTINGS, KblasColsSetting, KblasRowsSetting,
                       KblasSetting, choose_kblas_setting)
from .symv import hemv, symv

from . import mgpu  # noqa: E402,F401  (registers the multi-GPU kernels)

__all__ = ["KBLAS_COLS_SETTINGS", "KBLAS_ROWS_SETTINGS", "KBLAS_SETTINGS", "DistributedMatrix", "KblasColsSetting",
           "KblasRowsSetting", "KblasSetting",
           "choose_kblas_setting", "distribute",
           "gemv", "hemv", "symv"]
