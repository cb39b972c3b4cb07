"""List batches on the host: per-batch facts computed once, length checks with
one length for every member, and the PointerVector accessor's two forms (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import batched as bt


def test_pointer_batch_lengths_are_one_int_and_computed_once():
    pb = bt.PointerBatch([np.ones((3, 5)) for _ in range(4)])
    assert pb.op_lengths("N") == (3, 5)
    assert pb.op_lengths("T") == (5, 3)
    assert pb.op_lengths("N") is pb.op_lengths("N")   # memoized per batch object


def test_variable_batch_lengths_and_typical_shape():
    vb = bt.VariableBatch([np.ones((2, 7)), np.ones((4, 1)), np.ones((6, 4))])
    rows, inner = vb.op_lengths("N")
    np.testing.assert_array_equal(rows, [2, 4, 6])
    np.testing.assert_array_equal(inner, [7, 1, 4])
    rows_t, inner_t = vb.op_lengths("C")
    np.testing.assert_array_equal(rows_t, [7, 1, 4])
    r, c = vb.view_dims_typical        # rounded means of the column-major views
    views = np.array(vb.view_shapes, dtype=float)
    assert (r, c) == tuple(int(round(v)) for v in views.mean(axis=0))


def test_gemv_list_checks_every_member_length_with_one_int_length():
    pb = bt.PointerBatch([np.ones((3, 5)) for _ in range(4)])
    with pytest.raises(ValueError, match=r"x\[0\] has shape \(4,\), expected \(5,\)"):
        bt.gemv(pb, np.ones((4, 4)))
    vb = bt.VariableBatch([np.ones((3, 5)), np.ones((3, 4))])
    with pytest.raises(ValueError, match=r"x\[1\] has shape \(5,\), expected \(4,\)"):
        bt.gemv(vb, np.ones((2, 5)))


def test_pointer_vector_accessor_fields():
    from batched import _launch as ln

    strided = ln.strided_vector(4096, -3, 2)
    assert (strided["ptrs"], strided["base"], strided["stride"], strided["inc"]) == (0, 4096, -3, 2)
    with_array = ln.pack("PointerVector", 1024, 5, 1)        # base and stride left out: zero
    assert (with_array["ptrs"], with_array["offset"], with_array["base"]) == (1024, 5, 0)
    with pytest.raises(TypeError, match="PointerVector takes 5 fields"):
        ln.pack("PointerVector", 1, 2)
    with pytest.raises(TypeError, match="UniformVector takes 3 fields"):
        ln.pack("UniformVector", 1, 2)


@pytest.mark.gpu
@pytest.mark.skipif(not bt.gpu_available(), reason="no CUDA GPU (CuPy cannot see a device)")
def test_repeated_pointer_upload_is_reused_only_for_the_same_addresses_and_stream():
    import cupy as cp

    from batched._batch import device_pointers

    vs = [cp.zeros(3) for _ in range(5)]
    ptrs = [v.data.ptr for v in vs]
    first = device_pointers(cp, ptrs)
    assert device_pointers(cp, list(ptrs)) is first
    np.testing.assert_array_equal(cp.asnumpy(first), ptrs)
    other = device_pointers(cp, ptrs[::-1])
    assert other is not first
    np.testing.assert_array_equal(cp.asnumpy(other), ptrs[::-1])
    with cp.cuda.Stream():
        assert device_pointers(cp, ptrs) is not first   # another stream: its own upload


@pytest.mark.gpu
@pytest.mark.skipif(not bt.gpu_available(), reason="no CUDA GPU (CuPy cannot see a device)")
def test_variable_gemv_repeated_with_new_vectors_uses_them():
    import cupy as cp

    rng = np.random.default_rng(5)
    shapes = [(3, 4), (5, 2), (1, 7), (6, 6)]
    mats = [rng.standard_normal(s) for s in shapes]
    batch = bt.VariableBatch([cp.asarray(a) for a in mats])
    for _ in range(3):   # the same addresses again, then new vectors of the same lengths
        xs = [rng.standard_normal(s[1]) for s in shapes]
        got = bt.gemv(batch, [cp.asarray(x) for x in xs])
        for a, x, y in zip(mats, xs, got):
            np.testing.assert_allclose(cp.asnumpy(y), a @ x, rtol=1e-13, atol=1e-13)
