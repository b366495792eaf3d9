"""A linear layer with low-precision weights, written as PyPTO programs write it: the weights are
stored as FP8 (E4M3, torch.float8_e4m3fn) with one scale per output column, the kernel widens them
to bf16, and matmul's extend_params epilogue applies the bias, the per-column dequantisation scale
and ReLU to the fp32 accumulator before the result is rounded to bf16. A second form runs the
same layer in int8 (int32 accumulation, a float scale, saturation to int8), and a third with int4
weights packed two per byte (the low nibble first), as PyPTO passes DT_INT4 data."""

import torch

import pypto

TOKENS, IN, OUT = 48, 256, 96
M = pypto.frontend.dynamic("M")


@pypto.frontend.jit
def fp8_linear(x: pypto.Tensor((M, IN), pypto.DT_BF16), w: pypto.Tensor((IN, OUT), pypto.DT_FP8E4M3),
               bias: pypto.Tensor((1, OUT), pypto.DT_FP32), scale: pypto.Tensor((1, OUT), pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([16, 16], [32, 128], [32, 32])
    pypto.set_vec_tile_shapes(32, 32)
    wb = pypto.cast(w, pypto.DT_BF16)                     # FP8 storage, widened exactly
    return pypto.matmul(x, wb, pypto.DT_BF16, extend_params={
        "bias_tensor": bias, "scale_tensor": scale, "relu_type": pypto.ReLuType.RELU})


@pypto.frontend.jit
def int8_linear(x: pypto.Tensor((M, IN), pypto.DT_INT8), w: pypto.Tensor((IN, OUT), pypto.DT_INT8)):
    pypto.set_cube_tile_shapes([16, 16], [32, 128], [32, 32])
    return pypto.matmul(x, w, pypto.DT_INT8, extend_params={"scale": 1 / 512})


@pypto.frontend.jit
def int4_linear(x: pypto.Tensor((M, IN), pypto.DT_FP32), w: pypto.Tensor((IN, OUT), pypto.DT_INT4),
                scale: pypto.Tensor((1, OUT), pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([16, 16], [32, 128], [32, 32])
    pypto.set_vec_tile_shapes(32, 32)
    wf = pypto.mul(pypto.cast(w, pypto.DT_FP32), scale)   # w arrives as uint8 [IN, OUT / 2]
    return pypto.matmul(x, wf, pypto.DT_FP32)


def main():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(IN, OUT, generator=g) * 0.05
    scale = w.abs().amax(0, keepdim=True) / 448.0              # per column: E4M3's largest value is 448
    w8 = (w / scale).to(torch.float8_e4m3fn)
    x = torch.randn(TOKENS, IN, generator=g).to(torch.bfloat16)
    bias = torch.randn(1, OUT, generator=g) * 0.1
    y = fp8_linear(x, w8, bias, scale)
    ref = torch.relu((x.double() @ w8.double() + bias.double()) * scale.double())
    err = ((y.double() - ref).abs() / (ref.abs() + 1e-2)).max().item()
    assert y.dtype == torch.bfloat16 and err < 1.6e-2, err
    print(f"fp8 weights, bias + per-column scale + relu epilogue: {tuple(y.shape)} bf16, max rel error {err:.1e}")

    xi = torch.randint(-128, 128, (TOKENS + 5, IN), generator=g, dtype=torch.int8)
    wi = torch.randint(-128, 128, (IN, OUT), generator=g, dtype=torch.int8)
    q = int8_linear(xi, wi)
    acc = xi.long() @ wi.long()
    want = torch.clamp(torch.round(acc.double() / 512), -128, 127).to(torch.int8)
    off = (q.long() - want.long()).abs().max().item()
    assert off <= 1, off                                        # halfway cases may round either way
    print(f"int8 x int8 -> int32 accumulator -> int8: {tuple(q.shape)}, max difference from torch {off}")

    w4 = torch.randint(-8, 8, (IN, OUT), generator=g)              # int4 values
    nib = w4 & 15
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).to(torch.uint8)  # [IN, OUT / 2]
    s4 = torch.rand(1, OUT, generator=g) * 0.01
    xf = torch.randn(TOKENS, IN, generator=g)
    y4 = int4_linear(xf, packed, s4)
    ref4 = xf.double() @ (w4.double() * s4.double())
    err4 = ((y4.double() - ref4).abs().max() / ref4.abs().max()).item()
    assert err4 < 1e-5, err4
    print(f"int4 weights packed two per byte {tuple(packed.shape)}: {tuple(y4.shape)} fp32, max error {err4:.1e}")


if __name__ == "__main__":
    main()
