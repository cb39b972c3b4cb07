"""Componentwise error ratios for the BLAS-level routines.

Every helper takes NumPy arrays (move CuPy results back first), computes the
reference in float64 / complex128, and returns the largest ratio of the error
to its a-priori bound.  A correct result gives a ratio well under 30 (the
LAPACK testers' threshold); an element that is NaN or Inf where the reference
is finite gives ``inf``.

The bound is the inner-product bound of Higham, *Accuracy and Stability of
Numerical Algorithms* (2nd ed.), eq. (3.5) and Section 3.5:

    |fl(x^T y) - x^T y| <= gamma_k |x|^T |y|,   gamma_k = k u / (1 - k u),

applied to each output element of alpha * op(A) x + beta * y; the scaling by
alpha and the addition of beta * y add two more roundings, so k + 2 stands
where Higham has k (cf. Higham Section 3.5, matrix multiplication, and the
bound MAGMA's and the reference BLAS testers check).  Complex arithmetic
multiplies the constant by at most a small factor (Higham Section 3.6,
sqrt(2) gamma_2 per complex product), which the threshold of 30 absorbs.
We use eps = 2u of the result's precision (float32 eps for float32 and
complex64 results).
"""

from __future__ import annotations

import numpy as np


def _wide(a):
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _op(a, trans: str):
    t = str(trans).upper()
    if t == "N":
        return a
    at = np.swapaxes(a, -1, -2)
    return at.conj() if t == "C" else at


def _eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _ratio(result, ref, bound, dtype) -> float:
    """max |result - ref| / (bound + tiny), with non-finite mismatches as inf."""
    result = np.asarray(result)
    if result.shape != ref.shape:
        raise AssertionError(f"result has shape {result.shape}, reference {ref.shape}")
    if result.size == 0:
        return 0.0
    tiny = float(np.finfo(np.dtype(dtype)).tiny)
    res = _wide(result)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(res - ref)
        ratio = err / (bound + tiny)
    ref_finite = np.isfinite(ref)
    res_finite = np.isfinite(res)
    # NaN/Inf where the reference is finite: an unwritten (poisoned) or broken element.
    ratio = np.where(ref_finite & ~res_finite, np.inf, ratio)
    # Where the reference itself is not finite the result must match it exactly
    # (NaN for NaN, the same infinity for an infinity).
    same_nonfinite = (np.isnan(ref) & np.isnan(res)) | (np.isinf(ref) & (res == ref))
    ratio = np.where(~ref_finite, np.where(same_nonfinite, 0.0, np.inf), ratio)
    return float(np.max(ratio))


def gemv_reference(A, x, y, alpha, beta, trans):
    """alpha * op(A) x + beta * y in float64/complex128 with BLAS's scalar rules
    (y not read when beta == 0, A and x not read when alpha == 0), plus the
    componentwise bound's magnitude |alpha| |op(A)| |x| + |beta| |y| and k."""
    opA = _op(_wide(A), trans)
    xw = _wide(x)
    k = opA.shape[-1]
    rows = opA.shape[-2]
    batch = np.broadcast_shapes(opA.shape[:-2], xw.shape[:-1])
    shape = (*batch, rows)
    if alpha == 0 or k == 0:
        ref = np.zeros(shape, dtype=np.result_type(opA, xw))
        mag = np.zeros(shape)
    else:
        ref = np.broadcast_to(alpha * np.matmul(opA, xw[..., None])[..., 0], shape)
        mag = np.broadcast_to(abs(alpha) * np.matmul(np.abs(opA), np.abs(xw)[..., None])[..., 0], shape)
    if y is not None and beta != 0:
        yw = _wide(y)
        ref = ref + beta * yw
        mag = mag + abs(beta) * np.abs(yw)
    return np.broadcast_to(ref, shape), np.broadcast_to(mag, shape), k


def gemv_error_ratio(result, A, x, y, alpha, beta, trans) -> float:
    """max_i |result_i - ref_i| / ((k + 2) eps (|alpha| (|op(A)| |x|)_i + |beta| |y_i|) + tiny).

    Bound: Higham, Accuracy and Stability of Numerical Algorithms, eq. (3.5),
    |fl(x^T y) - x^T y| <= gamma_k |x|^T |y|, per output row of op(A) x, with
    two more roundings for alpha and the beta * y update (hence k + 2).
    """
    result = np.asarray(result)
    ref, mag, k = gemv_reference(A, x, y, alpha, beta, trans)
    return _ratio(result, ref, (k + 2) * _eps(result.dtype) * mag, result.dtype)


def gemm_reference(A, B, C, alpha, beta, transa, transb):
    """alpha * op(A) op(B) + beta * C in float64/complex128 with BLAS's scalar
    rules, plus |alpha| |op(A)| |op(B)| + |beta| |C| and k."""
    opA = _op(_wide(A), transa)
    opB = _op(_wide(B), transb)
    k = opA.shape[-1]
    batch = np.broadcast_shapes(opA.shape[:-2], opB.shape[:-2])
    shape = (*batch, opA.shape[-2], opB.shape[-1])
    if alpha == 0 or k == 0:
        ref = np.zeros(shape, dtype=np.result_type(opA, opB))
        mag = np.zeros(shape)
    else:
        ref = np.broadcast_to(alpha * np.matmul(opA, opB), shape)
        mag = np.broadcast_to(abs(alpha) * np.matmul(np.abs(opA), np.abs(opB)), shape)
    if C is not None and beta != 0:
        Cw = _wide(C)
        ref = ref + beta * Cw
        mag = mag + abs(beta) * np.abs(Cw)
    return np.broadcast_to(ref, shape), np.broadcast_to(mag, shape), k


def gemm_error_ratio(result, A, B, C, alpha, beta, transa, transb) -> float:
    """max_ij |R_ij - ref_ij| / ((k + 2) eps (|alpha| (|op(A)| |op(B)|)_ij + |beta| |C_ij|) + tiny).

    Bound: Higham, Accuracy and Stability of Numerical Algorithms, eq. (3.5)
    applied to each entry (an inner product of length k), i.e. the matrix
    multiplication bound |fl(AB) - AB| <= gamma_k |A| |B| of Section 3.5, with
    two more roundings for alpha and the beta * C update (hence k + 2).
    """
    result = np.asarray(result)
    ref, mag, k = gemm_reference(A, B, C, alpha, beta, transa, transb)
    return _ratio(result, ref, (k + 2) * _eps(result.dtype) * mag, result.dtype)


def trsv_backward_error(X, A, B, lower: bool, trans, unit: bool) -> float:
    """max over matrices and columns of ||b - op(T) x||_1 / (||op(T)||_1 ||x||_1 n eps).

    T is the triangle of A that the solve reads (unit diagonal when ``unit``);
    X and B are (..., n, k).  The normalized residual of LAPACK's xTRT02 (the
    tester of xTRTRS), whose threshold is 30; a backward-stable substitution
    (Higham, Accuracy and Stability, Theorem 8.5: (T + dT) x = b with
    |dT| <= gamma_n |T|) keeps it O(1) whatever T's condition number.  A
    non-finite x where b and T are finite gives ``inf``.
    """
    X = np.asarray(X)
    eps = _eps(X.dtype)
    A, Xw, Bw = _wide(A), _wide(X), _wide(B)
    n = A.shape[-1]
    if n == 0 or Xw.size == 0:
        return 0.0
    T = np.tril(A) if lower else np.triu(A)
    if unit:
        T = T.copy()
        T[..., np.arange(n), np.arange(n)] = 1
    opT = _op(T, {0: "N", 1: "T", 2: "C"}.get(trans, trans))
    with np.errstate(invalid="ignore", over="ignore"):
        R = Bw - np.matmul(opT, Xw)
        rnorm = np.abs(R).sum(axis=-2)                        # (..., k)
        xnorm = np.abs(Xw).sum(axis=-2)
        anorm = np.abs(opT).sum(axis=-2).max(axis=-1)[..., None]
        ratio = rnorm / (np.maximum(anorm * xnorm, np.finfo(np.float64).tiny) * n * eps)
    ratio = np.where(np.isfinite(Xw).all(axis=-2), ratio, np.inf)
    return float(np.max(ratio)) if ratio.size else 0.0
