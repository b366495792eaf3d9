"""Tensor ops. Each one, called inside a ``@pypto.frontend.jit`` function,
adds a node to the C++ Tensor Graph being traced, with the active vec tile
shape and the caller's source line. Composite ops (softmax, norms, mean,
var, clip, ...) are traced into primitive ops so that they fuse."""

from __future__ import annotations

import builtins
import math
import numbers

from pypto import _op_table
from pypto._dtypes import DataType
from pypto.element import Element
from pypto.enums import CastMode, SaturationMode, TopKAlgo
from pypto.errors import NotSupportedError, TracingError, UserError, UserTypeError
from pypto.frontend.config import current_trace, user_location
from pypto.frontend.control import Diverged
from pypto.frontend.symbolic import SymExpr
from pypto.frontend.tensor import Tensor


def _ctx(op: str):
    ctx = current_trace()
    if ctx is None:
        raise TracingError(
            f"pypto.{op} was called outside a jitted function; did you forget @pypto.frontend.jit? "
            "pypto ops only trace inside a function decorated with @pypto.frontend.jit")
    return ctx


def _tensor(op: str, x, ctx, pos: str) -> int:
    if isinstance(x, Diverged):
        x._fail()
    if isinstance(x, Tensor):
        if x._ctx is not ctx:
            raise UserError(f"pypto.{op}: {pos} operand is a pypto.Tensor that does not belong to this traced function")
        return x._id
    raise UserTypeError(f"pypto.{op}: {pos} operand must be a pypto.Tensor, found {type(x).__name__}")


def _operand(op: str, x, ctx, pos: str) -> tuple:
    """The builder's encoding of a tensor or constant operand."""
    if isinstance(x, Element):
        x = x.value
    if isinstance(x, (Tensor, Diverged)):
        return ("t", _tensor(op, x, ctx, pos))
    if isinstance(x, SymExpr):
        return ("s", x._e)
    if isinstance(x, (bool,)) or type(x).__name__ == "bool_":
        return ("b", bool(x))
    if isinstance(x, numbers.Integral):
        return ("i", int(x))
    if isinstance(x, numbers.Real):
        return ("f", float(x))
    raise UserTypeError(f"pypto.{op}: {pos} operand must be a pypto.Tensor or a Python number, found {type(x).__name__}")


def _tile(ctx) -> list[int]:
    return list(ctx.vec_tile) if ctx.vec_tile is not None else []


def _result(ctx, vid: int, operands) -> Tensor:
    """The traced result of an elementwise op: 0-d when every tensor operand is."""
    ids = [x._id for x in operands if isinstance(x, Tensor)]
    if ids and all(i in ctx.zero_d for i in ids):
        ctx.zero_d.add(vid)
    return Tensor._traced(ctx, vid)


def _elementwise(op: str, *operands) -> Tensor:
    ctx = _ctx(op)
    names = ("first", "second", "third")
    encoded = [_operand(op, x, ctx, names[i]) for i, x in enumerate(operands)]
    file, line = user_location()
    return _result(ctx, ctx.builder.add_elementwise(op, encoded, _tile(ctx), file, line), operands)


def _unary(op: str, x) -> Tensor:
    ctx = _ctx(op)
    ix = _tensor(op, x, ctx, "the")
    file, line = user_location()
    return _result(ctx, ctx.builder.add_unary(op, ix, _tile(ctx), file, line), [x])


def _at(op: str) -> str:
    """``pypto.<op> at <file>:<line>``: the head of an error raised while tracing the user's call."""
    file, line = user_location()
    return f"pypto.{op} at {file}:{line}"


def _dims(op: str, x: Tensor, dim) -> list[int]:
    rank = len(x.shape)
    if dim is None:
        return list(range(rank))
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    out = []
    for d in dims:
        if isinstance(d, builtins.bool) or not isinstance(d, int):
            raise UserTypeError(f"pypto.{op}: dim must be an int or a list of ints, found {type(d).__name__} {d!r}")
        if d < -rank or d >= rank:
            file, line = user_location()
            raise UserError(f"pypto.{op} at {file}:{line}: dim {d} is out of range for a tensor of rank {rank} "
                            f"(expected {-rank} to {rank - 1})")
        out.append(d % rank)
    if len(set(out)) != len(out):
        raise UserError(f"pypto.{op}: dim {dims} names a dim twice")
    return out


def _reduce(op: str, x, dim, keepdim) -> Tensor:
    ctx = _ctx(op)
    ix = _tensor(op, x, ctx, "the")
    if not isinstance(keepdim, builtins.bool):
        raise UserTypeError(f"pypto.{op}: keepdim must be a bool, found {type(keepdim).__name__} {keepdim!r}")
    file, line = user_location()
    if isinstance(dim, int) and not isinstance(dim, builtins.bool):
        dims = [dim]  # range checked (with the source line) by the builder
    else:
        dims = _dims(op, x, dim)
    rank = len(x.shape)
    if not keepdim and rank and len(set(d % rank for d in dims if -rank <= d < rank)) == rank:
        # Every dim reduced: a 0-d result, held as shape [1] (PyPTO returns a 0-d tensor).
        vid = ctx.builder.add_reduce(op, ix, dims, True, _tile(ctx), file, line)
        if rank > 1:
            from pypto import shape_ops

            vid = shape_ops.reshape(Tensor._traced(ctx, vid), [1])._id
        ctx.zero_d.add(vid)
        return Tensor._traced(ctx, vid)
    return Tensor._traced(ctx, ctx.builder.add_reduce(op, ix, dims, keepdim, _tile(ctx), file, line))


# ---------------------------------------------------------------- the op table
# Every op below has a row in the op table (csrc/ir/ops.def); the plain unary and binary ones are
# made from their rows, the rest are written out and take their docstring from their row.

def _documented(f):
    """Gives `f` the description of its op table row (a KeyError names a function without one)."""
    f.__doc__ = _op_table.row(f.__name__)["doc"]
    return f


def _check_precision(name: str, precision_type) -> None:
    from pypto.enums import PrecisionType

    if precision_type is not None and not isinstance(precision_type, PrecisionType):
        raise UserTypeError(f"pypto.{name}: precision_type must be a pypto.PrecisionType, found {precision_type!r}")


def _make_unary(name: str, doc: str, precision: bool):
    if precision:
        def f(x, precision_type=None) -> Tensor:
            _check_precision(name, precision_type)  # PyPTO's choice; the vector math here is the precise one
            return _unary(name, x)
    else:
        def f(x) -> Tensor:
            return _unary(name, x)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = doc
    return f


def _make_binary(name: str, doc: str, precision: bool):
    if precision:
        def f(a, b, precision_type=None) -> Tensor:
            _check_precision(name, precision_type)
            return _elementwise(name, a, b)
    else:
        def f(a, b) -> Tensor:
            return _elementwise(name, a, b)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = doc
    return f


def _table_functions() -> dict:
    """The functions of the table's plain elementwise rows (signature ``(x)`` or ``(a, b)``, with PyPTO's
    ``precision_type`` where the row has it)."""
    made = {}
    for r in _op_table.tensor_ops():
        precision = r["signature"].endswith(", precision_type=None)")
        if r["class"] == "unary" and r["signature"] in ("(x)", "(x, precision_type=None)"):
            made[r["name"]] = _make_unary(r["name"], r["doc"], precision)
        elif r["class"] == "binary" and r["signature"] in ("(a, b)", "(a, b, precision_type=None)"):
            made[r["name"]] = _make_binary(r["name"], r["doc"], precision)
    return made


TABLE_FUNCTIONS = _table_functions()
globals().update(TABLE_FUNCTIONS)
# The ones the composites below trace into, by name for the reader.
add, sub, mul, div, pow, exp, tanh, rsqrt = (  # noqa: A001 - pow is PyPTO's name
    TABLE_FUNCTIONS[n] for n in ("add", "sub", "mul", "div", "pow", "exp", "tanh", "rsqrt"))


@_documented
def where(cond, a, b) -> Tensor:
    a, b = (v.value if isinstance(v, Element) else v for v in (a, b))
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        # Two constants: materialise one of them by broadcasting against the condition.
        if not isinstance(cond, Tensor):
            raise UserTypeError("pypto.where: the condition must be a pypto.Tensor")
        b = _elementwise("add", cast(cond, _const_dtype(b)) * 0, b)
    return _elementwise("where", cond, a, b)


def _const_dtype(v) -> DataType:
    from pypto import _dtypes

    if isinstance(v, builtins.bool):
        return _dtypes.DT_BOOL
    if isinstance(v, numbers.Integral):
        return _dtypes.DT_INT64
    return _dtypes.DT_FP32


@_documented
def clip(x, min=None, max=None) -> Tensor:  # noqa: A002 - torch's names
    if min is None and max is None:
        raise UserError("pypto.clip: at least one of min and max must be given")
    out = x
    if min is not None:
        out = _elementwise("maximum", out, min)
    if max is not None:
        out = _elementwise("minimum", out, max)
    return out


clamp = clip


@_documented
def greater(input, other) -> Tensor:  # noqa: A002 - PyPTO's names
    return _elementwise("gt", input, other)


@_documented
def gelu(x, approximate: str = "none") -> Tensor:
    if approximate == "none":
        return _unary("gelu", x)
    if approximate == "tanh":
        inner = mul(add(x, mul(pow(x, 3), 0.044715)), math.sqrt(2.0 / math.pi))
        return mul(mul(x, 0.5), add(tanh(inner), 1.0))
    raise UserError(f"pypto.gelu: approximate must be 'none' or 'tanh', found {approximate!r}")


@_documented
def round(x, decimals=0) -> Tensor:  # noqa: A001 - PyPTO's name
    if isinstance(decimals, builtins.bool) or not isinstance(decimals, numbers.Integral):
        raise UserTypeError(f"pypto.round: decimals must be an int, found {type(decimals).__name__} {decimals!r}")
    if decimals == 0:
        return _unary("round", x)
    from pypto import _dtypes

    if not isinstance(x, Tensor):
        raise UserTypeError(f"pypto.round: the operand must be a pypto.Tensor, found {type(x).__name__}")
    if x.dtype not in (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16, _dtypes.DT_DOUBLE):
        if decimals > 0:
            return _elementwise("mul", x, 1)  # an integer has no digits after the point
        raise NotSupportedError(f"pypto.round: decimals={decimals} on an integer tensor ({x.dtype.name}) is not "
                                "supported yet")
    wide = x if x.dtype in (_dtypes.DT_FP32, _dtypes.DT_DOUBLE) else cast(x, _dtypes.DT_FP32)
    p = 10.0 ** builtins.abs(int(decimals))
    r = div(_unary("round", mul(wide, p)), p) if decimals > 0 else mul(_unary("round", div(wide, p)), p)
    return r if r.dtype == x.dtype else cast(r, x.dtype)


@_documented
def cast(x, dtype: DataType, mode=CastMode.CAST_NONE, satmode=SaturationMode.OFF) -> Tensor:
    from pypto import _dtypes

    ctx = _ctx("cast")
    _tensor("cast", x, ctx, "the")
    if not isinstance(dtype, DataType):
        raise UserTypeError(f"pypto.cast: dtype must be a pypto dtype such as pypto.DT_FP32, found {dtype!r}")
    if not isinstance(mode, CastMode):
        raise UserTypeError(f"pypto.cast: mode must be a pypto.CastMode, found {mode!r}")
    if not isinstance(satmode, SaturationMode):
        raise UserTypeError(f"pypto.cast: satmode must be a pypto.SaturationMode, found {satmode!r}")
    floats = (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16, _dtypes.DT_DOUBLE)
    src_float, dst_float = x.dtype in floats, dtype in floats
    if mode not in (CastMode.CAST_NONE,):
        if src_float and (not dst_float or dtype == x.dtype):
            x = _round_by_mode(x, mode)  # then the conversion is exact (or wraps/saturates)
        elif not (mode == CastMode.CAST_RINT and (dst_float or not src_float)):
            raise NotSupportedError(f"pypto.cast: mode {mode} from {x.dtype.name} to {dtype.name} is not supported "
                                    "yet (rounding modes apply to float to integer and float to the same float)")
    if satmode == SaturationMode.ON and src_float and not dst_float and dtype != _dtypes.DT_BOOL:
        lo, hi = (-8, 7) if dtype == _dtypes.DT_INT4 else (_np_iinfo(dtype).min, _np_iinfo(dtype).max)
        x = where(_elementwise("ne", x, x), 0.0, clip(x, float(lo), float(hi)))
    if x.dtype == dtype:
        return x
    file, line = user_location()
    return _result(ctx, ctx.builder.add_cast(x._id, dtype, _tile(ctx), file, line), [x])


def _np_iinfo(dtype):
    import numpy as np

    from pypto import _dtypes

    return np.iinfo(_dtypes.to_numpy(dtype))


def _round_by_mode(x, mode):
    """``x`` rounded to an integral value as ``mode`` says (float in, same float out)."""
    if mode == CastMode.CAST_RINT:
        return _unary("round", x)  # ties to even
    if mode == CastMode.CAST_FLOOR:
        return _unary("floor", x)
    if mode == CastMode.CAST_CEIL:
        return _unary("ceil", x)
    if mode == CastMode.CAST_TRUNC:
        return _unary("trunc", x)
    if mode == CastMode.CAST_ROUND:  # ties away from zero: x - trunc(x) is exact
        t = _unary("trunc", x)
        frac = sub(x, t)
        up = cast(_elementwise("ge", frac, 0.5), x.dtype)
        down = cast(_elementwise("le", frac, -0.5), x.dtype)
        return sub(add(t, up), down)
    raise NotSupportedError(f"pypto.cast: mode {mode} to an integer or the same float dtype is not supported "
                            "(CAST_ODD is a float narrowing mode)")


# ---------------------------------------------------------------- reductions

@_documented
def sum(x, dim=None, keepdim=False) -> Tensor:  # noqa: A001 - PyPTO name
    return _reduce("sum", x, dim, keepdim)


@_documented
def amax(x, dim=None, keepdim=False) -> Tensor:
    return _reduce("amax", x, dim, keepdim)


@_documented
def amin(x, dim=None, keepdim=False) -> Tensor:
    return _reduce("amin", x, dim, keepdim)


@_documented
def prod(x, dim=None, keepdim=False) -> Tensor:
    return _reduce("prod", x, dim, keepdim)


def _int_arg(op: str, name: str, v) -> int:
    v = v.value if isinstance(v, Element) else v
    if isinstance(v, builtins.bool) or not isinstance(v, numbers.Integral):
        raise UserTypeError(f"pypto.{op}: {name} must be an int, found {type(v).__name__} {v!r}")
    return int(v)


def _scan(op: str, x, dim) -> Tensor:
    ctx = _ctx(op)
    ix = _tensor(op, x, ctx, "the")
    d = _int_arg(op, "dim", dim)
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_scan(op, ix, d, _tile(ctx), file, line))


@_documented
def cumsum(input, dim) -> Tensor:  # noqa: A002 - PyPTO's name
    return _scan("cumsum", input, dim)


@_documented
def cumprod(input, dim) -> Tensor:  # noqa: A002 - PyPTO's name
    return _scan("cumprod", input, dim)


def _position_along(x: Tensor, dim: int) -> Tensor:
    """The index of each position along ``dim`` (DT_INT32), shaped to broadcast against ``x``."""
    from pypto import _dtypes, shape_ops

    shape = [1] * len(x.shape)
    shape[dim] = x.shape[dim]
    return shape_ops.reshape(shape_ops.arange(x.shape[dim], dtype=_dtypes.DT_INT32), shape)


def _triangle(op: str, x, diagonal, lower: bool) -> Tensor:
    from pypto import _dtypes

    _ctx(op)
    if not isinstance(x, Tensor):
        raise UserTypeError(f"pypto.{op}: input must be a pypto.Tensor, found {type(x).__name__}")
    diagonal = _int_arg(op, "diagonal", diagonal)
    rank = len(x.shape)
    if rank < 2:
        raise UserError(f"pypto.{op}: input must have at least 2 dims (a matrix or a batch of them), found shape "
                        f"{list(x.shape)}")
    # Column index minus row index: kept where it is <= diagonal (tril) or >= diagonal (triu).
    offset = sub(_position_along(x, rank - 1), _position_along(x, rank - 2))
    keep = _elementwise("le" if lower else "ge", offset, diagonal)
    return _elementwise("where", keep, x, False if x.dtype == _dtypes.DT_BOOL else 0)


@_documented
def tril(input, diagonal=0) -> Tensor:  # noqa: A002 - PyPTO's name
    return _triangle("tril", input, diagonal, True)


@_documented
def triu(input, diagonal=0) -> Tensor:  # noqa: A002 - PyPTO's name
    return _triangle("triu", input, diagonal, False)


def _in_place(x: Tensor, result: Tensor) -> Tensor:
    """Writes ``result`` (x's shape and dtype) into x's memory; returns x."""
    from pypto import shape_ops

    shape_ops.assemble(result, [0] * len(x.shape), x)
    return x


@_documented
def tril_(input, diagonal=0) -> Tensor:  # noqa: A002 - PyPTO's name
    return _in_place(input, _triangle("tril_", input, diagonal, True))


@_documented
def triu_(input, diagonal=0) -> Tensor:  # noqa: A002 - PyPTO's name
    return _in_place(input, _triangle("triu_", input, diagonal, False))


def _arg_extreme(op: str, x, dim, keepdim) -> Tensor:
    from pypto import _dtypes

    _ctx(op)
    if not isinstance(x, Tensor):
        raise UserTypeError(f"pypto.{op}: input must be a pypto.Tensor, found {type(x).__name__}")
    if not isinstance(keepdim, builtins.bool):
        raise UserTypeError(f"pypto.{op}: keepdim must be a bool, found {type(keepdim).__name__} {keepdim!r}")
    d = _dims(op, x, _int_arg(op, "dim", dim))[0]
    # The first position holding the extreme; a NaN is the extreme wherever one occurs (as torch).
    extreme = _reduce("amax" if op == "argmax" else "amin", x, d, True)
    hit = _elementwise("eq", x, extreme)
    if x.dtype in (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16, _dtypes.DT_DOUBLE):
        hit = _elementwise("logical_or", hit, _unary("isnan", x))
    n = x.shape[d]
    first = _elementwise("where", hit, _position_along(x, d), n)
    return _reduce("amin", first, d, keepdim)


@_documented
def argmax(input, dim, keepdim=False) -> Tensor:  # noqa: A002 - PyPTO's name
    return _arg_extreme("argmax", input, dim, keepdim)


@_documented
def argmin(input, dim, keepdim=False) -> Tensor:  # noqa: A002 - PyPTO's name
    return _arg_extreme("argmin", input, dim, keepdim)


def _sorted_positions(op: str, x, dim, descending, k) -> tuple[Tensor, int]:
    """The positions sorting ``dim`` of ``x`` (the first ``k`` of them; all when None), and the dim."""
    from pypto import shape_ops

    ctx = _ctx(op)
    if not isinstance(x, Tensor):
        raise UserTypeError(f"pypto.{op}: input must be a pypto.Tensor, found {type(x).__name__}")
    flag = "largest" if op == "topk" else "descending"
    if not isinstance(descending, builtins.bool):
        raise UserTypeError(f"pypto.{op}: {flag} must be a bool, found {type(descending).__name__} {descending!r}")
    rank = len(x.shape)
    d = rank - 1 if dim is None else _dims(op, x, _int_arg(op, "dim", dim))[0]
    n = x.shape[d]
    if not isinstance(n, int):
        raise NotSupportedError(f"pypto.{op}: sorting a dynamic dim ({n}) is not supported yet")
    if k is None:
        k = n
    elif k < 1 or k > n:
        file, line = user_location()
        raise UserError(f"pypto.{op} at {file}:{line}: k = {k} is out of range for dim {d} of size {n} "
                        f"(expected 1 to {n})")
    moved = x if d == rank - 1 else shape_ops.transpose(x, d, rank - 1)
    ix = _tensor(op, moved, ctx, "the")
    file, line = user_location()
    idx = Tensor._traced(ctx, ctx.builder.add_sort("argsort", ix, k, descending, _tile(ctx), file, line))
    if d != rank - 1:
        idx = shape_ops.clone(shape_ops.transpose(idx, d, rank - 1))
    return idx, d


@_documented
def argsort(input, dim=None, descending=True) -> Tensor:  # noqa: A002 - PyPTO's name
    return _sorted_positions("argsort", input, dim, descending, None)[0]


@_documented
def topk(input, k, dim=None, largest=True, algo=TopKAlgo.MERGE_SORT) -> tuple[Tensor, Tensor]:  # noqa: A002
    from pypto import shape_ops

    if not isinstance(algo, TopKAlgo):
        raise UserTypeError(f"pypto.topk: algo must be a pypto.TopKAlgo, found {type(algo).__name__} {algo!r}")
    k = _int_arg("topk", "k", k)
    idx, d = _sorted_positions("topk", input, dim, largest, k)
    return shape_ops.gather(input, d, idx), idx


def _require_float(op: str, x) -> None:
    from pypto._dtypes import DT_BF16, DT_DOUBLE, DT_FP16, DT_FP32

    if isinstance(x, Tensor) and x.dtype not in (DT_FP32, DT_FP16, DT_BF16, DT_DOUBLE):
        file, line = user_location()
        raise UserTypeError(f"pypto.{op} at {file}:{line}: expects a floating-point tensor (as torch), found {x.dtype.name}")


def _count(x: Tensor, dims: list[int]):
    n = 1
    for d in dims:
        n = n * x.shape[d]
    return n


@_documented
def mean(x, dim=None, keepdim=False) -> Tensor:
    _ctx("mean")
    _require_float("mean", x)
    dims = _dims("mean", x, dim)
    if keepdim:
        return div(_reduce("sum", x, dims, True), _count(x, dims))
    # Divide before the rank drops: later ops may not match the active tile rank.
    return _reduce("sum", div(x, _count(x, dims)), dims, False)


@_documented
def var(x, dim=None, correction=1, keepdim=False, unbiased=None) -> Tensor:
    _ctx("var")
    _require_float("var", x)
    if isinstance(correction, builtins.bool) or not isinstance(correction, numbers.Real):
        raise UserTypeError(f"pypto.var: correction must be a number, found {type(correction).__name__} "
                            f"{correction!r} (PyPTO's order is var(x, dim, correction, keepdim))")
    if unbiased is not None:
        correction = 1 if unbiased else 0
    dims = _dims("var", x, dim)
    # Shifted two-pass: deviations from the first element of each reduced slice, so a slice of equal
    # values has variance exactly 0 (from its mean, rounded, the deviations of values near 1e30 would
    # square past float32's range) and the mean's rounding error stays small.
    from pypto import shape_ops

    ref = shape_ops.view(x, [1 if d in dims else x.shape[d] for d in range(len(x.shape))], [0] * len(x.shape))
    x = sub(x, ref)
    m = mean(x, dims, True)
    d = sub(x, m)
    n = _count(x, dims)
    if keepdim:
        return div(_reduce("sum", mul(d, d), dims, True), n - correction)
    return _reduce("sum", div(mul(d, d), n - correction), dims, False)


# ---------------------------------------------------------------- matmul

DEFAULT_CUBE_TILE = ((32, 32), (64, 128), (64, 64))


def default_cube_tile(m, n) -> tuple:
    """The cube tile ((L0, L1) for m, k and n) of a matmul with no pypto.set_cube_tile_shapes, for
    result dims m and n: 128x128x128 tiles in 64x128x64 blocks where m and n are known (a tile
    clamps to a smaller dim, and measured on AVX2 and AVX-512 this size is the fastest that fits the
    buffer budget), DEFAULT_CUBE_TILE's smaller m and n where a dim is dynamic, so that a few rows
    do not pay for a 128-row tile."""
    fixed_m, fixed_n = isinstance(m, int), isinstance(n, int)
    return ((64, 128) if fixed_m else DEFAULT_CUBE_TILE[0], (128, 128),
            (64, 128) if fixed_n else DEFAULT_CUBE_TILE[2])


def with_tile(ctx, tile, trace):
    """``trace()`` with ``tile`` as the vec tile in force (restored after): for the internal
    copies and elementwise steps of ops whose tiling is their own."""
    saved = ctx.vec_tile
    ctx.vec_tile = tile
    try:
        return trace()
    finally:
        ctx.vec_tile = saved


def _cube_tiled(ctx, x: Tensor, rows: int, cols: int, trace):
    """``trace()`` with x's last two dims tiled by the L1 sizes ``rows`` and ``cols`` (0 m, 1 k, 2 n)
    of the cube tile in force, for ops a matmul implies that need no vec tile shape."""
    cube = ctx.cube_tile or default_cube_tile(x.shape[-2], x.shape[-1])
    return with_tile(ctx, (1,) * (len(x.shape) - 2) + (cube[rows][1], cube[cols][1]), trace)


@_documented
def matmul(a, b, out_dtype: DataType | None = None, a_trans: bool = False, b_trans: bool = False,
           c_matrix_nz: bool = False, extend_params=None) -> Tensor:
    if c_matrix_nz:
        raise NotSupportedError("pypto.matmul: c_matrix_nz=True (an NZ-format result) is not supported: results are "
                                "row-major (ND) here, as PyPTO also only supports c_matrix_nz=False today")
    if extend_params:
        return _matmul_extended(a, b, out_dtype, a_trans, b_trans, extend_params)
    return _matmul(a, b, out_dtype, a_trans, b_trans)


_EXTEND_KEYS = ("bias_tensor", "scale", "scale_tensor", "relu_type", "trans_mode")


def _matmul_extended(a, b, out_dtype, a_trans, b_trans, params) -> Tensor:
    """matmul's extend_params as Tensor-level ops on the accumulator, which fusion joins to the matmul."""
    from pypto import _dtypes
    from pypto.enums import ReLuType, TransMode

    if not isinstance(params, dict):
        raise UserTypeError(f"pypto.matmul: extend_params must be a dict, found {type(params).__name__}")
    unknown = sorted(set(params) - set(_EXTEND_KEYS))
    if unknown:
        raise UserError(f"pypto.matmul: unknown extend_params key {unknown[0]!r}; expected one of {list(_EXTEND_KEYS)}")
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise UserTypeError(f"pypto.matmul: operands must be pypto.Tensors, found {type(a).__name__} and {type(b).__name__}")
    mode = params.get("trans_mode", TransMode.CAST_NONE)
    if not isinstance(mode, TransMode):
        raise UserTypeError(f"pypto.matmul: extend_params['trans_mode'] must be a pypto.TransMode, found {mode!r}")
    if mode != TransMode.CAST_NONE:
        found = [t.name for t in (a.dtype, b.dtype, out_dtype or a.dtype) if t != _dtypes.DT_FP32]
        if found:
            raise UserTypeError(f"pypto.matmul: extend_params['trans_mode']={mode} (TF32 inputs) needs DT_FP32 operands "
                                f"and result, found {a.dtype.name}, {b.dtype.name} -> {(out_dtype or a.dtype).name}")
        a, b = _tf32(a, mode), _tf32(b, mode)  # with no vec tile shape, tiled by the cube tile (_tf32)
    relu = params.get("relu_type", ReLuType.NO_RELU)
    if not isinstance(relu, ReLuType):
        raise UserTypeError(f"pypto.matmul: extend_params['relu_type'] must be a pypto.ReLuType, found {relu!r}")
    if "scale" in params and "scale_tensor" in params:
        raise UserError("pypto.matmul: extend_params takes scale or scale_tensor, not both")
    out_dtype = a.dtype if out_dtype is None else out_dtype
    ints = a.dtype == _dtypes.DT_INT8
    acc = _matmul(a, b, _dtypes.DT_INT32 if ints else _dtypes.DT_FP32, a_trans, b_trans)
    ctx = _ctx("matmul")
    if ctx.vec_tile is not None:
        return _epilogue(acc, params, out_dtype, relu)
    # As PyPTO's fused epilogue, it needs no vec tile shape: without one, it is tiled as the
    # matmul's result, by the cube tile's L1 m and n.
    return _cube_tiled(ctx, acc, 0, 2, lambda: _epilogue(acc, params, out_dtype, relu))


def _epilogue(acc, params, out_dtype, relu) -> Tensor:
    from pypto import _dtypes
    from pypto.enums import ReLuType

    n = acc.shape[-1]
    bias = params.get("bias_tensor")
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise UserTypeError(f"pypto.matmul: extend_params['bias_tensor'] must be a pypto.Tensor, found "
                                f"{type(bias).__name__}")
        if len(bias.shape) < 1 or str(bias.shape[-1]) != str(n) or (len(bias.shape) >= 2 and str(bias.shape[-2]) != "1"):
            raise UserError(f"pypto.matmul: extend_params['bias_tensor'] has shape {list(bias.shape)}, expected "
                            f"[..., 1, {n}]")
        acc = add(acc, bias)
    scale = params.get("scale", params.get("scale_tensor"))
    if scale is not None:
        if isinstance(scale, Tensor):
            if str(scale.shape[-1]) != str(n) or (len(scale.shape) >= 2 and str(scale.shape[-2]) != "1"):
                raise UserError(f"pypto.matmul: extend_params['scale_tensor'] has shape {list(scale.shape)}, "
                                f"expected [1, {n}]")
            if scale.dtype in (_dtypes.DT_UINT64, _dtypes.DT_INT64):
                scale = _quant_scale(scale)
            elif scale.dtype in (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16):
                scale = cast(scale, _dtypes.DT_FP32)  # pypto's extension: float scales, used as they are
            else:
                raise UserTypeError(f"pypto.matmul: extend_params['scale_tensor'] must be DT_UINT64 or DT_INT64 (an "
                                    f"fp32 scale in the low 32 bits) or a float tensor, found {scale.dtype.name}")
        elif isinstance(scale, builtins.bool) or not isinstance(scale, numbers.Real):
            raise UserTypeError(f"pypto.matmul: extend_params['scale'] must be a float, found {type(scale).__name__}")
        else:
            scale = _scale19(float(scale))
        acc = mul(cast(acc, _dtypes.DT_FP32) if acc.dtype != _dtypes.DT_FP32 else acc, scale)
    if relu == ReLuType.RELU:
        acc = TABLE_FUNCTIONS["relu"](acc)
    if out_dtype == _dtypes.DT_INT8:
        if acc.dtype != _dtypes.DT_INT32:
            acc = _unary("round", acc)
        acc = clip(acc, -128, 127)
    return acc if acc.dtype == out_dtype else cast(acc, out_dtype)


_MANTISSA_CUT = 1 << 13  # fp32 keeps 10 of its 23 mantissa bits in TF32 and in the fixpipe's scales


def _scale19(value: float) -> float:
    """A matmul dequant scale as the fixpipe uses it: sign, 8 exponent and the top 10 mantissa bits
    of its fp32 value (the rest truncated)."""
    import struct

    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return struct.unpack("<f", struct.pack("<I", bits - bits % _MANTISSA_CUT))[0]


def _quant_scale(scale: Tensor) -> Tensor:
    """fp32 scales from PyPTO's 64-bit quant parameters (the fp32 bits in the low 32 bits), cut to
    19 bits as ``_scale19``."""
    from pypto import _dtypes, shape_ops

    u = shape_ops.view(scale, dtype=_dtypes.DT_UINT64) if scale.dtype == _dtypes.DT_INT64 else scale
    low = u % (1 << 32)
    low = cast(low - low % _MANTISSA_CUT, _dtypes.DT_UINT32)
    return shape_ops.view(low, dtype=_dtypes.DT_FP32)


def _tf32(x: Tensor, mode) -> Tensor:
    """fp32 values rounded to TF32 (10 mantissa bits): to nearest, ties to even (CAST_RINT) or away
    from zero (CAST_ROUND); NaN stays NaN, values past TF32's largest round to infinity."""
    from pypto import _dtypes, shape_ops
    from pypto.enums import TransMode

    ctx = _ctx("matmul")
    if ctx.vec_tile is None:  # as the epilogue: without a vec tile shape, tiled by the cube tile's L1 sizes
        return _cube_tiled(ctx, x, 0, 1, lambda: _tf32(x, mode))
    u = shape_ops.view(x, dtype=_dtypes.DT_UINT32)
    cut = u % _MANTISSA_CUT
    kept = u - cut
    half = _MANTISSA_CUT // 2
    if mode == TransMode.CAST_ROUND:
        up = cast(_elementwise("ge", cut, half), _dtypes.DT_UINT32)
    else:  # ties go to the even kept value
        odd = cast(_elementwise("eq", kept % (2 * _MANTISSA_CUT), _MANTISSA_CUT), _dtypes.DT_UINT32)
        up = cast(_elementwise("gt", cut, half), _dtypes.DT_UINT32) + \
            cast(_elementwise("eq", cut, half), _dtypes.DT_UINT32) * odd
    rounded = shape_ops.view(kept + up * _MANTISSA_CUT, dtype=_dtypes.DT_FP32)
    return where(_elementwise("ne", x, x), x, rounded)


def _matmul(a, b, out_dtype: DataType | None, a_trans: bool, b_trans: bool) -> Tensor:
    from pypto import shape_ops

    ctx = _ctx("matmul")
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise UserTypeError(f"pypto.matmul: operands must be pypto.Tensors, found {type(a).__name__} and {type(b).__name__}")
    if a_trans:
        a = shape_ops.transpose(a, -2, -1)
    if b_trans:
        b = shape_ops.transpose(b, -2, -1)
    ia, ib = _tensor("matmul", a, ctx, "first"), _tensor("matmul", b, ctx, "second")
    if out_dtype is None:
        out_dtype = a.dtype
    if not isinstance(out_dtype, DataType):
        raise UserTypeError(f"pypto.matmul: out_dtype must be a pypto dtype, found {out_dtype!r}")
    cube = ctx.cube_tile or default_cube_tile(a.shape[-2], b.shape[-1])
    file, line = user_location()
    vid = ctx.builder.add_matmul(ia, ib, out_dtype, [cube[0][1], cube[1][1], cube[2][1]],
                                 [cube[0][0], cube[1][0], cube[2][0]], file, line)
    return Tensor._traced(ctx, vid)


# ---------------------------------------------------------------- composites

@_documented
def softmax(x, dim=-1) -> Tensor:
    _ctx("softmax")
    e = exp(sub(x, amax(x, dim, True)))
    return div(e, sum(e, dim, True))


@_documented
def rms_norm(x, gamma=None, epsilon=1e-6) -> Tensor:
    _ctx("rms_norm")
    y = mul(x, rsqrt(add(mean(mul(x, x), -1, True), epsilon)))
    return mul(y, gamma) if gamma is not None else y


@_documented
def atan2(y, x) -> Tensor:
    return _elementwise("atan2", y, x)


@_documented
def expand_exp_dif(input, other) -> Tensor:  # noqa: A002 - PyPTO's names
    _ctx("expand_exp_dif")
    for what, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise UserTypeError(f"pypto.expand_exp_dif: {what} must be a pypto.Tensor, found {type(t).__name__}")
    return exp(sub(input, other))


@_documented
def lrelu(x, negative_slope=0.01) -> Tensor:
    _ctx("lrelu")
    slope = negative_slope.value if isinstance(negative_slope, Element) else negative_slope
    if isinstance(slope, builtins.bool) or not isinstance(slope, numbers.Real):
        raise UserTypeError(f"pypto.lrelu: negative_slope must be a number, found {type(slope).__name__} {slope!r}")
    if not math.isfinite(slope) or slope < 0:
        raise UserError(f"pypto.lrelu: negative_slope must be finite and >= 0, found {slope!r}")
    return where(_elementwise("gt", x, 0), x, mul(x, float(slope)))


@_documented
def prelu(x, weight) -> Tensor:
    _ctx("prelu")
    for what, t in (("x", x), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise UserTypeError(f"pypto.prelu: {what} must be a pypto.Tensor, found {type(t).__name__}")
    if len(weight.shape) != 1:
        raise UserError(f"pypto.prelu: weight must be 1-D (one slope, or one per channel), found shape "
                        f"{list(weight.shape)}")
    rank = len(x.shape)
    n = weight.shape[0]
    channels = x.shape[1] if rank >= 2 else (x.shape[0] if rank == 1 else 1)
    if isinstance(n, int) and n != 1 and isinstance(channels, int) and n != channels:
        raise UserError(f"pypto.prelu: weight has {n} elements; expected 1 or the {channels} channels of x "
                        f"(dim {1 if rank >= 2 else 0} of shape {list(x.shape)})")
    w = weight
    if rank >= 2 and n != 1:
        from pypto import shape_ops

        w = shape_ops.reshape(weight, [n] + [1] * (rank - 2))
    return where(_elementwise("gt", x, 0), x, mul(x, w))


@_documented
def axpy_(y, x, alpha=1.0) -> Tensor:
    _ctx("axpy_")
    for what, t in (("y", y), ("x", x)):
        if not isinstance(t, Tensor):
            raise UserTypeError(f"pypto.axpy_: {what} must be a pypto.Tensor, found {type(t).__name__}")
    a = alpha.value if isinstance(alpha, Element) else alpha
    if isinstance(a, builtins.bool) or not isinstance(a, numbers.Real):
        raise UserTypeError(f"pypto.axpy_: alpha must be an int or a float, found {type(a).__name__} {a!r}")
    # Static dims are checked here; dynamic ones by the add below (as any broadcast).
    if len(x.shape) != len(y.shape) or any(isinstance(dx, int) and isinstance(dy, int) and dx != dy and dx != 1
                                           for dx, dy in zip(x.shape, y.shape)):
        raise UserError(f"pypto.axpy_: x of shape {list(x.shape)} does not broadcast to y's shape {list(y.shape)} "
                        "(same rank; each dim of x equal to y's or 1; y is updated in place and does not broadcast)")
    from pypto import _dtypes

    # Computed in fp32 for the 16-bit floats and rounded once to y's dtype, as torch's add_(x, alpha=).
    work = _dtypes.DT_FP32 if y.dtype in (_dtypes.DT_FP16, _dtypes.DT_BF16) else y.dtype
    yw = y if y.dtype == work else cast(y, work)
    xw = x if x.dtype == work else cast(x, work)
    r = add(yw, mul(xw, a))
    return _in_place(y, r if r.dtype == y.dtype else cast(r, y.dtype))


@_documented
def layer_norm(x, weight=None, bias=None, eps=1e-5) -> Tensor:
    _ctx("layer_norm")
    m = mean(x, -1, True)
    d = sub(x, m)
    v = mean(mul(d, d), -1, True)
    y = mul(d, rsqrt(add(v, eps)))
    if weight is not None:
        y = mul(y, weight)
    if bias is not None:
        y = add(y, bias)
    return y
