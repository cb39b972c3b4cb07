"""Hypothesis strategies shared by the routine tests.

Cases are drawn as plain NumPy data plus a description of how each operand is
laid out in memory; ``Case.args(xp)`` builds the operands on a backend with
that layout (CuPy does not keep arbitrary strides through ``asarray``, so the
layout is recreated on the device with the same view operations).

Sizes cross every tile edge of the shipped settings (4, 8, 16, 32, 64) on both
sides, plus 0 and 1; batch shapes cover (), (0,), (1,), (b,), (b1, b2) with
broadcasting between operands; layouts cover C order, per-matrix F order,
sliced views with a leading dimension larger than the matrix, and negative
strides.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, field

import numpy as np
from hypothesis import Phase, settings
from hypothesis import strategies as st

# One profile for every property test: moderate counts keep the CPU suite short.
# BATCHED_EXAMPLES=N changes the count (e.g. a first, quick pass on a GPU);
# BATCHED_NO_SHRINK=1 reports the first failing example as drawn (shrinking big
# GPU cases can take minutes of device time).
SETTINGS = settings(max_examples=int(os.environ.get("BATCHED_EXAMPLES", 60)), deadline=None,
                    phases=[p for p in Phase if not (p is Phase.shrink and os.environ.get("BATCHED_NO_SHRINK"))])

EDGES = (0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)
MAX_DIM = 70

DTYPES = tuple(np.dtype(d) for d in (np.float32, np.float64, np.complex64, np.complex128))
REAL_SCALARS = (0.0, 1.0, -1.5, 0.5, 2.0)
COMPLEX_SCALARS = (1j, 0.5 - 2j, -1.5 + 0.25j)

# Memory layouts of a stacked matrix operand (see ``arrange``).
MATRIX_LAYOUTS = ("C", "F", "rows_sliced", "sub_F", "batch_reversed", "rows_reversed")
# Memory layouts of a stacked vector operand.
VECTOR_LAYOUTS = ("C", "strided", "reversed", "batch_reversed")


def dtypes():
    return st.sampled_from(DTYPES)


def trans_letters():
    return st.sampled_from("NTCntc")


def dims(max_value: int = MAX_DIM):
    """A matrix dimension: a tile edge (either side of it) or anything in 0..max."""
    return st.one_of(st.sampled_from(EDGES), st.integers(0, max_value))


def batch_shapes():
    return st.one_of(
        st.just(()), st.just((0,)), st.just((1,)),
        st.tuples(st.integers(2, 6)),
        st.tuples(st.integers(1, 3), st.integers(1, 4)),
    )


@st.composite
def broadcast_pair(draw, batch=None):
    """Two batch shapes that broadcast together, e.g. (3, 1) and (4,)."""
    batch = draw(batch_shapes()) if batch is None else batch

    def one():
        drop = draw(st.integers(0, len(batch)))
        kept = batch[drop:]
        return tuple(1 if draw(st.booleans()) and d != 0 else d for d in kept)

    return one(), one()


def operand_dtypes(draw, count: int):
    """dtypes of ``count`` operands: usually one, sometimes mixed precisions of
    one kind (float32 with float64, complex64 with complex128)."""
    base = draw(dtypes())
    if not draw(st.booleans()) or draw(st.booleans()):
        return [base] * count
    kind = [d for d in DTYPES if d.kind == base.kind]
    return [draw(st.sampled_from(kind)) for _ in range(count)]


def scalars(dtype):
    """alpha / beta: 0, 1, -1.5, ... and complex values for complex operands."""
    real = st.one_of(st.sampled_from(REAL_SCALARS), st.floats(-3, 3, allow_nan=False, width=32))
    if np.dtype(dtype).kind != "c":
        return real
    return st.one_of(real, st.sampled_from(COMPLEX_SCALARS),
                     st.complex_numbers(max_magnitude=3, allow_nan=False, allow_infinity=False))


def random_array(rng, shape, dtype):
    """Standard normal entries (real and imaginary parts) of ``dtype``."""
    dtype = np.dtype(dtype)
    a = rng.standard_normal(shape)
    if dtype.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


# --- layouts -------------------------------------------------------------------


def arrange(xp, a, layout: str, core: int = 2):
    """``a`` (NumPy) on backend ``xp`` with the memory layout ``layout``; the
    values are equal to ``a``, the strides are the point.  ``core`` is 2 for a
    stack of matrices and 1 for a stack of vectors.

    Padding around sliced views is NaN, so a kernel that reads outside its
    operand shows up in the result.
    """
    a = np.asarray(a)
    nan = np.nan
    # always a fresh buffer: the caller may write the result into it
    dev = lambda v: xp.asarray(np.array(v, order="C", copy=True))  # noqa: E731
    if layout == "C":
        return xp.ascontiguousarray(dev(a))
    if layout == "F":  # per-matrix column-major (batch still outermost)
        if core == 1:
            return dev(a)
        return xp.swapaxes(xp.ascontiguousarray(xp.swapaxes(dev(a), -1, -2)), -1, -2)
    if layout == "rows_sliced":  # every other row of a C-ordered array, one column offset
        m, n = a.shape[-2:]
        big = xp.full((*a.shape[:-2], 2 * m, n + 3), nan, dtype=a.dtype)
        big[..., ::2, 1:n + 1] = dev(a)
        return big[..., ::2, 1:n + 1]
    if layout == "sub_F":  # a block of bigger column-major matrices (ld > m)
        m, n = a.shape[-2:]
        big = xp.swapaxes(xp.full((*a.shape[:-2], n, m + 5), nan, dtype=a.dtype), -1, -2)
        big[..., 2:m + 2, :] = dev(a)
        return big[..., 2:m + 2, :]
    if layout == "batch_reversed":  # negative stride between the matrices (vectors)
        if a.ndim <= core:
            return dev(a)
        return dev(a[::-1])[::-1]
    if layout == "rows_reversed":  # negative stride between the rows of each matrix
        return dev(a[..., ::-1, :])[..., ::-1, :]
    if layout == "strided":  # vectors: increment 2, NaN between
        n = a.shape[-1]
        big = xp.full((*a.shape[:-1], 2 * n + 1), nan, dtype=a.dtype)
        big[..., 1::2] = dev(a)
        return big[..., 1::2]
    if layout == "reversed":  # vectors: increment -1
        return dev(a[..., ::-1])[..., ::-1]
    raise ValueError(f"unknown layout {layout!r}")


def poisoned(xp, shape, dtype, layout: str = "C", core: int = 2):
    """An output buffer of ``shape`` filled with NaN, laid out as ``layout``."""
    return arrange(xp, np.full(shape, np.nan, dtype=dtype), layout, core)


# --- GEMV ----------------------------------------------------------------------


@dataclass
class GemvCase:
    A: np.ndarray
    x: np.ndarray
    y: np.ndarray | None
    alpha: complex
    beta: complex
    trans: str
    layouts: dict = field(default_factory=dict)

    @property
    def dtype(self):
        return np.result_type(*[v.dtype for v in (self.A, self.x, self.y) if v is not None])

    @property
    def shape(self):
        A = self.A
        rows = A.shape[-2] if self.trans.upper() == "N" else A.shape[-1]
        return (*np.broadcast_shapes(A.shape[:-2], self.x.shape[:-1]), rows)

    def args(self, xp):
        """(A, x, y) on ``xp`` in this case's layouts."""
        y = None if self.y is None else arrange(xp, self.y, self.layouts["y"], core=1)
        return arrange(xp, self.A, self.layouts["A"]), arrange(xp, self.x, self.layouts["x"], core=1), y

    def out(self, xp):
        return poisoned(xp, self.shape, self.dtype, self.layouts["out"], core=1)

    def __repr__(self):
        return (f"GemvCase(A{self.A.shape} {self.A.dtype}, x{self.x.shape} {self.x.dtype}, "
                f"y{None if self.y is None else (self.y.shape, str(self.y.dtype))}, "
                f"alpha={self.alpha!r}, beta={self.beta!r}, trans={self.trans!r}, {self.layouts})")


@st.composite
def gemv_cases(draw):
    m, n = draw(dims()), draw(dims())
    trans = draw(trans_letters())
    rows, inner = (m, n) if trans.upper() == "N" else (n, m)
    batch_a, batch_x = draw(broadcast_pair())
    with_y = draw(st.booleans())
    dt_a, dt_x, dt_y = operand_dtypes(draw, 3)
    dtype = np.result_type(dt_a, dt_x, *([dt_y] if with_y else []))
    alpha, beta = draw(scalars(dtype)), draw(scalars(dtype))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    A = random_array(rng, (*batch_a, m, n), dt_a)
    x = random_array(rng, (*batch_x, inner), dt_x)
    batch = np.broadcast_shapes(batch_a, batch_x)
    y = None
    if with_y:  # y broadcasts over the batch (dropped leading dims or 1s)
        drop = draw(st.integers(0, len(batch)))
        y = random_array(rng, (*batch[drop:], rows), dt_y)
    layouts = {"A": draw(st.sampled_from(MATRIX_LAYOUTS)), "x": draw(st.sampled_from(VECTOR_LAYOUTS)),
               "y": draw(st.sampled_from(VECTOR_LAYOUTS)),
               "out": draw(st.sampled_from(("C", "strided", "reversed")))}
    return GemvCase(A, x, y, alpha, beta, trans, layouts)


# (first, second, added) operand dtypes of a mixed-precision call (None: no added
# operand); the result promotes like numpy.result_type.
MIXED_DTYPES = [
    (np.float32, np.float64, None), (np.float64, np.float32, np.float32),
    (np.float32, np.float32, np.float64), (np.complex64, np.complex128, None),
    (np.complex128, np.complex64, np.complex64), (np.float32, np.complex64, None),
    (np.float64, np.complex64, np.float32),
]


# --- GEMM ----------------------------------------------------------------------


@dataclass
class GemmCase:
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray | None
    alpha: complex
    beta: complex
    transa: str
    transb: str
    layouts: dict = field(default_factory=dict)

    @property
    def dtype(self):
        return np.result_type(*[v.dtype for v in (self.A, self.B, self.C) if v is not None])

    @property
    def shape(self):
        m = self.A.shape[-2] if self.transa.upper() == "N" else self.A.shape[-1]
        n = self.B.shape[-1] if self.transb.upper() == "N" else self.B.shape[-2]
        return (*np.broadcast_shapes(self.A.shape[:-2], self.B.shape[:-2]), m, n)

    def args(self, xp):
        C = None if self.C is None else arrange(xp, self.C, self.layouts["C"])
        return arrange(xp, self.A, self.layouts["A"]), arrange(xp, self.B, self.layouts["B"]), C

    def out(self, xp):
        return poisoned(xp, self.shape, self.dtype, self.layouts["out"])

    def __repr__(self):
        return (f"GemmCase(A{self.A.shape} {self.A.dtype}, B{self.B.shape} {self.B.dtype}, "
                f"C{None if self.C is None else (self.C.shape, str(self.C.dtype))}, "
                f"alpha={self.alpha!r}, beta={self.beta!r}, transa={self.transa!r}, "
                f"transb={self.transb!r}, {self.layouts})")


@st.composite
def gemm_cases(draw):
    m, n, k = draw(dims()), draw(dims()), draw(dims())
    transa, transb = draw(trans_letters()), draw(trans_letters())
    batch_a, batch_b = draw(broadcast_pair())
    with_c = draw(st.booleans())
    dt_a, dt_b, dt_c = operand_dtypes(draw, 3)
    dtype = np.result_type(dt_a, dt_b, *([dt_c] if with_c else []))
    alpha, beta = draw(scalars(dtype)), draw(scalars(dtype))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    A = random_array(rng, (*batch_a, *((m, k) if transa.upper() == "N" else (k, m))), dt_a)
    B = random_array(rng, (*batch_b, *((k, n) if transb.upper() == "N" else (n, k))), dt_b)
    batch = np.broadcast_shapes(batch_a, batch_b)
    C = None
    if with_c:
        drop = draw(st.integers(0, len(batch)))
        C = random_array(rng, (*batch[drop:], m, n), dt_c)
    layouts = {"A": draw(st.sampled_from(MATRIX_LAYOUTS)), "B": draw(st.sampled_from(MATRIX_LAYOUTS)),
               "C": draw(st.sampled_from(MATRIX_LAYOUTS)),
               "out": draw(st.sampled_from(("C", "F", "rows_sliced", "sub_F")))}
    return GemmCase(A, B, C, alpha, beta, transa, transb, layouts)


# --- lists ---------------------------------------------------------------------


@st.composite
def variable_shapes(draw, max_count: int = 12, max_dim: int = 40):
    """Shapes (m, n) in 0..max_dim of a variable-size batch (possibly empty)."""
    count = draw(st.integers(0, max_count))
    return [(draw(st.integers(0, max_dim)), draw(st.integers(0, max_dim))) for _ in range(count)]


# --- SYMV / HEMV ------------------------------------------------------------------


def triangle_with_nan(rng, n, dtype, lower, hermitian):
    """(stored matrix with NaN in the unread triangle, the full float64 reference).
    A Hermitian input also carries garbage imaginary parts on its diagonal."""
    dtype = np.dtype(dtype)
    a = random_array(rng, (n, n), dtype)
    mask = np.tril(np.ones((n, n), bool), -1) if lower else np.triu(np.ones((n, n), bool), 1)
    wide = a.astype(np.complex128 if dtype.kind == "c" else np.float64)
    strict = np.where(mask, wide, 0)
    diag = np.diagonal(wide).real if hermitian else np.diagonal(wide)
    full = strict + (strict.conj().T if hermitian else strict.T) + np.diag(diag)
    stored = a.copy()
    stored[~mask & ~np.eye(n, dtype=bool)] = np.nan
    return stored, full


# --- TRSV ----------------------------------------------------------------------

# Triangular matrix kinds (MAGMA-tester style names).
TRI_KINDS = ("tri_rand", "tri_dominant", "tri_graded", "tri_scaled_ufl", "tri_scaled_ofl")
# Sizes around the diagonal tiles (4, 8, 16, 32) and GEMV passes; the GPU tests add
# the recursive design's window edges (256, 512) separately.
TRSV_EDGES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)


def triangular(rng, batch, n, dtype, kind: str, lower: bool):
    """Square matrices (batch..., n, n) whose triangle is of ``kind``; the other
    triangle is NaN, so a solver that reads it fails.

    tri_rand: off-diagonal N(0, 1/n), diagonal +-[1, 2] (moderate growth).
    tri_dominant: diagonal larger than its row's off-diagonal sum.
    tri_graded: diagonal graded over 10^(0 .. -p) (p = 3 single, 8 double), each
        row scaled with its diagonal (T = D (I + N)), so the condition number is
        10^p but the solution stays representable in single precision (an
        unscaled N grows x by about 10^p per step); a backward-stable solve keeps
        its residual small.
    tri_scaled_ufl / tri_scaled_ofl: tri_rand scaled near under/overflow.
    """
    dtype = np.dtype(dtype)
    A = random_array(rng, (*batch, n, n), dtype) / np.sqrt(max(n, 1))
    sign = np.where(rng.random((*batch, n)) < 0.5, -1.0, 1.0)
    idx = np.arange(n)
    mag = 1 + rng.random((*batch, n))
    if kind == "tri_dominant":
        mag = mag + np.abs(A).sum(axis=-1)
    elif kind == "tri_graded":
        p = 3 if dtype in (np.float32, np.complex64) else 8
        mag = mag * 10.0 ** (-np.linspace(0, p, n))
        A = A * mag[..., :, None]
    A[..., idx, idx] = (sign * mag).astype(dtype)
    if kind in ("tri_scaled_ufl", "tri_scaled_ofl"):
        fi = np.finfo(dtype)
        scale = float(fi.tiny) * 2**20 if kind == "tri_scaled_ufl" else float(fi.max) / 2**20 / max(n, 1)
        A = (A * scale).astype(dtype)
    mask = np.tril(np.ones((n, n), bool), -1) if not lower else np.triu(np.ones((n, n), bool), 1)
    A[..., mask] = np.nan
    return A.astype(dtype)


@dataclass
class TrsvCase:
    A: np.ndarray
    B: np.ndarray
    lower: bool
    trans: object
    unit: bool
    kind: str
    layouts: dict = field(default_factory=dict)

    @property
    def vectors(self):
        return self.B.ndim == 1 or self.B.shape == self.A.shape[:-1]

    def args(self, xp):
        core = 1 if self.vectors else 2
        return arrange(xp, self.A, self.layouts["A"]), arrange(xp, self.B, self.layouts["B"], core)

    def as_matrices(self):
        """(A, B) with B as (..., n, k) broadcast to the full batch (for residuals)."""
        B = self.B[..., None] if self.vectors else self.B
        batch = np.broadcast_shapes(self.A.shape[:-2], B.shape[:-2])
        return self.A, np.broadcast_to(B, (*batch, *B.shape[-2:]))

    def __repr__(self):
        return (f"TrsvCase(A{self.A.shape} {self.A.dtype}, B{self.B.shape} {self.B.dtype}, "
                f"lower={self.lower}, trans={self.trans!r}, unit={self.unit}, {self.kind}, {self.layouts})")


@st.composite
def trsv_cases(draw, sizes=None):
    n = draw(st.sampled_from(TRSV_EDGES) if sizes is None else sizes)
    dt_a, dt_b = operand_dtypes(draw, 2)
    lower, unit = draw(st.booleans()), draw(st.booleans())
    trans = draw(st.sampled_from((0, 1, 2, "N", "T", "C", "n", "t", "c")))
    kind = draw(st.sampled_from(TRI_KINDS))
    if unit and kind in ("tri_scaled_ufl", "tri_scaled_ofl"):
        kind = "tri_rand"  # a unit diagonal with scaled off-diagonal entries over/underflows x itself
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch_a, batch_b = draw(broadcast_pair())
    form = draw(st.sampled_from(("vectors", "one", "matrix")))
    A = triangular(rng, batch_a, n, dt_a, kind, lower)
    if form == "vectors":
        B = random_array(rng, A.shape[:-1], dt_b)
    elif form == "one":
        B = random_array(rng, (n,), dt_b)
    else:
        B = random_array(rng, (*batch_b, n, draw(st.integers(1, 8))), dt_b)
    layouts = {"A": draw(st.sampled_from(MATRIX_LAYOUTS)),
               "B": draw(st.sampled_from(VECTOR_LAYOUTS if form != "matrix" else MATRIX_LAYOUTS))}
    return TrsvCase(A, B, lower, trans, unit, kind, layouts)
