"""The vec tile shape on operands of another rank (PyPTO's rule): an op of rank r uses the
leading r entries of a longer tile; a shorter tile is an error; a copy into a region
(assemble, `out[...] = t`) needs no vec tile shape."""

import pytest
import torch

import pypto

DTYPES = [(pypto.DT_FP32, torch.float32, 1e-6), (pypto.DT_FP16, torch.float16, 2e-3), (pypto.DT_BF16, torch.bfloat16, 2e-2)]


@pytest.mark.parametrize("n", [16, 20])  # the tile's 8 divides 16, not 20
@pytest.mark.parametrize("dt, tdt, tol", DTYPES)
def test_a_1d_op_under_a_2d_tile_takes_its_first_entry(n, dt, tdt, tol):
    @pypto.frontend.jit
    def f(x: pypto.Tensor([], dt), out: pypto.Tensor([], dt)):
        pypto.set_vec_tile_shapes(8, 16)
        out[:] = pypto.add(pypto.exp(x), 1.0)

    x = torch.randn(n).to(tdt)
    out = torch.zeros(n, dtype=tdt)
    f(x, out)
    torch.testing.assert_close(out.float(), (torch.exp(x.float()) + 1).to(tdt).float(), rtol=tol * 4, atol=tol * 4)
    text = pypto.compile(f, x, out).dump("tensor")
    assert "tile [8]" in text and "tile [16]" not in text, text


@pytest.mark.parametrize("m, n", [(16, 24), (13, 30)])
def test_a_reductions_lower_rank_result_is_tiled_by_the_leading_entries(m, n):
    M = pypto.frontend.dynamic("M")

    @pypto.frontend.jit
    def f(x: pypto.Tensor((M, n), pypto.DT_FP32)) -> pypto.Tensor((n,), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(8, 16)
        s = pypto.sum(x, 0)        # [n], tiled by 8 from here on
        return pypto.mul(s, s)

    x = torch.randn(m, n)
    torch.testing.assert_close(f(x), x.sum(0) ** 2, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(8, 24), (10, 30)])
def test_2d_ops_under_a_3d_tile(shape):
    @pypto.frontend.jit
    def f(a: pypto.Tensor([], pypto.DT_FP32), b: pypto.Tensor([], pypto.DT_FP32), out: pypto.Tensor([], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8, 2)
        out[:] = pypto.amax(pypto.mul(a, b), -1, True)

    a, b = torch.randn(*shape), torch.randn(*shape)
    out = torch.zeros(shape[0], 1)
    f(a, b, out)
    torch.testing.assert_close(out, (a * b).amax(-1, keepdim=True))


def test_a_tile_shorter_than_the_operand_is_still_an_error():
    @pypto.frontend.jit
    def f(a: pypto.Tensor((4, 5, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.exp(a)

    with pytest.raises(ValueError, match=r"pypto.exp at .*: vec tile shape \[4, 4\] has rank 2, expected rank 3 of the "
                                         r"operand \(or a longer tile, whose leading dims apply\)"):
        f(torch.ones(4, 5, 6))


@pytest.mark.parametrize("m, k, n", [(32, 64, 48), (40, 72, 20)])
def test_a_copy_into_an_output_needs_no_vec_tile(m, k, n):
    @pypto.frontend.jit
    def mm(a: pypto.Tensor([], pypto.DT_FP32), b: pypto.Tensor([], pypto.DT_FP32), out: pypto.Tensor([], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([32, 32], [64, 64], [64, 64])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)

    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.zeros(m, n)
    mm(a, b, out)
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)


def test_a_copy_with_a_dynamic_last_dim_and_no_vec_tile():
    N = pypto.frontend.dynamic("N")

    @pypto.frontend.jit
    def f(x: pypto.Tensor((3, N), pypto.DT_FP32), out: pypto.Tensor((3, N), pypto.DT_FP32)):
        out[:] = x

    for n in (5, 300, 1000):
        x, out = torch.randn(3, n), torch.zeros(3, n)
        f(x, out)
        torch.testing.assert_close(out, x)
