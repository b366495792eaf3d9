"""pypto's exceptions. Each is also a subclass of the matching builtin
(ValueError, TypeError, RuntimeError, NotImplementedError), so ordinary
``except ValueError`` code keeps working."""

from pypto import _C

#: Raised for bad values from the user (shapes, dims, arguments).
UserError = _C.UserError
#: Raised for values of the wrong type or dtype.
UserTypeError = _C.UserTypeError
#: A graph broke an invariant of its level (a compiler bug or a bad hand-built graph).
VerifyError = _C.VerifyError
#: The host compiler or the loader failed.
CompileError = _C.CompileError
#: A feature pypto does not implement yet.
NotSupportedError = _C.NotSupportedError
#: A broken internal assumption.
InternalError = _C.InternalError
#: A task of the runtime failed.
TaskError = _C.TaskError
#: Malformed .pto text (a SyntaxError); ``line`` and ``column`` give the position, from 1.
PtoSyntaxError = _C.PtoSyntaxError


class TracingError(RuntimeError):
    """A pypto op (or pypto.loop) used outside a function decorated with ``@pypto.frontend.jit``:
    ops only trace inside one."""


class FeError(Exception):
    """PyPTO's frontend error, for code that raises its own: ``raise pypto.FeError(ValueError("..."))``
    or ``pypto.FeError("text")``. The message starts with the wrapped exception's type
    (``ValueError: ...``), and ``error`` holds the wrapped exception (None for a text)."""

    def __init__(self, msg: "str | BaseException" = ""):
        if isinstance(msg, BaseException):
            self.error: BaseException | None = msg
            text = f"{type(msg).__name__}: {msg}"
        elif isinstance(msg, str):
            self.error = None
            text = msg
        else:
            raise UserTypeError(f"pypto.FeError: msg must be a str or an exception, found {type(msg).__name__}")
        super().__init__(text)


PyptoError = (UserError, UserTypeError, VerifyError, CompileError, NotSupportedError, InternalError, TaskError,
              PtoSyntaxError, TracingError, FeError)
