"""Views and writes in pypto: slicing, pypto.view with offsets and a
valid_shape (a tail), transpose/permute/reshape/unsqueeze, concat, and the
PyPTO output-parameter style: results written with pypto.assemble or
out[...] = ... into tensors the caller passes in. Checked against torch."""

import torch

import pypto

R, C = 12, 40


@pypto.frontend.jit
def views(x: pypto.Tensor((R, C), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 16)
    a = x[2:10, 5:37] * 2                          # a box of x (a view: no copy)
    b = x[::3, 1:2] + 0                            # a stepped slice
    c = pypto.transpose(x, 0, 1) + 1               # (C, R), read through strides
    v = pypto.view(x, [8, 16], [8, 0], valid_shape=[4, 16])   # rows 8..15, but only 4 rows exist
    d = pypto.exp(v)                               # computed and stored for the valid 4 rows only
    e = pypto.concat([x[0:2, :], x[10:12, :]], dim=0)
    f = pypto.unsqueeze(x[0, :], 0) - 1            # x[0, :] drops the dim: (C,) -> (1, C)
    return a, b, c, d[0:4, :], e, f                # returned views are copied into new tensors


@pypto.frontend.jit
def views_3d(x: pypto.Tensor((R, C), pypto.DT_FP32), y: pypto.Tensor((2, 3, 8), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 16)
    ex = pypto.exp(x)
    pypto.set_vec_tile_shapes(2, 2, 8)             # 3-D operands need a 3-D tile
    g = pypto.permute(y, 2, 0, 1) * 1              # (8, 2, 3)
    h = pypto.reshape(ex, (3, 4, C)) + 1           # reshape a computed tensor
    return g, h


@pypto.frontend.jit
def out_params(x: pypto.Tensor((R, C), pypto.DT_FP32), out: pypto.Tensor((R, C), pypto.DT_FP32),
               part: pypto.Tensor((4, C), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 8)
    out[:] = pypto.exp(x)                          # the whole output
    part[0:2, :] = x[0:2, :] * 2                   # a region of an output
    pypto.assemble(x[8:10, :] + 1, [2, 0], part)   # the same with explicit offsets
    # no return: the caller's tensors are updated in place


def main():
    torch.manual_seed(0)
    x, y = torch.randn(R, C), torch.randn(2, 3, 8)
    refs = (x[2:10, 5:37] * 2, x[::3, 1:2], x.t() + 1, torch.exp(x[8:12, 0:16]),
            torch.cat([x[0:2], x[10:12]], 0), x[0:1, :] - 1, y.permute(2, 0, 1), torch.exp(x).reshape(3, 4, C) + 1)
    for got, ref in zip(views(x) + views_3d(x, y), refs):
        assert got.shape == ref.shape, (got.shape, ref.shape)
        torch.testing.assert_close(got, ref, atol=2e-5, rtol=2e-5)

    out, part = torch.zeros(R, C), torch.zeros(4, C)
    assert out_params(x, out, part) is None
    torch.testing.assert_close(out, torch.exp(x), atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(part, torch.cat([x[0:2] * 2, x[8:10] + 1]))

    # The output may be a strided view of the caller's memory: it is written in place, honouring the strides.
    big = torch.zeros(C, R)
    out_params(x, big.t(), part)
    torch.testing.assert_close(big.t(), torch.exp(x), atol=2e-5, rtol=2e-5)

    print(f"views of a {R}x{C} tensor (slices, view with valid_shape, transpose, permute, reshape, unsqueeze, "
          f"concat) match torch")
    print("  output parameters written with out[:] = ..., part[0:2, :] = ... and pypto.assemble")


if __name__ == "__main__":
    main()
