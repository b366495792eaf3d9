"""pypto.sort32 and pypto.mrgsort (PyPTO's (value, index) pair streams) against torch's stable sort:
blocks that do and do not fill 32, ties, NaN and -inf, an index offset, dynamic leading dims
(the op families issue, item 3)."""

import pytest
import torch

import pypto

D = pypto.DYNAMIC


def _blocks_sorted(x, offset):
    """The pair stream of x's last dim with each block of 32 sorted (value desc, then index asc)."""
    n = x.shape[-1]
    out = []
    for start in range(0, n, 32):
        v = x[..., start:start + 32]
        vals, pos = torch.sort(v, dim=-1, descending=True, stable=True)  # NaN first, ties by position
        out.append(torch.stack([vals, (pos + start + offset).float()], -1).flatten(-2))
    return torch.cat(out, -1)


def _merged(stream):
    """stream's pairs sorted by value (largest first, NaN largest), equal values by smaller index."""
    rows = stream.reshape(-1, stream.shape[-1])
    out = []
    for row in rows.tolist():
        pairs = list(zip(row[0::2], row[1::2]))
        pairs.sort(key=lambda p: (0 if p[0] != p[0] else 1, -p[0] if p[0] == p[0] else 0, p[1]))
        out.append([e for p in pairs for e in p])
    return torch.tensor(out, dtype=torch.float32).reshape(stream.shape)


def _data(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-6, 7, shape, generator=g).float()  # many ties
    x.view(-1)[::17] = float("nan")
    x.view(-1)[5::23] = float("-inf")
    return x


@pytest.mark.parametrize("shape,index", [((3, 70), 5), ((2, 4, 64), None), ((31,), 0)])
def test_sort32_sorts_each_block_of_32(shape, index):
    x = _data(shape, 1)

    @pypto.jit
    def f(a: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*([4] * (len(shape) - 1) + [64]))
        return pypto.sort32(a, index) if index is not None else a.sort32()

    got = f(x)
    torch.testing.assert_close(got, _blocks_sorted(x, index or 0), equal_nan=True, rtol=0, atol=0)


def test_sort32_then_mrgsort_is_a_full_sort_with_a_dynamic_dim():
    @pypto.jit
    def f(a: pypto.Tensor((D, 100), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 128)
        return pypto.mrgsort(pypto.sort32(a), 32)

    for rows in (3, 1):
        x = _data((rows, 100), rows)
        got = f(x)
        assert got.shape == (rows, 200)
        torch.testing.assert_close(got, _merged(_blocks_sorted(x, 0)), equal_nan=True, rtol=0, atol=0)


def test_mrgsort_orders_equal_values_by_index():
    g = torch.Generator().manual_seed(3)
    values = torch.randint(0, 4, (2, 3, 40), generator=g).float()
    indices = torch.stack([torch.randperm(40, generator=g) for _ in range(6)]).reshape(2, 3, 40).float()
    stream = torch.stack([values, indices], -1).flatten(-2)

    @pypto.jit
    def f(a: pypto.Tensor((2, 3, 80), pypto.DT_FP32)):
        return a.mrgsort(64)

    torch.testing.assert_close(f(stream), _merged(stream), rtol=0, atol=0)


@pytest.mark.parametrize("call,err,match", [
    (lambda a, i: pypto.sort32(i), pypto.UserTypeError, r"pypto\.sort32 at .*: input must be DT_FP32, found DT_INT32"),
    (lambda a, i: pypto.sort32(a, 1.5), pypto.UserTypeError, r"pypto\.sort32 at .*: index must be an int, found float"),
    (lambda a, i: pypto.mrgsort(a, 0), pypto.UserError, r"pypto\.mrgsort at .*: mergesize must be >= 1, found 0"),
    (lambda a, i: pypto.mrgsort(pypto.view(a, [4, 5], [0, 0]), 2), pypto.UserError,
     r"pypto\.mrgsort at .*: the last dim must hold \(value, index\) pairs \(an even size\), found 5"),
])
def test_bad_arguments(call, err, match):
    @pypto.jit
    def f(a: pypto.Tensor((4, 8), pypto.DT_FP32), i: pypto.Tensor((4, 8), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 8)
        return call(a, i)

    with pytest.raises(err, match=match):
        f(torch.zeros(4, 8), torch.zeros(4, 8, dtype=torch.int32))
