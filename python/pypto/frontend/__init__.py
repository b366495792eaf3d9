"""The tracing frontend: ``jit``, the ``Tensor`` proxy and annotations."""

from pypto.frontend.jit import Compiled, JitFunction, dynamic, jit
from pypto.frontend.symbolic import SymExpr as SymbolicScalar
from pypto.frontend.tensor import Tensor


def function(func=None):
    """Marks a helper called from jitted code: it is inlined where it is
    called, with its ``if`` statements converted like the jitted function's.
    ``@pypto.frontend.function`` and ``@pypto.frontend.function()`` both work."""
    from pypto.frontend import autograph

    if func is None:
        return autograph.convert
    return autograph.convert(func)

from pypto.frontend import parser  # noqa: E402 - it imports `function` above

__all__ = ["parser", "jit", "JitFunction", "Compiled", "Tensor", "dynamic", "function", "SymbolicScalar"]
