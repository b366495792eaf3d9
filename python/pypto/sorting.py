"""PyPTO's sort building blocks on (value, index) pair streams: ``sort32`` and ``mrgsort``.

A pair stream holds, along the last dim, ``value0, index0, value1, index1, ...`` in DT_FP32 (the
index as a number). ``sort32`` makes one from a tensor with every block of 32 elements sorted;
``mrgsort`` merges such a stream into one sorted run. Both order by value, largest first, and
equal values by index, smallest first (a NaN counts as the largest). They are written with the
stable ``argsort``, ``gather`` and strided copies, so a row of any length is sorted in tiles.
"""

from __future__ import annotations

import builtins
import numbers

from pypto import _dtypes
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.tensor import Tensor
from pypto.ops import _at, _ctx, _documented, _sorted_positions, _tensor, add, cast, with_tile
from pypto.data_movement import pad
from pypto.shape_ops import _is_static, _view, arange, assemble, copy_tile, full, gather, reshape


def _checked(op: str, x) -> list:
    ctx = _ctx(op)
    _tensor(op, x, ctx, "input")
    if x.dtype != _dtypes.DT_FP32:
        raise UserTypeError(f"{_at(op)}: input must be DT_FP32, found {x.dtype.name}")
    if not 1 <= len(x.shape) <= 4:
        raise UserError(f"{_at(op)}: input must have 1 to 4 dims, found {len(x.shape)}")
    if not _is_static(x.shape[-1]):
        raise NotSupportedError(f"{_at(op)}: a dynamic last dim is not supported yet, found {x.shape[-1]}")
    return list(x.shape)


def _int(op: str, name: str, v) -> int:
    if isinstance(v, builtins.bool) or not isinstance(v, numbers.Integral):
        raise UserTypeError(f"{_at(op)}: {name} must be an int, found {type(v).__name__} {v!r}")
    return int(v)


def _pair_stream(op: str, values: Tensor, indices: Tensor) -> Tensor:
    """[..., 2n]: values[k] at 2k and indices[k] (as fp32) at 2k + 1."""
    lead, n = list(values.shape[:-1]), values.shape[-1]
    rank = len(values.shape)
    stream = full(lead + [2 * n], 0, _dtypes.DT_FP32)
    for first, part in ((0, values), (1, cast(indices, _dtypes.DT_FP32))):
        assemble(part, None, _view(stream, lead + [n], [0] * (rank - 1) + [first], range(rank),
                                   [1] * (rank - 1) + [2], op=op))
    return stream


@_documented
def sort32(input, index=None) -> Tensor:  # noqa: A002 - PyPTO's name
    op = "sort32"
    shape = _checked(op, input)
    offset = 0 if index is None else _int(op, "index", index)
    ctx = _ctx(op)
    lead, n = shape[:-1], shape[-1]
    blocks = -(-n // 32)

    def trace():
        x = input
        if blocks * 32 != n:  # the last block is filled up with -inf, which sorts after every element
            x = with_tile(ctx, copy_tile(lead + [blocks * 32]),
                          lambda: pad(input, [0, blocks * 32 - n], value=float("-inf")))
        x = reshape(x, lead + [blocks, 32])
        pos = _sorted_positions(op, x, None, True, None)[0]
        first = reshape(arange(offset, offset + 32 * blocks, 32, dtype=_dtypes.DT_INT32), [blocks, 1])
        stream = reshape(_pair_stream(op, gather(x, -1, pos), add(pos, first)), lead + [64 * blocks])
        if blocks * 32 == n:
            return stream
        return _view(stream, lead + [2 * n], [0] * len(shape), range(len(shape)), [1] * len(shape), op=op)

    return with_tile(ctx, copy_tile(lead + [blocks, 32]), trace)


@_documented
def mrgsort(input, mergesize) -> Tensor:  # noqa: A002 - PyPTO's name
    op = "mrgsort"
    shape = _checked(op, input)
    size = _int(op, "mergesize", mergesize)
    if size < 1:
        raise UserError(f"{_at(op)}: mergesize must be >= 1, found {size}")
    if shape[-1] % 2:
        raise UserError(f"{_at(op)}: the last dim must hold (value, index) pairs (an even size), found {shape[-1]}")
    ctx = _ctx(op)
    rank, lead, m = len(shape), shape[:-1], shape[-1] // 2

    def part(first: int) -> Tensor:
        return _view(input, lead + [m], [0] * rank, range(rank), [1] * (rank - 1) + [2], op=op) if first == 0 \
            else _view(input, lead + [m], [0] * (rank - 1) + [1], range(rank), [1] * (rank - 1) + [2], op=op)

    def trace():
        values, indices = part(0), part(1)
        # By index first, then (stably) by value: equal values keep the smaller index first.
        by_index = _sorted_positions(op, indices, None, False, None)[0]
        values, indices = gather(values, -1, by_index), gather(indices, -1, by_index)
        by_value = _sorted_positions(op, values, None, True, None)[0]
        return _pair_stream(op, gather(values, -1, by_value), gather(indices, -1, by_value))

    return with_tile(ctx, copy_tile(lead + [m]), trace)
