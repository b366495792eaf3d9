"""pad, fillpad, interleave and deinterleave against torch (the op families issue, item 5)."""

import math

import pytest
import torch

import pypto

DTYPES = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
          torch.int32: pypto.DT_INT32, torch.int8: pypto.DT_INT8, torch.uint8: pypto.DT_UINT8}


def _data(shape, dtype):
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(0, 100, shape, dtype=dtype)


@pytest.mark.parametrize("pads", [(0, 3), (2, 1), (0, 2, 0, 5), (1, 0, 3, 2), (1, 1, 0, 0, 2, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint8])
def test_pad_against_torch(pads, dtype):
    x = _data((3, 7, 10), dtype)  # no dim divides the tile
    value = -1.5 if dtype.is_floating_point else 7
    dt = DTYPES[dtype]

    @pypto.jit
    def f(x: pypto.Tensor((3, 7, 10), dt)):
        pypto.set_vec_tile_shapes(2, 4, 8)
        return pypto.pad(x, pads, value=value), pypto.pad(x, list(pads))

    a, b = f(x)
    assert torch.equal(a, torch.nn.functional.pad(x, pads, value=value))
    assert torch.equal(b, torch.nn.functional.pad(x, pads))


def test_pad_with_infinity_and_a_dynamic_dim():
    x = torch.randn(5, 6)

    @pypto.jit
    def f(x: pypto.Tensor((pypto.DYNAMIC, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.softmax(pypto.pad(x, (0, 2), value=float("-inf")), -1)  # padded columns get no weight

    got = f(x)
    assert got.shape == (5, 8)
    torch.testing.assert_close(got, torch.softmax(torch.nn.functional.pad(x, (0, 2), value=-math.inf), -1))
    assert torch.equal(got[:, 6:], torch.zeros(5, 2))
    assert f(torch.randn(3, 6)).shape == (3, 8)


def test_pad_errors():
    def build(pads, mode="constant", value=0, dt=pypto.DT_FP32):
        @pypto.jit
        def f(x: pypto.Tensor((4, 4), dt)):
            pypto.set_vec_tile_shapes(4, 4)
            return pypto.pad(x, pads, mode, value)
        return lambda: f(torch.zeros(4, 4, dtype=torch.float32 if dt == pypto.DT_FP32 else torch.int8))

    with pytest.raises(ValueError, match=r"pypto\.pad at .*test_data_movement\.py:\d+: pad \[1, 2, 3\] must hold a "
                                         r"\(before, after\) pair for each of 1 to 2 trailing dims"):
        build((1, 2, 3))()
    with pytest.raises(ValueError, match=r"pad \[0, -1\] has a negative size"):
        build((0, -1))()
    with pytest.raises(TypeError, match=r"pad must be a list or tuple of ints, found \(0, 1.5\)"):
        build((0, 1.5))()
    with pytest.raises(pypto.NotSupportedError, match=r"mode 'reflect' is not supported yet \(only 'constant'\)"):
        build((0, 1), "reflect")()
    with pytest.raises(ValueError, match=r"mode must be 'constant', .* found 'edge'"):
        build((0, 1), "edge")()
    with pytest.raises(ValueError, match=r"value 0.5 is not an integer, for the integer dtype DT_INT8"):
        build((0, 1), value=0.5, dt=pypto.DT_INT8)()
    with pytest.raises(ValueError, match=r"value 300 does not fit DT_INT8 \(-128 to 127\)"):
        build((0, 1), value=300, dt=pypto.DT_INT8)()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_fillpad_fills_past_the_valid_shape(dtype):
    x = _data((6, 9), dtype)
    dt = DTYPES[dtype]
    value = float("-inf") if dtype.is_floating_point else -3

    @pypto.jit
    def f(x: pypto.Tensor((6, 9), dt)):
        pypto.set_vec_tile_shapes(4, 8)
        v = pypto.view(x, [6, 9], [0, 0], valid_shape=[4, 5])
        return pypto.fillpad(v, "constant", "-inf" if dtype.is_floating_point else value), x.fillpad(value=1)

    a, b = f(x)
    want = torch.full((6, 9), value, dtype=dtype)
    want[:4, :5] = x[:4, :5]
    assert torch.equal(a, want)
    assert torch.equal(b, x)  # all of x is valid: nothing to fill


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.int32])
def test_interleave_and_deinterleave_are_inverse_and_match_torch(dtype):
    a, b = _data((5, 12), dtype), _data((5, 12), dtype)
    dt = DTYPES[dtype]

    @pypto.jit
    def f(a: pypto.Tensor((5, 12), dt), b: pypto.Tensor((5, 12), dt)):
        pypto.set_vec_tile_shapes(4, 8)
        lo, hi = pypto.interleave(a, b)
        even, odd = pypto.deinterleave(lo, hi)
        e1, o1 = pypto.deinterleave(a)
        return lo, hi, even, odd, e1, o1

    lo, hi, even, odd, e1, o1 = f(a, b)
    stream = torch.stack([a, b], -1).reshape(5, 24)
    assert torch.equal(lo, stream[:, :12])
    assert torch.equal(hi, stream[:, 12:])
    assert torch.equal(even, a)
    assert torch.equal(odd, b)
    assert torch.equal(e1, a[:, 0::2])
    assert torch.equal(o1, a[:, 1::2])


def test_interleave_errors():
    @pypto.jit
    def odd(a: pypto.Tensor((2, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 8)
        return pypto.deinterleave(a)

    with pytest.raises(ValueError, match=r"pypto\.deinterleave at .*: the last dim of input must be even, found 5"):
        odd(torch.zeros(2, 5))

    @pypto.jit
    def mismatch(a: pypto.Tensor((2, 4), pypto.DT_FP32), b: pypto.Tensor((2, 4), pypto.DT_FP16)):
        pypto.set_vec_tile_shapes(2, 8)
        return pypto.interleave(a, b)

    with pytest.raises(ValueError, match=r"other \(DT_FP16 \[2, 4\]\) must have input's dtype and shape "
                                         r"\(DT_FP32 \[2, 4\]\)"):
        mismatch(torch.zeros(2, 4), torch.zeros(2, 4).half())


PACK_DTYPES = {torch.float32: pypto.DT_FP32, torch.bfloat16: pypto.DT_BF16, torch.float16: pypto.DT_FP16,
               torch.int64: pypto.DT_INT64, torch.int16: pypto.DT_INT16, torch.uint8: pypto.DT_UINT8,
               torch.int32: pypto.DT_INT32}


PACK_SHAPES = [(37,), (3, 7), (2, 3, 5), (2, 1, 3, 4)]


@pytest.mark.parametrize("i", range(len(PACK_DTYPES)))
def test_pack_gives_the_bytes_and_unpack_reads_them_back(i):
    dtype, shape = list(PACK_DTYPES)[i], PACK_SHAPES[i % len(PACK_SHAPES)]
    dt = PACK_DTYPES[dtype]
    x = _data(shape, dtype) if dtype != torch.int64 else torch.randint(-2 ** 62, 2 ** 62, shape)

    @pypto.jit
    def f(x: pypto.Tensor(shape, dt)):
        pypto.set_vec_tile_shapes(*(2, 4, 4, 8)[-len(shape):])
        b = pypto.pack(x)
        return b, pypto.unpack(b, dt), pypto.unpack(b, pypto.DT_UINT8)

    b, back, same = f(x)
    assert b.dtype == torch.uint8 and torch.equal(b, x.reshape(-1).view(torch.uint8))
    assert torch.equal(back, x.reshape(-1)) and torch.equal(same, b)


def test_pack_of_a_transposed_view_and_a_dynamic_length():
    @pypto.jit
    def f(x: pypto.Tensor((pypto.DYNAMIC, 6), pypto.DT_FP32), y: pypto.Tensor((5, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.pack(pypto.transpose(x, 0, 1)), pypto.unpack(pypto.pack(pypto.transpose(y, 0, 1)), pypto.DT_INT32)

    y = torch.randn(5, 6)
    for rows in (1, 5):
        x = torch.randn(rows, 6)
        b, ints = f(x, y)
        assert torch.equal(b, x.t().contiguous().reshape(-1).view(torch.uint8))
        assert torch.equal(ints, y.t().contiguous().reshape(-1).view(torch.int32))

    @pypto.jit
    def g(x: pypto.Tensor((pypto.DYNAMIC, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.unpack(pypto.pack(x), pypto.DT_INT32)

    with pytest.raises(pypto.NotSupportedError, match=r"pypto\.unpack at .*: unpacking a dynamic number of bytes "
                                                      r".* into DT_INT32 is not supported yet"):
        g(torch.randn(3, 6))


def test_pack_and_unpack_errors():
    def build(fn, shape=(8,), dt=pypto.DT_UINT8):
        @pypto.jit
        def f(x: pypto.Tensor(shape, dt)):
            pypto.set_vec_tile_shapes(8, 8)
            return fn(x)
        return lambda: f(torch.zeros(shape, dtype=torch.bool if dt == pypto.DT_BOOL else torch.uint8))

    with pytest.raises(TypeError, match=r"pypto\.pack at .*test_data_movement\.py:\d+: input must be one of DT_BF16, "
                                        r".*, found DT_BOOL"):
        build(pypto.pack, dt=pypto.DT_BOOL)()
    with pytest.raises(TypeError, match=r"pypto\.unpack at .*: input must be a 1-D DT_UINT8 tensor, found DT_UINT8 "
                                        r"of shape \[2, 4\]"):
        build(lambda x: pypto.unpack(x, pypto.DT_INT16), shape=(2, 4))()
    with pytest.raises(ValueError, match=r"pypto\.unpack at .*: 7 bytes do not divide into DT_INT32 elements of 4 "
                                         r"bytes"):
        build(lambda x: pypto.unpack(x, pypto.DT_INT32), shape=(7,))()
    with pytest.raises(TypeError, match=r"dtype must be one of DT_BF16, .*, found 'DT_INT4'"):
        build(lambda x: pypto.unpack(x, pypto.DT_INT4))()
