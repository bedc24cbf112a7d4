"""Making a CUDA device current for the calling thread while a communicator is created.

purlinCommInitRank, like ncclCommInitRank, binds the communicator to the
calling thread's current device. With torch or CuPy already imported their
own device context is used (so their state stays consistent); otherwise the
CUDA driver's primary context of the device is made current directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from typing import Iterator, Tuple

from .errors import UNHANDLED_CUDA_ERROR, InvalidArgument, PurlinError, invalid_argument


@contextlib.contextmanager
def current_device(ordinal: int) -> Iterator[None]:
    """Makes device ordinal current on this thread for the block."""
    if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 0:
        raise invalid_argument(f"purlin: device must be a CUDA ordinal >= 0 or None, not {ordinal!r}")
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if torch is not None and torch.cuda.is_available():
        count, switch = torch.cuda.device_count(), torch.cuda.device
    elif cupy is not None:
        count, switch = cupy.cuda.runtime.getDeviceCount(), cupy.cuda.Device
    else:
        _driver_primary_context(ordinal)
        yield
        return
    if ordinal >= count:
        raise _no_such_device(ordinal, count)
    with switch(ordinal), _primary_context(ordinal):
        yield


@contextlib.contextmanager
def _primary_context(ordinal: int) -> Iterator[None]:
    """The device's primary context current for the block, the thread's previous
    context after it. A framework's switch to the device it already calls current
    can leave no context current (CuPy or torch before any CUDA work), and the
    library then cannot see the device meant."""
    cuda, previous = _driver_primary_context(ordinal)
    try:
        yield
    finally:
        cuda.cuCtxSetCurrent(previous)


def _no_such_device(ordinal: int, count: int) -> InvalidArgument:
    return invalid_argument(f"purlin: device {ordinal} does not exist ({count} CUDA devices)")


def _driver_primary_context(ordinal: int) -> Tuple[ctypes.CDLL, ctypes.c_void_p]:
    """Makes device ordinal's primary context current; returns the driver and the
    context that was current before (None's pointer when none was)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise PurlinError(f"purlin: device={ordinal} needs a CUDA driver: {exc}", UNHANDLED_CUDA_ERROR) from None

    def call(name: str, *args: object) -> None:
        result = getattr(cuda, name)(*args)
        if result != 0:
            raise PurlinError(f"purlin: {name} failed for device {ordinal} (CUresult {result})",
                              UNHANDLED_CUDA_ERROR)

    call("cuInit", 0)
    count = ctypes.c_int()
    call("cuDeviceGetCount", ctypes.byref(count))
    if ordinal >= count.value:
        raise _no_such_device(ordinal, count.value)
    device = ctypes.c_int()
    call("cuDeviceGet", ctypes.byref(device), ordinal)
    previous, context = ctypes.c_void_p(), ctypes.c_void_p()
    call("cuCtxGetCurrent", ctypes.byref(previous))
    call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    call("cuCtxSetCurrent", context)
    return cuda, previous
