"""pypto.quant_mx against MX quantisation written here in torch from the OCP MX and NVIDIA
definitions (the op families issue, item 7): the shared exponents, the codes of every element
(compared as bytes) and the scale layouts of both axes."""

import math

import numpy as np
import pytest
import torch

import pypto

D = pypto.DYNAMIC
FLOATS = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16}
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
FORMATS = {pypto.DT_FP8E4M3: (8, 448.0), pypto.DT_FP4_E2M1X2: (2, 6.0)}


def _exponents(peak: torch.Tensor, top: int, largest: float, round_up: bool) -> torch.Tensor:
    """The E8M0 code of each block from its largest magnitude (float64)."""
    out = torch.empty(peak.shape, dtype=torch.int64)
    for i, p in enumerate(peak.reshape(-1).tolist()):
        if math.isnan(p):
            e = 255
        elif round_up:
            q = p / largest
            e = 0 if q <= 2.0 ** -127 else 254 if math.isinf(q) else math.ceil(math.log2(q)) + 127
        else:
            e = 255 - top if math.isinf(p) else 0 if p == 0 else math.frexp(p)[1] - 1 - top + 127
        out.view(-1)[i] = min(max(e, 0), 254) if e != 255 else 255
    return out


def _e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """Round to the nearest E2M1 value, ties to the even code, saturating; NaN gives the largest."""
    mag = torch.nan_to_num(v.abs(), nan=6.0).clamp(max=6.0)
    dist = (mag.unsqueeze(-1) - E2M1).abs() + 1e-12 * (torch.arange(8) % 2)
    return dist.argmin(-1) | torch.where(torch.signbit(v) & ~torch.isnan(v), 8, 0)


def reference(x: torch.Tensor, qdtype, round_up: bool, axis: int):
    """(the codes as uint8 (E2M1: one code per element), the scale codes as uint8 in PyPTO's layout)."""
    top, largest = FORMATS[qdtype]
    xf = x.double()
    if axis == -2:
        xf = xf.transpose(-1, -2)
    n = xf.shape[-1]
    blocks = xf.reshape(*xf.shape[:-1], n // 32, 32)
    peak = torch.where(blocks.isnan().any(-1), float("nan"), torch.nan_to_num(blocks.abs(), nan=0.0, posinf=float("inf")).amax(-1))
    e = _exponents(peak, top, largest, round_up)
    scaling = torch.where(e == 255, float("nan"), torch.pow(2.0, (127 - e).double()))
    v = (blocks * scaling.unsqueeze(-1)).reshape(xf.shape)
    if qdtype == pypto.DT_FP8E4M3:
        codes = v.clamp(-448, 448).float().to(torch.float8_e4m3fn).view(torch.uint8)
        codes = torch.where(v.isnan(), 0x7F, codes.long()).to(torch.uint8)
    else:
        codes = _e2m1_codes(v).to(torch.uint8)
    if axis == -2:
        codes = codes.transpose(-1, -2)
        lead = e.shape[:-2]
        scale = e.reshape(*lead, e.shape[-2], e.shape[-1] // 2, 2).transpose(-3, -2)
    else:
        if e.shape[-1] % 2:
            e = torch.cat([e, torch.zeros(*e.shape[:-1], 1, dtype=e.dtype)], -1)
        scale = e.reshape(*e.shape[:-1], e.shape[-1] // 2, 2)
    return codes.contiguous(), scale.to(torch.uint8).contiguous()


def _data(shape, dtype, seed, specials=True):
    """Blocks of 32 with magnitudes from 2^-30 to 2^30, some zero, and NaN, inf, -0.0 and denormals."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    mag = torch.pow(2.0, torch.randint(-30, 30, shape, generator=g).double())
    lo = 14 if dtype == torch.float16 else 60  # keep fp16 blocks finite
    x = x * mag.clamp(2.0 ** -lo, 2.0 ** lo)
    flat = x.view(-1)
    if specials and flat.numel() >= 7 * 32:
        flat[0:32] = 0.0
        flat[32] = float("inf")
        flat[64 + 5] = float("nan")
        flat[96 + 3] = -0.0
        flat[128:160] = flat[128:160] * 1e-40  # (fp32) denormal block
        flat[160] = -float("inf")
        flat[192:224] = 448.0 * 2.0 ** torch.arange(-16, 16).double()  # exact powers of the largest value
    return x.to(dtype)


def _unpacked_e2m1(packed: torch.Tensor) -> torch.Tensor:
    b = packed.view(torch.uint8).long()
    return torch.stack([b & 15, b >> 4], -1).reshape(*b.shape[:-1], 2 * b.shape[-1]).to(torch.uint8)


def _check(got, x, qdtype, mode, axis):
    q, s = got
    want_q, want_s = reference(x, qdtype, mode == pypto.ROUND_UP, axis)
    q = torch.as_tensor(np.asarray(q)) if not isinstance(q, torch.Tensor) else q
    q = _unpacked_e2m1(q) if qdtype == pypto.DT_FP4_E2M1X2 else q.view(torch.uint8)
    assert torch.equal(s.view(torch.uint8), want_s)
    assert torch.equal(q, want_q)


@pytest.mark.parametrize("dtype,qdtype,mode", [  # each input dtype, format and mode, in four compiles
    (torch.float32, pypto.DT_FP8E4M3, pypto.ROUND_DOWN), (torch.bfloat16, pypto.DT_FP8E4M3, pypto.ROUND_UP),
    (torch.bfloat16, pypto.DT_FP4_E2M1X2, pypto.ROUND_DOWN), (torch.float16, pypto.DT_FP4_E2M1X2, pypto.ROUND_UP),
])
def test_last_axis_with_a_dynamic_dim_and_an_odd_block_count(dtype, qdtype, mode):
    # 96 columns: three blocks, so the last pair of scales has an empty slot; 7 rows divide no tile
    x = _data((7, 96), dtype, seed=1)

    @pypto.jit
    def f(x: pypto.Tensor((D, 96), FLOATS[dtype])):
        pypto.set_vec_tile_shapes(4, 64)
        return pypto.quant_mx(x, qdtype, mode, -1, True)

    _check(f(x), x, qdtype, mode, -1)
    x2 = _data((3, 96), dtype, seed=2, specials=False)
    _check(f(x2), x2, qdtype, mode, -1)


@pytest.mark.parametrize("dtype,qdtype,mode", [(torch.float32, pypto.DT_FP8E4M3, pypto.ROUND_DOWN),
                                               (torch.bfloat16, pypto.DT_FP4_E2M1X2, pypto.ROUND_UP)])
def test_second_last_axis(dtype, qdtype, mode):
    x = _data((2, 128, 40), dtype, seed=3)

    @pypto.jit
    def f(x: pypto.Tensor((2, 128, 40), FLOATS[dtype])):
        pypto.set_vec_tile_shapes(1, 64, 16)
        return pypto.quant_mx(x, quant_dtype=qdtype, mode=mode, axis=-2)

    q, s = f(x)
    assert list(s.shape) == [2, 2, 40, 2] and s.dtype == torch.float8_e8m0fnu
    _check((q, s), x, qdtype, mode, -2)


def test_defaults_and_the_method_form_on_a_1d_input():
    x = _data((256,), torch.float32, seed=4)

    @pypto.jit
    def f(x: pypto.Tensor((256,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(128)
        q, s = pypto.quant_mx(x)
        q2, s2 = x.quant_mx(pypto.DT_FP8E4M3, pypto.DequantScaleRoundingMode.ROUND_DOWN, 0, False)
        return q, s, q2, s2

    q, s, q2, s2 = f(x)
    assert list(s.shape) == [4, 2] and q.dtype == torch.float8_e4m3fn
    _check((q, s), x, pypto.DT_FP8E4M3, pypto.ROUND_DOWN, -1)
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s2.view(torch.uint8),
                                                                                   s.view(torch.uint8))


def test_dequantising_recovers_the_input_within_the_format():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(16, 128, generator=g) * torch.pow(2.0, torch.randint(-20, 20, (16, 1), generator=g).float())

    @pypto.jit
    def f(x: pypto.Tensor((16, 128), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 128)
        return pypto.quant_mx(x)

    q, s = f(x)
    scale = torch.pow(2.0, s.view(torch.uint8).double() - 127).reshape(16, 4).repeat_interleave(32, -1)
    back = q.double() * scale
    # E4M3 keeps 3 mantissa bits: within 2^-4 relative of each normal value, 2^-10 of the block's scale below;
    # OCP's exponent can put a block's largest values in [448, 512) * scale, saturated to 448 (12.5% off)
    err = (back - x.double()).abs()
    assert torch.all(err <= x.double().abs() / 8 + scale * 2.0 ** -10)
    assert torch.median(err / x.double().abs()) < 2.0 ** -5


def _trace(body, shape=(4, 64), dtype=pypto.DT_FP32):
    @pypto.jit
    def f(x: pypto.Tensor(shape, dtype)):
        pypto.set_vec_tile_shapes(4, 64)
        return body(x)

    return f(torch.zeros(shape, dtype={pypto.DT_FP32: torch.float32, pypto.DT_FP16: torch.float16,
                                       pypto.DT_INT32: torch.int32}[dtype]))


@pytest.mark.parametrize("body,kwargs,error,match", [
    (lambda x: pypto.quant_mx(x, pypto.DT_FP4_E2M1X2), {}, TypeError, "DT_FP4_E2M1X2 takes a DT_FP16 or DT_BF16 "
                                                                      "input, found DT_FP32"),
    (lambda x: pypto.quant_mx(x, pypto.DT_INT8), {}, TypeError, "quant_dtype must be DT_FP8E4M3 or DT_FP4_E2M1X2, "
                                                                "found 'DT_INT8'"),
    (lambda x: pypto.quant_mx(x, mode=1), {}, TypeError, "mode must be pypto.ROUND_DOWN or pypto.ROUND_UP, found 1"),
    (lambda x: pypto.quant_mx(x, axis=0), {"shape": (2, 4, 64)}, pypto.UserError, "axis must be -1, -2, 2 or 1"),
    (lambda x: pypto.quant_mx(x, performance_mode=1), {}, TypeError, "performance_mode must be a bool"),
    (lambda x: pypto.quant_mx(x), {"dtype": pypto.DT_INT32}, TypeError, "input must be DT_FP32, DT_FP16 or DT_BF16, "
                                                                        "found DT_INT32"),
    (lambda x: pypto.quant_mx(x), {"shape": (4, 48)}, pypto.NotSupportedError, "last dim of 48"),
    (lambda x: pypto.quant_mx(x, axis=-2), {"shape": (32, 64)}, pypto.UserError, "axis=-2 needs dim 0 to be a "
                                                                                 "multiple of 64, found 32"),
])
def test_bad_arguments_name_the_op_and_the_value(body, kwargs, error, match):
    with pytest.raises(error, match=match) as e:
        _trace(body, **kwargs)
    assert "quant_mx" in str(e.value)
