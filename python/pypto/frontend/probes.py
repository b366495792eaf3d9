"""``pypto.pass_verify_print`` and ``pypto.pass_verify_save`` in a kernel compiled with
enable_pass_verify. Each call site becomes hidden parameters of the kernel: per tensor it names, a
buffer with one slot per iteration of the enclosing loops (``[trips..., *shape]``), into which the
kernel assembles the tensor, and a marks table (``[trips..., columns]``, int64) into which it writes,
per iteration, whether the site ran with its condition true, the scalars it names and the valid
extents of its tensors. The call path allocates them zero-filled, and after the run the records
are printed (or saved) in program order. The values are what the generated kernel computed."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto import _dtypes
from pypto.errors import NotSupportedError
from pypto.frontend.symbolic import SymExpr, to_expr


@dataclass
class Site:
    kind: str  # "print" or "save"
    parts: list  # print: ("text", s) | ("tensor", k) | ("scalar", j); save: the file name with "{j}" holes
    n_scalars: int
    ranks: list[int]
    order: list[int]  # trace serials: each enclosing loop's, then the site's (program order)
    params: list[int] = field(default_factory=list)  # hidden parameter indices: tensors..., then marks


@dataclass
class Hidden:
    """A hidden parameter: its shape (ints and symbolic dims of the call) and dtype."""
    shape: list
    dtype: Any


def _serial(ctx, obj=None) -> int:
    """The trace order of a loop (numbered when a site inside it is first traced) or of a new site."""
    s = getattr(obj, "_probe_serial", None)
    if s is None:
        ctx.probe_serial += 1
        s = ctx.probe_serial
        if obj is not None:
            obj._probe_serial = s
    return s


def record(ctx, kind: str, fn: str, parts: list, tensors: list, scalars: list, cond: Any) -> None:
    """Traces one pass_verify_* call: ``parts`` as in ``Site``; ``tensors`` and ``scalars`` the
    values the parts refer to; ``cond`` an int or a symbolic scalar."""
    from pypto import ops, shape_ops
    from pypto.frontend.tensor import Tensor

    loops = list(ctx.loops)
    loop_vars = [str(info.var) for info in loops]
    trips, iters = [], []
    for info in loops:
        trip = (info.stop - info.start + info.step - 1) // info.step if info.step > 0 else \
            (info.start - info.stop - info.step - 1) // (-info.step)
        if isinstance(trip, SymExpr) and any(to_expr(trip).uses(v) for v in loop_vars):
            raise NotSupportedError(f"pypto.{fn}: in a loop whose trip count depends on an enclosing loop's index "
                                    f"('{info.var}' runs {trip} times) it is not supported yet")
        if isinstance(trip, int) and trip <= 0:
            return  # the loop never runs
        trips.append(trip)
        iters.append((info.var - info.start) // info.step)
    for t in tensors:
        if len(trips) + len(t.shape) > 6:
            raise NotSupportedError(f"pypto.{fn}: a rank-{len(t.shape)} tensor inside {len(trips)} loops needs a "
                                    f"rank-{len(trips) + len(t.shape)} record; at most 6 is supported")
    hidden, n = ctx.probe_params, len(ctx.probe_sites)
    site = Site(kind, parts, len(scalars), [len(t.shape) for t in tensors],
                [_serial(ctx, info) for info in loops] + [_serial(ctx)])
    column_values = [cond] + list(scalars)
    for k, t in enumerate(tensors):
        if _dtypes.is_packed(t.dtype):
            raise NotSupportedError(f"pypto.{fn}: a {t.dtype.name} tensor is not supported yet; view it as bytes")
        if kind == "print" and _host_dtype(t.dtype) is None:  # printed as fp32 values
            t = ops.cast(t, _dtypes.DT_FP32)
        shape = trips + list(t.shape)
        pid = ctx.builder.add_param(f"probe{n}_t{k}", [to_expr(d) for d in shape], t.dtype)
        site.params.append(len(hidden))
        hidden.append(Hidden(shape, t.dtype))
        slot = t
        for _ in trips:
            slot = shape_ops.unsqueeze(slot, 0)
        shape_ops.assemble(slot, iters + [0] * len(t.shape), Tensor._traced(ctx, pid))
        column_values += list(t.valid_shape)
    shape = trips + [len(column_values)]
    pid = ctx.builder.add_param(f"probe{n}_marks", [to_expr(d) for d in shape], _dtypes.DT_INT64)
    site.params.append(len(hidden))
    hidden.append(Hidden(shape, _dtypes.DT_INT64))
    marks = Tensor._traced(ctx, pid)
    saved = ctx.vec_tile
    ctx.vec_tile = (1,) * (len(trips) + 1)
    try:
        for j, v in enumerate(column_values):
            v = v if isinstance(v, SymExpr) else int(v)
            shape_ops.assemble(shape_ops.full([1] * (len(trips) + 1), v, _dtypes.DT_INT64), iters + [j], marks)
    finally:
        ctx.vec_tile = saved
    ctx.probe_sites.append(site)


def _host_dtype(dt) -> np.dtype | None:
    try:
        return _dtypes.to_numpy(dt) if _dtypes.carrier(dt) == dt else None
    except TypeError:
        return None


def arrays(compiled, env: dict) -> list[np.ndarray]:
    """Zero-filled hidden parameters for a call with dyn values ``env`` (a dtype NumPy lacks is held
    in unsigned integers of its width, for saving its bytes)."""
    out = []
    for h in compiled._probe_params:
        shape = [d if isinstance(d, int) else int(to_expr(d).eval(env)) for d in h.shape]
        dt = _host_dtype(h.dtype) or np.dtype(f"uint{8 * _dtypes.bytes_of(h.dtype)}")
        out.append(np.zeros(shape, dt))
    return out


def _format(a: np.ndarray) -> str:
    from pypto.frontend import option_table

    g = option_table.get_global
    return np.array2string(a, precision=g("tensor_print.precision"), threshold=g("tensor_print.threshold"),
                           edgeitems=g("tensor_print.edgeitems"), max_line_width=g("tensor_print.linewidth"))


def _save_dir() -> str:
    from pypto.frontend import option_table

    d = option_table.section("verify").get("pass_verify_save_tensor_dir") or ""
    if not d:
        stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        d = os.path.join(os.getcwd(), "output", f"output_{stamp}")
    return os.path.join(d, "tensor")


def report(compiled, hidden: list[np.ndarray]) -> None:
    """Prints or saves the records of a finished call, in program order."""
    records = []
    for site in compiled._probe_sites:
        marks = hidden[site.params[-1]]
        for it in np.ndindex(*marks.shape[:-1]):
            row = marks[it]
            if row[0] == 0:
                continue
            key = tuple(p for pair in zip(site.order, it) for p in pair) + (site.order[-1], -1)
            records.append((key, site, it, row))
    records.sort(key=lambda r: r[0])
    folder = None
    for _, site, it, row in records:
        scalars = [int(v) for v in row[1:1 + site.n_scalars]]
        tensors, col = [], 1 + site.n_scalars
        for k, rank in enumerate(site.ranks):
            valid = [int(v) for v in row[col:col + rank]]
            col += rank
            tensors.append(hidden[site.params[k]][it][tuple(slice(0, v) for v in valid)])
        if site.kind == "print":
            text = []
            for what, v in site.parts:
                text.append(v if what == "text" else _format(tensors[v]) if what == "tensor" else str(scalars[v]))
            print("".join(text), flush=True)
            continue
        folder = folder or _save_dir()
        os.makedirs(folder, exist_ok=True)
        name = site.parts[0].format(*scalars)
        t = np.ascontiguousarray(tensors[0])
        with open(os.path.join(folder, f"{name}.data"), "wb") as f:
            f.write(t.tobytes())
        with open(os.path.join(folder, f"{name}.csv"), "w", encoding="utf-8") as f:
            f.write("dtype,shape\n")
            dt = compiled._probe_params[site.params[0]].dtype
            f.write(f"{dt.name},{' '.join(str(d) for d in t.shape)}\n")
