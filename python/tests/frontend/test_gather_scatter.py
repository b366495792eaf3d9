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
