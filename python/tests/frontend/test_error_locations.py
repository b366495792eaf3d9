"""Issue 3, point 8: each bad input names the op or parameter, both values,
and the user's file and line."""

import os

import pytest
import torch

import pypto

HERE = os.path.basename(__file__)


def _line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    for i, ln in enumerate(lines):
        if text in ln:
            return start + i
    raise AssertionError(text)


def test_shape_mismatch_in_op():
    @pypto.jit
    def f(a: pypto.Tensor((4, 5), pypto.DT_FP32), b: pypto.Tensor((4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.add(a, b)  # mismatch

    with pytest.raises(ValueError) as e:
        f(torch.ones(4, 5), torch.ones(4, 6))
    assert f"{HERE}:{_line_of(f.__wrapped__, '# mismatch')}" in str(e.value)
    assert "[4, 5]" in str(e.value) and "[4, 6]" in str(e.value) and "pypto.add" in str(e.value)


def test_tile_rank_differs_from_operand():
    @pypto.jit
    def f(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4)
        return pypto.exp(a)  # rank

    with pytest.raises(ValueError, match=r"vec tile shape \[4\] has rank 1, expected rank 2") as e:
        f(torch.ones(4, 5))
    assert f"{HERE}:{_line_of(f.__wrapped__, '# rank')}" in str(e.value)


def test_unsupported_dtype_combination():
    @pypto.jit
    def f(a: pypto.Tensor((4, 5), pypto.DT_FP32), b: pypto.Tensor((5, 3), pypto.DT_FP16)):
        return pypto.matmul(a, b)  # dtypes

    with pytest.raises(TypeError, match=r"DT_FP32 and DT_FP16") as e:
        f(torch.ones(4, 5), torch.ones(5, 3).half())
    assert f"{HERE}:{_line_of(f.__wrapped__, '# dtypes')}" in str(e.value)

    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.where(a, a, a)  # cond

    with pytest.raises(TypeError, match=r"condition must be DT_BOOL, found DT_FP32") as e:
        g(torch.ones(4, 5))
    assert f"{HERE}:{_line_of(g.__wrapped__, '# cond')}" in str(e.value)


def test_out_of_range_dim():
    @pypto.jit
    def f(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.amax(a, -3, True)  # dim

    with pytest.raises(ValueError, match=r"dim -3 is out of range for a tensor of rank 2") as e:
        f(torch.ones(4, 5))
    assert f"{HERE}:{_line_of(f.__wrapped__, '# dim')}" in str(e.value)


def test_dynamic_dim_bound_twice():
    M = pypto.frontend.dynamic("M")

    @pypto.jit
    def f(a: pypto.Tensor([M, 4], pypto.DT_FP32), b: pypto.Tensor([M, 4], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return a + b

    with pytest.raises(ValueError, match=r"dynamic dim 'M' is 3 in parameter 'a' but 5 in parameter 'b'") as e:
        f(torch.ones(3, 4), torch.ones(5, 4))  # call
    assert f"{HERE}:{_line_of(test_dynamic_dim_bound_twice, '# call')}" in str(e.value)


def test_output_parameter_of_wrong_shape():
    @pypto.jit
    def f(a: pypto.Tensor((4, 5), pypto.DT_FP32), out: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        out[:] = a * 2

    with pytest.raises(ValueError, match=r"parameter 'out' expects shape \(4, 5\), found \(4, 6\)") as e:
        f(torch.ones(4, 5), torch.ones(4, 6))  # call
    assert f"{HERE}:{_line_of(test_output_parameter_of_wrong_shape, '# call')}" in str(e.value)

    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32), out: pypto.Tensor()):
        pypto.set_vec_tile_shapes(4, 4)
        out[:] = a * 2  # assemble

    with pytest.raises(ValueError, match=r"source of shape \[4, 5\] does not match the destination region \[4, 6\]") as e:
        g(torch.ones(4, 5), torch.ones(4, 6))
    assert f"{HERE}:{_line_of(g.__wrapped__, '# assemble')}" in str(e.value)


def test_op_wrapper_points_errors_at_the_callers_line():
    @pypto.op_wrapper
    def scaled_add(a, b, alpha=2.0):
        """A user-defined op made of pypto ops."""
        return pypto.add(a, pypto.mul(b, alpha))

    @pypto.jit
    def f(a: pypto.Tensor((4, 5), pypto.DT_FP32), b: pypto.Tensor((4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return scaled_add(a, b)  # wrapped call

    with pytest.raises(ValueError) as e:
        f(torch.ones(4, 5), torch.ones(4, 6))
    assert f"{HERE}:{_line_of(f.__wrapped__, '# wrapped call')}" in str(e.value)
    assert scaled_add.__doc__ == "A user-defined op made of pypto ops." and scaled_add.__name__ == "scaled_add"

    @pypto.jit
    def g(a: pypto.Tensor((4, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return scaled_add(a, a, alpha=0.5)

    x = torch.randn(4, 5)
    torch.testing.assert_close(g(x), x * 1.5)
    with pytest.raises(TypeError, match=r"pypto.op_wrapper: expected a function, found int"):
        pypto.op_wrapper(3)


def test_fe_error_wraps_an_exception_as_upstream():
    e = pypto.FeError(ValueError("bad tile"))
    assert str(e) == "ValueError: bad tile" and isinstance(e.error, ValueError)
    assert isinstance(e, pypto.PyptoError) and str(pypto.FeError("plain")) == "plain"
    with pytest.raises(pypto.FeError, match=r"KeyError: 'k'"):
        raise pypto.FeError(KeyError("k"))
    with pytest.raises(TypeError, match=r"pypto.FeError: msg must be a str or an exception, found int"):
        pypto.FeError(3)


def test_frontend_parser_module_holds_the_entry_points():
    from pypto.frontend import parser

    assert parser.jit is pypto.frontend.jit and parser.function is pypto.frontend.function
    assert parser.error.UserError is pypto.UserError
