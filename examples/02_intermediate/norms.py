"""Normalisations in pypto: pypto.layer_norm and pypto.rms_norm with weights
(and a bias), checked against torch.nn.functional.layer_norm / rms_norm, and
the same two norms written out by hand from primitives (mean, sub, mul,
rsqrt, ...), which fuse the same way."""

import torch

import pypto

M, H = 64, 256
EPS = 1e-5


@pypto.frontend.jit
def builtin_norms(x: pypto.Tensor((M, H), pypto.DT_FP32), w: pypto.Tensor((H,), pypto.DT_FP32),
                  b: pypto.Tensor((H,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 64)
    return pypto.layer_norm(x, w, b, EPS), pypto.rms_norm(x, w, EPS)


@pypto.frontend.jit
def manual_norms(x: pypto.Tensor((M, H), pypto.DT_FP32), w: pypto.Tensor((H,), pypto.DT_FP32),
                 b: pypto.Tensor((H,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 64)
    # LayerNorm: (x - mean) / sqrt(biased var + eps) * w + b
    mu = pypto.sum(x, -1, True) / H
    d = x - mu
    var = pypto.sum(d * d, -1, True) / H
    ln = d * pypto.rsqrt(var + EPS) * w + b
    # RMSNorm: x / sqrt(mean(x^2) + eps) * w
    ms = pypto.mean(x * x, -1, True)
    rms = x * pypto.rsqrt(ms + EPS) * w
    return ln, rms


def main():
    torch.manual_seed(0)
    x, w, b = torch.randn(M, H) * 3 + 1, torch.randn(H), torch.randn(H)
    F = torch.nn.functional
    ref_ln, ref_rms = F.layer_norm(x, (H,), w, b, EPS), F.rms_norm(x, (H,), w, EPS)
    for name, kernel in (("pypto.layer_norm/rms_norm", builtin_norms), ("by hand", manual_norms)):
        ln, rms = kernel(x, w, b)
        torch.testing.assert_close(ln, ref_ln, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(rms, ref_rms, atol=1e-4, rtol=1e-4)
        err = max((ln - ref_ln).abs().max().item(), (rms - ref_rms).abs().max().item())
        s = pypto.compile(kernel, x, w, b).stats()
        print(f"{name:26s}: max |pypto - torch| = {err:.1e}, InCore functions {s['incore_functions']}, "
              f"tasks {s['tasks']}")


if __name__ == "__main__":
    main()
