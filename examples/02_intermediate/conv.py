"""Convolutions as PyPTO programs write them: a ResNet-style 3x3 block (conv, bias, ReLU in the
conv's epilogue) on a dynamic batch walked one image at a time, a strided depthwise conv, and a
1-D conv, each checked against torch.nn.functional. The 3x3 block (stride 1, one group) runs as an
implicit GEMM, the matmul loading each tap's input rows; the strided and 1-D convs go through an
im2col copy feeding the matmul path. set_conv_tile_shapes takes PyPTO's tile description (kept for
get_conv_tile_shapes; the CPU chooses its own tiles)."""

import torch
import torch.nn.functional as F

import pypto
from pypto import pypto_impl

B = pypto.frontend.dynamic("B")
C, HW = 32, 20


@pypto.frontend.jit
def conv_block(x: pypto.Tensor((B, C, HW, HW), pypto.DT_FP32), w: pypto.Tensor((C, C, 3, 3), pypto.DT_FP32),
               bias: pypto.Tensor((C,), pypto.DT_FP32), out: pypto.Tensor((B, C, HW, HW), pypto.DT_FP32)):
    pypto.set_conv_tile_shapes(
        pypto_impl.TileL1Info(tileHin=1, tileHout=1, tileWin=16, tileWout=16, tileCinFmap=16, tileCinWeight=16,
                              tileN=32, tileBatch=1),
        pypto_impl.TileL0Info(tileH=1, tileW=16, tileK=144, tileN=32))
    pypto.set_vec_tile_shapes(1, 8, HW, HW)
    for b in pypto.loop(0, x.shape[0], 1, name="image"):
        img = pypto.view(x, [1, C, HW, HW], [b, 0, 0, 0])
        y = pypto.conv(img, w, pypto.DT_FP32, [1, 1], [1, 1, 1, 1], [1, 1],
                       extend_params={"bias_tensor": bias, "relu_type": pypto.ConvReLuType.RELU})
        pypto.assemble(pypto.add(y, img), [b, 0, 0, 0], out)   # the residual connection


@pypto.frontend.jit
def depthwise(x: pypto.Tensor((2, 24, 33, 33), pypto.DT_BF16), w: pypto.Tensor((24, 1, 5, 5), pypto.DT_BF16)):
    return pypto.conv(x, w, pypto.DT_BF16, [2, 2], [2, 2, 2, 2], [1, 1], groups=24)


@pypto.frontend.jit
def conv1d(x: pypto.Tensor((4, 16, 100), pypto.DT_FP32), w: pypto.Tensor((8, 16, 4), pypto.DT_FP32)):
    return pypto.conv(x, w, pypto.DT_FP32, [1], [6, 0], [2])    # causal: all the padding before


def main():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, C, HW, HW, generator=g)
    w = torch.randn(C, C, 3, 3, generator=g) / (9 * C) ** 0.5
    bias = torch.randn(C, generator=g) * 0.1
    out = torch.empty_like(x)
    conv_block(x, w, bias, out)
    ref = torch.relu(F.conv2d(x, w, bias, padding=1)) + x
    err = (out - ref).abs().max().item()
    assert err < 1e-4, err
    print(f"3x3 block, batch {x.shape[0]} (dynamic), bias + relu + residual: max abs error {err:.1e}")

    xd = torch.randn(2, 24, 33, 33, generator=g).bfloat16()
    wd = (torch.randn(24, 1, 5, 5, generator=g) / 5).bfloat16()
    yd = depthwise(xd, wd)
    refd = F.conv2d(xd.double(), wd.double(), stride=2, padding=2, groups=24)
    errd = ((yd.double() - refd).abs() / (refd.abs() + 1)).max().item()
    assert yd.shape == (2, 24, 17, 17) and errd < 2e-2, errd
    print(f"depthwise 5x5 stride 2, bf16: {tuple(yd.shape)}, max rel error {errd:.1e}")

    x1 = torch.randn(4, 16, 100, generator=g)
    w1 = torch.randn(8, 16, 4, generator=g) / 8
    y1 = conv1d(x1, w1)
    ref1 = F.conv1d(F.pad(x1, (6, 0)), w1, dilation=2)
    err1 = (y1 - ref1).abs().max().item()
    assert y1.shape == ref1.shape and err1 < 1e-4, err1
    print(f"1-D conv, dilation 2, causal padding: {tuple(y1.shape)}, max abs error {err1:.1e}")


if __name__ == "__main__":
    main()
