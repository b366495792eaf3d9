"""PyPTO's golden-data verification: ``pypto.set_verify_golden_data(in_out_tensors=None,
goldens=None)`` gives the expected data of a kernel's parameters (``None`` where there is nothing
to compare, such as an input); with ``enable_pass_verify`` on, the next call of a kernel compares
its parameters (and then its returned outputs, in order) after the run with the goldens and warns
with ``pypto.VerifyWarning`` for each that differs beyond ``pass_verify_error_tol``."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np

from pypto import memory
from pypto.errors import UserError, UserTypeError

_state = threading.local()


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
        _state.goldens = checked
    # in_out_tensors names the actual arguments; a jitted call knows its own, so nothing to keep.


def pending() -> bool:
    return getattr(_state, "goldens", None) is not None


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
