"""``Compiled``: one specialisation of a jitted function (its program, dumps, stats) and the
call path that runs it on the caller's arrays."""

from __future__ import annotations

import math
import sys
from typing import Any

from pypto import _C, golden, memory
from pypto.frontend import config
from pypto.errors import UserError
from pypto.frontend.function_base import Function
from pypto.frontend.signature import _Bound, _Signature


class Compiled(Function):
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
        self._zero_d: set[int] = set()
        self._dim_checks: list = []  # (a, b, what): dims the traced ops need equal
        self._verify = False  # compiled with enable_pass_verify: golden data is compared after a call
        self._copy_params: set[int] = set()
        # pass_verify_print/save sites and their hidden parameters (pypto.frontend.probes).
        self._probe_sites: list = []
        self._probe_params: list = []
        # Parameters some task writes (pypto.assemble into them): (index, what to call it in errors).
        names = [name for name, _, _, _ in bound.tensors]
        self._written = [(i, f"{sig.name}(): parameter '{names[i]}'")
                         for i, w in enumerate(program.written[:len(names)]) if w]

    def _fn_name(self) -> str:
        return self._sig.name

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
        ``tasks`` (for the example arguments; None when this CPU cannot run the code's target),
        ``compile_seconds``, ``cache``, ``cpu_target`` (what the code was built for)."""
        s = self._program.stats()
        s["cache"] = self._cache
        # A program that reads scalars from its tensors has a data-dependent task count.
        countable = self._program.runs_here and not self._program.reads_tensor_data
        s["tasks"] = self._program.count_tasks(self._example_dyn) if countable else None
        return s

    def _check_dims(self, bound: _Bound) -> None:
        """Raises when this call's dynamic dims break an equality the traced ops assumed (a
        dynamic dim combined with another size)."""
        if not self._dim_checks:
            return
        env = {name: v for name, (v, _) in bound.dyn.items()}
        for a, b, what in self._dim_checks:
            va, vb = a.eval(env), b.eval(env)
            if va != vb:
                from pypto.frontend import config

                sizes = ", ".join(f"{n} = {v}" for n, v in sorted(env.items()) if n in str(a) or n in str(b))
                file, line = config.user_location()
                called = f" (called at {file}:{line})" if file else ""
                raise UserError(f"{what}, but this call has {sizes}: {va} versus {vb}{called}")

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


def _prepare(compiled: Compiled, bound: _Bound, hidden: list | None = None):
    """(keep-alive arrays, tensor specs, new outputs, dyn values) for a call; ``hidden`` takes the
    zero-filled hidden parameters of pass_verify_* sites (made here when it is None)."""
    arrays = []
    for i, (_, a, _, _) in enumerate(bound.tensors):
        if i in compiled._copy_params and not memory.is_contiguous(a):
            a = memory.contiguous(a)  # reshaped inside the kernel: needs contiguous memory
        arrays.append(a)
    if compiled._probe_params:
        from pypto.frontend import probes

        probe_arrays = probes.arrays(compiled, {name: v for name, (v, _) in bound.dyn.items()})
        arrays.extend(probe_arrays)
        if hidden is not None:
            hidden.extend(probe_arrays)
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
        # The same call in C++ (no Python frame between the arguments and the run): torch arguments,
        # outputs that need no reshape afterwards.
        self.fast = None
        if self.torch and not compiled._zero_d:
            torch = sys.modules["torch"]
            self.fast = _C.FastCall(
                compiled._program, compiled, self.dyn, config, golden, torch.Tensor, [a.dtype for a in args],
                [a.shape for a in args], [item for _, item in self.arg_meta], [m[0] for m in self.out_meta],
                [m[3] for m in self.out_meta], [m[3].itemsize for m in self.out_meta], torch.empty,
                memory.empty_torch, memory._CACHED_OUTPUT_BYTES)

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
    compiled._check_dims(bound)
    hidden: list = []
    keep, specs, outs, dyn = _prepare(compiled, bound, hidden)
    compiled._last_tasks = compiled._program.run(specs, dyn, trace_path)
    del keep
    if hidden:
        from pypto.frontend import probes

        probes.report(compiled, hidden)
    result = _results(compiled, outs)
    if golden.pending() and compiled._verify:
        from pypto.frontend.option_table import section

        params = [(f"parameter '{n}'", a) for n, a, _, _ in bound.tensors]
        tol = section("verify").get("pass_verify_error_tol")
        if not isinstance(tol, (list, tuple)) or len(tol) != 2:  # PyPTO: any other length means the default
            tol = [1e-3, 1e-3]
        golden.check(compiled._sig.name, params, outs, (float(tol[1]), float(tol[0])))  # [rtol, atol]
    return result


def _results(compiled: Compiled, outs: list):
    """What a call returns: None, the single output, or the tuple of outputs."""
    if not outs:
        return None
    for i in compiled._zero_d:  # a 0-d result, computed as shape [1]
        outs[i] = outs[i].reshape(())
    if len(outs) == 1 and not compiled._tuple_return:
        return outs[0]
    return tuple(outs)
