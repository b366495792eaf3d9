"""The tracing frontend: ``jit``, the ``Tensor`` proxy and annotations."""

from pypto.frontend.jit import Compiled, JitFunction, dynamic, jit
from pypto.frontend.tensor import Tensor


def function(fn):
    """Marks a helper called from jitted code: it is inlined where it is
    called, with its ``if`` statements converted like the jitted function's."""
    from pypto.frontend import autograph

    return autograph.convert(fn)

__all__ = ["jit", "JitFunction", "Compiled", "Tensor", "dynamic", "function"]
