"""pypto kernels inside torch programs: ``pypto.torch.custom_op(fn)`` registers a jitted function
as a ``torch.library`` custom op, so that a model calling it runs under
``torch.compile(fullgraph=True)`` and ``torch.export`` with no graph break.

This module imports torch; ``import pypto`` does not import it (``pypto.torch`` is loaded on
first use, see ``pypto.__getattr__``)."""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch

from pypto import _dtypes
from pypto.errors import NotSupportedError, UserError, UserTypeError

__all__ = ["custom_op"]

_NAMESPACE = "pypto"
_registered: dict[str, Any] = {}  # op name -> the jitted function it was registered for
_lock = threading.Lock()

# Schema types of the non-tensor parameters, taken from their defaults.
_SCALAR_TYPES = ((bool, "bool"), (int, "SymInt"), (float, "float"))


def _schema_type(fname: str, name: str, default: Any) -> str:
    for t, text in _SCALAR_TYPES:
        if isinstance(default, t):
            return text
    raise NotSupportedError(
        f"pypto.torch.custom_op({fname}): parameter '{name}' is not annotated as a pypto.Tensor and has no "
        f"bool, int or float default; custom ops of other constant parameters are not supported yet")


def _op_name(fn, name: str | None) -> str:
    base = name if name is not None else fn.__name__
    if not isinstance(base, str) or not base.isidentifier():
        raise UserError(f"pypto.torch.custom_op: name must be a Python identifier, found {base!r}")
    with _lock:
        chosen, n = base, 0
        while chosen in _registered and _registered[chosen][0] is not fn:
            if name is not None:
                raise UserError(f"pypto.torch.custom_op: the op name '{_NAMESPACE}::{name}' is already registered "
                                f"for another function")
            n += 1
            chosen = f"{base}_{n}"
        return chosen


def _returns(fn) -> tuple:
    """The annotated return tensors (each with .shape and .dtype), or None."""
    return fn._sig.returns


def _fake_outputs(fn, args: tuple) -> tuple[list, bool]:
    """(empty tensors of the outputs' shapes and dtypes, is a tuple returned) for fake tensors
    ``args``: from the return annotation where it names every dim by an int or a dim of a
    parameter (symbolic sizes stay symbolic), else from the program compiled for these sizes."""
    from pypto.frontend.symbolic import SymExpr

    sizes: dict[str, Any] = {}
    for (pname, ann, is_tensor), a in zip(fn._sig.params, args):
        if not is_tensor or ann.shape is None or not isinstance(a, torch.Tensor):
            continue
        for d, size in zip(ann.shape, a.shape):
            if isinstance(d, SymExpr) and d.is_symbol():
                sizes.setdefault(str(d), size)
    rets = _returns(fn)
    if rets is not None and all(r.shape is not None and r.dtype is not None for r in rets):
        shapes = []
        for r in rets:
            shape = []
            for d in r.shape:
                if isinstance(d, int):
                    shape.append(d)
                elif isinstance(d, SymExpr) and d.is_symbol() and str(d) in sizes:
                    shape.append(sizes[str(d)])
                else:
                    shape = None
                    break
            if shape is None:
                break
            shapes.append((shape, r.dtype))
        else:
            return [torch.empty(s, dtype=_dtypes.to_torch(dt)) for s, dt in shapes], len(rets) > 1
    # Compile for the concrete sizes (the cached program of a real call) and read its outputs.
    concrete = [torch.empty([int(s) for s in a.shape], dtype=a.dtype, device="meta") if isinstance(a, torch.Tensor)
                else a for a in args]
    bound = fn._sig.bind(tuple(concrete), {})
    compiled = fn._get(bound)
    dyn = bound.dyn_values(compiled._program.dyn_dims)
    outs = [torch.empty(list(shape), dtype=_dtypes.to_torch(dt))
            for shape, dt in zip(compiled._program.output_shapes(dyn), compiled._out_dtypes)]
    return outs, compiled._tuple_return


def custom_op(fn: Callable | None = None, *, name: str | None = None, mutates_args: tuple = ()):
    """Registers the ``@pypto.frontend.jit`` function ``fn`` as the torch custom op
    ``torch.ops.pypto.<name>`` (``name`` defaults to the function's name) and returns it: a
    callable taking and returning torch tensors. The op has a fake implementation (output shapes
    and dtypes from the return annotation, or from the program compiled for the call's sizes), so
    ``torch.compile(fullgraph=True)`` and ``torch.export`` trace through it with no graph break.
    ``mutates_args`` names the tensor parameters the kernel writes into (``pypto.assemble`` into a
    parameter, such as a KV cache), which torch must know about.
    Usable as ``@pypto.torch.custom_op`` above ``@pypto.frontend.jit`` or as a call."""
    if fn is None:
        return lambda f: custom_op(f, name=name, mutates_args=mutates_args)
    from pypto.frontend.jit import JitFunction

    if not isinstance(fn, JitFunction):
        raise UserTypeError(f"pypto.torch.custom_op: fn must be a @pypto.frontend.jit function, found "
                            f"{type(fn).__name__}")
    op_name = _op_name(fn, name)
    with _lock:
        if op_name in _registered:
            return _registered[op_name][1]
    fname = fn._sig.name
    if isinstance(mutates_args, str) or not all(isinstance(a, str) for a in mutates_args):
        raise UserTypeError(f"pypto.torch.custom_op({fname}): mutates_args must be a tuple of parameter names, "
                            f"found {mutates_args!r}")
    tensor_names = [pname for pname, _ann, is_tensor in fn._sig.params if is_tensor]
    for a in mutates_args:
        if a not in tensor_names:
            raise UserError(f"pypto.torch.custom_op({fname}): mutates_args names '{a}', which is not a tensor "
                            f"parameter (tensor parameters: {', '.join(tensor_names)})")
    params = []
    for p, (pname, _ann, is_tensor) in zip(fn._sig.sig.parameters.values(), fn._sig.params):
        if is_tensor:
            alias = f"(a{len(params)}!)" if pname in mutates_args else ""
            params.append(f"Tensor{alias} {pname}")
        else:
            default = p.default
            params.append(f"{_schema_type(fname, pname, default)} {pname}={default!r}")
    rets = _returns(fn)
    if rets is None:
        raise NotSupportedError(f"pypto.torch.custom_op({fname}): the function needs a return annotation "
                                f"(pypto.Tensor or a tuple of them) to be a torch op")
    ret_text = "Tensor" if len(rets) == 1 else "(" + ", ".join("Tensor" for _ in rets) + ")"
    schema = f"({', '.join(params)}) -> {ret_text}"

    op = torch.library.custom_op(f"{_NAMESPACE}::{op_name}", lambda *args: fn(*args),
                                 mutates_args=tuple(mutates_args), schema=schema)

    @op.register_fake
    def _fake(*args):
        outs, is_tuple = _fake_outputs(fn, args)
        return tuple(outs) if is_tuple else outs[0]

    with _lock:
        _registered[op_name] = (fn, op)
    return op
