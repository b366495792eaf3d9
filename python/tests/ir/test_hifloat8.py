"""DT_HF8 (HiFloat8), PyPTO's tapered 8-bit float, which travels in uint8 arrays.

The reference here builds the value of every code from the format's fields (prefix code, sign-
magnitude exponent with an implied top bit, mantissa) and rounds by a nearest search over those
values with ties away from zero; the kernels' conversions are compared with it code for code."""

import math

import numpy as np
import pytest
import torch

import pypto


def _reference_codes() -> dict[int, float]:
    """Code -> value for the 128 codes with the sign bit clear."""
    ref = {0x00: 0.0}
    for m in range(1, 8):  # prefix 0000: the denormal mode
        ref[m] = 2.0 ** (m - 23)
    for m in range(8):  # prefix 0001: exponent 0, 3 mantissa bits
        ref[0x08 | m] = 1 + m / 8
    # (prefix, prefix length, exponent bits, mantissa bits)
    for prefix, plen, ebits, mbits in [(0b001, 3, 1, 3), (0b01, 2, 2, 3), (0b10, 2, 3, 2), (0b11, 2, 4, 1)]:
        low = 1 << (ebits - 1)
        for mag in range(low, 2 * low):
            for neg in (0, 1):
                field = (neg << (ebits - 1)) | (mag - low)
                for m in range(1 << mbits):
                    code = (prefix << (7 - plen)) | (field << mbits) | m
                    ref[code] = 2.0 ** (-mag if neg else mag) * (1 + m / (1 << mbits))
    ref[0x6F] = math.inf  # the slot of 1.5 * 2^15
    assert sorted(ref) == list(range(128))
    return ref


REF = _reference_codes()
FINITE = sorted((v, c) for c, v in REF.items() if math.isfinite(v))  # ascending, 0 first


def _ref_encode(x: float) -> int:
    if math.isnan(x):
        return 0x80
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= 1.25 * 2.0**15:
        return sign | 0x6F
    best = min(FINITE, key=lambda vc: (abs(vc[0] - a), -vc[0]))  # nearest, a tie to the larger
    return 0 if best[1] == 0 else sign | best[1]


@pytest.fixture(scope="module")
def kernels():
    @pypto.frontend.jit
    def decode(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_HF8)) -> pypto.Tensor(
            [pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.cast(x, pypto.DT_FP32)

    @pypto.frontend.jit
    def encode(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32)) -> pypto.Tensor(
            [pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_HF8):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.cast(x, pypto.DT_HF8)

    return decode, encode


def test_every_code_decodes_to_its_value(kernels):
    decode, _ = kernels
    codes = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    out = decode(codes)
    assert out.dtype == torch.float32
    want = [REF[c] if c < 128 else (-REF[c - 128] if c != 0x80 else math.nan) for c in range(256)]
    torch.testing.assert_close(out.flatten(), torch.tensor(want), rtol=0, atol=0, equal_nan=True)
    # the format's landmarks
    assert out.flatten()[0x6E] == 2.0**15 and out.flatten()[0x01] == 2.0**-22 and out.flatten()[0x80].isnan()


@pytest.mark.parametrize("cols", [16, 21])  # divides the tile, or does not
def test_encoding_is_nearest_with_ties_away_from_zero(kernels, cols):
    _, encode = kernels
    vals = [v for v, _ in FINITE]
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    g = np.random.default_rng(3)
    rand = (g.standard_normal(600) * 10.0 ** g.integers(-8, 6, 600)).tolist()
    values = (vals + [-v for v in vals] + mids + [-m for m in mids] + [np.nextafter(m, 0) for m in mids] + rand
              + [0.0, -0.0, math.inf, -math.inf, math.nan, 40959.0, 40960.0, -1e30, 2.0**-23, 2.0**-24, 1e-40])
    n = -(-len(values) // cols) * cols
    x = np.array(values + [0.0] * (n - len(values)), np.float32).reshape(-1, cols)
    y = encode(x)
    assert y.dtype == np.uint8 and y.shape == x.shape
    want = np.array([_ref_encode(float(v)) for v in x.flatten()], np.uint8).reshape(x.shape)
    bad = y != want
    assert not bad.any(), f"{int(bad.sum())} codes differ: {x[bad][:4]} gave {y[bad][:4]}, expected {want[bad][:4]}"


def test_arithmetic_rounds_each_result_to_hf8():
    @pypto.frontend.jit
    def f(a: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_HF8), b: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        s = a * a  # an HF8 result: rounded to HF8
        return s, s + b  # HF8 with FP32 gives FP32

    g = torch.Generator().manual_seed(5)
    codes = torch.randint(0, 128, (13, 24), generator=g, dtype=torch.uint8)
    codes[codes == 0x6F] = 0x10  # keep infinities out of the product
    b = torch.randn(13, 24, generator=g)
    s, t = f(pypto.from_torch(codes, dtype=pypto.DT_HF8), b)
    a = torch.tensor([REF[int(c)] for c in codes.flatten()]).reshape(codes.shape)
    sq = torch.tensor([_ref_encode(float(v)) for v in (a * a).flatten()], dtype=torch.uint8).reshape(a.shape)
    assert s.dtype == torch.uint8 and torch.equal(s, sq)
    dec = torch.tensor([REF[int(c)] for c in sq.flatten()]).reshape(a.shape)
    torch.testing.assert_close(t, dec + b)


def test_a_hf8_parameter_takes_uint8_arrays_only():
    @pypto.frontend.jit
    def f(x: pypto.Tensor([4, 8], pypto.DT_HF8)) -> pypto.Tensor([4, 8], pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.cast(x, pypto.DT_FP32)

    out = f(np.full((4, 8), 0x10, np.uint8))  # NumPy carries HF8 in uint8 too
    assert out.dtype == np.float32 and (out == 2.0).all()
    with pytest.raises(TypeError, match=r"f\(\): parameter 'x' expects dtype DT_HF8, found DT_INT8"):
        f(np.zeros((4, 8), np.int8))


def test_fp8_is_e4m3_and_bottom_is_no_dtype():
    assert pypto.DT_FP8 == pypto.DT_FP8E4M3
    assert pypto.bytes_of(pypto.DT_HF8) == 1
    with pytest.raises(ValueError, match=r"pypto.Tensor: DT_BOTTOM is PyPTO's placeholder for 'no dtype'"):
        pypto.Tensor([4, 4], pypto.DT_BOTTOM)
