"""Every elementwise op and reduction against torch, for each dtype it
supports, over shapes that do and do not divide by the tile (1 element,
tails, broadcast, batched), with torch and NumPy inputs.

Tolerances (documented in docs/programming_guide.md): fp32 1e-5 relative and
absolute (transcendentals 2e-5); fp16 1e-3; bf16 1e-2 (values are stored in
the type and computed in fp32, so results differ from torch's per-op rounding
by at most a few ulps of the type); double 1e-12; integers and bool exact.
"""

import numpy as np
import pytest
import torch

import pypto

TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
    torch.float64: dict(atol=1e-12, rtol=1e-12),
}
PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE, torch.int8: pypto.DT_INT8, torch.int16: pypto.DT_INT16,
      torch.int32: pypto.DT_INT32, torch.int64: pypto.DT_INT64, torch.uint8: pypto.DT_UINT8, torch.bool: pypto.DT_BOOL}
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
SHAPES = [(1, 1), (7, 33), (64, 64), (3, 5, 20)]


def tile_for(shape):
    return [4] * (len(shape) - 1) + [16]


def check(got, ref, dtype=None):
    if isinstance(got, np.ndarray):
        got = torch.from_numpy(got)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert tuple(got.shape) == tuple(ref.shape)
    if ref.dtype.is_floating_point:
        torch.testing.assert_close(got, ref, equal_nan=True, **TOL[ref.dtype])
    else:
        assert torch.equal(got, ref), (got, ref)


def rand(shape, dtype, positive=False, lo=-3, hi=3):
    g = torch.Generator().manual_seed(hash((shape, str(dtype))) % 2**31)
    if dtype.is_floating_point:
        x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        if positive:
            x = x.abs() + 0.1
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype == torch.uint8:
        return torch.randint(0, 9, shape, generator=g, dtype=dtype)
    return torch.randint(-9 if not positive else 1, 10, shape, generator=g, dtype=dtype)


UNARY_FLOAT = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu, "erf": torch.erf, "erfc": torch.erfc,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "exp2": torch.exp2,
    "expm1": torch.expm1, "relu": torch.relu, "sign": torch.sign,
}
UNARY_POSITIVE = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}


def _unary_kernel(names, shape, dt):
    @pypto.jit
    def f(x: pypto.Tensor(shape, dt)):
        pypto.set_vec_tile_shapes(*tile_for(shape))
        return tuple(getattr(pypto, n)(x) for n in names)

    return f


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_float(dtype, shape):
    for table, positive in ((UNARY_FLOAT, False), (UNARY_POSITIVE, True)):
        names = sorted(table)
        x = rand(shape, dtype, positive)
        f = _unary_kernel(names, shape, PT[dtype])
        outs = f(x)
        for n, got in zip(names, outs):
            ref = table[n](x.double()).to(dtype) if dtype != torch.float64 else table[n](x)
            check(got, ref)
        if dtype not in (torch.bfloat16,):
            outs_np = f(x.numpy())
            for n, got in zip(names, outs_np):
                assert isinstance(got, np.ndarray)
                check(got, torch.as_tensor(outs[names.index(n)]) if False else table[n](x.double()).to(dtype))


@pytest.mark.parametrize("dtype", INTS)
def test_unary_int(dtype):
    shape = (7, 33)
    names = ["neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign"]
    if dtype == torch.uint8:
        names = ["relu", "floor", "ceil", "round", "trunc", "sign"]
    x = rand(shape, dtype)
    outs = _unary_kernel(names, shape, PT[dtype])(x)
    for n, got in zip(names, outs):
        ref = {"relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
               "trunc": torch.trunc, "neg": torch.neg, "abs": torch.abs, "sign": torch.sign}[n](x)
        check(got, ref)
    # Float functions of integers give DT_FP32, as in torch.
    y = _unary_kernel(["exp", "sqrt"], shape, PT[dtype])(x.abs() if dtype != torch.uint8 else x)
    check(y[0], torch.exp(x.abs() if dtype != torch.uint8 else x))


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
          "minimum": torch.minimum, "pow": torch.pow}
COMPARE = {"gt": torch.gt, "ge": torch.ge, "lt": torch.lt, "le": torch.le, "eq": torch.eq, "ne": torch.ne}


def _binary_kernel(names, sa, sb, da, db, tile):
    @pypto.jit
    def f(a: pypto.Tensor(sa, da), b: pypto.Tensor(sb, db)):
        pypto.set_vec_tile_shapes(*tile)
        return tuple(getattr(pypto, n)(a, b) for n in names)

    return f


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (3, 5, 20)])
def test_sign_and_signbit(dtype, shape):
    """The two ops added through the op table (docs/architecture.md, "Adding an op"): signbit is a
    DT_BOOL test of the operand's sign bit; sign keeps the dtype; both on -0.0, NaN, -NaN and inf."""
    x = rand(shape, dtype)
    if dtype.is_floating_point and x.numel() >= 6:
        flat = x.view(-1)
        flat[:6] = torch.tensor([-0.0, 0.0, float("nan"), -float("nan"), float("inf"), -float("inf")]).to(dtype)

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(*tile_for(shape))
        return pypto.sign(x), pypto.signbit(x), x.signbit()

    s, b, m = f(x)
    check(s, torch.sign(x))
    if dtype.is_floating_point:  # +0 for -0.0 and NaN, as torch
        assert torch.equal(torch.signbit(s), torch.signbit(torch.sign(x)))
    assert b.dtype == torch.bool and torch.equal(b, torch.signbit(x)), (x, b)
    assert torch.equal(m, b)
    if dtype != torch.bfloat16:
        s_np, b_np, _ = f(x.numpy())
        assert b_np.dtype == np.bool_ and np.array_equal(b_np, torch.signbit(x).numpy())
        check(s_np, torch.sign(x))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("sa,sb", [((7, 33), (7, 33)), ((1, 1), (1, 1)), ((37, 1), (1, 45)), ((3, 5, 20), (20,)),
                                   ((6, 20), (3, 1, 20))])
def test_binary(dtype, sa, sb):
    names = sorted(BINARY) + sorted(COMPARE)
    if not dtype.is_floating_point:
        names.remove("pow")
    a = rand(sa, dtype)
    b = rand(sb, dtype, positive=True)
    tile = tile_for(sa if len(sa) >= len(sb) else sb)
    kernel = _binary_kernel(names, sa, sb, PT[dtype], PT[dtype], tile)
    outs = kernel(a, b)
    if dtype != torch.bfloat16:  # NumPy has no bfloat16
        for got_np, got in zip(kernel(a.numpy(), b.numpy()), outs):
            assert isinstance(got_np, np.ndarray)
            torch.testing.assert_close(torch.from_numpy(got_np), got, rtol=0, atol=0, equal_nan=True)
    for n, got in zip(names, outs):
        fn = {**BINARY, **COMPARE}[n]
        if dtype.is_floating_point and dtype != torch.float64:
            ref = fn(a.double(), b.double())
            ref = ref.to(dtype) if ref.dtype == torch.float64 else ref
        else:
            ref = fn(a, b)
        check(got, ref)


@pytest.mark.parametrize("da,db", [(torch.float16, torch.float32), (torch.int32, torch.float32),
                                   (torch.int8, torch.uint8), (torch.int32, torch.int64), (torch.bfloat16, torch.float16),
                                   (torch.bool, torch.int32), (torch.float32, torch.float64)])
def test_type_promotion(da, db):
    a, b = rand((5, 9), da), rand((5, 9), db, positive=True)
    outs = _binary_kernel(["add", "mul", "div", "gt"], (5, 9), (5, 9), PT[da], PT[db], (4, 8))(a, b)
    for got, fn in zip(outs, (torch.add, torch.mul, torch.div, torch.gt)):
        ref = fn(a, b)
        assert (got.dtype if isinstance(got, torch.Tensor) else None) == ref.dtype
        if ref.dtype in (torch.float16, torch.bfloat16, torch.float32):
            ref = fn(a.double(), b.double()).to(ref.dtype) if ref.dtype.is_floating_point else ref
        check(got, ref)


@pytest.mark.parametrize("scalar", [2, 2.5, -1.5, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8])
def test_scalar_operands_both_sides(scalar, dtype):
    shape = (9, 20)

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(8, 8)
        return (x + scalar, scalar + x, x - scalar, scalar - x, x * scalar, scalar * x, x / scalar, x > scalar,
                scalar < x, pypto.maximum(x, scalar), pypto.minimum(scalar, x))

    x = rand(shape, dtype, positive=True)
    refs = (x + scalar, scalar + x, x - scalar if scalar is not True else x - 1, (scalar - x) if scalar is not True else 1 - x,
            x * scalar, scalar * x, x / scalar, x > scalar, scalar < x,
            torch.maximum(x, torch.tensor(scalar, dtype=torch.result_type(x, scalar))),
            torch.minimum(torch.tensor(scalar, dtype=torch.result_type(x, scalar)), x))
    for got, ref in zip(f(x), refs):
        if ref.dtype.is_floating_point and dtype.is_floating_point:
            ref = ref.to(ref.dtype)
        check(got, ref)


def test_pow_and_clip_and_where():
    shape = (10, 30)

    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32), y: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return (x ** 2, 2 ** x, pypto.clip(x, -0.5, 0.5), pypto.clip(x, min=0.0), pypto.where(x > y, x, y),
                pypto.where(x > 0, x, 0.0), pypto.where(x > 0, 1.0, -1.0), pypto.pow(x.abs(), y))

    x, y = torch.randn(shape), torch.randn(shape)
    refs = (x ** 2, 2 ** x, x.clip(-0.5, 0.5), x.clip(min=0.0), torch.where(x > y, x, y),
            torch.where(x > 0, x, 0.0), torch.where(x > 0, 1.0, -1.0), torch.pow(x.abs(), y))
    for got, ref in zip(f(x, y), refs):
        check(got, ref)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.float16), (torch.float32, torch.bfloat16),
                                     (torch.float32, torch.int32), (torch.int32, torch.float32),
                                     (torch.float16, torch.float32), (torch.float32, torch.bool),
                                     (torch.bool, torch.float32), (torch.int64, torch.int8), (torch.float32, torch.float64)])
def test_cast(src, dst):
    shape = (11, 17)

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[src])):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.cast(x, PT[dst]), pypto.exp(pypto.cast(pypto.cast(x, PT[dst]), pypto.DT_FP32) * 0.1)

    x = rand(shape, src)
    a, b = f(x)
    check(a, x.to(dst))
    check(b, torch.exp(x.to(dst).to(torch.float32) * 0.1))


REDUCE = {"sum": torch.sum, "amax": torch.amax, "amin": torch.amin, "prod": torch.prod, "mean": torch.mean}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int8])
@pytest.mark.parametrize("shape,dim", [((1, 1), -1), ((7, 33), -1), ((7, 33), 0), ((64, 64), [0, 1]),
                                       ((3, 5, 20), 1), ((3, 5, 20), [0, 2]), ((3, 5, 20), -1)])
@pytest.mark.parametrize("keepdim", [True, False])
def test_reductions(dtype, shape, dim, keepdim):
    names = ["sum", "amax", "amin", "prod"] + (["mean", "var"] if dtype.is_floating_point else [])

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(*tile_for(shape))
        return tuple(getattr(pypto, n)(x, dim, keepdim=keepdim) for n in names)

    x = rand(shape, dtype, lo=0.5, hi=1.5) if dtype.is_floating_point else rand(shape, dtype)
    if not dtype.is_floating_point:
        x = x.clamp(-2, 2)
    outs = f(x)  # every dim reduced without keepdim: 0-d results
    for n, got in zip(names, outs):
        if n == "var":
            ref = torch.var(x.double(), dim=dim, keepdim=keepdim).to(dtype)
        elif n in ("amax", "amin"):
            ref = (torch.amax if n == "amax" else torch.amin)(x, dim=dim, keepdim=keepdim)
        elif dtype.is_floating_point:
            ref = REDUCE[n](x.double(), dim=dim, keepdim=keepdim).to(dtype) if n != "prod" or isinstance(dim, int) else \
                x.double().prod(dim[1], keepdim=True).prod(dim[0], keepdim=True).to(dtype)
            if n == "prod" and not isinstance(dim, int) and not keepdim:
                ref = ref.squeeze(dim[1]).squeeze(dim[0])
        else:
            if n == "prod" and not isinstance(dim, int):
                ref = x.prod(dim[1], keepdim=keepdim).prod(dim[0], keepdim=keepdim)
            else:
                ref = REDUCE[n](x, dim=dim, keepdim=keepdim)
        if n in ("sum", "prod", "mean") and dtype in (torch.float16, torch.bfloat16):
            torch.testing.assert_close(torch.as_tensor(got).float(), ref.float(), atol=5e-2, rtol=5e-2)
            continue
        check(got, ref)


def test_composites_match_torch():
    shape = (37, 96)

    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32), g: pypto.Tensor((96,), pypto.DT_FP32),
          b: pypto.Tensor((96,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        return (pypto.softmax(x, -1), pypto.softmax(x, 0), pypto.rms_norm(x), pypto.rms_norm(x, g, 1e-5),
                pypto.layer_norm(x), pypto.layer_norm(x, g, b, 1e-6), pypto.gelu(x, approximate="tanh"))

    x, g, b = torch.randn(shape), torch.randn(96), torch.randn(96)
    F = torch.nn.functional
    refs = (torch.softmax(x, -1), torch.softmax(x, 0), F.rms_norm(x, (96,), eps=1e-6), F.rms_norm(x, (96,), g, 1e-5),
            F.layer_norm(x, (96,)), F.layer_norm(x, (96,), g, b, 1e-6), F.gelu(x, approximate="tanh"))
    for got, ref in zip(f(x, g, b), refs):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_nan_and_inf_propagate():
    @pypto.jit
    def f(x: pypto.Tensor((2, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4)
        return pypto.amax(x, -1, True), pypto.maximum(x, 0.0), pypto.relu(x), pypto.exp(x)

    x = torch.tensor([[float("nan"), 1, 2, 3], [float("-inf"), float("inf"), 0, -1]])
    for got, ref in zip(f(x), (x.amax(-1, keepdim=True), torch.maximum(x, torch.tensor(0.0)), torch.relu(x), torch.exp(x))):
        torch.testing.assert_close(got, ref, equal_nan=True)


# ---------------------------------------------------------------- output-parameter style

OUT_STYLE_OPS = {
    "exp": (lambda x, y: pypto.exp(x), lambda x, y: torch.exp(x)),
    "sigmoid": (lambda x, y: pypto.sigmoid(x), lambda x, y: torch.sigmoid(x)),
    "add": (lambda x, y: x + y, lambda x, y: x + y),
    "maximum": (lambda x, y: pypto.maximum(x, y), lambda x, y: torch.maximum(x, y)),
    "where": (lambda x, y: pypto.where(x > y, x, y), lambda x, y: torch.where(x > y, x, y)),
    "softmax": (lambda x, y: pypto.softmax(x, -1), lambda x, y: torch.softmax(x, -1)),
    "sum": (lambda x, y: pypto.sum(x, -1, True) + y, lambda x, y: x.sum(-1, keepdim=True) + y),
    "amin": (lambda x, y: pypto.amin(x, 0, True) * y, lambda x, y: x.amin(0, keepdim=True) * y),
    "matmul": (lambda x, y: pypto.matmul(x, pypto.transpose(y, 0, 1)), lambda x, y: x @ y.t()),
}


@pytest.mark.parametrize("name", sorted(OUT_STYLE_OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_ops_in_output_parameter_style(name, dtype, kind):
    shape = (19, 19) if name == "matmul" else (19, 37)
    fn, ref = OUT_STYLE_OPS[name]

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype]), y: pypto.Tensor(shape, PT[dtype]), out: pypto.Tensor()):
        pypto.set_vec_tile_shapes(8, 16)
        pypto.set_cube_tile_shapes([8, 8], [16, 16], [8, 8])
        out[:] = fn(x, y)

    x, y = rand(shape, dtype), rand(shape, dtype)
    expect = ref(x.double(), y.double()).to(dtype)
    out = torch.zeros(expect.shape, dtype=dtype)
    if kind == "numpy":
        out_np = out.numpy()
        assert f(x.numpy(), y.numpy(), out_np) is None
        out = torch.from_numpy(out_np)
    else:
        assert f(x, y, out) is None
    tol = dict(atol=2e-5 * 10, rtol=2e-5 * 10) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(out, expect, **tol)
