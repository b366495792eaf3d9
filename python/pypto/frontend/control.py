"""Structured control flow while tracing: ``pypto.loop``, conditions on
symbolic values (``if`` statements converted by the jit, ``pypto.cond``),
``is_loop_begin``/``is_loop_end``."""

from __future__ import annotations

from typing import Any, Callable

from pypto.errors import NotSupportedError, TracingError, UserError, UserTypeError
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
    return tuple(a if a is b else _merge(ctx, cond, a, b, name, where) for name, a, b in zip(names, r_then, r_else))


def _same_kind(a: Any, b: Any) -> bool:
    from pypto.frontend.tensor import Tensor

    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and a.is_traced and b.is_traced):
        return False
    return a.dtype == b.dtype and [str(d) for d in a.shape] == [str(d) for d in b.shape]


def _merge(ctx: Any, cond: SymExpr, a: Any, b: Any, name: str, where: str) -> Any:
    """A tensor that the two branches of a symbolic ``if`` computed differently, with one shape
    and dtype: both are copied, under the same condition, into a new local tensor, which holds
    the value after the ``if`` (each branch is a region of its own, so its values are read by a
    second conditional region). Other values become a Diverged marker."""
    if not _same_kind(a, b):
        return Diverged(name, where)
    from pypto import shape_ops
    from pypto.frontend.config import user_location

    merged = shape_ops.local_tensor(list(a.shape), a.dtype)
    file, line = user_location()
    ctx.builder.begin_if(cond._e, file, line)
    try:
        merged[...] = a
        ctx.builder.begin_else()
        merged[...] = b
    finally:
        ctx.builder.end_if()
    return merged


class Diverged:
    """What a name holds after a symbolic ``if`` whose branches gave it different values that
    cannot be merged (not tensors of one shape and dtype: ints, a name bound in one branch only,
    ...). It may be reassigned or left unused (as in PyPTO, where each branch is traced on its
    own); any other use raises an error naming the variable and the ``if``."""

    __slots__ = ("_name", "_where")

    def __init__(self, name: str, where: str):
        self._name, self._where = name, where

    def _fail(self, *_args, **_kwargs):
        raise NotSupportedError(
            f"'{self._name}' is assigned in a branch of the symbolic 'if' at {self._where} and differs between the "
            "branches, so it has no single value after the 'if' (only tensors of one shape and dtype in both "
            "branches are merged); write results into an output tensor (out[...] = ...) inside the branches "
            "instead")

    def __getattr__(self, attr):
        self._fail()

    def __repr__(self):
        return f"<'{self._name}': differs between the branches of the symbolic 'if' at {self._where}>"


for _m in ("bool", "int", "float", "index", "len", "iter", "call", "getitem", "setitem", "format", "str", "hash",
           "neg", "pos", "abs", "invert", "eq", "ne", "lt", "le", "gt", "ge", "contains",
           *(f"{p}{op}" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
                                    "xor", "lshift", "rshift") for p in ("", "r", "i"))):
    setattr(Diverged, f"__{_m}__", Diverged._fail)


def cond(c: Any, then_fn: Callable | None = None, else_fn: Callable | None = None, *, file: str | None = None,
         lineno: int | None = None) -> Any:
    """A conditional region. ``if pypto.cond(c):`` (PyPTO's form) marks the condition of an
    ``if`` statement and returns it: the jit converts the statement into a region. With
    callables, ``pypto.cond(c, then_fn, else_fn)`` runs ``then_fn()`` where ``c`` holds and
    ``else_fn()`` elsewhere (both traced when ``c`` is symbolic)."""
    from pypto.frontend.symbolic import to_expr

    if (file is None) != (lineno is None):
        raise UserError("pypto.cond: file and lineno must be given together (the source location to report)")
    if then_fn is None:
        if else_fn is not None:
            raise UserError("pypto.cond: else_fn is given without then_fn")
        if not isinstance(c, (bool, SymExpr)):
            to_expr(c, "pypto.cond condition")  # an int or a symbolic scalar, as PyPTO takes
        return c
    if not callable(then_fn) or (else_fn is not None and not callable(else_fn)):
        raise UserTypeError(f"pypto.cond: then_fn and else_fn must be callables, found "
                            f"{type(then_fn).__name__} and {type(else_fn).__name__}")
    if_stmt(c, lambda: (then_fn(), ())[1], lambda: ((else_fn() if else_fn else None), ())[1], (), (), "pypto.cond")
    return None


class _LoopInfo:
    def __init__(self, var: SymExpr, start, stop, step):
        self.var, self.start, self.stop, self.step = var, start, stop, step


def _check_unroll_list(unroll_list: Any, fn: str) -> list[int]:
    if unroll_list is None:
        return [1]
    if not isinstance(unroll_list, (list, tuple, set)) or not unroll_list or \
            any(isinstance(u, bool) or not isinstance(u, int) or u <= 0 for u in unroll_list):
        raise UserError(f"pypto.{fn}: unroll_list must be a non-empty list of positive ints, found {unroll_list!r}")
    return sorted(set(unroll_list) | {1}, reverse=True)


class loop:  # noqa: N801 - PyPTO's name
    """``for i in pypto.loop(start, stop, step=1, name=None, idx_name=None)``
    (or ``pypto.loop(stop)``): the body is traced once, for a symbolic index
    ``i`` usable in arithmetic, views, valid shapes and assemble offsets; the
    orchestration runs it for every index value. Bounds may be symbolic.

    PyPTO's scheduling hints are accepted and checked: ``unroll_list`` (unroll factors the
    device backend may pick from), ``parallel`` (iterations are independent) and
    ``submit_before_loop`` (flush queued work before the loop). On the CPU the task graph
    orders tasks by the tensor regions they touch, so none of them changes a result."""

    def __init__(self, start, stop=None, step=1, name=None, idx_name=None, *, unroll_list=None, parallel=False,
                 submit_before_loop=False):
        if stop is None:
            start, stop = 0, start
        self.unroll_list = _check_unroll_list(unroll_list, "loop")
        for what, v in (("parallel", parallel), ("submit_before_loop", submit_before_loop)):
            if not isinstance(v, bool):
                raise UserTypeError(f"pypto.loop: {what} must be a bool, found {v!r}")
        self.parallel, self.submit_before_loop = parallel, submit_before_loop
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


def loop_unroll(*args, name=None, idx_name=None, unroll_list=None, submit_before_loop=False, parallel=False):
    """``for i, n in pypto.loop_unroll(start, stop, step=1, unroll_list=[4, 2, 1])``: the range is
    covered by one loop per unroll factor, largest first; in the loop of factor ``n`` the index
    advances by ``step * n`` and the body handles the ``n`` steps from ``i`` on. Factor 1 is
    always added, so every index is covered exactly once. The body is traced once per factor."""
    if not 1 <= len(args) <= 3:
        raise UserTypeError(f"pypto.loop_unroll: takes 1 to 3 positional arguments (start, stop, step), "
                            f"found {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if isinstance(step, int) and step <= 0:
        raise UserError(f"pypto.loop_unroll: step must be positive, found {step}")
    factors = _check_unroll_list(unroll_list, "loop_unroll")
    begin = start
    for n in factors:
        span = step * n
        end = stop - (stop - begin) % span if n > 1 else stop
        sub = loop(begin, end, span, name=f"{name or ''}_LoopUnroll{n}",
                   idx_name=f"{idx_name}_u{n}" if idx_name else None, parallel=parallel,
                   submit_before_loop=submit_before_loop)
        for i in sub:
            yield i, n
        begin = end


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
