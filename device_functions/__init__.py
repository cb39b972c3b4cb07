"""CUDA device-function templates (``*.cuh``) and the NVRTC build layer.

Header convention: every device function in this folder works on ONE matrix
with a group of threads, takes its shared memory from the caller, never reads
``blockIdx`` and documents Threads / Shared / Sync / Memory / Failure in the
comment above it (see ``gemv.cuh``).
"""

from .build import (BuildError, compile_options, compile_registered, get_kernel,
                    headers_digest, include_dirs, register, registered)

__all__ = ["BuildError", "compile_options", "compile_registered", "get_kernel",
           "headers_digest", "include_dirs", "register", "registered"]
