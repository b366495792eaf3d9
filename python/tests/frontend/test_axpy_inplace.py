"""pypto.axpy_ (y = alpha * x + y in place) against torch: the caller's y is updated, x broadcasts,
fp32/fp16/bf16 and a mixed pair, a dynamic dim, the Tensor method, reading y after the update inside the
kernel, and the errors."""

import pytest
import torch

import pypto


@pytest.mark.parametrize("ydt,xdt,tol", [(torch.float32, torch.float32, 1e-6), (torch.float16, torch.float16, 1e-3),
                                         (torch.bfloat16, torch.bfloat16, 8e-3), (torch.float32, torch.float16, 1e-6)])
@pytest.mark.parametrize("xshape", [(19, 70), (19, 1), (1, 70)])
def test_axpy_updates_y_in_place(ydt, xdt, tol, xshape):
    pt = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16}

    @pypto.jit
    def f(y: pypto.Tensor((19, 70), pt[ydt]), x: pypto.Tensor(xshape, pt[xdt])):
        pypto.set_vec_tile_shapes(8, 32)
        out = pypto.axpy_(y, x, 2.5)
        return pypto.mul(out, 1.0)  # reads y after the update

    g = torch.Generator().manual_seed(0)
    y = torch.randn(19, 70, generator=g).to(ydt)
    x = torch.randn(xshape, generator=g).to(xdt)
    want = (y.double() + 2.5 * x.double()).to(ydt)
    out = f(y, x)
    torch.testing.assert_close(y, want, rtol=tol, atol=tol)
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)


def test_method_default_alpha_and_a_dynamic_dim():
    @pypto.jit
    def f(y: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32), x: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 16)
        y.axpy_(x)
        return pypto.sum(y, -1, True)

    for rows in (3, 10):
        y, x = torch.randn(rows, 16), torch.randn(rows, 16)
        want = y + x
        s = f(y, x)
        torch.testing.assert_close(y, want)
        torch.testing.assert_close(s, want.sum(-1, keepdim=True), rtol=1e-5, atol=1e-5)


def test_errors():
    @pypto.jit
    def bad_shape(y: pypto.Tensor((4, 1), pypto.DT_FP32), x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.axpy_(y, x)

    with pytest.raises(ValueError, match=r"pypto\.axpy_: x of shape \[4, 8\] does not broadcast to y's shape \[4, 1\]"):
        bad_shape(torch.zeros(4, 1), torch.zeros(4, 8))

    @pypto.jit
    def bad_alpha(y: pypto.Tensor((4, 8), pypto.DT_FP32), x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.axpy_(y, x, "2")

    with pytest.raises(TypeError, match=r"pypto\.axpy_: alpha must be an int or a float, found str '2'"):
        bad_alpha(torch.zeros(4, 8), torch.zeros(4, 8))
