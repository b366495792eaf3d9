"""Activations in pypto: relu, silu, gelu (exact and tanh approximation),
sigmoid, and the gated linear units of modern transformers:
SwiGLU = silu(x @ Wg) * (x @ Wu) and GeGLU = gelu(x @ Wg) * (x @ Wu).
Checked against torch."""

import torch

import pypto

T, D, F = 64, 128, 192   # tokens, model dim, hidden dim


@pypto.frontend.jit
def pointwise(x: pypto.Tensor((T, D), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 64)
    return (pypto.relu(x), pypto.silu(x), pypto.gelu(x), pypto.gelu(x, approximate="tanh"), pypto.sigmoid(x))


@pypto.frontend.jit
def glu(x: pypto.Tensor((T, D), pypto.DT_FP32), wg: pypto.Tensor((D, F), pypto.DT_FP32),
        wu: pypto.Tensor((D, F), pypto.DT_FP32), kind: str):
    pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 64])
    pypto.set_vec_tile_shapes(16, 64)
    gate, up = x @ wg, x @ wu
    if kind == "swiglu":                       # a Python condition on a constant: decided while tracing
        return pypto.silu(gate) * up
    return pypto.gelu(gate) * up


def main():
    torch.manual_seed(0)
    Fn = torch.nn.functional
    x = torch.randn(T, D) * 2
    refs = (torch.relu(x), Fn.silu(x), Fn.gelu(x), Fn.gelu(x, approximate="tanh"), torch.sigmoid(x))
    for got, ref in zip(pointwise(x), refs):
        torch.testing.assert_close(got, ref, atol=2e-5, rtol=2e-5)

    wg, wu = torch.randn(D, F) / D ** 0.5, torch.randn(D, F) / D ** 0.5
    swiglu = glu(x, wg, wu, "swiglu")
    geglu = glu(x, wg, wu, "geglu")
    torch.testing.assert_close(swiglu, Fn.silu(x @ wg) * (x @ wu), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(geglu, Fn.gelu(x @ wg) * (x @ wu), atol=1e-4, rtol=1e-4)
    assert len(glu._cache) == 2                 # one specialisation per value of the constant 'kind'

    s = pypto.compile(glu, x, wg, wu, "swiglu").stats()
    print(f"relu, silu, gelu (exact, tanh), sigmoid on {T}x{D} match torch")
    print(f"SwiGLU and GeGLU ({T}x{D} @ {D}x{F}) match torch; SwiGLU: "
          f"{s['incore_functions']} InCore functions, {s['tasks']} tasks")


if __name__ == "__main__":
    main()
