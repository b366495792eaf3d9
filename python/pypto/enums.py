"""PyPTO's enums that pypto's ops take or return: ``ReLuType`` and ``TransMode`` (matmul's
``extend_params``), ``ConvReLuType`` (conv's), ``TileOpFormat`` (``Tensor.format()``), ``CastMode`` and ``SaturationMode``
(``cast``) and ``PrecisionType`` (the math ops' ``precision_type``); and PyPTO's names for scatter
reductions, atomic updates and comparisons (``ScatterMode``, ``ReduceMode``, ``AtomicRMWMode``,
``AtomicType``, ``OpType``, ``OutType``) and for symbolic conditions (``SatStatus``)."""

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


class ScatterMode(_Named):
    """A scatter's reduction (``pypto.get_scatter_mode(reduce)``): replace, add or multiply."""

    NONE = 0
    ADD = 1
    MULTIPLY = 2


class ReduceMode(_Named):
    """PyPTO's reduction mode across tasks: atomic addition (``pypto.atomic_add``)."""

    ATOMIC_ADD = 0


class AtomicRMWMode(_Named):
    """The read-modify-write of an atomic update: add (``pypto.atomic_add``), min or max."""

    ADD = 0
    MIN = 1
    MAX = 2


class AtomicType(_Named):
    """How a store meets memory: overwrite (SET) or atomic addition (ADD, ``pypto.atomic_add``)."""

    SET = 0
    ADD = 1


class OpType(_Named):
    """A comparison (``pypto.eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge``)."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class OutType(_Named):
    """How a comparison's result is stored: a bool per element, or packed bits."""

    BOOL = 0
    BIT = 1


class SatStatus(_Named):
    """Whether a condition on symbolic scalars holds for every value (SAT), for none (UNSAT), or
    cannot be decided (UNKNOWN)."""

    SAT = 0
    UNSAT = 1
    UNKNOWN = 2


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
