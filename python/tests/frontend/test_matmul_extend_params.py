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
    np.testing.assert_allclose(deq.astype(np.float64), acc * 0.01, rtol=1e-3, atol=1e-2)
    ref_q = np.clip(np.round(np.maximum(acc * np.float32(0.05), 0)), -128, 127).astype(np.int8)  # saturates
    assert q.dtype == np.int8 and (np.abs(q.astype(int) - ref_q.astype(int)) <= 1).all()
    assert (q == 127).any()


@pytest.mark.parametrize("params, kind, words", [
    ({"bias": 1}, ValueError, r"unknown extend_params key 'bias'; expected one of \['bias_tensor'"),
    ({"relu_type": True}, TypeError, r"extend_params\['relu_type'\] must be a pypto.ReLuType, found True"),
    ({"trans_mode": pypto.TransMode.CAST_RINT}, NotImplementedError,
     r"extend_params\['trans_mode'\]=TransMode.CAST_RINT \(TF32 rounding of the inputs\) is not supported yet"),
    ({"scale": "x"}, TypeError, r"extend_params\['scale'\] must be a float, found str"),
    ("bias4", ValueError, r"extend_params\['bias_tensor'\] has shape \[1, 4\], expected \[..., 1, 8\]"),
])
def test_bad_extend_params_name_the_key(params, kind, words):
    @pypto.frontend.jit
    def f(a: pypto.Tensor((8, 8), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [8, 8], [8, 8])
        p = {"bias_tensor": a[0:1, 0:4]} if params == "bias4" else params
        return pypto.matmul(a, a, pypto.DT_FP32, extend_params=p)

    with pytest.raises(kind, match=r"pypto.matmul: " + words):
        f(torch.randn(8, 8))


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
