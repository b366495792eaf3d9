"""PyPTO's per-pass configuration (``pypto.set_pass_config`` and friends). Pass names are
pypto's (``pypto._C.pass_names()``); ``KEY_DUMP_GRAPH`` acts: the graph after each pass it is
set for is written when a function is compiled (as the debug option ``dump_pass_graph``)."""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass

from pypto import _C
from pypto.errors import UserError, UserTypeError
from pypto.frontend import config

__all__ = ["PassConfigKey", "PassConfigs", "get_pass_config", "get_pass_configs", "get_pass_default_config",
           "set_pass_config", "set_pass_default_config"]


class PassConfigKey(enum.Enum):
    KEY_DUMP_GRAPH = "dump_graph"


@dataclass(frozen=True)
class PassConfigs:
    """The configuration of one pass (read-only), with PyPTO's attribute names."""

    printGraph: bool = False  # noqa: N815 - PyPTO's names
    dumpGraph: bool = False  # noqa: N815
    dumpPassTimeCost: bool = True  # noqa: N815
    preCheck: bool = False  # noqa: N815
    postCheck: bool = False  # noqa: N815
    disablePass: bool = False  # noqa: N815
    healthCheck: bool = False  # noqa: N815


_defaults: dict[PassConfigKey, bool] = {}
_configs: dict[tuple[str, str, PassConfigKey], bool] = {}


def _check(fn: str, key, value, what: str = "value") -> None:
    if not isinstance(key, PassConfigKey):
        raise UserError(f"pypto.{fn}: key must be a member of pypto.PassConfigKey, found {key!r}")
    if not isinstance(value, bool):
        raise UserTypeError(f"pypto.{fn}: {what} must be a bool, found {type(value).__name__} {value!r}")


def _apply() -> None:
    """Folds the dump-graph settings into the options compilations read."""
    names = tuple(sorted({ident for (_, ident, key), v in _configs.items() if key is PassConfigKey.KEY_DUMP_GRAPH and v}))
    config._global_pass_options["debug.dump_graph_passes"] = names
    config._global_pass_options["debug.dump_graph_default"] = _defaults.get(PassConfigKey.KEY_DUMP_GRAPH, False)
    config.bump_version()


def get_pass_default_config(key: PassConfigKey, default_value: bool) -> bool:
    _check("get_pass_default_config", key, default_value, "default_value")
    return _defaults.get(key, default_value)


def set_pass_default_config(key: PassConfigKey, value: bool) -> None:
    """The value of ``key`` for every pass without its own setting."""
    _check("set_pass_default_config", key, value)
    _defaults[key] = value
    _apply()


def get_pass_config(strategy: str, identifier: str, key: PassConfigKey, default_value: bool) -> bool:
    _check("get_pass_config", key, default_value, "default_value")
    return _configs.get((strategy, identifier, key), _defaults.get(key, default_value))


def set_pass_config(strategy: str, identifier: str, key: PassConfigKey, value: bool) -> None:
    """The value of ``key`` for the pass ``identifier`` (``strategy`` is PyPTO's pass strategy name,
    kept as given). A name that is no pass of pypto is stored and warned about."""
    _check("set_pass_config", key, value)
    for what, v in (("strategy", strategy), ("identifier", identifier)):
        if not isinstance(v, str):
            raise UserTypeError(f"pypto.set_pass_config: {what} must be a str, found {v!r}")
    if identifier not in _C.pass_names():
        warnings.warn(f"pypto.set_pass_config: '{identifier}' is not a pass of pypto (passes: "
                      f"{', '.join(_C.pass_names())}); the setting is stored and acts on nothing",
                      config.OptionWarning, stacklevel=2)
    _configs[(strategy, identifier, key)] = value
    _apply()


def get_pass_configs(strategy: str, identifier: str) -> PassConfigs:
    return PassConfigs(dumpGraph=get_pass_config(strategy, identifier, PassConfigKey.KEY_DUMP_GRAPH, False))


def reset() -> None:
    _defaults.clear()
    _configs.clear()
