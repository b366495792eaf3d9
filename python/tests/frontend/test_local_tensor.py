"""pypto.tensor(shape, dtype) inside a kernel: a local tensor, written, read and returned."""

import pytest
import torch

import pypto

B = pypto.frontend.dynamic("B")


@pytest.mark.parametrize("rows", [6, 7])  # the tile divides the rows, or does not
@pytest.mark.parametrize("dt, tdt", [(pypto.DT_FP32, torch.float32), (pypto.DT_FP16, torch.float16),
                                     (pypto.DT_BF16, torch.bfloat16)])
def test_a_local_tensor_written_blockwise_and_returned(rows, dt, tdt):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((B, rows, 16), dt)):
        pypto.set_vec_tile_shapes(1, 4, 16)
        acc = pypto.tensor([B, rows, 16], dt)
        for b in pypto.loop(0, B, 1):
            acc[b:, ...] = pypto.exp(x[b:b + 1, :, :]) + 1.0
        return acc

    for batch in (2, 3):
        x = torch.randn(batch, rows, 16).to(tdt)
        ref = (torch.exp(x.float()) + 1).to(tdt)
        torch.testing.assert_close(f(x), ref, rtol=2e-2, atol=2e-2)


def test_a_local_tensor_without_a_vec_tile_starts_at_zero_and_feeds_an_output():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((5, 9), pypto.DT_FP32), out: pypto.Tensor((5, 9), pypto.DT_FP32)):
        t = pypto.tensor((5, 9), pypto.DT_FP32, "scratch")  # no vec tile set yet
        pypto.set_vec_tile_shapes(4, 4)
        t[1:, 2:] = x[0:4, 0:7] * 2.0
        out.move(t + 1.0)

    x = torch.randn(5, 9)
    out = torch.zeros(5, 9)
    f(x, out)
    ref = torch.ones(5, 9)
    ref[1:, 2:] += x[:4, :7] * 2
    torch.testing.assert_close(out, ref)


def test_outside_a_kernel_it_is_an_annotation():
    a = pypto.tensor((6, 10), pypto.DT_FP32)
    assert isinstance(a, pypto.Tensor) and not a.is_traced and a.shape == (6, 10)
    assert not pypto.tensor().is_traced


@pytest.mark.parametrize("args, kind, words", [
    (((4, 0), pypto.DT_FP32), ValueError, r"pypto.tensor: shape dims must be positive ints or symbolic scalars, "
                                          r"found \[4, 0\]"),
    (((4, 4), "fp32"), TypeError, r"pypto.tensor: dtype must be a pypto dtype such as pypto.DT_FP32, found 'fp32'"),
])
def test_bad_local_tensors_are_named(args, kind, words):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((4, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.tensor(*args) + x

    with pytest.raises(kind, match=words):
        f(torch.randn(4, 4))
