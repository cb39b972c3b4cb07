"""batched: linear algebra on many small matrices at once on NVIDIA GPUs.

CuPy arrays (and anything exposing ``__cuda_array_interface__`` or DLPack) run
on the GPU on the current stream; NumPy arrays run on the CPU backend.

Routines
--------
gemv, gemm            batched BLAS on stacked arrays (..., m, n) or lists
PointerBatch          same-shape matrices behind a device pointer array
VariableBatch         matrices of different shapes
GemvSetting, GemmSetting   kernel settings, for ``setting=``
"""

from ._arrays import SUPPORTED_DTYPES, gpu_available
from ._batch import PointerBatch, VariableBatch
from .gemm import gemm
from .gemv import gemv
from .settings import GEMM_SETTINGS, GEMV_SETTINGS, GemmSetting, GemvSetting

__version__ = "0.1.0"

__all__ = ["GEMM_SETTINGS", "GEMV_SETTINGS", "GemmSetting", "GemvSetting", "PointerBatch",
           "SUPPORTED_DTYPES", "VariableBatch", "gemm", "gemv", "gpu_available"]
