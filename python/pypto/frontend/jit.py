"""``@pypto.frontend.jit``: specialises, traces, compiles (through the memory and disk caches)
and runs. Binding arguments lives in signature.py, the compiled object and its call path in
compiled.py, the option sections in option_sections.py."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable

from pypto import _C, _dtypes, golden, memory, shape_ops
from pypto._dtypes import dtype_name
from pypto.errors import UserError, UserTypeError
from pypto.frontend import config, function_block
from pypto.frontend.compiled import Compiled, _FastEntry, _run
from pypto.frontend.option_sections import _OPTION_SECTIONS, apply_option_sections
from pypto.frontend.signature import _ann_text, _Bound, _shape_matches, _shape_text, _Signature, dynamic
from pypto.frontend.tensor import Tensor

__all__ = ["Compiled", "JitFunction", "apply_option_sections", "compile", "dynamic", "jit"]


class JitFunction:
    """A function decorated with ``@pypto.frontend.jit``."""

    def __init__(self, fn: Callable, pass_options: dict | None = None, **options: Any):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._sig = _Signature(fn)
        sections = {k: options.pop(k, None) for k in _OPTION_SECTIONS}
        runtime = sections.get("runtime_options")
        self._run_mode = options.get("run_mode", runtime.get("run_mode") if isinstance(runtime, dict) else None)
        attached = getattr(fn, "__pypto_options__", {})
        merged = dict(attached.get("pass_options", {}))
        merged.update(pass_options or {})
        for k, v in options.items():
            if k == "run_mode":
                config.record_run_mode("jit", v)  # every run mode runs on the CPU backend
                continue
            if k not in ("new_ir", "create_new_logical_tensor"):
                raise UserTypeError(f"pypto.jit: unknown option '{k}' (options: pass_options, runtime_options, "
                                    f"codegen_options, host_options, debug_options, verify_options, "
                                    f"operation_options, run_mode, new_ir, create_new_logical_tensor)")
            config.record_ignored("jit", k, v)
        self._pass_options = config.normalize_pass_options(apply_option_sections(merged, sections))
        self._options = options
        self._cache: dict[tuple, Compiled] = {}
        # Calls whose arguments are all arrays, keyed by (settings version, (type, dtype, shape) per
        # argument): the compiled program and what a call needs besides the arrays themselves.
        self._fast: dict[tuple, _FastEntry] = {}
        # The C++ path of the last entry used (torch arguments), tried first: it falls back
        # (NotImplemented) on any call it was not made for.
        self._fast_call = None
        self._all_tensors = all(is_tensor for _, _, is_tensor in self._sig.params)
        self._lock = threading.Lock()
        self._converted = None

    def _effective_pass_options(self) -> dict:
        opts = config.pass_options_in_force()
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
        ctx.verify = bool(opts.get("verify"))
        b = ctx.builder
        args = []
        param_ids = []
        for kind, i in bound.order:
            if kind == "const":
                args.append(bound.consts[i][1])
                continue
            name, array, dims, dt = bound.tensors[i]
            for d in dims:
                if isinstance(d, str):
                    b.add_dyn_dim(d)
            if _dtypes.is_packed(dt):  # the caller's bytes; the kernel sees them unpacked
                vid, unpacked = shape_ops.packed_param(ctx, name, dims, memory.dtype_of(array), dt)
                param_ids.append(vid)
                args.append(unpacked)
                continue
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
        self._check_returns(results, ctx)
        shape_ops.write_back_packed(ctx)  # 4-bit parameters the kernel wrote into, packed into the caller's bytes
        # A 4-bit result goes back to the caller packed two per byte, in uint8.
        results = [shape_ops.packed_result(ctx, r) if _dtypes.is_packed(r.dtype) else r for r in results]
        # A returned parameter or view is copied into a new tensor (by shape_ops.copy_tile where no
        # vec tile shape is in force: a returned reshape of a matmul needs none).
        zero_d = {i for i, r in enumerate(results) if r._id in ctx.zero_d}
        prev = config.push_trace(ctx)
        try:
            results = [shape_ops._materialize(r, any_tile=True) if (r._id in param_ids or b.is_view(r._id)) else r for r in results]
        finally:
            config.push_trace(prev)
        b.set_outputs([r._id for r in results])
        graph = b.finish()
        program = _C.compile(graph, config.make_pass_options(opts))
        compiled = Compiled(self._sig, program, key, program.stats()["cache"], bound)
        compiled._out_dtypes = [b.dtype(r._id) for r in results]
        compiled._tuple_return = tuple_return
        compiled._zero_d = zero_d
        compiled._dim_checks = b.dim_checks()
        compiled._verify = bool(opts.get("verify"))
        compiled._copy_params = {param_ids.index(v) for v in ctx.reshaped_params if v in param_ids}
        compiled._probe_sites, compiled._probe_params = ctx.probe_sites, ctx.probe_params
        compiled._trace_seconds = time.perf_counter() - t0
        function_block.set_last_compiled(compiled)
        if opts.get("debug.compile_debug_mode") == 1 or opts.get("debug.dump_pass_graph") or \
                opts.get("debug.dump_graph_default") or opts.get("debug.dump_graph_passes"):
            _dump_pass_graphs(self._sig.name, compiled, opts)
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
        fast = self._fast_call
        if fast is not None and not kwargs:
            result = fast(*args)
            if result is not NotImplemented:
                return result
        if self._run_mode == config.RunMode.SIM:
            bound = self._sig.bind(args, kwargs)
            return _run(self._get(bound), bound, _swimlane_path(self._sig.name))
        fast_key = self._fast_key(args) if not kwargs and not golden.pending() else None
        if fast_key is not None:
            entry = self._fast.get(fast_key)
            if entry is not None:
                self._fast_call = entry.fast
                return entry.run(args)
        bound = self._sig.bind(args, kwargs)
        compiled = self._get(bound)
        compiled._check_dims(bound)  # before a repeated call may skip it
        if fast_key is not None and not compiled._copy_params and not compiled._probe_params and \
                all(memory.is_array(a) for a in args):
            with self._lock:
                self._fast[fast_key] = _FastEntry(compiled, bound)
        return _run(compiled, bound)

    def _fast_key(self, args: tuple) -> tuple | None:
        """The key of a call eligible for the cached-call path, or None. The key holds each
        argument's type, so an entry made for arrays (the slow path checks them) is found only by
        arrays; an argument without a dtype and a shape is no array and has no key."""
        if not self._all_tensors or len(args) != len(self._sig.params):
            return None
        try:
            # torch.Size is a tuple: it hashes and compares as one.
            key = (config._version, config.get_cpu_target(), *[(type(a), a.dtype, a.shape) for a in args])
            hash(key)
            return key
        except (AttributeError, TypeError):
            return None


def _output_folder(name: str, sub: str) -> str:
    """A new ``./output/<function>_<pid>_<time>/<sub>`` folder: PyPTO's layout for what a
    compilation or a run writes."""
    import datetime
    import os

    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    folder = os.path.join("output", f"{name}_{os.getpid()}_{stamp}", sub)
    os.makedirs(folder, exist_ok=True)
    return folder


def _swimlane_path(name: str) -> str:
    """Where a call in PyPTO's SIM run mode writes its swimlane: a Chrome trace-event file of the
    run, at ``./output/<function>_<pid>_<time>/CostModelSimulationOutput/merged_swimlane.json``
    (PyPTO's layout for its cost model's simulated swimlane)."""
    import os

    return os.path.join(_output_folder(name, "CostModelSimulationOutput"), "merged_swimlane.json")


def _dump_pass_graphs(name: str, compiled: Compiled, opts: dict) -> None:
    """PyPTO's debug options ``compile_debug_mode=1`` (every pass) and ``dump_pass_graph=[names]``:
    each pass's record (its time, whether it changed the graph, and the graph after it) is written
    to ``./output/<function>_<pid>_<time>/pass_graphs/<NN>_<pass>.txt``, with the stages before and
    after the passes (``tensor_graph.txt``, ``program.pto``, ``kernels.cpp``). A name that is no
    pass is warned about."""
    import os
    import re
    import warnings

    wanted = set(opts.get("debug.dump_pass_graph") or ())
    every = opts.get("debug.compile_debug_mode") == 1 or bool(opts.get("debug.dump_graph_default"))
    known = set(_C.pass_names())
    unknown = sorted(wanted - known)
    if unknown:
        warnings.warn(f"pypto: debug option 'dump_pass_graph' names no pass: {', '.join(unknown)} "
                      f"(passes: {', '.join(_C.pass_names())})", config.OptionWarning, stacklevel=4)
    wanted |= set(opts.get("debug.dump_graph_passes") or ())  # pypto.set_pass_config(..., KEY_DUMP_GRAPH, True)
    folder = _output_folder(name, "pass_graphs")
    parts = re.split(r"^-- pass ", compiled.dump("passes"), flags=re.M)
    for i, part in enumerate(p for p in parts if p.strip()):
        pass_name = part.split(" ", 1)[0].strip()
        if every or pass_name in wanted:
            with open(os.path.join(folder, f"{i:02d}_{pass_name}.txt"), "w") as f:
                f.write("-- pass " + part)
    for file, text in (("tensor_graph.txt", compiled.dump("tensor")), ("program.pto", compiled.pto()),
                       ("kernels.cpp", compiled.source())):
        with open(os.path.join(folder, file), "w") as f:
            f.write(text)


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
