"""topk and argsort against torch: both selection paths of the tile library (a threshold scan when
k is small against the dim, a radix sort otherwise), largest and smallest, every dim (argsort),
float and integer dtypes, ties (the lower position first), NaN (the largest), -0 and +0 (equal),
a dynamic dim beside the sorted one, the Tensor methods and the errors."""

import numpy as np
import pytest
import torch

import pypto

PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE, torch.int32: pypto.DT_INT32, torch.int8: pypto.DT_INT8,
      torch.int64: pypto.DT_INT64}


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(-20, 20, shape, generator=g).to(dtype)  # many ties


def stable_order(x, dim, descending):
    """Positions sorting x along dim, equal values in position order, NaN the largest (torch's stable sort)."""
    return torch.argsort(x, dim=dim, descending=descending, stable=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.int8, torch.int64])
@pytest.mark.parametrize("shape,k", [((37, 100), 1), ((37, 100), 5), ((37, 100), 100), ((6, 1000), 8),
                                     ((6, 1000), 300), ((2, 3, 65), 7)])
def test_topk_values_and_positions(dtype, shape, k):
    x = rand(shape, dtype, seed=k)
    for largest in (True, False):
        @pypto.jit
        def f(x: pypto.Tensor(shape, PT[dtype])):
            pypto.set_vec_tile_shapes(*([4] * (len(shape) - 1) + [32]))
            return pypto.topk(x, k, -1, largest)

        values, idx = f(x)
        assert values.dtype == dtype and idx.dtype == torch.int32
        ref_idx = stable_order(x, -1, largest)[..., :k]
        assert torch.equal(idx.long(), ref_idx)
        assert torch.equal(values, torch.topk(x, k, -1, largest).values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
@pytest.mark.parametrize("shape", [(37, 100), (3, 20, 33), (50,)])
def test_argsort_every_dim(dtype, shape):
    x = rand(shape, dtype, seed=len(shape))
    for dim in range(-len(shape), len(shape)):
        @pypto.jit
        def f(x: pypto.Tensor(shape, PT[dtype])):
            pypto.set_vec_tile_shapes(*([4] * (len(shape) - 1) + [16]))
            return pypto.argsort(x, dim), x.argsort(dim, descending=False)

        down, up = f(x)
        assert down.dtype == torch.int32
        assert torch.equal(down.long(), stable_order(x, dim, True))
        assert torch.equal(up.long(), stable_order(x, dim, False))


def test_nan_is_largest_and_the_zeros_are_equal():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, -inf, 0.0, -0.0, inf, nan, 2.0] * 4,
                      [-0.0, 0.0, -0.0, 0.0, 5.0, -5.0, 1e-45, -1e-45] * 4])

    @pypto.jit
    def f(x: pypto.Tensor((2, 32), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 32)
        v, i = pypto.topk(x, 2)
        return pypto.argsort(x), pypto.argsort(x, -1, False), i, x.topk(3, largest=False)[1]

    down, up, top2, bottom3 = f(x)
    # torch's stable sort orders -0 and +0 as equal and NaN above everything.
    assert torch.equal(down.long(), stable_order(x, -1, True))
    assert torch.equal(up.long(), stable_order(x, -1, False))
    assert top2.tolist() == [[1, 6], [4, 12]]
    assert torch.equal(bottom3.long(), stable_order(x, -1, False)[:, :3])


def test_a_dynamic_dim_beside_the_sorted_one_and_numpy():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        return pypto.topk(x, 4)[1], pypto.argsort(x)

    for rows in (1, 19):
        x = rand((rows, 64), torch.float32, seed=rows)
        idx, order = f(x)
        assert torch.equal(idx.long(), stable_order(x, -1, True)[:, :4])
        assert torch.equal(order.long(), stable_order(x, -1, True))
    idx_np, order_np = f(x.numpy())
    assert isinstance(idx_np, np.ndarray) and idx_np.dtype == np.int32
    assert np.array_equal(order_np, stable_order(x, -1, True).numpy())


def test_topk_feeds_the_ops_after_it():
    # The router of a mixture of experts: softmax scores, the top 2, renormalised.
    @pypto.jit
    def f(logits: pypto.Tensor((16, 64), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 64)
        scores = pypto.softmax(logits, -1)
        w, idx = pypto.topk(scores, 2)
        return pypto.div(w, pypto.sum(w, -1, True)), idx

    logits = rand((16, 64), torch.float32, seed=9)
    w, idx = f(logits)
    rw, ridx = torch.topk(torch.softmax(logits, -1), 2)
    assert torch.equal(idx.long(), ridx)
    torch.testing.assert_close(w, rw / rw.sum(-1, keepdim=True), rtol=1e-6, atol=1e-7)


def test_errors_name_the_op_the_argument_and_the_value():
    @pypto.jit
    def big_k(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.topk(x, 9)

    with pytest.raises(ValueError, match=r"pypto\.topk at .*test_sort_topk\.py:\d+: k = 9 is out of range for dim 1 of "
                                         r"size 8 \(expected 1 to 8\)"):
        big_k(torch.zeros(4, 8))

    @pypto.jit
    def bad_algo(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.topk(x, 2, -1, True, "radix")

    with pytest.raises(TypeError, match=r"pypto\.topk: algo must be a pypto\.TopKAlgo, found str 'radix'"):
        bad_algo(torch.zeros(4, 8))

    @pypto.jit
    def bad_flag(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.argsort(x, -1, 1)

    with pytest.raises(TypeError, match=r"pypto\.argsort: descending must be a bool, found int 1"):
        bad_flag(torch.zeros(4, 8))

    @pypto.jit
    def bad_dim(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.argsort(x, 2)

    with pytest.raises(ValueError, match=r"pypto\.argsort at .*: dim 2 is out of range for a tensor of rank 2"):
        bad_dim(torch.zeros(4, 8))

    @pypto.jit
    def dynamic(x: pypto.Tensor([4, pypto.DYNAMIC], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.argsort(x)

    with pytest.raises(NotImplementedError, match=r"pypto\.argsort: sorting a dynamic dim .* is not supported yet"):
        dynamic(torch.zeros(4, 8))

    @pypto.jit
    def of_bool(x: pypto.Tensor((4, 8), pypto.DT_BOOL)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.argsort(x)

    with pytest.raises(TypeError, match=r"pypto\.argsort at .*: expects a float or integer tensor, found DT_BOOL"):
        of_bool(torch.zeros(4, 8, dtype=torch.bool))

    # The enum upstream passes exists with its two members.
    assert {a.name for a in pypto.TopKAlgo} == {"MERGE_SORT", "RADIX_SELECT"}
