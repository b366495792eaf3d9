"""PyPTO's typed scalar constant: ``pypto.Element(dtype, value)`` (also ``pypto.element``). Ops take
it wherever they take a Python number; its value is converted to the dtype's kind (bool, int or
float) and then follows the rules of a Python number of that kind."""

from __future__ import annotations

from typing import Any

from pypto import _C
from pypto._dtypes import DT_BOOL, DT_FP32, DT_INT32, DT_INT64, DataType, check_storage
from pypto.errors import UserTypeError


class Element:
    __slots__ = ("_dtype", "_value")

    def __init__(self, dtype: DataType, data: Any):
        if not isinstance(dtype, DataType):
            raise UserTypeError(f"pypto.Element: dtype must be a pypto dtype, found {dtype!r}")
        check_storage(dtype, "pypto.Element")
        if isinstance(data, Element):
            data = data.value
        if not isinstance(data, (bool, int, float)):
            raise UserTypeError(f"pypto.Element: the value must be a Python number, found {type(data).__name__}")
        self._dtype = dtype
        self._value = bool(data) if dtype == DT_BOOL else float(data) if _C.dtype_is_float(dtype) else int(data)

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def value(self):
        return self._value

    def __repr__(self) -> str:
        return f"pypto.Element({self._dtype.name}, {self._value!r})"


element = Element


def convert_to_element(value: Any) -> Element:
    """PyPTO's ``convert_to_element``: an int as a DT_INT32 Element (DT_INT64 outside int32's range),
    any other number as a DT_FP32 one."""
    if isinstance(value, int):  # bool included, as in PyPTO
        return Element(DT_INT32 if -(2**31) <= value < 2**31 else DT_INT64, value)
    return Element(DT_FP32, value)
