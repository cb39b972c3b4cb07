"""Batched factorizations and solvers (TRSV, LU, Cholesky, QR, GEBRD, SVD).

Installed as ``batched.factorizations``; the drivers land here issue by issue
(see ../DESIGN.md), built on the device functions of ``batched.device_functions``.
"""
