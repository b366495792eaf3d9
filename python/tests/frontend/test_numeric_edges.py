"""var must not overflow in its intermediate values where torch's result is finite."""

import numpy as np
import pytest
import torch

import pypto


def _var(shape, tile, dim, keepdim, correction, dtype=pypto.DT_FP32):
    @pypto.frontend.jit
    def var(x: pypto.Tensor(shape, dtype)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.var(x, dim, correction, keepdim)  # PyPTO's order

    return var


@pytest.mark.parametrize("value", [1e30, -3e38, 1e-30, 7.0])
@pytest.mark.parametrize("n", [1024, 1000])
def test_var_of_equal_values_is_zero(value, n):
    # Deviations from a rounded mean (their sum overflows float32 for the large values) would square
    # past float32's range; deviations from the slice's first element are exactly 0.
    x = torch.full((4, n), value)
    out = _var((4, n), (4, 256), -1, True, 1)(x)
    torch.testing.assert_close(out, torch.var(x, -1, keepdim=True))
    assert (out == 0).all()


@pytest.mark.parametrize("shape, tile, dim, keepdim, correction", [
    ((37, 200), (16, 64), -1, False, 1),
    ((37, 200), (16, 64), 0, True, 0),
    ((3, 40, 50), (2, 16, 16), [0, 2], False, 0),
    ((6, 33), (4, 16), [1], True, 2),
])
def test_var_matches_torch(shape, tile, dim, keepdim, correction):
    x = torch.randn(*shape) * 3 + 1e4  # a large offset: the shifted variance keeps its precision
    out = _var(shape, tile, dim, keepdim, correction)(x)
    ref = torch.var(x.double(), dim, correction=correction, keepdim=keepdim).float()
    torch.testing.assert_close(out, ref, rtol=2e-4, atol=1e-3)


def test_var_of_equal_values_through_numpy():
    x = np.full((2, 512), 3e38, np.float32)
    out = _var((2, 512), (2, 128), -1, True, 0)(x)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.zeros((2, 1), np.float32))
