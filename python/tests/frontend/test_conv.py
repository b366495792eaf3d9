"""pypto.conv against torch.nn.functional.conv1d/2d/3d: strides, asymmetric paddings, dilations,
groups, bias/scale/ReLU epilogues, fp32/fp16/bf16, a dynamic batch, and the conv tile configuration
(the op families issue, item 8)."""

import re

import pytest
import torch
import torch.nn.functional as F

import pypto
from pypto import pypto_impl

D = pypto.DYNAMIC
DT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16}
TOL = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}
FN = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}


def _data(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _reference(x, w, bias, strides, paddings, dilations, groups):
    """torch's conv in float64, with PyPTO's (before, after) paddings applied by F.pad."""
    pad = []
    for i in reversed(range(len(strides))):  # F.pad wants the last dim's pair first
        pad += paddings[2 * i:2 * i + 2]
    xp = F.pad(x.double(), pad)
    return FN[x.dim()](xp, w.double(), None if bias is None else bias.double(), stride=strides,
                       dilation=dilations, groups=groups)


def _close(got, ref, dtype):
    tol = TOL[dtype]
    torch.testing.assert_close(got.double(), ref, rtol=tol, atol=tol * max(1.0, ref.abs().max().item()))


@pytest.mark.parametrize("x_shape,w_shape,strides,paddings,dilations,groups", [
    ((2, 5, 13, 11), (7, 5, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 1),       # a 3x3 layer, odd sizes
    ((1, 6, 17, 15), (4, 3, 3, 2), [2, 3], [2, 0, 1, 3], [2, 1], 2),       # everything asymmetric, grouped
    ((3, 4, 9, 10), (8, 4, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 1),        # 1x1: a plain channel matmul
    ((1, 8, 12, 12), (8, 1, 5, 5), [2, 2], [2, 2, 2, 2], [1, 1], 8),       # depthwise
    ((2, 6, 40), (4, 3, 4), [3], [2, 1], [2], 2),                          # 1-D
    ((1, 4, 5, 6, 7), (4, 2, 3, 2, 3), [1, 2, 1], [1, 1, 0, 1, 1, 0], [1, 1, 2], 2),  # 3-D
])
def test_conv_matches_torch(x_shape, w_shape, strides, paddings, dilations, groups):
    x, w = _data(x_shape, torch.float32, 1), _data(w_shape, torch.float32, 2)

    @pypto.jit
    def f(a: pypto.Tensor(x_shape, pypto.DT_FP32), b: pypto.Tensor(w_shape, pypto.DT_FP32)):
        return pypto.conv(a, b, pypto.DT_FP32, strides, paddings, dilations, groups=groups)

    _close(f(x, w), _reference(x, w, None, strides, paddings, dilations, groups), torch.float32)
    pto = pypto.compile(f, x, w).pto()
    implicit = len(x_shape) == 4 and groups == 1 and strides == [1, 1]
    assert ("incore func @conv2d_tiles" in pto) == implicit
    if len(x_shape) == 4 and not implicit:  # the taps write all of the im2col tensor: its memory is not zeroed
        assert "= alloc_workspace uninit :" in pto


@pytest.mark.parametrize("x_shape,w_shape,paddings,dilations,dtype", [
    ((2, 70, 13, 11), (67, 70, 3, 3), [1, 1, 1, 1], [1, 1], torch.float32),   # channel blocks of 64 and a tail
    ((1, 8, 30, 57), (5, 8, 3, 3), [1, 1, 2, 0], [1, 2], torch.float32),      # row blocks of 4 and a tail
    ((1, 6, 12, 16), (9, 6, 5, 5), [2, 2, 2, 2], [1, 1], torch.float16),      # 5x5
    ((2, 4, 7, 9), (3, 4, 2, 4), [0, 1, 3, 0], [2, 1], torch.bfloat16),       # asymmetric kernel and padding
])
def test_stride_one_convs_are_an_implicit_gemm(x_shape, w_shape, paddings, dilations, dtype):
    """A 2-D convolution with stride 1 and one group multiplies the padded input's rows, loaded tap by
    tap, with no im2col tensor; checked on channel and row blocks that do and do not divide."""
    x, w = _data(x_shape, dtype, 11), _data(w_shape, dtype, 12) / w_shape[1] ** 0.5

    @pypto.jit
    def f(a: pypto.Tensor(x_shape, DT[dtype]), b: pypto.Tensor(w_shape, DT[dtype])):
        return pypto.conv(a, b, DT[dtype], [1, 1], paddings, dilations)

    got = f(x, w)
    assert got.dtype == dtype
    _close(got, _reference(x, w, None, [1, 1], paddings, dilations, 1), dtype)
    compiled = pypto.compile(f, x, w)
    assert "conv2d_tiles(" in compiled.dump("tensor")
    pto = compiled.pto()
    assert re.search(r"tmatmul_acc %t\d+, %t\d+, %t\d+ : ", pto), pto
    col_rows = x_shape[1] * w_shape[2] * w_shape[3]  # an im2col tensor would be [N, Cin kh kw, OH, OW]
    assert not re.search(rf"alloc_workspace.*: !pto.memref<gm,\d+x{col_rows}x\d+x\d+,", pto), pto


@pytest.mark.parametrize("x_shape,w_shape,paddings,implicit", [
    ((1, 40, 3, 1200), (40, 40, 3, 3), [1, 1, 1, 1], True),   # one row of 1200: blocks of 8 channels fit
    ((1, 8, 2, 4000), (4, 8, 1, 3), [0, 0, 1, 1], False),     # rows too wide for any block: im2col
])
def test_wide_rows_shrink_the_channel_blocks_or_take_im2col(x_shape, w_shape, paddings, implicit):
    x, w = _data(x_shape, torch.float32, 13), _data(w_shape, torch.float32, 14) / w_shape[1] ** 0.5

    @pypto.jit
    def f(a: pypto.Tensor(x_shape, pypto.DT_FP32), b: pypto.Tensor(w_shape, pypto.DT_FP32)):
        return pypto.conv(a, b, pypto.DT_FP32, [1, 1], paddings, [1, 1])

    _close(f(x, w), _reference(x, w, None, [1, 1], paddings, [1, 1], 1), torch.float32)
    tensor = pypto.compile(f, x, w).dump("tensor")
    assert ("conv2d_tiles(" in tensor) == implicit
    if implicit:
        assert "tile=[cout 8, cin 8, rows 1]" in tensor, tensor


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_with_bias_and_relu(dtype):
    x, w, bias = _data((2, 16, 10, 14), dtype, 3), _data((24, 8, 3, 3), dtype, 4), _data((24,), dtype, 5)

    @pypto.jit
    def f(a: pypto.Tensor((2, 16, 10, 14), DT[dtype]), b: pypto.Tensor((24, 8, 3, 3), DT[dtype]),
          c: pypto.Tensor((24,), DT[dtype])):
        pypto.set_conv_tile_shapes(pypto_impl.TileL1Info(tileHin=1, tileHout=1, tileWin=16, tileWout=16,
                                                         tileCinFmap=16, tileCinWeight=16, tileN=16, tileBatch=1),
                                   pypto_impl.TileL0Info(tileH=1, tileW=16, tileK=16, tileN=16))
        return pypto.conv(a, b, DT[dtype], [1, 2], [1, 1, 0, 2], [1, 1], groups=2,
                          extend_params={"bias_tensor": c, "relu_type": pypto.ConvReLuType.RELU})

    got = f(x, w, bias)
    assert got.dtype == dtype
    _close(got, torch.relu(_reference(x, w, bias, [1, 2], [1, 1, 0, 2], [1, 1], 2)), dtype)


def test_scale_tensor_and_fp32_result_from_bf16():
    x, w = _data((1, 3, 8, 8), torch.bfloat16, 6), _data((5, 3, 3, 3), torch.bfloat16, 7)
    s = torch.linspace(0.5, 2.0, 5).reshape(1, 5)

    @pypto.jit
    def f(a: pypto.Tensor((1, 3, 8, 8), pypto.DT_BF16), b: pypto.Tensor((5, 3, 3, 3), pypto.DT_BF16),
          sc: pypto.Tensor((1, 5), pypto.DT_FP32)):
        return pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0, 0, 0, 0], [1, 1], extend_params={"scale_tensor": sc})

    got = f(x, w, s)
    assert got.dtype == torch.float32
    _close(got, _reference(x, w, None, [1, 1], [0] * 4, [1, 1], 1) * s.double().reshape(1, 5, 1, 1), torch.float32)


def test_dynamic_batch_inside_a_loop_with_the_user_vec_tile_kept():
    """PyPTO's dynamic-batch form: a loop over batch views, each conv assembled into the output; the
    vec tile the user set still tiles the op after the conv."""
    w = _data((6, 4, 3, 3), torch.float32, 8)

    @pypto.jit
    def f(a: pypto.Tensor((D, 4, 9, 9), pypto.DT_FP32), b: pypto.Tensor((6, 4, 3, 3), pypto.DT_FP32),
          out: pypto.Tensor((D, 6, 5, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8, 5, 5)
        for i in pypto.loop(0, a.shape[0], 1, name="batch"):
            y = pypto.conv(pypto.view(a, [1, 4, 9, 9], [i, 0, 0, 0]), b, pypto.DT_FP32, [2, 2], [1, 1, 1, 1], [1, 1])
            pypto.assemble(pypto.mul(y, 2.0), [i, 0, 0, 0], out)

    for n in (3, 1):
        x = _data((n, 4, 9, 9), torch.float32, 9 + n)
        out = torch.zeros(n, 6, 5, 5)
        f(x, w, out)
        _close(out, 2 * _reference(x, w, None, [2, 2], [1] * 4, [1, 1], 1), torch.float32)


def test_dynamic_batch_dim_of_the_conv_itself():
    w = _data((3, 2, 2, 2), torch.float32, 10)

    @pypto.jit
    def f(a: pypto.Tensor((D, 2, 6, 7), pypto.DT_FP32), b: pypto.Tensor((3, 2, 2, 2), pypto.DT_FP32)):
        return pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0, 1, 1, 0], [2, 1])

    for n in (2, 5):
        x = _data((n, 2, 6, 7), torch.float32, n)
        _close(f(x, w), _reference(x, w, None, [1, 1], [0, 1, 1, 0], [2, 1], 1), torch.float32)


def test_conv_tile_shapes_round_trip():
    l1 = pypto_impl.TileL1Info(tileHin=4, tileHout=4, tileWin=8, tileWout=8, tileCinFmap=16, tileCinWeight=32,
                               tileN=16, tileBatch=1)
    l0 = pypto_impl.TileL0Info(tileH=2, tileW=8, tileK=16, tileN=16)
    seen = {}

    @pypto.jit
    def f(a: pypto.Tensor((1, 2, 4, 4), pypto.DT_FP32), b: pypto.Tensor((2, 2, 1, 1), pypto.DT_FP32)):
        pypto.set_conv_tile_shapes(l1)
        seen["l1 only"] = pypto.get_conv_tile_shapes()
        pypto.set_conv_tile_shapes(l1, l0)
        seen["both"] = pypto.get_conv_tile_shapes()
        return pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0, 0, 0, 0], [1, 1])

    x, w = _data((1, 2, 4, 4), torch.float32, 11), _data((2, 2, 1, 1), torch.float32, 12)
    _close(f(x, w), _reference(x, w, None, [1, 1], [0] * 4, [1, 1], 1), torch.float32)
    assert seen["l1 only"] == (l1, pypto_impl.TileL0Info(), False)
    assert seen["both"] == (l1, l0, True)
    assert repr(l0) == "TileL0Info([2, 8, 16, 16])" and l1.tileCinWeight == 32


@pytest.mark.parametrize("call,match", [
    (lambda a, b: pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0, 0], [1, 1]), r"paddings must have 4 entries.*\[0, 0\]"),
    (lambda a, b: pypto.conv(a, b, pypto.DT_FP32, [0, 1], [0] * 4, [1, 1]), r"strides entries must be >= 1"),
    (lambda a, b: pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0] * 4, [1, 1], groups=3), r"groups \(3\) must divide"),
    (lambda a, b: pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0] * 4, [9, 1]), r"spatial dim 0 of size 6 padded by \[0, 0\] is smaller than the dilated kernel \(19\)"),
    (lambda a, b: pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0] * 4, [1, 1], transposed=True), r"transposed=True .*not supported yet"),
    (lambda a, b: pypto.conv(a, b, pypto.DT_INT32, [1, 1], [0] * 4, [1, 1]), r"out_dtype must be"),
    (lambda a, b: pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0] * 4, [1, 1], extend_params={"bias": a}),
     r"unknown extend_params key 'bias'"),
    (lambda a, b: pypto.conv(a, pypto.reshape(b, [4, 2, 9]), pypto.DT_FP32, [1], [0, 0], [1]),
     r"input_conv and weight must both have rank 3, 4 or 5 .*found 4 and 3"),
])
def test_bad_arguments_name_the_op_and_the_value(call, match):
    @pypto.jit
    def f(a: pypto.Tensor((1, 2, 6, 6), pypto.DT_FP32), b: pypto.Tensor((4, 2, 3, 3), pypto.DT_FP32)):
        return call(a, b)

    with pytest.raises(pypto.PyptoError, match=r"pypto\.conv at .*test_conv\.py:\d+: " + match):
        f(torch.zeros(1, 2, 6, 6), torch.zeros(4, 2, 3, 3))


def test_bad_input_dtype_and_tile_info():
    @pypto.jit
    def f(a: pypto.Tensor((1, 2, 4, 4), pypto.DT_INT32), b: pypto.Tensor((2, 2, 1, 1), pypto.DT_INT32)):
        return pypto.conv(a, b, pypto.DT_FP32, [1, 1], [0] * 4, [1, 1])

    with pytest.raises(pypto.UserTypeError, match=r"input_conv must be DT_FP32, DT_FP16 or DT_BF16, found DT_INT32"):
        f(torch.zeros(1, 2, 4, 4, dtype=torch.int32), torch.zeros(2, 2, 1, 1, dtype=torch.int32))
    with pytest.raises(pypto.UserTypeError, match=r"tile_l1_info must be a pypto.pypto_impl.TileL1Info, found list"):
        pypto.set_conv_tile_shapes([1, 2, 3])
    with pytest.raises(pypto.UserTypeError, match=r"TileL0Info: tileK must be an int, found float"):
        pypto_impl.TileL0Info(tileH=1, tileW=16, tileK=1.5, tileN=16)


def test_set_options_takes_a_conv_tile():
    l1 = pypto_impl.TileL1Info(tileHin=2, tileHout=2, tileWin=16, tileWout=16, tileCinFmap=16, tileCinWeight=16,
                               tileN=32, tileBatch=1)
    l0 = pypto_impl.TileL0Info(tileH=1, tileW=16, tileK=16, tileN=16)
    try:
        pypto.set_options(conv_tile_shapes=pypto.ConvTile(l1, l0, True))
        assert pypto.get_conv_tile_shapes() == (l1, l0, True)
        pypto.set_options(conv_tile_shapes=(l1,))
        assert pypto.get_conv_tile_shapes() == (l1, pypto_impl.TileL0Info(), False)
    finally:
        pypto.convolution._global_conv_tile = None
