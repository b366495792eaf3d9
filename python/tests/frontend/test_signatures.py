"""Annotation forms, dynamic dims, compile-time constants (issue 3)."""

import dataclasses
import enum

import numpy as np
import pytest
import torch

import pypto

M = pypto.frontend.dynamic("M")


def test_dynamic_dim_compiles_once_for_all_sizes():
    @pypto.jit
    def softmax(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)) -> pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32):
        pypto.set_vec_tile_shapes(16, 32)
        return pypto.softmax(x, -1)

    libs = set()
    for rows in (5, 37, 130):
        x = torch.randn(rows, 64)
        torch.testing.assert_close(softmax(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
        c = softmax.compile(x)
        libs.add(c.stats()["library"])
        assert c.stats()["tasks"] == -(-rows // 16)
    assert len(libs) == 1 and len(softmax._cache) == 1


def test_named_dynamic_dim_shared_by_parameters_and_symbolic_shape():
    @pypto.jit
    def f(x: pypto.Tensor([M, 32], pypto.DT_FP32), y: pypto.Tensor([M, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        rows = x.shape[0]
        assert isinstance(rows, pypto.SymExpr)
        return x * y + rows

    for rows in (3, 20):
        x, y = torch.randn(rows, 32), torch.randn(rows, 1)
        torch.testing.assert_close(f(x, y), x * y + rows)
    with pytest.raises(ValueError, match=r"dynamic dim 'M' is 4 in parameter 'x' but 5 in parameter 'y'"):
        f(torch.randn(4, 32), torch.randn(5, 1))


def test_dynamic_inner_dim_and_ellipsis():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.rms_norm(x)

    for shape in ((3, 48), (9, 48)):
        x = torch.randn(*shape)
        torch.testing.assert_close(f(x), torch.nn.functional.rms_norm(x, (shape[1],), eps=1e-6), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("ann", [pypto.Tensor(), pypto.Tensor([], pypto.DT_FP32), pypto.Tensor[[6, 10], pypto.DT_FP32],
                                 pypto.Tensor[...], pypto.tensor((6, 10), pypto.DT_FP32)])
def test_annotation_forms(ann):
    @pypto.jit
    def f(x: ann):
        pypto.set_vec_tile_shapes(4, 4)
        return x * 2

    x = torch.randn(6, 10)
    torch.testing.assert_close(f(x), x * 2)


@dataclasses.dataclass(frozen=True)
class Cfg:
    scale: float
    tile: tuple


@dataclasses.dataclass
class PlainCfg:
    bias: int


def test_constants_specialise():
    @pypto.jit
    def f(x: pypto.Tensor((8, 8), pypto.DT_FP32), k: int, cfg: Cfg, p: PlainCfg, dt: pypto.DataType, flag=False):
        pypto.set_vec_tile_shapes(*cfg.tile)
        y = pypto.cast(x * cfg.scale + k + p.bias, dt)
        return -y if flag else y

    x = torch.randn(8, 8)
    torch.testing.assert_close(f(x, 2, Cfg(0.5, (4, 4)), PlainCfg(1), pypto.DT_FP32), x * 0.5 + 3)
    torch.testing.assert_close(f(x, 3, Cfg(2.0, (8, 8)), PlainCfg(0), pypto.DT_FP32, flag=True), -(x * 2 + 3))
    assert f(x, 2, Cfg(0.5, (4, 4)), PlainCfg(1), pypto.DT_FP16).dtype == torch.float16
    assert len(f._cache) == 3
    with pytest.raises(TypeError, match=r"parameter 'k' is a compile-time constant and must be .*; found object"):
        f(x, object(), Cfg(0.5, (4, 4)), PlainCfg(1), pypto.DT_FP32)


class Mode(enum.Enum):
    DOUBLE = 1
    NEGATE = 2


@dataclasses.dataclass
class Region:
    offsets: list
    shape: list


@pytest.mark.parametrize("rows", [8, 9])  # the tile divides the rows, or does not
def test_lists_dicts_enums_and_dataclasses_of_lists_are_constants(rows):
    @pypto.jit
    def f(x: pypto.Tensor([], pypto.DT_FP32), out: pypto.Tensor([], pypto.DT_FP32), region: Region, mode: Mode,
          scales: dict, shape: list):
        pypto.set_vec_tile_shapes(4, 4)
        v = pypto.view(x, shape, region.offsets)
        v = v * 2 if mode == Mode.DOUBLE else -v
        pypto.assemble(v * scales["k"], region.offsets, out)

    x = torch.randn(rows, 6)
    for offsets, mode, k in (([1, 2], Mode.DOUBLE, 1.5), ([3, 0], Mode.NEGATE, 2.0), ([1, 2], Mode.DOUBLE, 1.5)):
        out = torch.zeros(rows, 6)
        f(x, out, Region(offsets, [5, 4]), mode, {"k": k}, [5, 4])
        ref = torch.zeros(rows, 6)
        r, c = offsets
        blk = x[r:r + 5, c:c + 4]
        ref[r:r + 5, c:c + 4] = (blk * 2 if mode == Mode.DOUBLE else -blk) * k
        torch.testing.assert_close(out, ref)
    assert len(f._cache) == 2  # the third call reuses the first kernel


def test_numpy_dynamic():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.amax(x, -1, True) - x

    for shape in ((3, 5), (17, 33)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(f(x), x.max(-1, keepdims=True) - x)


def test_dynamic_reduced_dim_uses_a_run_time_sized_local_buffer():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.softmax(x, -1)

    for shape in ((5, 7), (20, 100), (9, 300)):
        x = torch.randn(*shape)
        torch.testing.assert_close(f(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
    assert len(f._cache) == 1
    assert f.compile(torch.randn(3, 3)).stats()["incore_functions"] == 1


def test_symbolic_scalar_arithmetic_in_views():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 8], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        n = x.shape[0]
        half = n // 2
        last = (n - 1) % n          # n - 1
        top = pypto.view(x, [4, 8], [half - 2, 0])
        row = pypto.view(x, [1, 8], [last, 0])
        pypto.set_vec_tile_shapes(4, 8)
        return top * (n - half).max(1) + row

    for rows in (6, 11):
        x = torch.randn(rows, 8)
        h = rows // 2
        torch.testing.assert_close(f(x), x[h - 2:h + 2] * max(rows - h, 1) + x[rows - 1:rows])


def test_numpy_strided_input_is_read_in_place():
    @pypto.jit
    def f(x: pypto.Tensor((5, 7), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.exp(x)

    base = np.random.default_rng(3).standard_normal((10, 21)).astype(np.float32)
    x = base[::2, ::3]
    assert not x.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(f(x), np.exp(x), rtol=1e-6)
