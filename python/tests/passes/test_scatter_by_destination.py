"""Scatters of whole rows by destination block (pass expand_tiles, csrc/passes/expand_tiles/data.cc):
where the tile covers the trailing dims, index_add runs one task per block of destination rows, each
taking the indices of its own window (`tscatter ... window=[base, bound]` in the .pto text) from every
source block in order. The rows must land exactly as the serial form adds them (in index order,
each addition rounded), out-of-range indices still raise from the kernel, and the copy of the input
shares each block's task.
"""

import pytest
import torch

import pypto

D = pypto.DYNAMIC


def _in_order(x, dim, index, source, alpha=1):
    """index_add in x's dtype, one source slice at a time in index order (each addition rounded)."""
    out = x.clone()
    for i, k in enumerate(index.tolist()):
        row = source.select(dim, i)
        out.select(dim, k).add_(row if alpha == 1 else row * alpha)
    return out


def _kernel(m, t, cols, tile, dtype=pypto.DT_FP32, alpha=1):
    @pypto.jit
    def f(x: pypto.Tensor((m, cols), dtype), i: pypto.Tensor((t,), pypto.DT_INT64),
          s: pypto.Tensor((t, cols), dtype)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.index_add(x, 0, i, s, alpha=alpha)
    return f


@pytest.mark.parametrize("m,t,rows", [(100, 150, 16), (64, 7, 16), (33, 200, 8)])
@pytest.mark.parametrize("alpha", [1, 0.5])
def test_rows_land_in_index_order_bit_for_bit(m, t, rows, alpha):
    g = torch.Generator().manual_seed(m + t)
    x, s = torch.randn(m, 48, generator=g), torch.randn(t, 48, generator=g)
    index = torch.randint(0, m, (t,), generator=g)
    index[: t // 3] = m - 1  # many duplicates in the last (tail) block
    f = _kernel(m, t, 48, (rows, 48), alpha=alpha)
    pto = pypto.compile(f, x, index, s).pto()
    assert " window=[" in pto, pto
    got = f(x, index, s)
    assert torch.equal(got, _in_order(x, 0, index, s, alpha))
    assert torch.equal(got, f(x, index, s))
    torch.testing.assert_close(got, torch.index_add(x.double(), 0, index, s.double(), alpha=alpha).float())


def test_the_copy_and_the_scatter_share_a_task_per_block():
    f = _kernel(64, 40, 32, (16, 32))
    x, s, index = torch.randn(64, 32), torch.randn(40, 32), torch.randint(0, 64, (40,))
    block = pypto.compile(f, x, index, s).dump("block")
    assert block.count("incore func") == 1, block
    assert "fused=[assemble_" in block and "scatter_" in block, block
    assert torch.equal(f(x, index, s), _in_order(x, 0, index, s))


def test_integers_and_dynamic_dims():
    @pypto.jit
    def f(x: pypto.Tensor((D, 40), pypto.DT_INT32), i: pypto.Tensor((D,), pypto.DT_INT64),
          s: pypto.Tensor((D, 40), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 40)
        return pypto.index_add(x, 0, i, s, alpha=3)

    for m, t in [(50, 70), (19, 5), (8, 33)]:
        g = torch.Generator().manual_seed(m)
        x = torch.randint(-100, 100, (m, 40), generator=g, dtype=torch.int32)
        s = torch.randint(-100, 100, (t, 40), generator=g, dtype=torch.int32)
        index = torch.randint(0, m, (t,), generator=g)
        assert torch.equal(f(x, index, s), torch.index_add(x, 0, index, s, alpha=3))
    assert " window=[" in pypto.compile(f, x, index, s).pto()


def test_a_middle_dim_of_a_rank_3_tensor():
    @pypto.jit
    def f(x: pypto.Tensor((3, 40, 32), pypto.DT_FP32), i: pypto.Tensor((25,), pypto.DT_INT64),
          s: pypto.Tensor((3, 25, 32), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8, 32)
        return pypto.index_add(x, 1, i, s)

    g = torch.Generator().manual_seed(3)
    x, s = torch.randn(3, 40, 32, generator=g), torch.randn(3, 25, 32, generator=g)
    index = torch.randint(0, 40, (25,), generator=g)
    assert " window=[" in pypto.compile(f, x, index, s).pto()
    assert torch.equal(f(x, index, s), _in_order(x, 1, index, s))


def test_in_place_into_the_callers_tensor():
    @pypto.jit
    def f(x: pypto.Tensor((48, 16), pypto.DT_FP32), i: pypto.Tensor((30,), pypto.DT_INT64),
          s: pypto.Tensor((30, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 16)
        y = pypto.index_add_(x, 0, i, s)
        return y + 1.0  # reads what the scatter wrote

    x, s, index = torch.randn(48, 16), torch.randn(30, 16), torch.randint(0, 48, (30,))
    want = _in_order(x, 0, index, s)
    assert " window=[" in pypto.compile(f, x.clone(), index, s).pto()
    plus_one = f(x, index, s)
    assert torch.equal(x, want)
    assert torch.equal(plus_one, want + 1.0)


@pytest.mark.parametrize("bad", [-1, 100, 2 ** 40])
def test_an_index_outside_the_dim_raises_from_the_kernel(bad):
    f = _kernel(100, 9, 16, (16, 16))
    index = torch.tensor([0, 99, 5, bad, 3, 3, 50, 7, 1])
    with pytest.raises(pypto.TaskError, match=rf"index {bad} on axis 0 is outside \[0, 100\).*pypto\.index_add at"):
        f(torch.zeros(100, 16), index, torch.ones(9, 16))


def test_where_blocks_would_not_pay_the_serial_form_runs():
    # Columns the tile does not cover (the source box is not dense), fp16 (the source would be
    # converted once per block) and a single destination block keep the serial scatter.
    g = torch.Generator().manual_seed(5)
    for m, cols, tile, dtype in [(64, 48, (16, 16), torch.float32), (64, 48, (16, 48), torch.float16),
                                 (16, 48, (16, 48), torch.float32)]:
        x = torch.randn(m, cols, generator=g).to(dtype)
        s = torch.randn(30, cols, generator=g).to(dtype)
        index = torch.randint(0, m, (30,), generator=g)
        f = _kernel(m, 30, cols, tile, dtype=pypto.DT_FP16 if dtype == torch.float16 else pypto.DT_FP32)
        assert " window=[" not in pypto.compile(f, x, index, s).pto()
        got = f(x, index, s)
        if dtype == torch.float32:
            assert torch.equal(got, _in_order(x, 0, index, s))
        else:
            torch.testing.assert_close(got.double(), _in_order(x.double(), 0, index, s.double()), rtol=2e-2, atol=2e-2)
