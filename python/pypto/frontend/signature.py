"""Binding a jitted function's arguments to its annotations: the signature (annotations
evaluated once), the bound call (arrays, dims, constants) and the specialisation key."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import typing
from typing import Any, Callable

from pypto import _dtypes, memory
from pypto._dtypes import DataType, dtype_name
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.symbolic import SymExpr
from pypto.frontend.tensor import DYNAMIC, STATIC, Tensor


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def dynamic(name: str) -> SymExpr:
    """A named dynamic dim for annotations: every parameter dim that uses it
    must have the same size at a call, and the kernel is compiled once for all
    sizes."""
    if not isinstance(name, str) or not name.isidentifier():
        raise UserError(f"pypto.frontend.dynamic: name must be an identifier, found {name!r}")
    return SymExpr.var(name)


_CONST_TYPES = (int, float, bool, str, type(None), DataType)


def _const_key(name: str, fname: str, v: Any):
    """A hashable key for a compile-time constant argument."""
    if isinstance(v, _CONST_TYPES):
        return (type(v).__name__, v if not isinstance(v, DataType) else int(v))
    if isinstance(v, enum.Enum):
        return ("enum", type(v).__module__, type(v).__qualname__, v.name)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_const_key(name, fname, x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted(((_const_key(name, fname, k), _const_key(name, fname, x)) for k, x in v.items()),
                                     key=repr)))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return ("dataclass", type(v).__qualname__,
                tuple((f.name, _const_key(name, fname, getattr(v, f.name))) for f in dataclasses.fields(v)))
    raise UserTypeError(
        f"{fname}(): parameter '{name}' is a compile-time constant and must be an int, float, bool, str, "
        f"pypto.DataType, an enum member, or a tuple, list, dict or dataclass of those; found {type(v).__name__}")


def _evaluated_signature(fn: Callable) -> inspect.Signature:
    """The signature of `fn` with postponed annotations (``from __future__ import annotations``, or
    quoted ones) evaluated where the function was defined: its module globals and its closure."""
    sig = inspect.signature(fn)
    anns = [p.annotation for p in sig.parameters.values()] + [sig.return_annotation]
    if not any(isinstance(a, str) for a in anns):
        return sig
    namespace = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:  # a closure variable not assigned yet
            pass

    def evaluate(ann, what: str):
        if not isinstance(ann, str):
            return ann
        try:
            return eval(ann, namespace)  # noqa: S307 - the annotation text of the user's own function
        except Exception as e:
            raise UserError(
                f"@pypto.frontend.jit function '{fn.__name__}': cannot evaluate the annotation {ann!r} of {what} "
                f"({type(e).__name__}: {e}); with 'from __future__ import annotations' the names it uses must be "
                f"module globals") from None

    params = [p.replace(annotation=evaluate(p.annotation, f"parameter '{p.name}'")) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=evaluate(sig.return_annotation, "the return value"))


class Param:
    """One parameter of a program as the binder checks it.

    ``kind`` is ``"tensor"`` (an array), ``"scalar"`` (an int given at the call, bound like a
    named dim), ``"const"`` (a compile-time constant) or ``"any"`` (a tensor when given an
    array, else a constant). ``dims`` (tensors; None: any shape) holds per dim an int, the name
    of a dim shared by every parameter that uses it, None (a dim of its own, named
    ``<param>_<i>``) or a ``_C.Expr`` over named dims; a trailing ``...`` takes any further dims."""

    __slots__ = ("name", "kind", "dtype", "dims", "shape_text")

    def __init__(self, name: str, kind: str, dtype=None, dims=None, shape_text: str = ""):
        self.name, self.kind, self.dtype, self.dims = name, kind, dtype, dims
        self.shape_text = shape_text or (_ann_text(["?" if d is None else d for d in dims]) if dims is not None else "")


class Binder:
    """The one argument binder of pypto's programs (jitted functions and ``pypto.pto`` programs):
    arguments to parameters by position or keyword (defaults from ``sig``), arrays checked
    against dtypes and shapes, named dims unified across parameters, dims given by expressions
    checked once every name is known. Errors name the function and the parameter. A tensor
    parameter takes arrays of one of pypto's dtypes with at least one dim."""

    def __init__(self, fname: str, params: list[Param], sig: inspect.Signature | None = None, *,
                 allow_empty: bool = False):
        self.name = fname
        self.allow_empty = allow_empty  # zero-size arrays are accepted (a PTO program's loops may run zero times)
        self.params = params
        self.sig = sig or inspect.Signature(
            [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])

    def bind(self, args: tuple, kwargs: dict) -> "_Bound":
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError as e:
            expected = ", ".join(p.name for p in self.params)
            given = set(list(self.sig.parameters)[:len(args)]) | set(kwargs)
            missing = [n for n, prm in self.sig.parameters.items() if n not in given and prm.default is prm.empty]
            why = f"missing argument(s): {', '.join(missing)}" if "missing" in str(e) and missing else str(e)
            raise UserTypeError(
                f"{self.name}() takes ({expected}); called with {len(args)} positional and "
                f"{len(kwargs)} keyword argument(s): {why}") from None
        bound.apply_defaults()
        out = _Bound()
        checks = []
        for p in self.params:
            x = bound.arguments[p.name]
            data = getattr(x, "_data", None)
            declared = None
            if data is not None:  # a pypto.Tensor made by pypto.from_torch: its torch tensor
                declared, x = x.dtype, data
            if p.kind == "scalar":
                if isinstance(x, bool) or not hasattr(x, "__index__"):
                    raise UserTypeError(f"{self.name}(): scalar '{p.name}' must be an int, found {type(x).__name__}")
                self._unify(p.name, p.name, int(x), out, None)
                continue
            if p.kind == "const" or (p.kind == "any" and not memory.is_array(x)):
                out.consts.append((p.name, x, _const_key(p.name, self.name, x)))
                out.order.append(("const", len(out.consts) - 1))
                continue
            if not memory.is_array(x):
                raise UserTypeError(
                    f"{self.name}(): parameter '{p.name}' expects a tensor (torch.Tensor or numpy.ndarray), "
                    f"found {memory.kind_name(x)}")
            dt = memory.dtype_of(x)
            if dt is None:
                raise UserTypeError(f"{self.name}(): parameter '{p.name}' has dtype {memory.dtype_text(x)}, which pypto "
                                    f"does not support")
            shape = memory.shape_of(x)
            want_dt = declared if declared is not None else p.dtype
            if want_dt is not None and _dtypes.is_packed(want_dt) and dt in _dtypes.packed_carriers(want_dt) and shape:
                # A 4-bit type arrives packed two per byte: the kernel sees twice the last dim.
                dt, shape = want_dt, tuple(shape[:-1]) + (2 * shape[-1],)
            elif declared is not None and _dtypes.carrier(declared) == dt:
                dt = declared  # from_torch(..., dtype=DT_HF8) of a uint8 tensor
            elif p.dtype is not None and dt != p.dtype and _dtypes.carrier(p.dtype) == dt:
                dt = p.dtype  # a carried type (DT_HF8) arrives in its carrier's arrays (uint8)
            if p.dtype is not None and dt != p.dtype:
                raise UserTypeError(
                    f"{self.name}(): parameter '{p.name}' expects dtype {dtype_name(p.dtype)}, "
                    f"found {dtype_name(dt)} ({memory.dtype_text(x)})")
            if len(shape) == 0:
                raise NotSupportedError(f"{self.name}(): parameter '{p.name}' is a 0-d tensor; not supported yet")
            if any(d == 0 for d in shape) and not self.allow_empty:
                raise NotSupportedError(f"{self.name}(): parameter '{p.name}' has a zero-size dim {_shape_text(shape)}; "
                                        f"not supported yet")
            dims = self._bind_dims(p, shape, out, checks)
            out.tensors.append((p.name, x, dims, dt))
            out.order.append(("tensor", len(out.tensors) - 1))
        env = {k: v for k, (v, _) in out.dyn.items()}
        for p, i, want, got, shape in checks:
            try:
                value = want.eval(env)
            except UserError:
                free = [n for n in _names(want) if n not in env]
                raise UserError(f"{self.name}(): dim {i} of parameter '{p.name}' is {want}, which uses "
                                f"'{free[0] if free else want}', which no argument gives") from None
            if value != got:
                raise UserError(f"{self.name}(): parameter '{p.name}' expects shape {p.shape_text}, found "
                                f"{_shape_text(shape)} (dim {i} must be {want} = {value})")
        return out

    def _unify(self, dname: str, pname: str, size: int, out: "_Bound", dim):
        prev = out.dyn.get(dname)
        if prev is not None and prev[0] != size:
            where = f"parameter '{pname}'" + (f" (dim {dim})" if dim is not None else "")
            raise UserError(
                f"{self.name}(): dynamic dim '{dname}' is {prev[0]} in parameter '{prev[1]}' but {size} in {where}")
        out.dyn.setdefault(dname, (size, pname))

    def _bind_dims(self, p: Param, shape, out: "_Bound", checks: list) -> list:
        """Per dim: an int (static or given by an expression) or the name of a dynamic dim."""
        if p.dims is None:
            return list(shape)
        spec = list(p.dims)
        ellipsis = bool(spec) and spec[-1] is Ellipsis
        if ellipsis:
            spec = spec[:-1]
        if (len(shape) != len(spec)) if not ellipsis else (len(shape) < len(spec)):
            raise UserError(f"{self.name}(): parameter '{p.name}' expects shape {p.shape_text}, found {_shape_text(shape)}")
        dims: list = []
        for i, size in enumerate(shape):
            want = spec[i] if i < len(spec) else size
            if want is STATIC:
                want = size  # the call's size, compiled per size
            if isinstance(want, int):
                if want != size:
                    raise UserError(f"{self.name}(): parameter '{p.name}' expects shape {p.shape_text}, "
                                    f"found {_shape_text(shape)}")
                dims.append(size)
            elif want is None or isinstance(want, str):
                dname = f"{p.name}_{i}" if want is None else want
                self._unify(dname, p.name, size, out, i)
                dims.append(dname)
            else:  # an expression over named dims, checked once all are bound
                checks.append((p, i, want, size, shape))
                dims.append(size)
        return dims


def _names(e) -> list[str]:
    import re

    return re.findall(r"[A-Za-z_]\w*", str(e))


class _Signature:
    """The parameters and return annotations of a jitted function."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        self.sig = _evaluated_signature(fn)
        self.params: list[tuple[str, Tensor | None, bool]] = []  # (name, annotation, is_tensor_annotation)
        binder_params = []
        for p in self.sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise NotSupportedError(f"@pypto.frontend.jit function '{self.name}': *args/**kwargs parameters are not supported yet")
            ann = p.annotation
            if isinstance(ann, type) and issubclass(ann, Tensor):
                ann = Tensor()
            if isinstance(ann, Tensor):
                self.params.append((p.name, ann, True))
                dims = None
                if ann.shape is not None:
                    dims = [None if d is DYNAMIC else d if d is STATIC else str(d) if isinstance(d, SymExpr) else d
                            for d in ann.shape]
                binder_params.append(Param(p.name, "tensor", ann.dtype, dims,
                                           _ann_text(ann.shape) if ann.shape is not None else ""))
            else:  # no annotation, int, float, a dataclass type, ...: a constant unless given an array
                self.params.append((p.name, None, False))
                binder_params.append(Param(p.name, "any"))
        self._binder = Binder(self.name, binder_params, self.sig)
        ret = self.sig.return_annotation
        if isinstance(ret, type) and issubclass(ret, Tensor):
            ret = Tensor()
        if typing.get_origin(ret) is tuple:  # tuple[pypto.Tensor(...), ...]
            ret = typing.get_args(ret)
        if ret is inspect.Signature.empty or ret is None:
            self.returns = None
        elif isinstance(ret, Tensor):
            self.returns = (ret,)
        elif isinstance(ret, tuple) and all(isinstance(r, Tensor) for r in ret):
            self.returns = ret
        else:
            self.returns = None

    def bind(self, args: tuple, kwargs: dict) -> "_Bound":
        """Checks the arguments against the annotations; errors name the
        caller's file and line."""
        try:
            return self._binder.bind(args, kwargs)
        except (UserError, UserTypeError, NotSupportedError) as e:
            file, line = config.user_location()
            if file and f"{file}:{line}" not in str(e):
                raise type(e)(f"{e} (called at {file}:{line})") from None
            raise


class _Bound:
    """Arguments of one call: tensors (name, array, dims, dtype), constants, dynamic dims."""

    def __init__(self):
        self.tensors: list = []
        self.consts: list = []
        self.order: list = []
        self.dyn: dict[str, tuple[int, str]] = {}

    def key(self) -> tuple:
        return (tuple((tuple(d if isinstance(d, int) else f"${d}" for d in dims), int(dt))
                      for _, _, dims, dt in self.tensors),
                tuple(k for _, _, k in self.consts))

    def dyn_values(self, names: list[str]) -> list[int]:
        return [self.dyn[n][0] for n in names]


def _shape_matches(ann, shape) -> bool:
    """Does a traced shape fit an annotation (static dims equal, dynamic dims anything)?"""
    ann = list(ann)
    if ann and ann[-1] is Ellipsis:
        ann = ann[:-1]
        if len(shape) < len(ann):
            return False
    elif len(ann) != len(shape):
        return False
    for want, got in zip(ann, shape):
        if isinstance(want, int) and not (isinstance(got, int) and got == want):
            return False
        if isinstance(want, SymExpr) and str(want) != str(got):
            return False
    return True


def _ann_text(shape) -> str:
    return "(" + ", ".join("..." if d is Ellipsis else str(d) for d in shape) + ")"
