"""PyPTO's enums that pypto's ops take or return: ``ReLuType`` and ``TransMode`` (matmul's
``extend_params``) and ``TileOpFormat`` (``Tensor.format()``)."""

from __future__ import annotations

import enum


class ReLuType(enum.IntEnum):
    """Whether matmul's epilogue applies ReLU (``extend_params={"relu_type": ...}``)."""

    NO_RELU = 0
    RELU = 1

    def __str__(self) -> str:
        return f"ReLuType.{self.name}"


class TransMode(enum.IntEnum):
    """TF32 rounding of fp32 matmul inputs (``extend_params={"trans_mode": ...}``): none, to nearest with
    ties to even, or to nearest with ties away from zero."""

    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2

    def __str__(self) -> str:
        return f"TransMode.{self.name}"


class TileOpFormat(enum.IntEnum):
    """A tensor's memory format: ND (row-major) or NZ (PyPTO's fractal layout for its cube unit).
    Tensors here are always ND."""

    TILEOP_ND = 0
    TILEOP_NZ = 1

    def __str__(self) -> str:
        return f"TileOpFormat.{self.name}"
