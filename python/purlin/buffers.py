"""What the library needs to know of an array: pointer, element count, dtype, device.

NumPy arrays (and CPU torch tensors) are host memory, served by the host
Atom; torch CUDA tensors and CuPy arrays are device memory on one GPU. The
array modules are recognised by their type's module, so none of them is
imported here. Every check that can be made without the library is made
here, before any C call, and fails with InvalidArgument.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

from .dtypes import DataType, from_dtype
from .errors import invalid_argument

KIND_NUMPY = "numpy"
KIND_TORCH = "torch"
KIND_CUPY = "cupy"


@dataclass(frozen=True)
class Buffer:
    """A contiguous array as the C API sees it. device is a CUDA ordinal, or None for host memory."""

    ptr: int
    count: int
    dtype: DataType
    device: Optional[int]
    kind: str
    shape: tuple
    array: Any  # the array itself, kept alive while the library may use the memory

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    def where(self) -> str:
        return "host memory" if self.device is None else f"cuda:{self.device}"


def _module_root(obj: Any) -> str:
    return type(obj).__module__.split(".", 1)[0]


def _numpy(array: Any, name: str, writable: bool) -> Buffer:
    if not array.flags.c_contiguous:
        raise invalid_argument(f"purlin: {name} must be C-contiguous (use numpy.ascontiguousarray)")
    if writable and not array.flags.writeable:
        raise invalid_argument(f"purlin: {name} is read-only but receives data")
    return Buffer(array.ctypes.data, int(array.size), from_dtype(array.dtype), None, KIND_NUMPY,
                  tuple(array.shape), array)


def _torch(tensor: Any, name: str) -> Buffer:
    if not tensor.is_contiguous():
        raise invalid_argument(f"purlin: {name} must be contiguous (use tensor.contiguous())")
    if tensor.device.type == "cuda":
        device: Optional[int] = tensor.device.index
    elif tensor.device.type == "cpu":
        device = None
    else:
        raise invalid_argument(f"purlin: {name} is on {tensor.device}; only cuda and cpu tensors work")
    return Buffer(int(tensor.data_ptr()), int(tensor.numel()), from_dtype(tensor.dtype), device,
                  KIND_TORCH, tuple(tensor.shape), tensor)


def _cupy(array: Any, name: str) -> Buffer:
    if not array.flags.c_contiguous:
        raise invalid_argument(f"purlin: {name} must be C-contiguous (use cupy.ascontiguousarray)")
    return Buffer(int(array.data.ptr), int(array.size), from_dtype(array.dtype), int(array.device.id),
                  KIND_CUPY, tuple(array.shape), array)


def describe(array: Any, name: str, writable: bool = False) -> Buffer:
    """The Buffer of array; name ("send", "recv") is used in error messages."""
    root = _module_root(array)
    if root == "numpy" and hasattr(array, "ctypes"):
        return _numpy(array, name, writable)
    if root == "torch" and hasattr(array, "data_ptr"):
        return _torch(array, name)
    if root == "cupy" and hasattr(array, "data"):
        return _cupy(array, name)
    raise invalid_argument(
        f"purlin: {name} must be a numpy.ndarray, torch.Tensor or cupy.ndarray, not {type(array).__name__}")


def empty_like(buf: Buffer) -> Any:
    """A new uninitialised array like buf's: same kind, shape, dtype and device (numpy, torch
    or cupy.empty_like; that module is loaded already, buf's array being one of its)."""
    module = sys.modules[_module_root(buf.array)]
    if buf.kind == KIND_CUPY:
        with buf.array.device:
            return module.empty_like(buf.array)
    return module.empty_like(buf.array)


def same_dtype(a: Buffer, b: Buffer, call: str) -> None:
    """Send and receive buffers of one call must share a dtype."""
    if a.dtype != b.dtype:
        raise invalid_argument(
            f"purlin: {call}: send is {a.dtype.name.lower()} but recv is {b.dtype.name.lower()}")


def check_count(buf: Buffer, expected: int, what: str, call: str) -> None:
    """buf must hold exactly expected elements; what explains the rule."""
    if buf.count != expected:
        raise invalid_argument(
            f"purlin: {call}: {what} must have {expected} elements, has {buf.count} (shape {buf.shape})")
