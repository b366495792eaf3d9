"""matmul(extend_params=...) (PyPTO's epilogue: bias, dequantisation scale, ReLU) against torch."""

import numpy as np
import pytest
import torch

import pypto

M = pypto.frontend.dynamic("M")


def _kernel(dt, out_dt, params_of):
    @pypto.frontend.jit
    def f(a: pypto.Tensor((M, 40), dt), b: pypto.Tensor((40, 24), dt), bias: pypto.Tensor((1, 24), pypto.DT_FP32),
          scale: pypto.Tensor((1, 24), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [16, 32], [16, 16])
        pypto.set_vec_tile_shapes(16, 16)
        return pypto.matmul(a, b, out_dt, extend_params=params_of(bias, scale))
    return f


@pytest.mark.parametrize("rows", [16, 21])  # divides the m tile, or does not
@pytest.mark.parametrize("dt, tdt, out_dt, tout", [
    (pypto.DT_FP32, torch.float32, pypto.DT_FP32, torch.float32),
    (pypto.DT_FP16, torch.float16, pypto.DT_FP16, torch.float16),
    (pypto.DT_BF16, torch.bfloat16, pypto.DT_FP32, torch.float32),
])
@pytest.mark.parametrize("case", ["bias", "bias_relu", "scale_relu", "scale_tensor"])
def test_epilogues_as_torch(rows, dt, tdt, out_dt, tout, case):
    R = pypto.ReLuType.RELU
    params_of = {
        "bias": lambda bias, scale: {"bias_tensor": bias},
        "bias_relu": lambda bias, scale: {"bias_tensor": bias, "relu_type": R},
        "scale_relu": lambda bias, scale: {"scale": 0.25, "relu_type": R, "trans_mode": pypto.TransMode.CAST_NONE},
        "scale_tensor": lambda bias, scale: {"bias_tensor": bias, "scale_tensor": scale},
    }[case]
    g = torch.Generator().manual_seed(rows)
    a, b = torch.randn(rows, 40, generator=g).to(tdt), torch.randn(40, 24, generator=g).to(tdt)
    bias, scale = torch.randn(1, 24, generator=g), torch.rand(1, 24, generator=g) + 0.5
    acc = a.double() @ b.double()
    ref = {"bias": acc + bias, "bias_relu": torch.relu(acc + bias), "scale_relu": torch.relu(acc * 0.25),
           "scale_tensor": (acc + bias) * scale}[case]
    got = _kernel(dt, out_dt, params_of)(a, b, bias, scale)
    assert got.dtype == tout
    tol = 1e-4 if tout == torch.float32 else 1e-2
    torch.testing.assert_close(got.double(), ref.to(tout).double(), rtol=tol, atol=tol)


def test_int8_dequantised_to_fp16_and_quantised_to_int8():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((M, 32), pypto.DT_INT8), b: pypto.Tensor((32, 16), pypto.DT_INT8)):
        pypto.set_cube_tile_shapes([16, 16], [16, 32], [16, 16])  # no vec tile: the epilogue takes the cube's
        deq = pypto.matmul(a, b, pypto.DT_FP16, extend_params={"scale": 0.01})
        q = pypto.matmul(a, b, pypto.DT_INT8, extend_params={"scale": 0.05, "relu_type": pypto.ReLuType.RELU})
        return deq, q

    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (19, 32), dtype=np.int8)
    b = rng.integers(-128, 128, (32, 16), dtype=np.int8)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    deq, q = f(a, b)
    # The scales take part with 10 mantissa bits, as PyPTO's fixpipe reads them.
    np.testing.assert_allclose(deq.astype(np.float64), acc * _cut19(0.01), rtol=1e-3, atol=1e-2)
    ref_q = np.clip(np.round(np.maximum(acc * _cut19(0.05), 0)), -128, 127).astype(np.int8)  # saturates
    assert q.dtype == np.int8 and (np.abs(q.astype(int) - ref_q.astype(int)) <= 1).all()
    assert (q == 127).any()


@pytest.mark.parametrize("params, kind, words", [
    ({"bias": 1}, ValueError, r"unknown extend_params key 'bias'; expected one of \['bias_tensor'"),
    ({"relu_type": True}, TypeError, r"extend_params\['relu_type'\] must be a pypto.ReLuType, found True"),
    ({"trans_mode": 1}, TypeError, r"extend_params\['trans_mode'\] must be a pypto.TransMode, found 1"),
    ("scale_i32", TypeError, r"extend_params\['scale_tensor'\] must be DT_UINT64 or DT_INT64 \(an fp32 scale in "
                             r"the low 32 bits\) or a float tensor, found DT_INT32"),
    ({"scale": "x"}, TypeError, r"extend_params\['scale'\] must be a float, found str"),
    ("bias4", ValueError, r"extend_params\['bias_tensor'\] has shape \[1, 4\], expected \[..., 1, 8\]"),
])
def test_bad_extend_params_name_the_key(params, kind, words):
    @pypto.frontend.jit
    def f(a: pypto.Tensor((8, 8), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [8, 8], [8, 8])
        if params == "scale_i32":
            pypto.set_vec_tile_shapes(8, 8)
        p = {"bias_tensor": a[0:1, 0:4]} if params == "bias4" else \
            {"scale_tensor": pypto.cast(a[0:1, :], pypto.DT_INT32)} if params == "scale_i32" else params
        return pypto.matmul(a, a, pypto.DT_FP32, extend_params=p)

    with pytest.raises(kind, match=r"pypto.matmul: " + words):
        f(torch.randn(8, 8))


def _cut19(v: float) -> np.float64:
    """v as fp32 with its 13 low mantissa bits cleared (sign, exponent and 10 mantissa bits kept)."""
    bits = np.array([v], np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return np.float64(bits.view(np.float32)[0])


def _tf32_ref(x: np.ndarray, ties_even: bool) -> np.ndarray:
    """fp32 rounded to 10 mantissa bits, by integer arithmetic on the bits (NaN kept)."""
    u = x.view(np.uint32).astype(np.uint64)
    low, kept = u & 0x1FFF, u & ~np.uint64(0x1FFF)
    if ties_even:
        up = (low > 0x1000) | ((low == 0x1000) & ((kept >> np.uint64(13)) & np.uint64(1) == 1))
    else:
        up = low >= 0x1000
    r = ((kept + up.astype(np.uint64) * 0x2000) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, r)


@pytest.mark.parametrize("rows", [8, 13])
@pytest.mark.parametrize("mode", [pypto.TransMode.CAST_RINT, pypto.TransMode.CAST_ROUND])
def test_trans_mode_rounds_the_inputs_to_tf32(rows, mode):
    @pypto.frontend.jit
    def f(a: pypto.Tensor((M, 24), pypto.DT_FP32), b: pypto.Tensor((24, 24), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [8, 16], [8, 16])
        return pypto.matmul(a, b, pypto.DT_FP32, extend_params={"trans_mode": mode})

    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, 24)).astype(np.float32)
    tie_even, tie_odd = np.uint32(0x3F801000), np.uint32(0x3F803000)  # exactly halfway, kept bit 0 or 1
    a[0, :4] = np.array([tie_even, tie_odd, tie_even | 0x80000000, 0x3F801001], np.uint32).view(np.float32)
    a[1, :3] = [1e-40, -0.0, 3.3e4]  # a subnormal, negative zero, a large value
    even = mode == pypto.TransMode.CAST_RINT
    got = f(a, np.eye(24, dtype=np.float32))  # times the identity: the rounded inputs themselves
    np.testing.assert_array_equal(got, _tf32_ref(a, even))
    assert got[0, 0] == np.float32(1.0) if even else got[0, 0] > 1.0
    b = rng.standard_normal((24, 24)).astype(np.float32)
    ref = _tf32_ref(a[2:], even).astype(np.float64) @ _tf32_ref(b, even).astype(np.float64)
    np.testing.assert_allclose(f(a[2:], b), ref, rtol=1e-5, atol=1e-5)


def test_trans_mode_needs_fp32():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((8, 8), pypto.DT_FP16)):
        pypto.set_cube_tile_shapes([8, 8], [8, 8], [8, 8])
        return pypto.matmul(a, a, pypto.DT_FP32, extend_params={"trans_mode": pypto.TransMode.CAST_RINT})

    with pytest.raises(TypeError, match=r"pypto.matmul: extend_params\['trans_mode'\]=TransMode.CAST_RINT \(TF32 "
                                        r"inputs\) needs DT_FP32 operands and result, found DT_FP16, DT_FP16 -> DT_FP32"):
        f(torch.randn(8, 8).half())


@pytest.mark.parametrize("rows", [16, 21])
@pytest.mark.parametrize("carrier", [pypto.DT_UINT64, pypto.DT_INT64])
def test_64_bit_quant_parameters_as_scale_tensor(rows, carrier):
    @pypto.frontend.jit
    def f(a: pypto.Tensor((M, 64), pypto.DT_INT8), b: pypto.Tensor((64, 40), pypto.DT_INT8),
          s: pypto.Tensor((1, 40), carrier)):
        pypto.set_cube_tile_shapes([16, 16], [32, 64], [16, 32])
        return pypto.matmul(a, b, pypto.DT_FP16, extend_params={"scale_tensor": s, "relu_type": pypto.ReLuType.RELU})

    rng = np.random.default_rng(rows)
    a = rng.integers(-20, 20, (rows, 64), dtype=np.int8)
    b = rng.integers(-20, 20, (64, 40), dtype=np.int8)
    scale = (rng.random((1, 40)) * 0.01).astype(np.float32)
    # The fp32 bits in the low word; the high word holds other fields and is not part of the scale.
    params = scale.view(np.uint32).astype(np.uint64) | np.uint64(1 << 46)
    params = params if carrier == pypto.DT_UINT64 else params.view(np.int64)
    cut = (scale.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    ref = np.maximum((a.astype(np.int64) @ b.astype(np.int64)) * cut, 0).astype(np.float16)
    got = f(a, b, params)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, ref)


def test_nz_output_is_refused():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((8, 8), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [8, 8], [8, 8])
        return pypto.matmul(a, a, pypto.DT_FP32, c_matrix_nz=True)

    with pytest.raises(NotImplementedError, match=r"c_matrix_nz=True \(an NZ-format result\) is not supported"):
        f(torch.randn(8, 8))


def test_a_batched_epilogue_without_a_vec_tile():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((3, M, 24), pypto.DT_FP32), b: pypto.Tensor((3, 24, 20), pypto.DT_FP32),
          bias: pypto.Tensor((20,), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [8, 8], [8, 16])
        return pypto.matmul(a, b, pypto.DT_FP32, extend_params={"bias_tensor": bias, "relu_type": pypto.ReLuType.RELU})

    a, b, bias = torch.randn(3, 13, 24), torch.randn(3, 24, 20), torch.randn(20)
    torch.testing.assert_close(f(a, b, bias), torch.relu(a @ b + bias), rtol=1e-4, atol=1e-4)
