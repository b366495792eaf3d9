"""pypto.experimental.gather_in_ub and gather_in_l1: rows of a paged cache through a block table,
against the same lookup written in torch (the op families issue, item 4)."""

import pytest
import torch

import pypto

D = pypto.DYNAMIC
DTYPES = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
          torch.int8: pypto.DT_INT8}


def _reference(cache, positions, table, block_size, size=None):
    p = positions.reshape(-1).long()
    rows = table.reshape(-1).long()[p // block_size] * block_size + p % block_size
    out = cache[rows]
    return out if size is None else out[:, :size]


def _case(tokens, hidden, k, block_size, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    blocks = tokens // block_size
    cache = torch.randn(tokens, hidden, generator=g).to(dtype) if dtype.is_floating_point else \
        torch.randint(-100, 100, (tokens, hidden), generator=g, dtype=dtype)
    table = torch.randperm(blocks, generator=g).to(torch.int32).reshape(1, blocks)
    positions = torch.randint(0, tokens, (1, k), generator=g, dtype=torch.int32)
    return cache, positions, table


def test_the_documented_example():
    param = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33], [40, 41, 42, 43],
                          [50, 51, 52, 53]], dtype=torch.float32)
    indices = torch.tensor([[0, 4, 3]], dtype=torch.int32)
    table = torch.tensor([[0, 2, 1]], dtype=torch.int32)

    @pypto.jit
    def f(p: pypto.Tensor((6, 4), pypto.DT_FP32), i: pypto.Tensor((1, 3), pypto.DT_INT32),
          t: pypto.Tensor((1, 3), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(2, 4)
        return pypto.experimental.gather_in_ub(p, i, t, 2, -2)

    assert torch.equal(f(param, indices, table), torch.tensor([[0., 1, 2, 3], [20, 21, 22, 23], [50, 51, 52, 53]]))


@pytest.mark.parametrize("dtype,index_dtype", [(torch.float32, torch.int32), (torch.float16, torch.int64),
                                               (torch.bfloat16, torch.int32)])
def test_gather_in_ub_with_dynamic_positions_and_tails(dtype, index_dtype):
    # 37 positions and 100 columns divide neither tile dim; the positions and tokens are dynamic
    cache, positions, table = _case(96, 100, 37, 8, dtype)
    dt = DTYPES[dtype]
    it = pypto.DT_INT64 if index_dtype == torch.int64 else pypto.DT_INT32

    @pypto.jit
    def f(c: pypto.Tensor((D, 100), dt), i: pypto.Tensor((1, D), it), t: pypto.Tensor((1, 12), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(16, 32)
        return pypto.experimental.gather_in_ub(c, i, t, 8, -2)

    positions = positions.to(index_dtype)
    assert torch.equal(f(cache, positions, table), _reference(cache, positions, table, 8))
    cache2, positions2, _ = _case(96, 100, 5, 8, dtype, seed=1)
    positions2 = positions2.to(index_dtype)
    assert torch.equal(f(cache2, positions2, table), _reference(cache2, positions2, table, 8))


@pytest.mark.parametrize("dtype,size,flags", [(torch.float32, 20, (False, False)), (torch.int8, 64, (True, False)),
                                              (torch.float16, 33, (False, True))])
def test_gather_in_l1_takes_the_first_size_columns(dtype, size, flags):
    cache, positions, table = _case(64, 64, 19, 4, dtype, seed=2)
    dt = DTYPES[dtype]

    @pypto.jit
    def f(c: pypto.Tensor((64, 64), dt), i: pypto.Tensor((1, D), pypto.DT_INT32),
          t: pypto.Tensor((1, 16), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.experimental.gather_in_l1(c, i, t, 4, size, *flags)

    got = f(cache, positions, table)
    assert list(got.shape) == [19, size]
    assert torch.equal(got, _reference(cache, positions, table, 4, size))


def test_a_position_outside_the_table_raises_from_the_kernel():
    cache, positions, table = _case(32, 8, 4, 4, torch.float32)
    positions[0, 2] = 40  # block 10 of a table of 8

    @pypto.jit
    def f(c: pypto.Tensor((32, 8), pypto.DT_FP32), i: pypto.Tensor((1, 4), pypto.DT_INT32),
          t: pypto.Tensor((1, 8), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.experimental.gather_in_ub(c, i, t, 4, -2)

    with pytest.raises(pypto.TaskError, match="gather_in_ub"):
        f(cache, positions, table)


def _traced(body):
    @pypto.jit
    def f(c: pypto.Tensor((16, 8), pypto.DT_FP32), i: pypto.Tensor((1, 4), pypto.DT_INT32),
          t: pypto.Tensor((1, 4), pypto.DT_INT32), f32: pypto.Tensor((1, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return body(c, i, t, f32)

    return f(torch.zeros(16, 8), torch.zeros(1, 4, dtype=torch.int32), torch.zeros(1, 4, dtype=torch.int32),
             torch.zeros(1, 4))


@pytest.mark.parametrize("body,match", [
    (lambda c, i, t, f: pypto.experimental.gather_in_ub(c, i, t, 4, -1), "axis must be -2, found -1"),
    (lambda c, i, t, f: pypto.experimental.gather_in_ub(c, i, t, 0, -2), "block_size must be an int >= 1, found 0"),
    (lambda c, i, t, f: pypto.experimental.gather_in_ub(c, f, t, 4, -2), "indices must be DT_INT32 or DT_INT64, "
                                                                         "found DT_FP32"),
    (lambda c, i, t, f: pypto.experimental.gather_in_ub(c, c, t, 4, -2), "indices must be DT_INT32"),
    (lambda c, i, t, f: pypto.experimental.gather_in_ub(c, i, f, 4, -2), "block_table must be DT_INT32, found DT_FP32"),
    (lambda c, i, t, f: pypto.experimental.gather_in_l1(c, i, t, 4, 9, False, False), r"size must be an int in \[1, 8\]"),
    (lambda c, i, t, f: pypto.experimental.gather_in_l1(c, i, t, 4, 4, 1, False), "is_b_matrix must be a bool"),
])
def test_bad_arguments_name_the_op_and_the_value(body, match):
    with pytest.raises((pypto.UserError, TypeError), match=match) as e:
        _traced(body)
    assert "gather_in_" in str(e.value)
