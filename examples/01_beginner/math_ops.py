"""The math op family: trigonometric and hyperbolic functions, log1p/log2/cbrt, hypot and
copysign on floats; floor_div, remainder, gcd and the bitwise ops on integers; all fused into one
pass per kernel, each result checked against torch."""

import torch

import pypto

M, N = 37, 100  # neither divides the tile


@pypto.frontend.jit
def float_math(x: pypto.Tensor((M, N), pypto.DT_FP32), y: pypto.Tensor((M, N), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 64)
    return (pypto.sin(x) * pypto.cos(y), pypto.atan(x) + pypto.tanh(y), pypto.log1p(pypto.abs(x)),
            pypto.hypot(x, y), pypto.copysign(pypto.cbrt(x), y), pypto.isfinite(x / y))


@pypto.frontend.jit
def integer_math(a: pypto.Tensor((M, N), pypto.DT_INT32), b: pypto.Tensor((1, N), pypto.DT_INT32)):
    pypto.set_vec_tile_shapes(16, 64)
    return (pypto.floor_div(a, b), pypto.remainder(a, b), pypto.gcd(a, b),
            (a & 0xFF) | (b << 8), pypto.bitwise_right_shift(a, 3) ^ b)


def main():
    torch.manual_seed(0)
    x, y = torch.randn(M, N) * 3, torch.randn(M, N) * 3
    refs = (torch.sin(x) * torch.cos(y), torch.atan(x) + torch.tanh(y), torch.log1p(x.abs()), torch.hypot(x, y),
            torch.copysign(x.sign() * x.abs() ** (1 / 3), y), torch.isfinite(x / y))
    for got, ref in zip(float_math(x, y), refs):
        torch.testing.assert_close(got, ref, atol=2e-6, rtol=2e-6)

    a = torch.randint(-1000, 1000, (M, N), dtype=torch.int32)
    b = torch.randint(1, 50, (1, N), dtype=torch.int32) * torch.where(torch.rand(1, N) < 0.5, -1, 1).int()
    refs = (torch.floor_divide(a, b), torch.remainder(a, b), torch.gcd(a, b), (a & 0xFF) | (b << 8), (a >> 3) ^ b)
    for got, ref in zip(integer_math(a, b), refs):
        assert torch.equal(got, ref)
    print("float and integer math match torch:", M, "x", N)


if __name__ == "__main__":
    main()
