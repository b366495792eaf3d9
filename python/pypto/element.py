"""PyPTO's typed scalar constant: ``pypto.Element(dtype, value)`` (also ``pypto.element``). Ops take
it wherever they take a Python number; its value is converted to the dtype's kind (bool, int or
float) and then follows the rules of a Python number of that kind."""

from __future__ import annotations

from typing import Any

from pypto._dtypes import DT_BOOL, DT_BF16, DT_DOUBLE, DT_FP16, DT_FP32, DataType
from pypto.errors import UserTypeError

_FLOATS = (DT_FP32, DT_FP16, DT_BF16, DT_DOUBLE)


class Element:
    __slots__ = ("_dtype", "_value")

    def __init__(self, dtype: DataType, data: Any):
        if not isinstance(dtype, DataType):
            raise UserTypeError(f"pypto.Element: dtype must be a pypto dtype, found {dtype!r}")
        if isinstance(data, Element):
            data = data.value
        if not isinstance(data, (bool, int, float)):
            raise UserTypeError(f"pypto.Element: the value must be a Python number, found {type(data).__name__}")
        self._dtype = dtype
        self._value = bool(data) if dtype == DT_BOOL else float(data) if dtype in _FLOATS else int(data)

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def value(self):
        return self._value

    def __repr__(self) -> str:
        return f"pypto.Element({self._dtype.name}, {self._value!r})"


element = Element
