"""``pypto.Tensor``: a parameter/return annotation, and the symbolic value
that tracing hands to the user's function."""

from __future__ import annotations

from typing import Any, Sequence

from pypto._dtypes import DataType
from pypto.errors import UserError, UserTypeError


class Tensor:
    """A tensor of a jitted function.

    As an annotation, ``pypto.Tensor((M, N), pypto.DT_FP32, name="x")``
    declares the shape and dtype a parameter or return value must have. While
    tracing, the function's parameters and every op result are Tensors bound
    to a value of the C++ Tensor Graph; ops on them add graph nodes.
    """

    __slots__ = ("_shape", "_dtype", "name", "_ctx", "_id")

    def __init__(self, shape: Sequence[int] | None = None, dtype: DataType | None = None, name: str = ""):
        if shape is not None:
            if isinstance(shape, int):
                shape = (shape,)
            if not isinstance(shape, (tuple, list)):
                raise UserTypeError(f"pypto.Tensor: shape must be a tuple or list of ints, found {type(shape).__name__}")
            for d in shape:
                if isinstance(d, bool) or not isinstance(d, int):
                    raise UserTypeError(f"pypto.Tensor: shape dims must be int, found {d!r}")
                if d <= 0:
                    raise UserError(f"pypto.Tensor: shape dims must be positive, found {tuple(shape)}")
            shape = tuple(shape)
        if dtype is not None and not isinstance(dtype, DataType):
            raise UserTypeError(f"pypto.Tensor: dtype must be a pypto dtype such as pypto.DT_FP32, found {dtype!r}")
        self._shape = shape
        self._dtype = dtype
        self.name = name
        self._ctx = None
        self._id = -1

    @classmethod
    def _traced(cls, ctx: Any, value_id: int, name: str = "") -> "Tensor":
        t = cls.__new__(cls)
        t._shape = None
        t._dtype = None
        t.name = name
        t._ctx = ctx
        t._id = value_id
        return t

    @property
    def is_traced(self) -> bool:
        return self._ctx is not None

    @property
    def shape(self) -> tuple:
        """The shape: declared (annotation) or traced (ints, or names of symbolic dims)."""
        if self._ctx is not None:
            return tuple(self._ctx.builder.shape(self._id))
        return self._shape

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

    # Operators trace the module-level ops.
    def __add__(self, other):
        from pypto import ops
        return ops.add(self, other)

    def __radd__(self, other):
        from pypto import ops
        return ops.add(other, self)

    def __sub__(self, other):
        from pypto import ops
        return ops.sub(self, other)

    def __rsub__(self, other):
        from pypto import ops
        return ops.sub(other, self)

    def __mul__(self, other):
        from pypto import ops
        return ops.mul(self, other)

    def __rmul__(self, other):
        from pypto import ops
        return ops.mul(other, self)

    def __truediv__(self, other):
        from pypto import ops
        return ops.div(self, other)

    def __rtruediv__(self, other):
        from pypto import ops
        return ops.div(other, self)

    def exp(self):
        from pypto import ops
        return ops.exp(self)

    def sum(self, dim, keepdim=False):
        from pypto import ops
        return ops.sum(self, dim, keepdim)

    def amax(self, dim, keepdim=False):
        from pypto import ops
        return ops.amax(self, dim, keepdim)

    def __bool__(self):
        raise UserTypeError("a pypto.Tensor has no truth value while tracing (its data is not known yet)")
