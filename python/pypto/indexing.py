"""Indexing ops written with gather and scatter: ``index_select``, ``index_add``/``index_add_``,
``index_put_``, ``scatter_``, ``scatter_update``, ``one_hot`` and ``gathermask``.

A 1-D index along one dim is read through a broadcast view (no copy), so each op is one gather or
one scatter. Indices are checked when the kernel runs: one outside the dim raises pypto.TaskError
naming the op and nothing is written for it."""

from __future__ import annotations

import builtins
import numbers

from pypto import _dtypes
from pypto.errors import UserError, UserTypeError
from pypto.frontend.config import user_location
from pypto.frontend.tensor import Tensor
from pypto.ops import _at, _ctx, _dims, _documented, _elementwise, _int_arg, _tensor, _tile, cast
from pypto.shape_ops import _fit_tile, _is_static, _materialize, _view, full, reshape, scatter_into

_INDEX_DTYPES = (_dtypes.DT_INT32, _dtypes.DT_INT64)


def _index(op: str, index, name: str = "index", ranks=(1,)) -> Tensor:
    """Checks an index argument: a DT_INT32/DT_INT64 tensor of one of ``ranks``."""
    _tensor(op, index, _ctx(op), name)
    if index.dtype not in _INDEX_DTYPES:
        raise UserTypeError(f"{_at(op)}: {name} must be DT_INT32 or DT_INT64, found {index.dtype.name}")
    if len(index.shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise UserError(f"{_at(op)}: {name} must have {want} dim{'s' if ranks != (1,) else ''}, found shape "
                        f"{list(index.shape)}")
    return index


def _dim_of(op: str, x: Tensor, dim) -> int:
    return _dims(op, x, _int_arg(op, "dim", dim))[0]


def _along(op: str, index: Tensor, shape, d: int) -> Tensor:
    """The 1-D ``index`` seen as a tensor of ``shape`` that varies along dim ``d`` only (a view)."""
    rank = len(shape)
    ones = [1] * rank
    ones[d] = index.shape[0]
    stood = reshape(index, ones) if rank > 1 else index
    return _view(stood, list(shape), [0] * rank, [i if i == d else -1 for i in range(rank)], [1] * rank, op=op)


def _same_dims(op: str, what: str, a, b, skip: int | None = None) -> None:
    """Raises unless the static dims of shapes a and b agree (dim ``skip`` aside)."""
    for i, (p, q) in enumerate(zip(a, b)):
        if i != skip and _is_static(p) and _is_static(q) and p != q:
            raise UserError(f"{_at(op)}: {what} (dim {i}: {p} versus {q})")


@_documented
def index_select(input, dim, index) -> Tensor:  # noqa: A002 - PyPTO's name
    op = "index_select"
    ctx = _ctx(op)
    _tensor(op, input, ctx, "the")
    d = _dim_of(op, input, dim)
    _index(op, index, ranks=(1, 2))
    if len(index.shape) == 1:
        return select_along(op, input, d, index)
    # A 2-D index: one gather along its flattened entries, then the dim becomes the index's two
    # dims. A vec tile of the result's rank tiles the flat gather with its two index dims merged
    # (4 x 8 rows of 1024 become 32 x 1024, not 4 x 8).
    saved = ctx.vec_tile
    if saved is not None and len(saved) == len(input.shape) + 1:
        ctx.vec_tile = tuple(saved[:d]) + (saved[d] * saved[d + 1],) + tuple(saved[d + 2:])
    try:
        out = select_along(op, input, d, reshape(index, [index.shape[0] * index.shape[1]]))
    finally:
        ctx.vec_tile = saved
    return reshape(out, list(input.shape[:d]) + list(index.shape) + list(input.shape[d + 1:]))


def select_along(op: str, input: Tensor, d: int, index: Tensor) -> Tensor:  # noqa: A002
    """``input``'s slices along dim ``d`` at the positions of the 1-D ``index`` (one gather; an index
    outside the dim raises pypto.TaskError naming ``op`` when the kernel runs)."""
    ctx = _ctx(op)
    shape = list(input.shape)
    shape[d] = index.shape[0]
    file, line = user_location()
    return Tensor._traced(ctx, ctx.builder.add_gather(input._id, d, _along(op, index, shape, d)._id, _tile(ctx), file,
                                                      line, op))


def _index_add_source(op: str, input: Tensor, d: int, index: Tensor, source, alpha) -> Tensor:
    """Checks index_add's arguments; the source scaled by alpha and the index along ``d`` (a view)."""
    _tensor(op, source, _ctx(op), "source")
    if source.dtype != input.dtype:
        raise UserTypeError(f"{_at(op)}: source must have the input's dtype {input.dtype.name}, found "
                            f"{source.dtype.name}")
    if len(source.shape) != len(input.shape):
        raise UserError(f"{_at(op)}: source of shape {list(source.shape)} must have the rank of the input of shape "
                        f"{list(input.shape)}")
    _same_dims(op, f"source of shape {list(source.shape)} must match the input of shape {list(input.shape)} outside "
                   f"dim {d}", source.shape, input.shape, d)
    n, t = source.shape[d], index.shape[0]
    if _is_static(n) and _is_static(t) and n != t:
        raise UserError(f"{_at(op)}: index has {t} entries but source has {n} in dim {d}")
    if isinstance(alpha, builtins.bool) or not isinstance(alpha, numbers.Real):
        raise UserTypeError(f"{_at(op)}: alpha must be a number, found {type(alpha).__name__} {alpha!r}")
    floating = input.dtype in (_dtypes.DT_FP32, _dtypes.DT_FP16, _dtypes.DT_BF16, _dtypes.DT_DOUBLE)
    if not floating and not isinstance(alpha, numbers.Integral):
        raise UserTypeError(f"{_at(op)}: alpha must be an int for the integer input dtype {input.dtype.name}, found "
                            f"{alpha!r}")
    scaled = source if alpha == 1 else _elementwise("mul", source, alpha)
    return scaled, _along(op, index, list(source.shape), d)


def _index_add(op: str, target: Tensor, input, dim, index, source, alpha) -> Tensor:
    d = _dim_of(op, input, dim)
    _index(op, index)
    scaled, idx = _index_add_source(op, input, d, index, source, alpha)
    return scatter_into(op, target, d, idx, scaled, "add")


@_documented
def index_add_(input, dim, index, source, *, alpha=1) -> Tensor:  # noqa: A002 - PyPTO's names
    _tensor("index_add_", input, _ctx("index_add_"), "the")
    return _index_add("index_add_", input, input, dim, index, source, alpha)


@_documented
def index_add(input, dim, index, source, *, alpha=1) -> Tensor:  # noqa: A002 - PyPTO's names
    _tensor("index_add", input, _ctx("index_add"), "the")
    return _index_add("index_add", _materialize(input), input, dim, index, source, alpha)


@_documented
def index_add_ub(input, dim, index, source, *, alpha=1) -> Tensor:  # noqa: A002 - PyPTO's names
    _tensor("index_add_ub", input, _ctx("index_add_ub"), "the")
    return _index_add("index_add_ub", _materialize(input), input, dim, index, source, alpha)


@_documented
def index_add__ub(input, dim, index, source, *, alpha=1) -> Tensor:  # noqa: A002 - PyPTO's names
    _tensor("index_add__ub", input, _ctx("index_add__ub"), "the")
    return _index_add("index_add__ub", input, input, dim, index, source, alpha)


def get_scatter_mode(reduce):
    """PyPTO's ScatterMode for a scatter's ``reduce=`` (None, 'add' or 'multiply')."""
    from pypto.enums import ScatterMode

    modes = {None: ScatterMode.NONE, "add": ScatterMode.ADD, "multiply": ScatterMode.MULTIPLY}
    if not isinstance(reduce, (str, type(None))) or reduce not in modes:
        raise UserError(f"pypto.get_scatter_mode: reduce must be None, 'add' or 'multiply', found {reduce!r}")
    return modes[reduce]


@_documented
def scatter_(input, dim, index, src, *, reduce=None) -> Tensor:  # noqa: A002 - PyPTO's name
    _tensor("scatter_", input, _ctx("scatter_"), "the")
    return scatter_into("scatter_", input, dim, index, src, reduce)


def _rows_of(op: str, input: Tensor, k: int) -> Tensor:
    """``input`` with its first ``k`` dims flattened into one (a view of its memory)."""
    if k == 1:
        return input
    if _ctx(op).builder.is_view(input._id):
        raise UserError(f"{_at(op)}: indexing {k} dims of a view is not supported yet; index a tensor "
                        "(or clone the view first)")
    lead = 1
    for s in input.shape[:k]:
        lead = lead * s
    return reshape(input, [lead] + list(input.shape[k:]))


def _put_rows(op: str, target: Tensor, rows: Tensor, values: Tensor, accumulate: bool) -> None:
    """target[rows[i], ...] = values[i, ...] (or += with accumulate), in index order."""
    scatter_into(op, target, 0, _along(op, rows, list(values.shape), 0), values, "add" if accumulate else None)


@_documented
def index_put_(input, indices, values, accumulate=False) -> None:  # noqa: A002 - PyPTO's names
    op = "index_put_"
    ctx = _ctx(op)
    _tensor(op, input, ctx, "the")
    _tensor(op, values, ctx, "values")
    if not isinstance(accumulate, builtins.bool):
        raise UserTypeError(f"{_at(op)}: accumulate must be a bool, found {type(accumulate).__name__} {accumulate!r}")
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise UserTypeError(f"{_at(op)}: indices must be a tuple of 1-D index tensors, found {type(indices).__name__}")
    rank, k = len(input.shape), len(indices)
    if not 1 <= k <= rank:
        raise UserError(f"{_at(op)}: indices holds {k} tensors; expected 1 to {rank} (the input's rank)")
    idx = [_index(op, t, f"indices[{j}]") for j, t in enumerate(indices)]
    n = idx[0].shape[0]
    for j, t in enumerate(idx[1:], 1):
        if _is_static(n) and _is_static(t.shape[0]) and t.shape[0] != n:
            raise UserError(f"{_at(op)}: indices[{j}] has {t.shape[0]} entries but indices[0] has {n}")
    if values.dtype != input.dtype:
        raise UserTypeError(f"{_at(op)}: values must have the input's dtype {input.dtype.name}, found "
                            f"{values.dtype.name}")
    want = [n] + list(input.shape[k:])
    if len(values.shape) != len(want):
        raise UserError(f"{_at(op)}: values of shape {list(values.shape)} must have the shape {want} (the index length, "
                        f"then the input's dims after the {k} indexed)")
    _same_dims(op, f"values of shape {list(values.shape)} must have the shape {want}", values.shape, want)
    # One row index into the first k dims flattened; negative indices count from the end (as torch), and
    # an index outside its dim becomes -1, which the scatter reports when the kernel runs.
    row, ok, first = None, None, None
    for j, t in enumerate(idx):
        size = input.shape[j]
        t = cast(t, _dtypes.DT_INT64)
        first = t if j == 0 else first
        inside = _elementwise("logical_and", _elementwise("ge", t, -size), _elementwise("lt", t, size))
        t = _elementwise("where", _elementwise("lt", t, 0), _elementwise("add", t, size), t)
        row = t if row is None else _elementwise("add", _elementwise("mul", row, size), t)
        ok = inside if ok is None else _elementwise("logical_and", ok, inside)
    # An index outside its dim: the user's value itself where one dim is indexed, else -1.
    row = _elementwise("where", ok, row, first if k == 1 else -1)
    _put_rows(op, _rows_of(op, input, k), row, values, accumulate)
    return None


@_documented
def scatter_update(input, dim, index, src) -> Tensor:  # noqa: A002 - PyPTO's names
    op = "scatter_update"
    ctx = _ctx(op)
    _tensor(op, input, ctx, "the")
    _tensor(op, src, ctx, "src")
    if _int_arg(op, "dim", dim) != -2:
        raise UserError(f"{_at(op)}: dim must be -2, found {dim}")
    rank = len(input.shape)
    if rank not in (2, 4):
        raise UserError(f"{_at(op)}: the input must have 2 dims [blocks * block_size, d] or 4 dims "
                        f"[blocks, block_size, 1, d], found shape {list(input.shape)}")
    _index(op, index, ranks=(2,))
    if src.dtype != input.dtype:
        raise UserTypeError(f"{_at(op)}: src must have the input's dtype {input.dtype.name}, found {src.dtype.name}")
    b, s = index.shape
    want = [b * s, input.shape[1]] if rank == 2 else [b, s] + list(input.shape[2:])
    if len(src.shape) != rank:
        raise UserError(f"{_at(op)}: src of shape {list(src.shape)} must have the shape {want}")
    _same_dims(op, f"src of shape {list(src.shape)} must have the shape {want}", src.shape, want)
    rows = reshape(index, [b * s])
    values = src if rank == 2 else reshape(src, [b * s] + list(input.shape[2:]))
    _put_rows(op, _rows_of(op, input, 1 if rank == 2 else 2), rows, values, False)
    return input


@_documented
def one_hot(input, num_classes) -> Tensor:  # noqa: A002 - PyPTO's name
    op = "one_hot"
    ctx = _ctx(op)
    _tensor(op, input, ctx, "the")
    c = _int_arg(op, "num_classes", num_classes)
    if c < 1:
        raise UserError(f"{_at(op)}: num_classes must be >= 1, found {c}")
    if input.dtype not in (_dtypes.DT_INT8, _dtypes.DT_INT16, _dtypes.DT_INT32, _dtypes.DT_INT64, _dtypes.DT_UINT8):
        raise UserTypeError(f"{_at(op)}: expects an integer tensor, found {input.dtype.name}")
    rank = len(input.shape)
    idx = input if input.dtype in _INDEX_DTYPES else cast(input, _dtypes.DT_INT32)
    stood = reshape(idx, list(input.shape) + [1])
    saved = ctx.vec_tile  # the tile may be given for the input or (as PyPTO) for the result
    if saved is not None and len(saved) != rank + 1:
        ctx.vec_tile = tuple(_fit_tile(list(saved), rank + 1))
    try:
        out = full(list(input.shape) + [c], 0, _dtypes.DT_INT64)
        # A class outside [0, num_classes) raises when the kernel runs (torch raises too).
        return scatter_into(op, out, rank, stood, 1, None)
    finally:
        ctx.vec_tile = saved


_PATTERNS = {1: (2, 0), 2: (2, 1), 3: (4, 0), 4: (4, 1), 5: (4, 2), 6: (4, 3), 7: (1, 0)}


@_documented
def gathermask(self, pattern_mode) -> Tensor:
    op = "gathermask"
    _tensor(op, self, _ctx(op), "the")
    mode = _int_arg(op, "pattern_mode", pattern_mode)
    if mode not in _PATTERNS:
        raise UserError(f"{_at(op)}: pattern_mode must be 1 to 7, found {mode}")
    step, first = _PATTERNS[mode]
    n = self.shape[-1]
    if not _is_static(n):
        raise UserError(f"{_at(op)}: the last dim must be static, found {n}")
    if n % step:
        raise UserError(f"{_at(op)}: pattern_mode {mode} takes one of every {step} elements; the last dim {n} is not a "
                        f"multiple of {step}")
    if step == 1:
        return _materialize(self)
    rank = len(self.shape)
    picked = _view(self, list(self.shape[:-1]) + [n // step], [0] * (rank - 1) + [first], list(range(rank)),
                   [1] * (rank - 1) + [step], op=op)
    return _materialize(picked)

