"""frontend.symbolic.parse_expr: the tile-level API's integer expressions (ints, names,
Python expression strings) as C++ Exprs, kept in the form they are written in."""

import re

import pytest

import pypto
from pypto import _C
from pypto.frontend.symbolic import parse_expr


@pytest.mark.parametrize("text, printed, value", [
    ("num_tiles // 2", "(num_tiles // 2)", 3),
    ("%n - 1", "(n - 1)", 4),                      # .pto's %name
    ("(i + 1) % n", "((i + 1) % n)", 3),
    ("i < n and n > 4", "((i < n) && (4 < n))", 1),  # > is written as a swapped <
    ("i >= n || i == 2", "((n <= i) || (i == 2))", 1),
    ("min(i, n) * 8", "(min(i, n) * 8)", 16),
    ("-i + 0", "((0 - i) + 0)", -2),                 # nothing is folded away
    ("-3", "-3", -3),
])
def test_strings_parse_into_exprs_that_print_as_written(text, printed, value):
    e = parse_expr(text, "test")
    assert isinstance(e, _C.Expr)
    assert str(e) == printed
    assert e.eval({"i": 2, "n": 5, "num_tiles": 7}) == value


def test_ints_exprs_and_symbolic_scalars_pass_through():
    assert str(parse_expr(12, "test")) == "12"
    e = _C.Expr.var("k")
    assert parse_expr(e, "test") is e
    assert str(parse_expr(pypto.frontend.dynamic("M") * 2, "test")) == "(M * 2)"


@pytest.mark.parametrize("bad, words", [
    ("a / b", r"only \+ - \* // % are allowed \(use // for division\)"),
    ("0 < i < n", "chained comparisons are not supported"),
    ("f(x)", "not an integer expression over names and ints"),
    ("1 +", "is not an integer expression"),
    ("a is b", "unsupported comparison"),
])
def test_bad_strings_name_the_place_and_the_text(bad, words):
    with pytest.raises(ValueError, match=rf"for_loop end: {re.escape(repr(bad))}:? .*{words}"):
        parse_expr(bad, "for_loop end")


@pytest.mark.parametrize("bad", [1.5, True, None, [1]])
def test_other_types_are_type_errors(bad):
    with pytest.raises(TypeError, match="expected an int, a name or an expression string"):
        parse_expr(bad, "offset")
