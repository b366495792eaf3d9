"""Reductions over every dim give 0-d results (as torch and PyPTO), and a static operand combined
with a dynamic one compiles, each call checking that the sizes agree."""

import numpy as np
import pytest
import torch

import pypto


@pytest.mark.parametrize("shape, tile", [((8, 16), (8, 16)), ((13, 20), (8, 8)), ((3, 5, 7), (2, 4, 4))])
@pytest.mark.parametrize("op", ["sum", "amax", "amin", "mean"])
def test_reduction_over_every_dim_is_0d(shape, tile, op):
    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        r = getattr(pypto, op)(x, list(range(len(shape))), keepdim=False)
        assert r.shape == () and r.ndim == 0
        return r

    x = torch.randn(*shape)
    ref = getattr(torch, op)(x) if op != "amax" and op != "amin" else getattr(torch, op)(x, dim=list(range(len(shape))))
    got = f(x)
    assert got.shape == ()
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_method_sum_without_dims_feeds_elementwise_ops_and_numpy():
    @pypto.jit
    def centered(x: pypto.Tensor((6, 10), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        total = x.sum()                  # 0-d
        scale = pypto.exp(total * 0.0)   # still 0-d: ops on 0-d tensors stay 0-d
        return x - total / 60.0, scale

    x = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
    y, scale = centered(x)
    assert scale.shape == () and float(scale) == 1.0
    np.testing.assert_allclose(y, x - x.sum() / 60.0, rtol=1e-5, atol=1e-5)


def test_fp16_and_keepdim_false_over_a_single_dim_of_a_vector():
    @pypto.jit
    def f(x: pypto.Tensor((37,), pypto.DT_FP16)):
        pypto.set_vec_tile_shapes(16)
        return pypto.amax(x, 0)

    x = torch.randn(37, dtype=torch.float16)
    got = f(x)
    assert got.shape == () and got.dtype == torch.float16 and got == x.max()


def test_a_static_dim_of_1_broadcasts_against_a_dynamic_dim():
    @pypto.jit
    def f(x: pypto.Tensor([], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return x * y + 1.0

    x = torch.randn(1, 16)
    for rows in (1, 11):
        y = torch.randn(rows, 16)
        torch.testing.assert_close(f(x, y), x * y + 1.0)


@pytest.mark.parametrize("rows", [8, 5])
def test_static_operand_with_a_dynamic_one(rows):
    @pypto.jit
    def f(x: pypto.Tensor([], pypto.DT_FP32), y: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return x * y + 1.0

    x, y = torch.randn(rows, 16), torch.randn(rows, 16)
    torch.testing.assert_close(f(x, y), x * y + 1.0)
    with pytest.raises(ValueError, match=rf"pypto.mul at .*test_zero_d_and_mixed_dims.py:\d+: shapes \[{rows}, 16\] and "
                                         rf"\[y_0, 16\] must agree in dim 0 \({rows} versus y_0\), but this call has "
                                         rf"y_0 = {rows + 3}: {rows} versus {rows + 3}"):
        f(x, torch.randn(rows + 3, 16))
    with pytest.raises(ValueError, match=r"must agree in dim 0"):  # the repeated-call path checks too
        f(x, torch.randn(rows + 3, 16))
    torch.testing.assert_close(f(x, y), x * y + 1.0)


def test_two_different_dynamic_dims_are_checked_equal():
    @pypto.jit
    def f(a: pypto.Tensor([pypto.DYNAMIC, 8], pypto.DT_FP32), b: pypto.Tensor([pypto.DYNAMIC, 8], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return a + b

    for rows in (3, 9):
        a, b = torch.randn(rows, 8), torch.randn(rows, 8)
        torch.testing.assert_close(f(a, b), a + b)
    with pytest.raises(ValueError, match=r"shapes \[a_0, 8\] and \[b_0, 8\] must agree in dim 0 \(a_0 versus b_0\), "
                                         r"but this call has a_0 = 3, b_0 = 4: 3 versus 4"):
        f(torch.randn(3, 8), torch.randn(4, 8))


def test_writing_into_a_region_of_other_dynamic_dims_is_checked_per_call():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32),
          y: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP16)):
        pypto.set_vec_tile_shapes(8, 16)
        y[:] = pypto.cast(x, pypto.DT_FP16)

    x, y = torch.randn(5, 20), torch.zeros(5, 20, dtype=torch.float16)
    f(x, y)
    torch.testing.assert_close(y, x.half())
    with pytest.raises(ValueError, match=r"pypto.assemble at .*: source of shape \[x_0, x_1\] and destination region "
                                         r"\[y_0, y_1\] must agree in dim 1 \(x_1 versus y_1\), but this call has "
                                         r"x_1 = 20, y_1 = 21: 20 versus 21"):
        f(x, torch.zeros(5, 21, dtype=torch.float16))
