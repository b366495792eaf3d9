"""Integer quantisation with PyPTO's signatures: ``quantize`` and ``dequantize``.

Both are elementwise compositions (a multiply by the broadcast scale, the zero point, a round half
to even and a clamp to the type's range), so they fuse with what produces or consumes them. The
scale (and the zero points) may be:

- a number, or a tensor of one element: one scale for the whole tensor;
- a tensor with one dim less than the input (PyPTO's form): ``axis=-1`` takes shape
  ``[..., row]`` (one scale per row), ``axis=-2`` takes ``[..., col]`` (one per column);
- a tensor of the input's rank (groups): ``axis=-1`` takes ``[..., row, G]``, each row cut into G
  groups of ``col / G`` consecutive elements; ``axis=-2`` takes ``[..., G, col]``, each column cut
  into G groups of ``row / G``. G must divide that dim.
"""

from __future__ import annotations

import builtins
import numbers

from pypto import _dtypes
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.tensor import Tensor
from pypto.enums import DequantScaleRoundingMode
from pypto.ops import _at, _documented, _elementwise, _reduce, _unary, cast, clip, round as round_, where
from pypto.shape_ops import _bitcast, _is_static, assemble, clone, full, reshape, transpose, view

_RANGES = {_dtypes.DT_INT8: (-128, 127), _dtypes.DT_UINT8: (0, 255), _dtypes.DT_INT4: (-8, 7)}
_FLOATS = (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16)
_INTS = (_dtypes.DT_INT8, _dtypes.DT_UINT8, _dtypes.DT_INT4, _dtypes.DT_INT16, _dtypes.DT_INT32)


def _shape(t) -> list:
    return list(t.shape)


def _axis(op: str, x: Tensor, axis) -> int:
    rank = len(x.shape)
    if isinstance(axis, builtins.bool) or not isinstance(axis, numbers.Integral):
        raise UserTypeError(f"{_at(op)}: axis must be an int, found {type(axis).__name__} {axis!r}")
    a = axis + rank if axis < 0 else axis
    if a not in (rank - 1, rank - 2) or a < 0:
        allowed = "-1" if rank == 1 else f"-1, -2, {rank - 1} or {rank - 2}"
        raise UserError(f"{_at(op)}: axis must be {allowed} for a rank-{rank} input, found {axis}")
    return a - rank  # -1 or -2


class _Layout:
    """How the scale meets the input: the input reshaped (groups) and the scale's broadcast shape."""

    def __init__(self, op: str, x: Tensor, scale, axis: int, what: str = "scale"):
        self.x_shape = _shape(x)
        self.work_shape = None  # the input's shape while the groups have a dim of their own
        self.kind = "tensor"
        if isinstance(scale, Tensor):
            s = _shape(scale)
            rank = len(self.x_shape)
            if _ones(s):
                self.kind = "tensor"
            elif len(s) == rank - 1:
                want = self.x_shape[:-1] if axis == -1 else self.x_shape[:-2] + self.x_shape[-1:]
                if not _same(s, want):
                    raise UserError(f"{_at(op)}: {what} of shape {s} does not fit the input {self.x_shape} with "
                                    f"axis={axis}: expected {want}")
                self.kind = "row" if axis == -1 else "col"
            elif len(s) == rank and rank >= (1 if axis == -1 else 2):
                d = rank + axis  # the grouped dim
                g = s[d]
                other = [s[k] for k in range(rank) if k != d]
                want_other = [self.x_shape[k] for k in range(rank) if k != d]
                if not _same(other, want_other):
                    raise UserError(f"{_at(op)}: {what} of shape {s} does not fit the input {self.x_shape} with "
                                    f"axis={axis}: groups along dim {d} need the other dims {want_other}")
                n = self.x_shape[d]
                if not (_is_static(g) and _is_static(n)):
                    raise UserError(f"{_at(op)}: groups need a static dim {d} and group count, found {n} and {g}")
                if g <= 0 or n % g:
                    raise UserError(f"{_at(op)}: the {g} groups of {what} do not divide dim {d} of the input "
                                    f"({n} elements)")
                self.kind = "group"
                self.groups, self.dim = g, d
                self.work_shape = self.x_shape[:d] + [g, n // g] + self.x_shape[d + 1:]
            else:
                raise UserError(f"{_at(op)}: {what} must have rank {rank - 1} (one {what} per "
                                f"{'row' if axis == -1 else 'column'}), rank {rank} (groups) or one element, "
                                f"found shape {s}")

    @classmethod
    def groups_of(cls, x: Tensor, d: int, g: int) -> "_Layout":
        """The layout of ``g`` groups along dim ``d`` of ``x`` (which they divide)."""
        self = cls.__new__(cls)
        self.x_shape = _shape(x)
        self.kind, self.groups, self.dim = "group", g, d
        n = self.x_shape[d]
        self.work_shape = self.x_shape[:d] + [g, n // g] + self.x_shape[d + 1:]
        return self

    def operand(self, op: str, t, what: str = "scale"):
        """The scale or zero points, shaped to broadcast against the (working) input."""
        if not isinstance(t, Tensor):
            return float(t)
        if t.dtype not in _FLOATS:
            raise UserTypeError(f"{_at(op)}: {what} must be a float tensor, found {t.dtype.name}")
        t = cast(t, _dtypes.DT_FP32) if t.dtype != _dtypes.DT_FP32 else t
        s = _shape(t)
        if self.kind == "tensor":
            rank = len(self.work_shape or self.x_shape)
            return t if len(s) == rank else reshape(t, [1] * rank)
        if self.kind == "row":
            return reshape(t, s + [1])
        if self.kind == "col":
            return reshape(t, s[:-1] + [1] + s[-1:])
        return reshape(t, s[:self.dim + 1] + [1] + s[self.dim + 1:])  # group: [.., G, 1, ..]

    def to_work(self, x: Tensor) -> Tensor:
        """The input with the groups as a dim of their own; the vec tile gains a dim to match (the
        grouped dim's tile cut into whole groups), until from_work."""
        if not self.work_shape:
            return x
        self.saved_tile = x._ctx.vec_tile
        tile = list(self.saved_tile or [])
        rank = len(self.x_shape)
        if len(tile) >= rank:
            lead, tail = tile[:len(tile) - rank], tile[len(tile) - rank:]
            t, size = tail[self.dim], self.x_shape[self.dim] // self.groups
            tail[self.dim:self.dim + 1] = [builtins.max(1, t // size), builtins.min(t, size)]
            x._ctx.vec_tile = lead + tail
        return reshape(x, self.work_shape)

    def from_work(self, x: Tensor) -> Tensor:
        if not self.work_shape:
            return x
        x._ctx.vec_tile = self.saved_tile
        return reshape(x, self.x_shape)


def _ones(shape) -> bool:
    """A shape of one element ([], [1], [1, 1], ...)."""
    return all(_is_static(d) and d == 1 for d in shape)


def _same(a, b) -> bool:
    return len(a) == len(b) and all((p == q) if _is_static(p) and _is_static(q) else str(p) == str(q)
                                    for p, q in zip(a, b))


def _check_number(op: str, what: str, v) -> None:
    if isinstance(v, builtins.bool) or not isinstance(v, (numbers.Real, Tensor)):
        raise UserTypeError(f"{_at(op)}: {what} must be a tensor or a number, found {type(v).__name__} {v!r}")


def _checked(op: str, input, dtypes, dtype_names: str, otype, otypes, otype_names: str, scale, axis,
             zero_points) -> tuple:
    """Checks quantize's or dequantize's arguments; the layouts of the scale and of the zero points
    (None without zero points). Each operand is shaped by its own layout; the input is worked in the
    grouped one's, if any (see _work)."""
    if not isinstance(input, Tensor):
        raise UserTypeError(f"{_at(op)}: input must be a pypto.Tensor, found {type(input).__name__}")
    if input.dtype not in dtypes:
        raise UserTypeError(f"{_at(op)}: input must be {dtype_names}, found {input.dtype.name}")
    if otype not in otypes:
        raise UserTypeError(f"{_at(op)}: otype must be {otype_names}, found {getattr(otype, 'name', otype)!r}")
    a = _axis(op, input, axis)
    _check_number(op, "scale", scale)
    layout = _Layout(op, input, scale, a)
    if zero_points is None:
        return layout, None
    _check_number(op, "zero_points", zero_points)
    zp = _Layout(op, input, zero_points, a, "zero_points")
    # Groups give the input a dim of their own: the other operand must then be grouped the same way or
    # be one value.
    for grouped, other, name in ((layout, zp, "zero_points"), (zp, layout, "scale")):
        if grouped.work_shape and other.kind != "tensor" and other.work_shape != grouped.work_shape:
            raise NotSupportedError(f"{_at(op)}: grouped scales with {name} of another form ({other.kind}) are "
                                    "not supported yet (give both the same groups, or one value)")
    for one, grouped in ((zp, layout), (layout, zp)):
        if one.kind == "tensor" and grouped.work_shape:
            one.work_shape = grouped.work_shape  # a single value broadcasts at the grouped rank
    return layout, zp


def _work(sl: _Layout, zl) -> _Layout:
    """The layout the input is worked in: the grouped operand's, if any."""
    return zl if zl is not None and zl.kind == "group" else sl


@_documented
def quantize(input, scale, otype, axis, zero_points=None) -> Tensor:  # noqa: A002 - PyPTO's names
    op = "quantize"
    sl, zl = _checked(op, input, _FLOATS, "DT_FP32, DT_FP16 or DT_BF16", otype, tuple(_RANGES),
                      "DT_INT8, DT_UINT8 or DT_INT4", scale, axis, zero_points)
    layout = _work(sl, zl)
    x = layout.to_work(cast(input, _dtypes.DT_FP32) if input.dtype != _dtypes.DT_FP32 else input)
    y = _elementwise("mul", x, sl.operand(op, scale))
    if zero_points is not None:
        y = _elementwise("add", y, zl.operand(op, zero_points, "zero_points"))
    lo, hi = _RANGES[otype]
    q = cast(clip(round_(y), float(lo), float(hi)), otype)
    return layout.from_work(q)


@_documented
def dequantize(input, scale, otype, axis, zero_points=None) -> Tensor:  # noqa: A002 - PyPTO's names
    op = "dequantize"
    sl, zl = _checked(op, input, _INTS, "DT_INT8, DT_UINT8, DT_INT4, DT_INT16 or DT_INT32", otype, _FLOATS,
                      "DT_FP32, DT_FP16 or DT_BF16", scale, axis, zero_points)
    layout = _work(sl, zl)
    y = layout.to_work(cast(input, _dtypes.DT_FP32))
    if zero_points is not None:
        y = _elementwise("sub", y, zl.operand(op, zero_points, "zero_points"))
    y = _elementwise("mul", y, sl.operand(op, scale))
    y = layout.from_work(y)
    return cast(y, otype) if otype != _dtypes.DT_FP32 else y


# The MX element formats: the largest power of two they hold, their largest value and its mantissa
# bits (as an fp32), the result's dtype, and the block of 32 elements that shares one exponent.
_MX = {_dtypes.DT_FP8E4M3: (8, 448.0, 0x600000, _dtypes.DT_FP8E4M3),
       _dtypes.DT_FP4_E2M1X2: (2, 6.0, 0x400000, _dtypes.DT_FP4_E2M1)}
_MX_BLOCK = 32


@_documented
def quant_mx(input, quant_dtype=_dtypes.DT_FP8E4M3, mode=DequantScaleRoundingMode.ROUND_DOWN, axis=-1,  # noqa: A002
             performance_mode=True) -> tuple:
    op = "quant_mx"
    if not isinstance(input, Tensor):
        raise UserTypeError(f"{_at(op)}: input must be a pypto.Tensor, found {type(input).__name__}")
    if input.dtype not in _FLOATS:
        raise UserTypeError(f"{_at(op)}: input must be DT_FP32, DT_FP16 or DT_BF16, found {input.dtype.name}")
    if quant_dtype not in _MX:
        raise UserTypeError(f"{_at(op)}: quant_dtype must be DT_FP8E4M3 or DT_FP4_E2M1X2, found "
                            f"{getattr(quant_dtype, 'name', quant_dtype)!r}")
    if quant_dtype == _dtypes.DT_FP4_E2M1X2 and input.dtype == _dtypes.DT_FP32:
        raise UserTypeError(f"{_at(op)}: quant_dtype DT_FP4_E2M1X2 takes a DT_FP16 or DT_BF16 input, found DT_FP32")
    if not isinstance(mode, DequantScaleRoundingMode):
        raise UserTypeError(f"{_at(op)}: mode must be pypto.ROUND_DOWN or pypto.ROUND_UP, found {mode!r}")
    if not isinstance(performance_mode, builtins.bool):
        raise UserTypeError(f"{_at(op)}: performance_mode must be a bool, found {performance_mode!r}")
    rank = len(input.shape)
    if not 1 <= rank <= 4:
        raise UserError(f"{_at(op)}: input must have 1 to 4 dims, found shape {_shape(input)}")
    a = _axis(op, input, axis)
    d = rank + a
    n = input.shape[d]
    if not _is_static(n):
        raise UserError(f"{_at(op)}: the quantised dim {d} must be static, found {n}")
    if a == -2 and n % 64:
        raise UserError(f"{_at(op)}: axis=-2 needs dim {d} to be a multiple of 64, found {n}")
    if n % _MX_BLOCK:
        raise NotSupportedError(f"{_at(op)}: a last dim of {n} (not a multiple of {_MX_BLOCK}) is not supported yet")
    top, largest, mantissa, qtype = _MX[quant_dtype]
    groups = n // _MX_BLOCK
    layout = _Layout.groups_of(input, d, groups)
    x = layout.to_work(cast(input, _dtypes.DT_FP32) if input.dtype != _dtypes.DT_FP32 else input)
    peak = _reduce("amax", _unary("abs", x), d + 1, True)  # NaN when the group holds one
    bits = _bitcast(peak, _dtypes.DT_INT32)
    exponent = _elementwise("bitwise_right_shift", bits, 23)  # the biased exponent (peak >= 0 or NaN)
    if mode == DequantScaleRoundingMode.ROUND_DOWN:
        # OCP: 2^floor(log2(peak)) / 2^top; infinity follows the same rule
        e = clip(_elementwise("sub", exponent, top), 0, 254)
    else:
        # NV: the least e with peak <= largest * 2^e: the exponents' difference, plus one when peak's
        # mantissa exceeds the largest value's
        above = cast(_elementwise("gt", _elementwise("bitwise_and", bits, 0x7FFFFF), mantissa), _dtypes.DT_INT32)
        e = clip(_elementwise("add", _elementwise("sub", exponent, top), above), 0, 254)
        e = where(_elementwise("eq", exponent, 255), 254, e)
    e = where(_unary("isnan", peak), 255, e)  # the E8M0 biased exponent
    # The multiplier 2^(127 - e), built from its bits: 2^-127 is a subnormal, NaN stays NaN.
    scaling_bits = where(_elementwise("eq", e, 254), 0x400000,
                         where(_elementwise("eq", e, 255), 0x7FC00000,
                               _elementwise("bitwise_left_shift", _elementwise("sub", 254, e), 23)))
    scaling = _bitcast(scaling_bits, _dtypes.DT_FP32)
    v = _elementwise("mul", x, scaling)
    if qtype == _dtypes.DT_FP4_E2M1:
        v = where(_unary("isnan", v), largest, v)  # E2M1 has no NaN: the largest code
    q = cast(clip(v, -largest, largest), qtype)
    codes = cast(e, _dtypes.DT_UINT8)  # [.., G, 1, ..]; read as E8M0 at the end
    lead = list(input.shape[:d])
    if a == -2:  # [.., G, 1, n] -> [.., G / 2, n, 2]: each column's pair of blocks last
        codes = clone(transpose(reshape(codes, lead + [groups // 2, 2, input.shape[-1]]), -1, -2))
    q = layout.from_work(q)  # (the vec tile is the caller's again)
    if a == -1:
        codes = reshape(codes, lead + [groups])
        if groups % 2:  # the pair of the last block has no second group: its slot holds 0
            padded = full(lead + [groups + 1], 0, _dtypes.DT_UINT8)
            assemble(codes, [0] * (len(lead) + 1), padded)
            codes = padded
        codes = reshape(codes, lead + [(groups + 1) // 2, 2])
    return q, _bitcast(codes, _dtypes.DT_FP8E8M0)


_MX_INPUTS = (_dtypes.DT_FP8E4M3, _dtypes.DT_FP8E5M2, _dtypes.DT_FP4_E2M1)
_MM_OUT = (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16)


def _mx_operand(op: str, name: str, m: Tensor, scale, trans: bool, scale_trans: bool) -> Tensor:
    """An MX matrix (mat_a or mat_b) as fp32 with its E8M0 block scales applied, in its stored
    orientation. PyPTO's scale shapes: [M, K / 64, 2] for mat_a and [K / 64, N, 2] for mat_b (each
    pair: two blocks of 32 along K); ``scale_trans`` swaps their first two dims."""
    is_a = name == "mat_a"
    s_name = "scale_a" if is_a else "scale_b"
    if not isinstance(scale, Tensor):
        raise UserTypeError(f"{_at(op)}: {s_name} must be a pypto.Tensor, found {type(scale).__name__}")
    if scale.dtype != _dtypes.DT_FP8E8M0:
        raise UserTypeError(f"{_at(op)}: {s_name} must be DT_FP8E8M0 for {m.dtype.name} matrices, found "
                            f"{scale.dtype.name}")
    r, c = _shape(m)
    k_last = is_a != trans  # the stored matrix has K as its last dim
    k, other = (c, r) if k_last else (r, c)
    if not _is_static(k) or k % _MX_BLOCK:
        raise NotSupportedError(f"{_at(op)}: a K of {k} (not a static multiple of 32) is not supported yet")
    pairs, blocks = (k + 63) // 64, k // _MX_BLOCK
    want = [other, pairs] if is_a else [pairs, other]
    want = (want[::-1] if scale_trans else want) + [2]
    if not _same(_shape(scale), want):
        raise UserError(f"{_at(op)}: {s_name} has shape {_shape(scale)}, expected {want} for {name} of shape "
                        f"{[r, c]}{' with scale_' + s_name[-1] + '_trans' if scale_trans else ''}")
    ctx = m._ctx
    saved = ctx.vec_tile
    try:
        # the scaling's own tiles (whole blocks of 32 along K), whatever tile the caller set
        ctx.vec_tile = [64, 8, 2]
        s = cast(scale, _dtypes.DT_FP32)
        if scale_trans == is_a:  # bring the other dim first: [other, K / 64, 2]
            s = transpose(s, 0, 1)
        ctx.vec_tile = [64, 64]
        s = reshape(s, [other, 2 * pairs])  # the block scales along K, one row per row of A (column of B)
        if 2 * pairs != blocks:  # the last pair's second block lies past K
            s = view(s, [other, blocks], [0, 0])
        if k_last:
            ctx.vec_tile = [16, 8, _MX_BLOCK]
            y = _elementwise("mul", reshape(cast(m, _dtypes.DT_FP32), [other, blocks, _MX_BLOCK]),
                             reshape(s, [other, blocks, 1]))
        else:
            ctx.vec_tile = [2, _MX_BLOCK, 64]
            y = _elementwise("mul", reshape(cast(m, _dtypes.DT_FP32), [blocks, _MX_BLOCK, other]),
                             reshape(transpose(s, 0, 1), [blocks, 1, other]))
        return reshape(y, [r, c])
    finally:
        ctx.vec_tile = saved


@_documented
def scaled_mm(mat_a, mat_b, out_dtype, scale_a, scale_b, *, a_trans=False, b_trans=False, scale_a_trans=False,
              scale_b_trans=False, c_matrix_nz=False, extend_params=None) -> Tensor:
    from pypto.ops import matmul

    op = "scaled_mm"
    for name, t in (("mat_a", mat_a), ("mat_b", mat_b)):
        if not isinstance(t, Tensor):
            raise UserTypeError(f"{_at(op)}: {name} must be a pypto.Tensor, found {type(t).__name__}")
    for name, flag in (("a_trans", a_trans), ("b_trans", b_trans), ("scale_a_trans", scale_a_trans),
                       ("scale_b_trans", scale_b_trans), ("c_matrix_nz", c_matrix_nz)):
        if not isinstance(flag, builtins.bool):
            raise UserTypeError(f"{_at(op)}: {name} must be a bool, found {flag!r}")
    if c_matrix_nz:
        raise NotSupportedError(f"{_at(op)}: c_matrix_nz=True (an NZ-format result) is not supported: results are "
                                "row-major (ND) here")
    if out_dtype not in _MM_OUT + (_dtypes.DT_INT8,):
        raise UserTypeError(f"{_at(op)}: out_dtype must be DT_FP32, DT_FP16, DT_BF16 or DT_INT8, found "
                            f"{getattr(out_dtype, 'name', out_dtype)!r}")
    ints = mat_a.dtype == _dtypes.DT_INT8
    if ints != (mat_b.dtype == _dtypes.DT_INT8) or not (ints or (mat_a.dtype in _MX_INPUTS and mat_b.dtype in
                                                                   _MX_INPUTS)):
        raise UserTypeError(f"{_at(op)}: mat_a and mat_b must both be DT_INT8, or each DT_FP8E4M3, DT_FP8E5M2 or "
                            f"DT_FP4_E2M1 (the two FP4 or neither), found {mat_a.dtype.name} and {mat_b.dtype.name}")
    if (mat_a.dtype == _dtypes.DT_FP4_E2M1) != (mat_b.dtype == _dtypes.DT_FP4_E2M1):
        raise UserTypeError(f"{_at(op)}: DT_FP4_E2M1 multiplies DT_FP4_E2M1 only, found {mat_a.dtype.name} and "
                            f"{mat_b.dtype.name}")
    if len(mat_a.shape) != 2 or len(mat_b.shape) != 2:
        raise NotSupportedError(f"{_at(op)}: batched matrices (shapes {_shape(mat_a)} and {_shape(mat_b)}) are not "
                                "supported yet (2-D only)")
    if ints:
        from pypto.ops import _cube_tiled

        acc = matmul(mat_a, mat_b, _dtypes.DT_INT32, a_trans, b_trans)
        ctx = acc._ctx
        if ctx.vec_tile is None:  # as matmul's epilogue: tiled by the cube tile's L1 m and n
            return _cube_tiled(ctx, acc, 0, 2, lambda: _int8_scaled(op, acc, scale_a, scale_b, out_dtype,
                                                                    extend_params))
        return _int8_scaled(op, acc, scale_a, scale_b, out_dtype, extend_params)
    a = _mx_operand(op, "mat_a", mat_a, scale_a, a_trans, scale_a_trans)
    b = _mx_operand(op, "mat_b", mat_b, scale_b, b_trans, scale_b_trans)
    return matmul(a, b, out_dtype, a_trans, b_trans, extend_params=extend_params)


def _int8_scaled(op: str, acc: Tensor, scale_a, scale_b, out_dtype, extend_params) -> Tensor:
    """The int32 product of scaled_mm's int8 form times its row and column scales, then the epilogue."""
    m, n = acc.shape
    y = cast(acc, _dtypes.DT_FP32)
    for name, s, want in (("scale_a", scale_a, [m, 1]), ("scale_b", scale_b, [1, n])):
        if isinstance(s, builtins.bool) or not isinstance(s, (Tensor, numbers.Real)):
            raise UserTypeError(f"{_at(op)}: {name} must be a float tensor or a number, found {type(s).__name__}")
        if isinstance(s, Tensor):
            if s.dtype not in _FLOATS:
                raise UserTypeError(f"{_at(op)}: {name} must be a float tensor, found {s.dtype.name}")
            shape = _shape(s)
            if not (_ones(shape) or _same(shape, want) or _same(shape, [want[0] * want[1]])):
                raise UserError(f"{_at(op)}: {name} has shape {shape}, expected {want} (or one element)")
            y = _elementwise("mul", y, reshape(cast(s, _dtypes.DT_FP32), [1, 1] if _ones(shape) else want))
        else:
            y = _elementwise("mul", y, float(s))
    return _matmul_epilogue(y, out_dtype, extend_params)


def _matmul_epilogue(y: Tensor, out_dtype, extend_params) -> Tensor:
    """extend_params (bias, scale, ReLU) on an fp32 product, then out_dtype, as matmul's epilogue."""
    from pypto.enums import ReLuType
    from pypto.ops import _epilogue

    params = dict(extend_params or {})
    relu = params.get("relu_type", ReLuType.NO_RELU)
    if not isinstance(relu, ReLuType):
        raise UserTypeError(f"pypto.scaled_mm: extend_params['relu_type'] must be a pypto.ReLuType, found {relu!r}")
    return _epilogue(y, params, out_dtype, relu)
