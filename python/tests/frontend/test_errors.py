"""Issue 2, point 8: bad input raises TypeError/ValueError naming the
parameter or op and the expected and found values; never a crash."""

import os

import numpy as np
import pytest
import torch

import pypto
from conftest import softmax_kernel


@pytest.fixture
def f():
    return softmax_kernel(4, 8)


def test_wrong_shape(f):
    with pytest.raises(ValueError, match=r"parameter 'x' expects shape \(4, 8\), found \(4, 9\)"):
        f(torch.randn(4, 9))


def test_wrong_rank(f):
    with pytest.raises(ValueError, match=r"parameter 'x' expects shape \(4, 8\), found \(32,\)"):
        f(torch.randn(32))


def test_wrong_dtype_torch(f):
    with pytest.raises(TypeError, match=r"parameter 'x' expects dtype DT_FP32, found DT_DOUBLE \(torch.float64\)"):
        f(torch.randn(4, 8, dtype=torch.float64))


def test_wrong_dtype_numpy(f):
    with pytest.raises(TypeError, match=r"parameter 'x' expects dtype DT_FP32, found DT_INT32 \(int32\)"):
        f(np.zeros((4, 8), dtype=np.int32))


def test_unsupported_dtype(f):
    with pytest.raises(TypeError, match=r"parameter 'x' has dtype complex64"):
        f(np.zeros((4, 8), dtype=np.complex64))


def test_too_many_arguments(f):
    with pytest.raises(TypeError, match=r"takes \(x\); called with 2 positional"):
        f(torch.randn(4, 8), torch.randn(4, 8))


def test_missing_argument(f):
    with pytest.raises(TypeError, match=r"takes \(x\); called with 0 positional"):
        f()


def test_unknown_keyword(f):
    with pytest.raises(TypeError, match=r"takes \(x\)"):
        f(torch.randn(4, 8), y=1)


@pytest.mark.parametrize("bad", [3, 2.5, "x", [[1.0] * 8] * 4, None])
def test_non_tensor_argument(f, bad):
    with pytest.raises(TypeError, match=r"parameter 'x' expects a tensor \(torch.Tensor or numpy.ndarray\), found"):
        f(bad)


def test_keyword_argument_works(f):
    x = torch.randn(4, 8)
    torch.testing.assert_close(f(x=x), torch.softmax(x, -1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_op_outside_jit(op):
    with pytest.raises(RuntimeError, match=r"did you forget @pypto.frontend.jit") as info:
        getattr(pypto, op)(pypto.Tensor((2, 2), pypto.DT_FP32), pypto.Tensor((2, 2), pypto.DT_FP32))
    # pypto's own class (in pypto.PyptoError), still a RuntimeError.
    assert isinstance(info.value, pypto.TracingError) and isinstance(info.value, pypto.PyptoError)


def test_loop_outside_jit_is_a_tracing_error():
    with pytest.raises(pypto.TracingError, match=r"pypto.loop was used outside a jitted function; did you forget "
                                                 r"@pypto.frontend.jit\?"):
        for _ in pypto.loop(0, 4, 1):
            pass


@pytest.mark.parametrize("call", [lambda: pypto.exp(torch.ones(2)), lambda: pypto.amax(torch.ones(2, 2), -1, True),
                                  lambda: pypto.sum(torch.ones(2, 2), -1, True)])
def test_unary_and_reduce_outside_jit(call):
    with pytest.raises(pypto.TracingError, match=r"@pypto.frontend.jit"):
        call()


def test_shape_mismatch_in_op_names_op_line_and_shapes():
    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32), b: pypto.Tensor((4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.add(a, b)  # the line the error must name

    line = g.__wrapped__.__code__.co_firstlineno + 3
    with pytest.raises(ValueError) as e:
        g(torch.ones(4, 5), torch.ones(4, 6))
    msg = str(e.value)
    assert "pypto.add" in msg and f"{os.path.basename(__file__)}:{line}" in msg
    assert "[4, 5]" in msg and "[4, 6]" in msg


def test_tile_rank_mismatch():
    # A longer tile is no error (PyPTO's rule: its leading entries apply); a shorter one is.
    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4, 4)
        return pypto.exp(a)

    x = torch.randn(4, 5)
    torch.testing.assert_close(g(x), torch.exp(x))

    @pypto.jit
    def h(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4)
        return pypto.exp(a)

    with pytest.raises(ValueError, match=r"pypto.exp at .*test_errors.py:\d+: vec tile shape \[4\] has rank 1, expected rank 2"):
        h(torch.ones(4, 5))


def test_missing_tile_shape():
    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        return pypto.exp(a)

    with pytest.raises(ValueError, match=r"set_vec_tile_shapes"):
        g(torch.ones(4, 5))


def test_reduce_dim_out_of_range():
    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.sum(a, 2, True)

    with pytest.raises(ValueError, match=r"pypto.sum at .*: dim 2 is out of range for a tensor of rank 2 \(expected -2 to 1\)"):
        g(torch.ones(4, 5))


def test_return_annotation_mismatch():
    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)) -> pypto.Tensor((4, 1), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.exp(a)

    with pytest.raises(ValueError, match=r"return value is annotated with shape \(4, 1\), the function computes \(4, 5\)"):
        g(torch.ones(4, 5))


def test_returning_non_tensor():
    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        return 3

    with pytest.raises(TypeError, match=r"return value 0 must be a pypto.Tensor"):
        g(torch.ones(4, 5))


@pytest.mark.parametrize("dims,exc", [((0, 4), ValueError), ((4, -1), ValueError), ((4.0, 4), TypeError), ((), ValueError)])
def test_bad_tile_shapes(dims, exc):
    with pytest.raises(exc, match="set_vec_tile_shapes"):
        pypto.set_vec_tile_shapes(*dims)


def test_bad_annotation():
    with pytest.raises(TypeError, match="pypto.Tensor: dtype must be a pypto dtype"):
        pypto.Tensor((4, 4), "float32")
    with pytest.raises(ValueError, match="positive"):
        pypto.Tensor((4, 0), pypto.DT_FP32)


def test_zero_size_input_is_refused():
    @pypto.jit
    def g(a: pypto.Tensor()):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.exp(a)

    with pytest.raises(NotImplementedError, match="zero-size"):
        g(torch.ones(0, 4))


def test_cuda_like_device_is_refused_cleanly():
    x = torch.ones(4, 8, device="meta")
    f = softmax_kernel(4, 8)
    with pytest.raises(ValueError, match="CPU"):
        f(x)


def test_bad_pass_option_values():
    with pytest.raises(ValueError, match="unknown pass 'fuse_everything'"):
        pypto.set_pass_options(disable_passes=["fuse_everything"])
    with pytest.raises(ValueError, match="sram_budget_kb' must be a positive int"):
        pypto.set_pass_options(sram_budget_kb=0)
