"""The tile-level API: PTO modules of InCore tile functions and orchestration
functions, built in Python with PTOFunctionBuilder or parsed from .pto text,
compiled with the same codegen and run by the same runtime as jitted code.
See docs/pto.md."""

from pypto.errors import PtoSyntaxError
from pypto.pto.builder import ElementType, MemorySpace, PTOFunction, PTOFunctionBuilder, PTOModule
from pypto.pto.program import PTOProgram, compile, parse

__all__ = [
    "ElementType", "MemorySpace", "PTOFunction", "PTOFunctionBuilder", "PTOModule", "PTOProgram", "PtoSyntaxError",
    "compile", "parse",
]
