"""``pypto.frontend.parser``, PyPTO's name for its frontend's parsing module. pypto traces a
kernel by running its Python (``if`` statements on symbolic values are converted by
``pypto.frontend.autograph``), so there is no AST parser here; the module holds the entry points
PyPTO's exports from it: ``jit``, ``function`` and ``error`` (pypto's exceptions)."""

from pypto import errors as error  # noqa: F401 - PyPTO's name
from pypto.frontend import function  # noqa: F401
from pypto.frontend.jit import jit  # noqa: F401

__all__ = ["jit", "function", "error"]
