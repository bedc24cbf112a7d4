"""Purlin for Python: NCCL-style collectives over NumPy arrays, torch tensors and CuPy arrays.

    import purlin
    uid = purlin.UniqueId.generate()            # on one rank; share uid.bytes()
    with purlin.Communicator(world_size, rank, uid) as comm:   # device=None: host (CPU)
        comm.all_reduce(x)                      # in place, SUM
        comm.all_gather(x, out)
        y = comm.all_reduce_rmsnorm(x, residual, weight, 1e-6)  # + residual add, RMSNorm: fused
        with purlin.group():                    # launched together
            comm.send(a, peer=1)
            comm.recv(b, peer=1)

libpurlin.so is loaded on first use from PURLIN_LIBRARY, the package's lib/
folder, or the system path (see purlin.load_library).
"""

from ._library import load as _load
from ._library import library_path
from .communicator import Communicator
from .dtypes import DataType
from .epilogues import EpilogueKind
from .errors import (
    Aborted,
    InProgress,
    InternalError,
    InvalidArgument,
    InvalidUsage,
    LibraryNotFound,
    PurlinError,
    RemoteError,
    SystemCallError,
    Timeout,
    UnhandledCudaError,
)
from .group import group
from .ops import PreMulSum, ReduceOp, premul_sum
from .streams import HostStream
from .unique_id import UNIQUE_ID_BYTES, UniqueId

__version__ = "0.1.0"


def load_library() -> str:
    """Loads libpurlin.so now (it is otherwise loaded on first use); returns its path."""
    _load()
    return library_path()


def version() -> int:
    """The library's version code (purlinGetVersion: the NCCL version it implements)."""
    import ctypes

    from . import _library

    code = ctypes.c_int()
    _library.check(_library.load().purlinGetVersion(ctypes.byref(code)), "purlinGetVersion")
    return code.value


SUM = ReduceOp.SUM
PROD = ReduceOp.PROD
MAX = ReduceOp.MAX
MIN = ReduceOp.MIN
AVG = ReduceOp.AVG

__all__ = [
    "Aborted", "AVG", "Communicator", "DataType", "EpilogueKind", "HostStream", "InProgress",
    "InternalError", "InvalidArgument", "InvalidUsage", "LibraryNotFound", "MAX", "MIN", "PROD",
    "PreMulSum", "PurlinError", "ReduceOp", "RemoteError", "SUM", "SystemCallError", "Timeout",
    "UNIQUE_ID_BYTES", "UnhandledCudaError", "UniqueId", "group", "library_path", "load_library",
    "premul_sum", "version",
]
