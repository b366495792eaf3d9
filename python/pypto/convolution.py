"""Convolution with PyPTO's signature: ``conv`` (1-, 2- and 3-D, NCL/NCHW/NCDHW), and the conv tile
configuration ``set_conv_tile_shapes`` / ``get_conv_tile_shapes``.

A 2-D convolution with stride 1 and one group is an implicit GEMM: the input is padded, the
weight's taps are moved outermost (``[Cout, K * Cin]``, K the kernel's taps), and one tensor op,
``conv2d_tiles``, multiplies them per block of output channels and whole output rows, loading for
each (tap, channel block) the input rows that tap reads as the matmul's operand: no im2col tensor
exists. Other convolutions lower to the matmul path through an explicit im2col: a new tensor
``col`` of shape ``[N, Cin * K, *out]`` is filled by one strided copy per tap (a view of the padded
input into its rows of ``col``), and the weights ``[Cout, Cin * K]`` multiply it in one batched
matmul per group. Both accumulate in fp32; the bias, scale and ReLU of ``extend_params`` are
applied to the accumulator, which then converts to ``out_dtype``.
"""

from __future__ import annotations

import builtins
import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Any

from pypto import _dtypes
from pypto.enums import ReLuType
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.config import user_location
from pypto.frontend.tensor import Tensor
from pypto.ops import _at, _ctx, _documented, _tensor, add, cast, matmul, mul, relu, with_tile
from pypto.data_movement import pad
from pypto.shape_ops import _is_static, _view, assemble, copy_tile, full, permute, reshape

_FLOATS = (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16)
_COPY_TILE = 16384  # elements per tile of the padding and im2col copies
# The implicit GEMM's tile: whole output rows of about this many positions (the matmul's n).
_GEMM_POSITIONS = 224
_EXTEND_KEYS = ("bias_tensor", "scale", "scale_tensor", "relu_type")


class _TileInfo:
    """A conv tile description: the ints named by ``_FIELDS`` (each >= 0), compared and printed
    as PyPTO's native classes are."""

    _FIELDS: tuple[str, ...] = ()

    def _set(self, values) -> None:
        cls = type(self).__name__
        for name, v in zip(self._FIELDS, values):
            if isinstance(v, builtins.bool) or not isinstance(v, numbers.Integral):
                raise UserTypeError(f"pypto.{cls}: {name} must be an int, found {type(v).__name__} {v!r}")
            if v < 0:
                raise UserError(f"pypto.{cls}: {name} must be >= 0, found {v}")
            setattr(self, name, int(v))

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({[getattr(self, f) for f in self._FIELDS]})"


class TileL1Info(_TileInfo):
    """PyPTO's conv tile at the L1 level (``pypto_impl.TileL1Info``): the input's and output's
    height and width, the input channels of the feature map and of the weight, the output channels
    (``tileN``) and the batch (``tileBatch``) a tile covers."""

    _FIELDS = ("tileHin", "tileHout", "tileWin", "tileWout", "tileCinFmap", "tileCinWeight", "tileN", "tileBatch")

    def __init__(self, tileHin=0, tileHout=0, tileWin=0, tileWout=0, tileCinFmap=0,  # noqa: N803 - PyPTO's names
                 tileCinWeight=0, tileN=0, tileBatch=0):  # noqa: N803
        self._set((tileHin, tileHout, tileWin, tileWout, tileCinFmap, tileCinWeight, tileN, tileBatch))


class TileL0Info(_TileInfo):
    """PyPTO's conv tile at the L0 level (``pypto_impl.TileL0Info``): output height and width, the
    reduction (``tileK``) and the output channels (``tileN``) of one cube step."""

    _FIELDS = ("tileH", "tileW", "tileK", "tileN")

    def __init__(self, tileH=0, tileW=0, tileK=0, tileN=0):  # noqa: N803 - PyPTO's names
        self._set((tileH, tileW, tileK, tileN))


class ConvTile:
    """PyPTO's conv tile description: ``ConvTile(tile_l1_info, tile_l0_info=None, set_l0_tile=False)``,
    accepted by ``set_options(conv_tile_shapes=...)``."""

    def __init__(self, tile_l1_info, tile_l0_info=None, set_l0_tile: bool = False):
        _check_tiles(tile_l1_info, tile_l0_info)
        if not isinstance(set_l0_tile, builtins.bool):
            raise UserTypeError(f"pypto.ConvTile: set_l0_tile must be a bool, found {set_l0_tile!r}")
        self.tile_l1_info, self.tile_l0_info = tile_l1_info, tile_l0_info or TileL0Info()
        self.set_l0_tile = set_l0_tile

    def __repr__(self) -> str:
        return f"pypto.ConvTile({self.tile_l1_info}, {self.tile_l0_info}, {self.set_l0_tile})"


@dataclass
class ConvParams:
    """The arguments of one ``pypto.conv`` call, as PyPTO groups them."""

    out_dtype: Any
    input_conv: Tensor
    weight: Tensor
    strides: list
    paddings: list
    dilations: list
    groups: int
    transposed: bool
    output_paddings: list
    extend_params: Any


def _check_tiles(tile_l1_info, tile_l0_info) -> None:
    if not isinstance(tile_l1_info, TileL1Info):
        raise UserTypeError(f"pypto.set_conv_tile_shapes: tile_l1_info must be a pypto.pypto_impl.TileL1Info, found "
                            f"{type(tile_l1_info).__name__}")
    if tile_l0_info is not None and not isinstance(tile_l0_info, TileL0Info):
        raise UserTypeError(f"pypto.set_conv_tile_shapes: tile_l0_info must be a pypto.pypto_impl.TileL0Info or None, "
                            f"found {type(tile_l0_info).__name__}")


_global_conv_tile: tuple | None = None


def set_conv_tile_shapes(tile_l1_info, tile_l0_info=None) -> None:
    """Sets PyPTO's conv tile: ``tile_l1_info`` a ``TileL1Info``, ``tile_l0_info`` a ``TileL0Info``
    (None: a default one, and the L0 setting off). The CPU backend tiles a conv as the matmul it
    becomes (by the cube tile in force, else the default cube tile), so the values are checked, kept
    for ``get_conv_tile_shapes`` and do not change the kernel."""
    global _global_conv_tile
    _check_tiles(tile_l1_info, tile_l0_info)
    shape = (tile_l1_info, tile_l0_info or TileL0Info(), tile_l0_info is not None)
    ctx = config.current_trace()
    if ctx is not None:
        ctx.conv_tile = shape
    else:
        _global_conv_tile = shape


def get_conv_tile_shapes():
    """The conv tile in force, as PyPTO returns it: ``(tile_l1_info, tile_l0_info, set_l0_tile)``;
    None when none is set."""
    ctx = config.current_trace()
    shape = getattr(ctx, "conv_tile", _global_conv_tile) if ctx is not None else _global_conv_tile
    return shape


def _int_list(op: str, name: str, v, n: int, least: int) -> list[int]:
    if not isinstance(v, (list, tuple)) or not all(
            isinstance(x, numbers.Integral) and not isinstance(x, builtins.bool) for x in v):
        raise UserTypeError(f"{_at(op)}: {name} must be a list of ints, found {v!r}")
    if len(v) != n:
        raise UserError(f"{_at(op)}: {name} must have {n} entries for this input's rank, found {list(v)}")
    if any(x < least for x in v):
        raise UserError(f"{_at(op)}: {name} entries must be >= {least}, found {list(v)}")
    return [int(x) for x in v]


def _static(op: str, name: str, dims) -> None:
    if not all(_is_static(d) for d in dims):
        raise NotSupportedError(f"{_at(op)}: a dynamic {name} is not supported yet (only the batch dim may be "
                                f"dynamic), found {list(dims)}")


def _extend(op: str, params, cout: int):
    """(bias, scale, scale_tensor, relu) from extend_params, checked."""
    if params is None:
        return None, None, None, False
    if not isinstance(params, dict):
        raise UserTypeError(f"{_at(op)}: extend_params must be a dict, found {type(params).__name__}")
    unknown = sorted(set(params) - set(_EXTEND_KEYS))
    if unknown:
        raise UserError(f"{_at(op)}: unknown extend_params key {unknown[0]!r}; expected one of {list(_EXTEND_KEYS)}")
    bias, scale, scale_t = params.get("bias_tensor"), params.get("scale"), params.get("scale_tensor")
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise UserTypeError(f"{_at(op)}: extend_params['bias_tensor'] must be a pypto.Tensor, found "
                                f"{type(bias).__name__}")
        if list(bias.shape) != [cout]:
            raise UserError(f"{_at(op)}: extend_params['bias_tensor'] must have shape [{cout}] (Cout), found "
                            f"{list(bias.shape)}")
    if scale is not None and scale_t is not None:
        raise UserError(f"{_at(op)}: extend_params takes scale or scale_tensor, not both")
    if scale is not None and (isinstance(scale, builtins.bool) or not isinstance(scale, numbers.Real)):
        raise UserTypeError(f"{_at(op)}: extend_params['scale'] must be a number, found {scale!r}")
    if scale_t is not None:
        if not isinstance(scale_t, Tensor) or scale_t.dtype not in _FLOATS:
            raise UserTypeError(f"{_at(op)}: extend_params['scale_tensor'] must be a float pypto.Tensor of shape "
                                f"[1, {cout}], found {scale_t!r}")
        if list(scale_t.shape) not in ([1, cout], [cout]):
            raise UserError(f"{_at(op)}: extend_params['scale_tensor'] must have shape [1, {cout}], found "
                            f"{list(scale_t.shape)}")
    from pypto.enums import ConvReLuType

    relu_type = params.get("relu_type", ConvReLuType.NO_RELU)
    if not isinstance(relu_type, (ConvReLuType, ReLuType)):
        raise UserTypeError(f"{_at(op)}: extend_params['relu_type'] must be a pypto.ConvReLuType, found {relu_type!r}")
    return bias, scale, scale_t, relu_type.name == "RELU"


@_documented
def conv(input_conv, weight, out_dtype, strides, paddings, dilations, *, groups=1, transposed=False,
         output_paddings=None, extend_params=None) -> Tensor:
    op = "conv"
    ctx = _ctx(op)
    _tensor(op, input_conv, ctx, "input_conv")
    _tensor(op, weight, ctx, "weight")
    rank = len(input_conv.shape)
    if rank not in (3, 4, 5) or len(weight.shape) != rank:
        raise UserError(f"{_at(op)}: input_conv and weight must both have rank 3, 4 or 5 (1-, 2- or 3-D conv), "
                        f"found {len(input_conv.shape)} and {len(weight.shape)}")
    for name, t in (("input_conv", input_conv), ("weight", weight)):
        if t.dtype not in _FLOATS:
            raise UserTypeError(f"{_at(op)}: {name} must be DT_FP32, DT_FP16 or DT_BF16, found {t.dtype.name}")
    if weight.dtype != input_conv.dtype:
        raise UserTypeError(f"{_at(op)}: weight ({weight.dtype.name}) must have input_conv's dtype "
                            f"({input_conv.dtype.name})")
    if not isinstance(out_dtype, _dtypes.DataType) or out_dtype not in _FLOATS:
        raise UserTypeError(f"{_at(op)}: out_dtype must be DT_FP32, DT_FP16 or DT_BF16, found {out_dtype!r}")
    if not isinstance(transposed, builtins.bool):
        raise UserTypeError(f"{_at(op)}: transposed must be a bool, found {transposed!r}")
    if transposed:
        raise NotSupportedError(f"{_at(op)}: transposed=True (a transposed convolution) is not supported yet, "
                                f"as in PyPTO")
    if output_paddings:
        raise UserError(f"{_at(op)}: output_paddings apply to transposed convolutions only, found "
                        f"{output_paddings!r}")
    r = rank - 2
    strides = _int_list(op, "strides", strides, r, 1)
    paddings = _int_list(op, "paddings", paddings, 2 * r, 0)
    dilations = _int_list(op, "dilations", dilations, r, 1)
    if isinstance(groups, builtins.bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise UserTypeError(f"{_at(op)}: groups must be a positive int, found {groups!r}")
    n, cin, spatial = input_conv.shape[0], input_conv.shape[1], list(input_conv.shape[2:])
    cout, cin_g, kernel = weight.shape[0], weight.shape[1], list(weight.shape[2:])
    _static(op, "channel or spatial dim of input_conv", [cin] + spatial)
    _static(op, "weight dim", weight.shape)
    if cin % groups or cout % groups:
        raise UserError(f"{_at(op)}: groups ({groups}) must divide the input channels ({cin}) and the output "
                        f"channels ({cout})")
    if cin_g * groups != cin:
        raise UserError(f"{_at(op)}: weight's input channels ({cin_g}) times groups ({groups}) must equal "
                        f"input_conv's channels ({cin})")
    out = []
    for i in range(r):
        span = dilations[i] * (kernel[i] - 1) + 1
        o = (spatial[i] + paddings[2 * i] + paddings[2 * i + 1] - span) // strides[i] + 1
        if o < 1:
            raise UserError(f"{_at(op)}: spatial dim {i} of size {spatial[i]} padded by "
                            f"{paddings[2 * i:2 * i + 2]} is smaller than the dilated kernel ({span})")
        out.append(o)
    bias, scale, scale_t, use_relu = _extend(op, extend_params, cout)

    taps = math.prod(kernel)
    acc_dtype = _dtypes.DT_FP32
    shape = [n, cout] + out
    gemm_tile = _gemm_tile(cout, cin, out) if r == 2 and groups == 1 and strides == [1, 1] else None
    if gemm_tile:
        y = _implicit_gemm(ctx, input_conv, weight, paddings, dilations, kernel, gemm_tile)
    else:
        col_shape = [n, cin * taps] + out
        col = _im2col(ctx, input_conv, col_shape, kernel, strides, paddings, dilations, out)
        p = math.prod(out)
        if groups == 1:
            acc = matmul(reshape(weight, [cout, cin * taps]), reshape(col, [n, cin * taps, p]), acc_dtype)
        else:
            acc = matmul(reshape(weight, [groups, cout // groups, cin_g * taps]),
                         reshape(col, [n, groups, cin_g * taps, p]), acc_dtype)
        y = reshape(acc, shape)  # a view of the product's memory
    per_channel = [cout] + [1] * len(out)

    def epilogue():  # on the result's shape, so that these ops write it and no copy is needed
        z = y
        if bias is not None:
            z = add(z, reshape(cast(bias, acc_dtype), per_channel))
        if scale is not None:
            z = mul(z, float(scale))
        if scale_t is not None:
            z = mul(z, reshape(cast(scale_t, acc_dtype), per_channel))
        if use_relu:
            z = relu(z)
        return cast(z, out_dtype) if out_dtype != acc_dtype else z

    return with_tile(ctx, copy_tile(shape), epilogue)


def _padded(ctx, x: Tensor, paddings: list) -> Tensor:
    """x zero-padded by the (before, after) pairs of its spatial dims (x itself when all are 0)."""
    if not any(paddings):
        return x
    r = len(x.shape) - 2
    widths = []
    for i in reversed(range(r)):  # pad takes the last dim's (before, after) first
        widths += paddings[2 * i:2 * i + 2]
    padded = list(x.shape[:2]) + [x.shape[2 + i] + paddings[2 * i] + paddings[2 * i + 1] for i in range(r)]
    return with_tile(ctx, copy_tile(padded, _COPY_TILE), lambda: pad(x, widths))


def _gemm_tile(cout: int, cin: int, out: list) -> list[int] | None:
    """The implicit GEMM's tile [output channels, input channels per step, output rows]: whole rows
    of about _GEMM_POSITIONS positions, channel blocks of up to 64 shrunk until the tiles (weight,
    input rows, accumulator and its reshape) take at most three quarters of the buffer budget; None
    when even blocks of 8 channels of one row do not fit (very wide rows: the im2col form)."""
    budget = 0.75 * 1024 * config.pass_options_in_force().get("sram_budget_kb", 256)
    rows = max(1, min(out[0], _GEMM_POSITIONS // out[1]))
    positions = rows * out[1]
    for block in (64, 32, 16, 8):
        co, ci = min(cout, block), min(cin, block)
        if 4 * (co * ci + ci * positions + 2 * co * positions) <= budget:
            return [co, ci, rows]
    return None


def _implicit_gemm(ctx, x: Tensor, weight: Tensor, paddings: list, dilations: list, kernel: list,
                   tile: list) -> Tensor:
    """The fp32 accumulator [N, Cout, OH, OW] of a 2-D, stride-1, one-group convolution: the padded
    input times the weight with its taps outermost, by the conv2d_tiles op tiled by `tile`."""
    cout, cin, taps = weight.shape[0], weight.shape[1], math.prod(kernel)
    xp = _padded(ctx, x, paddings)

    def taps_outermost():  # w2[co, t * Cin + c] = weight[co, c, t]
        w2 = full([cout, taps, cin], 0, weight.dtype)
        ctx.builder.mark_covered(w2._id)
        assemble(permute(reshape(weight, [cout, cin, taps]), [0, 2, 1]), [0, 0, 0], w2)
        return reshape(w2, [cout, taps * cin])

    w2 = with_tile(ctx, copy_tile([cout, taps, cin], _COPY_TILE), taps_outermost)
    file, line = user_location()
    vid = ctx.builder.add_conv(_tensor("conv", xp, ctx, "input_conv"), _tensor("conv", w2, ctx, "weight"),
                               _dtypes.DT_FP32, list(kernel) + list(dilations), tile, file, line)
    return Tensor._traced(ctx, vid)


def _im2col(ctx, x: Tensor, col_shape: list, kernel: list, strides: list, paddings: list, dilations: list,
            out: list) -> Tensor:
    """col[b, c * taps + t, o...] = xp[b, c, o * stride + tap * dilation...] with xp x zero-padded:
    each tap is one strided copy of all of xp's positions it reads, and together they write all of
    col, so col needs no zero fill."""
    r = len(kernel)
    n, cin = x.shape[0], x.shape[1]
    x = _padded(ctx, x, paddings)
    taps = math.prod(kernel)

    def copies():
        col = full(col_shape, 0, x.dtype)
        ctx.builder.mark_covered(col._id)
        for t, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
            src = _view(x, [n, cin] + out, [0, 0] + [tap[i] * dilations[i] for i in range(r)], range(r + 2),
                        [1, 1] + strides, op="conv")
            dst = _view(col, [n, cin] + out, [0, t] + [0] * r, range(r + 2), [1, taps] + [1] * r, op="conv")
            assemble(src, None, dst)
        return col

    return with_tile(ctx, copy_tile(col_shape, _COPY_TILE), copies)
