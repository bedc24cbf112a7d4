"""Streams: which queue a call runs on.

On a GPU a stream is a cudaStream_t; a call on device arrays defaults to the
current torch (or CuPy) stream of the array's device, so it orders with the
framework's own kernels and can be captured into a CUDA graph. On the host
Atom a stream is a HostStream (purlinHostStreamCreate); NumPy calls default
to the communicator's own queue (a NULL stream).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, List, Optional

from . import _library
from .buffers import KIND_CUPY, KIND_TORCH, Buffer
from .errors import invalid_argument


class HostStream:
    """An ordered queue of host-Atom work (purlinHostStreamCreate).

    Calls given this stream return at once; synchronize() waits for all of
    them. The stream keeps the arrays of its pending calls alive until then.
    """

    def __init__(self) -> None:
        handle = ctypes.c_void_p()
        _library.check(_library.load().purlinHostStreamCreate(ctypes.byref(handle)),
                       "purlinHostStreamCreate")
        self._handle: Optional[int] = handle.value
        self._pending: List[Any] = []

    @property
    def handle(self) -> int:
        """The purlinStream_t value."""
        if self._handle is None:
            raise invalid_argument("purlin: the HostStream is closed")
        return self._handle

    def hold(self, arrays: List[Any]) -> None:
        """Keeps arrays alive until the next synchronize()."""
        self._pending.extend(arrays)

    def synchronize(self) -> None:
        """Waits until every call launched on this stream has finished."""
        _library.check(_library.load().purlinHostStreamSynchronize(self.handle),
                       f"purlinHostStreamSynchronize(stream {self.handle:#x})")
        self._pending.clear()

    def close(self) -> None:
        """Waits for the stream's work, then destroys it."""
        if self._handle is None:
            return
        try:
            self.synchronize()
        finally:
            handle, self._handle = self._handle, None
            _library.check(_library.load().purlinHostStreamDestroy(handle),
                           f"purlinHostStreamDestroy(stream {handle:#x})")

    def __enter__(self) -> "HostStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def stream_handle(stream: Any) -> int:
    """The raw stream value of an explicit stream argument."""
    if isinstance(stream, HostStream):
        return stream.handle
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    raise invalid_argument(
        f"purlin: stream must be a HostStream, torch.cuda.Stream, cupy Stream or int, not {stream!r}")


def current_device_stream(buf: Buffer) -> int:
    """The framework's current stream on the device of buf (what torch or CuPy kernels use now)."""
    if buf.kind == KIND_TORCH:
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(buf.device).cuda_stream)
    if buf.kind == KIND_CUPY:
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(buf.device):
            return int(cupy.cuda.get_current_stream().ptr)
    raise invalid_argument(f"purlin: no current stream for a {buf.kind} array on {buf.where()}")
