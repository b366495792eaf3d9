"""Structured control flow while tracing: ``pypto.loop``, conditions on
symbolic values (``if`` statements converted by the jit, ``pypto.cond``),
``is_loop_begin``/``is_loop_end``."""

from __future__ import annotations

from typing import Any, Callable

from pypto.errors import NotSupportedError, UserError
from pypto.frontend.symbolic import SymExpr


def _is_symbolic(c: Any) -> bool:
    return isinstance(c, SymExpr)


def if_stmt(cond: Any, then_fn: Callable, else_fn: Callable, values: tuple, names: tuple, where: str):
    """Runs the branch a Python condition selects, or traces both branches of
    a symbolic condition into a conditional region."""
    from pypto.frontend.autograph import UNDEF

    if not _is_symbolic(cond):
        return (then_fn if cond else else_fn)(*values)
    from pypto.frontend.config import current_trace

    ctx = current_trace()
    if ctx is None:
        raise UserError(f"a symbolic condition at {where} outside a jitted function")
    ctx.builder.begin_if(cond._e)
    try:
        r_then = then_fn(*values)
        ctx.builder.begin_else()
        r_else = else_fn(*values)
    finally:
        ctx.builder.end_if()
    out = []
    for name, v0, a, b in zip(names, values, r_then, r_else):
        if a is b:
            out.append(a)
            continue
        raise NotSupportedError(
            f"'{name}' is assigned in a branch of the symbolic 'if' at {where} and would differ between the branches; "
            "write results into an output tensor (out[...] = ...) inside the branches instead")
    return tuple(out)


def cond(c: Any, then_fn: Callable, else_fn: Callable | None = None) -> None:
    """The explicit form of a conditional region: runs ``then_fn()`` where
    ``c`` holds and ``else_fn()`` elsewhere (both traced when ``c`` is symbolic)."""
    if_stmt(c, lambda: (then_fn(), ())[1], lambda: ((else_fn() if else_fn else None), ())[1], (), (), "pypto.cond")
