"""gcd (integers, torch.gcd) and greater (PyPTO's name for gt) against torch and math.gcd."""

import math

import pytest
import torch

import pypto

INTS = {torch.int8: pypto.DT_INT8, torch.int16: pypto.DT_INT16, torch.int32: pypto.DT_INT32,
        torch.int64: pypto.DT_INT64, torch.uint8: pypto.DT_UINT8}


@pytest.mark.parametrize("dtype", list(INTS))
def test_gcd_against_torch_with_broadcasting_a_number_and_zeros(dtype):
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(1)
    a = torch.randint(info.min + 1, info.max, (19, 37), generator=g, dtype=dtype)  # the minimum: its own test
    b = torch.randint(info.min + 1, info.max, (1, 37), generator=g, dtype=dtype)
    a[0, :5] = 0
    b[0, :3] = 0
    a[1] = a[2] * 6 // 6  # shared factors
    dt = INTS[dtype]

    @pypto.jit
    def f(a: pypto.Tensor((pypto.DYNAMIC, 37), dt), b: pypto.Tensor((1, 37), dt)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.gcd(a, b), a.gcd(6), pypto.gcd(a * 2, a)

    r1, r2, r3 = f(a, b)
    assert torch.equal(r1, torch.gcd(a, b))
    assert torch.equal(r2, torch.gcd(a, torch.tensor(6, dtype=dtype)))
    assert torch.equal(r3, torch.gcd(a * 2, a))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_gcd_of_the_most_negative_value_is_exact_and_wrapped(dtype):
    info = torch.iinfo(dtype)
    bits = info.bits
    others = [0, 1, -1, 3, -6, 12, info.max, info.min, 2 ** (bits - 2), -(2 ** (bits - 3))]
    a = torch.full((len(others),), info.min, dtype=dtype)
    b = torch.tensor(others, dtype=dtype)
    dt = INTS[dtype]

    @pypto.jit
    def f(a: pypto.Tensor((len(others),), dt), b: pypto.Tensor((len(others),), dt)):
        pypto.set_vec_tile_shapes(16)
        return pypto.gcd(a, b), pypto.gcd(b, a)

    def wrapped(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >> (bits - 1) else v

    want = torch.tensor([wrapped(math.gcd(info.min, o)) for o in others], dtype=dtype)
    r1, r2 = f(a, b)
    assert torch.equal(r1, want)
    assert torch.equal(r2, want)
    assert r1[0] == torch.gcd(a[:1], b[:1])[0] == info.min  # gcd(min, 0): as torch


def test_gcd_rejects_floats():
    @pypto.jit
    def f(a: pypto.Tensor((4,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4)
        return pypto.gcd(a, a)

    with pytest.raises(TypeError, match=r"pypto\.gcd at .*test_gcd_greater\.py:\d+: expects integer or DT_BOOL"):
        f(torch.zeros(4))


@pytest.mark.parametrize("dtype,pdt", [(torch.float32, pypto.DT_FP32), (torch.int32, pypto.DT_INT32)])
def test_greater_is_gt(dtype, pdt):
    a = torch.randint(-3, 4, (5, 7)).to(dtype)
    b = torch.randint(-3, 4, (1, 7)).to(dtype)

    @pypto.jit
    def f(a: pypto.Tensor((5, 7), pdt), b: pypto.Tensor((1, 7), pdt)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.greater(a, b), a.greater(1), pypto.greater(a, 0.5)

    r1, r2, r3 = f(a, b)
    assert r1.dtype == torch.bool
    assert torch.equal(r1, a > b)
    assert torch.equal(r2, a > 1)
    assert torch.equal(r3, a > 0.5)
