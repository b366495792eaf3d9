"""Binding a jitted function's arguments to its annotations: the signature (annotations
evaluated once), the bound call (arrays, dims, constants) and the specialisation key."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from pypto import memory
from pypto._dtypes import DataType, dtype_name
from pypto.errors import NotSupportedError, UserError, UserTypeError
from pypto.frontend import config
from pypto.frontend.symbolic import SymExpr
from pypto.frontend.tensor import DYNAMIC, Tensor


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
    if isinstance(v, tuple):
        return ("tuple", tuple(_const_key(name, fname, x) for x in v))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return ("dataclass", type(v).__qualname__,
                tuple((f.name, _const_key(name, fname, getattr(v, f.name))) for f in dataclasses.fields(v)))
    raise UserTypeError(
        f"{fname}(): parameter '{name}' is a compile-time constant and must be an int, float, bool, str, tuple, "
        f"pypto.DataType or a dataclass of those; found {type(v).__name__}")


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


class _Signature:
    """The parameters and return annotations of a jitted function."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.name = fn.__name__
        self.sig = _evaluated_signature(fn)
        self.params: list[tuple[str, Tensor | None, bool]] = []  # (name, annotation, is_tensor_annotation)
        for p in self.sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise NotSupportedError(f"@pypto.frontend.jit function '{self.name}': *args/**kwargs parameters are not supported yet")
            ann = p.annotation
            if ann is inspect.Parameter.empty:
                self.params.append((p.name, None, False))
            elif isinstance(ann, type) and issubclass(ann, Tensor):
                self.params.append((p.name, Tensor(), True))
            elif isinstance(ann, Tensor):
                self.params.append((p.name, ann, True))
            else:
                self.params.append((p.name, None, False))  # int, float, a dataclass type, ...: a constant
        ret = self.sig.return_annotation
        if isinstance(ret, type) and issubclass(ret, Tensor):
            ret = Tensor()
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
            return self._bind(args, kwargs)
        except (UserError, UserTypeError, NotSupportedError) as e:
            file, line = config.user_location()
            if file and f"{file}:{line}" not in str(e):
                raise type(e)(f"{e} (called at {file}:{line})") from None
            raise

    def _bind(self, args: tuple, kwargs: dict) -> "_Bound":
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError as e:
            expected = ", ".join(n for n, _, _ in self.params)
            raise UserTypeError(
                f"{self.name}() takes ({expected}); called with {len(args)} positional and "
                f"{len(kwargs)} keyword argument(s): {e}") from None
        bound.apply_defaults()
        out = _Bound()
        for name, ann, is_tensor_ann in self.params:
            x = bound.arguments[name]
            if not is_tensor_ann and not memory.is_array(x):
                out.consts.append((name, x, _const_key(name, self.name, x)))
                out.order.append(("const", len(out.consts) - 1))
                continue
            if not memory.is_array(x):
                raise UserTypeError(
                    f"{self.name}(): parameter '{name}' expects a tensor (torch.Tensor or numpy.ndarray), "
                    f"found {memory.kind_name(x)}")
            dt = memory.dtype_of(x)
            if dt is None:
                raise UserTypeError(f"{self.name}(): parameter '{name}' has dtype {memory.dtype_text(x)}, which pypto does not support")
            shape = memory.shape_of(x)
            if ann is not None and ann.dtype is not None and dt != ann.dtype:
                raise UserTypeError(
                    f"{self.name}(): parameter '{name}' expects dtype {dtype_name(ann.dtype)}, "
                    f"found {dtype_name(dt)} ({memory.dtype_text(x)})")
            if len(shape) == 0:
                raise NotSupportedError(f"{self.name}(): parameter '{name}' is a 0-d tensor; not supported yet")
            if any(d == 0 for d in shape):
                raise NotSupportedError(f"{self.name}(): parameter '{name}' has a zero-size dim {_shape_text(shape)}; not supported yet")
            dims = self._bind_dims(name, ann, shape, out)
            out.tensors.append((name, x, dims, dt))
            out.order.append(("tensor", len(out.tensors) - 1))
        return out

    def _bind_dims(self, name, ann, shape, out: "_Bound") -> list:
        """Per dim: an int (static) or the name of a dynamic dim."""
        if ann is None or ann.shape is None:
            return list(shape)
        spec = list(ann.shape)
        ellipsis = bool(spec) and spec[-1] is Ellipsis
        if ellipsis:
            spec = spec[:-1]
        if (len(shape) != len(spec)) if not ellipsis else (len(shape) < len(spec)):
            raise UserError(f"{self.name}(): parameter '{name}' expects shape {_ann_text(ann.shape)}, found {_shape_text(shape)}")
        dims: list = []
        for i, size in enumerate(shape):
            want = spec[i] if i < len(spec) else size
            if isinstance(want, int):
                if want != size:
                    raise UserError(f"{self.name}(): parameter '{name}' expects shape {_ann_text(ann.shape)}, "
                                    f"found {_shape_text(shape)}")
                dims.append(size)
                continue
            dname = f"{name}_{i}" if want is DYNAMIC else str(want)
            prev = out.dyn.get(dname)
            if prev is not None and prev[0] != size:
                raise UserError(
                    f"{self.name}(): dynamic dim '{dname}' is {prev[0]} in parameter '{prev[1]}' but {size} in "
                    f"parameter '{name}' (dim {i})")
            out.dyn.setdefault(dname, (size, name))
            dims.append(dname)
        return dims


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
