"""Symbolic integer scalars: dynamic dims, loop indices and arithmetic on them.

A ``SymExpr`` wraps a C++ ``Expr``. Arithmetic (``+ - * // %``), comparisons
and ``.min``/``.max`` build new expressions; Python ints mix in freely.
Comparisons give symbolic conditions that ``if`` statements in a jitted
function turn into conditional regions.
"""

from __future__ import annotations

from typing import Any, Union

from pypto import _C
from pypto.errors import UserError, UserTypeError

IntLike = Union[int, "SymExpr"]


def to_expr(v: Any, what: str = "value") -> "_C.Expr":
    """The C++ Expr of an int or SymExpr."""
    if isinstance(v, SymExpr):
        return v._e
    if isinstance(v, bool):
        return _C.Expr(int(v))
    if isinstance(v, int):
        return _C.Expr(v)
    try:
        import numpy as np

        if isinstance(v, np.integer):
            return _C.Expr(int(v))
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    raise UserTypeError(f"{what} must be an int or a symbolic scalar, found {type(v).__name__} {v!r}")


def wrap(e: "_C.Expr") -> IntLike:
    """An int when the expression is constant, else a SymExpr."""
    c = e.as_const()
    return int(c) if c is not None else SymExpr(e)


class SymExpr:
    """A symbolic integer (or condition) known only when the kernel runs; PyPTO's
    ``SymbolicScalar``. ``SymbolicScalar(10)`` is the constant 10, ``SymbolicScalar("x")`` the
    symbol x (``SymbolicScalar("x", 10)`` with the concrete value 10), ``SymbolicScalar(s)`` a copy
    of ``s`` and ``SymbolicScalar()`` a new symbol."""

    __slots__ = ("_e", "_value")
    _anonymous = 0

    def __init__(self, arg0: Any = None, arg1: int | None = None):
        self._value = None
        if isinstance(arg0, _C.Expr):
            self._e = arg0
        elif isinstance(arg0, SymExpr):
            self._e, self._value = arg0._e, arg0._value
        elif isinstance(arg0, int) and not isinstance(arg0, bool):
            self._e = _C.Expr(arg0)
        elif isinstance(arg0, str):
            if not arg0.isidentifier():
                raise UserError(f"pypto.SymbolicScalar: a name must be an identifier, found {arg0!r}")
            if arg1 is not None and (isinstance(arg1, bool) or not isinstance(arg1, int)):
                raise UserTypeError(f"pypto.SymbolicScalar: the value of '{arg0}' must be an int, found {arg1!r}")
            self._e, self._value = _C.Expr.var(arg0), arg1
        elif arg0 is None:
            SymExpr._anonymous += 1
            self._e = _C.Expr.var(f"sym{SymExpr._anonymous}")
        else:
            raise UserTypeError(f"pypto.SymbolicScalar: expected an int, a name or a SymbolicScalar, found "
                                f"{type(arg0).__name__} {arg0!r}")

    def concrete(self) -> int:
        """The value, when it is known (a constant, or a symbol created with one)."""
        c = self._e.as_const()
        if c is not None:
            return int(c)
        if self._value is not None:
            return self._value
        raise UserError(f"Not concrete value: the symbolic scalar '{self}' is known only when the kernel runs")

    def is_concrete(self) -> bool:
        return self._e.as_const() is not None or self._value is not None

    def is_immediate(self) -> bool:
        """A constant."""
        return self._e.as_const() is not None

    def is_symbol(self) -> bool:
        """A single name."""
        return self._e.is_var()

    def is_expression(self) -> bool:
        """Names and constants combined by operators."""
        return not self._e.is_var() and self._e.as_const() is None

    def as_variable(self) -> None:
        """PyPTO marks an expression as an intermediate variable; expressions here are always
        evaluated once per use in the generated code, so this changes nothing."""

    @staticmethod
    def var(name: str) -> "SymExpr":
        return SymExpr(_C.Expr.var(name))

    def _bin(self, other, op, swap=False):
        try:
            o = to_expr(other)
        except UserTypeError:
            return NotImplemented
        a, b = (o, self._e) if swap else (self._e, o)
        return wrap(getattr(a, op)(b))

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "sub")
    def __rsub__(self, o): return self._bin(o, "sub", True)
    def __mul__(self, o): return self._bin(o, "mul")
    def __rmul__(self, o): return self._bin(o, "mul", True)
    def __floordiv__(self, o): return self._bin(o, "floordiv")
    def __rfloordiv__(self, o): return self._bin(o, "floordiv", True)
    def __mod__(self, o): return self._bin(o, "mod")
    def __rmod__(self, o): return self._bin(o, "mod", True)
    def __lt__(self, o): return self._bin(o, "lt")
    def __le__(self, o): return self._bin(o, "le")
    def __gt__(self, o): return self._bin(o, "lt", True)
    def __ge__(self, o): return self._bin(o, "le", True)
    def __eq__(self, o): return self._bin(o, "eq")  # type: ignore[override]
    def __ne__(self, o): return self._bin(o, "ne")  # type: ignore[override]
    def __neg__(self): return wrap(_C.Expr(0).sub(self._e))
    def __pos__(self): return self
    def __and__(self, o): return self._bin(o, "land")
    def __rand__(self, o): return self._bin(o, "land", True)
    def __or__(self, o): return self._bin(o, "lor")
    def __ror__(self, o): return self._bin(o, "lor", True)

    def min(self, other: IntLike) -> IntLike:
        return wrap(self._e.min(to_expr(other)))

    def max(self, other: IntLike) -> IntLike:
        return wrap(self._e.max(to_expr(other)))

    __hash__ = object.__hash__

    def __bool__(self):
        raise UserTypeError(
            f"the symbolic value '{self}' has no Python truth value while tracing: use it in an 'if' statement of "
            "the jitted function itself (converted into a conditional region), or pypto.cond(c, then_fn, else_fn); "
            "'and'/'or'/'not', 'while' and conditions in helper functions that are not @pypto.frontend.function "
            "cannot use it")

    def __index__(self):
        raise UserTypeError(f"the symbolic value '{self}' cannot be used where Python needs a concrete int")

    def __int__(self):
        raise UserTypeError(f"the symbolic value '{self}' cannot be converted to a Python int while tracing")

    def __str__(self) -> str:
        return str(self._e)

    def __repr__(self) -> str:
        return f"pypto.SymbolicScalar({self})"


def ceildiv(a: IntLike, b: IntLike) -> IntLike:
    """ceil(a / b) for positive b, on ints or symbolic scalars."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        if b <= 0:
            raise UserError(f"pypto.ceildiv: divisor must be positive, found {b}")
        return -(-a // b)
    ea, eb = to_expr(a, "pypto.ceildiv a"), to_expr(b, "pypto.ceildiv b")
    return wrap(ea.add(eb).sub(_C.Expr(1)).floordiv(eb))


_BIN_OPS = {"Add": "+", "Sub": "-", "Mult": "*", "FloorDiv": "//", "Mod": "%"}
_CMP_OPS = {"Lt": "<", "LtE": "<=", "Eq": "==", "NotEq": "!="}


def parse_expr(v: Any, what: str) -> "_C.Expr":
    """The C++ Expr of an int, a SymExpr, a C++ Expr, a name (``"n"``, or ``"%n"`` as .pto writes
    it) or a Python expression string over names and ints (``"num_tiles // 2"``,
    ``"i < n and n > 4"``, ``"min(a, b)"``). The expression keeps the form it is written in (no
    simplification), so it prints back as written."""
    import ast
    import re

    if isinstance(v, _C.Expr):
        return v
    if isinstance(v, SymExpr):
        return v._e
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise UserTypeError(f"{what}: expected an int, a name or an expression string, found {v!r}")
    if isinstance(v, int):
        return _C.Expr(v)
    # .pto's "%n" names a variable; "a % b" stays a modulo.
    text = re.sub(r"(^|[(,+\-*/<>=!&|%])(\s*)%(?=[A-Za-z_])", r"\1\2", v.strip())
    text = text.replace("&&", " and ").replace("||", " or ")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise UserError(f"{what}: {v!r} is not an integer expression") from None

    def bad(why: str):
        return UserError(f"{what}: {v!r}: {why}")

    def build(n: ast.AST) -> "_C.Expr":
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return _C.Expr(n.value)
        if isinstance(n, ast.Name):
            return _C.Expr.var(n.id)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            x = build(n.operand)
            c = x.as_const()
            return _C.Expr(-c) if c is not None else _C.Expr.node("-", _C.Expr(0), x)
        if isinstance(n, ast.BinOp):
            op = _BIN_OPS.get(type(n.op).__name__)
            if op is None:
                raise bad("only + - * // % are allowed (use // for division)")
            return _C.Expr.node(op, build(n.left), build(n.right))
        if isinstance(n, ast.Compare):
            if len(n.ops) != 1:
                raise bad("chained comparisons are not supported; use 'and'")
            a, b = build(n.left), build(n.comparators[0])
            kind = type(n.ops[0]).__name__
            if kind == "Gt":
                return _C.Expr.node("<", b, a)
            if kind == "GtE":
                return _C.Expr.node("<=", b, a)
            if kind not in _CMP_OPS:
                raise bad("unsupported comparison")
            return _C.Expr.node(_CMP_OPS[kind], a, b)
        if isinstance(n, ast.BoolOp):
            sym = "&&" if isinstance(n.op, ast.And) else "||"
            out = build(n.values[0])
            for x in n.values[1:]:
                out = _C.Expr.node(sym, out, build(x))
            return out
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and len(n.args) == 2:
            return _C.Expr.node(n.func.id, build(n.args[0]), build(n.args[1]))
        raise bad("not an integer expression over names and ints")

    return build(tree)


def _pick(name: str, a: IntLike, b: IntLike, smaller: bool) -> IntLike:
    import builtins

    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        return builtins.min(a, b) if smaller else builtins.max(a, b)
    ea, eb = to_expr(a, f"{name}: a"), to_expr(b, f"{name}: b")
    return wrap(ea.min(eb) if smaller else ea.max(eb))


def min(a: IntLike, b: IntLike) -> IntLike:  # noqa: A001 - PyPTO's name
    """The smaller of two ints or symbolic scalars (a symbolic scalar unless both are ints). In a
    jitted function the built-in ``min(a, b)`` does the same when either is symbolic."""
    return _pick("pypto.min", a, b, True)


def max(a: IntLike, b: IntLike) -> IntLike:  # noqa: A001 - PyPTO's name
    """The larger of two ints or symbolic scalars; see ``min``."""
    return _pick("pypto.max", a, b, False)


SymInt = Union[int, SymExpr]  # PyPTO's name for "an int or a symbolic scalar"


def to_sym(value: Any) -> SymExpr:
    """PyPTO's ``to_sym``: an int or a symbolic scalar as a symbolic scalar."""
    if isinstance(value, SymExpr):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserTypeError(f"pypto.to_sym: expected an int or a SymbolicScalar, found {type(value).__name__} {value!r}")
    return SymExpr(value)


def to_syms(values: Any) -> list:
    """PyPTO's ``to_syms``: each element of a list of ints and symbolic scalars as a symbolic scalar."""
    if not isinstance(values, (list, tuple)):
        raise UserTypeError(f"pypto.to_syms: expected a list, found {type(values).__name__}")
    return [to_sym(v) for v in values]
