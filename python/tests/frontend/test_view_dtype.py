"""view(x, dtype=...): the bytes of x read as another dtype (torch's Tensor.view(dtype)), for inputs,
computed tensors and outputs, same-size and different-size dtypes, dynamic dims, and the errors."""

import numpy as np
import pytest
import torch

import pypto

D = pypto.DYNAMIC


def test_fp32_bits_as_int32_compute_and_back():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((D, 20), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        bits = pypto.view(x, dtype=pypto.DT_INT32)          # an input read as int32
        y = pypto.view(pypto.add(x, 1.0), dtype=pypto.DT_INT32)  # a computed tensor read as int32
        return bits + 1, y, pypto.view(bits - 1, dtype=pypto.DT_FP32)

    for rows in (1, 13, 33):
        x = torch.randn(rows, 20)
        a, b, c = f(x)
        assert a.dtype == torch.int32 and torch.equal(a, x.view(torch.int32) + 1)
        assert torch.equal(b, (x + 1.0).view(torch.int32))
        assert torch.equal(c, (x.view(torch.int32) - 1).view(torch.float32))


@pytest.mark.parametrize("src,dst,n", [(torch.float16, torch.int16, 12), (torch.bfloat16, torch.int16, 9),
                                       (torch.float32, torch.uint8, 5), (torch.int8, torch.float32, 12),
                                       (torch.int32, torch.float16, 7), (torch.float64, torch.int32, 3)])
def test_sizes_scale_the_last_dim_as_torch(src, dst, n):
    dts = {torch.float16: pypto.DT_FP16, torch.int16: pypto.DT_INT16, torch.bfloat16: pypto.DT_BF16,
           torch.float32: pypto.DT_FP32, torch.uint8: pypto.DT_UINT8, torch.int8: pypto.DT_INT8,
           torch.int32: pypto.DT_INT32, torch.float64: pypto.DT_DOUBLE}

    @pypto.frontend.jit
    def f(x: pypto.Tensor((3, 2, n), dts[src])):
        pypto.set_vec_tile_shapes(2, 2, 8)
        v = pypto.view(x, dtype=dts[dst])
        return v, pypto.view(v, dtype=dts[src])

    g = torch.Generator().manual_seed(n)
    x = (torch.randn(3, 2, n, generator=g) * 50).to(src)
    v, back = f(x)
    ref = x.view(dst)
    assert v.shape == ref.shape and v.dtype == dst
    assert torch.equal(v.view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(back.view(torch.uint8), x.view(torch.uint8))


def test_a_slice_then_a_bitcast_and_numpy_inputs():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((6, 16), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.view(x, [2, 16], [4, 0], dtype=pypto.DT_FP32) * 2.0

    x = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32).view(np.int32)
    got = f(x)
    np.testing.assert_allclose(got, x[4:6].view(np.float32) * 2.0, rtol=1e-6)


def test_errors_name_the_dims_and_dtypes():
    @pypto.frontend.jit
    def odd(x: pypto.Tensor((4, 6), pypto.DT_INT8)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.view(x, dtype=pypto.DT_FP32)

    with pytest.raises(ValueError, match=r"view at .*test_view_dtype.py:\d+: reading DT_INT8 data of shape \[4, 6\] as "
                                         r"DT_FP32: the last dim 6 must be a multiple of 4"):
        odd(np.zeros((4, 6), np.int8))

    @pypto.frontend.jit
    def dyn(x: pypto.Tensor((4, D), pypto.DT_INT8)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.view(x, dtype=pypto.DT_INT32)

    with pytest.raises(NotImplementedError, match=r"must be a constant multiple of 4"):
        dyn(np.zeros((4, 8), np.int8))

    @pypto.frontend.jit
    def bad(x: pypto.Tensor((4, 8), pypto.DT_INT8)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.view(x, dtype="float32")

    with pytest.raises(TypeError, match=r"pypto.view: dtype must be a pypto.DataType, found str 'float32'"):
        bad(np.zeros((4, 8), np.int8))


def test_a_tensor_with_a_tail_is_not_bitcast():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((8, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.view(pypto.view(x, [4, 8], [0, 0], valid_shape=[3, 8]), dtype=pypto.DT_INT32)

    with pytest.raises(NotImplementedError, match=r"pypto.view at .*test_view_dtype.py:\d+: reading DT_FP32 data of "
                                                  r"shape \[4, 8\] as DT_INT32: a tensor with a tail"):
        f(np.zeros((8, 8), np.float32))


def test_a_strided_view_cannot_be_bitcast_at_run_time():
    @pypto.frontend.jit
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.view(x[:, 0:8], dtype=pypto.DT_INT32) + 0

    with pytest.raises(ValueError, match=r"a view with another dtype\) of a tensor that is not contiguous in memory"):
        f(torch.zeros(8, 16))
