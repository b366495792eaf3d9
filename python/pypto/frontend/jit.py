"""``@pypto.frontend.jit``: binds arguments, specialises, traces, compiles
(through the memory and disk caches) and runs."""

from __future__ import annotations

import functools
import inspect
import threading
import time
from typing import Any, Callable

from pypto import _C, memory
from pypto._dtypes import dtype_name
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.tensor import Tensor


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class _Signature:
    """The tensor parameters and return annotations of a jitted function."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        self.sig = inspect.signature(fn)
        self.params: list[tuple[str, Tensor | None]] = []
        for p in self.sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise NotSupportedError(f"@pypto.frontend.jit function '{self.name}': *args/**kwargs parameters are not supported yet")
            ann = p.annotation
            if ann is inspect.Parameter.empty:
                ann = None
            elif isinstance(ann, type) and issubclass(ann, Tensor):
                ann = Tensor()
            elif not isinstance(ann, Tensor):
                raise NotSupportedError(
                    f"@pypto.frontend.jit function '{self.name}': parameter '{p.name}' is annotated with {ann!r}; "
                    "only pypto.Tensor parameters are supported yet")
            self.params.append((p.name, ann))
        ret = self.sig.return_annotation
        if ret is inspect.Signature.empty or ret is None:
            self.returns = None
        elif isinstance(ret, Tensor):
            self.returns = (ret,)
        elif isinstance(ret, tuple) and all(isinstance(r, Tensor) for r in ret):
            self.returns = ret
        else:
            self.returns = None

    def bind(self, args: tuple, kwargs: dict) -> list[Any]:
        """The arrays for the parameters, in order, checked against the annotations."""
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError as e:
            expected = ", ".join(n for n, _ in self.params)
            raise UserTypeError(
                f"{self.name}() takes the tensors ({expected}); called with {len(args)} positional and "
                f"{len(kwargs)} keyword argument(s): {e}") from None
        bound.apply_defaults()
        out = []
        for name, ann in self.params:
            x = bound.arguments[name]
            if not memory.is_array(x):
                raise UserTypeError(
                    f"{self.name}(): parameter '{name}' expects a tensor (torch.Tensor or numpy.ndarray), "
                    f"found {memory.kind_name(x)}")
            dt = memory.dtype_of(x)
            if dt is None:
                raise UserTypeError(f"{self.name}(): parameter '{name}' has dtype {memory.dtype_text(x)}, which pypto does not support")
            shape = memory.shape_of(x)
            if ann is not None and ann.dtype is not None and dt != ann.dtype:
                raise UserTypeError(
                    f"{self.name}(): parameter '{name}' expects dtype {dtype_name(ann.dtype)}, "
                    f"found {dtype_name(dt)} ({memory.dtype_text(x)})")
            if ann is not None and ann.shape is not None and tuple(ann.shape) != shape:
                raise UserError(
                    f"{self.name}(): parameter '{name}' expects shape {_shape_text(ann.shape)}, found {_shape_text(shape)}")
            if len(shape) == 0:
                raise NotSupportedError(f"{self.name}(): parameter '{name}' is a 0-d tensor; not supported yet")
            if any(d == 0 for d in shape):
                raise NotSupportedError(f"{self.name}(): parameter '{name}' has a zero-size dim {_shape_text(shape)}; not supported yet")
            out.append(x)
        return out


class Compiled:
    """A function compiled for one specialisation: callable like the jitted
    function, and white-box (``dump``, ``pto``, ``source``, ``stats``)."""

    def __init__(self, sig: _Signature, program: Any, key: tuple, cache: str, example: list[Any] | None):
        self._sig = sig
        self._program = program
        self._key = key
        self._cache = cache
        self._example_key = key
        self._last_tasks: int | None = None

    def dump(self, stage: str | None = None) -> str:
        """Every stage under headers, or one of "tensor", "tile", "block",
        "execution", "pto", "cpp", "passes"."""
        return self._program.dump(stage or "")

    def pto(self) -> str:
        """The .pto assembly."""
        return self._program.pto

    def source(self) -> str:
        """The generated C++."""
        return self._program.source

    def stats(self) -> dict:
        """Facts about this compilation: ``incore_functions``, ``buffer_bytes``,
        ``tasks`` (for the example arguments), ``compile_seconds``, ``cache``."""
        s = self._program.stats()
        s["cache"] = self._cache
        s["tasks"] = self._program.count_tasks([])
        return s

    def __call__(self, *args, **kwargs):
        arrays = self._sig.bind(args, kwargs)
        key = _spec_key(arrays)
        if key != self._key[0]:
            raise UserError(
                f"{self._sig.name}: this compiled object was specialised for "
                f"{_spec_text(self._key[0])}, called with {_spec_text(key)}")
        return _run(self, arrays)

    def __repr__(self) -> str:
        return f"<pypto.Compiled {self._sig.name} for {_spec_text(self._key[0])}>"


def _spec_key(arrays: list[Any]) -> tuple:
    return tuple((memory.shape_of(a), int(memory.dtype_of(a))) for a in arrays)


def _spec_text(key: tuple) -> str:
    return ", ".join(f"{_shape_text(s)}" for s, _ in key)


def _run(compiled: Compiled, arrays: list[Any]):
    keep = []
    specs = []
    for a in arrays:
        kept, spec = memory.describe(a)
        keep.append(kept)
        specs.append(spec)
    like = arrays[0]
    outs = []
    program = compiled._program
    graph_out_dtypes = compiled._out_dtypes
    for shape, dt in zip(program.output_shapes([]), graph_out_dtypes):
        o = memory.empty_like_kind(like, shape, dt)
        outs.append(o)
        specs.append(memory.describe(o)[1])
    compiled._last_tasks = program.run(specs, [])
    del keep
    if len(outs) == 1 and not compiled._tuple_return:
        return outs[0]
    return tuple(outs)


class JitFunction:
    """A function decorated with ``@pypto.frontend.jit``."""

    def __init__(self, fn: Callable, pass_options: dict | None = None, **options: Any):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._sig = _Signature(fn)
        self._pass_options = config.normalize_pass_options(dict(pass_options or {}))
        self._options = options
        self._cache: dict[tuple, Compiled] = {}
        self._lock = threading.Lock()

    def _effective_pass_options(self) -> dict:
        opts = config.global_pass_options()
        opts.update(self._pass_options)
        return opts

    def _get(self, arrays: list[Any]) -> Compiled:
        opts = self._effective_pass_options()
        key = (_spec_key(arrays), tuple(sorted(opts.items())), config.default_vec_tile())
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                hit._cache = "memory"
                return hit
        compiled = self._compile(arrays, key, opts)
        with self._lock:
            self._cache[key] = compiled
        return compiled

    def _compile(self, arrays: list[Any], key: tuple, opts: dict) -> Compiled:
        t0 = time.perf_counter()
        ctx = config.TraceContext(self._sig.name, config.default_vec_tile())
        b = ctx.builder
        params = []
        for (name, _), a in zip(self._sig.params, arrays):
            vid = b.add_param(name, list(memory.shape_of(a)), memory.dtype_of(a))
            params.append(Tensor._traced(ctx, vid, name))
        prev = config.push_trace(ctx)
        try:
            result = self._fn(*params)
        finally:
            config.push_trace(prev)
        tuple_return = isinstance(result, (tuple, list))
        results = list(result) if tuple_return else [result]
        if result is None or not results:
            raise NotSupportedError(
                f"{self._sig.name}: the function returns nothing; output parameters are not supported yet, return the result")
        for i, r in enumerate(results):
            if not isinstance(r, Tensor) or r._ctx is not ctx:
                raise UserTypeError(
                    f"{self._sig.name}: return value {i} must be a pypto.Tensor computed by the function, found {type(r).__name__}")
        self._check_returns(results, ctx)
        b.set_outputs([r._id for r in results])
        graph = b.finish()
        program = _C.compile(graph, config.make_pass_options(opts))
        compiled = Compiled(self._sig, program, key, program.stats()["cache"], arrays)
        compiled._out_dtypes = [b.dtype(r._id) for r in results]
        compiled._tuple_return = tuple_return
        compiled._trace_seconds = time.perf_counter() - t0
        return compiled

    def _check_returns(self, results: list[Tensor], ctx) -> None:
        anns = self._sig.returns
        if anns is None:
            return
        if len(anns) != len(results):
            raise UserError(f"{self._sig.name}: the return annotation declares {len(anns)} tensor(s), the function returns {len(results)}")
        for i, (ann, r) in enumerate(zip(anns, results)):
            what = "return value" if len(results) == 1 else f"return value {i}"
            if ann.dtype is not None and ann.dtype != r.dtype:
                raise UserTypeError(f"{self._sig.name}: {what} is annotated {dtype_name(ann.dtype)}, the function computes {dtype_name(r.dtype)}")
            if ann.shape is not None and tuple(ann.shape) != tuple(r.shape):
                raise UserError(f"{self._sig.name}: {what} is annotated with shape {_shape_text(ann.shape)}, "
                                f"the function computes {_shape_text(r.shape)}")

    def compile(self, *args, **kwargs) -> Compiled:
        """Compiles for these example arguments without running."""
        return self._get(self._sig.bind(args, kwargs))

    def __call__(self, *args, **kwargs):
        arrays = self._sig.bind(args, kwargs)
        return _run(self._get(arrays), arrays)


def jit(fn: Callable | None = None, *, pass_options: dict | None = None, **options: Any):
    """Decorator: ``@pypto.frontend.jit`` or ``@pypto.frontend.jit(pass_options={...})``."""
    if fn is None:
        return lambda f: JitFunction(f, pass_options=pass_options, **options)
    return JitFunction(fn, pass_options=pass_options, **options)


def compile(fn: Any, *example_args, **example_kwargs) -> Compiled:  # noqa: A001 - public API name
    """Compiles a jitted function (or a plain function, jitted on the fly) for
    the example arguments and returns the white-box compiled object."""
    if not isinstance(fn, JitFunction):
        if not callable(fn):
            raise UserTypeError(f"pypto.compile: expected a function, found {type(fn).__name__}")
        fn = JitFunction(fn)
    return fn.compile(*example_args, **example_kwargs)
