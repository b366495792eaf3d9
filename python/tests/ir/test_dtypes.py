"""Element types: the unsigned integers and the FP8 storage formats, and pypto.bytes_of.

The FP8 conversions are checked bit for bit against torch's float8 types (every code decoded,
values of every magnitude encoded, ties and overflow included); the unsigned types against
NumPy's wrapping arithmetic."""

import numpy as np
import pytest
import torch

import pypto

R = pypto.frontend.dynamic("R")
F8 = [(pypto.DT_FP8E4M3, torch.float8_e4m3fn), (pypto.DT_FP8E5M2, torch.float8_e5m2),
      (pypto.DT_FP8E8M0, torch.float8_e8m0fnu)]


def _cast_kernel(src_dt, dst_dt):
    @pypto.frontend.jit
    def k(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], src_dt), y: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], dst_dt)):
        pypto.set_vec_tile_shapes(8, 16)
        y[:] = pypto.cast(x, dst_dt)
    return k


def _same_bits(a: torch.Tensor, b: torch.Tensor):
    """Equal codes, where both are NaN any NaN code."""
    ua, ub = a.view(torch.uint8), b.view(torch.uint8)
    nan = torch.isnan(a.float()) & torch.isnan(b.float())
    bad = (ua != ub) & ~nan
    assert not bad.any(), f"{int(bad.sum())} codes differ, e.g. {ua[bad][:4].tolist()} vs {ub[bad][:4].tolist()}"


@pytest.mark.parametrize("dt, tdt", F8)
def test_every_fp8_code_decodes_as_torch(dt, tdt):
    codes = torch.arange(256, dtype=torch.uint8).reshape(16, 16).view(tdt)
    out = torch.zeros(16, 16)
    _cast_kernel(dt, pypto.DT_FP32)(codes, out)
    torch.testing.assert_close(out, codes.float(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dt, tdt", F8)
@pytest.mark.parametrize("cols", [16, 21])  # divides the tile, or does not
def test_fp8_encoding_rounds_as_torch(dt, tdt, cols):
    g = torch.Generator().manual_seed(7)
    codes = torch.arange(256, dtype=torch.uint8).view(tdt).float()
    finite = codes[torch.isfinite(codes)].sort().values
    values = torch.cat([
        torch.randn(2000, generator=g) * 10.0 ** torch.randint(-12, 12, (2000,), generator=g).float(),
        finite, (finite[1:] + finite[:-1]) / 2,  # every value and every tie between neighbours
        torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e38, -1e38, 1e-45]),
    ])
    n = (values.numel() + cols - 1) // cols * cols
    x = torch.cat([values, torch.zeros(n - values.numel())]).reshape(-1, cols)
    y = torch.zeros(x.shape, dtype=torch.uint8).view(tdt)
    _cast_kernel(pypto.DT_FP32, dt)(x, y)
    _same_bits(y, x.to(tdt))


@pytest.mark.parametrize("dt, tdt", F8[:2])
def test_fp8_arithmetic_rounds_each_result_to_its_dtype(dt, tdt):
    @pypto.frontend.jit
    def f(a: pypto.Tensor([R, 24], dt), b: pypto.Tensor([R, 24], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.cast(pypto.abs(a) * 3.0 - 1.0 + pypto.cast(b, pypto.DT_FP32), dt)

    for rows in (8, 13):
        a = (torch.randn(rows, 24) * 2).to(tdt)
        b = torch.randn(rows, 24).to(torch.bfloat16)
        # each op's result has the op's dtype: |a| * 3 and the difference are FP8 values, the sum FP32
        m = (a.float().abs() * 3.0).to(tdt)
        d = (m.float() - 1.0).to(tdt)
        ref = (d.float() + b.float()).to(tdt)
        got = f(a, b)
        assert got.dtype == tdt
        _same_bits(got, ref)



@pytest.mark.parametrize("dt, npdt", [(pypto.DT_UINT16, np.uint16), (pypto.DT_UINT32, np.uint32),
                                      (pypto.DT_UINT64, np.uint64)])
@pytest.mark.parametrize("rows", [8, 11])
def test_unsigned_arithmetic_wraps_as_numpy(dt, npdt, rows):
    @pypto.frontend.jit
    def f(a: pypto.Tensor([R, 16], dt), b: pypto.Tensor([R, 16], dt)):
        pypto.set_vec_tile_shapes(4, 16)
        return a * b + a - b, pypto.maximum(a, b), pypto.sum(a, -1, True)

    rng = np.random.default_rng(3)
    hi = min(np.iinfo(npdt).max, 2**62)  # UINT64 compares as INT64 (see DataType in ir/dtype.h)
    a = rng.integers(0, hi, (rows, 16), dtype=np.uint64).astype(npdt)
    b = rng.integers(0, hi, (rows, 16), dtype=np.uint64).astype(npdt)
    p, m, s = f(a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(p, a * b + a - b)
        # sum widens integers to 64 bits (as torch); modulo 2^64 it is the exact sum
        np.testing.assert_array_equal(s.astype(np.uint64), a.sum(-1, keepdims=True, dtype=np.uint64))
    np.testing.assert_array_equal(m, np.maximum(a, b))
    assert p.dtype == npdt


@pytest.mark.parametrize("dt, tdt", [(pypto.DT_UINT16, torch.uint16), (pypto.DT_UINT32, torch.uint32)])
def test_unsigned_casts_to_and_from_float(dt, tdt):
    x = torch.tensor([[0.0, 1.0, 2.5, 65535.0, 300.75, 7.0, 12.0, 40000.0] * 2] * 3)
    u = torch.zeros(x.shape, dtype=tdt)
    _cast_kernel(pypto.DT_FP32, dt)(x, u)
    assert torch.equal(u.to(torch.int64), x.to(torch.int64))
    back = torch.zeros(x.shape)
    _cast_kernel(dt, pypto.DT_FP32)(u, back)
    torch.testing.assert_close(back, x.trunc())


def test_wide_unsigned_types_mix_with_no_signed_type():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((4, 4), pypto.DT_UINT32), b: pypto.Tensor((4, 4), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return a + b

    with pytest.raises(TypeError, match=r"pypto.add at .*test_dtypes.py:\d+: DT_UINT32 and DT_INT32 have no common type; cast one operand first"):
        f(np.zeros((4, 4), np.uint32), np.zeros((4, 4), np.int32))


def test_bytes_of_every_dtype():
    names = [n for n in dir(pypto) if n.startswith("DT_")]
    assert {"DT_UINT16", "DT_UINT32", "DT_UINT64", "DT_FP8E4M3", "DT_FP8E5M2", "DT_FP8E8M0"} <= set(names)
    for n in names:
        dt = getattr(pypto, n)
        if dt == pypto.DT_BOTTOM:
            with pytest.raises(ValueError, match=r"pypto.bytes_of: DT_BOTTOM is PyPTO's placeholder for 'no dtype'"):
                pypto.bytes_of(dt)
            continue
        if dt == pypto.DT_HF4:
            with pytest.raises(pypto.NotSupportedError, match=r"pypto.bytes_of: DT_HF4 \(HiFloat4\) has no element"):
                pypto.bytes_of(dt)
            continue
        if pypto._dtypes.is_packed(dt):  # 4-bit: one byte per element inside a program, as PyPTO's bytes_of
            assert pypto.bytes_of(dt) == 1, n
            continue
        assert pypto.bytes_of(dt) == torch.empty(0, dtype=pypto._dtypes.to_torch(dt)).element_size(), n
    with pytest.raises(TypeError, match=r"pypto.bytes_of: dtype must be a pypto.DataType, found str"):
        pypto.bytes_of("DT_FP32")
