"""PyPTO's option enums that pypto's ops take: ``ReLuType`` and ``TransMode`` (matmul's
``extend_params``)."""

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
