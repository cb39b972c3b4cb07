"""batched: linear algebra on many small matrices at once on NVIDIA GPUs.

CuPy arrays (and anything exposing ``__cuda_array_interface__`` or DLPack) run
on the GPU on the current stream; NumPy arrays run on the CPU backend.

Routines
--------
gemv, gemm            batched BLAS on stacked arrays (..., m, n) or lists
PointerBatch          same-shape matrices behind a device pointer array
VariableBatch         matrices of different shapes
GemvSetting, GemmSetting   kernel settings, for ``setting=``
kblas                 GEMV/SYMV/HEMV on one large matrix (kblas.gemv, kblas.symv, kblas.hemv)
trsv, solve_triangular     batched triangular solves (BLAS / SciPy semantics); TrsvSetting
nrm2, asum, iamax, dot, dotc, scal, axpy   batched BLAS-1 over the last axis; VectorSetting
solve, inv, lu_factor, lu_solve  LU with partial pivoting (NumPy / SciPy semantics, stacked)
getrf, getrs, gesv    LAPACK's LU factor, solve and factor-and-solve (one launch for n <= 64); LuSetting
cholesky, cho_factor, cho_solve   Cholesky (NumPy / SciPy semantics, stacked)
potrf, potrs, posv    LAPACK's Cholesky factor, solve and factor-and-solve (one launch for n <= 32);
                      CholeskySetting
gebrd, orgbr          bidiagonal reduction (LAPACK's compact output) and Q / P^H from its reflectors;
                      GebrdSetting
qr, lstsq             Householder QR; minimum-norm least squares by the SVD (any shape and rank)
geqrf, orgqr, gels    LAPACK's QR, Q from its reflectors, least squares by QR; QrSetting
svd, svdvals          batched SVD (NumPy's (U, S, Vh) order) and singular values: GEBRD -> ORGBR -> BDSQR;
                      small real matrices (up to 32 x 32) by one-sided Jacobi on the GPU (GesvjSetting),
                      their values alone (10-32 in double, 17-32 in float) by GEBRD in registers + dqds
                      (DqdsSetting)
bdsqr                 SVD of real bidiagonal matrices, rotations applied to u / vt; BdsqrSetting

Every routine above also accepts a ``dask.array.Array`` chunked along the batch
axes (matrix axes whole) and returns Dask arrays, one task per chunk; NumPy
chunks run on the CPU, CuPy chunks on the GPU (``pip install "batched[dask]"``).
"""

from ._arrays import SUPPORTED_DTYPES, gpu_available
from ._batch import PointerBatch, VariableBatch
from .gemm import gemm
from .gemv import gemv
from .settings import GEMM_SETTINGS, GEMV_SETTINGS, GemmSetting, GemvSetting
from . import kblas  # noqa: E402  (after gemv: its CPU backend reuses batched.gemv)
from .vector import VECTOR_SETTINGS, VectorSetting, asum, axpy, dot, dotc, iamax, nrm2, scal
from .factorizations.settings import TRSV_SETTINGS, TrsvSetting, pipelined_trsv_setting
from .factorizations.trsv import solve_triangular, trsv
from .factorizations.lu_settings import LU_SETTINGS, LuSetting
from .factorizations.lu import gesv, getrf, getrs, inv, lu_factor, lu_solve, solve
from .factorizations.cholesky_settings import CHOLESKY_SETTINGS, CholeskySetting
from .factorizations.cholesky import cho_factor, cho_solve, cholesky, posv, potrf, potrs
from .factorizations.gebrd_settings import GEBRD_SETTINGS, GebrdSetting
from .factorizations.gebrd import gebrd, orgbr
from .factorizations.qr_settings import QR_SETTINGS, QrSetting
from .factorizations.qr import gels, geqrf, lstsq, orgqr, qr
from .factorizations.svd_settings import (BDSQR_SETTINGS, DQDS_SETTINGS, GESVJ_SETTINGS, BdsqrSetting,
                                          DqdsSetting, GesvjSetting)
from .factorizations.bdsqr import bdsqr
from .factorizations import gesvj as _gesvj  # noqa: F401  (registers the Jacobi kernels)
from .factorizations import svdvals_lanes as _svdvals_lanes  # noqa: F401  (registers the dqds kernels)
from .factorizations.svd import svd, svdvals
from . import _dask

# Every batched routine also takes Dask arrays chunked along the batch axes
# (batched/_dask.py); a non-Dask call pays one type check.
for _name, _spec in _dask.SPECS.items():
    globals()[_name] = _dask.dask_aware(globals()[_name], _spec)
del _name, _spec

__version__ = "0.1.0"

__all__ = ["GEMM_SETTINGS", "GEMV_SETTINGS", "GemmSetting", "GemvSetting", "PointerBatch",
           "SUPPORTED_DTYPES", "VariableBatch", "gemm", "gemv", "gpu_available",
           "TRSV_SETTINGS", "TrsvSetting", "pipelined_trsv_setting", "solve_triangular", "trsv",
           "VECTOR_SETTINGS", "VectorSetting", "asum", "axpy", "dot", "dotc", "iamax", "kblas", "nrm2",
           "scal",
           "CHOLESKY_SETTINGS", "CholeskySetting", "cho_factor", "cho_solve", "cholesky", "posv", "potrf",
           "potrs", "GEBRD_SETTINGS", "GebrdSetting", "gebrd", "orgbr",
           "QR_SETTINGS", "QrSetting", "gels", "geqrf", "lstsq", "orgqr", "qr",
           "LU_SETTINGS", "LuSetting", "gesv", "getrf", "getrs", "inv", "lu_factor", "lu_solve", "solve",
           "BDSQR_SETTINGS", "BdsqrSetting", "DQDS_SETTINGS", "DqdsSetting", "GESVJ_SETTINGS", "GesvjSetting",
           "bdsqr", "svd", "svdvals"]
