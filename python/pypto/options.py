"""Source compatibility with PyPTO's options: ``RunMode``, ``pypto.options``."""

from __future__ import annotations

from typing import Any

from pypto.frontend import config
from pypto.frontend.config import RunMode  # noqa: F401 - re-exported as pypto.RunMode


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
