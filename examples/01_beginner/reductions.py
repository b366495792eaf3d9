"""Reductions in pypto: sum, amax, amin, prod, mean and var over an int dim,
a negative dim and a list of dims, with and without keepdim, on a 3-D fp32
tensor; plus integer sums (which give int64, as in torch). Checked against
torch."""

import torch

import pypto

B, M, N = 4, 24, 40


@pypto.frontend.jit
def reduce_all(x: pypto.Tensor((B, M, N), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(2, 8, 16)      # a 3-D tile for 3-D operands
    return (
        pypto.sum(x, -1, True),              # negative dim, keepdim: (B, M, 1)
        pypto.amax(x, 1),                    # int dim, dropped: (B, N)
        pypto.amin(x, [0, 2], True),         # list of dims: (1, M, 1)
        pypto.prod(x, 0),                    # (M, N)
        pypto.mean(x, [1, 2]),               # (B,)
        pypto.var(x, -1, keepdim=True),      # Bessel-corrected, as torch.var: (B, M, 1)
        x.sum(1, keepdim=True),              # the method forms
    )


@pypto.frontend.jit
def int_sum(x: pypto.Tensor((M, N), pypto.DT_INT32)):
    pypto.set_vec_tile_shapes(8, 16)
    return pypto.sum(x, -1, True), pypto.amax(x, 0, True)


def main():
    torch.manual_seed(0)
    x = torch.rand(B, M, N) + 0.5             # values near 1 keep prod finite
    refs = (x.sum(-1, keepdim=True), x.amax(1), x.amin((0, 2), keepdim=True), x.prod(0), x.mean((1, 2)),
            x.var(-1, keepdim=True), x.sum(1, keepdim=True))
    for got, ref in zip(reduce_all(x), refs):
        assert got.shape == ref.shape, (got.shape, ref.shape)
        torch.testing.assert_close(got, ref, atol=2e-5, rtol=2e-5)

    xi = torch.randint(-100, 100, (M, N), dtype=torch.int32)
    s, mx = int_sum(xi)
    assert s.dtype == torch.int64 and torch.equal(s, xi.sum(-1, keepdim=True))   # like torch: int sum -> int64
    assert mx.dtype == torch.int32 and torch.equal(mx, xi.amax(0, keepdim=True))

    stats = pypto.compile(reduce_all, x).stats()
    print(f"reductions over ({B}, {M}, {N}): sum/amax/amin/prod/mean/var match torch; "
          f"int32 sum gives {s.dtype}")
    print(f"  InCore functions: {stats['incore_functions']}, tasks: {stats['tasks']}")


if __name__ == "__main__":
    main()
