"""Structured control flow while tracing: ``pypto.loop``, conditions on
symbolic values (``if`` statements converted by the jit, ``pypto.cond``),
``is_loop_begin``/``is_loop_end``."""

from __future__ import annotations

from typing import Any, Callable

from pypto.errors import NotSupportedError, TracingError, UserError
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
    from pypto.frontend.config import user_location

    file, line = user_location()
    ctx.builder.begin_if(cond._e, file, line)
    try:
        r_then = then_fn(*values)
        ctx.builder.begin_else()
        r_else = else_fn(*values)
    finally:
        ctx.builder.end_if()
    return tuple(a if a is b else Diverged(name, where) for name, a, b in zip(names, r_then, r_else))


class Diverged:
    """What a name holds after a symbolic ``if`` whose branches gave it different values. It may
    be reassigned or left unused (as in PyPTO, where each branch is traced on its own); any
    other use raises an error naming the variable and the ``if``."""

    __slots__ = ("_name", "_where")

    def __init__(self, name: str, where: str):
        self._name, self._where = name, where

    def _fail(self, *_args, **_kwargs):
        raise NotSupportedError(
            f"'{self._name}' is assigned in a branch of the symbolic 'if' at {self._where} and differs between the "
            "branches, so it has no single value after the 'if'; write results into an output tensor "
            "(out[...] = ...) inside the branches instead")

    def __getattr__(self, attr):
        self._fail()

    def __repr__(self):
        return f"<'{self._name}': differs between the branches of the symbolic 'if' at {self._where}>"


for _m in ("bool", "int", "float", "index", "len", "iter", "call", "getitem", "setitem", "format", "str", "hash",
           "neg", "pos", "abs", "invert", "eq", "ne", "lt", "le", "gt", "ge", "contains",
           *(f"{p}{op}" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
                                    "xor", "lshift", "rshift") for p in ("", "r", "i"))):
    setattr(Diverged, f"__{_m}__", Diverged._fail)


def cond(c: Any, then_fn: Callable, else_fn: Callable | None = None) -> None:
    """The explicit form of a conditional region: runs ``then_fn()`` where
    ``c`` holds and ``else_fn()`` elsewhere (both traced when ``c`` is symbolic)."""
    if_stmt(c, lambda: (then_fn(), ())[1], lambda: ((else_fn() if else_fn else None), ())[1], (), (), "pypto.cond")


class _LoopInfo:
    def __init__(self, var: SymExpr, start, stop, step):
        self.var, self.start, self.stop, self.step = var, start, stop, step


class loop:  # noqa: N801 - PyPTO's name
    """``for i in pypto.loop(start, stop, step=1, name=None, idx_name=None)``
    (or ``pypto.loop(stop)``): the body is traced once, for a symbolic index
    ``i`` usable in arithmetic, views, valid shapes and assemble offsets; the
    orchestration runs it for every index value. Bounds may be symbolic."""

    def __init__(self, start, stop=None, step=1, name=None, idx_name=None):
        if stop is None:
            start, stop = 0, start
        from pypto.frontend.symbolic import to_expr

        for what, v in (("start", start), ("stop", stop), ("step", step)):
            to_expr(v, f"pypto.loop {what}")
        if isinstance(step, int) and step <= 0:
            raise UserError(f"pypto.loop: step must be positive, found {step}")
        self.start, self.stop, self.step = start, stop, step
        self.name = name
        self.idx_name = idx_name

    def __iter__(self):
        from pypto.frontend.config import current_trace, user_location
        from pypto.frontend.symbolic import to_expr

        ctx = current_trace()
        if ctx is None:
            raise TracingError("pypto.loop was used outside a jitted function; did you forget @pypto.frontend.jit?")
        ctx.loop_counter = getattr(ctx, "loop_counter", 0) + 1
        var = self.idx_name or f"idx{ctx.loop_counter}"
        if not var.isidentifier():
            raise UserError(f"pypto.loop: idx_name must be an identifier, found {var!r}")
        file, line = user_location()
        ctx.builder.begin_loop(var, to_expr(self.start), to_expr(self.stop), to_expr(self.step), file, line)
        idx = SymExpr.var(var)
        ctx.loops.append(_LoopInfo(idx, self.start, self.stop, self.step))
        try:
            yield idx
        finally:
            ctx.loops.pop()
            ctx.builder.end_loop()


def _loop_of(i: Any, fn: str) -> "_LoopInfo":
    from pypto.frontend.config import current_trace

    ctx = current_trace()
    if ctx is None or not isinstance(i, SymExpr):
        raise UserError(f"pypto.{fn}: expects the index of an enclosing pypto.loop")
    for info in reversed(ctx.loops):
        if str(info.var) == str(i):
            return info
    raise UserError(f"pypto.{fn}: '{i}' is not the index of an enclosing pypto.loop")


def is_loop_begin(i: Any) -> SymExpr:
    """True on the first iteration of the pypto.loop whose index is ``i``."""
    info = _loop_of(i, "is_loop_begin")
    return i == info.start


def is_loop_end(i: Any) -> SymExpr:
    """True on the last iteration of the pypto.loop whose index is ``i``."""
    info = _loop_of(i, "is_loop_end")
    last = info.start + ((info.stop - info.start - 1) // info.step) * info.step
    return i == last
