"""PyPTO's logging functions (``pypto.log_info``, ``pypto.set_log_level``, ``pypto.check``, ...),
over the standard ``logging`` module: messages go to the logger named ``"pypto"``, so the usual
handlers, filters and formats apply."""

from __future__ import annotations

import enum
import logging as _logging
from typing import NoReturn

from pypto.errors import InternalError, NotSupportedError, UserError, UserTypeError

__all__ = ["LogLevel", "check", "get_log_level", "internal_check", "log_debug", "log_error", "log_event",
           "log_fatal", "log_info", "log_warn", "raise_error", "set_log_level"]


class LogLevel(enum.IntEnum):
    """PyPTO's log levels, with its values; a message is logged when its level is at least the
    level set."""

    DEBUG = 0
    INFO = 1
    WARN = 2
    ERROR = 3
    FATAL = 4
    EVENT = 5
    NONE = 6


_EVENT = _logging.CRITICAL + 5
_logging.addLevelName(_EVENT, "EVENT")
_TO_STD = {LogLevel.DEBUG: _logging.DEBUG, LogLevel.INFO: _logging.INFO, LogLevel.WARN: _logging.WARNING,
           LogLevel.ERROR: _logging.ERROR, LogLevel.FATAL: _logging.CRITICAL, LogLevel.EVENT: _EVENT,
           LogLevel.NONE: _EVENT + 1}

logger = _logging.getLogger("pypto")
_level = LogLevel.WARN
logger.setLevel(_TO_STD[_level])


def set_log_level(level: LogLevel) -> None:
    global _level
    if isinstance(level, bool) or not isinstance(level, int) or level not in tuple(LogLevel):
        raise UserError(f"pypto.set_log_level: level must be a pypto.LogLevel, found {level!r}")
    _level = LogLevel(level)
    logger.setLevel(_TO_STD[_level])


def get_log_level() -> LogLevel:
    return _level


def _log(level: LogLevel, message: str) -> None:
    if level >= _level:
        logger.log(_TO_STD[level], message)


def _logger(level: LogLevel):
    def log(message: str) -> None:
        _log(level, message)

    log.__name__ = log.__qualname__ = f"log_{level.name.lower()}"
    log.__doc__ = f"Logs ``message`` at level {level.name}."
    return log


log_debug, log_info, log_warn, log_error, log_fatal, log_event = (
    _logger(lv) for lv in (LogLevel.DEBUG, LogLevel.INFO, LogLevel.WARN, LogLevel.ERROR, LogLevel.FATAL, LogLevel.EVENT))


_ERRORS = {"ValueError": UserError, "TypeError": UserTypeError, "InternalError": InternalError,
           "NotImplementedError": NotSupportedError, "RuntimeError": RuntimeError, "IndexError": IndexError,
           "KeyError": KeyError}


def raise_error(error_type: str, message: str) -> NoReturn:
    """Raises the exception named ``error_type`` (``"ValueError"``, ``"TypeError"``,
    ``"InternalError"``, ...) with ``message``."""
    cls = _ERRORS.get(error_type)
    if cls is None:
        raise UserError(f"pypto.raise_error: unknown error type '{error_type}' (known: {', '.join(_ERRORS)})")
    raise cls(message)


def check(condition: bool, message: str) -> None:
    """Raises ``ValueError(message)`` when ``condition`` does not hold."""
    if not condition:
        raise_error("ValueError", message)


def internal_check(condition: bool, message: str) -> None:
    """Raises ``pypto.InternalError(message)`` when ``condition`` does not hold."""
    if not condition:
        raise_error("InternalError", message)
