"""pypto.quantize and pypto.dequantize (the op families issue, item 7) against a torch reference:
per tensor, per row, per column and per group, int8, uint8 and int4, symmetric and asymmetric,
static and dynamic shapes, and the errors."""

import pytest
import torch

import pypto

RANGE = {pypto.DT_INT8: (-128, 127), pypto.DT_UINT8: (0, 255), pypto.DT_INT4: (-8, 7)}
TORCH = {pypto.DT_INT8: torch.int8, pypto.DT_UINT8: torch.uint8, pypto.DT_INT4: torch.int8}


def bcast(t, x_shape, axis):
    """The reference's broadcast of a scale of any accepted form to x_shape."""
    if not isinstance(t, torch.Tensor) or t.numel() == 1:
        return t if not isinstance(t, torch.Tensor) else t.reshape(())
    rank = len(x_shape)
    if t.dim() == rank - 1:
        return t.unsqueeze(-1) if axis == -1 else t.unsqueeze(-2)
    d = rank + axis
    return t.repeat_interleave(x_shape[d] // t.shape[d], dim=d)


def quantize_ref(x, scale, otype, axis, zp=None):
    y = x.float() * bcast(scale, x.shape, axis)
    if zp is not None:
        y = y + bcast(zp, x.shape, axis)
    lo, hi = RANGE[otype]
    return torch.clamp(torch.round(y), lo, hi).to(TORCH[otype])


def dequantize_ref(q, scale, axis, zp=None):
    y = q.float()
    if zp is not None:
        y = y - bcast(zp, q.shape, axis)
    return y * bcast(scale, q.shape, axis)


CASES = [  # (x shape, axis, scale shape): per row, per column, groups along each axis, per tensor
    ((37, 64), -1, (37,)),
    ((37, 64), -2, (64,)),
    ((37, 64), -1, (37, 4)),
    ((36, 20), -2, (3, 20)),
    ((37, 64), -1, (1,)),
    ((2, 9, 48), -1, (2, 9)),
    ((2, 9, 48), -2, (2, 48)),
    ((100,), -1, (1,)),
]


OTYPES = [pypto.DT_INT8, pypto.DT_UINT8, pypto.DT_INT4]


# Each form with both modes; the output types rotate over the forms (each type meets each mode).
@pytest.mark.parametrize("i", range(len(CASES)))
@pytest.mark.parametrize("asym", [False, True])
def test_quantize_and_dequantize_against_torch(i, asym):
    shape, axis, sshape = CASES[i]
    otype = OTYPES[(i + asym) % len(OTYPES)]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g) * 3
    scale = torch.rand(*sshape, generator=g) * 20 + 1  # PyPTO's scale multiplies
    zp = torch.randint(-4, 5, sshape, generator=g).float() if asym else None
    tile = (8, 16)[-len(shape):] if len(shape) <= 2 else (1, 8, 16)

    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32), s: pypto.Tensor(sshape, pypto.DT_FP32),
          z: pypto.Tensor(sshape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        q = pypto.quantize(x, s, otype, axis, z if asym else None)
        back = pypto.dequantize(q, 1.0 / s, pypto.DT_FP32, axis, z if asym else None)
        return q, pypto.cast(q, pypto.DT_INT32), back

    q, values, back = f(x, scale, zp if asym else torch.zeros(sshape))
    want = quantize_ref(x, scale, otype, axis, zp)
    assert torch.equal(values, want.int())
    if otype != pypto.DT_INT4:  # DT_INT4 comes back two to a byte
        assert q.dtype == want.dtype and torch.equal(q, want)
    torch.testing.assert_close(back, dequantize_ref(want, 1.0 / scale, axis, zp), rtol=1e-6, atol=1e-6)


def test_the_documented_example():
    # PyPTO's reference computes round(x * scale + zero_points); scale 1 and zero points 5 here.
    @pypto.jit
    def f(x: pypto.Tensor((3, 4), pypto.DT_FP32), s: pypto.Tensor((3,), pypto.DT_FP32),
          z: pypto.Tensor((3,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.quantize(x, s, pypto.DT_INT8, -1, None), pypto.quantize(x, s, pypto.DT_UINT8, -1, z)

    x = torch.tensor([[1.1, -2.2, 3.3, -4.4]] * 3)
    y1, y2 = f(x, torch.ones(3), torch.full((3,), 5.0))
    assert torch.equal(y1, torch.tensor([[1, -2, 3, -4]] * 3, dtype=torch.int8))
    assert torch.equal(y2, torch.tensor([[6, 3, 8, 1]] * 3, dtype=torch.uint8))


def test_rounding_is_half_to_even_and_values_saturate():
    @pypto.jit
    def f(x: pypto.Tensor((1, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 8)
        return (pypto.quantize(x, 1.0, pypto.DT_INT8, -1),
                pypto.cast(pypto.quantize(x, 0.5, pypto.DT_INT4, -1, 0.5), pypto.DT_INT32))

    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 300.0, -300.0, 126.5]])
    a, b = f(x)
    assert a.tolist() == [[0, 2, 2, 0, -2, 127, -128, 126]]
    assert b.tolist() == [[1, 1, 2, 0, -1, 7, -8, 7]]  # round(x / 2 + 0.5), clamped to [-8, 7]


def test_a_dynamic_dim_and_half_precision():
    rows_dim = pypto.frontend.dynamic("ROWS")

    @pypto.jit
    def f(x: pypto.Tensor((rows_dim, 32), pypto.DT_BF16), s: pypto.Tensor((rows_dim,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        q = pypto.quantize(x, s, pypto.DT_INT8, -1)
        return q, pypto.dequantize(q, pypto.div(1.0, s), pypto.DT_FP16, -1)

    for rows in (1, 13):
        x = torch.randn(rows, 32).to(torch.bfloat16)
        s = torch.rand(rows) * 30 + 1
        q, back = f(x, s)
        want = quantize_ref(x, s, pypto.DT_INT8, -1)
        assert torch.equal(q, want)
        torch.testing.assert_close(back, dequantize_ref(want, 1 / s, -1).half(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("scale_shape,zp_shape", [((16,), None), (None, (16,)), ((16, 4), None), (None, (16, 4)),
                                                  ((16, 4), (16, 4))])
def test_scale_and_zero_points_of_different_forms(scale_shape, zp_shape):
    """Each of scale and zero points broadcasts by its own form (None: a number)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 32, generator=g) * 4
    scale = torch.rand(*scale_shape, generator=g) * 5 + 1 if scale_shape else 2.5
    zp = torch.randint(-3, 4, zp_shape, generator=g).float() if zp_shape else 1.5
    s_shape, z_shape = scale_shape or (1,), zp_shape or (1,)  # unused tensors where a number is given

    @pypto.jit
    def f(x: pypto.Tensor((16, 32), pypto.DT_FP32), st: pypto.Tensor(s_shape, pypto.DT_FP32),
          zt: pypto.Tensor(z_shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        s = st if scale_shape else scale
        z = zt if zp_shape else zp
        q = pypto.quantize(x, s, pypto.DT_INT8, -1, z)
        return pypto.cast(q, pypto.DT_INT32), pypto.dequantize(q, s, pypto.DT_FP32, -1, z)

    q, back = f(x, scale if scale_shape else torch.ones(1), zp if zp_shape else torch.zeros(1))
    want = quantize_ref(x, scale, pypto.DT_INT8, -1, zp)
    assert torch.equal(q, want.int())
    torch.testing.assert_close(back, dequantize_ref(want, scale, -1, zp), rtol=1e-5, atol=1e-5)


def test_grouped_scales_with_zero_points_of_another_form_are_not_supported_yet():
    @pypto.jit
    def f(x: pypto.Tensor((16, 32), pypto.DT_FP32), s: pypto.Tensor((16, 4), pypto.DT_FP32),
          z: pypto.Tensor((16,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.quantize(x, s, pypto.DT_INT8, -1, z)

    with pytest.raises(pypto.NotSupportedError, match=r"pypto\.quantize at .*: grouped scales with zero_points of "
                                                      r"another form \(row\) are not supported yet"):
        f(torch.zeros(16, 32), torch.ones(16, 4), torch.zeros(16))


def test_errors_name_the_op_the_argument_and_the_value():
    def build(fn, xshape=(8, 12), xdt=pypto.DT_FP32, sshape=(8,)):
        @pypto.jit
        def f(x: pypto.Tensor(xshape, xdt), s: pypto.Tensor(sshape, pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8, 16)
            return fn(x, s)
        tdt = torch.float32 if xdt == pypto.DT_FP32 else torch.int8
        return lambda: f(torch.zeros(xshape, dtype=tdt), torch.ones(sshape))

    with pytest.raises(ValueError, match=r"pypto\.quantize at .*test_quantization\.py:\d+: the 5 groups of scale do "
                                         r"not divide dim 1 of the input \(12 elements\)"):
        build(lambda x, s: pypto.quantize(x, s, pypto.DT_INT8, -1), sshape=(8, 5))()
    with pytest.raises(ValueError, match=r"scale of shape \[9\] does not fit the input \[8, 12\] with axis=-1: "
                                         r"expected \[8\]"):
        build(lambda x, s: pypto.quantize(x, s, pypto.DT_INT8, -1), sshape=(9,))()
    with pytest.raises(TypeError, match=r"pypto\.quantize at .*: otype must be DT_INT8, DT_UINT8 or DT_INT4, "
                                        r"found 'DT_FP16'"):
        build(lambda x, s: pypto.quantize(x, s, pypto.DT_FP16, -1))()
    with pytest.raises(ValueError, match=r"axis must be -1, -2, 1 or 0 for a rank-2 input, found 2"):
        build(lambda x, s: pypto.quantize(x, s, pypto.DT_INT8, 2))()
    with pytest.raises(TypeError, match=r"pypto\.dequantize at .*: input must be DT_INT8, DT_UINT8, DT_INT4, "
                                        r"DT_INT16 or DT_INT32, found DT_FP32"):
        build(lambda x, s: pypto.dequantize(x, s, pypto.DT_FP32, -1))()
    with pytest.raises(TypeError, match=r"pypto\.dequantize at .*: otype must be DT_FP32, DT_FP16 or DT_BF16, "
                                        r"found 'DT_INT32'"):
        build(lambda x, s: pypto.dequantize(x, s, pypto.DT_INT32, -1), xdt=pypto.DT_INT8)()
