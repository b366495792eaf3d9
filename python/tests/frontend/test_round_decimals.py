"""pypto.round(x, decimals) (PyPTO's signature) against torch.round(x, decimals=...)."""

import numpy as np
import pytest
import torch

import pypto

R = pypto.frontend.dynamic("R")


@pytest.mark.parametrize("decimals", [1, 2, 3, -1, -2])
@pytest.mark.parametrize("dt, tdt", [(pypto.DT_FP32, torch.float32), (pypto.DT_FP16, torch.float16),
                                     (pypto.DT_BF16, torch.bfloat16)])
def test_round_to_decimals_as_torch(decimals, dt, tdt):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((R, 20), dt)):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.round(x, decimals=decimals), x.round(decimals)

    for rows in (8, 7):  # divides the tile, or does not
        x = (torch.randn(rows, 20) * 300).to(tdt)
        a, b = f(x)
        ref = torch.round(x.float(), decimals=decimals).to(tdt)
        tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}[tdt]
        torch.testing.assert_close(a, ref, rtol=tol, atol=10.0 ** -decimals * 1e-3)
        torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_upstream_example_values_and_halves_to_even():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((2, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4)
        return pypto.round(x, decimals=1), pypto.round(x, -1), pypto.round(x)

    x = torch.tensor([[1.21, 2.35, 3.65, 4.76], [125.0, 135.0, -250.0, 2.5]])
    one, tens, whole = f(x)
    torch.testing.assert_close(one, torch.round(x, decimals=1))
    torch.testing.assert_close(tens, torch.tensor([[0.0, 0.0, 0.0, 0.0], [120.0, 140.0, -250.0, 0.0]]))
    torch.testing.assert_close(whole, torch.round(x))


def test_integers_keep_their_value_and_negative_decimals_on_them_is_not_supported_yet():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((3, 5), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(3, 5)
        return pypto.round(x, decimals=2)

    x = np.arange(15, dtype=np.int32).reshape(3, 5) * 7 - 40
    got = f(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, x)

    @pypto.frontend.jit
    def g(x: pypto.Tensor((3, 5), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(3, 5)
        return pypto.round(x, decimals=-1)

    with pytest.raises(NotImplementedError, match=r"pypto.round: decimals=-1 on an integer tensor \(DT_INT32\) is not "
                                                  r"supported yet"):
        g(x)
    with pytest.raises(TypeError, match=r"pypto.round: decimals must be an int, found float 1.5"):
        pypto.compile(pypto.jit(lambda x: pypto.round(x, 1.5)), np.zeros((2, 2), np.float32))
