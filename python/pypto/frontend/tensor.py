"""``pypto.Tensor``: a parameter/return annotation, and the symbolic value
that tracing hands to the user's function."""

from __future__ import annotations

import enum
from typing import Any, Sequence

from pypto import _dtypes
from pypto._dtypes import DataType
from pypto.errors import UserError, UserTypeError


class StatusType(enum.Enum):
    """PyPTO's marks for the dims of an annotation: ``DYNAMIC`` (also spelled ``DYN``) makes the dim
    an argument of the kernel, compiled once for all sizes; ``STATIC`` takes its size from the call,
    compiled per size (as a plain ``...``)."""

    DYNAMIC = "DYNAMIC"
    DYN = "DYNAMIC"  # an alias: StatusType.DYN is StatusType.DYNAMIC
    STATIC = "STATIC"

    def __repr__(self):
        return f"pypto.{self.name}"

    __str__ = __repr__


DYNAMIC = StatusType.DYNAMIC
DYN = StatusType.DYN
STATIC = StatusType.STATIC


def _ops():
    from pypto import ops

    return ops


class LogicalTensor:
    """The graph value a traced ``pypto.Tensor`` names (PyPTO's logical tensor, and what
    ``Tensor.base()`` returns here): which function is being traced and which value in it."""

    __slots__ = ("_ctx", "_id")

    def __init__(self, ctx: Any, value_id: int):
        self._ctx, self._id = ctx, value_id

    def __eq__(self, other) -> bool:
        return isinstance(other, LogicalTensor) and self._ctx is other._ctx and self._id == other._id

    def __hash__(self) -> int:
        return hash((id(self._ctx), self._id))

    def __repr__(self) -> str:
        return f"<pypto LogicalTensor %{self._id}>"


class Tensor:
    """A tensor of a jitted function.

    As an annotation, ``pypto.Tensor((M, N), pypto.DT_FP32, name="x")``
    declares the shape and dtype a parameter or return value must have. While
    tracing, the function's parameters and every op result are Tensors bound
    to a value of the C++ Tensor Graph; ops on them add graph nodes.
    """

    __slots__ = ("_shape", "_dtype", "name", "_ctx", "_id", "_data")

    def __init__(self, shape: Sequence | None = None, dtype: DataType | None = None, name: str = ""):
        from pypto.frontend.symbolic import SymExpr

        if shape is not None:
            if isinstance(shape, int) and not isinstance(shape, bool):
                shape = (shape,)
            if shape is Ellipsis:
                shape = None
            elif not isinstance(shape, (tuple, list)):
                raise UserTypeError(f"pypto.Tensor: shape must be a tuple or list, found {type(shape).__name__}")
        if shape is not None:
            # -1 is PyPTO's spelling of a dynamic dim in a shape list
            shape = tuple(DYNAMIC if (isinstance(d, int) and not isinstance(d, bool) and d == -1) else d
                          for d in shape)
            for i, d in enumerate(shape):
                if d is Ellipsis:
                    if i != len(shape) - 1:
                        raise UserError("pypto.Tensor: '...' may only stand last in a shape (for the remaining dims)")
                    continue
                if d is DYNAMIC or d is STATIC or isinstance(d, SymExpr):
                    continue
                if isinstance(d, bool) or not isinstance(d, int):
                    raise UserTypeError(f"pypto.Tensor: shape dims must be int, pypto.DYNAMIC, pypto.STATIC, -1 or a "
                                        f"pypto.SymbolicScalar, found {d!r}")
                if d <= 0:
                    raise UserError(f"pypto.Tensor: shape dims must be positive (or -1 for a dynamic dim), "
                                    f"found {tuple(shape)}")
            if len(shape) == 0:
                shape = None  # Tensor([], dtype): the shape comes from the call
        if dtype is not None and not isinstance(dtype, DataType):
            raise UserTypeError(f"pypto.Tensor: dtype must be a pypto dtype such as pypto.DT_FP32, found {dtype!r}")
        if dtype is not None:
            _dtypes.check_storage(dtype, "pypto.Tensor")
        self._shape = shape
        self._dtype = dtype
        self.name = name
        self._ctx = None
        self._id = -1
        self._data = None

    def __class_getitem__(cls, item):
        """``pypto.Tensor[[M, N], dtype]`` and ``pypto.Tensor[...]`` annotations."""
        if item is Ellipsis:
            return cls()
        if isinstance(item, tuple) and len(item) == 2:
            return cls(item[0], item[1])
        if isinstance(item, (list, tuple)):
            return cls(item)
        raise UserTypeError(f"pypto.Tensor[...]: expected [shape, dtype] or ..., found {item!r}")

    @classmethod
    def _traced(cls, ctx: Any, value_id: int, name: str = "") -> "Tensor":
        t = cls.__new__(cls)
        t._shape = None
        t._dtype = None
        t.name = name
        t._ctx = ctx
        t._id = value_id
        t._data = None
        return t

    @property
    def is_traced(self) -> bool:
        return self._ctx is not None

    @property
    def shape(self) -> tuple:
        """The shape: declared (annotation) or traced (ints, and symbolic scalars for dynamic dims)."""
        if self._ctx is not None:
            from pypto.frontend.symbolic import wrap

            if self._id in self._ctx.zero_d:
                return ()
            return tuple(d if isinstance(d, int) else wrap(d) for d in self._ctx.builder.shape(self._id))
        return self._shape

    @property
    def valid_shape(self) -> tuple:
        """Valid extents per dim (smaller than the shape for a tail view)."""
        if self._ctx is None:
            return self._shape
        from pypto.frontend.symbolic import wrap

        return tuple(d if isinstance(d, int) else wrap(d) for d in self._ctx.builder.valid_shape(self._id))

    @property
    def dtype(self) -> DataType | None:
        if self._ctx is not None:
            return self._ctx.builder.dtype(self._id)
        return self._dtype

    @property
    def ndim(self) -> int:
        s = self.shape
        return len(s) if s is not None else 0

    def dim(self) -> int:
        return self.ndim

    def __repr__(self) -> str:
        kind = "traced" if self._ctx is not None else "annotation"
        dt = self.dtype.name if self.dtype is not None else None
        nm = f", name={self.name!r}" if self.name else ""
        return f"pypto.Tensor({self.shape}, {dt}{nm}; {kind})"

    # Operators and methods trace the module-level ops.
    def __add__(self, o): return _ops().add(self, o)
    def __radd__(self, o): return _ops().add(o, self)
    def __sub__(self, o): return _ops().sub(self, o)
    def __rsub__(self, o): return _ops().sub(o, self)
    def __mul__(self, o): return _ops().mul(self, o)
    def __rmul__(self, o): return _ops().mul(o, self)
    def __truediv__(self, o): return _ops().div(self, o)
    def __rtruediv__(self, o): return _ops().div(o, self)
    def __floordiv__(self, o): return _ops().floor_div(self, o)
    def __rfloordiv__(self, o): return _ops().floor_div(o, self)
    def __mod__(self, o): return _ops().remainder(self, o)
    def __rmod__(self, o): return _ops().remainder(o, self)
    def __pow__(self, o): return _ops().pow(self, o)
    def __rpow__(self, o): return _ops().pow(o, self)
    def __neg__(self): return _ops().neg(self)
    def __abs__(self): return _ops().abs(self)
    def __lt__(self, o): return _ops().lt(self, o)
    def __le__(self, o): return _ops().le(self, o)
    def __gt__(self, o): return _ops().gt(self, o)
    def __ge__(self, o): return _ops().ge(self, o)
    def __eq__(self, o): return _ops().eq(self, o)  # type: ignore[override]
    def __ne__(self, o): return _ops().ne(self, o)  # type: ignore[override]
    def __invert__(self): return _ops().bitwise_not(self)
    def __and__(self, o): return _ops().bitwise_and(self, o)
    def __rand__(self, o): return _ops().bitwise_and(o, self)
    def __or__(self, o): return _ops().bitwise_or(self, o)
    def __ror__(self, o): return _ops().bitwise_or(o, self)
    def __xor__(self, o): return _ops().bitwise_xor(self, o)
    def __rxor__(self, o): return _ops().bitwise_xor(o, self)
    def __lshift__(self, o): return _ops().bitwise_left_shift(self, o)
    def __rlshift__(self, o): return _ops().bitwise_left_shift(o, self)
    def __rshift__(self, o): return _ops().bitwise_right_shift(self, o)
    def __rrshift__(self, o): return _ops().bitwise_right_shift(o, self)
    def __matmul__(self, o): return _ops().matmul(self, o)
    def __rmatmul__(self, o): return _ops().matmul(o, self)
    __hash__ = object.__hash__

    def __getitem__(self, key):
        from pypto import shape_ops

        return shape_ops.getitem(self, key)

    def __setitem__(self, key, value):
        from pypto import shape_ops

        shape_ops.setitem(self, key, value)

    def where(self, condition, y):
        """PyPTO's ``Tensor.where`` (as its API reference): this tensor where ``condition`` holds, else
        ``y`` (a tensor or a number), ``pypto.where(condition, self, y)``."""
        return _ops().where(condition, self, y)

    def move(self, other) -> None:
        """PyPTO's ``Tensor.move``: this tensor takes ``other``'s data (same shape and dtype), as
        ``self[:] = other``; the data is copied into this tensor's memory."""
        from pypto import shape_ops

        shape_ops.move(self, other)

    def assemble(self, input, offsets) -> None:  # noqa: A002 - PyPTO's name
        """PyPTO's ``Tensor.assemble``: writes ``input`` into this tensor at ``offsets``
        (``pypto.assemble(input, offsets, self)``)."""
        from pypto import shape_ops

        shape_ops.assemble(input, offsets, self)

    def fill_(self, other) -> "Tensor":
        """PyPTO's ``Tensor.fill_``: sets every element to the number ``other``; returns this tensor."""
        from pypto import shape_ops

        shape_ops.setitem(self, slice(None), other)
        return self

    def copy(self, name: str = "") -> "Tensor":
        """PyPTO's ``Tensor.copy``: a new tensor of this shape and dtype (not its data; see ``clone``)."""
        from pypto.frontend.tensor import tensor

        return tensor(list(self.shape), self.dtype, name)

    def id(self) -> int:
        """An id unique within the traced function (the Tensor Graph value); -1 for an annotation."""
        return self._id

    def format(self):
        """The memory format: always ``pypto.TileOpFormat.TILEOP_ND`` (row-major) here."""
        from pypto.enums import TileOpFormat

        return TileOpFormat.TILEOP_ND

    def base(self) -> LogicalTensor:
        """PyPTO's ``Tensor.base()``: the graph value this traced tensor names (see ``from_base``)."""
        if self._ctx is None:
            what = f" '{self.name}'" if self.name else ""
            raise UserError(f"pypto.Tensor.base: tensor{what} is not a traced tensor (an annotation or a tensor of a "
                            "function block that is not being traced); only traced tensors name a graph value")
        return LogicalTensor(self._ctx, self._id)

    logical_tensor = base

    @classmethod
    def from_base(cls, base: "LogicalTensor | Tensor", name: str = "") -> "Tensor":
        """A tensor naming the graph value ``base`` (from ``Tensor.base()`` or ``logical_tensor()``)."""
        if isinstance(base, Tensor):
            base = base.base()
        if not isinstance(base, LogicalTensor):
            raise UserTypeError(f"pypto.Tensor.from_base: expected the result of Tensor.base(), found "
                                f"{type(base).__name__}")
        return cls._traced(base._ctx, base._id, name)

    from_logical_tensor = from_base

    def set_logical_tensor(self, logical_tensor: "LogicalTensor | Tensor") -> None:
        """PyPTO's ``set_logical_tensor``: this tensor takes that value's data (as ``move``)."""
        other = Tensor.from_base(logical_tensor)
        if self._ctx is not None and other._ctx is self._ctx and other._id == self._id:
            return
        self.move(other)

    def to_tensor(self, name: str = "") -> "Tensor":
        """PyPTO's ``to_tensor``: this tensor (renamed to ``name`` when one is given)."""
        if name:
            self.name = name
        return self

    def is_empty(self) -> bool:
        """Whether a dim is 0 (never, for a tensor of a function: zero-size tensors are refused)."""
        return any(isinstance(d, int) and d == 0 for d in (self.shape or ()))

    def reshape(self, *shape, valid_shape=None, inplace: bool = False):
        from pypto import shape_ops

        return shape_ops.reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape,
                                 valid_shape=valid_shape, inplace=inplace)

    def transpose(self, d0, d1):
        from pypto import shape_ops

        return shape_ops.transpose(self, d0, d1)

    def permute(self, *dims):
        from pypto import shape_ops

        return shape_ops.permute(self, *dims)

    def unsqueeze(self, dim):
        from pypto import shape_ops

        return shape_ops.unsqueeze(self, dim)

    @property
    def T(self):
        from pypto import shape_ops

        return shape_ops.transpose(self, -2, -1)

    def __bool__(self):
        raise UserTypeError("a pypto.Tensor has no truth value while tracing (its data is not known yet)")


class _TensorAlias(type):
    """``isinstance(t, pypto.tensor)`` holds for every pypto Tensor, as in PyPTO, where both names
    are one class."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class tensor(Tensor, metaclass=_TensorAlias):  # noqa: N801 - PyPTO's name
    """``pypto.tensor(shape, dtype, name="")``: inside a jitted function, a new local tensor of that
    shape and dtype (its elements start at zero), to be written (``t[...] = ...``, ``t.move(...)``,
    ``pypto.assemble``) and read or returned; elsewhere, and without a shape and dtype, the same
    annotation as ``pypto.Tensor(...)``."""

    __slots__ = ()

    def __new__(cls, shape=None, dtype=None, name: str = "", format=None):  # noqa: A002 - PyPTO's name
        from pypto.frontend.config import current_trace

        if format is not None and getattr(format, "name", str(format)) not in ("TILEOP_ND", "ND"):
            from pypto.errors import NotSupportedError

            raise NotSupportedError(f"pypto.tensor: format {format} is not supported; tensors are row-major (ND) here")
        if shape is not None and dtype is not None and current_trace() is not None:
            from pypto import shape_ops

            return shape_ops.local_tensor(shape, dtype, name)
        return Tensor(shape, dtype, name)


def _method(name: str, doc: str):
    def m(self, *args, **kwargs):
        import pypto

        return getattr(pypto, name)(self, *args, **kwargs)

    m.__name__ = name
    m.__qualname__ = f"Tensor.{name}"
    m.__doc__ = f"``pypto.{name}(self, ...)``: {doc}"
    return m


def _add_table_methods() -> None:
    """A method for every op whose op table row says so (``x.exp()``, ``x.sum(-1)``, ...)."""
    from pypto import _op_table

    for name, row in _op_table.public_rows().items():
        if row["method"]:
            setattr(Tensor, name, _method(name, row["doc"]))


_add_table_methods()
