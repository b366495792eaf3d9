"""AutoGraph-style conversion of a jitted function's control flow.

Before tracing, the function's source is rewritten so that

- ``if``/``elif``/``else`` statements call :func:`if_stmt`, which runs one
  branch when the condition is a Python value and traces both branches into a
  conditional region when it is symbolic (a loop index compared with
  something, ``pypto.is_loop_begin(i)``, ...);
- ``while`` conditions pass through :func:`while_test`, which refuses a
  symbolic condition with the construct's name and line;
- ``break``/``continue`` directly inside ``for ... in pypto.loop(...)`` raise
  an error naming the construct and line before anything is traced.

Statements the conversion cannot express (an ``if`` whose branches
``return``, ``break`` or ``continue``) stay Python statements; if their
condition turns out symbolic, the symbolic value's ``__bool__`` raises a
clear error.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
from typing import Any, Callable

from pypto.errors import NotSupportedError

_UNDEF = object()
_MOD = "__pypto_ag__"


class ConversionError(NotSupportedError):
    pass


def _is_pypto_loop_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    loops = ("loop", "loop_unroll")
    return (isinstance(f, ast.Attribute) and f.attr in loops) or (isinstance(f, ast.Name) and f.id in loops)


def _assigned_names(stmts: list[ast.stmt]) -> list[str]:
    names: list[str] = []

    class V(ast.NodeVisitor):
        def visit_Name(self, n):
            if isinstance(n.ctx, ast.Store) and n.id not in names:
                names.append(n.id)

        def visit_FunctionDef(self, n):
            if n.name not in names:
                names.append(n.name)

        def visit_Lambda(self, n):
            pass

    for s in stmts:
        V().visit(s)
    return [n for n in names if not n.startswith("__pypto_")]


def _has_jump(stmts: list[ast.stmt]) -> bool:
    class V(ast.NodeVisitor):
        found = False

        def visit_Return(self, n):
            self.found = True

        def visit_Break(self, n):
            self.found = True

        def visit_Continue(self, n):
            self.found = True

        def visit_Yield(self, n):
            self.found = True

        def visit_FunctionDef(self, n):
            pass

        def visit_For(self, n):
            # break/continue inside a nested loop belong to that loop
            for s in n.body + n.orelse:
                for sub in ast.walk(s):
                    if isinstance(sub, (ast.Return, ast.Yield)):
                        self.found = True

        visit_While = visit_For

    v = V()
    for s in stmts:
        v.visit(s)
    return v.found


class _Transformer(ast.NodeTransformer):
    def __init__(self, filename: str, line_offset: int):
        self.filename = filename
        self.line_offset = line_offset
        self.counter = 0

    def _line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 0) + self.line_offset

    def visit_FunctionDef(self, node: ast.FunctionDef):
        node.decorator_list = []
        self.generic_visit(node)
        return node

    def visit_For(self, node: ast.For):
        if _is_pypto_loop_call(node.iter):
            for sub in node.body:
                for n in ast.walk(sub):
                    if isinstance(n, (ast.For, ast.While)):
                        break
                    if isinstance(n, (ast.Break, ast.Continue)):
                        kind = "break" if isinstance(n, ast.Break) else "continue"
                        raise ConversionError(
                            f"'{kind}' inside 'for ... in pypto.loop(...)' at {self.filename}:{self._line(n)} is not "
                            "supported: the loop body is traced once for a symbolic index")
            if node.orelse:
                raise ConversionError(f"'for ... else' over pypto.loop at {self.filename}:{self._line(node)} is not supported")
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call):
        # min(a, b) / max(a, b): symbolic when an argument is (PyPTO's rule); the callee the name
        # resolves to is passed along, so a user's own min stays theirs.
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            node.args = [node.func] + node.args
            node.func = ast.Attribute(value=ast.Name(id=_MOD, ctx=ast.Load()), attr="call_min_max", ctx=ast.Load())
        return node

    def visit_While(self, node: ast.While):
        self.generic_visit(node)
        node.test = ast.Call(
            func=ast.Attribute(value=ast.Name(id=_MOD, ctx=ast.Load()), attr="while_test", ctx=ast.Load()),
            args=[node.test, ast.Constant(f"{self.filename}:{self._line(node)}")], keywords=[])
        return node

    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        if _has_jump(node.body) or _has_jump(node.orelse):
            return node
        self.counter += 1
        k = self.counter
        names = _assigned_names(node.body + node.orelse)
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[])
        # A branch returns what it holds for each name; a name a nested if deleted (assigned in
        # none of its branches and undefined before) comes back as UNDEF, not as an unbound local.
        ret = ast.Return(value=ast.Tuple(elts=[
            ast.Call(func=ast.Attribute(value=ast.Name(id=_MOD, ctx=ast.Load()), attr="current", ctx=ast.Load()),
                     args=[ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]), ast.Constant(n)],
                     keywords=[]) for n in names], ctx=ast.Load()))
        then_fn = ast.FunctionDef(name=f"__pypto_then_{k}", args=args, body=list(node.body) + [ret], decorator_list=[],
                                  returns=None, type_comment=None)
        else_fn = ast.FunctionDef(name=f"__pypto_else_{k}", args=args, body=list(node.orelse or []) + [ret],
                                  decorator_list=[], returns=None, type_comment=None)
        current = ast.Tuple(elts=[
            ast.Call(func=ast.Attribute(value=ast.Name(id=_MOD, ctx=ast.Load()), attr="current", ctx=ast.Load()),
                     args=[ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]), ast.Constant(n)],
                     keywords=[]) for n in names], ctx=ast.Load())
        call = ast.Call(
            func=ast.Attribute(value=ast.Name(id=_MOD, ctx=ast.Load()), attr="if_stmt", ctx=ast.Load()),
            args=[node.test, ast.Name(id=then_fn.name, ctx=ast.Load()), ast.Name(id=else_fn.name, ctx=ast.Load()), current,
                  ast.Constant(tuple(names)), ast.Constant(f"{self.filename}:{self._line(node)}")], keywords=[])
        if names:
            target = ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())
            assign = ast.Assign(targets=[target], value=call, lineno=node.lineno)
        else:
            assign = ast.Expr(value=call)
        out = [then_fn, else_fn, assign]
        for s in out:
            ast.copy_location(s, node)
        # Names assigned only in one branch and undefined before come back as _UNDEF: drop them.
        for n in names:
            cleanup = ast.parse(f"if {n} is {_MOD}.UNDEF:\n    del {n}").body[0]
            ast.copy_location(cleanup, node)
            for sub in ast.walk(cleanup):
                if hasattr(sub, "lineno"):
                    sub.lineno = node.lineno
                    sub.end_lineno = node.lineno
            out.append(cleanup)
        return out


def convert(fn: Callable) -> Callable:
    """The function with its control flow converted (or ``fn`` itself when its
    source is not available, e.g. a lambda or code typed at a prompt)."""
    if getattr(fn, "__pypto_converted__", False):
        return fn
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return fn
    src = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return fn
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return fn
    filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    ast.increment_lineno(tree, start - 1)
    _Transformer(filename, 0).visit(tree)
    ast.fix_missing_locations(tree)
    # Rebuild the function in its own globals, with its closure values visible.
    from pypto.frontend import autograph as ag_mod

    closure = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    if closure:
        # Wrap in a factory so closure variables stay closure variables.
        factory = ast.FunctionDef(
            name="__pypto_factory",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in closure], vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[]),
            body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))], decorator_list=[], returns=None,
            type_comment=None)
        ast.copy_location(factory, fdef)
        tree.body = [factory]
        ast.fix_missing_locations(tree)
    code = compile(tree, filename, "exec")
    glb = fn.__globals__
    ns: dict[str, Any] = {}
    glb.setdefault(_MOD, ag_mod)
    exec(code, glb, ns)
    new = ns["__pypto_factory"](**closure) if closure else ns[fdef.name]
    new = functools.wraps(fn)(new)
    new.__pypto_converted__ = True
    linecache.checkcache(filename)
    return new


UNDEF = _UNDEF


def call_min_max(fn: Callable, *args, **kwargs) -> Any:
    """A call of ``min``/``max`` in a converted function: the built-in on two arguments of which
    one is a symbolic scalar is ``pypto.min``/``pypto.max``; anything else calls ``fn``."""
    import builtins

    from pypto.frontend import symbolic

    if (fn is builtins.min or fn is builtins.max) and len(args) == 2 and not kwargs and \
            any(isinstance(a, symbolic.SymExpr) for a in args):
        return (symbolic.min if fn is builtins.min else symbolic.max)(*args)
    return fn(*args, **kwargs)


def current(local_vars: dict, name: str) -> Any:
    return local_vars.get(name, _UNDEF)


def while_test(cond: Any, where: str) -> bool:
    from pypto.frontend.symbolic import SymExpr

    if isinstance(cond, SymExpr):
        raise NotSupportedError(f"'while' on a symbolic value at {where} is not supported; use pypto.loop(...)")
    return bool(cond)


def if_stmt(cond: Any, then_fn: Callable, else_fn: Callable, values: tuple, names: tuple, where: str):
    from pypto.frontend import control

    return control.if_stmt(cond, then_fn, else_fn, values, names, where)
