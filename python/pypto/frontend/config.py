"""Tile configuration, pass options and the per-thread trace context."""

from __future__ import annotations

import enum
import os
import sys
import threading
from typing import Any

from pypto import _C
from pypto.errors import UserError, UserTypeError

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TraceContext:
    """State of one trace: the C++ graph builder and the active tile shapes."""

    def __init__(self, name: str, vec_tile: tuple[int, ...] | None):
        self.builder = _C.GraphBuilder(name)
        self.vec_tile = vec_tile
        # Unpacked 4-bit parameters by root: [carrier, unpacked tensor, written] (shape_ops).
        self.packed_params: dict[int, list] = {}
        self.reshaped_params: set[int] = set()
        self.cube_tile = _global_cube_tile
        self.split_k = _global_split_k
        self.loops: list = []
        # Values that are 0-d for the user (a reduction over every dim): held as shape [1].
        self.zero_d: set[int] = set()
        # Compiled with enable_pass_verify (pypto.pass_verify_print/save act only then), and what
        # those calls recorded: their sites, hidden parameters and trace order (probes.py).
        self.verify = False
        self.probe_sites: list = []
        self.probe_params: list = []
        self.probe_serial = 0


_local = threading.local()
_global_vec_tile: tuple[int, ...] | None = None
# Bumped whenever a process-wide setting that changes compilation changes (tile defaults, pass
# options, `with pypto.options(...)` blocks), so jitted functions can key cached calls on it.
_version = 0


def bump_version() -> None:
    global _version
    _version += 1


def version() -> int:
    return _version

_global_pass_options: dict[str, Any] = {}
_global_cube_tile: tuple | None = None
_global_split_k: bool = False


def current_trace() -> TraceContext | None:
    """The trace running on this thread, if any."""
    return getattr(_local, "trace", None)


def push_trace(ctx: TraceContext | None) -> TraceContext | None:
    prev = current_trace()
    _local.trace = ctx
    return prev


def user_location() -> tuple[str, int]:
    """File and line of the innermost frame outside the pypto package (or, inside a call of a
    function decorated with ``pypto.op_wrapper``, the line that called it)."""
    pinned = getattr(_local, "pinned_location", None)
    if pinned is not None:
        return pinned
    f = sys._getframe(1)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_PKG_DIR + os.sep):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return "", 0


def op_wrapper(func):
    """PyPTO's decorator for functions that define ops out of other ops: errors raised by the ops
    the function traces name the line that called it, not lines inside it. The function receives
    and returns pypto.Tensors unchanged."""
    import functools

    if not callable(func):
        raise UserTypeError(f"pypto.op_wrapper: expected a function, found {type(func).__name__}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if getattr(_local, "pinned_location", None) is not None:  # an outer op_wrapper call pinned it
            return func(*args, **kwargs)
        _local.pinned_location = user_location()
        try:
            return func(*args, **kwargs)
        finally:
            _local.pinned_location = None

    return wrapper


def _check_dims(fn: str, dims: tuple) -> tuple[int, ...]:
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    if not dims:
        raise UserError(f"pypto.{fn}: expected at least one tile dim, found none")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise UserTypeError(f"pypto.{fn}: tile dims must be int, found {type(d).__name__} {d!r}")
        if d <= 0:
            raise UserError(f"pypto.{fn}: tile dims must be positive, found {d}")
    return tuple(dims)


def set_vec_tile_shapes(*dims: int) -> None:
    """Sets the vec tile shape used by the vector ops traced after this call.

    Inside a jitted function it applies to the ops that follow it in that
    function; outside, it sets the default for functions traced later.
    """
    global _global_vec_tile
    shape = _check_dims("set_vec_tile_shapes", dims)
    ctx = current_trace()
    if ctx is not None:
        ctx.vec_tile = shape
    else:
        _global_vec_tile = shape
        bump_version()


def get_vec_tile_shapes() -> tuple[int, ...] | None:
    """The vec tile shape in effect here (None when unset)."""
    ctx = current_trace()
    return ctx.vec_tile if ctx is not None else _global_vec_tile


def _cube_level(name: str, v) -> tuple[int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v, v]
    if not isinstance(v, (list, tuple)) or len(v) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise UserTypeError(f"pypto.set_cube_tile_shapes: {name} must be [L0, L1] (two ints), found {v!r}")
    if any(x <= 0 for x in v):
        raise UserError(f"pypto.set_cube_tile_shapes: {name} sizes must be positive, found {list(v)}")
    return (int(v[0]), int(v[1]))


class CubeTile:
    """PyPTO's matmul tile description: ``CubeTile(m, k, n, enable_split_k=False)``, each of m, k, n
    ``[L0, L1]`` (k may have a third entry, which PyPTO uses for its own buffers). Accepted by
    ``set_cube_tile_shapes`` and ``set_options(cube_tile_shapes=...)``."""

    def __init__(self, m, k, n, enable_split_k: bool = False):
        for name, v, sizes in (("m", m, (2,)), ("k", k, (2, 3)), ("n", n, (2,))):
            if not isinstance(v, (list, tuple)) or len(v) not in sizes:
                raise UserError(f"pypto.CubeTile: {name} must be a list of {' or '.join(map(str, sizes))} ints, "
                                f"found {v!r}")
        self.m, self.k, self.n = list(m), list(k)[:2], list(n)
        self.enable_split_k = enable_split_k

    def __repr__(self) -> str:
        return f"pypto.CubeTile(m={self.m}, k={self.k}, n={self.n}, enable_split_k={self.enable_split_k})"


def set_cube_tile_shapes(m=None, k=None, n=None, enable_split_k: bool = False) -> None:
    """Sets the matmul tile shape: each of m, k, n is [L0, L1] (the L1 tile
    walks global memory, the L0 tile sizes the register micro-kernel).
    ``enable_split_k`` (PyPTO's: accumulate partial products over k in global
    memory) is kept for ``get_cube_tile_shapes``; the CPU backend computes each
    output tile's whole k range in one task, so it warns once and has no effect."""
    global _global_cube_tile, _global_split_k
    if isinstance(m, CubeTile):
        m, k, n, enable_split_k = m.m, m.k, m.n, m.enable_split_k
    if m is None or k is None or n is None:
        raise UserError("pypto.set_cube_tile_shapes: m, k and n are all required, each as [L0, L1]")
    if not isinstance(enable_split_k, bool):
        raise UserTypeError(f"pypto.set_cube_tile_shapes: enable_split_k must be a bool, found "
                            f"{type(enable_split_k).__name__} {enable_split_k!r}")
    shape = (_cube_level("m", m), _cube_level("k", k), _cube_level("n", n))
    if enable_split_k:
        record_ignored("cube_tile_shapes", "enable_split_k", True)
    ctx = current_trace()
    if ctx is not None:
        ctx.cube_tile = shape
        ctx.split_k = enable_split_k
    else:
        _global_cube_tile = shape
        _global_split_k = enable_split_k
        bump_version()


def get_cube_tile_shapes():
    """The cube tile shape in effect here, as PyPTO returns it:
    ``([m0, m1], [k0, k1], [n0, n1], enable_split_k)``, or None when none is set."""
    ctx = current_trace()
    shape = ctx.cube_tile if ctx is not None else _global_cube_tile
    split = ctx.split_k if ctx is not None else _global_split_k
    return None if shape is None else (*[list(x) for x in shape], split)


def set_matrix_size(size) -> None:
    """PyPTO's ``set_matrix_size([m, k, n])``: the m, k, n of a matmul whose NZ-format operands
    were reshaped. Tensors here are always ND (row-major), where a matmul reads m, k, n from its
    operands' shapes, so the sizes are checked, recorded, and warned about once."""
    if not isinstance(size, (list, tuple)) or len(size) != 3:
        raise UserTypeError(f"pypto.set_matrix_size: size must be a list [m, k, n], found {size!r}")
    from pypto.frontend.symbolic import SymExpr

    for name, v in zip("mkn", size):
        if isinstance(v, bool) or not isinstance(v, (int, SymExpr)):
            raise UserTypeError(f"pypto.set_matrix_size: {name} must be an int or a symbolic scalar, found "
                                f"{type(v).__name__} {v!r}")
        if isinstance(v, int) and v <= 0:
            raise UserError(f"pypto.set_matrix_size: {name} must be positive, found {v}")
    global _matrix_size
    _matrix_size = list(size)
    record_ignored("matmul", "matrix_size", list(size))


_matrix_size: list | None = None


def matrix_size() -> list | None:
    """The sizes the last pypto.set_matrix_size recorded (None when never called)."""
    return None if _matrix_size is None else list(_matrix_size)


def default_cube_tile():
    return _global_cube_tile


def default_vec_tile() -> tuple[int, ...] | None:
    return _global_vec_tile


_PASS_OPTION_KEYS = {"verify", "fusion", "disable_passes", "sram_budget_kb", "matmul_panels"}


class OptionWarning(UserWarning):
    """An option that has no effect on the CPU backend (recorded, ignored)."""


_recorded_options: dict[str, Any] = {}
_warned: set[str] = set()


def record_ignored(section: str, key: str, value: Any) -> None:
    """Keeps an option the CPU backend does not use, warning once per name."""
    import warnings

    name = f"{section}.{key}"
    _recorded_options[name] = value
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"pypto: option '{name}' has no effect on the CPU backend; it is recorded and ignored",
                      OptionWarning, stacklevel=3)


class RunMode(enum.IntEnum):
    """PyPTO's run modes, with upstream's values. Both run on pypto's CPU backend; a function jitted
    with ``runtime_options={"run_mode": RunMode.SIM}`` also writes each call's swimlane (a Chrome
    trace of the real run) where PyPTO's cost model writes its simulated one."""

    NPU = 0
    SIM = 1


def record_run_mode(section: str, value: Any) -> None:
    """Checks a ``run_mode`` option (``RunMode.NPU``, ``RunMode.SIM``, 0 or 1) and records it with the
    ignored options (one warning: both modes run on the CPU backend). None is the default mode."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value not in (RunMode.NPU, RunMode.SIM):
        raise _C.UserError(f"pypto.{section}: run_mode must be pypto.RunMode.NPU or pypto.RunMode.SIM (or 0, 1), "
                           f"found {value!r}")
    if value == RunMode.SIM:
        _recorded_options[f"{section}.run_mode"] = RunMode.SIM  # acts: each call writes a swimlane (see jit)
        return
    record_ignored(section, "run_mode", RunMode(value))


def recorded_options() -> dict[str, Any]:
    """Options accepted for source compatibility that the CPU backend ignores."""
    return dict(_recorded_options)


def normalize_pass_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Validates the pass options pypto uses; others are recorded (one warning each)."""
    from pypto.frontend import option_table

    out: dict[str, Any] = {}
    for key, value in opts.items():
        if key == "debug.compile_debug_mode":
            if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1, 2):
                raise UserError(f"debug option 'compile_debug_mode' must be 0, 1 or 2, found {value!r}")
            out[key] = value
            continue
        if key == "debug.dump_pass_graph":
            if isinstance(value, str) or not isinstance(value, (list, tuple)) or \
                    not all(isinstance(v, str) for v in value):
                raise UserTypeError(f"debug option 'dump_pass_graph' must be a list of pass names, found {value!r}")
            out[key] = tuple(value)
            continue
        option_table.check_key("pass", key, "pass_options")
        if key not in _PASS_OPTION_KEYS:
            record_ignored("pass_options", key, value)
            continue
        if key == "matmul_panels":
            if value is not None and not isinstance(value, bool):
                raise UserTypeError(f"pass option 'matmul_panels' must be bool or None, found {type(value).__name__}")
            out[key] = value
            continue
        if key in ("verify", "fusion"):
            if not isinstance(value, bool):
                raise UserTypeError(f"pass option '{key}' must be bool, found {type(value).__name__}")
            out[key] = value
        elif key == "disable_passes":
            if isinstance(value, str):
                value = [value]
            names = tuple(sorted(str(v) for v in value))
            known = set(_C.pass_names())
            for n in names:
                if n not in known:
                    raise UserError(f"pass option 'disable_passes': unknown pass '{n}' (passes: {', '.join(_C.pass_names())})")
            out[key] = names
        elif key == "sram_budget_kb":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UserError(f"pass option 'sram_budget_kb' must be a positive int, found {value!r}")
            out[key] = value
    return out


def set_pass_options(**opts: Any) -> None:
    """Sets pass options for functions compiled afterwards: pypto's ``verify``, ``fusion``,
    ``disable_passes``, ``sram_budget_kb``, ``matmul_panels`` (None: plan_matmul_panels decides by
    the target's first-level cache; True / False: panels wherever the shapes allow / never), and PyPTO's keys (stored, returned by
    ``pypto.get_pass_options()``, warned about once: they steer NPU graph partitioning)."""
    from pypto.frontend import option_table

    _global_pass_options.update(normalize_pass_options(opts))
    for key, value in opts.items():
        option_table.store("pass", key, value)
    bump_version()


def global_pass_options() -> dict[str, Any]:
    """The process-wide pass options, with the CPU target (part of every cache key)."""
    return {**_global_pass_options, "cpu_target": get_cpu_target()}


def pass_options_in_force() -> dict[str, Any]:
    """The process-wide pass options updated by those of the enclosing ``with pypto.options`` blocks."""
    opts = global_pass_options()
    opts.update(context_pass_options())
    return opts


_cpu_target: str | None = None  # set_cpu_target's choice; None: PYPTO_CPU_TARGET, else native


def _check_target(name: Any, where: str) -> str:
    known = list(_C.cpu_targets())
    if not isinstance(name, str) or name not in known:
        raise UserError(f"{where}: {name!r} is not a CPU target (known: {', '.join(known)})")
    _known_targets.add(name)
    return name


def set_cpu_target(name: str | None) -> None:
    """Chooses what kernels compiled afterwards are built for: ``"native"`` (this CPU, the default),
    ``"x86-64-v2"``, ``"x86-64-v3"`` (AVX2 + FMA), ``"x86-64-v4"`` (AVX-512) or ``"generic"``
    (portable vector code). ``None`` returns to ``PYPTO_CPU_TARGET`` (or native). Any x86 target
    compiles here; running code this CPU cannot execute raises ``NotImplementedError`` before the
    call."""
    global _cpu_target
    _cpu_target = None if name is None else _check_target(name, "pypto.set_cpu_target")
    bump_version()


def get_cpu_target() -> str:
    """The CPU target kernels are compiled for now: set_cpu_target's, else ``PYPTO_CPU_TARGET``'s,
    else ``"native"``."""
    if _cpu_target is not None:
        return _cpu_target
    raw = _environ_data.get(_TARGET_KEY) if _environ_data is not None else os.environ.get("PYPTO_CPU_TARGET")
    if not raw:
        return "native"
    env = os.fsdecode(raw)
    if env not in _known_targets:
        _check_target(env, "PYPTO_CPU_TARGET")
    return env


_known_targets: set[str] = set()
# The process environment as os.environ holds it (bytes keys on POSIX): a cached call reads the
# variable on every call, and this lookup is a tenth of os.environ.get's cost. os.environ keeps
# it current (putenv and this mapping together).
_environ_data = getattr(os.environ, "_data", None) if os.name == "posix" else None
_TARGET_KEY = b"PYPTO_CPU_TARGET"


_context_options: list[dict[str, Any]] = []


def context_pass_options() -> dict[str, Any]:
    """Pass options of the enclosing ``with pypto.options(...)`` blocks."""
    out: dict[str, Any] = {}
    for o in _context_options:
        out.update(o)
    return out


def make_pass_options(opts: dict[str, Any]) -> "_C.PassOptions":
    po = _C.PassOptions()
    if "verify" in opts:
        po.verify = opts["verify"]
    if "fusion" in opts:
        po.fusion = opts["fusion"]
    if "disable_passes" in opts:
        po.disabled = set(opts["disable_passes"])
    if "sram_budget_kb" in opts:
        po.sram_budget_kb = opts["sram_budget_kb"]
    if opts.get("matmul_panels") is not None:
        po.matmul_panels = opts["matmul_panels"]
    po.cpu_target = opts.get("cpu_target") or get_cpu_target()
    return po
