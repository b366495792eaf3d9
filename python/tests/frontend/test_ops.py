"""Each op of issue 2 against torch, over shapes that do and do not divide by
the tile, with broadcasting of size-1 dims and both reduction forms."""

import numpy as np
import pytest
import torch

import pypto

TILES = [(32, 32), (8, 16), (4, 128)]
SHAPES = [(64, 64), (50, 100), (1, 33), (7, 1)]


def _binary(op, sa, sb, tile):
    @pypto.jit
    def f(a: pypto.Tensor(sa, pypto.DT_FP32), b: pypto.Tensor(sb, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        return getattr(pypto, op)(a, b)

    return f


REFS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


@pytest.mark.parametrize("op", sorted(REFS))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tile", TILES)
def test_binary_same_shape(op, shape, tile):
    a, b = torch.randn(*shape), torch.rand(*shape) + 0.5
    torch.testing.assert_close(_binary(op, shape, shape, tile)(a, b), REFS[op](a, b), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("op", sorted(REFS))
@pytest.mark.parametrize("sa,sb", [((50, 100), (50, 1)), ((50, 1), (50, 100)), ((50, 100), (1, 100)),
                                   ((1, 100), (50, 100)), ((50, 1), (1, 100)), ((3, 5, 7), (7,)), ((5, 7), (3, 1, 7))])
def test_binary_broadcast(op, sa, sb):
    tile = (16, 32) if len(sa) == 2 and len(sb) == 2 else (2, 4, 4)
    a, b = torch.randn(*sa), torch.rand(*sb) + 0.5
    torch.testing.assert_close(_binary(op, sa, sb, tile)(a, b), REFS[op](a, b), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("shape", SHAPES + [(3, 5, 40)])
def test_exp(shape):
    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*([4] * (len(shape) - 1) + [32]))
        return pypto.exp(x)

    x = torch.randn(*shape)
    torch.testing.assert_close(f(x), torch.exp(x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("op,ref", [("sum", torch.sum), ("amax", torch.amax)])
@pytest.mark.parametrize("shape", SHAPES + [(130, 257)])
@pytest.mark.parametrize("dim", [-1, 1, 0, -2])
@pytest.mark.parametrize("keepdim", [True, False])
def test_reductions(op, ref, shape, dim, keepdim):
    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 32)
        return getattr(pypto, op)(x, dim, keepdim)

    x = torch.randn(*shape)
    torch.testing.assert_close(f(x), ref(x, dim=dim, keepdim=keepdim), atol=1e-4, rtol=1e-5)


def test_reduction_of_3d_last_dim():
    @pypto.jit
    def f(x: pypto.Tensor((3, 10, 70), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4, 32)
        return pypto.sum(x, -1, True)

    x = torch.randn(3, 10, 70)
    torch.testing.assert_close(f(x), x.sum(-1, keepdim=True), atol=1e-4, rtol=1e-5)


def test_chain_with_two_outputs_numpy():
    @pypto.jit
    def f(x: pypto.Tensor((40, 72), pypto.DT_FP32), y: pypto.Tensor((40, 72), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 16)
        s = x + y
        return s, pypto.amax(s * y, -1, False)

    x = np.random.default_rng(0).standard_normal((40, 72)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((40, 72)).astype(np.float32)
    s, m = f(x, y)
    np.testing.assert_allclose(s, x + y, atol=1e-6)
    np.testing.assert_allclose(m, ((x + y) * y).max(-1), atol=1e-6)


def test_tile_shape_set_by_the_last_call_before_each_op():
    @pypto.jit
    def f(x: pypto.Tensor((64, 64), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 32)
        a = pypto.exp(x)
        pypto.set_vec_tile_shapes(16, 64)
        return pypto.add(a, x)

    c = pypto.compile(f, torch.randn(64, 64))
    text = c.dump("tensor")
    assert "tile [32, 32]" in text and "tile [16, 64]" in text
    x = torch.randn(64, 64)
    torch.testing.assert_close(c(x), torch.exp(x) + x)


def test_fp16_runs_and_computes_in_fp32():
    @pypto.jit
    def f(x: pypto.Tensor((8, 8), pypto.DT_FP16)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.exp(x)

    x = torch.randn(8, 8).half()
    y = f(x)
    assert y.dtype == torch.float16
    torch.testing.assert_close(y, torch.exp(x.float()).half(), atol=1e-3, rtol=1e-3)


def test_fusion_can_be_disabled():
    from conftest import softmax_kernel

    pypto.set_pass_options(fusion=False)
    try:
        f = softmax_kernel(64, 128)
        x = torch.randn(64, 128)
        c = pypto.compile(f, x)
        assert c.stats()["incore_functions"] == 5
        torch.testing.assert_close(c(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
    finally:
        pypto.set_pass_options(fusion=True)
