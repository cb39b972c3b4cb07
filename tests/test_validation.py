"""Bad inputs raise before any work, name the offending argument, leave ``out`` alone.

Each case fills ``out`` with a sentinel first and checks it afterwards: no
output buffer is touched on error (DESIGN.md, "Errors").
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import batched as bt
from conftest import HAVE_GPU, requires_gpu, to_np, to_xp

SENTINEL = 7.0
SUPPORTED_NAMES = ("float32", "float64", "complex64", "complex128")


def sentinel_out(xp, shape, dtype=np.float64):
    return xp.full(shape, SENTINEL, dtype=dtype)


def raises_untouched(exc, fn, outs, *fragments):
    """``fn()`` raises ``exc`` whose message contains every fragment; ``outs`` keep the sentinel."""
    with pytest.raises(exc) as info:
        fn()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in error message {message!r}"
    for o in outs if isinstance(outs, list) else [outs]:
        assert np.all(to_np(o) == SENTINEL), "out was written although the call failed"
    return message


def f64(rng, shape):
    return rng.standard_normal(shape)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# --- dtypes ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["int32", "bool", "float16", "object", "int64", "uint8"])
@pytest.mark.parametrize("where", ["A", "x", "y"])
def test_gemv_unsupported_dtype_is_type_error(xp, rng, bad, where):
    if bad == "object" and xp is not np:
        pytest.skip("CuPy has no object arrays")
    ops = {"A": f64(rng, (3, 4, 5)), "x": f64(rng, (3, 5)), "y": f64(rng, (3, 4))}
    ops[where] = ops[where].astype(bad)
    out = sentinel_out(xp, (3, 4))
    args = {k: to_xp(xp, v) for k, v in ops.items()}
    msg = raises_untouched(TypeError, lambda: bt.gemv(args["A"], args["x"], args["y"], beta=1.0, out=out),
                           out, where)
    for name in SUPPORTED_NAMES:
        assert name in msg


@pytest.mark.parametrize("bad", ["int32", "bool", "float16", "object"])
@pytest.mark.parametrize("where", ["A", "B", "C"])
def test_gemm_unsupported_dtype_is_type_error(xp, rng, bad, where):
    if bad == "object" and xp is not np:
        pytest.skip("CuPy has no object arrays")
    ops = {"A": f64(rng, (2, 4, 5)), "B": f64(rng, (2, 5, 3)), "C": f64(rng, (2, 4, 3))}
    ops[where] = ops[where].astype(bad)
    out = sentinel_out(xp, (2, 4, 3))
    args = {k: to_xp(xp, v) for k, v in ops.items()}
    msg = raises_untouched(TypeError, lambda: bt.gemm(args["A"], args["B"], args["C"], beta=1.0, out=out),
                           out, where)
    for name in SUPPORTED_NAMES:
        assert name in msg


def test_list_member_with_unsupported_dtype_is_type_error(xp, rng):
    As = to_xp(xp, [f64(rng, (3, 3)), f64(rng, (3, 3)).astype(np.int32)])
    xs = to_xp(xp, [f64(rng, (3,)), f64(rng, (3,))])
    outs = [sentinel_out(xp, (3,)) for _ in range(2)]
    raises_untouched(TypeError, lambda: bt.gemv(As, xs, out=outs), outs, "A[1]", "float32")
    Bs = to_xp(xp, [f64(rng, (3, 2)), f64(rng, (3, 2)).astype(np.float16)])
    outs = [sentinel_out(xp, (3, 2)) for _ in range(2)]
    raises_untouched(TypeError, lambda: bt.gemm(to_xp(xp, [f64(rng, (3, 3))] * 2), Bs, out=outs), outs,
                     "B[1]")


# --- shapes ------------------------------------------------------------------------------


def test_gemv_one_dimensional_a(xp, rng):
    out = sentinel_out(xp, (5,))
    raises_untouched(ValueError, lambda: bt.gemv(to_xp(xp, f64(rng, (5,))), to_xp(xp, f64(rng, (5,))),
                                                 out=out), out, "A", "(5,)")


def test_gemv_zero_dimensional_x(xp, rng):
    out = sentinel_out(xp, (4,))
    raises_untouched(ValueError, lambda: bt.gemv(to_xp(xp, f64(rng, (4, 1))), to_xp(xp, np.float64(2.0)),
                                                 out=out), out, "x")


@pytest.mark.parametrize("trans", ["N", "T", "C"])
def test_gemv_inner_dimension_mismatch(xp, rng, trans):
    A = f64(rng, (2, 4, 5))
    bad = 4 if trans == "N" else 5  # the other dimension of A
    out = sentinel_out(xp, (2, 4 if trans == "N" else 5))
    raises_untouched(ValueError, lambda: bt.gemv(to_xp(xp, A), to_xp(xp, f64(rng, (2, bad))), trans=trans,
                                                 out=out), out, "x", f"(2, {bad})", "(2, 4, 5)")


def test_gemv_batch_dimensions_do_not_broadcast(xp, rng):
    out = sentinel_out(xp, (2, 3))
    raises_untouched(ValueError, lambda: bt.gemv(to_xp(xp, f64(rng, (2, 3, 3))), to_xp(xp, f64(rng, (4, 3))),
                                                 out=out), out, "A", "(2, 3, 3)", "x", "(4, 3)")


@pytest.mark.parametrize("y_shape", [(3,), (2, 3), (3, 4), (5, 2, 4)], ids=str)
def test_gemv_y_does_not_broadcast(xp, rng, y_shape):
    out = sentinel_out(xp, (2, 4))
    raises_untouched(ValueError, lambda: bt.gemv(to_xp(xp, f64(rng, (2, 4, 3))), to_xp(xp, f64(rng, (2, 3))),
                                                 to_xp(xp, f64(rng, y_shape)), beta=1.0, out=out),
                     out, "y", str(y_shape))


@pytest.mark.parametrize("which", ["A", "B"])
def test_gemm_one_dimensional_operand(xp, rng, which):
    ops = {"A": f64(rng, (4, 4)), "B": f64(rng, (4, 4))}
    ops[which] = f64(rng, (4,))
    out = sentinel_out(xp, (4, 4))
    raises_untouched(ValueError, lambda: bt.gemm(to_xp(xp, ops["A"]), to_xp(xp, ops["B"]), out=out), out,
                     which, "(4,)")


@pytest.mark.parametrize("trans", ["NN", "TN", "NT", "CC"])
def test_gemm_inner_dimension_mismatch(xp, rng, trans):
    A, B = f64(rng, (2, 4, 5)), f64(rng, (2, 6, 3))
    out = sentinel_out(xp, (2, 3, 3))
    raises_untouched(ValueError, lambda: bt.gemm(to_xp(xp, A), to_xp(xp, B), transa=trans[0],
                                                 transb=trans[1], out=out),
                     out, "A", "(2, 4, 5)", "B", "(2, 6, 3)")


def test_gemm_batch_dimensions_do_not_broadcast(xp, rng):
    out = sentinel_out(xp, (3, 4, 4))
    raises_untouched(ValueError, lambda: bt.gemm(to_xp(xp, f64(rng, (3, 4, 4))), to_xp(xp, f64(rng, (2, 4, 4))),
                                                 out=out), out, "A", "(3, 4, 4)", "B", "(2, 4, 4)")


def test_gemm_c_does_not_broadcast(xp, rng):
    out = sentinel_out(xp, (3, 4, 4))
    raises_untouched(ValueError, lambda: bt.gemm(to_xp(xp, f64(rng, (3, 4, 4))), to_xp(xp, f64(rng, (3, 4, 4))),
                                                 to_xp(xp, f64(rng, (2, 4, 4))), beta=1.0, out=out),
                     out, "C", "(2, 4, 4)")


# --- letters and scalars ------------------------------------------------------------------


@pytest.mark.parametrize("letter", ["X", "", "NN", "h", 3, None, -1])
def test_bad_trans_letter(xp, rng, letter):
    out = sentinel_out(xp, (4,))
    A, x = to_xp(xp, f64(rng, (4, 4))), to_xp(xp, f64(rng, (4,)))
    raises_untouched(ValueError, lambda: bt.gemv(A, x, trans=letter, out=out), out, "trans")
    out2 = sentinel_out(xp, (4, 4))
    raises_untouched(ValueError, lambda: bt.gemm(A, A, transa=letter, out=out2), out2, "transa")
    raises_untouched(ValueError, lambda: bt.gemm(A, A, transb=letter, out=out2), out2, "transb")


@pytest.mark.parametrize("letter", ["n", "t", "c", "N", "T", "C"])
def test_trans_letters_are_case_insensitive(xp, rng, letter):
    A, x = f64(rng, (4, 4)), f64(rng, (4,))
    got = to_np(bt.gemv(to_xp(xp, A), to_xp(xp, x), trans=letter))
    ref = (A if letter.upper() == "N" else A.T) @ x
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    got = to_np(bt.gemm(to_xp(xp, A), to_xp(xp, A), transa=letter, transb=letter))
    op = A if letter.upper() == "N" else A.T
    np.testing.assert_allclose(got, op @ op, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, np.float32(np.nan), complex(np.nan, 0),
                                   complex(0, np.inf)], ids=repr)
@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_non_finite_scalar_is_value_error(xp, rng, value, name):
    dtype = np.complex128 if isinstance(value, complex) else np.float64
    A = to_xp(xp, f64(rng, (2, 3, 3)).astype(dtype))
    x = to_xp(xp, f64(rng, (2, 3)).astype(dtype))
    out = sentinel_out(xp, (2, 3), dtype)
    raises_untouched(ValueError, lambda: bt.gemv(A, x, x, out=out, **{name: value}), out, name)
    out2 = sentinel_out(xp, (2, 3, 3), dtype)
    raises_untouched(ValueError, lambda: bt.gemm(A, A, A, out=out2, **{name: value}), out2, name)


@pytest.mark.parametrize("value", [1j, 0.5 + 0.5j, np.complex64(1 - 1j)], ids=repr)
@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_complex_scalar_with_real_arrays_is_type_error(xp, rng, value, name, dtype):
    A = to_xp(xp, f64(rng, (2, 3, 3)).astype(dtype))
    x = to_xp(xp, f64(rng, (2, 3)).astype(dtype))
    out = sentinel_out(xp, (2, 3), dtype)
    raises_untouched(TypeError, lambda: bt.gemv(A, x, x, out=out, **{name: value}), out, name)
    out2 = sentinel_out(xp, (2, 3, 3), dtype)
    raises_untouched(TypeError, lambda: bt.gemm(A, A, A, out=out2, **{name: value}), out2, name)
    As = [A[0], A[1]]
    outs = [sentinel_out(xp, (3,), dtype) for _ in range(2)]
    raises_untouched(TypeError, lambda: bt.gemv(As, [x[0], x[1]], out=outs, **{name: value}), outs, name)


@pytest.mark.parametrize("value", ["1.0", None, [1.0], True], ids=repr)
def test_non_number_scalar_is_type_error(xp, rng, value):
    A, x = to_xp(xp, f64(rng, (3, 3))), to_xp(xp, f64(rng, (3,)))
    out = sentinel_out(xp, (3,))
    raises_untouched(TypeError, lambda: bt.gemv(A, x, alpha=value, out=out), out, "alpha")


# --- out ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 5), (4,), (2, 4, 1), (1, 4)], ids=str)
def test_gemv_out_wrong_shape(xp, rng, shape):
    out = sentinel_out(xp, shape)
    raises_untouched(ValueError, lambda: bt.gemv(to_xp(xp, f64(rng, (2, 4, 3))), to_xp(xp, f64(rng, (2, 3))),
                                                 out=out), out, "out", str(shape))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int64], ids=str)
def test_gemv_out_wrong_dtype(xp, rng, dtype):
    out = sentinel_out(xp, (2, 4), dtype)
    raises_untouched(TypeError, lambda: bt.gemv(to_xp(xp, f64(rng, (2, 4, 3))), to_xp(xp, f64(rng, (2, 3))),
                                                 out=out), out, "out")


@pytest.mark.parametrize("shape", [(2, 4, 4), (4, 3), (2, 3, 4)], ids=str)
def test_gemm_out_wrong_shape(xp, rng, shape):
    out = sentinel_out(xp, shape)
    raises_untouched(ValueError, lambda: bt.gemm(to_xp(xp, f64(rng, (2, 4, 5))), to_xp(xp, f64(rng, (5, 3))),
                                                 out=out), out, "out", str(shape))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
def test_gemm_out_wrong_dtype(xp, rng, dtype):
    out = sentinel_out(xp, (2, 4, 3), dtype)
    raises_untouched(TypeError, lambda: bt.gemm(to_xp(xp, f64(rng, (2, 4, 5))), to_xp(xp, f64(rng, (5, 3))),
                                                out=out), out, "out")


# --- lists ------------------------------------------------------------------------------------


def test_gemv_list_member_not_2d(xp, rng):
    As = to_xp(xp, [f64(rng, (3, 3)), f64(rng, (2, 3, 3)), f64(rng, (3, 3))])
    xs = to_xp(xp, [f64(rng, (3,))] * 3)
    outs = [sentinel_out(xp, (3,)) for _ in range(3)]
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, out=outs), outs, "A[1]", "(2, 3, 3)")
    As = to_xp(xp, [f64(rng, (3, 3)), f64(rng, (3, 3)), f64(rng, (3,))])
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, out=outs), outs, "A[2]", "(3,)")


def test_gemv_list_vector_of_wrong_length(xp, rng):
    As = to_xp(xp, [f64(rng, (3, 4)), f64(rng, (5, 2)), f64(rng, (3, 3))])
    xs = to_xp(xp, [f64(rng, (4,)), f64(rng, (5,)), f64(rng, (3,))])  # member 1 needs length 2
    outs = [sentinel_out(xp, (n,)) for n in (3, 5, 3)]
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, out=outs), outs, "x[1]", "(5,)")
    xs = to_xp(xp, [f64(rng, (4,)), f64(rng, (2,)), f64(rng, (3,))])
    ys = to_xp(xp, [f64(rng, (3,)), f64(rng, (5,)), f64(rng, (4,))])
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, ys, beta=1.0, out=outs), outs, "y[2]", "(4,)")
    bad_outs = [sentinel_out(xp, (n,)) for n in (3, 4, 3)]
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, out=bad_outs), bad_outs, "out[1]")


def test_gemv_list_vector_count_mismatch(xp, rng):
    As = to_xp(xp, [f64(rng, (3, 3))] * 3)
    outs = [sentinel_out(xp, (3,)) for _ in range(3)]
    raises_untouched(ValueError, lambda: bt.gemv(As, to_xp(xp, [f64(rng, (3,))] * 2), out=outs), outs, "x")
    raises_untouched(ValueError, lambda: bt.gemv(As, to_xp(xp, f64(rng, (2, 3))), out=outs), outs, "x")


def test_gemv_list_out_wrong_dtype(xp, rng):
    As = to_xp(xp, [f64(rng, (3, 3))] * 2)
    xs = to_xp(xp, [f64(rng, (3,))] * 2)
    outs = [sentinel_out(xp, (3,)), sentinel_out(xp, (3,), np.float32)]
    raises_untouched(TypeError, lambda: bt.gemv(As, xs, out=outs), outs, "out[1]")


def test_pointer_batch_needs_one_shape(xp, rng):
    with pytest.raises(ValueError, match="VariableBatch"):
        bt.PointerBatch(to_xp(xp, [f64(rng, (3, 3)), f64(rng, (3, 4))]))
    with pytest.raises(ValueError, match=re.escape("[0]")):
        bt.VariableBatch(to_xp(xp, [f64(rng, (3,))]))


def test_gemm_list_member_errors(xp, rng):
    As = to_xp(xp, [f64(rng, (3, 4)), f64(rng, (2, 2, 2))])
    Bs = to_xp(xp, [f64(rng, (4, 2)), f64(rng, (2, 2))])
    outs = [sentinel_out(xp, (3, 2)), sentinel_out(xp, (2, 2))]
    raises_untouched(ValueError, lambda: bt.gemm(As, Bs, out=outs), outs, "A[1]", "(2, 2, 2)")
    As = to_xp(xp, [f64(rng, (3, 4)), f64(rng, (2, 3))])
    raises_untouched(ValueError, lambda: bt.gemm(As, Bs, out=outs), outs, "[1]")  # 2x3 times 2x2
    raises_untouched(ValueError, lambda: bt.gemm(As[:1], Bs, out=outs), outs, "A", "B")  # 1 vs 2 matrices
    As = to_xp(xp, [f64(rng, (3, 4)), f64(rng, (2, 2))])
    Cs = to_xp(xp, [f64(rng, (3, 2)), f64(rng, (3, 2))])
    raises_untouched(ValueError, lambda: bt.gemm(As, Bs, Cs, beta=1.0, out=outs), outs, "C")
    bad_outs = [sentinel_out(xp, (3, 2)), sentinel_out(xp, (2, 3))]
    raises_untouched(ValueError, lambda: bt.gemm(As, Bs, out=bad_outs), bad_outs, "out")
    bad_outs = [sentinel_out(xp, (3, 2)), sentinel_out(xp, (2, 2), np.float32)]
    raises_untouched(TypeError, lambda: bt.gemm(As, Bs, out=bad_outs), bad_outs, "out")


# --- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["gemv1x32big", 3, bt.GEMM_SETTINGS[0], (1, 32, 0)], ids=repr)
def test_gemv_setting_of_wrong_type(xp, rng, setting):
    out = sentinel_out(xp, (3,))
    raises_untouched(TypeError, lambda: bt.gemv(to_xp(xp, f64(rng, (3, 3))), to_xp(xp, f64(rng, (3,))),
                                                out=out, setting=setting), out, "setting")


@pytest.mark.parametrize("setting", ["gemm", bt.GEMV_SETTINGS[0]], ids=repr)
def test_gemm_setting_of_wrong_type(xp, rng, setting):
    out = sentinel_out(xp, (3, 3))
    raises_untouched(TypeError, lambda: bt.gemm(to_xp(xp, f64(rng, (3, 3))), to_xp(xp, f64(rng, (3, 3))),
                                                out=out, setting=setting), out, "setting")


def test_unregistered_setting(xp, rng):
    A = to_xp(xp, f64(rng, (3, 3)))
    out = sentinel_out(xp, (3,))
    raises_untouched(ValueError, lambda: bt.gemv(A, A[0], out=out, setting=bt.GemvSetting(3, 3)), out,
                     "setting")
    raises_untouched(ValueError, lambda: bt.gemv(A, A[0], out=out, setting=bt.GemvSetting(32, 8, tile=16)),
                     out, "setting")
    out2 = sentinel_out(xp, (3, 3))
    raises_untouched(ValueError, lambda: bt.gemm(A, A, out=out2, setting=bt.GemmSetting(2, 2, 2, 2, 2)), out2,
                     "setting")


# --- devices --------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu_operand", ["A", "x", "y", "out"])
@pytest.mark.parametrize("case", [pytest.param(0, marks=requires_gpu)], ids=["gpu"])
def test_gemv_mixing_numpy_and_cupy_is_value_error(rng, gpu_operand, case):
    import cupy

    ops = {"A": f64(rng, (2, 3, 3)), "x": f64(rng, (2, 3)), "y": f64(rng, (2, 3))}
    args = {k: (cupy.asarray(v) if k == gpu_operand else v) for k, v in ops.items()}
    out = (cupy.full if gpu_operand == "out" else np.full)((2, 3), SENTINEL)
    raises_untouched(ValueError, lambda: bt.gemv(args["A"], args["x"], args["y"], beta=1.0, out=out), out,
                     "NumPy", "CuPy")


@pytest.mark.parametrize("gpu_operand", ["A", "B", "C", "out"])
@pytest.mark.parametrize("case", [pytest.param(0, marks=requires_gpu)], ids=["gpu"])
def test_gemm_mixing_numpy_and_cupy_is_value_error(rng, gpu_operand, case):
    import cupy

    ops = {"A": f64(rng, (2, 3, 3)), "B": f64(rng, (2, 3, 3)), "C": f64(rng, (2, 3, 3))}
    args = {k: (cupy.asarray(v) if k == gpu_operand else v) for k, v in ops.items()}
    out = (cupy.full if gpu_operand == "out" else np.full)((2, 3, 3), SENTINEL)
    raises_untouched(ValueError, lambda: bt.gemm(args["A"], args["B"], args["C"], beta=1.0, out=out), out,
                     "NumPy", "CuPy")


@pytest.mark.parametrize("case", [pytest.param(0, marks=requires_gpu)], ids=["gpu"])
def test_list_mixing_numpy_and_cupy_is_value_error(rng, case):
    import cupy

    As = [f64(rng, (3, 3)), cupy.asarray(f64(rng, (3, 3)))]
    xs = [cupy.asarray(f64(rng, (3,))) for _ in range(2)]
    outs = [cupy.full((3,), SENTINEL) for _ in range(2)]
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, out=outs), outs, "A[1]")
    As = [cupy.asarray(f64(rng, (3, 3))) for _ in range(2)]
    xs = [cupy.asarray(f64(rng, (3,))), f64(rng, (3,))]
    raises_untouched(ValueError, lambda: bt.gemv(As, xs, out=outs), outs, "x")
    Bs = [f64(rng, (3, 3)) for _ in range(2)]
    outs = [cupy.full((3, 3), SENTINEL) for _ in range(2)]
    raises_untouched(ValueError, lambda: bt.gemm(As, Bs, out=outs), outs)


def test_gpu_flag_matches_cupy():
    assert isinstance(HAVE_GPU, bool)
    assert bt.gpu_available() is HAVE_GPU


def test_conj_exact_flips_sign_bits_only():
    """The GPU path of conj_exact (complex64, any xp but NumPy) on NumPy arrays: the
    result equals conj bit for bit, subnormal imaginary parts included (CuPy's own
    conj flushes them: its kernels compile with -ftz=true), and is a new array."""
    import types

    from batched import _arrays as ar

    not_numpy = types.SimpleNamespace(conj=np.conj)
    rng = np.random.default_rng(5)
    for shape in [(), (3,), (2, 3, 4), (0, 5)]:
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        if a.size:
            a.flat[0] = np.complex64(1e-40 - 1e-41j)   # subnormal parts
        src = np.swapaxes(a, -1, -2) if a.ndim > 1 else a
        got = ar.conj_exact(src, not_numpy)
        ref = np.array(np.conj(src), order="C")
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got.reshape(-1).view(np.uint32), ref.reshape(-1).view(np.uint32))
        assert not np.shares_memory(got, a)
