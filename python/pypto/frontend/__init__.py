"""The tracing frontend: ``jit``, the ``Tensor`` proxy and annotations."""

from pypto.frontend.jit import Compiled, JitFunction, dynamic, jit
from pypto.frontend.tensor import Tensor

__all__ = ["jit", "JitFunction", "Compiled", "Tensor", "dynamic"]
