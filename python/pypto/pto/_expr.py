"""Integer expressions of the tile-level API (loop bounds, offsets, scalar
operands), written by users as ints, names or Python expression strings and
printed in the .pto syntax of csrc/ir/expr.cc (fully parenthesised)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Union

from pypto.errors import UserError, UserTypeError


@dataclass(frozen=True)
class E:
    """A node: op is 'const', 'var' or an operator ('+', '-', '*', '//', '%',
    '<', '<=', '==', '!=', '&&', '||', 'min', 'max')."""

    op: str
    a: object = None
    b: object = None

    def text(self) -> str:
        if self.op == "const":
            return str(self.a)
        if self.op == "var":
            return self.a
        if self.op in ("min", "max"):
            return f"{self.op}({self.a.text()}, {self.b.text()})"
        return f"({self.a.text()} {self.op} {self.b.text()})"

    def subst(self, env: dict[str, "E"]) -> "E":
        if self.op == "const":
            return self
        if self.op == "var":
            return env.get(self.a, self)
        return E(self.op, self.a.subst(env), self.b.subst(env))

    def names(self) -> set[str]:
        if self.op == "const":
            return set()
        if self.op == "var":
            return {self.a}
        return self.a.names() | self.b.names()

    def const(self):
        return self.a if self.op == "const" else None


ExprLike = Union[int, str, E]

_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}


def const(v: int) -> E:
    return E("const", int(v))


def var(name: str) -> E:
    return E("var", name)


def mul(a: E, k: int) -> E:
    """a * k, folded when either side is a constant 1 or a is a constant."""
    if k == 1:
        return a
    if a.op == "const":
        return const(a.a * k)
    return E("*", a, const(k))


def add(a: E, b: E) -> E:
    if b.op == "const" and b.a == 0:
        return a
    if a.op == "const" and a.a == 0:
        return b
    if a.op == "const" and b.op == "const":
        return const(a.a + b.a)
    return E("+", a, b)


def parse(v: ExprLike, what: str) -> E:
    """An expression from an int, a name (``"n"`` or the seed's ``"%n"``) or
    a Python expression string (``"num_tiles // 2"``, ``"i < n and n > 4"``)."""
    if isinstance(v, E):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise UserTypeError(f"{what}: expected an int, a name or an expression string, found {v!r}")
    if isinstance(v, int):
        return const(v)
    # The seed's "%n" names a variable; "a % b" stays a modulo.
    text = re.sub(r"(^|[(,+\-*/<>=!&|%])(\s*)%(?=[A-Za-z_])", r"\1\2", v.strip())
    text = text.replace("&&", " and ").replace("||", " or ")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise UserError(f"{what}: {v!r} is not an integer expression") from None
    return _from_ast(tree, v, what)


def _from_ast(n: ast.AST, src: str, what: str) -> E:
    def bad(why: str):
        return UserError(f"{what}: {src!r}: {why}")

    if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
        return const(n.value)
    if isinstance(n, ast.Name):
        return var(n.id)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        x = _from_ast(n.operand, src, what)
        return const(-x.a) if x.op == "const" else E("-", const(0), x)
    if isinstance(n, ast.BinOp):
        if type(n.op) not in _BIN:
            raise bad("only + - * // % are allowed (use // for division)")
        return E(_BIN[type(n.op)], _from_ast(n.left, src, what), _from_ast(n.right, src, what))
    if isinstance(n, ast.Compare):
        if len(n.ops) != 1:
            raise bad("chained comparisons are not supported; use 'and'")
        a, b = _from_ast(n.left, src, what), _from_ast(n.comparators[0], src, what)
        op = type(n.ops[0])
        if op is ast.Gt:
            return E("<", b, a)
        if op is ast.GtE:
            return E("<=", b, a)
        if op not in _CMP:
            raise bad("unsupported comparison")
        return E(_CMP[op], a, b)
    if isinstance(n, ast.BoolOp):
        sym = "&&" if isinstance(n.op, ast.And) else "||"
        out = _from_ast(n.values[0], src, what)
        for v in n.values[1:]:
            out = E(sym, out, _from_ast(v, src, what))
        return out
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and len(n.args) == 2:
        return E(n.func.id, _from_ast(n.args[0], src, what), _from_ast(n.args[1], src, what))
    raise bad("not an integer expression over names and ints")


def evaluate(e: E, env: dict[str, int]) -> int:
    """The value of `e` with names bound by `env` (KeyError on a free name)."""
    if e.op == "const":
        return e.a
    if e.op == "var":
        return env[e.a]
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b, "%": lambda: a % b,
        "<": lambda: int(a < b), "<=": lambda: int(a <= b), "==": lambda: int(a == b), "!=": lambda: int(a != b),
        "&&": lambda: int(bool(a) and bool(b)), "||": lambda: int(bool(a) or bool(b)),
        "min": lambda: min(a, b), "max": lambda: max(a, b),
    }[e.op]()
