"""Source compatibility with PyPTO's options: ``RunMode``, ``pypto.options``."""

from __future__ import annotations

import enum
from typing import Any

from pypto.errors import UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.config import RunMode  # noqa: F401 - re-exported as pypto.RunMode


class CompStage(enum.Enum):
    """PyPTO's values of the host option ``compile_stage`` (how far NPU compilation goes); stored as
    their int values, as PyPTO stores them."""

    ALL_COMPLETE = 0
    TENSOR_GRAPH = 1
    TILE_GRAPH = 2
    EXECUTE_GRAPH = 3
    CODEGEN_INSTRUCTION = 4
    CODEGEN_BINARY = 5


class options:  # noqa: N801 - PyPTO's name
    """Options for the code it wraps, as a context manager
    (``with pypto.options(sram_budget_kb=128): ...``) or a decorator
    (``@pypto.options(fusion=False)`` above or below ``@pypto.frontend.jit``).
    Pass options pypto uses apply; others are recorded with one warning."""

    def __init__(self, **opts: Any):
        from pypto.frontend.jit import apply_option_sections

        sections = {k: opts.pop(k) for k in list(opts) if k.endswith("_options") and k != "pass_options"}
        passes = dict(opts.pop("pass_options", {}) or {})
        passes.update(opts)
        if "run_mode" in passes:
            config.record_run_mode("options", passes.pop("run_mode"))
        self._pass = config.normalize_pass_options(apply_option_sections(passes, sections))

    def __enter__(self):
        config._context_options.append(self._pass)
        config.bump_version()
        return self

    def __exit__(self, *exc):
        config._context_options.pop()
        config.bump_version()
        return False

    def __call__(self, fn):
        from pypto.frontend.jit import JitFunction

        if isinstance(fn, JitFunction):
            fn._pass_options = {**fn._pass_options, **self._pass}
            config.bump_version()
            fn._cache.clear()
            return fn
        attached = dict(getattr(fn, "__pypto_options__", {}))
        attached["pass_options"] = {**attached.get("pass_options", {}), **self._pass}
        fn.__pypto_options__ = attached
        return fn


def _set_section(section: str, fn: str, opts: dict[str, Any]) -> None:
    """Checks, stores and applies the options of one section (PyPTO's ``set_<section>_options``)."""
    from pypto.frontend import option_table

    for key in opts:
        option_table.check_key(section, key, f"pypto.{fn}")
    opts = {k: v.value if isinstance(v, CompStage) else v for k, v in opts.items()}
    acting: dict[str, Any] = {}
    for key, value in opts.items():
        if value is None:
            continue
        if section == "verify" and key == "enable_pass_verify":
            if not isinstance(value, bool):
                raise UserTypeError(f"pypto.{fn}: enable_pass_verify must be a bool, found {value!r}")
            acting["verify"] = value
        elif section == "verify" and key == "pass_verify_error_tol":
            if not isinstance(value, (list, tuple)) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                           for v in value):
                raise UserTypeError(f"pypto.{fn}: pass_verify_error_tol must be a list [rtol, atol] of numbers, "
                                    f"found {value!r}")
        elif section == "verify" and key == "pass_verify_save_tensor_dir":
            if not isinstance(value, str):
                raise UserTypeError(f"pypto.{fn}: pass_verify_save_tensor_dir must be a str, found {value!r}")
        elif section == "debug" and key in ("compile_debug_mode", "dump_pass_graph"):
            acting[f"debug.{key}"] = value
        elif section == "runtime" and key == "run_mode":
            config.record_run_mode(f"{section}_options", value)
        else:
            config.record_ignored(f"{section}_options", key, value)
        option_table.store(section, key, value)
    if acting:
        config._global_pass_options.update(config.normalize_pass_options(acting))
        config.bump_version()


def _get_section(section: str) -> dict[str, Any]:
    from pypto.frontend import option_table

    return option_table.section(section)


def get_pass_options() -> dict[str, Any]:
    """The pass options in force: PyPTO's keys with their values, and pypto's own that were set."""
    return _get_section("pass")


def _section_functions(section: str, doc: str):
    """PyPTO's ``set_<section>_options(**opts)`` and ``get_<section>_options()``."""
    def setter(**opts: Any) -> None:
        _set_section(section, f"set_{section}_options", opts)

    def getter() -> dict[str, Any]:
        return _get_section(section)

    setter.__name__ = setter.__qualname__ = f"set_{section}_options"
    getter.__name__ = getter.__qualname__ = f"get_{section}_options"
    setter.__doc__ = doc
    getter.__doc__ = f"The {section} options: what set_{section}_options stored, PyPTO's defaults for the rest."
    return setter, getter


set_host_options, get_host_options = _section_functions(
    "host", "PyPTO's host options (``compile_stage``, ``compile_monitor_enable``, ``compile_timeout``, ...): stored "
            "and returned by ``get_host_options``; they steer NPU compilation and change nothing here.")
set_codegen_options, get_codegen_options = _section_functions(
    "codegen", "PyPTO's codegen options (``support_dynamic_aligned``, ``soc_version``, ...): stored.")
set_verify_options, get_verify_options = _section_functions(
    "verify", "PyPTO's verify options: ``enable_pass_verify`` runs the IR verifier after every pass of functions "
              "compiled afterwards, compares golden data (``pypto.set_verify_golden_data``) and makes "
              "``pypto.pass_verify_print``/``pass_verify_save`` act; the others are "
              "stored (``pass_verify_error_tol`` is the golden comparison's [rtol, atol]; "
              "``pass_verify_save_tensor_dir`` is where ``pypto.pass_verify_save`` writes).")
set_debug_options, get_debug_options = _section_functions(
    "debug", "PyPTO's debug options: ``compile_debug_mode=1`` writes every pass's graph of each function compiled "
             "afterwards to ``./output/<function>_<pid>_<time>/pass_graphs/``, ``dump_pass_graph=[...]`` the named "
             "passes' graphs; ``runtime_debug_mode`` is stored.")
set_runtime_options, get_runtime_options = _section_functions(
    "runtime", "PyPTO's runtime options (``run_mode``, ``stitch_function_max_num``, ...): checked and stored.")
set_operation_options, get_operation_options = _section_functions(
    "operation", "PyPTO's operation options (``combine_axis``): stored.")


def set_options(codegen_options=None, host_options=None, pass_options=None, runtime_options=None,
                verify_options=None, debug_options=None, operation_options=None, vec_tile_shapes=None,
                cube_tile_shapes=None, conv_tile_shapes=None, matrix_size=None) -> None:
    """Several sections at once, as PyPTO's ``set_options``."""
    sections = {"codegen": codegen_options, "host": host_options, "runtime": runtime_options,
                "verify": verify_options, "debug": debug_options, "operation": operation_options}
    for name, opts in sections.items():
        if opts is not None:
            if not isinstance(opts, dict):
                raise UserTypeError(f"pypto.set_options: {name}_options must be a dict, found "
                                           f"{type(opts).__name__}")
            _set_section(name, "set_options", opts)
    if pass_options is not None:
        config.set_pass_options(**pass_options)
    if vec_tile_shapes is not None:
        config.set_vec_tile_shapes(*vec_tile_shapes)
    if cube_tile_shapes is not None:
        if isinstance(cube_tile_shapes, config.CubeTile):
            config.set_cube_tile_shapes(cube_tile_shapes)
        else:
            config.set_cube_tile_shapes(*cube_tile_shapes)
    if conv_tile_shapes is not None:
        from pypto import convolution

        tile = conv_tile_shapes if isinstance(conv_tile_shapes, convolution.ConvTile) \
            else convolution.ConvTile(*conv_tile_shapes)
        convolution.set_conv_tile_shapes(tile.tile_l1_info, tile.tile_l0_info if tile.set_l0_tile else None)
    if matrix_size is not None:
        config.set_matrix_size(matrix_size)


def reset_options() -> None:
    """Every option back to its default (pass options, the other sections, global configuration);
    options without effect here warn again when set again."""
    from pypto.frontend import option_table

    from pypto import pass_config

    option_table.reset()
    pass_config.reset()
    config._global_pass_options.clear()
    config._warned.clear()  # an option set again after a reset warns again
    config.bump_version()


def set_print_options(*, edgeitems: int = 3, precision: int = 4, threshold: int = 1000, linewidth: int = 80) -> None:
    """PyPTO's tensor print options: stored as the global ``tensor_print.*`` configuration."""
    from pypto.frontend import option_table

    for key, value in (("edgeitems", edgeitems), ("precision", precision), ("threshold", threshold),
                       ("linewidth", linewidth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserError(f"pypto.set_print_options: {key} must be a non-negative int, found {value!r}")
        option_table.set_global(f"tensor_print.{key}", value)


def set_global_config(key: str, value: Any) -> None:
    """Sets one global configuration entry (``"tensor_print.precision"``, ``"platform.enable_cost_model"``,
    ...); unknown keys raise."""
    from pypto.frontend import option_table

    option_table.set_global(key, value)


def get_global_config(key: str) -> Any:
    from pypto.frontend import option_table

    return option_table.get_global(key)


def get_options_tree() -> str:
    """Every option with its value, as an indented tree of sections."""
    from pypto.frontend import option_table

    return option_table.tree()


class ConfigScope:
    """PyPTO's snapshot of the options in force (``pypto.get_current_scope()``): every section's
    options as ``"<section>.<key>"``, the global configuration as ``"global.<key>"``, and the tile
    shapes and matrix size set outside a kernel (the current kernel's, while tracing). Later option
    changes do not alter a snapshot."""

    def __init__(self, options: dict[str, Any] | None = None):
        self._options = dict(options or {})

    def __repr__(self) -> str:
        return "\n".join(f"{k}: {v}" for k, v in sorted(self._options.items(), key=lambda kv: kv[0]))

    def get_options_prefix(self, key: str) -> Any:
        """The value of one dotted key; a key not in the scope raises KeyError naming it."""
        if key not in self._options:
            raise KeyError(f"pypto.ConfigScope: option not found: {key!r}")
        return self._options[key]

    def get_options(self, prefix: str) -> dict[str, Any]:
        """The options under ``prefix`` (a section name such as ``"pass"``), without the prefix."""
        p = f"{prefix}."
        return {k[len(p):]: v for k, v in self._options.items() if k.startswith(p)}

    def get_pass_options(self): return self.get_options("pass")
    def get_codegen_options(self): return self.get_options("codegen")
    def get_host_options(self): return self.get_options("host")
    def get_debug_options(self): return self.get_options("debug")
    def get_verify_options(self): return self.get_options("verify")
    def get_operation_options(self): return self.get_options("operation")
    def get_runtime_options(self): return self.get_options("runtime")
    def get_vec_tile_shapes(self): return self._options.get("vec_tile_shapes")
    def get_cube_tile_shapes(self): return self._options.get("cube_tile_shapes")
    def get_conv_tile_shapes(self): return self._options.get("conv_tile_shapes")
    def get_matrix_size(self): return self._options.get("matrix_size")
    def get_all(self) -> dict[str, Any]: return dict(self._options)
    def has(self, key: str) -> bool: return key in self._options


def get_current_scope() -> ConfigScope:
    """A ConfigScope holding the options in force here."""
    from pypto.frontend import option_table

    snap: dict[str, Any] = {}
    for sec in option_table.DEFAULTS:
        for k, v in option_table.section(sec).items():
            snap[f"{sec}.{k}"] = v
    for k in option_table.GLOBAL_DEFAULTS:
        snap[f"global.{k}"] = option_table.get_global(k)
    vec = config.get_vec_tile_shapes()
    if vec is not None:
        snap["vec_tile_shapes"] = list(vec)
    cube = config.get_cube_tile_shapes()
    if cube is not None:
        snap["cube_tile_shapes"] = cube
    if config.matrix_size() is not None:
        snap["matrix_size"] = config.matrix_size()
    return ConfigScope(snap)


def set_semantic_label(label: str) -> None:
    """PyPTO's label for the ops traced after it (it groups them when PyPTO partitions a graph for the
    NPU). Checked as PyPTO checks it, recorded, and warned about once: the CPU backend partitions by
    its own fusion rules."""
    import re

    if not isinstance(label, str):
        raise UserTypeError(f"pypto.set_semantic_label: label must be a str, found {type(label).__name__} {label!r}")
    if re.fullmatch(r"func\d+_\d+", label):
        raise UserError(f"pypto.set_semantic_label: label {label!r} has the form of a function order name "
                        "('func<n>_<m>'); use another label")
    config.record_ignored("operation", "semantic_label", label)
