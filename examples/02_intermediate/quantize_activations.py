"""Quantisation inside a kernel: activations quantised per token to int8 (the scale computed from
each row's largest magnitude), an int8 x int8 matmul accumulated in int32, and the product
dequantised with the token scales and the weights' per-column scales; then weights quantised to
int4 in groups of 32 along the input dim and restored. Checked against torch."""

import torch

import pypto

TOKENS, IN, OUT, GROUP = 40, 256, 64, 32


@pypto.frontend.jit
def w8a8_linear(x: pypto.Tensor((pypto.DYNAMIC, IN), pypto.DT_FP32), w: pypto.Tensor((IN, OUT), pypto.DT_INT8),
                w_scale: pypto.Tensor((1, OUT), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, IN)
    amax = pypto.amax(pypto.abs(x), -1)                               # [tokens]
    scale = pypto.div(127.0, pypto.maximum(amax, 1e-8))               # PyPTO's scale multiplies
    xq = pypto.quantize(x, scale, pypto.DT_INT8, -1)                  # per token
    pypto.set_cube_tile_shapes([16, 16], [64, 256], [64, 64])
    acc = pypto.matmul(xq, w, pypto.DT_INT32)                         # int32 accumulation
    pypto.set_vec_tile_shapes(8, OUT)
    y = pypto.dequantize(acc, pypto.div(1.0, scale), pypto.DT_FP32, -1)  # the token scales
    return pypto.mul(y, w_scale)                                      # the weight scales


@pypto.frontend.jit
def int4_groups(w: pypto.Tensor((IN, OUT), pypto.DT_FP32), s: pypto.Tensor((IN // GROUP, OUT), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, OUT)
    q = pypto.quantize(w, s, pypto.DT_INT4, -2)                       # one scale per group of 32 rows
    return pypto.dequantize(q, pypto.div(1.0, s), pypto.DT_FP32, -2)


def main():
    torch.manual_seed(0)
    x, wf = torch.randn(TOKENS, IN), torch.randn(IN, OUT) * 0.05
    w_scale = wf.abs().amax(0, keepdim=True) / 127
    w = torch.round(wf / w_scale).clamp(-128, 127).to(torch.int8)
    y = w8a8_linear(x, w, w_scale)
    s = 127 / x.abs().amax(-1).clamp_min(1e-8)
    xq = torch.round(x * s[:, None]).clamp(-128, 127)
    want = (xq.double() @ w.double()).float() / s[:, None] * w_scale
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    err = (y - x @ (w.float() * w_scale)).abs().max().item()

    g = wf.reshape(IN // GROUP, GROUP, OUT)
    s4 = 7 / g.abs().amax(1).clamp_min(1e-8)                         # [IN / GROUP, OUT]
    back = int4_groups(wf, s4)
    ref = torch.round(g * s4[:, None, :]).clamp(-8, 7) / s4[:, None, :]
    torch.testing.assert_close(back, ref.reshape(IN, OUT), rtol=1e-6, atol=1e-6)
    print(f"w8a8 linear within {err:.4f} of fp32 activations; int4 weights (groups of {GROUP}) "
          f"within {(back - wf).abs().max().item():.4f}")


if __name__ == "__main__":
    main()
