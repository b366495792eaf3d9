"""PyPTO's other names for ops pypto has: index_add_ub / index_add__ub (its on-chip-buffer forms),
expand_exp_dif, the Tensor.pad method, get_scatter_mode and the enums PyPTO exports for scatter
modes, atomic updates, comparisons and symbolic conditions."""

import pytest
import torch

import pypto


def test_index_add_ub_forms_match_torch_with_duplicates():
    @pypto.jit
    def f(x: pypto.Tensor((9, 12), pypto.DT_FP32), index: pypto.Tensor((7,), pypto.DT_INT64),
          source: pypto.Tensor((7, 12), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        y = pypto.index_add_ub(x, 0, index, source, alpha=2.0)
        pypto.index_add__ub(x, 0, index, source)
        return y

    x, source = torch.randn(9, 12), torch.randn(7, 12)
    index = torch.tensor([0, 3, 3, 8, 1, 3, 0])
    want_y = torch.index_add(x.double(), 0, index, source.double(), alpha=2.0).float()
    want_x = torch.index_add(x.double(), 0, index, source.double()).float()
    y = f(x, index, source)
    torch.testing.assert_close(y, want_y, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x, want_x, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("other_shape", [(1, 13), (6, 1), (6, 13)])
def test_expand_exp_dif_broadcasts(other_shape):
    @pypto.jit
    def f(a: pypto.Tensor((6, 13), pypto.DT_FP32), b: pypto.Tensor(other_shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.expand_exp_dif(a, b)

    a, b = torch.randn(6, 13), torch.randn(*other_shape)
    torch.testing.assert_close(f(a, b), torch.exp(a.double() - b.double()).float(), rtol=1e-6, atol=1e-7)


def test_pad_method_matches_the_function():
    @pypto.jit
    def f(x: pypto.Tensor((5, 7), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return x.pad([1, 2, 0, 3], value=1.5), pypto.pad(x, [1, 2, 0, 3], value=1.5)

    x = torch.randn(5, 7)
    m, fn = f(x)
    want = torch.nn.functional.pad(x, [1, 2, 0, 3], value=1.5)
    assert torch.equal(m, want) and torch.equal(fn, want)


def test_get_scatter_mode_and_the_enums():
    assert pypto.get_scatter_mode(None) is pypto.ScatterMode.NONE
    assert pypto.get_scatter_mode("add") is pypto.ScatterMode.ADD
    assert pypto.get_scatter_mode("multiply") is pypto.ScatterMode.MULTIPLY
    with pytest.raises(pypto.UserError, match=r"get_scatter_mode: reduce must be None, 'add' or 'multiply', found 'max'"):
        pypto.get_scatter_mode("max")
    assert [m.name for m in pypto.OpType] == ["EQ", "NE", "LT", "LE", "GT", "GE"]
    assert [m.name for m in pypto.OutType] == ["BOOL", "BIT"]
    assert [m.name for m in pypto.AtomicRMWMode] == ["ADD", "MIN", "MAX"]
    assert [m.name for m in pypto.AtomicType] == ["SET", "ADD"]
    assert [m.name for m in pypto.ReduceMode] == ["ATOMIC_ADD"]
    assert [m.name for m in pypto.SatStatus] == ["SAT", "UNSAT", "UNKNOWN"]
    assert str(pypto.ScatterMode.ADD) == "ScatterMode.ADD"
