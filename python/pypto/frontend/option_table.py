"""PyPTO's option keys, section by section, with their default values, and the store behind
``pypto.set_*_options`` / ``pypto.get_*_options``. Every key PyPTO knows is accepted; an
unknown key is an error. The keys that mean something on a CPU act (listed in ``ACTIVE``);
the others are stored, returned by the getters and warned about once."""

from __future__ import annotations

import copy
from typing import Any

from pypto.errors import UserError

# section -> key -> default (PyPTO's defaults; pypto's own pass keys have None: "not set").
DEFAULTS: dict[str, dict[str, Any]] = {
    "pass": {
        "pg_parallel_lower_bound": 20, "pg_lower_bound": 512,
        "pg_partition_algorithm": "Iso", "mg_copyin_upper_bound": 104857600, "mg_vec_parallel_lb": 48,
        "copyout_resolve_coalescing": 0, "auto_mix_partition": 0, "sg_set_tunevf_mode": 0, "enable_slice": False,
        "sg_set_scope": [-1, 0, 0], "sg_set_ooo_scope": [-1], "ooo_sched_mode": "", "ooo_sort_mode_aic": "",
        "ooo_sort_mode_aiv": "", "cube_l1_reuse_setting": {}, "cube_nbuffer_setting": {-1: 1},
        "vec_nbuffer_setting": {},
        # pypto's own
        "verify": None, "fusion": None, "disable_passes": None, "sram_budget_kb": None, "matmul_panels": None,
    },
    "runtime": {
        "device_sched_mode": 0, "run_mode": 0, "stitch_function_max_num": 128, "max_workspace_kb": 0,
        "valid_shape_optimize": 0, "ready_on_host_tensors": [], "device_sched_parallelism": 1,
        "launch_sched_aicpu_num": 7, "launch_early_mode": 0,
    },
    "host": {
        "compile_stage": 0, "compile_monitor_enable": 1, "compile_timeout": 600, "compile_timeout_stage": 0,
        "compile_monitor_print_interval": 60,
    },
    "codegen": {
        "support_dynamic_aligned": False, "soc_version": "", "enable_pmu_trace": False, "vf_options": "",
        "vf_compiler": True,
    },
    "verify": {
        "enable_pass_verify": False, "pass_verify_save_tensor": False, "pass_verify_save_tensor_dir": "",
        "pass_verify_pass_filter": [], "pass_verify_error_tol": [1e-3, 1e-3],
    },
    "debug": {"compile_debug_mode": 0, "runtime_debug_mode": 0, "dump_pass_graph": []},
    "operation": {"combine_axis": True},
}

# Global configuration (``pypto.set_global_config(key, value)``), keyed by its dotted name.
GLOBAL_DEFAULTS: dict[str, Any] = {
    "platform.enable_cost_model": False, "platform.enable_dyn_cost_model": False,
    "platform.dump_source_location": True, "platform.enable_checker": False,
    "platform.device_platform": "CPU", "platform.enable_prof_func": False,
    "platform.enable_prof_aicore_time": False, "platform.enable_prof_aicore_pmu": False,
    "host.strategy": "PVC2_OOO", "codegen.parallel_compile": 128, "codegen.support_dynamic_aligned": False,
    "codegen.soc_version": "", "codegen.fixed_output_path": False, "codegen.force_overwrite": True,
    "tensor_print.edgeitems": 3, "tensor_print.precision": 4, "tensor_print.threshold": 1000,
    "tensor_print.linewidth": 80, "pass.enable_binary_cache": False, "pass.enable_pass_configs": True,
    "pass.enable_cv_fuse": False, "pass.pass_thread_num": 1, "pass.enable_vf": True,
    "simulation.sim_mode": 0, "simulation.log_level": 3,
}

# (section, key) pairs that act on the CPU backend.
ACTIVE = {
    ("pass", "verify"), ("pass", "fusion"), ("pass", "disable_passes"), ("pass", "sram_budget_kb"),
    ("pass", "matmul_panels"),
    ("runtime", "run_mode"), ("verify", "enable_pass_verify"), ("verify", "pass_verify_error_tol"),
    ("verify", "pass_verify_save_tensor_dir"),
    ("debug", "compile_debug_mode"),
    ("debug", "dump_pass_graph"),
}

# What the setters stored: a copy of the defaults, changed by set_*_options.
_store: dict[str, dict[str, Any]] = copy.deepcopy(DEFAULTS)
_global: dict[str, Any] = dict(GLOBAL_DEFAULTS)


def check_key(section: str, key: str, where: str) -> None:
    """Raises for a key PyPTO does not have in ``section``."""
    if section not in DEFAULTS:
        raise UserError(f"{where}: unknown option section '{section}_options' (sections: "
                        f"{', '.join(s + '_options' for s in DEFAULTS)})")
    if key not in DEFAULTS[section]:
        raise UserError(f"{where}: unknown {section} option '{key}' (known: {', '.join(sorted(DEFAULTS[section]))})")


def store(section: str, key: str, value: Any) -> None:
    _store[section][key] = value


def section(section: str) -> dict[str, Any]:
    """The stored values of a section, pypto's own unset pass keys left out."""
    return {k: copy.deepcopy(v) for k, v in _store[section].items() if v is not None}


def set_global(key: str, value: Any) -> None:
    if key not in GLOBAL_DEFAULTS:
        raise UserError(f"pypto.set_global_config: unknown global option '{key}' "
                        f"(known: {', '.join(sorted(GLOBAL_DEFAULTS))})")
    _global[key] = value


def get_global(key: str) -> Any:
    if key not in GLOBAL_DEFAULTS:
        raise UserError(f"pypto.get_global_config: unknown global option '{key}' "
                        f"(known: {', '.join(sorted(GLOBAL_DEFAULTS))})")
    return copy.deepcopy(_global[key])


def reset() -> None:
    _store.clear()
    _store.update(copy.deepcopy(DEFAULTS))
    _global.clear()
    _global.update(GLOBAL_DEFAULTS)


def tree() -> str:
    """Every option with its current value, as an indented tree."""
    lines = []
    for sec, values in _store.items():
        lines.append(f"{sec}:")
        for k, v in values.items():
            if v is not None:
                lines.append(f"  {k}: {v!r}")
    lines.append("global:")
    groups: dict[str, list[str]] = {}
    for k, v in _global.items():
        g, name = k.split(".", 1)
        groups.setdefault(g, []).append(f"    {name}: {v!r}")
    for g, entries in groups.items():
        lines.append(f"  {g}:")
        lines.extend(entries)
    return "\n".join(lines) + "\n"
