"""Data movement written with views and copies: ``pad``, ``fillpad``, ``interleave``,
``deinterleave``, ``pack`` and ``unpack``. Each is a fill and strided copies (``assemble`` into a view), which the tile
passes fuse like any other copy."""

from __future__ import annotations

import builtins
import math
import numbers

from pypto import _dtypes
from pypto.element import Element
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.tensor import Tensor
from pypto.ops import _at, _ctx, _documented, _tensor
from pypto.shape_ops import _bitcast, _is_static, _materialize, _view, assemble, clone, full, reshape

_FLOATS = (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16, _dtypes.DT_DOUBLE)
_INT_RANGES = {_dtypes.DT_INT8: (-2 ** 7, 2 ** 7 - 1), _dtypes.DT_INT16: (-2 ** 15, 2 ** 15 - 1),
               _dtypes.DT_INT32: (-2 ** 31, 2 ** 31 - 1), _dtypes.DT_INT64: (-2 ** 63, 2 ** 63 - 1),
               _dtypes.DT_UINT8: (0, 2 ** 8 - 1), _dtypes.DT_UINT16: (0, 2 ** 16 - 1),
               _dtypes.DT_UINT32: (0, 2 ** 32 - 1), _dtypes.DT_UINT64: (0, 2 ** 64 - 1), _dtypes.DT_BOOL: (0, 1)}


def _fill_value(op: str, x: Tensor, mode, value):
    """Checks pad/fillpad's mode and value; the value to fill with."""
    if not isinstance(mode, str):
        raise UserTypeError(f"{_at(op)}: mode must be a str, found {type(mode).__name__} {mode!r}")
    if mode != "constant":
        if mode in ("reflect", "replicate", "circular"):
            raise NotSupportedError(f"{_at(op)}: mode '{mode}' is not supported yet (only 'constant')")
        raise UserError(f"{_at(op)}: mode must be 'constant', 'reflect', 'replicate' or 'circular', found {mode!r}")
    value = value.value if isinstance(value, Element) else value
    if isinstance(value, str):  # PyPTO's examples spell infinities as strings
        try:
            value = float(value)
        except ValueError:
            raise UserTypeError(f"{_at(op)}: value must be a number, found {value!r}") from None
    if isinstance(value, builtins.bool) or not isinstance(value, numbers.Real):
        raise UserTypeError(f"{_at(op)}: value must be a number, found {type(value).__name__} {value!r}")
    if x.dtype not in _FLOATS and not isinstance(value, numbers.Integral):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise UserError(f"{_at(op)}: value {value!r} is not an integer, for the integer dtype {x.dtype.name}")
        value = int(value)
    if x.dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[x.dtype]
        if not lo <= value <= hi:
            raise UserError(f"{_at(op)}: value {value} does not fit {x.dtype.name} ({lo} to {hi})")
    return value


@_documented
def pad(input, pad, mode="constant", value=0) -> Tensor:  # noqa: A002 - PyPTO's names
    op = "pad"
    _tensor(op, input, _ctx(op), "the")
    if not isinstance(pad, (list, tuple)) or not all(
            isinstance(p, numbers.Integral) and not isinstance(p, builtins.bool) for p in pad):
        raise UserTypeError(f"{_at(op)}: pad must be a list or tuple of ints, found {pad!r}")
    rank = len(input.shape)
    if len(pad) % 2 or not 0 < len(pad) // 2 <= rank:
        raise UserError(f"{_at(op)}: pad {list(pad)} must hold a (before, after) pair for each of 1 to {rank} "
                        f"trailing dims")
    if any(p < 0 for p in pad):
        raise UserError(f"{_at(op)}: pad {list(pad)} has a negative size (cropping is not padding)")
    fill = _fill_value(op, input, mode, value)
    shape, offsets = list(input.shape), [0] * rank
    for j in range(len(pad) // 2):  # (last dim before, after, the one before it before, after, ...)
        d = rank - 1 - j
        offsets[d] = pad[2 * j]
        shape[d] = shape[d] + pad[2 * j] + pad[2 * j + 1]
    out = full(shape, fill, input.dtype)
    assemble(input, offsets, out)
    return out


@_documented
def fillpad(input, mode="constant", value=0) -> Tensor:  # noqa: A002 - PyPTO's names
    op = "fillpad"
    _tensor(op, input, _ctx(op), "the")
    fill = _fill_value(op, input, mode, value)
    out = full(list(input.shape), fill, input.dtype)
    assemble(input, [0] * len(input.shape), out)  # the valid part; the rest keeps the fill
    return out


def _pairs_along_last(op: str, x: Tensor, name: str = "input") -> int:
    n = x.shape[-1]
    if not _is_static(n):
        raise NotSupportedError(f"{_at(op)}: a dynamic last dim is not supported yet, found {n}")
    if n % 2:
        raise UserError(f"{_at(op)}: the last dim of {name} must be even, found {n}")
    return n


def _same(op: str, a: Tensor, b: Tensor) -> None:
    _tensor(op, b, _ctx(op), "other")
    if b.dtype != a.dtype or list(b.shape) != list(a.shape):
        raise UserError(f"{_at(op)}: other ({b.dtype.name} {list(b.shape)}) must have input's dtype and shape "
                        f"({a.dtype.name} {list(a.shape)})")


def _every_other(x: Tensor, first: int, op: str) -> Tensor:
    """A copy of x's elements first, first + 2, ... along the last dim."""
    rank = len(x.shape)
    v = _view(x, list(x.shape[:-1]) + [x.shape[-1] // 2], [0] * (rank - 1) + [first], list(range(rank)),
              [1] * (rank - 1) + [2], op=op)
    return _materialize(v)


@_documented
def interleave(input, other) -> tuple:  # noqa: A002 - PyPTO's names
    op = "interleave"
    _tensor(op, input, _ctx(op), "the")
    _same(op, input, other)
    n = _pairs_along_last(op, input)
    rank = len(input.shape)
    lead = list(input.shape[:-1])
    stream = full(lead + [2 * n], 0, input.dtype)
    for first, part in ((0, input), (1, other)):  # stream[2k] = input[k], stream[2k + 1] = other[k]
        assemble(part, None, _view(stream, lead + [n], [0] * (rank - 1) + [first], list(range(rank)),
                                   [1] * (rank - 1) + [2], op=op))
    ctx = _ctx(op)
    ctx.builder.mark_covered(stream._id)  # the two strided copies write every element
    halves = [_materialize(_view(stream, lead + [n], [0] * (rank - 1) + [h * n], list(range(rank)), [1] * rank, op=op))
              for h in (0, 1)]
    return halves[0], halves[1]


@_documented
def deinterleave(input, other=None) -> tuple:  # noqa: A002 - PyPTO's names
    op = "deinterleave"
    _tensor(op, input, _ctx(op), "the")
    stream = input
    if other is not None:
        _same(op, input, other)
        _pairs_along_last(op, input)
        from pypto.shape_ops import concat

        stream = concat([input, other], -1)
    _pairs_along_last(op, stream)
    return _every_other(stream, 0, op), _every_other(stream, 1, op)


# The dtypes pack and unpack read and write, as PyPTO lists them.
_PACKABLE = (_dtypes.DT_BF16, _dtypes.DT_FP16, _dtypes.DT_FP32, _dtypes.DT_INT64, _dtypes.DT_UINT64, _dtypes.DT_INT32,
             _dtypes.DT_UINT32, _dtypes.DT_INT16, _dtypes.DT_UINT16, _dtypes.DT_INT8, _dtypes.DT_UINT8)


def _names(dtypes) -> str:
    return ", ".join(d.name for d in dtypes)


@_documented
def pack(input) -> Tensor:  # noqa: A002 - PyPTO's name
    op = "pack"
    _tensor(op, input, _ctx(op), "the")
    if input.dtype not in _PACKABLE:
        raise UserTypeError(f"{_at(op)}: input must be one of {_names(_PACKABLE)}, found {input.dtype.name}")
    if not 1 <= len(input.shape) <= 4:
        raise UserError(f"{_at(op)}: input must have 1 to 4 dims, found shape {list(input.shape)}")
    flat = reshape(input, [-1]) if len(input.shape) > 1 else input
    return clone(_bitcast(flat, _dtypes.DT_UINT8))


@_documented
def unpack(input, dtype) -> Tensor:  # noqa: A002 - PyPTO's names
    op = "unpack"
    _tensor(op, input, _ctx(op), "the")
    if input.dtype != _dtypes.DT_UINT8 or len(input.shape) != 1:
        raise UserTypeError(f"{_at(op)}: input must be a 1-D DT_UINT8 tensor, found {input.dtype.name} of shape "
                            f"{list(input.shape)}")
    if dtype not in _PACKABLE:
        raise UserTypeError(f"{_at(op)}: dtype must be one of {_names(_PACKABLE)}, found "
                            f"{getattr(dtype, 'name', dtype)!r}")
    n, size = input.shape[0], _dtypes.bytes_of(dtype)
    if _is_static(n) and n % size:
        raise UserError(f"{_at(op)}: {n} bytes do not divide into {dtype.name} elements of {size} bytes")
    if not _is_static(n) and size > 1:
        raise NotSupportedError(f"{_at(op)}: unpacking a dynamic number of bytes ({n}) into {dtype.name} is not "
                                "supported yet (only a static length)")
    return clone(_bitcast(input, dtype))
