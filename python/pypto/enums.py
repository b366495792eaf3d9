"""PyPTO's enums that pypto's ops take or return: ``ReLuType`` and ``TransMode`` (matmul's
``extend_params``), ``ConvReLuType`` (conv's), ``TileOpFormat`` (``Tensor.format()``), ``CastMode`` and ``SaturationMode``
(``cast``) and ``PrecisionType`` (the math ops' ``precision_type``)."""

from __future__ import annotations

import enum


class _Named(enum.IntEnum):
    """Prints as PyPTO's enums do: ``CastMode.CAST_RINT``."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    __repr__ = __str__


class ReLuType(_Named):
    """Whether matmul's epilogue applies ReLU (``extend_params={"relu_type": ...}``)."""

    NO_RELU = 0
    RELU = 1


class ConvReLuType(_Named):
    """Whether conv's epilogue applies ReLU (``extend_params={"relu_type": ...}``)."""

    NO_RELU = 0
    RELU = 1


class TransMode(_Named):
    """TF32 rounding of fp32 matmul inputs (``extend_params={"trans_mode": ...}``): none, to nearest with
    ties to even, or to nearest with ties away from zero."""

    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2


class TileOpFormat(_Named):
    """A tensor's memory format: ND (row-major) or NZ (PyPTO's fractal layout for its cube unit).
    Tensors here are always ND."""

    TILEOP_ND = 0
    TILEOP_NZ = 1


class CastMode(_Named):
    """How ``pypto.cast`` rounds (``mode=``): as the conversion's default (CAST_NONE), to nearest
    with ties to even (RINT), to nearest with ties away from zero (ROUND), down (FLOOR), up (CEIL),
    toward zero (TRUNC), or to odd (ODD: PyPTO's fp32 to fp16 mode)."""

    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2
    CAST_FLOOR = 3
    CAST_CEIL = 4
    CAST_TRUNC = 5
    CAST_ODD = 6


class SaturationMode(_Named):
    """What ``pypto.cast`` does with a float out of an integer dtype's range (``satmode=``): OFF
    keeps the low bits (as C and torch on x86), ON clamps to the range (NaN becomes 0)."""

    OFF = 0
    ON = 1


class TopKAlgo(_Named):
    """How ``pypto.topk`` selects (``algo=``): PyPTO's device has a merge sort and a radix select.
    pypto runs one CPU algorithm for both (a threshold scan for small k, a radix sort otherwise)."""

    MERGE_SORT = 0
    RADIX_SELECT = 1


class PrecisionType(_Named):
    """PyPTO's precision choice for math ops (``precision_type=``): its device has a fast
    instruction and a more precise sequence. pypto's vector math is the precise one for both."""

    INTRINSIC = 0
    HIGH_PRECISION = 1



class DequantScaleRoundingMode(_Named):
    """How ``pypto.quant_mx`` picks a group's shared exponent: ROUND_UP (NVIDIA's rule: the smallest
    power of two that brings the group's largest magnitude within the format's largest value) or
    ROUND_DOWN (the OCP MX rule: the largest magnitude's exponent less the format's largest one)."""

    ROUND_UP = 0
    ROUND_DOWN = 1


ROUND_UP = DequantScaleRoundingMode.ROUND_UP
ROUND_DOWN = DequantScaleRoundingMode.ROUND_DOWN
