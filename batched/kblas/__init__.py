"""batched.kblas: GEMV, SYMV and HEMV on ONE large matrix (KBLAS design).

The matrix is cut into nb x nb tiles; thread blocks walk a block row (GEMV-N)
or a block column (GEMV-T, SYMV/HEMV) with the tiles double buffered in
registers, several blocks sharing a long walk.  SYMV/HEMV read only one
triangle, each off-diagonal tile once, and use it twice.  Column-major input
is native, row-major input runs through the transposition identities, and
submatrix views at any offset keep aligned reads.  NumPy arrays run on the CPU
backend with the same API.

Routines
--------
gemv(A, x, y=None, *, alpha=1, beta=0, trans='N', out=None, setting=None)
symv(A, x, y=None, *, alpha=1, beta=0, lower=True, out=None, setting=None)
hemv(A, x, y=None, *, alpha=1, beta=0, lower=True, out=None, setting=None)
KblasSetting, KBLAS_SETTINGS, choose_kblas_setting
"""

from .gemv import gemv
from .settings import KBLAS_SETTINGS, KblasSetting, choose_kblas_setting
from .symv import hemv, symv

__all__ = ["KBLAS_SETTINGS", "KblasSetting", "choose_kblas_setting", "gemv", "hemv", "symv"]
