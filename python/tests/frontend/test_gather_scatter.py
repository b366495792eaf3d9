"""gather and scatter against torch (issue 3)."""

import pytest
import torch

import pypto


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32])
def test_gather(dim, idx_dtype):
    x = torch.randn(9, 13)
    index = torch.randint(0, x.shape[dim], (7, 10), dtype=idx_dtype)

    @pypto.jit
    def f(x: pypto.Tensor((9, 13), pypto.DT_FP32), i: pypto.Tensor()):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.gather(x, dim, i)

    torch.testing.assert_close(f(x, index), torch.gather(x, dim, index.long()))


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(dim):
    x = torch.randn(6, 11)
    # a permutation along dim: no duplicate targets, so torch's result is deterministic
    perm = torch.stack([torch.randperm(x.shape[dim])[:4] for _ in range(x.shape[1 - dim] if dim == 0 else 6)])
    index = perm.t().contiguous() if dim == 0 else perm[:, :4]
    src = torch.randn(*index.shape)

    @pypto.jit
    def f(x: pypto.Tensor((6, 11), pypto.DT_FP32), i: pypto.Tensor(), s: pypto.Tensor()):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.scatter(x, dim, i, s), pypto.scatter(x, dim, i, 0.5)

    a, b = f(x, index, src)
    torch.testing.assert_close(a, torch.scatter(x, dim, index, src))
    torch.testing.assert_close(b, torch.scatter(x, dim, index, 0.5))


def test_gather_index_out_of_range_is_a_task_error():
    @pypto.jit
    def f(x: pypto.Tensor((4, 5), pypto.DT_FP32), i: pypto.Tensor((4, 2), pypto.DT_INT64)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.gather(x, 1, i)

    with pytest.raises(pypto.TaskError, match="gather"):
        f(torch.randn(4, 5), torch.full((4, 2), 7))


def test_gather_index_dtype_error():
    @pypto.jit
    def f(x: pypto.Tensor((4, 5), pypto.DT_FP32), i: pypto.Tensor((4, 2), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.gather(x, 1, i)  # bad index

    with pytest.raises(TypeError, match=r"pypto.gather at .*: index must be DT_INT32 or DT_INT64, found DT_FP32"):
        f(torch.randn(4, 5), torch.zeros(4, 2))


def _index_order_reference(x, dim, index, src, reduce):
    """scatter with reduce, combining values one by one in index order (row-major), in float64."""
    out = x.double().clone()
    for pos in torch.cartesian_prod(*[torch.arange(n) for n in index.shape]).tolist():
        at = list(pos)
        at[dim] = int(index[tuple(pos)])
        v = float(src[tuple(pos)])
        out[tuple(at)] = out[tuple(at)] + v if reduce == "add" else out[tuple(at)] * v
    return out


@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_scatter_reduce_accumulates_duplicates(reduce, dim, dtype):
    dt = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.int32: pypto.DT_INT32}[dtype]
    g = torch.Generator().manual_seed(dim)
    if dtype.is_floating_point:
        x = (torch.rand(6, 11, generator=g) + 0.5).to(dtype)
        src = (torch.rand(9, 10, generator=g) + 0.5).to(dtype)
    else:
        x = torch.randint(-3, 4, (6, 11), generator=g, dtype=dtype)
        src = torch.randint(-2, 3, (9, 10), generator=g, dtype=dtype)
    index = torch.randint(0, 3, (9, 10), generator=g)  # few targets: many duplicates, across tiles too
    if dim == 1:
        index, src = index[:6], src[:6]

    @pypto.jit
    def f(x: pypto.Tensor((6, 11), dt), i: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_INT64),
          s: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], dt)):
        pypto.set_vec_tile_shapes(4, 8)  # index rows and columns in several tiles
        return pypto.scatter(x, dim, i, s, reduce=reduce)

    got = f(x, index, src)
    if dtype.is_floating_point and dtype != torch.float32:
        torch.testing.assert_close(got.double(), _index_order_reference(x, dim, index, src, reduce), rtol=2e-2, atol=1e-2)
    else:
        ref = torch.scatter_reduce(x, dim, index, src, "sum" if reduce == "add" else "prod")
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(got, f(x, index, src))  # deterministic: the same order every run
    c = f.compile(x, index, src)
    assert f"reduce={'add' if reduce == 'add' else 'mul'}" in c.pto()


def test_scatter_reduce_with_a_number_and_errors():
    @pypto.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), i: pypto.Tensor((4, 8), pypto.DT_INT64)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.scatter(x, 1, i, 2.0, reduce="multiply")

    x, index = torch.rand(4, 8), torch.zeros(4, 8, dtype=torch.int64)
    torch.testing.assert_close(f(x, index), torch.scatter_reduce(x, 1, index, torch.full((4, 8), 2.0), "prod"))

    @pypto.jit
    def g(x: pypto.Tensor((4, 8), pypto.DT_FP32), i: pypto.Tensor((4, 8), pypto.DT_INT64)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.scatter(x, 1, i, 1.0, reduce="max")

    with pytest.raises(ValueError, match=r"pypto.scatter: reduce must be None, 'add' or 'multiply', found 'max'"):
        g(x, index)
