"""Issue 2, end to end: the README's softmax against torch.softmax."""

import numpy as np
import pytest
import torch

import pypto
from conftest import softmax_kernel

SHAPES = [(64, 1024), (50, 100), (1, 33), (128, 4096)]


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_torch(shape):
    f = softmax_kernel(*shape)
    x = torch.randn(*shape)
    y = f(x)
    assert isinstance(y, torch.Tensor)
    assert y.dtype == torch.float32 and tuple(y.shape) == shape
    torch.testing.assert_close(y, torch.softmax(x, -1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_numpy(shape, rng):
    f = softmax_kernel(*shape)
    x = rng.standard_normal(shape).astype(np.float32)
    y = f(x)
    assert isinstance(y, np.ndarray)
    assert y.dtype == np.float32 and y.shape == shape
    ref = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(y, ref, atol=1e-5, rtol=0)


def test_softmax_large_values_are_stable():
    f = softmax_kernel(8, 40)
    x = torch.randn(8, 40) * 100 + 1000
    torch.testing.assert_close(f(x), torch.softmax(x, -1), atol=1e-5, rtol=0)


def test_softmax_reads_strided_input_in_place():
    f = softmax_kernel(40, 64)
    base = torch.randn(64, 40)
    x = base.t()  # non-contiguous view
    assert not x.is_contiguous()
    torch.testing.assert_close(f(x), torch.softmax(x, -1), atol=1e-5, rtol=0)


def test_softmax_is_one_incore_function_and_dump_shows_all_levels():
    f = softmax_kernel(64, 1024)
    c = pypto.compile(f, torch.randn(64, 1024))
    s = c.stats()
    assert s["incore_functions"] == 1
    assert list(s["buffer_bytes"].values())[0] > 0
    assert s["tasks"] == 2
    assert s["cache"] in ("memory", "disk", "compiled")
    assert s["compile_seconds"] >= 0
    d = c.dump()
    for header in ("Tensor Graph", "Tile Graph", "Block Graph", "Execution Graph", "PTO assembly", "Generated C++"):
        assert header in d
    pto = c.pto()
    for instr in ("tload", "trowmax", "texp", "trowexpandsub", "trowsum", "trowexpanddiv", "tstore", "CALL @", "FOR %"):
        assert instr in pto, instr
    assert "incore func @" in pto and "orchestration func @" in pto
    assert "pypto_orchestrate" in c.source()
    assert "buffer_bytes=" in c.dump("block")
    for stage in ("tensor", "tile", "block", "execution", "pto", "cpp", "passes"):
        assert c.dump(stage)
    with pytest.raises(ValueError, match="unknown stage"):
        c.dump("nope")


def test_compiled_object_is_callable():
    f = softmax_kernel(16, 48)
    x = torch.randn(16, 48)
    c = pypto.compile(f, x)
    torch.testing.assert_close(c(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="expects shape"):
        c(torch.randn(16, 49))


def test_task_count_follows_row_blocks():
    f = softmax_kernel(100, 64)
    c = pypto.compile(f, torch.randn(100, 64))
    assert c.stats()["tasks"] == 4  # ceil(100 / 32)


def test_memory_cache_reuses_compilation():
    f = softmax_kernel(32, 32)
    x = torch.randn(32, 32)
    f(x)
    assert pypto.compile(f, x).stats()["cache"] == "memory"


def test_jit_alias_and_operators():
    @pypto.jit
    def softmax_ops(x: pypto.Tensor((20, 70), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        e = pypto.exp(x - pypto.amax(x, dim=-1, keepdim=True))
        return e / pypto.sum(e, dim=-1, keepdim=True)

    x = torch.randn(20, 70)
    torch.testing.assert_close(softmax_ops(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
