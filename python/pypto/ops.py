"""Tensor ops. Each one, called inside a ``@pypto.frontend.jit`` function,
adds a node to the C++ Tensor Graph being traced, with the active vec tile
shape and the caller's source line."""

from __future__ import annotations

import builtins

from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.config import current_trace, user_location
from pypto.frontend.tensor import Tensor


def _ctx(op: str):
    ctx = current_trace()
    if ctx is None:
        raise RuntimeError(
            f"pypto.{op} was called outside a jitted function; did you forget @pypto.frontend.jit? "
            "pypto ops only trace inside a function decorated with @pypto.frontend.jit")
    return ctx


def _operand(op: str, x, ctx, pos: str) -> int:
    if isinstance(x, Tensor):
        if x._ctx is not ctx:
            raise UserError(f"pypto.{op}: {pos} operand is a pypto.Tensor that does not belong to this traced function")
        return x._id
    if isinstance(x, (int, float)) and not isinstance(x, builtins.bool):
        raise NotSupportedError(f"pypto.{op}: a Python scalar operand ({x!r}) is not supported yet; use a tensor")
    raise UserTypeError(f"pypto.{op}: {pos} operand must be a pypto.Tensor, found {type(x).__name__}")


def _tile(ctx) -> list[int]:
    return list(ctx.vec_tile) if ctx.vec_tile is not None else []


def _binary(op: str, a, b) -> Tensor:
    ctx = _ctx(op)
    ia = _operand(op, a, ctx, "first")
    ib = _operand(op, b, ctx, "second")
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_binary(op, ia, ib, _tile(ctx), file, line))


def _unary(op: str, x) -> Tensor:
    ctx = _ctx(op)
    ix = _operand(op, x, ctx, "the")
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_unary(op, ix, _tile(ctx), file, line))


def _reduce(op: str, x, dim, keepdim) -> Tensor:
    ctx = _ctx(op)
    ix = _operand(op, x, ctx, "the")
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            raise NotSupportedError(f"pypto.{op}: reducing several dims at once ({list(dim)}) is not supported yet")
        dim = dim[0]
    if isinstance(dim, builtins.bool) or not isinstance(dim, int):
        raise UserTypeError(f"pypto.{op}: dim must be an int, found {type(dim).__name__} {dim!r}")
    if not isinstance(keepdim, builtins.bool):
        raise UserTypeError(f"pypto.{op}: keepdim must be a bool, found {type(keepdim).__name__} {keepdim!r}")
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_reduce(op, ix, dim, keepdim, _tile(ctx), file, line))


def add(a, b) -> Tensor:
    """Elementwise ``a + b`` with broadcasting."""
    return _binary("add", a, b)


def sub(a, b) -> Tensor:
    """Elementwise ``a - b`` with broadcasting."""
    return _binary("sub", a, b)


def mul(a, b) -> Tensor:
    """Elementwise ``a * b`` with broadcasting."""
    return _binary("mul", a, b)


def div(a, b) -> Tensor:
    """Elementwise ``a / b`` with broadcasting."""
    return _binary("div", a, b)


def exp(x) -> Tensor:
    """Elementwise exponential."""
    return _unary("exp", x)


def amax(x, dim, keepdim=False) -> Tensor:
    """Maximum over ``dim``."""
    return _reduce("amax", x, dim, keepdim)


def sum(x, dim, keepdim=False) -> Tensor:  # noqa: A001 - PyPTO name
    """Sum over ``dim``."""
    return _reduce("sum", x, dim, keepdim)
