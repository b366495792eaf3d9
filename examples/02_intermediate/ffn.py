"""A transformer feed-forward block in pypto:

    h = rms_norm(x) * g
    y = x + (silu(h @ W_gate) * (h @ W_up)) @ W_down

RMSNorm, a SwiGLU with two projections, the down projection and the residual,
in one jitted function. Checked against the same block in torch."""

import torch

import pypto

T, D, F = 64, 128, 256   # tokens, model dim, hidden dim
EPS = 1e-6


@pypto.frontend.jit
def ffn(x: pypto.Tensor((T, D), pypto.DT_FP32), g: pypto.Tensor((D,), pypto.DT_FP32),
        w_gate: pypto.Tensor((D, F), pypto.DT_FP32), w_up: pypto.Tensor((D, F), pypto.DT_FP32),
        w_down: pypto.Tensor((F, D), pypto.DT_FP32)) -> pypto.Tensor((T, D), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(16, 64)
    pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 64])
    h = pypto.rms_norm(x, g, EPS)
    act = pypto.silu(pypto.matmul(h, w_gate)) * pypto.matmul(h, w_up)
    return x + pypto.matmul(act, w_down)


def reference(x, g, w_gate, w_up, w_down):
    F_ = torch.nn.functional
    h = F_.rms_norm(x, (D,), g, EPS)
    return x + (F_.silu(h @ w_gate) * (h @ w_up)) @ w_down


def main():
    torch.manual_seed(0)
    x, g = torch.randn(T, D), torch.rand(D) + 0.5
    w_gate, w_up = torch.randn(D, F) / D ** 0.5, torch.randn(D, F) / D ** 0.5
    w_down = torch.randn(F, D) / F ** 0.5
    y = ffn(x, g, w_gate, w_up, w_down)
    ref = reference(x, g, w_gate, w_up, w_down)
    err = (y - ref).abs().max().item()
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)

    stats = pypto.compile(ffn, x, g, w_gate, w_up, w_down).stats()
    print(f"FFN block (T={T}, D={D}, F={F}): max |pypto - torch| = {err:.1e}")
    print(f"  InCore functions: {stats['incore_functions']}, tasks: {stats['tasks']}, "
          f"compile: {stats['compile_seconds']:.3f} s")


if __name__ == "__main__":
    main()
