"""pypto.SymbolicScalar (PyPTO's name for a symbolic integer) and the dim marks pypto.DYNAMIC,
pypto.DYN, pypto.STATIC and -1 in annotations."""

import numpy as np
import pytest
import torch

import pypto


def test_constructors():
    assert pypto.SymbolicScalar is pypto.SymExpr and pypto.symbolic_scalar is pypto.SymbolicScalar
    ten = pypto.SymbolicScalar(10)
    assert ten.is_immediate() and ten.is_concrete() and ten.concrete() == 10
    assert not ten.is_symbol() and not ten.is_expression()
    x = pypto.SymbolicScalar("x")
    assert str(x) == "x" and x.is_symbol() and not x.is_concrete() and not x.is_immediate()
    with pytest.raises(ValueError, match="Not concrete value: the symbolic scalar 'x'"):
        x.concrete()
    x10 = pypto.SymbolicScalar("x", 10)
    assert x10.is_symbol() and x10.is_concrete() and x10.concrete() == 10
    copy = pypto.SymbolicScalar(x10)
    assert str(copy) == "x" and copy.concrete() == 10
    a, b = pypto.SymbolicScalar(), pypto.SymbolicScalar()
    assert a.is_symbol() and str(a) != str(b)
    e = x * 2 + 1
    assert isinstance(e, pypto.SymbolicScalar) and e.is_expression() and not e.is_symbol()
    assert e.as_variable() is None and repr(x) == "pypto.SymbolicScalar(x)"


def test_constructor_errors():
    with pytest.raises(TypeError, match=r"SymbolicScalar: expected an int, a name or a SymbolicScalar, found float 1.5"):
        pypto.SymbolicScalar(1.5)
    with pytest.raises(ValueError, match=r"a name must be an identifier, found 'a b'"):
        pypto.SymbolicScalar("a b")
    with pytest.raises(TypeError, match=r"the value of 'x' must be an int, found '3'"):
        pypto.SymbolicScalar("x", "3")


def test_methods_min_max_fold_constants():
    s1, s2 = pypto.SymbolicScalar(10), pypto.SymbolicScalar(5)
    assert s1.max(s2) == 10 and s1.max(13) == 13 and s1.min(s2) == 5
    assert str(pypto.SymbolicScalar("x").max(2)) == "max(x, 2)"


def test_symbolic_scalar_names_a_dynamic_dim_in_an_annotation():
    n = pypto.SymbolicScalar("n")

    @pypto.jit
    def f(x: pypto.Tensor([n, 24], pypto.DT_FP32)) -> pypto.Tensor([n, 24], pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 16)
        assert str(x.shape[0]) == "n"
        return pypto.exp(x)

    libs = set()
    for rows in (3, 8, 19):
        x = torch.randn(rows, 24)
        torch.testing.assert_close(f(x), torch.exp(x))
        libs.add(f.compile(x).stats()["library"])
    assert len(libs) == 1


@pytest.mark.parametrize("mark", [pypto.DYN, pypto.DYNAMIC, -1], ids=["DYN", "DYNAMIC", "minus_one"])
def test_dynamic_marks_compile_once(mark):
    @pypto.jit
    def f(x: pypto.Tensor([mark, 40], pypto.DT_FP32)) -> pypto.Tensor([mark, 40], pypto.DT_FP32):
        pypto.set_vec_tile_shapes(16, 32)
        return x * 3.0 - 1.0

    libs = set()
    for rows in (1, 16, 45):
        x = np.random.default_rng(rows).standard_normal((rows, 40)).astype(np.float32)
        np.testing.assert_allclose(f(x), x * 3.0 - 1.0, rtol=1e-6)
        libs.add(f.compile(x).stats()["library"])
    assert len(libs) == 1


def test_static_mark_compiles_per_size():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.STATIC, 32], pypto.DT_FP16)) -> pypto.Tensor([pypto.STATIC, 32], pypto.DT_FP16):
        pypto.set_vec_tile_shapes(8, 32)
        assert isinstance(x.shape[0], int)  # a concrete size while tracing
        return pypto.add(x, x)

    libs = set()
    for rows in (5, 12):
        x = torch.randn(rows, 32, dtype=torch.float16)
        torch.testing.assert_close(f(x), x + x)
        libs.add(f.compile(x).stats()["library"])
    assert len(libs) == 2
    with pytest.raises(ValueError, match=r"parameter 'x' expects shape \(pypto.STATIC, 32\), found \(5, 31\)"):
        f(torch.randn(5, 31, dtype=torch.float16))


def test_status_type_names():
    assert pypto.StatusType.DYN is pypto.DYNAMIC and pypto.StatusType.STATIC is pypto.STATIC
    assert repr(pypto.STATIC) == "pypto.STATIC" and str(pypto.DYNAMIC) == "pypto.DYNAMIC"
    with pytest.raises(ValueError, match=r"shape dims must be positive \(or -1 for a dynamic dim\), found \(-2, 4\)"):
        pypto.Tensor((-2, 4), pypto.DT_FP32)
