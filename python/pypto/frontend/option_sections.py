"""PyPTO's option sections of ``@pypto.frontend.jit`` (``runtime_options``, ``codegen_options``,
...): which keys act here, as pass options, and which are recorded and warned about."""

from __future__ import annotations

from pypto.errors import UserTypeError
from pypto.frontend import config, option_table


_OPTION_SECTIONS = ("runtime_options", "codegen_options", "host_options", "debug_options", "verify_options",
                    "operation_options")


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
            option_table.check_key(section[:-len("_options")], key, f"pypto.jit {section}")
            if section == "verify_options" and key == "enable_pass_verify":
                out["verify"] = bool(value)
            elif section == "runtime_options" and key == "run_mode":
                config.record_run_mode(section, value)
            elif section == "debug_options" and key in ("compile_debug_mode", "dump_pass_graph"):
                out[f"debug.{key}"] = value  # acts: pass graphs written at compile time (see jit)
            else:
                config.record_ignored(section, key, value)
    return out
