"""Element types and their mapping to NumPy and torch dtypes."""

from __future__ import annotations

import numpy as np

from pypto import _C
from pypto.errors import NotSupportedError, UserError

DataType = _C.DataType
DT_FP32 = DataType.DT_FP32
DT_FP16 = DataType.DT_FP16
DT_BF16 = DataType.DT_BF16
DT_DOUBLE = DataType.DT_DOUBLE
DT_INT8 = DataType.DT_INT8
DT_INT16 = DataType.DT_INT16
DT_INT32 = DataType.DT_INT32
DT_INT64 = DataType.DT_INT64
DT_UINT8 = DataType.DT_UINT8
DT_BOOL = DataType.DT_BOOL
DT_UINT16 = DataType.DT_UINT16
DT_UINT32 = DataType.DT_UINT32
DT_UINT64 = DataType.DT_UINT64
DT_FP8E4M3 = DataType.DT_FP8E4M3
DT_FP8E5M2 = DataType.DT_FP8E5M2
DT_FP8E8M0 = DataType.DT_FP8E8M0
DT_HF8 = DataType.DT_HF8
DT_INT4 = DataType.DT_INT4
DT_FP4_E2M1 = DataType.DT_FP4_E2M1
DT_FP4_E1M2 = DataType.DT_FP4_E1M2
DT_FP4_E2M1X2 = DataType.DT_FP4_E2M1X2
DT_FP4_E1M2X2 = DataType.DT_FP4_E1M2X2
DT_HF4 = DataType.DT_HF4
# PyPTO's generic 8-bit float: its conversions are E4M3's, so here it is that type.
DT_FP8 = DT_FP8E4M3
DT_BOTTOM = DataType.DT_BOTTOM

# Types torch and NumPy have no dtype for travel in arrays of a same-size carrier type
# (as in PyPTO: HiFloat8 data is a uint8 tensor).
# The pair types (two FP4 codes per byte) travel in uint8 too.
_CARRIER = {DT_HF8: DT_UINT8, DT_FP4_E2M1X2: DT_UINT8, DT_FP4_E1M2X2: DT_UINT8}

# The 4-bit types: one code per byte inside a program; arrays outside pack two per byte (the
# first element in the low nibble), so a parameter's uint8 array has half the last dim.
_PACKED = (DT_INT4, DT_FP4_E2M1, DT_FP4_E1M2)


def is_packed(dt: DataType) -> bool:
    """True for the 4-bit types, which arrays hold two per byte."""
    return dt in _PACKED


def packed_carriers(dt: DataType) -> tuple:
    """The array dtypes that carry a 4-bit type two per byte: uint8, and int8 for DT_INT4."""
    return (DT_UINT8, DT_INT8) if dt == DT_INT4 else (DT_UINT8,)

_NUMPY = {
    DT_FP32: np.dtype(np.float32),
    DT_FP16: np.dtype(np.float16),
    DT_DOUBLE: np.dtype(np.float64),
    DT_INT8: np.dtype(np.int8),
    DT_INT16: np.dtype(np.int16),
    DT_INT32: np.dtype(np.int32),
    DT_INT64: np.dtype(np.int64),
    DT_UINT8: np.dtype(np.uint8),
    DT_UINT16: np.dtype(np.uint16),
    DT_UINT32: np.dtype(np.uint32),
    DT_UINT64: np.dtype(np.uint64),
    DT_BOOL: np.dtype(np.bool_),
}
_FROM_NUMPY = {v: k for k, v in _NUMPY.items()}

_TORCH_NAMES = {
    DT_FP32: "float32",
    DT_FP16: "float16",
    DT_BF16: "bfloat16",
    DT_DOUBLE: "float64",
    DT_INT8: "int8",
    DT_INT16: "int16",
    DT_INT32: "int32",
    DT_INT64: "int64",
    DT_UINT8: "uint8",
    DT_BOOL: "bool",
    DT_UINT16: "uint16",
    DT_UINT32: "uint32",
    DT_UINT64: "uint64",
    DT_FP8E4M3: "float8_e4m3fn",
    DT_FP8E5M2: "float8_e5m2",
    DT_FP8E8M0: "float8_e8m0fnu",
}


def dtype_name(dt: DataType) -> str:
    """The name users write, e.g. ``DT_FP32``."""
    return dt.name


def bytes_of(dt: DataType) -> int:
    """PyPTO's ``bytes_of``: the bytes one element of ``dt`` takes."""
    if not isinstance(dt, DataType):
        raise TypeError(f"pypto.bytes_of: dtype must be a pypto.DataType, found {type(dt).__name__}")
    check_storage(dt, "pypto.bytes_of")
    return _C.dtype_size(dt)


def check_storage(dt: DataType, what: str) -> None:
    """Raises ValueError naming `what` for DT_BOTTOM, PyPTO's placeholder no tensor can have."""
    if dt == DT_BOTTOM:
        raise UserError(f"{what}: DT_BOTTOM is PyPTO's placeholder for 'no dtype'; a tensor cannot have it")
    if dt == DT_HF4:
        raise NotSupportedError(f"{what}: DT_HF4 (HiFloat4) has no element encoding defined by PyPTO; a tensor of it "
                                "is not supported yet")


def carrier(dt: DataType) -> DataType:
    """The type whose arrays carry `dt`'s data: `dt` itself unless torch and NumPy lack it."""
    return _CARRIER.get(dt, dt)


def to_numpy(dt: DataType) -> np.dtype:
    """The NumPy dtype of a pypto dtype (bf16 has none); a carried type gives its carrier's."""
    dt = carrier(dt)
    if dt not in _NUMPY:
        raise TypeError(f"{dtype_name(dt)} has no NumPy dtype; use torch tensors for it")
    return _NUMPY[dt]


def from_numpy(dt: np.dtype) -> DataType | None:
    """The pypto dtype of a NumPy dtype, or None."""
    return _FROM_NUMPY.get(np.dtype(dt))


def to_torch(dt: DataType):
    """The torch dtype of a pypto dtype; a carried type gives its carrier's."""
    import torch

    return getattr(torch, _TORCH_NAMES[carrier(dt)])


def from_torch(dt) -> DataType | None:
    """The pypto dtype of a torch dtype, or None."""
    name = str(dt).replace("torch.", "")
    for k, v in _TORCH_NAMES.items():
        if v == name:
            return k
    return None
