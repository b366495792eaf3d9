"""``@pypto.frontend.jit``: binds arguments, specialises, traces, compiles
(through the memory and disk caches) and runs."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import threading
import time
from typing import Any, Callable

from pypto import _C, memory
from pypto._dtypes import DataType, dtype_name
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.symbolic import SymExpr
from pypto.frontend.tensor import DYNAMIC, Tensor


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def dynamic(name: str) -> SymExpr:
    """A named dynamic dim for annotations: every parameter dim that uses it
    must have the same size at a call, and the kernel is compiled once for all
    sizes."""
    if not isinstance(name, str) or not name.isidentifier():
        raise UserError(f"pypto.frontend.dynamic: name must be an identifier, found {name!r}")
    return SymExpr.var(name)


_CONST_TYPES = (int, float, bool, str, type(None), DataType)


def _const_key(name: str, fname: str, v: Any):
    """A hashable key for a compile-time constant argument."""
    if isinstance(v, _CONST_TYPES):
        return (type(v).__name__, v if not isinstance(v, DataType) else int(v))
    if isinstance(v, tuple):
        return ("tuple", tuple(_const_key(name, fname, x) for x in v))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return ("dataclass", type(v).__qualname__,
                tuple((f.name, _const_key(name, fname, getattr(v, f.name))) for f in dataclasses.fields(v)))
    raise UserTypeError(
        f"{fname}(): parameter '{name}' is a compile-time constant and must be an int, float, bool, str, tuple, "
        f"pypto.DataType or a dataclass of those; found {type(v).__name__}")


def _evaluated_signature(fn: Callable) -> inspect.Signature:
    """The signature of `fn` with postponed annotations (``from __future__ import annotations``, or
    quoted ones) evaluated where the function was defined: its module globals and its closure."""
    sig = inspect.signature(fn)
    anns = [p.annotation for p in sig.parameters.values()] + [sig.return_annotation]
    if not any(isinstance(a, str) for a in anns):
        return sig
    namespace = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:  # a closure variable not assigned yet
            pass

    def evaluate(ann, what: str):
        if not isinstance(ann, str):
            return ann
        try:
            return eval(ann, namespace)  # noqa: S307 - the annotation text of the user's own function
        except Exception as e:
            raise UserError(
                f"@pypto.frontend.jit function '{fn.__name__}': cannot evaluate the annotation {ann!r} of {what} "
                f"({type(e).__name__}: {e}); with 'from __future__ import annotations' the names it uses must be "
                f"module globals") from None

    params = [p.replace(annotation=evaluate(p.annotation, f"parameter '{p.name}'")) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=evaluate(sig.return_annotation, "the return value"))


class _Signature:
    """The parameters and return annotations of a jitted function."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        self.sig = _evaluated_signature(fn)
        self.params: list[tuple[str, Tensor | None, bool]] = []  # (name, annotation, is_tensor_annotation)
        for p in self.sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise NotSupportedError(f"@pypto.frontend.jit function '{self.name}': *args/**kwargs parameters are not supported yet")
            ann = p.annotation
            if ann is inspect.Parameter.empty:
                self.params.append((p.name, None, False))
            elif isinstance(ann, type) and issubclass(ann, Tensor):
                self.params.append((p.name, Tensor(), True))
            elif isinstance(ann, Tensor):
                self.params.append((p.name, ann, True))
            else:
                self.params.append((p.name, None, False))  # int, float, a dataclass type, ...: a constant
        ret = self.sig.return_annotation
        if isinstance(ret, type) and issubclass(ret, Tensor):
            ret = Tensor()
        if ret is inspect.Signature.empty or ret is None:
            self.returns = None
        elif isinstance(ret, Tensor):
            self.returns = (ret,)
        elif isinstance(ret, tuple) and all(isinstance(r, Tensor) for r in ret):
            self.returns = ret
        else:
            self.returns = None

    def bind(self, args: tuple, kwargs: dict) -> "_Bound":
        """Checks the arguments against the annotations; errors name the
        caller's file and line."""
        try:
            return self._bind(args, kwargs)
        except (UserError, UserTypeError, NotSupportedError) as e:
            file, line = config.user_location()
            if file and f"{file}:{line}" not in str(e):
                raise type(e)(f"{e} (called at {file}:{line})") from None
            raise

    def _bind(self, args: tuple, kwargs: dict) -> "_Bound":
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError as e:
            expected = ", ".join(n for n, _, _ in self.params)
            raise UserTypeError(
                f"{self.name}() takes ({expected}); called with {len(args)} positional and "
                f"{len(kwargs)} keyword argument(s): {e}") from None
        bound.apply_defaults()
        out = _Bound()
        for name, ann, is_tensor_ann in self.params:
            x = bound.arguments[name]
            if not is_tensor_ann and not memory.is_array(x):
                out.consts.append((name, x, _const_key(name, self.name, x)))
                out.order.append(("const", len(out.consts) - 1))
                continue
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
            if len(shape) == 0:
                raise NotSupportedError(f"{self.name}(): parameter '{name}' is a 0-d tensor; not supported yet")
            if any(d == 0 for d in shape):
                raise NotSupportedError(f"{self.name}(): parameter '{name}' has a zero-size dim {_shape_text(shape)}; not supported yet")
            dims = self._bind_dims(name, ann, shape, out)
            out.tensors.append((name, x, dims, dt))
            out.order.append(("tensor", len(out.tensors) - 1))
        return out

    def _bind_dims(self, name, ann, shape, out: "_Bound") -> list:
        """Per dim: an int (static) or the name of a dynamic dim."""
        if ann is None or ann.shape is None:
            return list(shape)
        spec = list(ann.shape)
        ellipsis = bool(spec) and spec[-1] is Ellipsis
        if ellipsis:
            spec = spec[:-1]
        if (len(shape) != len(spec)) if not ellipsis else (len(shape) < len(spec)):
            raise UserError(f"{self.name}(): parameter '{name}' expects shape {_ann_text(ann.shape)}, found {_shape_text(shape)}")
        dims: list = []
        for i, size in enumerate(shape):
            want = spec[i] if i < len(spec) else size
            if isinstance(want, int):
                if want != size:
                    raise UserError(f"{self.name}(): parameter '{name}' expects shape {_ann_text(ann.shape)}, "
                                    f"found {_shape_text(shape)}")
                dims.append(size)
                continue
            dname = f"{name}_{i}" if want is DYNAMIC else str(want)
            prev = out.dyn.get(dname)
            if prev is not None and prev[0] != size:
                raise UserError(
                    f"{self.name}(): dynamic dim '{dname}' is {prev[0]} in parameter '{prev[1]}' but {size} in "
                    f"parameter '{name}' (dim {i})")
            out.dyn.setdefault(dname, (size, name))
            dims.append(dname)
        return dims


class _Bound:
    """Arguments of one call: tensors (name, array, dims, dtype), constants, dynamic dims."""

    def __init__(self):
        self.tensors: list = []
        self.consts: list = []
        self.order: list = []
        self.dyn: dict[str, tuple[int, str]] = {}

    def key(self) -> tuple:
        return (tuple((tuple(d if isinstance(d, int) else f"${d}" for d in dims), int(dt))
                      for _, _, dims, dt in self.tensors),
                tuple(k for _, _, k in self.consts))

    def dyn_values(self, names: list[str]) -> list[int]:
        return [self.dyn[n][0] for n in names]


def _shape_matches(ann, shape) -> bool:
    """Does a traced shape fit an annotation (static dims equal, dynamic dims anything)?"""
    ann = list(ann)
    if ann and ann[-1] is Ellipsis:
        ann = ann[:-1]
        if len(shape) < len(ann):
            return False
    elif len(ann) != len(shape):
        return False
    for want, got in zip(ann, shape):
        if isinstance(want, int) and not (isinstance(got, int) and got == want):
            return False
        if isinstance(want, SymExpr) and str(want) != str(got):
            return False
    return True


def _ann_text(shape) -> str:
    return "(" + ", ".join("..." if d is Ellipsis else str(d) for d in shape) + ")"


class Compiled:
    """A function compiled for one specialisation: callable like the jitted
    function, and white-box (``dump``, ``pto``, ``source``, ``stats``)."""

    def __init__(self, sig: _Signature, program: Any, key: tuple, cache: str, bound: "_Bound"):
        self._sig = sig
        self._program = program
        self._key = key
        self._cache = cache
        self._example_dyn = bound.dyn_values(program.dyn_dims)
        self._last_tasks: int | None = None
        self._out_dtypes: list = []
        self._tuple_return = False
        self._copy_params: set[int] = set()
        # Parameters some task writes (pypto.assemble into them): (index, what to call it in errors).
        names = [name for name, _, _, _ in bound.tensors]
        self._written = [(i, f"{sig.name}(): parameter '{names[i]}'")
                         for i, w in enumerate(program.written[:len(names)]) if w]

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
        s["tasks"] = self._program.count_tasks(self._example_dyn)
        return s

    def __call__(self, *args, **kwargs):
        return _run(self, self._check(self._sig.bind(args, kwargs)))

    def __repr__(self) -> str:
        return f"<pypto.Compiled {self._sig.name}>"

    def _check(self, bound: _Bound) -> _Bound:
        if bound.key() != self._key[0]:
            raise UserError(f"{self._sig.name}: this compiled object was specialised for other shapes, dtypes or "
                            f"constants than these arguments")
        return bound

    def _bind_call(self, args: tuple, kwargs: dict):
        """(keep-alive arrays, tensor specs, outputs, dyn values) for a call."""
        return _prepare(self, self._check(self._sig.bind(args, kwargs)))

    def task_graph(self, *args, **kwargs):
        """The task graph a call with these arguments builds, as a ``pypto.TaskGraph``;
        dependencies are computed as in a real run but no kernel runs."""
        from pypto.taskgraph import TaskGraph

        keep, specs, outs, dyn = self._bind_call(args, kwargs)
        records = self._program.record(specs, dyn)
        del keep, outs
        return TaskGraph(records)

    def profile(self, *args, path: str = "trace.json", **kwargs):
        """Runs once like a call and writes a Chrome trace-event JSON file to ``path``
        (open it in chrome://tracing or Perfetto); returns the outputs."""
        import os

        return _run(self, self._check(self._sig.bind(args, kwargs)), os.fspath(path))


def _prepare(compiled: Compiled, bound: _Bound):
    """(keep-alive arrays, tensor specs, new outputs, dyn values) for a call."""
    arrays = []
    for i, (_, a, _, _) in enumerate(bound.tensors):
        if i in compiled._copy_params and not memory.is_contiguous(a):
            a = memory.contiguous(a)  # reshaped inside the kernel: needs contiguous memory
        arrays.append(a)
    dyn = bound.dyn_values(compiled._program.dyn_dims)
    outputs = zip(compiled._program.output_shapes(dyn), compiled._out_dtypes)
    for i, what in compiled._written:
        memory.check_writable(arrays[i], what)
    keep, specs, outs = _specs_and_outputs(arrays, outputs)
    return keep, specs, outs, dyn


def _specs_and_outputs(arrays, outputs):
    """(keep-alive arrays, specs of the arrays then of the new outputs, the outputs) for a call;
    `outputs` gives (shape, dtype) per output, allocated of the first array's kind."""
    keep, specs = [], []
    for a in arrays:
        kept, spec = memory.describe(a)
        keep.append(kept)
        specs.append(spec)
    like = arrays[0] if arrays else None
    outs = [memory.empty_like_kind(like, shape, dt) for shape, dt in outputs]
    specs.extend(memory.describe(o)[1] for o in outs)
    return keep, specs, outs


class _FastEntry:
    """A repeated call: same settings, argument kinds, dtypes and shapes as a call that was bound,
    checked and compiled the normal way, so only the arrays' addresses and strides are new."""

    def __init__(self, compiled: Compiled, bound: _Bound):
        self.compiled = compiled
        self.dyn = bound.dyn_values(compiled._program.dyn_dims)
        self.outputs = list(zip(compiled._program.output_shapes(self.dyn), compiled._out_dtypes))
        # torch arguments: what the key fixes (shapes, element sizes) and each output's layout are
        # computed once; a call reads only the pointers and strides of its tensors.
        args = [a for _, a, _, _ in bound.tensors]
        self.torch = bool(args) and all(memory.is_torch(a) for a in args)
        if self.torch:
            self.arg_meta = [(list(a.shape), a.element_size()) for a in args]
            self.out_meta = []
            for shape, dt in self.outputs:
                tdt = memory._dtypes.to_torch(dt)
                strides = [1] * len(shape)
                for d in range(len(shape) - 2, -1, -1):
                    strides[d] = strides[d + 1] * shape[d + 1]
                self.out_meta.append((tuple(shape), list(shape), strides, tdt, math.prod(shape) * tdt.itemsize))

    def run(self, args: tuple):
        if not self.torch:
            for i, what in self.compiled._written:
                memory.check_writable(args[i], what)
            keep, specs, outs = _specs_and_outputs(args, self.outputs)
        else:
            specs = [memory.torch_spec(a, shape, item) for a, (shape, item) in zip(args, self.arg_meta)]
            outs = []
            for shape_t, shape, strides, tdt, nbytes in self.out_meta:
                o = memory.empty_torch(shape_t, tdt, nbytes)
                ptr = o.data_ptr()
                specs.append((ptr, shape, strides, tdt.itemsize, ptr))
                outs.append(o)
            keep = args
        compiled = self.compiled
        compiled._cache = "memory"
        compiled._last_tasks = compiled._program.run(specs, self.dyn, "")
        del keep
        return _results(compiled, outs)


def _run(compiled: Compiled, bound: _Bound, trace_path: str = ""):
    keep, specs, outs, dyn = _prepare(compiled, bound)
    compiled._last_tasks = compiled._program.run(specs, dyn, trace_path)
    del keep
    return _results(compiled, outs)


def _results(compiled: Compiled, outs: list):
    """What a call returns: None, the single output, or the tuple of outputs."""
    if not outs:
        return None
    if len(outs) == 1 and not compiled._tuple_return:
        return outs[0]
    return tuple(outs)


_OPTION_SECTIONS = ("runtime_options", "codegen_options", "host_options", "debug_options", "verify_options")


def apply_option_sections(pass_options: dict, sections: dict) -> dict:
    """Folds the sections of PyPTO's jit options into pass options: what the
    CPU backend uses applies, the rest is recorded with one warning."""
    out = dict(pass_options)
    for section, opts in sections.items():
        if opts is None:
            continue
        if not isinstance(opts, dict):
            raise UserTypeError(f"pypto.jit: {section} must be a dict, found {type(opts).__name__}")
        for key, value in opts.items():
            if section == "verify_options" and key in ("enable", "enable_pass_verify", "pass_verify"):
                out["verify"] = bool(value)
            elif section == "runtime_options" and key == "run_mode":
                config.record_run_mode(section, value)
            else:
                config.record_ignored(section, key, value)
    return out


class JitFunction:
    """A function decorated with ``@pypto.frontend.jit``."""

    def __init__(self, fn: Callable, pass_options: dict | None = None, **options: Any):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._sig = _Signature(fn)
        sections = {k: options.pop(k, None) for k in _OPTION_SECTIONS}
        attached = getattr(fn, "__pypto_options__", {})
        merged = dict(attached.get("pass_options", {}))
        merged.update(pass_options or {})
        for k, v in options.items():
            if k == "run_mode":
                config.record_run_mode("jit", v)  # every run mode runs on the CPU backend
                continue
            config.record_ignored("jit", k, v)
        self._pass_options = config.normalize_pass_options(apply_option_sections(merged, sections))
        self._options = options
        self._cache: dict[tuple, Compiled] = {}
        # Calls whose arguments are all arrays, keyed by (settings version, (type, dtype, shape) per
        # argument): the compiled program and what a call needs besides the arrays themselves.
        self._fast: dict[tuple, _FastEntry] = {}
        self._all_tensors = all(is_tensor for _, _, is_tensor in self._sig.params)
        self._lock = threading.Lock()
        self._converted = None

    def _effective_pass_options(self) -> dict:
        opts = config.global_pass_options()
        opts.update(config.context_pass_options())
        opts.update(self._pass_options)
        return opts

    def _get(self, bound: _Bound) -> Compiled:
        opts = self._effective_pass_options()
        key = (bound.key(), tuple(sorted(opts.items())), config.default_vec_tile(), config.default_cube_tile())
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                hit._cache = "memory"
                hit._example_dyn = bound.dyn_values(hit._program.dyn_dims)
                return hit
        compiled = self._compile(bound, key, opts)
        with self._lock:
            self._cache[key] = compiled
        return compiled

    def _compile(self, bound: _Bound, key: tuple, opts: dict) -> Compiled:
        from pypto.frontend import autograph

        t0 = time.perf_counter()
        if self._converted is None:
            self._converted = autograph.convert(self._fn)
        ctx = config.TraceContext(self._sig.name, config.default_vec_tile())
        b = ctx.builder
        args = []
        param_ids = []
        for kind, i in bound.order:
            if kind == "const":
                args.append(bound.consts[i][1])
                continue
            name, _, dims, dt = bound.tensors[i]
            for d in dims:
                if isinstance(d, str):
                    b.add_dyn_dim(d)
            vid = b.add_param(name, dims, dt)
            param_ids.append(vid)
            args.append(Tensor._traced(ctx, vid, name))
        prev = config.push_trace(ctx)
        try:
            result = self._converted(*args)
        finally:
            config.push_trace(prev)
        tuple_return = isinstance(result, (tuple, list))
        results = list(result) if tuple_return else ([] if result is None else [result])
        for i, r in enumerate(results):
            if not isinstance(r, Tensor) or r._ctx is not ctx:
                raise UserTypeError(
                    f"{self._sig.name}: return value {i} must be a pypto.Tensor computed by the function, found {type(r).__name__}")
        # A returned parameter or view is copied into a new tensor.
        from pypto import shape_ops

        prev = config.push_trace(ctx)
        try:
            results = [shape_ops._materialize(r) if (r._id in param_ids or b.is_view(r._id)) else r for r in results]
        finally:
            config.push_trace(prev)
        self._check_returns(results, ctx)
        b.set_outputs([r._id for r in results])
        graph = b.finish()
        program = _C.compile(graph, config.make_pass_options(opts))
        compiled = Compiled(self._sig, program, key, program.stats()["cache"], bound)
        compiled._out_dtypes = [b.dtype(r._id) for r in results]
        compiled._tuple_return = tuple_return
        compiled._copy_params = {param_ids.index(v) for v in ctx.reshaped_params if v in param_ids}
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
            if ann.shape is not None and not _shape_matches(ann.shape, r.shape):
                raise UserError(f"{self._sig.name}: {what} is annotated with shape {_ann_text(ann.shape)}, "
                                f"the function computes {_shape_text(r.shape)}")

    def compile(self, *args, **kwargs) -> Compiled:
        """Compiles for these example arguments without running."""
        return self._get(self._sig.bind(args, kwargs))

    def __call__(self, *args, **kwargs):
        fast_key = self._fast_key(args) if not kwargs else None
        if fast_key is not None:
            entry = self._fast.get(fast_key)
            if entry is not None:
                return entry.run(args)
        bound = self._sig.bind(args, kwargs)
        compiled = self._get(bound)
        if fast_key is not None and not compiled._copy_params:
            with self._lock:
                self._fast[fast_key] = _FastEntry(compiled, bound)
        return _run(compiled, bound)

    def _fast_key(self, args: tuple) -> tuple | None:
        """The key of a call eligible for the cached-call path, or None."""
        if not self._all_tensors or len(args) != len(self._sig.params):
            return None
        key = [config.version()]
        for a in args:
            if not memory.is_array(a):
                return None
            # torch.Size is a tuple: it hashes and compares as one.
            key.append((type(a), a.dtype, a.shape))
        return tuple(key)


def jit(fn: Callable | None = None, *, pass_options: dict | None = None, **options: Any):
    """Decorator: ``@pypto.frontend.jit`` or ``@pypto.frontend.jit(pass_options={...}, runtime_options=...,
    codegen_options=..., host_options=..., debug_options=..., verify_options=...)``. Options that do not
    apply on the CPU are recorded with one warning."""
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
