"""PyPTO's signatures: var's positional order, zeros/ones(*size, dtype=), reshape/expand_clone
valid_shape=, assemble's list form, cast(mode=, satmode=), precision_type=, view(dtype=)."""

import pytest
import torch

import pypto


def _jit(fn_body, shape, dtype=pypto.DT_FP32, tile=(4, 8)):
    @pypto.jit
    def f(x: pypto.Tensor(shape, dtype)):
        pypto.set_vec_tile_shapes(*tile)
        return fn_body(x)

    return f


def test_var_takes_correction_before_keepdim():
    x = torch.randn(6, 13)
    got = _jit(lambda x: pypto.var(x, -1, 0, True), (6, 13))(x)
    torch.testing.assert_close(got, torch.var(x, -1, correction=0, keepdim=True), rtol=1e-5, atol=1e-6)
    got = _jit(lambda x: pypto.var(x, 0, keepdim=False, correction=2), (6, 13))(x)
    torch.testing.assert_close(got, torch.var(x, 0, correction=2), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"pypto.var: correction must be a number, found bool True \(PyPTO's order is "
                                        r"var\(x, dim, correction, keepdim\)\)"):
        _jit(lambda x: pypto.var(x, -1, True), (6, 13))(x)


@pytest.mark.parametrize("make, value", [
    (lambda: pypto.zeros(5, 7), 0.0), (lambda: pypto.ones([5, 7]), 1.0),
    (lambda: pypto.ones((5, 7), pypto.DT_FP32), 1.0), (lambda: pypto.zeros(5, 7, dtype=pypto.DT_FP32), 0.0),
])
def test_zeros_and_ones_take_sizes_as_pypto(make, value):
    x = torch.randn(5, 7)
    torch.testing.assert_close(_jit(lambda x: x + make(), (5, 7))(x), x + value)


def test_zeros_dtype_and_errors():
    x = torch.randn(5, 7, dtype=torch.float16)
    got = _jit(lambda x: x + pypto.ones(5, 7, dtype=pypto.DT_FP16), (5, 7), pypto.DT_FP16)(x)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, x + 1)
    with pytest.raises(TypeError, match="pypto.zeros: dtype given twice"):
        _jit(lambda x: x + pypto.zeros(5, 7, pypto.DT_FP16, dtype=pypto.DT_FP16), (5, 7), pypto.DT_FP16)(x)


def test_reshape_and_expand_clone_with_a_valid_shape():
    @pypto.jit
    def f(x: pypto.Tensor((4, 6), pypto.DT_FP32), r: pypto.Tensor((6, 4), pypto.DT_FP32),
          e: pypto.Tensor((3, 4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4)
        r[:] = pypto.exp(pypto.reshape(x, [6, 4], valid_shape=[5, 4], inplace=True))
        pypto.set_vec_tile_shapes(1, 2, 4)
        e[:] = pypto.expand_clone(x, [3, 4, 6], valid_shape=[2, 4, 6]) * 2

    x = torch.randn(4, 6)
    r, e = torch.full((6, 4), -1.0), torch.full((3, 4, 6), -1.0)
    f(x, r, e)
    torch.testing.assert_close(r[:5], torch.exp(x.reshape(6, 4))[:5])
    assert (r[5:] == -1).all()  # outside the valid part: not written
    torch.testing.assert_close(e[:2], (x * 2).expand(2, 4, 6))
    assert (e[2:] == -1).all()


def test_assemble_list_form_and_parallel():
    @pypto.jit
    def f(a: pypto.Tensor((3, 8), pypto.DT_FP32), b: pypto.Tensor((5, 8), pypto.DT_FP32),
          out: pypto.Tensor((8, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        pypto.assemble([(a * 2, [0, 0]), (b + 1, [3, 0])], out, parallel=True)

    a, b, out = torch.randn(3, 8), torch.randn(5, 8), torch.zeros(8, 8)
    f(a, b, out)
    torch.testing.assert_close(out, torch.cat([a * 2, b + 1]))


@pytest.mark.parametrize("mode, ref", [
    (pypto.CastMode.CAST_RINT, torch.round), (pypto.CastMode.CAST_FLOOR, torch.floor),
    (pypto.CastMode.CAST_CEIL, torch.ceil), (pypto.CastMode.CAST_TRUNC, torch.trunc),
    (pypto.CastMode.CAST_ROUND, lambda t: torch.sign(t) * torch.floor(t.abs() + 0.5)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cast_rounding_modes_to_int(mode, ref, dtype):
    vals = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.49999997, 0.49999997, 7.7, -7.7, 3.0, 0.0, 99.5],
                        dtype=dtype)
    x = vals.repeat(3)[:37].reshape(1, 37)  # 37: not a multiple of the tile
    dt = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16}[dtype]
    got = _jit(lambda x: pypto.cast(x, pypto.DT_INT32, mode), (1, 37), dt, tile=(1, 16))(x)
    assert got.dtype == torch.int32
    torch.testing.assert_close(got, ref(x.double()).to(torch.int32))
    same = _jit(lambda x: pypto.cast(x, dt, mode=mode), (1, 37), dt, tile=(1, 16))(x)  # to the same float
    torch.testing.assert_close(same, ref(x.double()).to(dtype))


def test_cast_saturation():
    x = torch.tensor([[1e10, -1e10, float("nan"), 300.0, -300.0, 2.7, -2.7, 127.9, float("inf"), -float("inf")]])
    sat = _jit(lambda x: pypto.cast(x, pypto.DT_INT8, satmode=pypto.SaturationMode.ON), (1, 10), tile=(1, 8))(x)
    assert sat.tolist() == [[127, -128, 0, 127, -128, 2, -2, 127, 127, -128]]
    off = _jit(lambda x: pypto.cast(x, pypto.DT_INT8, pypto.CastMode.CAST_NONE, pypto.SaturationMode.OFF),
               (1, 10), tile=(1, 8))(x)
    assert off[0, 3] == 44 and off[0, 5] == 2  # the low bits, as torch's .to(torch.int8) on x86
    with pytest.raises(NotImplementedError, match=r"pypto.cast: mode CastMode.CAST_FLOOR from DT_INT32 to DT_FP32 is "
                                                  r"not supported yet"):
        _jit(lambda x: pypto.cast(pypto.cast(x, pypto.DT_INT32), pypto.DT_FP32, pypto.CastMode.CAST_FLOOR),
             (1, 10), tile=(1, 8))(x)
    with pytest.raises(TypeError, match=r"pypto.cast: mode must be a pypto.CastMode, found 'floor'"):
        _jit(lambda x: pypto.cast(x, pypto.DT_INT8, "floor"), (1, 10), tile=(1, 8))(x)


def test_precision_type_and_view_dtype():
    x = torch.rand(4, 8) + 0.5
    got = _jit(lambda x: pypto.exp(x, pypto.PrecisionType.HIGH_PRECISION) +
               pypto.div(x, 2.0, precision_type=pypto.PrecisionType.INTRINSIC) + pypto.sqrt(x), (4, 8))(x)
    torch.testing.assert_close(got, torch.exp(x) + x / 2 + torch.sqrt(x))
    with pytest.raises(TypeError, match=r"pypto.log: precision_type must be a pypto.PrecisionType, found 'high'"):
        _jit(lambda x: pypto.log(x, "high"), (4, 8))(x)
    got = _jit(lambda x: pypto.view(x, dtype=pypto.DT_FP32) * 2, (4, 8))(x)
    torch.testing.assert_close(got, x * 2)  # the same dtype: no bitcast (test_view_dtype.py tests the rest)


def test_element_constants():
    e = pypto.element(pypto.DT_FP32, 2)
    assert e.value == 2.0 and isinstance(e.value, float) and e.dtype == pypto.DT_FP32
    assert pypto.Element(pypto.DT_INT32, 3.7).value == 3 and repr(e) == "pypto.Element(DT_FP32, 2.0)"
    x = torch.randn(4, 8)
    got = _jit(lambda x: pypto.where(x > pypto.Element(pypto.DT_FP32, 0.0), pypto.mul(x, e),
                                     pypto.Element(pypto.DT_FP32, -1.0)) + pypto.full([4, 8], e, pypto.DT_FP32),
               (4, 8))(x)
    torch.testing.assert_close(got, torch.where(x > 0, x * 2, -1.0) + 2)
    with pytest.raises(TypeError, match=r"pypto.Element: the value must be a Python number, found str"):
        pypto.Element(pypto.DT_FP32, "1")
    assert pypto.Element(pypto.DT_HF8, 1.5).value == 1.5  # the 8-bit floats hold floats
    c = [pypto.convert_to_element(v) for v in (7, -2**31, 2**31, 2.5, True)]
    assert [(e.dtype, e.value) for e in c] == [(pypto.DT_INT32, 7), (pypto.DT_INT32, -2**31), (pypto.DT_INT64, 2**31),
                                               (pypto.DT_FP32, 2.5), (pypto.DT_INT32, 1)]
