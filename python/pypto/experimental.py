"""PyPTO's ``pypto.experimental`` names that exist here: the operation options and the paged-cache
gathers ``gather_in_ub`` and ``gather_in_l1``.

The gathers fetch the rows of a paged KV cache named by logical token positions: position ``p``
lives in logical block ``p // block_size``, which the block table maps to a physical block, so its
row is ``block_table[0, p // block_size] * block_size + p % block_size``. On a chip the two differ
in the buffer they fill (UB for the vector unit, L1 for the cube unit); on a CPU both are the same
gathers: one through the block table, one of the cache's rows, each checked when the kernel runs."""

from __future__ import annotations

import numbers

from pypto import _dtypes
from pypto.errors import UserError, UserTypeError
from pypto.frontend.tensor import Tensor
from pypto.indexing import _INDEX_DTYPES, select_along
from pypto.ops import _at, _ctx, _elementwise, _tensor, cast
from pypto.options import get_operation_options, set_operation_options
from pypto.shape_ops import _is_static, reshape, view

__all__ = ["gather_in_l1", "gather_in_ub", "get_operation_options", "set_operation_options"]


def _row_vector(op: str, t, name: str, dtypes) -> Tensor:
    """Checks a [1, n] index tensor of one of ``dtypes``; returns it as a 1-D tensor (a view)."""
    _tensor(op, t, _ctx(op), name)
    if t.dtype not in dtypes:
        want = " or ".join(d.name for d in dtypes)
        raise UserTypeError(f"{_at(op)}: {name} must be {want}, found {t.dtype.name}")
    if len(t.shape) != 2 or (_is_static(t.shape[0]) and t.shape[0] != 1):
        raise UserError(f"{_at(op)}: {name} must have the shape [1, n], found {list(t.shape)}")
    return reshape(t, [t.shape[1]])


def _paged_rows(op: str, name: str, src, indices, block_table, block_size) -> Tensor:
    """Checks the arguments the two gathers share; returns the physical row of each position."""
    _tensor(op, src, _ctx(op), name)
    if len(src.shape) != 2:
        raise UserError(f"{_at(op)}: {name} must have 2 dims, found shape {list(src.shape)}")
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size < 1:
        raise UserError(f"{_at(op)}: block_size must be an int >= 1, found {block_size!r}")
    size = int(block_size)
    positions = _row_vector(op, indices, "indices", _INDEX_DTYPES)
    table = _row_vector(op, block_table, "block_table", (_dtypes.DT_INT32,))
    if positions.dtype != table.dtype:
        positions = cast(positions, table.dtype)
    logical = _elementwise("floor_div", positions, size)
    within = _elementwise("sub", positions, _elementwise("mul", logical, size))
    physical = select_along(op, table, 0, logical)
    return _elementwise("add", _elementwise("mul", physical, size), within)


def gather_in_ub(param, indices, block_table, block_size: int, axis: int) -> Tensor:
    """Rows of a paged cache ``param`` [tokens, hidden] at the logical positions ``indices`` [1, k]
    (DT_INT32 or DT_INT64) through the page table ``block_table`` [1, blocks] (DT_INT32) with
    ``block_size`` tokens per block: a [k, hidden] tensor of param's dtype. ``axis`` must be -2.
    A position whose block is outside the table, or whose row is outside param, raises
    pypto.TaskError naming gather_in_ub when the kernel runs."""
    op = "gather_in_ub"
    if axis != -2:
        raise UserError(f"{_at(op)}: axis must be -2, found {axis!r}")
    return select_along(op, param, 0, _paged_rows(op, "param", param, indices, block_table, block_size))


def gather_in_l1(src, indices, block_table, block_size: int, size: int, is_b_matrix: bool,
                 is_trans: bool) -> Tensor:
    """The first ``size`` elements of the rows of a paged cache ``src`` [tokens, d] at the logical
    positions ``indices`` [1, n] (DT_INT32 or DT_INT64) through ``block_table`` [1, blocks]
    (DT_INT32) with ``block_size`` tokens per block: a [n, size] tensor of src's dtype.
    ``is_b_matrix`` and ``is_trans`` choose the chip's L1 layout for the matmul that reads the
    result and leave its values alone. Positions are checked when the kernel runs, as gather_in_ub."""
    op = "gather_in_l1"
    for name, flag in (("is_b_matrix", is_b_matrix), ("is_trans", is_trans)):
        if not isinstance(flag, bool):
            raise UserTypeError(f"{_at(op)}: {name} must be a bool, found {flag!r}")
    rows = _paged_rows(op, "src", src, indices, block_table, block_size)
    width = src.shape[1]
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1 or (
            _is_static(width) and size > width):
        raise UserError(f"{_at(op)}: size must be an int in [1, {width}] (src's row length), found {size!r}")
    if not (_is_static(width) and size == width):
        src = view(src, [src.shape[0], int(size)], [0, 0])
    return select_along(op, src, 0, rows)
