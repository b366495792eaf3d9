"""Shape ops: views (slicing, ``view``, ``transpose``, ``permute``,
``unsqueeze``), ``reshape``, writes into views (``assemble``,
``t[...] = value``), and tensor creation (``full``, ``zeros``, ``ones``,
``arange``), plus ``concat`` and ``expand_clone`` built from them. Views move
no data: consumers read the viewed tensor's memory through strides."""

from __future__ import annotations

import builtins
import numbers
from typing import Any, Sequence

from pypto import _dtypes
from pypto._dtypes import DataType
from pypto.element import Element
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend.config import current_trace, user_location
from pypto.frontend.symbolic import SymExpr, to_expr
from pypto.frontend.tensor import Tensor
from pypto.ops import _ctx, _documented, _operand, _tensor, _tile


def _dim(v, what: str):
    """An int or a C++ Expr for a dim/offset."""
    if isinstance(v, SymExpr):
        return v._e
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    raise UserTypeError(f"{what} must be an int or a symbolic scalar, found {type(v).__name__} {v!r}")


def _is_static(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _view(x: Tensor, shape, offsets, dim_map, steps, valid=None, op="view") -> Tensor:
    ctx = _ctx(op)
    ix = _tensor(op, x, ctx, "the")
    file, line = user_location()
    vid = ctx.builder.add_view(ix, [_dim(d, f"pypto.{op}: shape") for d in shape],
                               [_dim(o, f"pypto.{op}: offset") for o in offsets], list(dim_map), list(steps),
                               [_dim(v, f"pypto.{op}: valid_shape") for v in (valid or [])], file, line)
    return Tensor._traced(ctx, vid)


@_documented
def view(x, shape=None, offsets=None, valid_shape=None, *, dtype: DataType | None = None) -> Tensor:
    rank = len(x.shape)
    if dtype is not None and not isinstance(dtype, DataType):
        raise UserTypeError(f"pypto.view: dtype must be a pypto.DataType, found {type(dtype).__name__} {dtype!r}")
    if dtype is not None and shape is None and offsets is None and valid_shape is None:
        return _bitcast(x, dtype)
    shape = list(x.shape) if shape is None else shape
    offsets = [0] * rank if offsets is None else offsets
    if len(shape) != rank or len(offsets) != rank:
        raise UserError(f"pypto.view: shape {list(shape)} and offsets {list(offsets)} must both have rank {rank}")
    if valid_shape is not None and len(valid_shape) != rank:
        raise UserError(f"pypto.view: valid_shape {list(valid_shape)} must have rank {rank}")
    out = _view(x, shape, offsets, range(rank), [1] * rank, valid_shape)
    return out if dtype is None else _bitcast(out, dtype)


def _bitcast(x: Tensor, dtype: DataType) -> Tensor:
    """``x``'s bytes read as ``dtype`` (PyPTO's ``view(x, dtype=...)``, torch's ``Tensor.view(dtype)``).

    The 4-bit types (INT4, FP4) hold one code per byte inside a program, so reading bytes as
    one of them unpacks each byte into two elements (the low nibble first) and the reverse
    packs them: the last dim doubles or halves, as between packed arrays."""
    ctx = _ctx("view")
    _tensor("view", x, ctx, "the")
    src4, dst4 = _dtypes.is_packed(x.dtype), _dtypes.is_packed(dtype)
    if dst4 and not src4:
        return _alias(_unpack_nibbles(_alias(x, _dtypes.DT_UINT8)), dtype)
    if src4 and not dst4:
        return _alias(_pack_nibbles(_alias(x, _dtypes.DT_UINT8)), dtype)
    return _alias(x, dtype)


def _alias(x: Tensor, dtype: DataType) -> Tensor:
    if x.dtype == dtype:
        return x
    ctx = _ctx("view")
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_bitcast(x._id, dtype, file, line))


class _BoundaryTile:
    """The vec tile of the ops that unpack a parameter or pack a result (the function's own tile
    is not set yet, or is the user's choice for other ops): 16 rows of 1024 elements."""

    def __init__(self, ctx, rank: int):
        self.ctx, self.tile = ctx, tuple([1] * max(rank - 2, 0) + [16, 1024][-rank:])

    def __enter__(self):
        from pypto.frontend import config

        self.saved, self.ctx.vec_tile = self.ctx.vec_tile, self.tile
        self.trace = config.push_trace(self.ctx)

    def __exit__(self, *exc):
        from pypto.frontend import config

        config.push_trace(self.trace)
        self.ctx.vec_tile = self.saved


def packed_param(ctx, name: str, dims: list, carrier_dtype: DataType, dtype: DataType) -> tuple[int, Tensor]:
    """A 4-bit parameter of kernel dims ``dims`` (ints or dynamic dim names): the parameter its
    caller's ``carrier_dtype`` array is bound to (half the last dim), and the tensor the kernel sees
    (``unpacked_param``). Returns (the parameter's value id, that tensor)."""
    from pypto import _C

    last = dims[-1] // 2 if isinstance(dims[-1], int) else _C.Expr.var(dims[-1]).floordiv(_C.Expr(2))
    vid = ctx.builder.add_param(name, list(dims[:-1]) + [last], carrier_dtype)
    return vid, unpacked_param(ctx, Tensor._traced(ctx, vid, name), dtype)


def unpacked_param(ctx, carrier: Tensor, dtype: DataType) -> Tensor:
    """A 4-bit parameter as the kernel sees it: its caller's bytes unpacked, one element per code.
    When the kernel writes into it, ``write_back_packed`` packs it into the caller's bytes at the end."""
    with _BoundaryTile(ctx, len(carrier.shape)):
        t = _bitcast(carrier, dtype)
    ctx.packed_params[ctx.builder.view_root(t._id)] = [carrier, t, False]
    return t


def write_back_packed(ctx) -> None:
    """Packs each 4-bit parameter the kernel wrote into back into its caller's bytes (traced last,
    so it follows every write)."""
    for carrier, t, written in ctx.packed_params.values():
        if written:
            with _BoundaryTile(ctx, len(t.shape)):
                assemble(_alias(_bitcast(t, _dtypes.DT_UINT8), carrier.dtype), None, carrier)


def packed_result(ctx, r: Tensor) -> Tensor:
    """A 4-bit result as its caller gets it: packed two per byte in a uint8 array."""
    with _BoundaryTile(ctx, len(r.shape)):
        return _bitcast(r, _dtypes.DT_UINT8)


def _nibble_positions(x: Tensor, n) -> tuple[Tensor, Tensor]:
    """arange(n) over the last dim, and the same broadcast to ``x``'s leading dims."""
    pos = arange(n, dtype=_dtypes.DT_INT32)
    return pos, _expand_clone(pos, list(x.shape[:-1]) + [n])


def _unpack_nibbles(b: Tensor) -> Tensor:
    """uint8 ``[..., n]`` -> uint8 codes ``[..., 2n]``: element 2j the low nibble of byte j, 2j+1 the high."""
    from pypto import ops

    n2 = b.shape[-1] * 2
    pos, idx = _nibble_positions(b, n2)
    byte = gather(ops.cast(b, _dtypes.DT_INT32), -1, ops.floor_div(idx, 2))
    shift = ops.add(ops.mul(ops.remainder(pos, 2), 15), 1)  # 1 for an even position, 16 for an odd one
    return ops.cast(ops.remainder(ops.floor_div(byte, shift), 16), _dtypes.DT_UINT8)


def _pack_nibbles(c: Tensor) -> Tensor:
    """uint8 codes ``[..., 2n]`` -> uint8 ``[..., n]``: byte j holds code 2j in its low nibble, 2j+1 in its high."""
    from pypto import ops

    last = c.shape[-1]
    if _is_static(last) and last % 2:
        raise UserError(f"pypto.view: packing 4-bit elements two per byte needs an even last dim, found {last}")
    n = last // 2
    pos, idx = _nibble_positions(c, n)
    codes = ops.remainder(ops.cast(c, _dtypes.DT_INT32), 16)
    lo = gather(codes, -1, ops.mul(idx, 2))
    hi = gather(codes, -1, ops.add(ops.mul(idx, 2), 1))
    return ops.cast(ops.add(lo, ops.mul(hi, 16)), _dtypes.DT_UINT8)


def getitem(x: Tensor, key, fill=None) -> Tensor:
    """``x[...]``: slices with steps, ints (drop the dim), ``...`` and ``None`` (new dim).

    ``fill`` (used by ``x[...] = t``) gives, per dim of the result, the length a slice without
    a stop takes: PyPTO's rule that ``out[b:, ...] = t`` writes ``t`` at offset ``b``, the
    region taking ``t``'s shape."""
    if not isinstance(key, tuple):
        key = (key,)
    if fill is None and _is_element_index(x, key):
        return _read_scalar(x, key)
    n_ell = builtins.sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise UserError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    rank = len(x.shape)
    if used > rank:
        raise UserError(f"too many indices for a tensor of rank {rank}: {len(key)}")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (rank - used))
        else:
            expanded.append(k)
    expanded.extend([slice(None)] * (rank - builtins.sum(1 for k in expanded if k is not None)))
    shape, offsets, dmap, steps, valid = [], [0] * rank, [], [], []
    xv = x.valid_shape
    d = 0
    for k in expanded:
        if k is None:
            shape.append(1), dmap.append(-1), steps.append(1), valid.append(1)
            continue
        size = x.shape[d]
        if isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if not _is_static(step) or step <= 0:
                raise NotSupportedError(f"slice step {step!r}: only positive int steps are supported")
            start, stop = k.start, k.stop
            if fill is not None and stop is None:
                start, n = _fill_slice(start, step, size, fill[len(shape)], d)
            elif _is_static(size) and (start is None or _is_static(start)) and (stop is None or _is_static(stop)):
                start, stop, _ = slice(start, stop).indices(size)
                n = builtins.max(0, -(-(stop - start) // step))
                if n == 0:
                    raise NotSupportedError(f"slice {k} of a dim of size {size} is empty; zero-size views are not supported")
            else:
                start = 0 if start is None else start
                stop = size if stop is None else stop
                n = (stop - start + step - 1) // step
            offsets[d] = start
            shape.append(n), dmap.append(d), steps.append(step)
            valid.append(n if (xv[d] is size or (_is_static(xv[d]) and _is_static(size) and xv[d] == size))
                         else _slice_valid(xv[d], start, step, n))
        elif isinstance(k, (numbers.Integral, SymExpr)) and not isinstance(k, bool):
            idx = k
            if _is_static(idx) and _is_static(size):
                if not -size <= idx < size:
                    raise UserError(f"index {idx} is out of range for dim {d} of size {size}")
                idx %= size
            offsets[d] = idx
        elif isinstance(k, Tensor):
            raise NotSupportedError("indexing with a tensor is not supported; use pypto.gather")
        else:
            raise UserTypeError(f"unsupported index {k!r}")
        d += 1
    if not shape:
        shape, dmap, steps, valid = [1], [-1], [1], [1]
    has_tail = any(not (v is s or (_is_static(v) and _is_static(s) and v == s)) for v, s in zip(valid, shape))
    return _view(x, shape, offsets, dmap, steps, valid if has_tail else None, op="getitem")


def _is_element_index(x: Tensor, key: tuple) -> bool:
    """PyPTO's single-element access: an int or symbolic index for every dim of a DT_INT32 tensor."""
    return (x.dtype == DataType.DT_INT32 and len(key) == len(x.shape)
            and builtins.all(isinstance(k, (numbers.Integral, SymExpr)) and not isinstance(k, bool) for k in key))


def _read_scalar(x: Tensor, key: tuple) -> SymExpr:
    """``x[i, j]`` on a DT_INT32 tensor: a symbolic scalar holding that element when the kernel runs
    (read from the tensor's memory by the orchestration, as PyPTO's GetTensorData). Negative
    constant indices count from the end of static dims."""
    ctx = _ctx("getitem")
    ix = _tensor("getitem", x, ctx, "the")
    index = []
    for d, k in enumerate(key):
        size = x.shape[d]
        if _is_static(k) and _is_static(size) and -size <= k < 0:
            k += size
        index.append(_dim(k, "pypto.Tensor.__getitem__: index"))
    file, line = user_location()
    return SymExpr.var(ctx.builder.add_read(ix, index, file, line))


def _fill_slice(start, step, size, n, d):
    """Offset and length of a slice without a stop whose length is ``n`` (see ``getitem``)."""
    if start is None:
        start = 0
    if _is_static(start) and _is_static(size):
        if not -size <= start < size:
            raise UserError(f"slice start {start} is out of range for dim {d} of size {size}")
        start %= size
        if _is_static(n) and start + (n - 1) * step >= size:
            raise UserError(f"a region of {n} elements from offset {start} (step {step}) does not fit dim {d} of "
                            f"size {size}")
    return start, n


def _slice_valid(valid_dim, start, step, n):
    """Valid length of a slice of a dim whose valid extent is ``valid_dim``."""
    v = (valid_dim - start + step - 1) // step
    if isinstance(v, SymExpr) or isinstance(n, SymExpr):
        return SymExpr(to_expr(v)).min(n) if isinstance(v, SymExpr) else builtins.min(v, n) if _is_static(n) else n
    return builtins.max(0, builtins.min(v, n))


def setitem(x: Tensor, key, value) -> None:
    """``x[...] = value``: writes ``value`` (a tensor or number) into the region. As in PyPTO, a
    slice without a stop (``out[b:, ...] = t``) takes its length from ``t``: ``t`` is written at
    offset ``b``."""
    fill = list(value.shape) if isinstance(value, Tensor) else None
    if fill is not None and (len(fill) != _result_rank(key, len(x.shape)) or _whole(key)):
        fill = None  # x[:] = t (every dim a bare ':') writes all of x: t must have x's shape
    target = getitem(x, key, fill)
    if not isinstance(value, Tensor):
        value = full(list(target.shape), value, target.dtype)
    assemble(value, None, target)


def _whole(key) -> bool:
    """A key of bare ':' slices only (``x[:]``, ``x[:, :]``): all of the tensor, as PyPTO's move."""
    keys = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, slice) and k.start is None and k.stop is None and k.step is None for k in keys)


def _result_rank(key, rank: int) -> int:
    """Rank of ``x[key]`` for ``x`` of rank ``rank`` (ints drop a dim, ``None`` adds one)."""
    key = key if isinstance(key, tuple) else (key,)
    ints = builtins.sum(1 for k in key if isinstance(k, (numbers.Integral, SymExpr)) and not isinstance(k, bool))
    return rank - ints + builtins.sum(1 for k in key if k is None)


def move(dst: Tensor, src) -> None:
    """``dst.move(src)``: ``src``'s data into all of ``dst``."""
    _ctx("Tensor.move")
    file, line = user_location()
    at = f"pypto.Tensor.move at {file}:{line}" if file else "pypto.Tensor.move"
    if not isinstance(src, Tensor):
        raise UserTypeError(f"{at}: other must be a pypto.Tensor, found {type(src).__name__}")
    if len(src.shape) != len(dst.shape) or any(str(a) != str(b) for a, b in zip(src.shape, dst.shape)):
        raise UserError(f"{at}: other has shape {list(src.shape)}, expected the shape {list(dst.shape)} of this tensor")
    if src.dtype != dst.dtype:
        raise UserTypeError(f"{at}: other has dtype {src.dtype.name}, expected the dtype {dst.dtype.name} of this "
                            f"tensor")
    assemble(src, None, dst)


@_documented
def assemble(src, offsets, dst=None, parallel: bool = False) -> None:
    if not isinstance(parallel, bool):
        raise UserTypeError(f"pypto.assemble: parallel must be a bool, found {parallel!r}")
    if isinstance(src, (list, tuple)):  # PyPTO's list form: assemble([(t, offsets), ...], out)
        if dst is not None:
            raise UserTypeError("pypto.assemble: the list form takes (inputs, out, parallel=False)")
        dst = offsets
        for i, item in enumerate(src):
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise UserTypeError(f"pypto.assemble: input {i} of the list form must be a (tensor, offsets) pair, "
                                    f"found {item!r}")
            assemble(item[0], item[1], dst)
        return
    if dst is None:
        raise UserTypeError("pypto.assemble: missing the destination tensor (assemble(src, offsets, dst))")
    _write_region("assemble", src, offsets, dst, accumulate=False)


def _write_region(name: str, src, offsets, dst, accumulate: bool) -> None:
    """Copies (or with `accumulate`, atomically adds) src into dst's box at offsets (offsets=None:
    dst itself, or the view it is)."""
    ctx = _ctx(name)
    if not isinstance(src, Tensor):
        raise UserTypeError(f"pypto.{name}: src must be a pypto.Tensor, found {type(src).__name__}")
    if not isinstance(dst, Tensor):
        raise UserTypeError(f"pypto.{name}: dst must be a pypto.Tensor, found {type(dst).__name__}")
    if offsets is None:
        target = dst
        if not ctx.builder.is_view(target._id):
            target = view(dst, list(dst.shape), [0] * len(dst.shape))
    else:
        if not isinstance(offsets, (list, tuple)):
            raise UserTypeError(f"pypto.{name}: offsets must be a list of ints or symbolic scalars, "
                                f"found {type(offsets).__name__}")
        if len(offsets) != len(dst.shape):
            raise UserError(f"pypto.{name}: {len(offsets)} offsets for a destination of rank {len(dst.shape)}")
        if len(src.shape) != len(dst.shape):
            raise UserError(f"pypto.{name}: source of rank {len(src.shape)} into a destination of rank {len(dst.shape)}")
        target = view(dst, list(src.shape), list(offsets))
    if ctx.packed_params:
        packed = ctx.packed_params.get(ctx.builder.view_root(target._id))
        if packed is not None:
            packed[2] = True  # packed into the caller's bytes at the end (write_back_packed)
    file, line = user_location()
    ctx.builder.add_assemble(_tensor(name, src, ctx, "the source"), target._id, _tile(ctx), file, line, accumulate)


@_documented
def atomic_add(src, offsets, dst) -> None:
    _write_region("atomic_add", src, offsets, dst, accumulate=True)


@_documented
def reshape(x, shape, *, valid_shape=None, inplace: bool = False) -> Tensor:
    if not isinstance(inplace, bool):
        raise UserTypeError(f"pypto.reshape: inplace must be a bool, found {inplace!r}")
    r = _reshape(x, shape)
    # inplace (PyPTO: reuse the input's memory) changes nothing here: a reshape of a contiguous
    # tensor is a view already, and of a view a copy in both modes.
    return _with_valid(r, valid_shape, "reshape")


def _with_valid(t: Tensor, valid_shape, op: str) -> Tensor:
    """``t`` seen with the valid extents ``valid_shape`` (PyPTO's ``valid_shape=`` argument)."""
    if valid_shape is None:
        return t
    if len(valid_shape) != len(t.shape):
        raise UserError(f"pypto.{op}: valid_shape {list(valid_shape)} must have the rank {len(t.shape)} of the result")
    return view(t, list(t.shape), [0] * len(t.shape), valid_shape=list(valid_shape))


def _reshape(x, shape) -> Tensor:
    ctx = _ctx("reshape")
    ix = _tensor("reshape", x, ctx, "the")
    shape = list(shape)
    if builtins.sum(1 for d in shape if _is_static(d) and d == -1) > 1:
        raise UserError(f"pypto.reshape: only one dim may be -1, found {shape}")
    if any(_is_static(d) and d == -1 for d in shape):
        total = 1
        for d in x.shape:
            total = total * d
        known = 1
        for d in shape:
            if not (_is_static(d) and d == -1):
                known = known * d
        shape = [total // known if (_is_static(d) and d == -1) else d for d in shape]
    if any(ctx.builder.is_view(t) for t in [ix]):
        x = _materialize(x)
        ix = x._id
    file, line = user_location()
    ctx.reshaped_params.add(ix)
    return Tensor._traced(ctx, ctx.builder.add_reshape(ix, [_dim(d, "pypto.reshape: shape") for d in shape], file, line))


@_documented
def permute(x, *dims) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    rank = len(x.shape)
    dims = [d % rank if _is_static(d) and -rank <= d < rank else d for d in dims]
    if sorted(dims) != list(range(rank)):
        raise UserError(f"pypto.permute: {list(dims)} is not a permutation of the {rank} dims")
    return _view(x, [x.shape[d] for d in dims], [0] * rank, dims, [1] * rank,
                 [x.valid_shape[d] for d in dims], op="permute")


@_documented
def transpose(x, d0, d1) -> Tensor:
    rank = len(x.shape)
    for d in (d0, d1):
        if not _is_static(d) or not -rank <= d < rank:
            raise UserError(f"pypto.transpose: dim {d!r} is out of range for a tensor of rank {rank}")
    perm = list(range(rank))
    perm[d0 % rank], perm[d1 % rank] = perm[d1 % rank], perm[d0 % rank]
    return permute(x, perm)


@_documented
def unsqueeze(x, dim: int) -> Tensor:
    rank = len(x.shape)
    if not _is_static(dim) or not -rank - 1 <= dim <= rank:
        raise UserError(f"pypto.unsqueeze: dim {dim!r} is out of range for a tensor of rank {rank}")
    dim %= rank + 1
    shape = list(x.shape)
    shape.insert(dim, 1)
    dmap = list(range(rank))
    dmap.insert(dim, -1)
    valid = list(x.valid_shape)
    valid.insert(dim, 1)
    return _view(x, shape, [0] * rank, dmap, [1] * (rank + 1), valid, op="unsqueeze")


@_documented
def squeeze(x, dim: int) -> Tensor:
    rank = len(x.shape)
    if not _is_static(dim) or not -rank <= dim < rank or x.shape[dim % rank] != 1:
        raise UserError(f"pypto.squeeze: dim {dim!r} is not a size-1 dim of shape {x.shape}")
    dim %= rank
    keep = [d for d in range(rank) if d != dim]
    return _view(x, [x.shape[d] for d in keep], [0] * rank, keep, [1] * len(keep),
                 [x.valid_shape[d] for d in keep], op="squeeze")


@_documented
def full(shape, value, dtype: DataType, valid_shape=None) -> Tensor:
    ctx = _ctx("full")
    if not isinstance(dtype, DataType):
        raise UserTypeError(f"pypto.full: dtype must be a pypto dtype, found {dtype!r}")
    if isinstance(shape, (numbers.Integral, SymExpr)):
        shape = [shape]
    shape = list(shape)
    tile = _tile(ctx)
    if len(tile) != len(shape):
        tile = _fit_tile(tile, len(shape))
    file, line = user_location()
    vid = ctx.builder.add_full([_dim(d, "pypto.full: shape") for d in shape], _operand("full", value, ctx, "value"),
                               dtype, [_dim(d, "pypto.full: valid_shape") for d in (valid_shape or [])], tile, file, line)
    return Tensor._traced(ctx, vid)


def local_tensor(shape, dtype, name: str = "") -> Tensor:
    """``pypto.tensor(shape, dtype)`` while tracing: a zero-filled local tensor. Without a vec tile
    shape it is filled in blocks of up to 8192 elements, taken from the last dims."""
    ctx = _ctx("tensor")
    if not isinstance(dtype, DataType):
        raise UserTypeError(f"pypto.tensor: dtype must be a pypto dtype such as pypto.DT_FP32, found {dtype!r}")
    if isinstance(shape, (numbers.Integral, SymExpr)):
        shape = [shape]
    if not isinstance(shape, (list, tuple)) or not shape:
        raise UserTypeError(f"pypto.tensor: shape must be a non-empty list of dims, found {shape!r}")
    for d in shape:
        if not isinstance(d, SymExpr) and (not _is_static(d) or d <= 0):
            raise UserError(f"pypto.tensor: shape dims must be positive ints or symbolic scalars, found {list(shape)}")
    if ctx.vec_tile is not None:
        t = full(list(shape), 0, dtype)
    else:
        budget, tile = 8192, []
        for d in reversed(shape):
            n = builtins.max(1, builtins.min(budget, d if _is_static(d) else budget))
            tile.insert(0, n)
            budget = builtins.max(1, budget // n)
        ctx.vec_tile = tuple(tile)
        try:
            t = full(list(shape), 0, dtype)
        finally:
            ctx.vec_tile = None
    t.name = name
    return t


def copy_tile(shape, budget: int = 8192) -> tuple[int, ...]:
    """A tile for a copy with no vec tile shape in force: whole rows of the last dim (up to
    ``budget`` elements), then as many of the dims before it as the budget allows; 1 along a
    dynamic dim."""
    tile = [1] * len(shape)
    room = budget
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d] if _is_static(shape[d]) else 1
        tile[d] = max(1, min(n, room))
        room = max(1, room // tile[d])
    return tuple(tile)


def _fit_tile(tile: list[int], rank: int) -> list[int]:
    """A creation op's tile: the active tile's leading dims when it has enough (the rule of every
    op, as PyPTO), else the tile with 1s in front."""
    if not tile or len(tile) >= rank:
        return tile[:rank]
    return [1] * (rank - len(tile)) + tile


@_documented
def zeros(*size, dtype: DataType | None = None, valid_shape=None) -> Tensor:
    shape, dtype = _size_args("zeros", size, dtype)
    return full(shape, 0, dtype, valid_shape)


def _size_args(op: str, size: tuple, dtype):
    """PyPTO's ``zeros(*size, dtype=None)``: ``zeros(2, 3)`` or ``zeros([2, 3])``; the older
    ``zeros(shape, dtype)`` form keeps working."""
    if size and isinstance(size[-1], DataType):
        if dtype is not None:
            raise UserTypeError(f"pypto.{op}: dtype given twice")
        size, dtype = size[:-1], size[-1]
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    if not size:
        raise UserError(f"pypto.{op}: expected the sizes of the dims, found none")
    return list(size), _dtypes.DT_FP32 if dtype is None else dtype


@_documented
def ones(*size, dtype: DataType | None = None, valid_shape=None) -> Tensor:
    shape, dtype = _size_args("ones", size, dtype)
    return full(shape, 1, dtype, valid_shape)


@_documented
def arange(start, end=None, step=1, dtype: DataType | None = None) -> Tensor:
    ctx = _ctx("arange")
    if end is None:
        start, end = 0, start
    for v in (start, step):
        if not isinstance(v, numbers.Real):
            raise UserTypeError(f"pypto.arange: start and step must be numbers, found {v!r}")
    if step == 0:
        raise UserError("pypto.arange: step must not be zero")
    if dtype is None:
        dtype = _dtypes.DT_INT64 if all(isinstance(v, numbers.Integral) for v in (start, step)) and \
            isinstance(end, (numbers.Integral, SymExpr)) else _dtypes.DT_FP32
    if isinstance(end, SymExpr) or isinstance(start, SymExpr):
        n = (end - start + step - 1) // step
    else:
        import math

        n = builtins.max(0, math.ceil((end - start) / step))
        if n == 0:
            raise NotSupportedError("pypto.arange: an empty range is not supported")
    file, line = user_location()
    tile = _fit_tile(_tile(ctx), 1)
    return Tensor._traced(ctx, ctx.builder.add_arange(_dim(n, "pypto.arange: length"), float(start), float(step), dtype,
                                                      tile, file, line))


def _same_extents(a, b, skip: int | None = None) -> bool:
    """Whether two lists of extents the builder returned (ints, or symbolic expressions for dynamic
    dims) are the same, dim ``skip`` aside: equal ints, or structurally equal expressions."""
    if len(a) != len(b):
        return False
    for d, (x, y) in enumerate(zip(a, b)):
        if d == skip:
            continue
        if isinstance(x, int) or isinstance(y, int):
            if not (isinstance(x, int) and isinstance(y, int) and x == y):
                return False
        elif not x.equals(y):
            return False
    return True


def _mark_covered(src: Tensor, out: Tensor) -> None:
    """After a copy of all of ``src`` into the new ``out``: ``out``'s zero fill is dropped when the
    copy writes every element (``src`` valid in whole over ``out``'s shape: no tail, dynamic dims
    included when their extents are the same expression)."""
    b = out._ctx.builder
    if _same_extents(b.valid_shape(src._id), b.shape(out._id)):
        b.mark_covered(out._id)


def _materialize(src: Tensor, any_tile: bool = False) -> Tensor:
    """A new tensor holding a copy of ``src`` (e.g. a view), tiled by the
    active vec tile fitted to its rank; with none in force, by ``copy_tile`` if ``any_tile``
    (else the copy needs a vec tile, as other ops do)."""
    ctx = _ctx("assemble")
    from pypto.frontend.symbolic import wrap

    shape = [d if isinstance(d, int) else wrap(d) for d in ctx.builder.shape(src._id)]  # a 0-d value is [1]
    saved = ctx.vec_tile
    if saved is not None and len(saved) != len(shape):
        ctx.vec_tile = tuple(_fit_tile(list(saved), len(shape)))
    elif saved is None and any_tile:
        ctx.vec_tile = copy_tile(shape)
    zero_d = src._id in ctx.zero_d
    ctx.zero_d.discard(src._id)  # copied as the shape [1] that holds it
    try:
        out = full(shape, 0, src.dtype)
        assemble(src, [0] * len(shape), out)
        _mark_covered(src, out)
    finally:
        ctx.vec_tile = saved
        if zero_d:
            ctx.zero_d.update((src._id, out._id))
    return out


@_documented
def clone(x) -> Tensor:
    if not isinstance(x, Tensor):
        raise UserTypeError(f"pypto.clone: the operand must be a pypto.Tensor, found {type(x).__name__}")
    out = local_tensor(list(x.shape), x.dtype)
    assemble(x, [0] * len(x.shape), out)
    _mark_covered(x, out)
    return out


@_documented
def expand_clone(x, shape, *, valid_shape=None) -> Tensor:
    return _with_valid(_expand_clone(x, shape), valid_shape, "expand_clone")


def _expand_clone(x, shape) -> Tensor:
    shape = list(shape)
    rank, xr = len(shape), len(x.shape)
    if xr > rank:
        raise UserError(f"pypto.expand_clone: cannot expand shape {x.shape} to {shape}")
    dmap, steps = [], []
    for d in range(rank):
        k = d - (rank - xr)
        if k < 0 or (_is_static(x.shape[k]) and x.shape[k] == 1 and not (_is_static(shape[d]) and shape[d] == 1)):
            dmap.append(-1)
        elif _is_static(x.shape[k]) and _is_static(shape[d]) and x.shape[k] != shape[d]:
            raise UserError(f"pypto.expand_clone: cannot expand shape {x.shape} to {shape}")
        else:
            dmap.append(k)
        steps.append(1)
    v = _view(x, shape, [0] * xr, dmap, steps, op="expand_clone")
    return _materialize(v)


@_documented
def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise UserError("pypto.concat: needs at least one tensor")
    rank = len(tensors[0].shape)
    if not _is_static(dim) or not -rank <= dim < rank:
        raise UserError(f"pypto.concat: dim {dim!r} is out of range for rank {rank}")
    dim %= rank
    total = 0
    for t in tensors:
        if len(t.shape) != rank:
            raise UserError(f"pypto.concat: tensors of ranks {rank} and {len(t.shape)}")
        total = total + t.shape[dim]
    shape = list(tensors[0].shape)
    shape[dim] = total
    out = full(shape, 0, tensors[0].dtype)
    off = 0
    for t in tensors:
        offsets = [0] * rank
        offsets[dim] = off
        assemble(t, offsets, out)
        off = off + t.shape[dim]
    # The parts tile the output along dim: when each is valid in whole and spans the output's other
    # dims, the copies write every element and the output needs no zero fill.
    b = out._ctx.builder
    if all(_same_extents(b.valid_shape(t._id), b.shape(t._id)) and _same_extents(b.shape(t._id), b.shape(out._id), dim)
           for t in tensors):
        b.mark_covered(out._id)
    return out


@_documented
def gather(x, dim: int, index) -> Tensor:
    ctx = _ctx("gather")
    ix, ii = _tensor("gather", x, ctx, "the"), _tensor("gather", index, ctx, "index")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise UserTypeError(f"pypto.gather: dim must be an int, found {dim!r}")
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_gather(ix, dim, ii, _tile(ctx), file, line))


@_documented
def scatter(x, dim: int, index, src, *, reduce: str | None = None) -> Tensor:
    _tensor("scatter", x, _ctx("scatter"), "the")
    return scatter_into("scatter", _materialize(x), dim, index, src, reduce)


def scatter_into(op: str, target: Tensor, dim, index, src, reduce) -> Tensor:
    """Writes ``src`` (a tensor or a number) into ``target``'s memory along ``dim`` at ``index``, as
    torch.scatter_ (a src larger than index is read in its leading part); returns ``target``.
    Errors name ``op``."""
    ctx = _ctx(op)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise UserTypeError(f"pypto.{op}: dim must be an int, found {dim!r}")
    if reduce is not None and reduce not in ("add", "multiply"):
        raise UserError(f"pypto.{op}: reduce must be None, 'add' or 'multiply', found {reduce!r}")
    ii = _tensor(op, index, ctx, "index")
    if isinstance(src, Element):
        src = src.value
    if not isinstance(src, Tensor):
        if isinstance(src, bool) or not isinstance(src, numbers.Real):
            raise UserTypeError(f"pypto.{op}: src must be a pypto.Tensor or a number, found {type(src).__name__}")
        src = full(list(index.shape), src, target.dtype)
    elif len(src.shape) == len(index.shape) and all(_is_static(a) and _is_static(b) and a >= b
                                                     for a, b in zip(src.shape, index.shape)):
        if list(src.shape) != list(index.shape):  # a larger src: its leading part, as torch
            src = view(src, list(index.shape), [0] * len(index.shape))
    file, line = user_location()
    ctx.builder.add_scatter(target._id, dim, ii, _tensor(op, src, ctx, "src"), reduce or "", _tile(ctx), file, line,
                            op)
    return target
