"""Compiling a PTO module and calling it on NumPy arrays or torch tensors."""

from __future__ import annotations

import re
from typing import Optional

from pypto import _C, memory
from pypto._dtypes import dtype_name
from pypto.errors import PtoSyntaxError, UserError, UserTypeError
from pypto.frontend import config
from pypto.pto.builder import PTOModule

_IDENT = re.compile(r"^[A-Za-z_]\w*$")


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
        self._memrefs = program.entry_memrefs()
        scalars = program.entry_scalars()
        shape_dims = {d for _, _, dims, _ in self._memrefs for d in dims if _IDENT.match(d)}
        self._shape_scalars = [s for s, _ in scalars if s in shape_dims]
        self._user_scalars = [s for s, _ in scalars if s not in shape_dims]
        self._scalar_order = [s for s, _ in scalars]
        self.parameters = [m[0] for m in self._memrefs] + self._user_scalars
        self._last_tasks = 0

    def __repr__(self):
        return f"<PTOProgram @{self.name}({', '.join(self.parameters)})>"

    def _bind(self, args, kwargs):
        if len(args) > len(self.parameters):
            raise TypeError(f"@{self.name}() takes {len(self.parameters)} arguments ({', '.join(self.parameters)}), "
                            f"{len(args)} were given")
        values = dict(zip(self.parameters, args))
        for k, v in kwargs.items():
            if k not in self.parameters:
                raise TypeError(f"@{self.name}() got an unexpected argument '{k}' (parameters: {', '.join(self.parameters)})")
            if k in values:
                raise TypeError(f"@{self.name}() got multiple values for argument '{k}'")
            values[k] = v
        missing = [p for p in self.parameters if p not in values]
        if missing:
            raise TypeError(f"@{self.name}() missing argument(s): {', '.join(missing)}")
        env: dict[str, int] = {}
        for s in self._user_scalars:
            v = values[s]
            if isinstance(v, bool) or not hasattr(v, "__index__"):
                raise UserTypeError(f"@{self.name}(): scalar '{s}' must be an int, found {type(v).__name__}")
            env[s] = int(v)
        kept, specs = [], []
        written = self._program.written
        for k, (name, dt, dims, _) in enumerate(self._memrefs):
            a = values[name]
            if not memory.is_array(a):
                raise UserTypeError(f"@{self.name}(): '{name}' must be a NumPy array or torch tensor, found "
                                    f"{memory.kind_name(a)}")
            adt = memory.dtype_of(a)
            if adt != dt:
                raise UserTypeError(f"@{self.name}(): '{name}' must have dtype {dtype_name(dt)}, found "
                                    f"{memory.dtype_text(a)}")
            shape = memory.shape_of(a)
            if len(shape) != len(dims):
                raise UserError(f"@{self.name}(): '{name}' must have rank {len(dims)} ({'x'.join(dims)}), found "
                                f"shape {list(shape)}")
            for d, (want, got) in enumerate(zip(dims, shape)):
                if _IDENT.match(want):
                    if want in env and env[want] != got:
                        raise UserError(f"@{self.name}(): dim {d} of '{name}' is {got} but {want} = {env[want]}")
                    env[want] = got
            if written[k]:
                memory.check_writable(a, f"@{self.name}(): '{name}'")
            keep, spec = memory.describe(a)
            kept.append(keep)
            specs.append(spec)
        for name, dt, dims, _ in self._memrefs:
            shape = memory.shape_of(values[name])
            for d, (want, got) in enumerate(zip(dims, shape)):
                if not _IDENT.match(want) and _eval_dim(want, env) != got:
                    raise UserError(f"@{self.name}(): dim {d} of '{name}' must be {want} = {_eval_dim(want, env)}, "
                                    f"found {got}")
        return kept, specs, [env[s] for s in self._scalar_order]

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


def _eval_dim(text: str, env: dict[str, int]) -> int:
    from pypto.pto import _expr as X

    try:
        return X.evaluate(X.parse(text, "dim"), env)
    except KeyError as e:
        raise UserError(f"dim {text} uses '{e.args[0]}', which no argument gives") from None


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
    opts = config.make_pass_options(config.normalize_pass_options(pass_options)) if pass_options else _C.PassOptions()
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
