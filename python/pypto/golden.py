"""PyPTO's golden-data verification: ``pypto.set_verify_golden_data(in_out_tensors=None,
goldens=None)`` gives the expected data of a kernel's parameters (``None`` where there is nothing
to compare, such as an input); with ``enable_pass_verify`` on, the next call of a kernel compares
its parameters (and then its returned outputs, in order) after the run with the goldens and warns
with ``pypto.VerifyWarning`` for each that differs beyond ``pass_verify_error_tol``."""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

import numpy as np

from pypto import memory
from pypto.errors import UserError, UserTypeError

_state = threading.local()
# Whether any thread has ever set goldens: until then pending() answers without a thread-local lookup
# (a cached kernel call asks on every call).
_ever_set = False


class VerifyWarning(UserWarning):
    """A kernel's result differs from the golden data given with pypto.set_verify_golden_data."""


def set_verify_golden_data(in_out_tensors: list | None = None, goldens: list | None = None) -> None:
    if goldens is None and in_out_tensors is None:
        _state.goldens = None
        return
    if goldens is not None:
        if not isinstance(goldens, (list, tuple)):
            raise UserTypeError(f"pypto.set_verify_golden_data: goldens must be a list, found {type(goldens).__name__}")
        checked = []
        for i, g in enumerate(goldens):
            if getattr(g, "_data", None) is not None:  # a pypto.from_torch tensor
                g = g._data
            if g is not None and not memory.is_array(g):
                raise UserTypeError(f"pypto.set_verify_golden_data: goldens[{i}] must be None, a torch tensor, a NumPy "
                                    f"array or a pypto.from_torch tensor, found {type(goldens[i]).__name__}")
            if memory.is_torch(g) and g.device.type != "cpu":
                raise UserError(f"pypto.set_verify_golden_data: goldens[{i}] is on device '{g.device}'; use CPU data")
            checked.append(g)
        global _ever_set
        _ever_set = True
        _state.goldens = checked
    # in_out_tensors names the actual arguments; a jitted call knows its own, so nothing to keep.


def pending() -> bool:
    return _ever_set and getattr(_state, "goldens", None) is not None


def _numpy(a: Any) -> np.ndarray:
    if memory.is_torch(a):
        import torch

        return a.detach().to(torch.float64).numpy() if a.is_floating_point() else a.detach().numpy()
    return np.asarray(a)


def check(name: str, params: list[tuple[str, Any]], outputs: list, tol: tuple[float, float]) -> None:
    """Compares the call's parameters and then its outputs with the pending goldens (used once)."""
    goldens = _state.goldens
    _state.goldens = None
    values = list(params) + [(f"output {i}", o) for i, o in enumerate(outputs)]
    atol, rtol = tol
    for i, g in enumerate(goldens):
        if g is None:
            continue
        if i >= len(values):
            raise UserError(f"{name}: golden {i} has no parameter or output to compare with ({len(values)} in all)")
        what, got = values[i]
        got_np, want = _numpy(got), _numpy(g)
        if got_np.shape != want.shape:
            warnings.warn(f"{name}: verify: {what} has shape {got_np.shape}, its golden {want.shape}", VerifyWarning,
                          stacklevel=4)
            continue
        bad = ~np.isclose(got_np.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol, equal_nan=True)
        if bad.any():
            err = np.abs(got_np.astype(np.float64) - want.astype(np.float64))
            warnings.warn(f"{name}: verify: {what} differs from its golden in {int(bad.sum())} of {bad.size} elements "
                          f"(max abs error {float(np.nanmax(err)):.3g}; atol {atol}, rtol {rtol})", VerifyWarning,
                          stacklevel=4)


def verify(func: Any, inputs: list, outputs: list, goldens: list, *args: Any, codegen_options: dict | None = None,
           host_options: dict | None = None, pass_options: dict | None = None, verify_options: dict | None = None,
           **kwargs: Any) -> None:
    """PyPTO's verification driver: applies the option dicts (``verify_options`` defaults to
    ``{"enable_pass_verify": True}``), gives ``goldens`` (one per input, then one per output;
    ``None`` to skip one) as the golden data, and calls ``func(inputs, outputs, *args, **kwargs)``
    with the arrays as ``pypto.from_torch`` tensors named ``IN_i`` and ``OUT_i``. ``func`` either
    calls a jitted function on them, or writes a ``with pypto.function(name, ...)`` block over them,
    which then runs here on their data. Each parameter or output that differs from its golden
    beyond ``pass_verify_error_tol`` is a ``pypto.VerifyWarning``."""
    import pypto
    from pypto.frontend import config, function_block

    if not callable(func):
        raise UserTypeError(f"pypto.verify: func must be callable, found {type(func).__name__}")
    for what, seq in (("inputs", inputs), ("outputs", outputs), ("goldens", goldens)):
        if not isinstance(seq, (list, tuple)):
            raise UserTypeError(f"pypto.verify: {what} must be a list, found {type(seq).__name__}")
    if len(goldens) > len(inputs) + len(outputs):
        raise UserError(f"pypto.verify: {len(goldens)} goldens for {len(inputs)} inputs and {len(outputs)} outputs; "
                        "give at most one golden per input and output, in that order")
    for what, opts, setter in (("codegen_options", codegen_options, pypto.set_codegen_options),
                               ("host_options", host_options, pypto.set_host_options),
                               ("pass_options", pass_options, pypto.set_pass_options),
                               ("verify_options", {"enable_pass_verify": True} if verify_options is None
                                else verify_options, pypto.set_verify_options)):
        if opts is None:
            continue
        if not isinstance(opts, dict):
            raise UserTypeError(f"pypto.verify: {what} must be a dict, found {type(opts).__name__}")
        setter(**opts)

    def as_tensor(a: Any, name: str, what: str):
        if isinstance(a, pypto.Tensor):
            if a._data is None:
                raise UserError(f"pypto.verify: {what} is a pypto.Tensor without data; pass a torch tensor or a "
                                "tensor made by pypto.from_torch")
            return a
        if memory.is_torch(a):
            return pypto.from_torch(a, name)
        raise UserTypeError(f"pypto.verify: {what} must be a torch tensor or a pypto.from_torch tensor, found "
                            f"{type(a).__name__}")

    ins = [as_tensor(a, f"IN_{i}", f"inputs[{i}]") for i, a in enumerate(inputs)]
    outs = [as_tensor(a, f"OUT_{i}", f"outputs[{i}]") for i, a in enumerate(outputs)]
    set_verify_golden_data(None, list(goldens) + [None] * (len(ins) + len(outs) - len(goldens)))
    before = function_block.get_last_function()
    try:
        func(ins, outs, *args, **kwargs)
        if pending():  # no kernel compared the goldens yet
            last = function_block.get_last_function()
            if isinstance(last, function_block.function) and last is not before:
                last(*[t._data for t in last._tensors])  # the block func wrote over these tensors
            elif config.pass_options_in_force().get("verify"):
                raise UserError("pypto.verify: func neither called a jitted function nor completed a "
                                "`with pypto.function(...)` block, so there is nothing to verify")
            # Otherwise a kernel compiled without enable_pass_verify ran: nothing is compared.
    finally:
        _state.goldens = None


def _verify_values(fn: str, values: Any, cond: Any):
    """The trace of a pass_verify_* call, checked, or None when verification is off (PyPTO's
    pass_verify_* calls act only with enable_pass_verify)."""
    from pypto.errors import TracingError
    from pypto.frontend import config
    from pypto.frontend.symbolic import SymExpr
    from pypto.frontend.tensor import Tensor

    ctx = config.current_trace()
    if ctx is None:
        raise TracingError(f"pypto.{fn} was used outside a jitted function or a pypto.function block")
    for i, v in enumerate(values):
        if isinstance(v, Tensor) and v._ctx is not ctx:
            raise UserError(f"pypto.{fn}: value {i} is a tensor of another function")
    if cond is None or isinstance(cond, bool) or not isinstance(cond, (int, SymExpr)):
        raise UserTypeError(f"pypto.{fn}: cond must be an int or a symbolic scalar (1: always), found {cond!r}")
    if not ctx.verify or (isinstance(cond, int) and cond == 0):
        return None
    return ctx


def pass_verify_print(*values: Any, cond: Any = 1) -> None:
    """PyPTO's ``pass_verify_print(*values, cond=1)``: in a kernel compiled with enable_pass_verify,
    each time the call runs with ``cond`` true, prints one line once the kernel has finished (in
    program order): tensors as their values at that point (NumPy's layout, the
    ``pypto.set_print_options`` settings), ints and symbolic scalars as their values then, other
    objects as ``str``. Without enable_pass_verify (the default) the call has no effect, as in PyPTO."""
    from pypto.frontend import probes
    from pypto.frontend.symbolic import SymExpr
    from pypto.frontend.tensor import Tensor

    ctx = _verify_values("pass_verify_print", values, cond)
    if ctx is None:
        return
    parts, tensors, scalars = [], [], []
    for v in values:
        if isinstance(v, Tensor):
            parts.append(("tensor", len(tensors)))
            tensors.append(v)
        elif isinstance(v, SymExpr):
            parts.append(("scalar", len(scalars)))
            scalars.append(v)
        else:
            parts.append(("text", str(v)))
    probes.record(ctx, "print", "pass_verify_print", parts, tensors, scalars, cond)


def pass_verify_save(tensor: Any, fname: Any, cond: Any = 1, **kwargs: Any) -> None:
    """PyPTO's ``pass_verify_save(tensor, fname, cond=1, **kwargs)``: in a kernel compiled with
    enable_pass_verify, each time the call runs with ``cond`` true, saves the tensor's value at that
    point as ``<fname>.data`` (its bytes, row-major) and ``<fname>.csv`` (its dtype and shape) in
    ``<pass_verify_save_tensor_dir>/tensor/`` (by default ``./output/output_<time>/tensor/``);
    ``$name`` in ``fname`` is replaced by the value of ``kwargs[name]`` then. Without
    enable_pass_verify (the default) the call has no effect, as in PyPTO."""
    import re

    from pypto.frontend import probes
    from pypto.frontend.symbolic import SymExpr
    from pypto.frontend.tensor import Tensor

    if not isinstance(tensor, Tensor):
        raise UserTypeError(f"pypto.pass_verify_save: tensor must be a pypto.Tensor, found {type(tensor).__name__}")
    if not isinstance(fname, str) or not fname:
        raise UserTypeError(f"pypto.pass_verify_save: fname must be a non-empty str, found {fname!r}")
    if "/" in fname or os.sep in fname:
        raise UserError(f"pypto.pass_verify_save: fname {fname!r} must be a file name, not a path (the folder is "
                        "the verify option pass_verify_save_tensor_dir)")
    for k, v in kwargs.items():
        if isinstance(v, bool) or not isinstance(v, (int, SymExpr)):
            raise UserTypeError(f"pypto.pass_verify_save: keyword argument {k} must be an int or a symbolic scalar, "
                                f"found {v!r}")
    names = list(kwargs)
    template = []
    pos = 0
    for m in re.finditer(r"\$([A-Za-z0-9_]+)", fname):
        if m.group(1) not in kwargs:
            raise UserError(f"pypto.pass_verify_save: fname {fname!r} names ${m.group(1)}, which no keyword argument "
                            "gives")
        template.append(fname[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        template.append("{%d}" % names.index(m.group(1)))
        pos = m.end()
    template.append(fname[pos:].replace("{", "{{").replace("}", "}}"))
    ctx = _verify_values("pass_verify_save", (tensor,), cond)
    if ctx is None:
        return
    probes.record(ctx, "save", "pass_verify_save", ["".join(template)], [tensor], [kwargs[n] for n in names], cond)
