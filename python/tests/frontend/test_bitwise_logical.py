"""Bitwise ops and shifts on integer and bool tensors, logical and/or, and the leaky and parametric
ReLUs, against torch: every integer dtype, broadcasting, Python-int operands on either side, the
operators (& | ^ ~ << >>), shift counts outside [0, bits), dynamic dims, the NumPy path, and the
errors for float operands and bad slopes."""

import numpy as np
import pytest
import torch

import pypto

PT = {torch.int8: pypto.DT_INT8, torch.int16: pypto.DT_INT16, torch.int32: pypto.DT_INT32,
      torch.int64: pypto.DT_INT64, torch.uint8: pypto.DT_UINT8, torch.bool: pypto.DT_BOOL,
      torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE}
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
BITWISE = {"bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor}


def ints(shape, dtype, seed, lo=None, hi=None):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    info = torch.iinfo(dtype)
    lo = max(info.min, -2**62) if lo is None else lo
    hi = min(info.max, 2**62) if hi is None else hi
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dtype)


def binary(names, sa, sb, da, db):
    @pypto.jit
    def f(a: pypto.Tensor(sa, PT[da]), b: pypto.Tensor(sb, PT[db])):
        pypto.set_vec_tile_shapes(*([4] * (max(len(sa), len(sb)) - 1) + [16]))
        return tuple(getattr(pypto, n)(a, b) for n in names)

    return f


@pytest.mark.parametrize("dtype", INTS + [torch.bool])
@pytest.mark.parametrize("sa,sb", [((7, 33), (7, 33)), ((1, 1), (1, 1)), ((37, 1), (1, 45)), ((3, 5, 20), (20,))])
def test_bitwise_against_torch(dtype, sa, sb):
    a, b = ints(sa, dtype, 1), ints(sb, dtype, 2)
    names = sorted(BITWISE)
    outs = binary(names, sa, sb, dtype, dtype)(a, b)
    for name, got in zip(names, outs):
        ref = BITWISE[name](a, b)
        assert got.dtype == ref.dtype and torch.equal(got, ref), name
    if dtype != torch.bool:
        for name, got in zip(names, binary(names, sa, sb, dtype, dtype)(a.numpy(), b.numpy())):
            assert np.array_equal(got, BITWISE[name](a, b).numpy()), name


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_against_torch_with_counts_outside_the_width(dtype):
    bits = torch.iinfo(dtype).bits
    shape = (9, 40)
    a = ints(shape, dtype, 3)
    # Counts in [0, bits) and outside it (negative ones only for signed types).
    lo = -3 if dtype != torch.uint8 else 0
    b = ints(shape, dtype, 4, lo, min(bits + 3, torch.iinfo(dtype).max))
    left, right = binary(["bitwise_left_shift", "bitwise_right_shift"], shape, shape, dtype, dtype)(a, b)
    ref_left = torch.bitwise_left_shift(a, b)
    ref_right = torch.bitwise_right_shift(a, b)
    # torch leaves negative counts to the C++ shift; pypto gives 0 (left) and the sign fill (right).
    ok = (b >= 0) & (b < bits)
    assert torch.equal(left[ok], ref_left[ok]) and torch.equal(right[ok], ref_right[ok])
    assert torch.equal(left[~ok], torch.zeros_like(left[~ok]))
    fill = torch.where(a < 0, torch.full_like(a, -1), torch.zeros_like(a))
    assert torch.equal(right[~ok], fill[~ok])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.bool])
def test_operators_and_int_operands_on_either_side(dtype):
    shape = (6, 20)

    @pypto.jit
    def f(a: pypto.Tensor(shape, PT[dtype]), b: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(4, 16)
        if dtype == torch.bool:
            return a & b, a | b, a ^ b, ~a, pypto.bitwise_not(b)
        return a & b, a | 5, 6 ^ b, ~a, (a << 2) >> 1, 1 << (b & 7), a.bitwise_and(b), 100 >> (b & 3)

    a, b = ints(shape, dtype, 5), ints(shape, dtype, 6)
    outs = f(a, b)
    if dtype == torch.bool:
        refs = (a & b, a | b, a ^ b, ~a, ~b)
    else:
        refs = (a & b, a | 5, 6 ^ b, ~a, (a << 2) >> 1, 1 << (b & 7), a & b, 100 >> (b & 3))
    for i, (got, ref) in enumerate(zip(outs, refs)):
        assert torch.equal(got, ref.to(got.dtype)), i


def test_a_dynamic_dim():
    @pypto.jit
    def f(a: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_INT32),
          b: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.bitwise_xor(a, b), pypto.bitwise_right_shift(a, b & 31)

    for rows in (1, 7, 19):
        a, b = ints((rows, 24), torch.int32, rows), ints((rows, 24), torch.int32, rows + 1)
        x, s = f(a, b)
        assert torch.equal(x, a ^ b) and torch.equal(s, a >> (b & 31))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.bool])
def test_logical_and_or(dtype):
    shape = (5, 21)
    if dtype.is_floating_point:
        a = torch.tensor([0.0, -0.0, 1.5, float("nan"), -2.0, float("inf"), 0.0] * 15).reshape(shape).to(dtype)
        b = a.flip(1)
    elif dtype == torch.bool:
        a, b = ints(shape, dtype, 7), ints(shape, dtype, 8)
    else:
        a, b = ints(shape, dtype, 7, 0, 2), ints(shape, dtype, 8, 0, 2)
    land, lor = binary(["logical_and", "logical_or"], shape, shape, dtype, dtype)(a, b)
    assert land.dtype == torch.bool and torch.equal(land, torch.logical_and(a, b))
    assert torch.equal(lor, torch.logical_or(a, b))


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                "bitwise_right_shift", "bitwise_not"])
def test_float_operands_are_refused_with_the_op_and_line(op):
    @pypto.jit
    def f(a: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return getattr(pypto, op)(a) if op == "bitwise_not" else getattr(pypto, op)(a, a)

    with pytest.raises(TypeError, match=rf"pypto\.{op} at .*test_bitwise_logical\.py:\d+: expects integer or DT_BOOL "
                                        r"operands, found DT_FP32"):
        f(torch.zeros(4, 8))

    @pypto.jit
    def g(a: pypto.Tensor((4, 8), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.bitwise_and(a, 1.5)  # a float scalar promotes to DT_FP32

    with pytest.raises(TypeError, match="bitwise_and.*found DT_FP32"):
        g(torch.zeros(4, 8, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (2, 3, 5, 9)])
def test_lrelu_and_prelu(dtype, shape):
    g = torch.Generator().manual_seed(9)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype)
    x.view(-1)[0] = -0.0
    if x.numel() > 2:
        x.view(-1)[1] = float("nan")
    channels = shape[1]
    w = torch.rand(channels, generator=g, dtype=torch.float64).to(dtype)
    w1 = torch.tensor([0.25], dtype=dtype)

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype]), w: pypto.Tensor((channels,), PT[dtype]),
          w1: pypto.Tensor((1,), PT[dtype])):
        pypto.set_vec_tile_shapes(*([2] * (len(shape) - 1) + [16]))
        return pypto.lrelu(x), pypto.lrelu(x, negative_slope=0.2), pypto.prelu(x, w), pypto.prelu(x, w1)

    a, b, c, d = f(x, w, w1)
    F = torch.nn.functional
    tol = dict(rtol=0, atol=0) if dtype in (torch.float32, torch.float64) else dict(rtol=1e-2, atol=1e-3)
    torch.testing.assert_close(a, F.leaky_relu(x), equal_nan=True, **tol)
    torch.testing.assert_close(b, F.leaky_relu(x, 0.2), equal_nan=True, **tol)
    torch.testing.assert_close(c, F.prelu(x, w), equal_nan=True, **tol)
    torch.testing.assert_close(d, F.prelu(x, w1), equal_nan=True, **tol)
    assert torch.signbit(a.view(-1)[0])  # -0.0 stays -0.0, as torch


def test_lrelu_and_prelu_errors():
    @pypto.jit
    def bad_slope(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        return pypto.lrelu(x, negative_slope=-0.1)

    with pytest.raises(ValueError, match=r"pypto\.lrelu: negative_slope must be finite and >= 0, found -0\.1"):
        bad_slope(torch.zeros(4, 8))

    @pypto.jit
    def bad_weight(x: pypto.Tensor((4, 8), pypto.DT_FP32), w: pypto.Tensor((3,), pypto.DT_FP32)):
        return pypto.prelu(x, w)

    with pytest.raises(ValueError, match=r"pypto\.prelu: weight has 3 elements; expected 1 or the 8 channels"):
        bad_weight(torch.zeros(4, 8), torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16])
def test_narrow_integer_results_wrap_before_the_next_op(dtype):
    """int8/uint8/int16 compute in a wider type; each op's result wraps to its dtype, as torch's does,
    before the next op of a fused chain reads it (a right shift, a division or a comparison of the
    unwrapped value would differ)."""
    shape = (6, 40)

    @pypto.jit
    def f(a: pypto.Tensor(shape, PT[dtype]), b: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.floor_div(a + b, 3), (a << 3) >> 2, (a * b) > 0, pypto.remainder(a - b, 7), pypto.maximum(a + b, a)

    a, b = ints(shape, dtype, 11), ints(shape, dtype, 12)
    refs = (torch.floor_divide(a + b, 3), (a << 3) >> 2, (a * b) > 0, torch.remainder(a - b, 7), torch.maximum(a + b, a))
    for i, (got, ref) in enumerate(zip(f(a, b), refs)):
        assert got.dtype == ref.dtype and torch.equal(got, ref), i
