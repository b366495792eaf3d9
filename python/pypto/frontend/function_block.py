"""PyPTO's kernels without a decorated function: ``with pypto.function(name, *tensors):`` traces
the block's ops on the given tensors (made by ``pypto.tensor(shape, dtype, name)`` or
``pypto.from_torch``) and compiles them when the block ends; ``pypto.get_last_function()`` then
runs them on arrays. ``get_current_function`` is the block being traced."""

from __future__ import annotations

import threading
from typing import Any

from pypto import _C, memory
from pypto import _dtypes
from pypto._dtypes import DataType, from_torch as _dtype_from_torch
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.function_base import Function
from pypto.frontend.symbolic import SymExpr
from pypto.frontend.tensor import DYNAMIC, STATIC, Tensor

_state = threading.local()


def _flatten(args: tuple) -> list:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(_flatten(tuple(a)))
        else:
            out.append(a)
    return out


class function(Function):  # noqa: N801 - PyPTO's name
    """``with pypto.function("main", a, b, c):`` — the block's ops become a kernel whose parameters
    are ``a, b, c`` in that order (lists of tensors are flattened, as PyPTO's form
    ``pypto.function(name, [inputs], [outputs])``). Results leave the block by being written into
    one of them (``c[:] = a + b``, ``c.move(...)``, ``pypto.assemble(..., c)``). When the block ends
    the kernel is compiled; the object (also ``pypto.get_last_function()``) runs it:
    ``fn(x, y, z)`` with torch tensors or NumPy arrays in parameter order (or tensors made by
    ``pypto.from_torch``, whose data is used)."""

    def __init__(self, name: str, *args: Any, **kwargs: Any):
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"pypto.function: name must be an identifier, found {name!r}")
        self.name = name
        self._tensors = _flatten(args)
        for i, t in enumerate(self._tensors):
            if not isinstance(t, Tensor) or t.is_traced:
                raise UserTypeError(f"pypto.function '{name}': argument {i} must be a tensor made by "
                                    f"pypto.tensor(shape, dtype, name) or pypto.from_torch, found {type(t).__name__}")
            if t.shape is None or t.dtype is None or any(d is Ellipsis or d is STATIC for d in t.shape):
                raise UserError(f"pypto.function '{name}': argument {i} ('{t.name}') needs a full shape and a dtype, "
                                f"found shape {t.shape} and dtype {t.dtype}")
        if kwargs:
            config.record_ignored("function", ",".join(sorted(kwargs)), kwargs)
        self._ctx = None
        self._program = None
        self._compiled = None
        self._opts: dict = {}
        self._sig = None
        self._key = None

    _explicit = True

    def _fn_name(self) -> str:
        return self.name

    # -- tracing -----------------------------------------------------------------------------
    def __enter__(self) -> "function":
        if config.current_trace() is not None:
            raise NotSupportedError(f"pypto.function '{self.name}': a function block inside a jitted function or "
                                    "another function block is not supported")
        names, self._params = [], []
        for i, t in enumerate(self._tensors):
            pname = t.name if t.name and t.name.isidentifier() else f"arg{i}"
            while pname in names:
                pname += "_"
            names.append(pname)
            dims = []
            for k, d in enumerate(t.shape):
                if d is DYNAMIC:
                    dims.append(f"{pname}_{k}")
                elif isinstance(d, SymExpr):
                    if not d.is_symbol():
                        raise NotSupportedError(f"pypto.function '{self.name}': dim {k} of '{pname}' is the expression "
                                                f"'{d}'; a dim must be an int or a single symbolic name")
                    dims.append(str(d))
                else:
                    dims.append(d)
            if _dtypes.is_packed(t.dtype) and isinstance(dims[-1], int) and dims[-1] % 2:
                raise UserError(f"pypto.function '{self.name}': 4-bit tensor '{pname}' ({t.dtype.name}) needs an even "
                                f"last dim, found {dims[-1]} (its arrays hold two elements per byte)")
            self._params.append((pname, dims, t.dtype))
        self._ctx = ctx = config.TraceContext(self.name, config.default_vec_tile())
        ctx.verify = bool(config.pass_options_in_force().get("verify"))
        self._saved = [(t._ctx, t._id) for t in self._tensors]
        for t, (pname, dims, dt) in zip(self._tensors, self._params):
            for d in dims:
                if isinstance(d, str):
                    ctx.builder.add_dyn_dim(d)
            if _dtypes.is_packed(dt):  # the caller's bytes, packed two per byte; the block sees them unpacked
                from pypto import shape_ops

                _, unpacked = shape_ops.packed_param(ctx, pname, dims, _dtypes.packed_carriers(dt)[0], dt)
                t._ctx, t._id = ctx, unpacked._id
                continue
            vid = ctx.builder.add_param(pname, dims, dt)
            t._ctx, t._id = ctx, vid
        self._prev = config.push_trace(ctx)
        _state.current = self
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        config.push_trace(self._prev)
        _state.current = None
        for t, (c, i) in zip(self._tensors, self._saved):
            t._ctx, t._id = c, i
        if exc_type is not None:
            return False
        opts = config.pass_options_in_force()
        self._opts = opts
        self._probes = (self._ctx.probe_sites, self._ctx.probe_params)
        from pypto import shape_ops

        prev = config.push_trace(self._ctx)
        try:
            shape_ops.write_back_packed(self._ctx)  # 4-bit tensors the block wrote into, packed
        finally:
            config.push_trace(prev)
        graph = self._ctx.builder.finish()
        self._program = _C.compile(graph, config.make_pass_options(opts))
        self._ctx = None
        _state.last = self
        return False

    # -- running -----------------------------------------------------------------------------
    def _signature(self):
        from pypto.frontend.signature import _Signature

        if self._sig is None:
            params = ", ".join(p for p, _, _ in self._params)
            ns: dict[str, Any] = {}
            exec(f"def {self.name}({params}): pass", ns)  # the parameters, for binding calls
            fn = ns[self.name]
            fn.__annotations__ = {p: Tensor([d if isinstance(d, int) else SymExpr(d) for d in dims], dt)
                                  for p, dims, dt in self._params}
            self._sig = _Signature(fn)
            self._key = (tuple((tuple(d if isinstance(d, int) else f"${d}" for d in dims), int(dt))
                               for _, dims, dt in self._params), ())
        return self._sig

    def __call__(self, *args: Any):
        from pypto.frontend.compiled import Compiled, _run

        if self._program is None:
            raise UserError(f"pypto.function '{self.name}': the block has not been completed yet")
        bound = self._signature().bind(args, {})
        if bound.key() != self._key:
            raise UserError(f"pypto.function '{self.name}': called with other shapes or dtypes than its tensors "
                            f"declare ({', '.join(f'{p} {dims}' for p, dims, _ in self._params)})")
        if self._compiled is None:
            self._compiled = Compiled(self._sig, self._program, (self._key,), self._program.stats()["cache"], bound)
            self._compiled._verify = self._compiled_verify()
            self._compiled._probe_sites, self._compiled._probe_params = self._probes
        return _run(self._compiled, bound)

    def _compiled_verify(self) -> bool:
        """Whether the block was compiled with enable_pass_verify (its calls compare golden data)."""
        return bool(self._opts.get("verify"))

    def dump(self, stage: str | None = None) -> str:
        return self._done().dump(stage or "")

    def pto(self) -> str:
        return self._done().pto

    def source(self) -> str:
        return self._done().source

    def _done(self):
        if self._program is None:
            raise UserError(f"pypto.function '{self.name}': the block has not been completed yet")
        return self._program

    def __repr__(self) -> str:
        state = "compiled" if self._program is not None else "tracing" if self._ctx is not None else "not entered"
        return f"<pypto.function '{self.name}' ({state})>"


def get_current_function() -> function | None:
    """The ``pypto.function`` block being traced on this thread, or None."""
    return getattr(_state, "current", None)


def get_last_function() -> Any:
    """The function compiled last on this thread: a completed ``pypto.function`` block or the
    ``Compiled`` of a jitted function's last compilation; None before any."""
    return getattr(_state, "last", None)


def set_last_compiled(compiled: Any) -> None:
    _state.last = compiled


def from_torch(tensor: Any, name: str = "", *, dynamic_axis: list[int] | None = None, tensor_format: Any = None,
               dtype: DataType | None = None) -> Tensor:
    """A pypto.Tensor describing a torch tensor (its shape and dtype, ``dynamic_axis`` dims marked
    dynamic) that keeps the tensor: passed to a jitted function or a ``pypto.function`` block, its
    data is used."""
    if not memory.is_torch(tensor):
        raise UserTypeError(f"pypto.from_torch: tensor must be a torch.Tensor, found {type(tensor).__name__}")
    if not tensor.is_contiguous():
        raise UserError("pypto.from_torch: tensor must be contiguous")
    if tensor_format is not None and getattr(tensor_format, "name", str(tensor_format)) not in ("TILEOP_ND", "ND"):
        raise NotSupportedError(f"pypto.from_torch: format {tensor_format} is not supported; tensors are row-major "
                                "(ND) here")
    dt = _dtype_from_torch(tensor.dtype)
    if dt is None:
        raise UserTypeError(f"pypto.from_torch: dtype {tensor.dtype} is not supported")
    if dtype is not None and dtype != dt:
        # PyPTO reads the memory as `dtype` with the tensor's shape: a bitcast, so the sizes must agree.
        if not isinstance(dtype, DataType):
            raise UserTypeError(f"pypto.from_torch: dtype must be a pypto.DataType, found {type(dtype).__name__}")
        if _dtypes.bytes_of(dtype) != _dtypes.bytes_of(dt):
            raise NotSupportedError(f"pypto.from_torch: reading {tensor.dtype} data ({_dtypes.bytes_of(dt)} bytes an "
                                    f"element) as {dtype.name} ({_dtypes.bytes_of(dtype)} bytes) keeping the shape is "
                                    "not supported; use pypto.view(x, dtype=...) inside the kernel")
        tensor = tensor.view(_dtypes.to_torch(dtype))
        dt = dtype
    shape = list(tensor.shape)
    for a in dynamic_axis or []:
        if isinstance(a, bool) or not isinstance(a, int) or not -len(shape) <= a < len(shape):
            raise UserError(f"pypto.from_torch: dynamic_axis {a!r} is out of range for a tensor of rank {len(shape)}")
        shape[a] = DYNAMIC
    t = Tensor(shape, dt, name=name)
    t._data = tensor
    return t
