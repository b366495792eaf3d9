"""Scans and masks (cumsum, cumprod, tril, triu) and the arg-reductions (argmax, argmin) against torch:
every dim of 2-D and 3-D tensors, a scanned dim spanning several tiles with a tail, float and
integer dtypes (integer scans give DT_INT64, as torch), a dynamic dim, ties and NaN, the Tensor
methods, the NumPy path and the errors."""

import numpy as np
import pytest
import torch

import pypto

PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.float64: pypto.DT_DOUBLE, torch.int32: pypto.DT_INT32, torch.int16: pypto.DT_INT16,
      torch.int8: pypto.DT_INT8, torch.int64: pypto.DT_INT64, torch.bool: pypto.DT_BOOL}


def rand(shape, dtype, seed=0, lo=-3.0, hi=3.0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-20, 20, shape, generator=g).to(dtype)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def scan_kernel(op, shape, dt, dim, tile):
    @pypto.jit
    def f(x: pypto.Tensor(shape, dt)):
        pypto.set_vec_tile_shapes(*tile)
        return getattr(pypto, op)(x, dim)

    return f


# Shapes with tiles that do and do not divide them; the scanned dim spans several tiles.
CASES = [((37, 100), (8, 32)), ((64, 64), (16, 16)), ((5, 7), (8, 8)), ((3, 20, 33), (2, 8, 16)), ((1000,), (64,))]


@pytest.mark.parametrize("shape,tile", CASES)
def test_cumsum_every_dim_fp32(shape, tile):
    x = rand(shape, torch.float32)
    for dim in range(-len(shape), len(shape)):
        got = scan_kernel("cumsum", shape, pypto.DT_FP32, dim, tile)(x)
        ref = torch.cumsum(x.double(), dim).float()
        assert got.dtype == torch.float32 and got.shape == ref.shape
        # The running sum reaches |sum| ~ sqrt(n) * 1.7: a few ulp of the partial sums.
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5 * shape[dim % len(shape)] ** 0.5)


@pytest.mark.parametrize("shape,tile", CASES[:4])
def test_cumprod_every_dim(shape, tile):
    # Factors near 1, so that long products stay in range; a zero and a sign change on the way.
    x = rand(shape, torch.float32, seed=1, lo=0.9, hi=1.1)
    x.view(-1)[5] = 0.0
    x.view(-1)[7] = -1.0
    for dim in range(len(shape)):
        got = scan_kernel("cumprod", shape, pypto.DT_FP32, dim, tile)(x)
        torch.testing.assert_close(got, torch.cumprod(x.double(), dim).float(), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype,out", [(torch.int32, torch.int64), (torch.int16, torch.int64),
                                       (torch.int8, torch.int64), (torch.bool, torch.int64),
                                       (torch.int64, torch.int64)])
def test_integer_scans_are_exact_and_int64(dtype, out):
    shape = (9, 70)
    x = rand(shape, dtype, seed=2)
    for dim in (0, 1):
        got = scan_kernel("cumsum", shape, PT[dtype], dim, (4, 16))(x)
        ref = torch.cumsum(x, dim)
        assert got.dtype == out == ref.dtype
        assert torch.equal(got, ref)
    small = (x.to(torch.int64) % 3).to(dtype) if dtype != torch.bool else x
    got = scan_kernel("cumprod", shape, PT[dtype], 1, (4, 16))(small)
    assert torch.equal(got, torch.cumprod(small, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_scans_of_other_float_dtypes(dtype):
    shape = (6, 50)
    x = rand(shape, dtype, seed=3)
    got = scan_kernel("cumsum", shape, PT[dtype], 1, (4, 16))(x)
    assert got.dtype == dtype
    # Accumulated in fp32 (double for double) and rounded once per element, as torch on the CPU.
    ref = torch.cumsum(x.double(), 1).to(dtype)
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float64: 1e-13}[dtype]
    torch.testing.assert_close(got, ref, rtol=tol, atol=tol * 10)


def test_cumsum_special_values():
    x = torch.tensor([[1.0, float("inf"), 2.0, float("-inf"), 3.0],
                      [1.0, float("nan"), 2.0, 3.0, 4.0],
                      [-0.0, -0.0, 1e-40, 1e-40, -2e-40]])
    for tile in ((4, 2), (4, 8)):
        got = scan_kernel("cumsum", (3, 5), pypto.DT_FP32, 1, tile)(x)
        ref = torch.cumsum(x, 1)
        torch.testing.assert_close(got, ref, equal_nan=True)
        # The sign of each zero as torch's (whose running sum starts from +0).
        assert torch.equal(torch.signbit(got), torch.signbit(ref))


def test_a_negative_zero_constant_keeps_its_sign():
    # The kernels once wrote the constant -0.0 as the integer -0: x + -0.0 turned -0 into +0.
    @pypto.jit
    def f(x: pypto.Tensor((2, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4)
        return pypto.add(x, -0.0), pypto.full([2, 4], -0.0, pypto.DT_FP32)

    s, z = f(torch.full((2, 4), -0.0))
    assert torch.signbit(s).all() and torch.signbit(z).all()


def test_scan_with_a_dynamic_dim_and_numpy():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 40], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return x.cumsum(0), pypto.cumprod(x, -1)

    for rows in (1, 13, 40):
        x = rand((rows, 40), torch.float32, seed=rows, lo=0.8, hi=1.2)
        a, b = f(x)
        torch.testing.assert_close(a, torch.cumsum(x, 0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(b, torch.cumprod(x, -1), rtol=1e-5, atol=1e-6)
    an, bn = f(x.numpy())
    assert isinstance(an, np.ndarray)
    np.testing.assert_allclose(an, np.cumsum(x.numpy(), 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn, np.cumprod(x.numpy(), -1), rtol=1e-5, atol=1e-6)


def test_scan_fuses_with_its_neighbours():
    # exp feeding the scan, and the scan feeding a division: the softmax-like running normaliser.
    @pypto.jit
    def f(x: pypto.Tensor((16, 96), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        e = pypto.exp(x)
        return pypto.div(e, pypto.cumsum(e, 1))

    x = rand((16, 96), torch.float32, seed=4)
    e = torch.exp(x.double())
    torch.testing.assert_close(f(x), (e / torch.cumsum(e, 1)).float(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8, torch.bool])
@pytest.mark.parametrize("diagonal", [-2, 0, 3, 50])
def test_tril_triu(dtype, diagonal):
    shape = (2, 19, 37)

    @pypto.jit
    def f(x: pypto.Tensor(shape, PT[dtype])):
        pypto.set_vec_tile_shapes(1, 8, 16)
        return pypto.tril(x, diagonal), x.triu(diagonal), pypto.tril(x)

    x = rand(shape, dtype, seed=5)
    lo, up, lo0 = f(x)
    assert lo.dtype == dtype
    assert torch.equal(lo, torch.tril(x, diagonal))
    assert torch.equal(up, torch.triu(x, diagonal))
    assert torch.equal(lo0, torch.tril(x))


def test_tril_and_triu_in_place():
    @pypto.jit
    def f(x: pypto.Tensor((2, 9, 12), pypto.DT_FP32), y: pypto.Tensor((9, 12), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(1, 4, 8)
        x.tril_(1)
        y.triu_(-2)
        return pypto.mul(x, 2.0)  # reads x after the update

    x, y = rand((2, 9, 12), torch.float32, seed=7), rand((9, 12), torch.int32, seed=8)
    x0, y0 = x.clone(), y.clone()
    out = f(x, y)
    assert torch.equal(x, torch.tril(x0, 1)) and torch.equal(y, torch.triu(y0, -2))
    assert torch.equal(out, 2 * torch.tril(x0, 1))


def test_tril_with_a_dynamic_dim():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 24], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.triu(x, -1)

    for rows in (5, 30):
        x = rand((rows, 24), torch.float32, seed=rows)
        assert torch.equal(f(x), torch.triu(x, -1))


ARG_CASES = [((37, 100), (8, 32)), ((3, 20, 33), (2, 8, 16)), ((100,), (32,))]


# Every dim of every shape for fp32 and int32; the half types on the 2-D and 1-D shapes (argmax is
# amax, eq, isnan, where and amin, each checked per dtype on its own).
@pytest.mark.parametrize("shape,tile,dtype",
                         [(s, t, d) for s, t in ARG_CASES for d in (torch.float32, torch.int32)] +
                         [(s, t, d) for s, t in (ARG_CASES[0], ARG_CASES[2]) for d in (torch.float16, torch.bfloat16)])
def test_argmax_argmin(shape, tile, dtype):
    x = rand(shape, dtype, seed=6)
    for dim in range(-len(shape), len(shape)):
        for keepdim in ((False, True) if len(shape) > 1 else (True,)):
            @pypto.jit
            def f(x: pypto.Tensor(shape, PT[dtype])):
                pypto.set_vec_tile_shapes(*tile)
                return pypto.argmax(x, dim, keepdim), x.argmin(dim, keepdim=keepdim)

            amax_i, amin_i = f(x)
            assert amax_i.dtype == torch.int32
            # Integers in [-20, 20) have many ties: the first index wins, as torch on the CPU.
            assert torch.equal(amax_i.long(), torch.argmax(x, dim, keepdim))
            assert torch.equal(amin_i.long(), torch.argmin(x, dim, keepdim))


def test_argmax_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [float("nan"), 5.0, float("nan"), 9.0],
                      [-float("inf"), -float("inf"), -float("inf"), -float("inf")], [2.0, 1.0, 1.0, float("nan")]])

    @pypto.jit
    def f(x: pypto.Tensor((4, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 2)
        return pypto.argmax(x, 1), pypto.argmin(x, 1), pypto.argmax(x, 0)

    a, b, c = f(x)
    assert a.tolist() == torch.argmax(x, 1).tolist() == [1, 0, 0, 3]
    assert b.tolist() == torch.argmin(x, 1).tolist() == [3, 0, 0, 3]
    assert c.tolist() == torch.argmax(x, 0).tolist()


def test_argmax_with_a_dynamic_dim():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 50], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.argmax(x, 0), pypto.argmin(x, 1)

    for rows in (3, 21):
        x = rand((rows, 50), torch.float32, seed=rows)
        a, b = f(x)
        assert torch.equal(a.long(), torch.argmax(x, 0))
        assert torch.equal(b.long(), torch.argmin(x, 1))


def test_errors_name_the_op_the_argument_and_the_value():
    @pypto.jit
    def bad_dim(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        return pypto.cumsum(x, 2)

    with pytest.raises(ValueError, match=r"cumsum at .*test_scans_and_selection\.py:\d+: dim 2 is out of range for a "
                                         r"tensor of rank 2 \(expected -2 to 1\)"):
        bad_dim(torch.zeros(4, 8))

    @pypto.jit
    def float_dim(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        return pypto.cumprod(x, 1.0)

    with pytest.raises(TypeError, match=r"pypto\.cumprod: dim must be an int, found float 1\.0"):
        float_dim(torch.zeros(4, 8))

    @pypto.jit
    def vector_tril(x: pypto.Tensor((8,), pypto.DT_FP32)):
        return pypto.tril(x)

    with pytest.raises(ValueError, match=r"pypto\.tril: input must have at least 2 dims .* found shape \[8\]"):
        vector_tril(torch.zeros(8))

    @pypto.jit
    def bad_diag(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        return pypto.triu(x, 0.5)

    with pytest.raises(TypeError, match=r"pypto\.triu: diagonal must be an int, found float 0\.5"):
        bad_diag(torch.zeros(4, 8))

    @pypto.jit
    def bad_arg_dim(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        return pypto.argmax(x, -3)

    with pytest.raises(ValueError, match=r"pypto\.argmax at .*test_scans_and_selection\.py:\d+: dim -3 is out of "
                                         r"range for a tensor of rank 2"):
        bad_arg_dim(torch.zeros(4, 8))

    @pypto.jit
    def bad_keepdim(x: pypto.Tensor((4, 8), pypto.DT_FP32)):
        return pypto.argmin(x, 1, keepdim=1)

    with pytest.raises(TypeError, match=r"pypto\.argmin: keepdim must be a bool, found int 1"):
        bad_keepdim(torch.zeros(4, 8))
