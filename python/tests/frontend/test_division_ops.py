"""floor_div, ceil_div, fmod, remainder and the // and % operators against torch: float and integer
dtypes, tiles that do and do not divide the shape, broadcasting, dynamic dims, numbers on either
side, negative operands, zero divisors and the NumPy path."""

import numpy as np
import pytest
import torch

import pypto

PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE, torch.int8: pypto.DT_INT8, torch.int16: pypto.DT_INT16,
      torch.int32: pypto.DT_INT32, torch.int64: pypto.DT_INT64, torch.uint8: pypto.DT_UINT8}
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float64: 1e-12}


def ceil_div_ref(a, b):
    if a.dtype.is_floating_point:  # the quotient unrounded (fp16/bf16 compute in fp32), then its ceiling
        wide = torch.float64 if a.dtype == torch.float64 else torch.float32
        return torch.ceil(a.to(wide) / b.to(wide)).to(a.dtype)
    return -torch.floor_divide(-a.to(torch.int64), b.to(torch.int64)).to(a.dtype)


REFS = {"floor_div": torch.floor_divide, "ceil_div": ceil_div_ref, "fmod": torch.fmod,
        "remainder": torch.remainder}


def operands(shape_a, shape_b, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        a = (torch.rand(shape_a, generator=g, dtype=torch.float64) * 40 - 20).to(dtype)
        b = (torch.rand(shape_b, generator=g, dtype=torch.float64) * 8 - 4).to(dtype)
        b = torch.where(b.abs() < 0.25, torch.full_like(b, 1.5), b)
    elif dtype == torch.uint8:
        a = torch.randint(0, 250, shape_a, generator=g, dtype=dtype)
        b = torch.randint(1, 13, shape_b, generator=g, dtype=dtype)
    else:
        a = torch.randint(-100, 100, shape_a, generator=g, dtype=dtype)
        b = torch.randint(1, 12, shape_b, generator=g, dtype=dtype) * (torch.randint(0, 2, shape_b, generator=g) * 2 - 1).to(dtype)
    return a, b


def check(got, ref):
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), (got.dtype, ref.dtype, got.shape)
    if ref.dtype.is_floating_point:
        torch.testing.assert_close(got, ref, atol=TOL[ref.dtype], rtol=TOL[ref.dtype], equal_nan=True)
    else:
        assert torch.equal(got, ref), (got, ref)


def kernel(sa, sb, dt, tile):
    @pypto.frontend.jit
    def f(a: pypto.Tensor(sa, dt), b: pypto.Tensor(sb, dt)):
        pypto.set_vec_tile_shapes(*tile)
        return (pypto.floor_div(a, b), pypto.ceil_div(a, b), pypto.fmod(a, b), pypto.remainder(a, b),
                a // b, a % b)

    return f


CASES = [((7, 33), (7, 33), (4, 16)), ((64, 64), (64, 1), (16, 32)), ((3, 5, 20), (1, 5, 20), (2, 4, 8)),
         ((1, 1), (1, 1), (1, 8))]


# Each dtype with one of the shape cases in turn (tails, a row broadcast, 3-D, one element).
@pytest.mark.parametrize("dtype,case", [(d, CASES[i % len(CASES)]) for i, d in enumerate(PT)])
def test_the_four_ops_and_the_operators_match_torch(dtype, case):
    sa, sb, tile = case
    a, b = operands(sa, sb, dtype)
    outs = kernel(sa, sb, PT[dtype], tile)(a, b)
    for name, got in zip(["floor_div", "ceil_div", "fmod", "remainder"], outs[:4]):
        check(got, REFS[name](a, b))
    check(outs[4], a // b)
    check(outs[5], a % b)


def test_dynamic_rows_and_numbers_on_either_side():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((pypto.DYNAMIC, 19), pypto.DT_FP32), n: pypto.Tensor((pypto.DYNAMIC, 19), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 8)
        return a // 2.5, 7.0 // a, a % -3, 10 % a, n // 4, -9 // n, n % 5, pypto.fmod(n, -4), pypto.ceil_div(n, 3)

    for rows in (1, 13, 40):
        a, _ = operands((rows, 19), (1, 1), torch.float32, seed=rows)
        n, _ = operands((rows, 19), (1, 1), torch.int32, seed=rows + 1)
        n = torch.where(n == 0, torch.ones_like(n), n)
        out = f(a, n)
        refs = [a // 2.5, 7.0 // a, a % -3, 10 % a, n // 4, -9 // n, n % 5, torch.fmod(n, -4),
                ceil_div_ref(n, torch.full_like(n, 3))]
        for got, ref in zip(out, refs):
            check(got, ref)


def test_signs_zero_divisors_and_special_values():
    a = torch.tensor([[7.0, -7.0, 7.0, -7.0, 0.0, -0.0, 5.0, float("inf"), float("nan"), 1e30, 3.0, -3.0,
                       0.5, -0.5, 2.0, 6.0]])
    b = torch.tensor([[2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 2.0, 2.0, 7.0, float("inf"), float("inf"),
                       0.1, 0.1, -0.0, 0.6]])

    @pypto.frontend.jit
    def f(x: pypto.Tensor((1, 16), pypto.DT_FP32), y: pypto.Tensor((1, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 16)
        return x // y, x % y, pypto.fmod(x, y)

    fd, rem, fm = f(a, b)
    for got, ref in ((fd, torch.floor_divide(a, b)), (rem, torch.remainder(a, b)), (fm, torch.fmod(a, b))):
        torch.testing.assert_close(got, ref, equal_nan=True, atol=0, rtol=1e-6)
        assert torch.equal(torch.signbit(got[~ref.isnan()]), torch.signbit(ref[~ref.isnan()]))


def test_integer_zero_divisor_gives_zero_and_min_over_minus_one_wraps():
    i32 = torch.iinfo(torch.int32)
    a = torch.tensor([[5, -5, 0, i32.min, i32.min, i32.max, -7, 7]], dtype=torch.int32)
    b = torch.tensor([[0, 0, 0, -1, 1, -1, 2, -2]], dtype=torch.int32)

    @pypto.frontend.jit
    def f(x: pypto.Tensor((1, 8), pypto.DT_INT32), y: pypto.Tensor((1, 8), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(1, 8)
        return x // y, x % y, pypto.fmod(x, y), pypto.ceil_div(x, y)

    fd, rem, fm, cd = (t.tolist()[0] for t in f(a, b))
    assert fd == [0, 0, 0, i32.min, i32.min, -i32.max, -4, -4]
    assert rem == [0, 0, 0, 0, 0, 0, 1, -1]
    assert fm == [0, 0, 0, 0, 0, 0, -1, 1]
    assert cd == [0, 0, 0, i32.min, i32.min, -i32.max, -3, -3]


def test_methods_and_numpy_inputs():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((6, 10), pypto.DT_INT16), y: pypto.Tensor((6, 10), pypto.DT_INT16)):
        pypto.set_vec_tile_shapes(4, 8)
        return x.floor_div(y), x.ceil_div(y), x.fmod(y), x.remainder(y)

    a, b = operands((6, 10), (6, 10), torch.int16, seed=3)
    out = f(a.numpy(), b.numpy())
    assert all(isinstance(o, np.ndarray) and o.dtype == np.int16 for o in out)
    np.testing.assert_array_equal(out[0], np.floor_divide(a.numpy(), b.numpy()))
    np.testing.assert_array_equal(out[1], -np.floor_divide(-a.numpy(), b.numpy()))
    np.testing.assert_array_equal(out[2], np.fmod(a.numpy(), b.numpy()))
    np.testing.assert_array_equal(out[3], np.remainder(a.numpy(), b.numpy()))


def test_a_non_tensor_operand_is_named():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return x // "2"

    with pytest.raises(TypeError, match=r"pypto\.floor_div: second operand must be a pypto\.Tensor or a Python number, found str"):
        f(torch.ones(4, 8))
