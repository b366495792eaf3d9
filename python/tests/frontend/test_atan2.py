"""pypto.atan2 against torch.atan2: every float dtype, broadcasting, shapes that do and do not divide
by the tile, a dynamic dim, integer inputs (DT_FP32 results), every quadrant and the special values
(signed zeros, infinities, NaN), and a fused chain. The fp32 bound (3 ulp) is measured against libm
by cpp_tests/codegen/vector_math_cases.inc."""

import numpy as np
import pytest
import torch

import pypto

PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE}
TOL = {torch.float32: dict(rtol=4e-7, atol=1e-37), torch.float16: dict(rtol=1e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=8e-3, atol=1e-5), torch.float64: dict(rtol=1e-14, atol=0.0)}


def kernel(sa, sb, dt, tile):
    @pypto.jit
    def f(y: pypto.Tensor(sa, dt), x: pypto.Tensor(sb, dt)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.atan2(y, x)

    return f


@pytest.mark.parametrize("dtype", list(PT))
@pytest.mark.parametrize("sa,sb,tile", [((7, 33), (7, 33), (4, 16)), ((64, 64), (64, 64), (16, 32)),
                                        ((37, 1), (1, 45), (8, 16)), ((3, 5, 20), (20,), (1, 4, 8))])
def test_against_torch(dtype, sa, sb, tile):
    g = torch.Generator().manual_seed(3)
    # magnitudes over many binades, both signs: every quadrant and octant
    y = (torch.randn(sa, generator=g, dtype=torch.float64) * 10 ** torch.randint(-3, 4, sa, generator=g)).to(dtype)
    x = (torch.randn(sb, generator=g, dtype=torch.float64) * 10 ** torch.randint(-3, 4, sb, generator=g)).to(dtype)
    got = kernel(sa, sb, PT[dtype], tile)(y, x)
    want = torch.atan2(y.double(), x.double()).to(dtype)
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, **TOL[dtype])


def test_special_values_as_torch():
    v = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 3e38, 1e-45, -2.0])
    y = v.repeat_interleave(8).reshape(8, 8)
    x = v.repeat(8).reshape(8, 8)
    got = kernel((8, 8), (8, 8), pypto.DT_FP32, (8, 8))(y, x)
    want = torch.atan2(y.double(), x.double()).float()
    torch.testing.assert_close(got, want, equal_nan=True, rtol=4e-7, atol=0)
    assert torch.equal(got.signbit() & ~got.isnan(), want.signbit() & ~want.isnan())  # signed zeros too


def test_integers_dynamic_dims_numpy_and_a_fused_chain():
    @pypto.jit
    def f(y: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_INT32), x: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.atan2(y, x) * 2.0 + 1.0

    for rows in (1, 13, 40):
        y = np.random.default_rng(rows).integers(-50, 50, (rows, 24)).astype(np.int32)
        x = np.random.default_rng(rows + 1).integers(-50, 50, (rows, 24)).astype(np.int32)
        got = f(y, x)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, np.arctan2(y.astype(np.float64), x) * 2 + 1, rtol=1e-6, atol=1e-6)
    c = f.compile(np.ones((16, 24), np.int32), np.ones((16, 24), np.int32))
    assert "tatan2" in c.pto()


def test_bad_operands_raise():
    @pypto.jit
    def f(y: pypto.Tensor((4, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.atan2(y, "x")

    with pytest.raises(TypeError, match="atan2"):
        f(torch.ones(4, 4))
