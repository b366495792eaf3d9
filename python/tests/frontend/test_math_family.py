"""The math ops of the op-families issue (sin, cos, tan, log2, log10, log1p, sinh, cosh, asinh, acosh,
atanh, cbrt, atan, asin, acos, hypot, copysign, isnan, isfinite) against torch: every float dtype, shapes that do
and do not divide by the tile, a dynamic dim, integer inputs (which give DT_FP32), the special
values each op defines, the NumPy path, and a fused chain. The fp32 error bounds themselves are
measured against libm over all floats by cpp_tests/codegen/vector_math_cases.inc."""

import math
import os
import sys

import numpy as np
import pytest
import torch

import pypto

sys.path.insert(0, os.path.dirname(__file__))
from test_ops_sweep import _unary_kernel, tile_for  # noqa: E402  (one kernel factory for the unary sweeps)

PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE, torch.int32: pypto.DT_INT32, torch.int8: pypto.DT_INT8}
# fp32: a few ulp of the documented bounds (the reference is torch in float64, rounded once).
TOL = {torch.float32: dict(rtol=4e-7, atol=1e-37), torch.float16: dict(rtol=1e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=8e-3, atol=1e-5), torch.float64: dict(rtol=1e-14, atol=0.0)}
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
SHAPES = [(1, 1), (7, 33), (64, 64), (3, 5, 20)]

# name: torch function (NumPy's for cbrt, which torch lacks).
UNARY = {
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "log2": torch.log2, "log10": torch.log10,
    "log1p": torch.log1p, "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh,
    "atanh": torch.atanh, "cbrt": lambda t: torch.from_numpy(np.cbrt(t.numpy())), "atan": torch.atan,
    "asin": torch.asin, "acos": torch.acos,
}
# The ops grouped by the input range each is checked over (one kernel per group).
GROUPS = [
    (("sin", "cos", "sinh", "cosh", "asinh", "cbrt", "atan"), -30.0, 30.0),
    (("log2", "log10", "log1p", "acosh"), 1.0, 1e4),
    (("asin", "acos", "atanh", "tan"), -0.999, 0.999),
    (("log1p", "log2", "atanh"), 1e-6, 0.5),  # near zero: log1p's and atanh's cancellation-free forms
]


def inputs(shape, dtype, lo, hi, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(shape, generator=g, dtype=torch.float64)
    if lo > 0 and hi / lo > 100:  # log-uniform over wide positive ranges
        x = torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    else:
        x = lo + u * (hi - lo)
    return x.to(dtype)


def reference(name, x):
    fn = UNARY[name]
    return fn(x.double()).to(x.dtype if x.dtype.is_floating_point else torch.float32)


def check(got, ref):
    if isinstance(got, np.ndarray):
        got = torch.from_numpy(got)
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), (got.dtype, got.shape, ref.dtype, ref.shape)
    torch.testing.assert_close(got, ref, equal_nan=True, **TOL[ref.dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_against_torch(dtype, shape):
    for i, (names, lo, hi) in enumerate(GROUPS):
        x = inputs(shape, dtype, lo, hi, seed=i)
        for name, got in zip(names, _unary_kernel(names, shape, PT[dtype])(x)):
            check(got, reference(name, x))


def test_methods_numpy_and_a_dynamic_dim():
    names = sorted(UNARY)

    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 40], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return tuple(getattr(x, n)() for n in names)

    for rows in (1, 9, 30):
        x = inputs((rows, 40), torch.float32, 0.1, 0.9, seed=rows)  # inside every op's domain
        for name, got in zip(names, f(x)):
            check(got, reference(name, x))
        for name, got in zip(names, f(x.numpy())):
            assert isinstance(got, np.ndarray)
            check(got, reference(name, x))


SPECIALS = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 2.0, 0.5, -0.5, 1e-40, -1e-40,
            1e-30, 100.0, -100.0, 89.0, 3e38, -3e38, 1.0000001, 0.99999994, 4096.0, 1e20]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_special_values(dtype):
    x = torch.tensor(SPECIALS, dtype=dtype).reshape(2, 11)
    names = sorted(UNARY)
    outs = _unary_kernel(names, (2, 11), PT[dtype])(x)
    for name, got in zip(names, outs):
        ref = reference(name, x)
        torch.testing.assert_close(got, ref, equal_nan=True, **TOL[dtype], msg=lambda m, n=name: f"{n}: {m}")
        # Signed zeros and infinities exactly.
        zero_or_inf = (ref == 0) | ref.isinf()
        assert torch.equal(torch.signbit(got[zero_or_inf]), torch.signbit(ref[zero_or_inf])), name


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8])
def test_integer_inputs_give_fp32(dtype):
    x = torch.arange(1, 34, dtype=dtype).reshape(3, 11)
    names = ["log2", "log10", "log1p", "cbrt", "atan", "asinh", "acosh", "sinh"]
    for name, got in zip(names, _unary_kernel(names, (3, 11), PT[dtype])(x)):
        assert got.dtype == torch.float32, name
        check(got, reference(name, x))


def binary_kernel(name, sa, sb, dt):
    @pypto.jit
    def f(a: pypto.Tensor(sa, dt), b: pypto.Tensor(sb, dt)):
        pypto.set_vec_tile_shapes(*tile_for(sa if len(sa) >= len(sb) else sb))
        return getattr(pypto, name)(a, b), getattr(a, name)(b)

    return f


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sa,sb", [((7, 33), (7, 33)), ((1, 1), (1, 1)), ((37, 1), (1, 45)), ((3, 5, 20), (20,))])
def test_hypot_and_copysign(dtype, sa, sb):
    a = inputs(sa, dtype, -1e3, 1e3, seed=1)
    b = inputs(sb, dtype, -1e3, 1e3, seed=2)
    for name, fn in (("hypot", torch.hypot), ("copysign", torch.copysign)):
        got, method = binary_kernel(name, sa, sb, PT[dtype])(a, b)
        check(got, fn(a.double(), b.double()).to(dtype))
        assert torch.equal(got, method)


def test_hypot_and_copysign_special_values():
    v = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 3e38, 1e-45, -2.0])
    a = v.repeat_interleave(8).reshape(8, 8)
    b = v.repeat(8).reshape(8, 8)
    h, _ = binary_kernel("hypot", (8, 8), (8, 8), pypto.DT_FP32)(a, b)
    torch.testing.assert_close(h, torch.hypot(a.double(), b.double()).float(), equal_nan=True, rtol=2e-7, atol=0)
    c, _ = binary_kernel("copysign", (8, 8), (8, 8), pypto.DT_FP32)(a, b)
    ref = torch.copysign(a, b)
    assert torch.equal(c.isnan(), ref.isnan())
    assert torch.equal(c.nan_to_num(), ref.nan_to_num()) and torch.equal(c.signbit(), ref.signbit())
    # Integers give DT_FP32, as in torch.
    ai = torch.tensor([[3, -4, 0, 5]], dtype=torch.int32)
    bi = torch.tensor([[4, 3, -1, -12]], dtype=torch.int32)
    hi, _ = binary_kernel("hypot", (1, 4), (1, 4), pypto.DT_INT32)(ai, bi)
    ci, _ = binary_kernel("copysign", (1, 4), (1, 4), pypto.DT_INT32)(ai, bi)
    assert hi.dtype == torch.float32 and torch.equal(hi, torch.tensor([[5.0, 5.0, 1.0, 13.0]]))
    assert torch.equal(ci, torch.copysign(ai, bi))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int8])
def test_isnan_and_isfinite(dtype):
    shape = (5, 9)
    x = inputs(shape, dtype, -100, 100) if dtype.is_floating_point else torch.randint(-100, 100, shape, dtype=dtype)
    if dtype.is_floating_point:
        x.view(-1)[:6] = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), -0.0, 1e-40]).to(dtype)

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.isnan(x), pypto.isfinite(x), x.isnan(), x.isfinite()

    n, fin, nm, fm = f(x)
    assert n.dtype == torch.bool and fin.dtype == torch.bool
    assert torch.equal(n, torch.isnan(x)) and torch.equal(fin, torch.isfinite(x))
    assert torch.equal(nm, n) and torch.equal(fm, fin)
    if dtype != torch.bfloat16:
        n_np, fin_np, _, _ = f(x.numpy())
        assert n_np.dtype == np.bool_ and np.array_equal(n_np, torch.isnan(x).numpy())
        assert np.array_equal(fin_np, torch.isfinite(x).numpy())


def test_a_fused_chain_of_the_new_ops():
    """The new ops join fused chains (one kernel) and still match torch."""
    shape = (64, 256)

    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32), y: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 256)
        a = pypto.log1p(pypto.hypot(pypto.sinh(x), y))
        return a + pypto.atan(x) * pypto.cbrt(y) - pypto.asinh(x) * pypto.sin(y)

    x = inputs(shape, torch.float32, -3, 3, seed=5)
    y = inputs(shape, torch.float32, -3, 3, seed=6)
    xd, yd = x.double(), y.double()
    cbrt_y = torch.from_numpy(np.cbrt(yd.numpy()))
    a = torch.log1p(torch.hypot(torch.sinh(xd), yd))
    ref = a + torch.atan(xd) * cbrt_y - torch.asinh(xd) * torch.sin(yd)
    torch.testing.assert_close(f(x, y), ref.float(), rtol=2e-6, atol=2e-6)
    src = pypto.compile(f, x, y).source()
    chains = [line.split("// fused: ", 1)[1] for line in src.splitlines() if "// fused: " in line]
    ops = ("tsinh", "thypot", "tlog1p", "tatan", "tcbrt", "tasinh", "tsin")
    assert any(all(op in c for op in ops) for c in chains), chains
