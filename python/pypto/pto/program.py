"""Compiling a PTO module and calling it on NumPy arrays or torch tensors."""

from __future__ import annotations

import re
from typing import Optional

from pypto import _C, memory
from pypto.errors import PtoSyntaxError, UserTypeError
from pypto.frontend import config
from pypto.frontend.signature import Binder, Param
from pypto.pto.builder import PTOModule

def check_text(text: str, what: str) -> str:
    """`text` if every character of it can be read as UTF-8; otherwise a PtoSyntaxError at the
    first one that cannot (a lone surrogate such as '\\ud800')."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        line = text.count("\n", 0, e.start) + 1
        column = e.start - (text.rfind("\n", 0, e.start) + 1) + 1
        err = PtoSyntaxError(f"line {line}, column {column}: {what}: U+{ord(text[e.start]):04X} is a lone surrogate, "
                             f"not a character .pto text can hold")
        err.line, err.column = line, column
        raise err from None
    return text


class PTOProgram:
    """A compiled PTO module. Call it with the entry function's memrefs (in
    declaration order), then its scalars, positionally or by keyword; the
    kernels read and write the arrays in place. Scalars that appear as a dim
    of a memref's shape are taken from the arrays."""

    def __init__(self, program, name: str):
        self._program = program
        self.name = name
        memrefs = program.entry_memrefs()
        scalars = program.entry_scalars()
        shape_dims = {str(d) for _, _, dims, _ in memrefs for d in dims if d.is_var()}
        user_scalars = [s for s, _ in scalars if s not in shape_dims]
        self._scalar_order = [s for s, _ in scalars]
        self.parameters = [m[0] for m in memrefs] + user_scalars
        params = [Param(name, "tensor", dt, [_dim(d) for d in dims]) for name, dt, dims, _ in memrefs]
        params += [Param(s, "scalar") for s in user_scalars]
        self._binder = Binder(f"@{name}", params, allow_empty=True)
        self._last_tasks = 0

    def __repr__(self):
        return f"<PTOProgram @{self.name}({', '.join(self.parameters)})>"

    def _bind(self, args, kwargs):
        bound = self._binder.bind(args, kwargs)
        kept, specs = [], []
        written = self._program.written
        for k, (name, a, _, _) in enumerate(bound.tensors):
            if written[k]:
                memory.check_writable(a, f"@{self.name}(): '{name}'")
            keep, spec = memory.describe(a)
            kept.append(keep)
            specs.append(spec)
        return kept, specs, bound.dyn_values(self._scalar_order)

    def __call__(self, *args, **kwargs) -> None:
        kept, specs, scalars = self._bind(args, kwargs)
        self._last_tasks = self._program.run(specs, scalars)
        del kept

    def build_only(self, *args, **kwargs) -> tuple[int, int]:
        """Builds the task graph of a call without running kernels; returns
        (tasks, edges). For measuring graph construction."""
        kept, specs, scalars = self._bind(args, kwargs)
        out = self._program.build_only(specs, scalars)
        del kept
        return out

    def task_graph(self, *args, **kwargs):
        """The task graph a call with these arguments builds, as a ``pypto.TaskGraph``;
        dependencies are computed as in a real run but no kernel runs."""
        from pypto.taskgraph import TaskGraph

        kept, specs, scalars = self._bind(args, kwargs)
        records = self._program.record(specs, scalars)
        del kept
        return TaskGraph(records)

    def profile(self, *args, path: str = "trace.json", **kwargs) -> None:
        """Runs once like a call and writes a Chrome trace-event JSON file to ``path``."""
        import os

        kept, specs, scalars = self._bind(args, kwargs)
        self._last_tasks = self._program.run(specs, scalars, os.fspath(path))
        del kept

    def count_tasks(self, *args, **kwargs) -> int:
        """Tasks the orchestration submits for these arguments (nothing runs)."""
        _, _, scalars = self._bind(args, kwargs)
        return self._program.count_tasks(scalars)

    def pto(self) -> str:
        """The module as .pto text (buffers planned; dynamic loops unexpanded)."""
        return self._program.pto

    def source(self) -> str:
        return self._program.source

    def dump(self, stage: str = "") -> str:
        """Stages "execution" (after binary expansion), "pto", "cpp", "passes"."""
        return self._program.dump(stage)

    def stats(self) -> dict:
        s = self._program.stats()
        s["tasks"] = self._last_tasks
        return s


def _dim(d: "_C.Expr"):
    """A memref dim as the binder takes it: an int, the name of a scalar, or an expression."""
    c = d.as_const()
    if c is not None:
        return int(c)
    return str(d) if d.is_var() else d


def compile(module, entry: Optional[str] = None, *, empty_kernels: bool = False,  # noqa: A001 - the API's name
            **pass_options) -> PTOProgram:
    """Compiles a PTOModule (built or parsed) or .pto text with the same
    codegen and runtime as jitted code. `entry` picks the entry function
    (default: the module's only orchestration function; an InCore entry is
    called once on whole tensors). `empty_kernels=True` generates kernels
    that return at once, to measure the runtime alone."""
    if isinstance(module, str):
        text = module
    elif isinstance(module, PTOModule):
        text = module.to_pto(entry)
    else:
        raise UserTypeError(f"pypto.pto.compile: expected a PTOModule or .pto text, found {type(module).__name__}")
    opts = config.make_pass_options(config.normalize_pass_options(pass_options) if pass_options else {})
    opts.empty_kernels = bool(empty_kernels)
    program = _C.compile_pto(check_text(text, "pypto.pto.compile"), opts)
    return PTOProgram(program, _entry_name(program.pto))


def _entry_name(text: str) -> str:
    m = re.search(r"^module @\w+ entry @(\w+)", text, re.M)
    return m.group(1) if m else "entry"


def parse(text: str) -> PTOModule:
    """A PTOModule from .pto text (raises pypto.PtoSyntaxError on malformed text)."""
    if not isinstance(text, str):
        raise UserTypeError(f"pypto.pto.parse: expected .pto text (str), found {type(text).__name__}")
    canonical = _C.parse_pto_roundtrip(check_text(text, "pypto.pto.parse"))
    m = re.search(r"^module @(\w+) entry @", canonical, re.M)
    module = PTOModule(m.group(1) if m else _entry_name(canonical))
    module._text = canonical
    return module
