"""Communicator: one rank's handle on a group of ranks (purlinComm_t).

Lifecycle and the machinery every collective shares live here: argument
checks common to all calls, choosing the stream, launching, and turning a
failed result code into the PurlinError carrying the library's words. The
collectives themselves are in collectives.py, vcollectives.py, layouts.py and
epilogues.py.

Completion. Calls on device arrays never block the host: they are queued on
the stream (by default the current torch/CuPy stream), exactly like NCCL,
and can be captured into a CUDA graph. Calls on NumPy arrays with the
default stream complete before they return (after the outermost
purlin.group() block when issued inside one); with an explicit HostStream
they return at once and HostStream.synchronize() completes them.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Callable, List, Optional, Sequence, Union

from . import _library
from ._cuda import current_device
from .buffers import Buffer, describe
from .collectives import Collectives
from .dtypes import DataType, scalar_bytes
from .epilogues import EpilogueCollectives
from .errors import INVALID_USAGE, InvalidUsage, invalid_argument
from .group import after_group, in_group
from .ops import Op, PreMulSum, normalize
from .streams import HostStream, current_device_stream, stream_handle
from .unique_id import UniqueId
from .layouts import LayoutCollectives
from .vcollectives import VCollectives

_SCALAR_HOST_IMMEDIATE = 1
_NUM_BUILTIN_OPS = 5  # purlinNumOps: ops below it are built in and never destroyed
_AUTO = object()


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_argument(f"purlin: {name} must be an int, not {value!r}")
    return value


def _prefer_atom(name: str) -> None:
    """Asks for the Atom a communicator needs ("host" or "cuda"), unless PURLIN_ATOM says otherwise.

    The library picks its Atom from PURLIN_ATOM (read with C getenv when it
    first needs a setting, a UniqueId's generation included), and "auto" means
    CUDA wherever a GPU is usable, on the current device or device 0, as
    NCCL: a NumPy communicator on a GPU machine would get the CUDA Atom, which
    refuses host memory, and a GPU communicator in a build or on a machine
    without a usable CUDA Atom would read device pointers on the host. Naming
    the Atom makes the second case a clear init error. The library rereads
    its settings (ncclResetDebugInit) once this sets it. Setting it works for
    the process's first communicator; a process cannot mix host and GPU
    communicators (a limit of the C API).
    """
    if os.environ.get("PURLIN_ATOM", "auto").lower() in ("", "auto"):
        os.environ["PURLIN_ATOM"] = name
        reread = _library.load().ncclResetDebugInit  # NCCL's name: purlin.h has none
        reread.restype, reread.argtypes = None, []
        reread()


class Communicator(Collectives, VCollectives, LayoutCollectives, EpilogueCollectives):
    """One rank of a communicator over world_size ranks.

    Args:
        world_size: number of ranks (processes, or GPUs) in the communicator.
        rank: this process's rank, 0 <= rank < world_size.
        unique_id: the UniqueId (or its 128 bytes) made by one rank and shared with all.
        device: the CUDA device ordinal this rank uses, or None for a host
            (CPU) communicator whose buffers are NumPy arrays.

    The constructor waits until every rank has joined (bounded by PURLIN_TIMEOUT).
    """

    def __init__(self, world_size: int, rank: int, unique_id: Union[UniqueId, bytes],
                 device: Optional[int] = None) -> None:
        self._handle: Optional[int] = None
        world_size = _int(world_size, "world_size")
        rank = _int(rank, "rank")
        if world_size < 1:
            raise invalid_argument(f"purlin: world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise invalid_argument(f"purlin: rank must be in [0, {world_size}), got {rank}")
        if not isinstance(unique_id, UniqueId):
            unique_id = UniqueId.from_bytes(unique_id)
        if device is not None:
            device = _int(device, "device")
        self._world_size = world_size
        self._rank = rank
        self._device = device
        _prefer_atom("host" if device is None else "cuda")
        lib = _library.load()
        handle = ctypes.c_void_p()
        call = f"purlinCommInitRank(rank {rank} of {world_size}, device {device})"
        if device is None:
            result = lib.purlinCommInitRank(ctypes.byref(handle), world_size, unique_id.as_struct(), rank)
        else:
            with current_device(device):
                result = lib.purlinCommInitRank(ctypes.byref(handle), world_size, unique_id.as_struct(), rank)
        _library.check(result, call)
        self._handle = handle.value

    @classmethod
    def from_torch_group(cls, group: Any = None, device: Any = _AUTO) -> "Communicator":
        """A communicator over the ranks of a torch.distributed process group.

        Rank 0 of the group makes the UniqueId; it travels through
        torch.distributed.broadcast_object_list. device defaults to the
        current CUDA device when CUDA is available, else None (host).
        """
        import torch
        import torch.distributed as dist

        rank = dist.get_rank(group)
        world_size = dist.get_world_size(group)
        if device is _AUTO:
            device = torch.cuda.current_device() if torch.cuda.is_available() else None
        payload = [UniqueId.generate().bytes() if rank == 0 else None]
        source = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(payload, src=source, group=group)
        return cls(world_size, rank, UniqueId.from_bytes(payload[0]), device)

    # ---------- properties and lifecycle ----------

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self._rank

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self._world_size

    @property
    def device(self) -> Optional[int]:
        """The CUDA ordinal of this rank, or None for a host communicator."""
        return self._device

    @property
    def handle(self) -> int:
        """The purlinComm_t, for passing to other C code."""
        if self._handle is None:
            raise InvalidUsage("purlin: the communicator is closed or aborted", INVALID_USAGE)
        return self._handle

    def synchronize(self) -> None:
        """Waits until every call launched on this communicator has finished.

        Host communicators use purlinCommSynchronize; device communicators
        synchronize the device through torch or CuPy.
        """
        if self._device is None:
            _library.check(_library.load().purlinCommSynchronize(self.handle),
                           f"purlinCommSynchronize(rank {self._rank})", self._handle)
            return
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.cuda.synchronize(self._device)
            return
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            cupy.cuda.Device(self._device).synchronize()

    def check_async_error(self) -> None:
        """Raises the error a launched call met after it returned, if any (purlinCommGetAsyncError)."""
        code = ctypes.c_int()
        lib = _library.load()
        call = f"purlinCommGetAsyncError(rank {self._rank})"
        _library.check(lib.purlinCommGetAsyncError(self.handle, ctypes.byref(code)), call, self._handle)
        _library.check(code.value, f"a call on rank {self._rank}", self._handle)

    def close(self) -> None:
        """Waits for this rank's work and frees the communicator (purlinCommDestroy)."""
        if self._handle is None:
            return
        handle = self._handle
        try:
            if self._device is None:
                self.synchronize()
        finally:
            self._handle = None
            _library.check(_library.load().purlinCommDestroy(handle), f"purlinCommDestroy(rank {self._rank})")

    def abort(self) -> None:
        """Stops every wait of this communicator at once and frees it (purlinCommAbort)."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        _library.check(_library.load().purlinCommAbort(handle), f"purlinCommAbort(rank {self._rank})")

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()  # peers may still wait on us; do not wait on them

    def __repr__(self) -> str:
        where = "host" if self._device is None else f"cuda:{self._device}"
        state = "closed" if self._handle is None else "open"
        return f"Communicator(rank={self._rank}, world_size={self._world_size}, device={where}, {state})"

    # ---------- machinery shared by the collectives ----------

    def _buffer(self, array: Any, name: str, call: str, writable: bool = False) -> Buffer:
        """describe(array), checked to live where this communicator works."""
        buf = describe(array, name, writable)
        if buf.device != self._device:
            mine = "host memory (device=None)" if self._device is None else f"cuda:{self._device}"
            raise invalid_argument(f"purlin: {call}: {name} is in {buf.where()} but this communicator uses {mine}")
        return buf

    def _peer(self, value: Any, name: str, call: str) -> int:
        value = _int(value, name)
        if not 0 <= value < self._world_size:
            raise invalid_argument(f"purlin: {call}: {name} must be in [0, {self._world_size}), got {value}")
        return value

    def _reduce_op(self, op: Op, dtype: DataType) -> int:
        """The purlinRedOp_t for op; a PreMulSum is created now and destroyed after the launch."""
        op = normalize(op)
        if not isinstance(op, PreMulSum):
            return int(op)
        scalar = ctypes.create_string_buffer(scalar_bytes(op.scalar, dtype))
        created = ctypes.c_int()
        _library.check(_library.load().purlinRedOpCreatePreMulSum(
            ctypes.byref(created), scalar, int(dtype), _SCALAR_HOST_IMMEDIATE, self.handle),
            f"purlinRedOpCreatePreMulSum(scalar {op.scalar}, {dtype.name.lower()})", self._handle)
        return created.value

    def _release_op(self, op: int) -> None:
        if op < _NUM_BUILTIN_OPS or self._handle is None:
            return
        handle = self._handle
        destroy: Callable[[], None] = lambda: _library.check(
            _library.load().purlinRedOpDestroy(op, handle), "purlinRedOpDestroy", handle)
        if in_group():
            after_group(destroy)
        else:
            destroy()

    def _launch(self, call: str, function: Callable[..., int], args: Sequence[Any],
                buffers: List[Buffer], stream: Any) -> None:
        """Calls function(*args, comm, stream) and handles completion as the module doc says."""
        if stream is not None:
            raw_stream: Optional[int] = stream_handle(stream)
        elif self._device is not None and buffers:
            raw_stream = current_device_stream(buffers[0])
        else:
            raw_stream = None
        result = function(*args, self.handle, raw_stream)
        _library.check(result, f"{call} on rank {self._rank}", self._handle)
        if self._device is not None:
            return
        if isinstance(stream, HostStream):
            stream.hold([b.array for b in buffers])
        elif stream is None:
            if in_group():
                arrays = [b.array for b in buffers]  # alive until the group's work is done
                after_group(lambda: (self._complete(f"{call} in a group"), arrays.clear()))
            else:
                self._complete(call)

    def _complete(self, call: str) -> None:
        """Waits for a blocking host call; its failures name the call, not only the wait."""
        _library.check(_library.load().purlinCommSynchronize(self.handle),
                       f"{call} on rank {self._rank} (purlinCommSynchronize)", self._handle)
