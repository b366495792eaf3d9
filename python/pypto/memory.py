"""Adapters between the caller's arrays (torch tensors, NumPy arrays) and the
descriptions the runtime reads: data pointer, shape, element strides. torch is
imported only when the caller passes torch tensors."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from pypto import _C, _dtypes
from pypto.errors import UserError, UserTypeError


def is_torch(x: Any) -> bool:
    """True for a torch.Tensor, without importing torch."""
    mod = sys.modules.get("torch")
    return mod is not None and isinstance(x, mod.Tensor)


def is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or is_torch(x)


def kind_name(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return "numpy.ndarray"
    if is_torch(x):
        return "torch.Tensor"
    return type(x).__name__


def shape_of(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def dtype_of(x: Any):
    """The pypto dtype of an array, or None if pypto has none."""
    if isinstance(x, np.ndarray):
        return _dtypes.from_numpy(x.dtype)
    return _dtypes.from_torch(x.dtype)


def dtype_text(x: Any) -> str:
    return str(x.dtype)


def describe(x: Any) -> tuple[Any, tuple]:
    """Returns (array kept alive, (pointer, shape, element strides, element size)).

    Arrays are read in place, strided or not; only a NumPy view whose byte
    strides are not a multiple of its item size is copied.
    """
    if isinstance(x, np.ndarray):
        item = x.itemsize
        if any(s % item for s in x.strides):
            x = np.ascontiguousarray(x)
        root = x
        while isinstance(root.base, np.ndarray):
            root = root.base
        ptr = x.__array_interface__["data"][0]
        buffer = root.__array_interface__["data"][0] if root.size else ptr
        return x, (ptr, list(x.shape), [s // item for s in x.strides], item, buffer)
    return x, torch_spec(x, list(x.shape), x.element_size())


def torch_spec(x: Any, shape: list, item: int) -> tuple:
    """The description of torch tensor `x`, whose shape (as a list) and element size the caller
    knows: (pointer, shape, element strides, element size, storage start)."""
    if not x.is_cpu:
        raise ValueError(f"pypto runs on the CPU; found a torch tensor on device '{x.device}'")
    try:
        ptr = x.data_ptr()
    except RuntimeError:
        raise UserTypeError(f"pypto reads dense (strided) tensors; found a torch tensor with layout {x.layout} "
                            f"(call .to_dense() first)") from None
    if x.is_neg():
        # A lazy negation (z.conj().imag): the memory holds the values with the other sign.
        raise UserError("pypto reads tensors as their memory holds them; found a torch tensor with the negative bit "
                        "set (a lazy view such as z.conj().imag): call .resolve_neg() first")
    # The storage's start (views of one storage share it) without materialising the storage object.
    return (ptr, shape, x.stride(), item, ptr - x.storage_offset() * item)


def check_writable(x: Any, what: str) -> None:
    """Raises ValueError when the program would write `x` but its memory must not be written:
    a read-only NumPy array (writeable=False, a read-only memmap, a view of bytes)."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise UserError(f"{what} is written by the program but the NumPy array is read-only "
                        f"(writeable=False, a read-only memmap or a view of immutable memory); pass a writable array")


def is_contiguous(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return bool(x.flags["C_CONTIGUOUS"])
    return bool(x.is_contiguous())


def contiguous(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    return x.contiguous()


# Outputs from this size on come from the runtime's output cache: 2 MiB-aligned blocks advised into
# transparent huge pages and recycled once the caller drops the output, so a kernel called in a loop
# writes into mapped memory (a fresh 64 MiB array takes 16,384 page faults, or 32 huge-page clears,
# as it is filled, which costs about as much as the kernel).
_CACHED_OUTPUT_BYTES = 4 << 20


def empty_like_kind(like: Any, shape: list[int], dt) -> Any:
    """A new contiguous array of the caller's kind."""
    numel = math.prod(shape)
    if is_torch(like):
        tdt = _dtypes.to_torch(dt)
        return empty_torch(shape, tdt, numel * tdt.itemsize)
    ndt = _dtypes.to_numpy(dt)
    nbytes = numel * np.dtype(ndt).itemsize
    if nbytes < _CACHED_OUTPUT_BYTES:
        return np.empty(shape, dtype=ndt)
    return np.frombuffer(_C.runtime.OutputBlock(nbytes), dtype=ndt, count=numel).reshape(shape)


def empty_torch(shape, tdt, nbytes: int) -> Any:
    """A new contiguous torch tensor of `nbytes` bytes; large ones come from the output cache."""
    torch = sys.modules["torch"]
    if nbytes < _CACHED_OUTPUT_BYTES:
        return torch.empty(shape, dtype=tdt)
    return torch.frombuffer(_C.runtime.OutputBlock(nbytes), dtype=tdt, count=nbytes // tdt.itemsize).view(shape)


def set_output_cache_limit(nbytes: int) -> None:
    """Sets how many bytes of released output blocks pypto keeps for reuse (0 turns recycling off).
    The limit starts from PYPTO_OUTPUT_CACHE_MB (MiB, default 1024)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"pypto.set_output_cache_limit: nbytes must be a non-negative int, found {type(nbytes).__name__}")
    if nbytes < 0:
        raise ValueError(f"pypto.set_output_cache_limit: nbytes must be a non-negative int, found {nbytes}")
    _C.runtime.set_output_cache_limit(nbytes)


def get_output_cache_limit() -> int:
    """The byte limit of the output cache."""
    return int(_C.runtime.output_cache_limit())


def output_cache_info() -> dict:
    """Bytes the output cache holds, its hits and misses so far, and its limit."""
    return dict(_C.runtime.output_cache_stats())


def clear_output_cache() -> None:
    """Frees the output blocks pypto keeps for reuse (outputs still in use are not affected)."""
    _C.runtime.clear_output_cache()
