"""``pypto.Function``: PyPTO's class of compiled functions. ``pypto.get_last_function()`` returns one
(a completed ``pypto.function`` block or the ``Compiled`` of a jitted function), and both kinds
answer PyPTO's questions about it: its names, whether it is static, its dumps."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from pypto.errors import UserError, UserTypeError

_magic = itertools.count(1)
_STAGES = ("tensor", "tile", "block", "execution", "passes", "pto", "cpp")


class Function:
    """A compiled function. Subclasses set ``_program`` (the C++ program) and give ``_fn_name()``
    and ``_explicit`` (True for a ``with pypto.function(...)`` block, whose parameters are named
    explicitly, False for a jitted function)."""

    _program: Any = None
    _explicit = False

    def _fn_name(self) -> str:
        raise NotImplementedError

    @property
    def func_magic(self) -> int:
        """A number unique to this function in the process."""
        magic = self.__dict__.get("_func_magic")
        if magic is None:
            magic = self.__dict__["_func_magic"] = next(_magic)
        return magic

    @property
    def raw_name(self) -> str:
        """The name the user gave (the block's name or the decorated function's)."""
        return self._fn_name()

    @property
    def magic_name(self) -> str:
        """The name made unique in the process: ``<raw_name>_<func_magic>``."""
        return f"{self.raw_name}_{self.func_magic}"

    @property
    def base(self) -> Any:
        """The C++ program this function was compiled to."""
        if self._program is None:
            raise UserError(f"pypto.Function '{self.raw_name}': it has not been compiled yet")
        return self._program

    @property
    def function_type_str(self) -> str:
        """``"DYNAMIC"`` when some dim is only known at call time, else ``"STATIC"``."""
        return "DYNAMIC" if list(self.base.dyn_dims) else "STATIC"

    @property
    def is_static(self) -> bool:
        return self.function_type_str == "STATIC"

    @property
    def is_eager(self) -> bool:
        """Always False: every function here is compiled before it runs."""
        return False

    @property
    def is_explicit(self) -> bool:
        """True for a ``with pypto.function(...)`` block, False for a jitted function."""
        return self._explicit

    @property
    def has_parent(self) -> bool:
        """Always False: a compiled function is never nested in another here."""
        return False

    def dump_file(self, file_path: str) -> None:
        """Writes ``dump()`` (every stage) to ``file_path``."""
        if not isinstance(file_path, (str, os.PathLike)) or not str(file_path):
            raise UserTypeError(f"pypto.Function.dump_file: file_path must be a path, found {file_path!r}")
        with open(file_path, "w", encoding="utf-8") as f:
            f.write(self.base.dump(""))

    def dump_json_file(self, file_name: str = "") -> None:
        """Writes the stages as JSON (``{"name", "magic_name", "type", "stages": {stage: text}}``) to
        ``file_name``, by default ``<magic_name>.json`` in the current folder."""
        if not isinstance(file_name, (str, os.PathLike)):
            raise UserTypeError(f"pypto.Function.dump_json_file: file_name must be a path, found {file_name!r}")
        path = str(file_name) or f"{self.magic_name}.json"
        doc = {"name": self.raw_name, "magic_name": self.magic_name, "type": self.function_type_str,
               "stages": {s: self.base.dump(s) for s in _STAGES}}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
