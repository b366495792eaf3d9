"""pypto.scaled_mm against torch: the MX form (FP8/FP4 matrices with E8M0 scales per block of 32
along K, every transposition flag) and the int8 form (an exact int32 product, then row and column
scales) (the op families issue, item 7)."""

import pytest
import torch

import pypto

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
FP8 = {torch.float8_e4m3fn: pypto.DT_FP8E4M3, torch.float8_e5m2: pypto.DT_FP8E5M2}
OUT = {pypto.DT_FP32: torch.float32, pypto.DT_BF16: torch.bfloat16, pypto.DT_FP16: torch.float16}


def _scales(rows, k, seed):
    """E8M0 codes (as uint8) for [rows, ceil(k / 64), 2] block pairs, and their values [rows, k / 32]."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(120, 134, (rows, (k + 63) // 64, 2), generator=g, dtype=torch.uint8)
    values = torch.pow(2.0, codes.double() - 127).reshape(rows, -1)[:, :k // 32]
    return codes, values


def _fp8(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 8).to(dtype)


def _blockwise(x, s):
    """x [rows, k] times its block scales s [rows, k / 32] (float64)."""
    return x.double() * s.repeat_interleave(32, -1)


@pytest.mark.parametrize("adt,bdt,out,flags,k", [
    (torch.float8_e4m3fn, torch.float8_e4m3fn, pypto.DT_FP32, (False, False, False, False), 128),
    (torch.float8_e5m2, torch.float8_e4m3fn, pypto.DT_BF16, (True, False, True, False), 96),
    (torch.float8_e4m3fn, torch.float8_e5m2, pypto.DT_FP16, (False, True, False, True), 160),
    (torch.float8_e5m2, torch.float8_e5m2, pypto.DT_FP32, (True, True, True, True), 64),
])
def test_mx_fp8_with_every_transposition(adt, bdt, out, flags, k):
    a_trans, b_trans, sa_trans, sb_trans = flags
    m, n = 37, 45  # divide no tile
    a, b = _fp8((m, k), adt, 1), _fp8((k, n), bdt, 2)
    ca, va = _scales(m, k, 3)
    cb, vb = _scales(n, k, 4)  # per column of b: stored [ceil(k/64), n, 2]
    ref = _blockwise(a, va) @ _blockwise(b.t(), vb).t()
    a_in = a.t().contiguous() if a_trans else a
    b_in = b.t().contiguous() if b_trans else b
    sa_in = ca.transpose(0, 1).contiguous() if sa_trans else ca
    sb_in = cb if sb_trans else cb.transpose(0, 1).contiguous()
    e8 = pypto.DT_FP8E8M0

    @pypto.jit
    def f(x: pypto.Tensor(tuple(a_in.shape), FP8[adt]), y: pypto.Tensor(tuple(b_in.shape), FP8[bdt]),
          sx: pypto.Tensor(tuple(sa_in.shape), e8), sy: pypto.Tensor(tuple(sb_in.shape), e8)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        return pypto.scaled_mm(x, y, out, sx, sy, a_trans=a_trans, b_trans=b_trans, scale_a_trans=sa_trans,
                               scale_b_trans=sb_trans)

    got = f(a_in, b_in, sa_in.view(torch.float8_e8m0fnu), sb_in.view(torch.float8_e8m0fnu))
    assert got.dtype == OUT[out] and list(got.shape) == [m, n]
    tol = {pypto.DT_FP32: 1e-5, pypto.DT_BF16: 1e-2, pypto.DT_FP16: 2e-3}[out]
    torch.testing.assert_close(got.double(), ref.to(OUT[out]).double(), rtol=tol, atol=tol * ref.abs().max())


def test_mx_fp4_with_bias_and_relu():
    m, k, n = 20, 64, 24
    g = torch.Generator().manual_seed(5)
    qa, qb = torch.randint(0, 16, (m, k), generator=g), torch.randint(0, 16, (k, n), generator=g)
    pack = lambda q: (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)  # noqa: E731 - two codes a byte
    ca, va = _scales(m, k, 6)
    cb, vb = _scales(n, k, 7)
    bias = torch.randn(1, n, generator=g)
    ref = torch.relu(_blockwise(E2M1[qa], va) @ _blockwise(E2M1[qb].t(), vb).t() + bias.double())

    @pypto.jit
    def f(x: pypto.Tensor((m, k), pypto.DT_FP4_E2M1), y: pypto.Tensor((k, n), pypto.DT_FP4_E2M1),
          sx: pypto.Tensor((m, 1, 2), pypto.DT_FP8E8M0), sy: pypto.Tensor((1, n, 2), pypto.DT_FP8E8M0),
          bias: pypto.Tensor((1, n), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        return pypto.scaled_mm(x, y, pypto.DT_FP32, sx, sy,
                               extend_params={"bias_tensor": bias, "relu_type": pypto.ReLuType.RELU})

    got = f(pack(qa), pack(qb), ca.view(torch.float8_e8m0fnu), cb.transpose(0, 1).contiguous().view(
        torch.float8_e8m0fnu), bias)
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scale_form,k", [("tensors", 200), ("numbers", 1280)])
def test_int8_is_an_exact_int32_product_then_the_scales(scale_form, k):
    # K 200 runs as an exact fp32 product; K 1280 (sums past 2^24) as an integer one
    m, n = 33, 40
    g = torch.Generator().manual_seed(8)
    a = torch.full((m, k), -128, dtype=torch.int8)
    a[1:] = torch.randint(-128, 128, (m - 1, k), generator=g, dtype=torch.int8)
    b = torch.full((k, n), -128, dtype=torch.int8)
    b[:, 1:] = torch.randint(-128, 128, (k, n - 1), generator=g, dtype=torch.int8)
    sa, sb = torch.rand(m, 1, generator=g) / 100, torch.rand(1, n, generator=g) / 100
    exact = a.long() @ b.long()  # element (0, 0) is k * 2^14: past 2^24 for K 1280

    @pypto.jit
    def f(x: pypto.Tensor((m, k), pypto.DT_INT8), y: pypto.Tensor((k, n), pypto.DT_INT8),
          s: pypto.Tensor((m, 1), pypto.DT_FP32), t: pypto.Tensor((1, n), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [64, 64], [16, 16])
        if scale_form == "numbers":  # no vec tile: tiled as matmul's epilogue
            return pypto.scaled_mm(x, y, pypto.DT_FP32, 0.5, 0.25), pypto.matmul(x, y, pypto.DT_INT32)
        pypto.set_vec_tile_shapes(16, 16)
        return pypto.scaled_mm(x, y, pypto.DT_BF16, s, t), pypto.matmul(x, y, pypto.DT_INT32)

    got, product = f(a, b, sa, sb)
    assert torch.equal(product, exact.int())
    if scale_form == "numbers":
        assert torch.equal(got, exact.float() * 0.125)  # exact: the float of each int32, times a power of two
    else:
        want = (exact.float() * sa * sb).to(torch.bfloat16)
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def _trace(body, a=(64, 64), adt=pypto.DT_FP8E4M3, sa=(64, 1, 2), sdt=pypto.DT_FP8E8M0):
    @pypto.jit
    def f(x: pypto.Tensor(a, adt), y: pypto.Tensor((64, 32), pypto.DT_FP8E4M3), sx: pypto.Tensor(sa, sdt),
          sy: pypto.Tensor((1, 32, 2), pypto.DT_FP8E8M0)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        return body(x, y, sx, sy)

    t = {pypto.DT_FP8E4M3: torch.float8_e4m3fn, pypto.DT_INT8: torch.int8, pypto.DT_FP8E8M0: torch.float8_e8m0fnu,
         pypto.DT_FP32: torch.float32}
    return f(torch.zeros(a, dtype=t[adt]), torch.zeros(64, 32, dtype=torch.float8_e4m3fn), torch.zeros(sa).to(t[sdt]),
             torch.zeros(1, 32, 2).to(torch.float8_e8m0fnu))


@pytest.mark.parametrize("body,kwargs,error,match", [
    (lambda x, y, sx, sy: pypto.scaled_mm(x, y, pypto.DT_INT32, sx, sy), {}, TypeError,
     "out_dtype must be DT_FP32, DT_FP16, DT_BF16 or DT_INT8, found 'DT_INT32'"),
    (lambda x, y, sx, sy: pypto.scaled_mm(x, y, pypto.DT_FP32, sx, sy), {"adt": pypto.DT_INT8}, TypeError,
     "must both be DT_INT8, or each DT_FP8E4M3"),
    (lambda x, y, sx, sy: pypto.scaled_mm(x, y, pypto.DT_FP32, sx, sy), {"sa": (64, 2, 2)}, pypto.UserError,
     r"scale_a has shape \[64, 2, 2\], expected \[64, 1, 2\]"),
    (lambda x, y, sx, sy: pypto.scaled_mm(x, y, pypto.DT_FP32, sx, sy), {"sdt": pypto.DT_FP32}, TypeError,
     "scale_a must be DT_FP8E8M0 for DT_FP8E4M3 matrices, found DT_FP32"),
    (lambda x, y, sx, sy: pypto.scaled_mm(x, y, pypto.DT_FP32, sx, sy, a_trans=1), {}, TypeError,
     "a_trans must be a bool"),
    (lambda x, y, sx, sy: pypto.scaled_mm(x, y, pypto.DT_FP32, sx, sy, c_matrix_nz=True), {},
     pypto.NotSupportedError, "c_matrix_nz=True"),
])
def test_bad_arguments_name_the_op_and_the_value(body, kwargs, error, match):
    with pytest.raises(error, match=match) as e:
        _trace(body, **kwargs)
    assert "scaled_mm" in str(e.value)
