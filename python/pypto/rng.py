"""Counter-based random tensors: ``uniform`` and ``normal`` (Philox4x32-10, PyPTO's signatures), and
``uniform_impl`` (PyPTO's lower-level entry: a 1-D stream with the counter's two words and the rounds).

Each traces one ``random`` op: one ``trandom`` per tile, which draws every element from its position
in the flattened result alone, so the values do not depend on the tile shape."""

from __future__ import annotations

import builtins
import numbers

from pypto import _dtypes
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.tensor import Tensor
from pypto.frontend.config import user_location
from pypto.ops import _at, _ctx, _documented, _tile
from pypto.shape_ops import _dim
from pypto.frontend.symbolic import SymExpr

_DTYPES = (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16)
_ALGS = {1: "Philox", 3: "auto_select (Philox)"}


def _ints(op: str, what: str, v, count: int) -> list:
    if not isinstance(v, (list, tuple)) or len(v) != count or not all(
            isinstance(x, numbers.Integral) and not isinstance(x, builtins.bool) for x in v):
        raise UserTypeError(f"{_at(op)}: {what} must be a list of {count} int{'s' if count > 1 else ''}, "
                            f"found {v!r}")
    return [int(x) for x in v]


def _u64(op: str, what: str, v: int) -> int:
    if not 0 <= v < 2 ** 64:
        raise UserError(f"{_at(op)}: {what} must be in [0, 2**64), found {v}")
    return v


def _draw(op: str, shape, key, counter, alg, dtype, normal: bool) -> Tensor:
    ctx = _ctx(op)
    if not isinstance(shape, (list, tuple)) or not 1 <= len(shape) <= 4:
        raise UserError(f"{_at(op)}: shape must be a list of 1 to 4 dims, found {shape!r}")
    for d in shape:
        if isinstance(d, numbers.Integral) and not isinstance(d, builtins.bool):
            if d <= 0:
                raise UserError(f"{_at(op)}: every dim of shape must be positive, found {list(shape)!r}")
        elif not isinstance(d, SymExpr):
            raise UserTypeError(f"{_at(op)}: shape dims must be ints or symbolic scalars, found "
                                f"{type(d).__name__} {d!r}")
    k = _u64(op, "key[0]", _ints(op, "key", key, 1)[0])
    c = _ints(op, "counter", counter, 2)
    c1 = _u64(op, "counter[1]", c[1])  # counter[0] is ignored, as PyPTO: the stream's counter is (0, counter[1])
    a = _ints(op, "alg", alg, 1)[0]
    if a not in _ALGS:
        if a == 2:
            raise NotSupportedError(f"{_at(op)}: alg [2] is not supported yet (only 1, Philox, and 3, auto_select)")
        raise UserError(f"{_at(op)}: alg must be [1] (Philox) or [3] (auto_select), found [{a}]")
    if dtype not in _DTYPES:
        raise UserTypeError(f"{_at(op)}: dtype must be DT_FP32, DT_FP16 or DT_BF16, found "
                            f"{getattr(dtype, 'name', dtype)!r}")
    file, line = user_location()
    dims = [_dim(d, f"{_at(op)}: shape") for d in shape]
    return Tensor._traced(ctx, ctx.builder.add_random(dims, k, c1, normal, dtype, _tile(ctx), op, file, line))


@_documented
def uniform_impl(key, counter0, counter1, shape, rounds=10, dtype=None) -> Tensor:
    op = "uniform_impl"
    ctx = _ctx(op)
    for what, v in (("key", key), ("counter1", counter1)):
        if isinstance(v, builtins.bool) or not isinstance(v, numbers.Integral):
            raise UserTypeError(f"{_at(op)}: {what} must be an int, found {type(v).__name__} {v!r}")
        _u64(op, what, int(v))
    if isinstance(counter0, numbers.Integral) and not isinstance(counter0, builtins.bool):
        c0 = _u64(op, "counter0", int(counter0))
        block0 = c0 - 2 ** 64 if c0 >= 2 ** 63 else c0  # its bits, as the int64 a symbolic scalar holds
    elif isinstance(counter0, SymExpr):
        block0 = counter0
    else:
        raise UserTypeError(f"{_at(op)}: counter0 must be an int or a symbolic scalar, found "
                            f"{type(counter0).__name__} {counter0!r}")
    if not isinstance(shape, (list, tuple)) or len(shape) != 1:
        raise UserError(f"{_at(op)}: shape must be 1-dimensional, found {shape!r}")
    d = shape[0]
    if isinstance(d, numbers.Integral) and not isinstance(d, builtins.bool):
        if d <= 0:
            raise UserError(f"{_at(op)}: shape must have a positive dim, found {list(shape)!r}")
    elif not isinstance(d, SymExpr):
        raise UserTypeError(f"{_at(op)}: shape dims must be ints or symbolic scalars, found {type(d).__name__} {d!r}")
    if isinstance(rounds, builtins.bool) or rounds not in (7, 10):
        raise UserError(f"{_at(op)}: rounds must be 7 or 10, found {rounds!r}")
    dtype = _dtypes.DT_FP32 if dtype is None else dtype
    if dtype not in _DTYPES:
        raise UserTypeError(f"{_at(op)}: dtype must be DT_FP32, DT_FP16 or DT_BF16, found "
                            f"{getattr(dtype, 'name', dtype)!r}")
    file, line = user_location()
    dims = [_dim(d, f"{_at(op)}: shape")]
    return Tensor._traced(ctx, ctx.builder.add_random(dims, int(key), int(counter1), False, dtype, _tile(ctx), op, file,
                                                      line, block0=_dim(block0, f"{_at(op)}: counter0"),
                                                      rounds=int(rounds)))


@_documented
def uniform(shape, key, counter, alg, dtype) -> Tensor:
    return _draw("uniform", shape, key, counter, alg, dtype, False)


@_documented
def normal(shape, key, counter, alg, dtype) -> Tensor:
    return _draw("normal", shape, key, counter, alg, dtype, True)
