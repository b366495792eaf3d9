"""Random numbers in a kernel: a fused dropout with residual add, and a normally distributed
weight initialisation. pypto.uniform and pypto.normal are counter-based (Philox4x32-10): the same
key and counter give the same tensor on every run, whatever the tiling or thread count, and a
new counter gives a new mask. Checked against torch."""

import torch

import pypto

P = 0.1  # drop probability


@pypto.frontend.jit
def dropout_residual(x: pypto.Tensor((pypto.DYNAMIC, 256), pypto.DT_FP32),
                     h: pypto.Tensor((pypto.DYNAMIC, 256), pypto.DT_FP32), step: int):
    pypto.set_vec_tile_shapes(16, 256)
    u = pypto.uniform([x.shape[0], 256], [2026], [0, step], [1], pypto.DT_FP32)
    return x + pypto.where(u >= P, h * (1.0 / (1.0 - P)), 0.0)  # the mask never reaches memory


@pypto.frontend.jit
def init_weight(like: pypto.Tensor((512, 512), pypto.DT_BF16)):
    pypto.set_vec_tile_shapes(32, 512)
    return pypto.mul(pypto.normal([512, 512], [7], [0, 0], [1], pypto.DT_FP32), 0.02)


def main():
    torch.manual_seed(0)
    x, h = torch.randn(300, 256), torch.randn(300, 256)
    y = dropout_residual(x, h, 1)
    kept = (y - x).abs() > 1e-6
    torch.testing.assert_close((y - x)[kept], (h / (1 - P))[kept])  # kept values are scaled
    assert abs(kept.float().mean().item() - (1 - P)) < 0.01           # about 1 - P of them kept
    assert torch.equal(dropout_residual(x, h, 1), y)                  # the same step, the same mask
    assert not torch.equal(dropout_residual(x, h, 2), y)              # the next step, a new one

    w = init_weight(torch.zeros(512, 512, dtype=torch.bfloat16))
    assert abs(w.mean().item()) < 1e-3 and abs(w.std().item() - 0.02) < 5e-4
    print(f"dropout kept {kept.float().mean().item():.3f} of the activations (p = {P}); "
          f"init mean {w.mean().item():+.5f}, std {w.std().item():.5f}")


if __name__ == "__main__":
    main()
