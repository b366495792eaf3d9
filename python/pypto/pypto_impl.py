"""The names of PyPTO's native module (``pypto.pypto_impl``) that its Python API asks users to
construct: the conv tile descriptions and conv's ReLU switch."""

from pypto.convolution import TileL0Info, TileL1Info
from pypto.enums import ConvReLuType

__all__ = ["TileL1Info", "TileL0Info", "ConvReLuType"]
