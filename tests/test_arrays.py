"""batched._arrays on the CPU: the exact widening cast that mixed-precision GPU calls
use instead of CuPy's (flushing) one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from batched import _arrays as ar

# float32 bit patterns of every class: zeros, the smallest and largest subnormals,
# the smallest normal, ordinary values, the largest finite, infinities, NaN
SPECIAL_BITS = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
                0x3F800000, 0xC0490FDB, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000]


def _exact_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@given(bits=st.lists(st.sampled_from(SPECIAL_BITS) | st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_widened_parts_equal_numpys_cast_bit_for_bit(bits):
    parts = np.array(bits, np.uint32).view(np.float32)
    wide = ar.widen_single_parts(parts, np)
    expect = parts.astype(np.float64)
    assert wide.dtype == np.float64
    assert np.array_equal(wide, expect, equal_nan=True)
    assert np.array_equal(np.signbit(wide), np.signbit(expect))   # -0.0 and negative subnormals


@pytest.mark.parametrize("src, dst", [(np.float32, np.float64), (np.complex64, np.complex128),
                                      (np.float32, np.complex128)])
@pytest.mark.parametrize("layout", ["C", "F", "swapped", "strided", "scalar"])
def test_widen_single_keeps_values_and_layout(src, dst, layout):
    rng = np.random.default_rng(3)
    shape = (3, 5, 4)
    bits = rng.integers(0, 2**32, size=(2, *shape), dtype=np.uint32)
    bits[..., ::3] &= np.uint32(0x807FFFFF)   # a third of the parts subnormal or zero
    parts = bits.view(np.float32)
    a = (parts[0] + 1j * parts[1]).astype(src) if np.dtype(src).kind == "c" else parts[0]
    a = {"C": a, "F": np.asfortranarray(a), "swapped": np.swapaxes(a, -1, -2), "strided": a[:, ::2, 1:],
         "scalar": a[0, 0, 0]}[layout]
    a = np.asarray(a)
    wide = ar.widen_single(a, dst, np)
    assert _exact_equal(wide, a.astype(dst))
    # the layout as astype's order 'K' keeps it: the same axis order of strides
    assert np.array_equal(np.argsort(np.abs(wide.strides)), np.argsort(np.abs(a.astype(dst).strides)))


def test_astype_exact_leaves_other_casts_to_the_backend():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert ar.astype_exact(a, np.float64, np) is a
    assert _exact_equal(ar.astype_exact(a, np.float32, np), a.astype(np.float32))
    f = np.float32([1e-40, 2.0])
    assert _exact_equal(ar.astype_exact(f, np.float64, np), f.astype(np.float64))
